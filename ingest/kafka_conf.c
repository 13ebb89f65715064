/*
 * The consumers' configuration (kafka_conf.h). The user's properties go through
 * ingest_kafka_props_apply, which keeps a producer's properties out of a consumer's.
 */
#include "ingest/kafka_conf.h"
#include "ingest/kafka_log.h"

int kafka_conf_set(rd_kafka_conf_t *conf, const char *key, const char *value)
{
    char err[256];
    if (rd_kafka_conf_set(conf, key, value, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
        ds_log_error("kafka: %s=%s: %s", key, value, err);
        return -DS_EUSAGE;
    }
    return 0;
}

static int pairs_set(rd_kafka_conf_t *conf, const struct kafka_conf_pair *pairs, uint32_t count)
{
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < count; i++) {
        rc = kafka_conf_set(conf, pairs[i].key, pairs[i].value);
    }
    return rc;
}

int kafka_conf_consumer(const struct kafka_conf_spec *spec, rd_kafka_t **out)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    int rc = kafka_conf_set(conf, "bootstrap.servers", spec->brokers);
    rc = rc == 0 ? pairs_set(conf, spec->defaults, spec->default_count) : rc;
    char err[512] = "";
    if (rc == 0 && spec->props != NULL &&
        ingest_kafka_props_apply(spec->props, INGEST_KAFKA_CONSUMER, conf, err, sizeof(err)) != 0) {
        ds_log_error("kafka: %s", err);
        rc = -DS_EUSAGE;
    }
    rc = rc == 0 ? pairs_set(conf, spec->fixed, spec->fixed_count) : rc;
    if (rc != 0) {
        rd_kafka_conf_destroy(conf);
        return rc;
    }
    rd_kafka_conf_set_opaque(conf, spec->opaque);
    rd_kafka_conf_set_log_cb(conf, kafka_log);
    if (spec->error_cb != NULL) {
        rd_kafka_conf_set_error_cb(conf, spec->error_cb);
    }
    if (spec->rebalance_cb != NULL) {
        rd_kafka_conf_set_rebalance_cb(conf, spec->rebalance_cb);
    }
    *out = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
    if (*out == NULL) {
        ds_log_error("kafka: cannot create %s: %s", spec->what, err);
        rd_kafka_conf_destroy(conf);
        return -DS_EKAFKA;
    }
    return 0;
}

rd_kafka_resp_err_t
kafka_commit_bounded(rd_kafka_t *rk, const rd_kafka_topic_partition_list_t *list, int timeout_ms)
{
    ASSERT(timeout_ms > 0);
    rd_kafka_queue_t *queue = rd_kafka_queue_new(rk);
    rd_kafka_resp_err_t err = rd_kafka_commit_queue(rk, list, queue, NULL, NULL);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_event_t *ev = rd_kafka_queue_poll(queue, timeout_ms);
        err = ev != NULL ? rd_kafka_event_error(ev) : RD_KAFKA_RESP_ERR__TIMED_OUT;
        const rd_kafka_topic_partition_list_t *done =
            ev != NULL ? rd_kafka_event_topic_partition_list(ev) : NULL;
        for (int i = 0; err == RD_KAFKA_RESP_ERR_NO_ERROR && done != NULL && i < done->cnt; i++) {
            err = done->elems[i].err;
        }
        if (ev != NULL) {
            rd_kafka_event_destroy(ev);
        }
    }
    rd_kafka_queue_destroy(queue);
    return err;
}
