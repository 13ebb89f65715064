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

/* A flush waits in slices of this much, looking at the stop's deadline between them. */
#define DLQ_FLUSH_SLICE_MS 100

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
              ingest_kafka_props_apply(props, INGEST_KAFKA_PRODUCER, conf, err, sizeof(err)) == 0;
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

int kafka_dlq_flush(struct kafka_dlq *q, int timeout_ms, const atomic_uint_least64_t *deadline_ns)
{
    ASSERT(timeout_ms >= 0);
    ASSERT(deadline_ns != NULL);
    uint64_t end = ds_clock_ns() + (uint64_t)timeout_ms * 1000000u;
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR__TIMED_OUT;
    /* In slices, so that a stop requested during the wait shortens it (rd_kafka_flush cannot be
     * interrupted). */
    for (;;) { /* bounded by end */
        uint64_t stop = atomic_load(deadline_ns);
        uint64_t until = stop != 0 && stop < end ? stop : end;
        uint64_t now = ds_clock_ns();
        uint64_t left_ms = until > now ? (until - now + 999999u) / 1000000u : 0;
        int slice_ms = left_ms < DLQ_FLUSH_SLICE_MS ? (int)left_ms : DLQ_FLUSH_SLICE_MS;
        err = rd_kafka_flush(q->rk, slice_ms);
        if (err != RD_KAFKA_RESP_ERR__TIMED_OUT || ds_clock_ns() >= until) {
            break;
        }
    }
    uint64_t failed = q->failed + q->queued;
    q->failed = 0;
    q->queued = 0;
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR || failed > 0) {
        ds_log_error("kafka: dead-letter topic: %llu records failed, flush: %s (the records are in "
                     "the dead-letter file, which rules)",
                     (unsigned long long)failed, rd_kafka_err2str(err));
        return -DS_EKAFKA;
    }
    return 0;
}

void kafka_dlq_destroy(struct kafka_dlq *q, int timeout_ms)
{
    if (q == NULL) {
        return;
    }
    ASSERT(timeout_ms >= 0);
    if (rd_kafka_flush(q->rk, timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        /* An unreachable broker would otherwise hold rd_kafka_destroy until message.timeout.ms
         * (5 minutes); the records are in the dead-letter file. */
        ds_log_warn("kafka: dead-letter topic: %d records not acknowledged at the stop (they are "
                    "in the dead-letter file)",
                    rd_kafka_outq_len(q->rk));
        (void)rd_kafka_purge(q->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    }
    rd_kafka_topic_destroy(q->topic);
    rd_kafka_destroy(q->rk);
    free(q);
}
