/*
 * Private to ingest/: the configuration each consumer of this folder starts from (the node's
 * group consumer and its positions handle, the restore's assigned reader), built in one order:
 * the brokers, the settings the user's properties may change, the user's properties, then the
 * settings that must hold whatever they say; librdkafka's log goes through ours (kafka_log.h),
 * and a refused property or handle is logged the same way for each.
 */
#ifndef DS_INGEST_KAFKA_CONF_H
#define DS_INGEST_KAFKA_CONF_H

#include <librdkafka/rdkafka.h>

#include "ingest/ingest.h"

struct kafka_conf_pair {
    const char *key;
    const char *value;
};

struct kafka_conf_spec {
    const char *brokers;
    const struct kafka_conf_pair *defaults; /* before props: the user may change them */
    uint32_t default_count;
    const struct ingest_kafka_props *props; /* may be NULL */
    const struct kafka_conf_pair *fixed;    /* after props: they hold */
    uint32_t fixed_count;
    const char *what; /* the handle, as a log line names it ("the restore consumer") */
    /* Callbacks, each may be NULL, and their user pointer. */
    void (*error_cb)(rd_kafka_t *rk, int err, const char *reason, void *opaque);
    void (*rebalance_cb)(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *partitions, void *opaque);
    void *opaque;
};

/* One librdkafka property; logs librdkafka's reason and returns -DS_EUSAGE when refused. */
DS_MUST_USE int kafka_conf_set(rd_kafka_conf_t *conf, const char *key, const char *value);
/* A consumer handle configured as spec says into *out (the caller destroys it; its queue is
 * not yet redirected, rd_kafka_poll_set_consumer). Returns 0, -DS_EUSAGE (a refused property)
 * or -DS_EKAFKA (librdkafka refused the handle), the reason logged. */
DS_MUST_USE int kafka_conf_consumer(const struct kafka_conf_spec *spec, rd_kafka_t **out);

/* Commits list through rk and waits at most timeout_ms (> 0) for the answer: the commit's error
 * (or the first partition's), or RD_KAFKA_RESP_ERR__TIMED_OUT (the commit may still land
 * later). */
rd_kafka_resp_err_t
kafka_commit_bounded(rd_kafka_t *rk, const rd_kafka_topic_partition_list_t *list, int timeout_ms);

#endif /* DS_INGEST_KAFKA_CONF_H */
