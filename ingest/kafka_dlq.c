/*
 * The dead-letter topic producer (see kafka_dlq.h). Idempotent, so a retried send is not
 * duplicated by the client itself; a node that crashes after writing dead letters but before
 * committing replays those events and sends their records again (at least once on the topic,
 * exactly once in the file, which recovery cuts back to the committed length).
 * Rejected: producing from the consumer thread (the record must be the one the file holds, and
 * the file is written by the writer thread).
 */
#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/kafka_dlq.h"
#include "ingest/kafka_log.h"

struct kafka_dlq {
    rd_kafka_t *rk;
    rd_kafka_topic_t *topic;
    uint64_t failed; /* delivery failures since the last flush */
    uint64_t queued; /* records that could not even be queued */
};

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    struct kafka_dlq *q = opaque;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        q->failed++;
    }
}

int kafka_dlq_create(const char *brokers, const char *topic, const struct ingest_kafka_props *props,
                     struct kafka_dlq **out)
{
    struct kafka_dlq *q = calloc(1, sizeof(*q));
    if (q == NULL) {
        return -ENOMEM;
    }
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    bool ok = rd_kafka_conf_set(conf, "bootstrap.servers", brokers, err, sizeof(err)) ==
                  RD_KAFKA_CONF_OK &&
              rd_kafka_conf_set(conf, "enable.idempotence", "true", err, sizeof(err)) ==
                  RD_KAFKA_CONF_OK &&
              rd_kafka_conf_set(conf, "client.id", "dayshard-dlq", err, sizeof(err)) ==
                  RD_KAFKA_CONF_OK &&
              ingest_kafka_props_apply(props, conf, err, sizeof(err)) == 0;
    if (!ok) {
        ds_log_error("kafka: dead-letter producer: %s", err);
        rd_kafka_conf_destroy(conf);
        free(q);
        return -DS_EUSAGE;
    }
    rd_kafka_conf_set_opaque(conf, q);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_log_cb(conf, kafka_log);
    q->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    if (q->rk == NULL) {
        ds_log_error("kafka: cannot create the dead-letter producer: %s", err);
        rd_kafka_conf_destroy(conf);
        free(q);
        return -DS_EKAFKA;
    }
    q->topic = rd_kafka_topic_new(q->rk, topic, NULL);
    if (q->topic == NULL) {
        ds_log_error("kafka: dead-letter topic %s: %s", topic,
                     rd_kafka_err2str(rd_kafka_last_error()));
        rd_kafka_destroy(q->rk);
        free(q);
        return -DS_EKAFKA;
    }
    *out = q;
    return 0;
}

void kafka_dlq_send(struct kafka_dlq *q, const char *record, size_t len, int32_t partition)
{
    char key[16];
    int key_len = snprintf(key, sizeof(key), "%d", partition);
    ASSERT(key_len > 0);
    for (int attempt = 0; attempt < 1000; attempt++) {
        if (rd_kafka_produce(q->topic, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY, (void *)record,
                             len, key, (size_t)key_len, NULL) == 0) {
            rd_kafka_poll(q->rk, 0);
            return;
        }
        if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            break;
        }
        rd_kafka_poll(q->rk, 10);
    }
    q->queued++;
}

int kafka_dlq_flush(struct kafka_dlq *q, int timeout_ms)
{
    rd_kafka_resp_err_t err = rd_kafka_flush(q->rk, timeout_ms);
    uint64_t failed = q->failed + q->queued;
    q->failed = 0;
    q->queued = 0;
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR || failed > 0) {
        ds_log_error("kafka: dead-letter topic: %llu records failed, flush: %s (the records are in "
                     "the dead-letter file; offsets are not committed to Kafka this round)",
                     (unsigned long long)failed, rd_kafka_err2str(err));
        return -DS_EKAFKA;
    }
    return 0;
}

void kafka_dlq_destroy(struct kafka_dlq *q)
{
    if (q == NULL) {
        return;
    }
    rd_kafka_flush(q->rk, 5000);
    rd_kafka_topic_destroy(q->topic);
    rd_kafka_destroy(q->rk);
    free(q);
}
