/*
 * ingest_node_run's back-pressure across a rebalance: a node paused by its follower (the
 * should_pause callback) is in a group when a second member joins, and the pause lifts while the
 * node holds no partition (between the revocation and the new assignment). librdkafka keeps a
 * partition's pause across a revocation and a new assignment, so the node must resume what it
 * is assigned: it reads what is sent to its partitions afterwards, in both data models. The
 * broker is librdkafka's mock cluster in this process, with a round-trip time that makes the
 * rejoin outlast several of the node's loops, so the pause lifts inside that window.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "common/common.h"
#include "ingest/ingest.h"
#include "storage/model.h"
#include "tests/support/tempdir.h"

#define TOPIC "orders"
#define PARTITIONS 4
#define FIRST_EVENTS 200
#define LATER_PER_PARTITION 50
#define WAIT_NS 30000000000ull
#define STEP_NS 20000000ull
#define RTT_MS 100

struct member {
    struct ingest_node_config cfg;
    struct ingest_kafka_props props;
    struct ingest_node_stats stats;
    struct ingest_node_watch *watch;
    char data[300];
    pthread_t thread;
    volatile int stop;
    int rc;
    _Atomic uint64_t durable;
    _Atomic bool pausing; /* paused until the watch's generation moves past paused_at */
    _Atomic uint64_t paused_at;
    _Atomic int held;   /* times should_pause answered 1: the second implies the first pause held */
    _Atomic int lifted; /* should_pause answered 0 after the generation moved */
};

struct fixture {
    char dir[256];
    rd_kafka_t *mock_handle;
    rd_kafka_mock_cluster_t *mock;
    char brokers[256];
    rd_kafka_t *producer;
    rd_kafka_topic_t *topic;
    struct member a, b;
};

static void on_commit(const struct ingest_node_progress *progress, void *user)
{
    struct member *m = user;
    atomic_store(&m->durable, progress->events_durable);
}

static int should_pause(void *user)
{
    struct member *m = user;
    if (!atomic_load(&m->pausing)) {
        return 0;
    }
    if (ingest_node_watch_generation(m->watch) == atomic_load(&m->paused_at)) {
        atomic_fetch_add(&m->held, 1);
        return 1;
    }
    atomic_store(&m->lifted, 1);
    return 0;
}

static void *member_main(void *arg)
{
    struct member *m = arg;
    m->rc = ingest_node_run(&m->cfg, &m->stats, &m->stop);
    return NULL;
}

static void member_start(struct fixture *f, struct member *m, const char *name, int model)
{
    snprintf(m->data, sizeof(m->data), "%s/%s", f->dir, name);
    assert_int_equal(ingest_node_watch_create(&m->watch), 0);
    ingest_node_config_defaults(&m->cfg);
    m->cfg.brokers = f->brokers;
    m->cfg.topic = TOPIC;
    m->cfg.group = "pause-test";
    m->cfg.data_dir = m->data;
    m->cfg.model = model;
    /* The group settings the node tests use: the mock's rebalance waits out a session. */
    assert_int_equal(ingest_kafka_props_add(&m->props, "session.timeout.ms=6000"), 0);
    assert_int_equal(ingest_kafka_props_add(&m->props, "heartbeat.interval.ms=1000"), 0);
    m->cfg.props = &m->props;
    m->cfg.commit_interval_ms = 20;
    m->cfg.no_shardmap_topic = true;
    m->cfg.on_commit = on_commit;
    m->cfg.should_pause = should_pause;
    m->cfg.observer_user = m;
    m->cfg.watch = m->watch;
    assert_int_equal(pthread_create(&m->thread, NULL, member_main, m), 0);
}

static void member_stop(struct member *m)
{
    m->stop = 1;
    assert_int_equal(pthread_join(m->thread, NULL), 0);
    assert_int_equal(m->rc, 0);
    ingest_node_watch_destroy(m->watch);
}

struct assigned {
    int32_t partitions[PARTITIONS];
    int count;
};

static int add_partition(int32_t partition, int64_t high_watermark, int64_t stored_from, void *user)
{
    (void)high_watermark;
    (void)stored_from;
    struct assigned *a = user;
    if (a->count < PARTITIONS) {
        a->partitions[a->count++] = partition;
    }
    return 0;
}

/* The member's assignment once it is consuming; count 0 while it is not. */
static struct assigned assignment_of(struct member *m)
{
    struct assigned a = {.count = 0};
    uint64_t generation;
    if (ingest_node_watch_positions(m->watch, 5000, add_partition, &a, &generation) < 0) {
        a.count = 0;
    }
    return a;
}

static void produce(struct fixture *f, int32_t partition, int order_id)
{
    char line[200];
    int len = snprintf(line, sizeof(line),
                       "{\"order_id\": %d, \"customer_id\": %d, \"ts\": "
                       "\"2026-01-21T10:00:00Z\", \"status\": \"paid\", \"amount\": 1.5}",
                       order_id, order_id % 7 + 1);
    while (rd_kafka_produce(f->topic, partition, RD_KAFKA_MSG_F_COPY, line, (size_t)len, NULL, 0,
                            NULL) != 0) {
        assert_int_equal(rd_kafka_last_error(), RD_KAFKA_RESP_ERR__QUEUE_FULL);
        rd_kafka_poll(f->producer, 10);
    }
}

static void produce_flush(struct fixture *f)
{
    assert_int_equal(rd_kafka_flush(f->producer, 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
}

/* The states the test waits for, as ds_wait_until's tests. */
struct durable_wait {
    struct member *m;
    uint64_t events;
};

static bool durable_reached(void *user)
{
    const struct durable_wait *w = user;
    return atomic_load(&w->m->durable) >= w->events;
}

static bool pause_held(void *user)
{
    struct member *m = user;
    return atomic_load(&m->held) >= 2;
}

struct split {
    struct member *a, *b;
    struct assigned in_a, in_b;
};

/* Both members consume and share the topic's partitions. */
static bool split_settled(void *user)
{
    struct split *s = user;
    s->in_a = assignment_of(s->a);
    s->in_b = assignment_of(s->b);
    return s->in_a.count > 0 && s->in_b.count > 0 && s->in_a.count + s->in_b.count == PARTITIONS;
}

/* Waits until m has made at least `events` events durable; false at the deadline. */
static bool wait_durable(struct member *m, uint64_t events)
{
    struct durable_wait w = {.m = m, .events = events};
    return ds_wait_until(durable_reached, &w, ds_clock_ns() + WAIT_NS, STEP_NS);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(test_tempdir_make(f->dir, sizeof(f->dir)), 0);
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    assert_int_equal(rd_kafka_conf_set(conf, "log_level", "0", err, sizeof(err)), RD_KAFKA_CONF_OK);
    f->mock_handle = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    assert_non_null(f->mock_handle);
    f->mock = rd_kafka_mock_cluster_new(f->mock_handle, 1);
    assert_non_null(f->mock);
    snprintf(f->brokers, sizeof(f->brokers), "%s", rd_kafka_mock_cluster_bootstraps(f->mock));
    assert_int_equal(rd_kafka_mock_topic_create(f->mock, TOPIC, PARTITIONS, 1),
                     RD_KAFKA_RESP_ERR_NO_ERROR);
    conf = rd_kafka_conf_new();
    assert_int_equal(rd_kafka_conf_set(conf, "bootstrap.servers", f->brokers, err, sizeof(err)),
                     RD_KAFKA_CONF_OK);
    assert_int_equal(rd_kafka_conf_set(conf, "log_level", "0", err, sizeof(err)), RD_KAFKA_CONF_OK);
    f->producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    assert_non_null(f->producer);
    f->topic = rd_kafka_topic_new(f->producer, TOPIC, NULL);
    assert_non_null(f->topic);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    rd_kafka_topic_destroy(f->topic);
    rd_kafka_destroy(f->producer);
    rd_kafka_mock_cluster_destroy(f->mock);
    rd_kafka_destroy(f->mock_handle);
    test_tempdir_remove(f->dir);
    free(f);
    return 0;
}

static void resumes_after_rebalance(void **state, int model)
{
    struct fixture *f = *state;
    struct member *a = &f->a;
    struct member *b = &f->b;
    member_start(f, a, "a", model);
    for (int i = 0; i < FIRST_EVENTS; i++) {
        produce(f, i % PARTITIONS, i + 1);
    }
    produce_flush(f);
    assert_true(wait_durable(a, FIRST_EVENTS));

    /* A pauses; the broker slows down so that the rejoin B causes spans many of A's loops. */
    atomic_store(&a->paused_at, ingest_node_watch_generation(a->watch));
    atomic_store(&a->pausing, true);
    assert_true(ds_wait_until(pause_held, a, ds_clock_ns() + WAIT_NS, STEP_NS));
    assert_int_equal(rd_kafka_mock_broker_set_rtt(f->mock, 1, RTT_MS), RD_KAFKA_RESP_ERR_NO_ERROR);
    member_start(f, b, "b", model);

    struct split split = {.a = a, .b = b};
    (void)ds_wait_until(split_settled, &split, ds_clock_ns() + WAIT_NS, STEP_NS);
    struct assigned in_a = split.in_a;
    assert_int_equal(in_a.count + split.in_b.count, PARTITIONS);
    assert_true(in_a.count > 0);
    assert_true(atomic_load(&a->lifted)); /* the pause lifted after the revocation */
    assert_int_equal(rd_kafka_mock_broker_set_rtt(f->mock, 1, 0), RD_KAFKA_RESP_ERR_NO_ERROR);

    /* What is sent to A's partitions now must reach A's disk. */
    uint64_t before = atomic_load(&a->durable);
    for (int k = 0; k < in_a.count; k++) {
        for (int i = 0; i < LATER_PER_PARTITION; i++) {
            produce(f, in_a.partitions[k], 100000 + k * 1000 + i);
        }
    }
    produce_flush(f);
    uint64_t want = before + (uint64_t)(in_a.count * LATER_PER_PARTITION);
    bool reached = wait_durable(a, want);
    if (!reached) {
        print_error("node A: %llu events durable, want %llu: its partitions stayed paused\n",
                    (unsigned long long)atomic_load(&a->durable), (unsigned long long)want);
    }
    member_stop(b);
    member_stop(a);
    assert_true(reached);
}

static void test_orders_model_resumes_after_rebalance(void **state)
{
    resumes_after_rebalance(state, STORAGE_MODEL_ORDERS);
}

static void test_events_model_resumes_after_rebalance(void **state)
{
    resumes_after_rebalance(state, STORAGE_MODEL_EVENTS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_orders_model_resumes_after_rebalance, setup, teardown),
        cmocka_unit_test_setup_teardown(test_events_model_resumes_after_rebalance, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
