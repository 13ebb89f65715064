/*
 * The shard map topic (see shardmap_topic.h): one producer handle that publishes growths and
 * one consumer handle assigned every partition of the topic from the beginning, never
 * committing (each reader wants the whole history, merged by maximum, on every start).
 *
 * Invariants: fn is only called with a valid day and a count in 1..SHARD_COUNT_MAX (anything
 * else on the topic is logged once per message and skipped: another tool may write there);
 * merging never lowers a count; a count above the map's is durable before merge returns.
 *
 * Rejected: a consumer group for the readers (every reader needs every message, and a group
 * would split the partitions between them); the Admin API's DescribeConfigs to check the
 * cleanup policy (a warning at creation is enough: an uncompacted topic still works, it only
 * grows by one small message per growth).
 */
#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ingest/kafka_log.h"
#include "ingest/shardmap_topic.h"

#define TOPIC_NAME_BYTES_MAX 512u
/* Partitions of the map topic read at most (it has one in every deployment we write). */
#define TOPIC_PARTITIONS_MAX 64
#define TOPIC_BATCH 256u
#define TOPIC_METADATA_TIMEOUT_MS 5000
#define TOPIC_CREATE_TIMEOUT_MS 10000
/* A topic that did not exist at start is looked for again this often. */
#define TOPIC_RECHECK_NS (5000ull * 1000000u)
#define TOPIC_VALUE_BYTES_MAX (256u + SHARD_GROWTH_REASON_BYTES)

struct shardmap_topic {
    char name[TOPIC_NAME_BYTES_MAX];
    char origin[128]; /* "host:pid", named in what this handle publishes */
    rd_kafka_t *producer;
    rd_kafka_topic_t *topic;
    rd_kafka_t *consumer;
    rd_kafka_queue_t *queue;
    int partitions; /* assigned; 0 until the topic is found */
    uint64_t last_check_ns;
    uint64_t failed; /* delivery failures, logged as they happen */
};

static void topic_on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    struct shardmap_topic *t = opaque;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        t->failed++;
        ds_log_warn("shard map topic %s: a growth was not delivered: %s (other nodes learn it "
                    "at the next growth or restart of this node)",
                    t->name, rd_kafka_err2str(m->err));
    }
}

static rd_kafka_t *topic_client(const char *brokers, rd_kafka_type_t type, const char *group,
                                const struct ingest_kafka_props *props, struct shardmap_topic *t)
{
    char err[512] = "";
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    bool ok =
        rd_kafka_conf_set(conf, "bootstrap.servers", brokers, err, sizeof(err)) == RD_KAFKA_CONF_OK;
    ok = ok && ingest_kafka_props_apply(
                   props, type == RD_KAFKA_PRODUCER ? INGEST_KAFKA_PRODUCER : INGEST_KAFKA_CONSUMER,
                   conf, err, sizeof(err)) == 0;
    if (ok && type == RD_KAFKA_CONSUMER) {
        ok = rd_kafka_conf_set(conf, "group.id", group, err, sizeof(err)) == RD_KAFKA_CONF_OK &&
             rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof(err)) ==
                 RD_KAFKA_CONF_OK &&
             rd_kafka_conf_set(conf, "client.id", "dayshard-shardmap", err, sizeof(err)) ==
                 RD_KAFKA_CONF_OK;
    }
    if (ok && type == RD_KAFKA_PRODUCER) {
        ok = rd_kafka_conf_set(conf, "client.id", "dayshard-shardmap", err, sizeof(err)) ==
                 RD_KAFKA_CONF_OK &&
             rd_kafka_conf_set(conf, "linger.ms", "0", err, sizeof(err)) == RD_KAFKA_CONF_OK;
        rd_kafka_conf_set_dr_msg_cb(conf, topic_on_delivery);
    }
    if (!ok) {
        ds_log_error("shard map topic: %s", err);
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rd_kafka_conf_set_opaque(conf, t);
    rd_kafka_conf_set_log_cb(conf, kafka_log);
    rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof(err));
    if (rk == NULL) {
        ds_log_error("shard map topic: cannot create a client: %s", err);
        rd_kafka_conf_destroy(conf);
    }
    return rk;
}

/* Partitions of the topic per the cluster's metadata; 0 when it does not exist. */
static int topic_partition_count(struct shardmap_topic *t)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err =
        rd_kafka_metadata(t->producer, 0, t->topic, &md, TOPIC_METADATA_TIMEOUT_MS);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        return -DS_EKAFKA;
    }
    int count = 0;
    if (md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        count = md->topics[0].partition_cnt;
    }
    rd_kafka_metadata_destroy(md);
    return count;
}

/* Asks the cluster to create the topic compacted, one partition. The embedded broker does not
 * implement CreateTopics (it creates the topic itself at start). */
static void topic_create(struct shardmap_topic *t)
{
    char err[256] = "";
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(t->name, 1, -1, err, sizeof(err));
    if (nt == NULL) {
        ds_log_warn("shard map topic %s: %s", t->name, err);
        return;
    }
    (void)rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact");
    rd_kafka_queue_t *queue = rd_kafka_queue_new(t->producer);
    rd_kafka_CreateTopics(t->producer, &nt, 1, NULL, queue);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(queue, TOPIC_CREATE_TIMEOUT_MS);
    const char *why = "no answer";
    rd_kafka_resp_err_t code = RD_KAFKA_RESP_ERR__TIMED_OUT;
    const rd_kafka_CreateTopics_result_t *res =
        ev != NULL ? rd_kafka_event_CreateTopics_result(ev) : NULL;
    if (ev != NULL && rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        code = rd_kafka_event_error(ev);
        why = rd_kafka_event_error_string(ev);
    } else if (res != NULL) {
        size_t n = 0;
        const rd_kafka_topic_result_t **results = rd_kafka_CreateTopics_result_topics(res, &n);
        code = n == 1 ? rd_kafka_topic_result_error(results[0]) : RD_KAFKA_RESP_ERR__FAIL;
        why = n == 1 && rd_kafka_topic_result_error_string(results[0]) != NULL
                  ? rd_kafka_topic_result_error_string(results[0])
                  : rd_kafka_err2str(code);
    }
    if (code == RD_KAFKA_RESP_ERR_NO_ERROR || code == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
        ds_log_info("shard map topic %s: created (compacted)", t->name);
    } else {
        ds_log_warn("shard map topic %s: cannot create it: %s; nodes share growth only once it "
                    "exists (create it with cleanup.policy=compact)",
                    t->name, why);
    }
    if (ev != NULL) {
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_queue_destroy(queue);
    rd_kafka_NewTopic_destroy(nt);
}

/* Finds the topic (creating it once, at open) and assigns every partition from the start. */
static int topic_assign(struct shardmap_topic *t, bool create)
{
    t->last_check_ns = ds_clock_ns();
    int count = topic_partition_count(t);
    if (count == 0 && create) {
        topic_create(t);
        count = topic_partition_count(t);
    }
    if (count <= 0) {
        return count;
    }
    count = count < TOPIC_PARTITIONS_MAX ? count : TOPIC_PARTITIONS_MAX;
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(count);
    for (int p = 0; p < count; p++) {
        rd_kafka_topic_partition_list_add(list, t->name, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    }
    rd_kafka_resp_err_t err = rd_kafka_assign(t->consumer, list);
    rd_kafka_topic_partition_list_destroy(list);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        ds_log_warn("shard map topic %s: assign: %s", t->name, rd_kafka_err2str(err));
        return -DS_EKAFKA;
    }
    t->partitions = count;
    return count;
}

int shardmap_topic_open(const char *brokers, const char *data_topic, const char *group,
                        const struct ingest_kafka_props *props, struct shardmap_topic **out)
{
    ASSERT(brokers != NULL && data_topic != NULL && group != NULL);
    ASSERT(out != NULL);
    struct shardmap_topic *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return -ENOMEM;
    }
    char host[64] = "";
    (void)gethostname(host, sizeof(host) - 1);
    snprintf(t->origin, sizeof(t->origin), "%s:%d", host, (int)getpid());
    char reader_group[TOPIC_NAME_BYTES_MAX];
    int n = snprintf(t->name, sizeof(t->name), "%s%s", data_topic, SHARDMAP_TOPIC_SUFFIX);
    int m = snprintf(reader_group, sizeof(reader_group), "%s.dayshard-shardmap", group);
    if (n < 0 || (size_t)n >= sizeof(t->name) || m < 0 || (size_t)m >= sizeof(reader_group)) {
        free(t);
        return -DS_EUSAGE;
    }
    t->producer = topic_client(brokers, RD_KAFKA_PRODUCER, NULL, props, t);
    t->consumer = t->producer != NULL
                      ? topic_client(brokers, RD_KAFKA_CONSUMER, reader_group, props, t)
                      : NULL;
    t->topic = t->consumer != NULL ? rd_kafka_topic_new(t->producer, t->name, NULL) : NULL;
    if (t->topic == NULL) {
        shardmap_topic_close(t);
        return -DS_EKAFKA;
    }
    t->queue = rd_kafka_queue_get_consumer(t->consumer);
    if (t->queue == NULL) {
        t->queue = rd_kafka_queue_get_main(t->consumer);
    }
    if (topic_assign(t, true) == 0) {
        ds_log_warn("shard map topic %s does not exist: growth stays local until it does", t->name);
    }
    *out = t;
    return 0;
}

void shardmap_topic_close(struct shardmap_topic *t)
{
    if (t == NULL) {
        return;
    }
    if (t->queue != NULL) {
        rd_kafka_queue_destroy(t->queue);
    }
    if (t->consumer != NULL) {
        (void)rd_kafka_assign(t->consumer, NULL);
        rd_kafka_destroy(t->consumer);
    }
    if (t->producer != NULL) {
        (void)rd_kafka_flush(t->producer, 2000);
    }
    if (t->topic != NULL) {
        rd_kafka_topic_destroy(t->topic);
    }
    if (t->producer != NULL) {
        rd_kafka_destroy(t->producer);
    }
    free(t);
}

const char *shardmap_topic_name(const struct shardmap_topic *t)
{
    return t->name;
}

/* Parses a message: key "YYYY-MM-DD", value holding "shards":S; *own tells whether this
 * handle published it ("from" is its origin). */
static bool topic_message_parse(const struct shardmap_topic *t, const rd_kafka_message_t *m,
                                int32_t *day, uint32_t *count, bool *own)
{
    if (m->key == NULL || m->key_len != DS_DATE_TEXT_SIZE - 1 || m->payload == NULL ||
        m->len == 0 || m->len > TOPIC_VALUE_BYTES_MAX) {
        return false;
    }
    if (ds_date_parse(m->key, m->key_len, day) != 0) {
        return false;
    }
    char value[TOPIC_VALUE_BYTES_MAX + 1];
    memcpy(value, m->payload, m->len);
    value[m->len] = '\0';
    const char *at = strstr(value, "\"shards\":");
    if (at == NULL) {
        return false;
    }
    char *end = NULL;
    unsigned long v = strtoul(at + strlen("\"shards\":"), &end, 10);
    if (end == at + strlen("\"shards\":") || v == 0 || v > SHARD_COUNT_MAX) {
        return false;
    }
    *count = (uint32_t)v;
    const char *from = strstr(value, "\"from\":\"");
    size_t origin_len = strlen(t->origin);
    from = from != NULL ? from + strlen("\"from\":\"") : NULL;
    *own = from != NULL && strncmp(from, t->origin, origin_len) == 0 && from[origin_len] == '"';
    return true;
}

/* Passes one consumed message on; returns 1 when it was a message of the topic. */
static int topic_take(struct shardmap_topic *t, const rd_kafka_message_t *m, shardmap_topic_fn fn,
                      void *user)
{
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        return 0;
    }
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        ds_log_warn("shard map topic %s: %s", t->name, rd_kafka_message_errstr(m));
        return 0;
    }
    int32_t day = 0;
    uint32_t count = 0;
    bool own = false;
    if (!topic_message_parse(t, m, &day, &count, &own)) {
        ds_log_warn("shard map topic %s: skipping a message that is not a shard count "
                    "(partition %d, offset %lld)",
                    t->name, (int)m->partition, (long long)m->offset);
        return 1;
    }
    fn(day, count, own, user);
    return 1;
}

int shardmap_topic_poll(struct shardmap_topic *t, shardmap_topic_fn fn, void *user)
{
    ASSERT(t != NULL && fn != NULL);
    rd_kafka_poll(t->producer, 0);
    if (t->partitions == 0) {
        if (ds_clock_ns() - t->last_check_ns < TOPIC_RECHECK_NS || topic_assign(t, false) <= 0) {
            return 0;
        }
        ds_log_info("shard map topic %s: found, following it", t->name);
    }
    rd_kafka_message_t *msgs[TOPIC_BATCH];
    ssize_t got = rd_kafka_consume_batch_queue(t->queue, 0, msgs, TOPIC_BATCH);
    int taken = 0;
    for (ssize_t i = 0; i < got; i++) {
        taken += topic_take(t, msgs[i], fn, user);
        rd_kafka_message_destroy(msgs[i]);
    }
    return taken;
}

/* True when every assigned partition's position reached its high watermark in ends[]. */
static bool topic_caught_up(struct shardmap_topic *t, const int64_t *ends)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(t->partitions);
    for (int p = 0; p < t->partitions; p++) {
        rd_kafka_topic_partition_list_add(list, t->name, p);
    }
    bool done = rd_kafka_position(t->consumer, list) == RD_KAFKA_RESP_ERR_NO_ERROR;
    for (int p = 0; done && p < t->partitions; p++) {
        int64_t at = list->elems[p].offset;
        done = ends[p] <= 0 || (at >= 0 && at >= ends[p]);
    }
    rd_kafka_topic_partition_list_destroy(list);
    return done;
}

int shardmap_topic_catch_up(struct shardmap_topic *t, int timeout_ms, shardmap_topic_fn fn,
                            void *user)
{
    ASSERT(t != NULL && fn != NULL && timeout_ms > 0);
    if (t->partitions == 0) {
        return 0;
    }
    int64_t ends[TOPIC_PARTITIONS_MAX];
    for (int p = 0; p < t->partitions; p++) {
        int64_t low = 0;
        ends[p] = -1;
        if (rd_kafka_query_watermark_offsets(t->consumer, t->name, p, &low, &ends[p], timeout_ms) !=
            RD_KAFKA_RESP_ERR_NO_ERROR) {
            ds_log_warn("shard map topic %s: cannot read its end offsets", t->name);
            return -DS_EKAFKA;
        }
    }
    uint64_t deadline = ds_clock_ns() + (uint64_t)timeout_ms * 1000000u;
    int taken = 0;
    while (!topic_caught_up(t, ends)) { /* bounded by the deadline */
        if (ds_clock_ns() >= deadline) {
            ds_log_warn("shard map topic %s: not read to its end within %d ms", t->name,
                        timeout_ms);
            return -DS_EKAFKA;
        }
        rd_kafka_message_t *msgs[TOPIC_BATCH];
        ssize_t got = rd_kafka_consume_batch_queue(t->queue, 50, msgs, TOPIC_BATCH);
        for (ssize_t i = 0; i < got; i++) {
            taken += topic_take(t, msgs[i], fn, user);
            rd_kafka_message_destroy(msgs[i]);
        }
    }
    return taken;
}

void shardmap_topic_publish(struct shardmap_topic *t, int32_t day, uint32_t shard_count,
                            int64_t at_ms, const char *reason)
{
    ASSERT(t != NULL);
    ASSERT(shard_count >= 1 && shard_count <= SHARD_COUNT_MAX);
    char key[DS_DATE_TEXT_SIZE];
    char at[DS_TS_TEXT_SIZE];
    ds_date_format(day, key);
    ds_ts_format(at_ms, at);
    char value[TOPIC_VALUE_BYTES_MAX];
    int n =
        snprintf(value, sizeof(value),
                 "{\"day\":\"%s\",\"shards\":%u,\"at\":\"%s\",\"reason\":\"%s\",\"from\":\"%s\"}",
                 key, shard_count, at, reason, t->origin);
    ASSERT(n > 0 && (size_t)n < sizeof(value));
    if (rd_kafka_produce(t->topic, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY, value, (size_t)n,
                         key, DS_DATE_TEXT_SIZE - 1, NULL) != 0) {
        ds_log_warn("shard map topic %s: cannot queue the growth of %s: %s", t->name, key,
                    rd_kafka_err2str(rd_kafka_last_error()));
    }
    rd_kafka_poll(t->producer, 0);
}

int shardmap_topic_merge(struct shard_map *map, int32_t day, uint32_t shard_count)
{
    ASSERT(map != NULL);
    ASSERT(shard_count >= 1 && shard_count <= SHARD_COUNT_MAX);
    int known = shard_map_ensure(map, day);
    if (known < 0) {
        return known;
    }
    if ((uint32_t)known >= shard_count) {
        /* A new day got the base count: durable before any event of it is routed (the
         * router syncs a dirty map). */
        return 0;
    }
    int rc = shard_map_grow_sync(map, day, shard_count);
    return rc == 0 ? 1 : rc;
}

/* ---- the producer's follower --------------------------------------------------------------- */

/* A follower looks at the topic at most this often (the shards callback runs per event). */
#define FOLLOWER_POLL_NS (100ull * 1000000u)

struct ingest_shardmap_follower {
    struct shardmap_topic *topic;
    struct shard_map *map; /* in memory only */
    uint64_t last_poll_ns;
};

static void follower_take(int32_t day, uint32_t count, bool own, void *user)
{
    (void)own;
    struct ingest_shardmap_follower *f = user;
    int rc = shardmap_topic_merge(f->map, day, count);
    if (rc < 0) {
        ds_log_warn("shard map topic: %s", ds_strerror(rc));
    }
}

int ingest_shardmap_follower_open(const char *brokers, const char *topic,
                                  const struct ingest_kafka_props *props, uint32_t base_shards,
                                  struct ingest_shardmap_follower **out)
{
    ASSERT(brokers != NULL && topic != NULL && out != NULL);
    ASSERT(base_shards >= 1 && base_shards <= SHARD_COUNT_MAX);
    struct ingest_shardmap_follower *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        return -ENOMEM;
    }
    int rc = shard_map_open(NULL, base_shards, 0, &f->map);
    rc = rc == 0 ? shardmap_topic_open(brokers, topic, "dayshard-produce", props, &f->topic) : rc;
    if (rc != 0) {
        ingest_shardmap_follower_close(f);
        return rc;
    }
    int read = shardmap_topic_catch_up(f->topic, SHARDMAP_TOPIC_CATCH_UP_MS, follower_take, f);
    ds_log_info("shard map topic %s: %d growths read, %zu days known",
                shardmap_topic_name(f->topic), read > 0 ? read : 0, shard_map_day_count(f->map));
    f->last_poll_ns = ds_clock_ns();
    *out = f;
    return 0;
}

uint32_t ingest_shardmap_follower_shards(int32_t day, void *user)
{
    struct ingest_shardmap_follower *f = user;
    uint64_t now = ds_clock_ns();
    if (now - f->last_poll_ns >= FOLLOWER_POLL_NS) {
        f->last_poll_ns = now;
        (void)shardmap_topic_poll(f->topic, follower_take, f);
    }
    return shard_map_get(f->map, day);
}

void ingest_shardmap_follower_close(struct ingest_shardmap_follower *f)
{
    if (f == NULL) {
        return;
    }
    shardmap_topic_close(f->topic);
    shard_map_close(f->map);
    free(f);
}
