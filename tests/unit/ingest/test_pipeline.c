/*
 * Unit tests of ingest/pipeline.c and ingest/stage.c as far as the event's own fields go: what
 * `dayshard ingest` stores is what the line said, version and items included, read
 * back from the committed blocks with storage_partition_scan. Also: a stream whose items pass
 * one batch's item space (STAGE_ITEMS_BYTES) is stored whole, each event with its own items,
 * since the stage hands a batch over early rather than overflow it. And: a batch of bad
 * messages alone (no event after it, as on a quiet topic) is committed within the commit
 * interval, its dead letters whole in the file and its source offsets durable.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ingest/ingest.h"
#include "ingest/stage.h"
#include "shard/shard.h"
#include "storage/storage.h"
#include "tests/support/tempdir.h"

#define PIPE_SHARDS 1u
/* Enough events with 100 items each (4,201 canonical bytes) to fill several batches' item
 * space. */
#define PIPE_BIG_EVENTS 200u

struct pipe_fixture {
    char dir[256];
    char input[320];
    char data[300];        /* the data directory */
    char deadletters[340]; /* its dead-letter files' name */
};

static int pipe_setup(void **state)
{
    struct pipe_fixture *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    assert_int_equal(test_tempdir_make(fx->dir, sizeof(fx->dir)), 0);
    snprintf(fx->input, sizeof(fx->input), "%s/in.jsonl", fx->dir);
    snprintf(fx->data, sizeof(fx->data), "%s/data", fx->dir);
    snprintf(fx->deadletters, sizeof(fx->deadletters), "%s/deadletter.jsonl", fx->data);
    *state = fx;
    return 0;
}

static int pipe_teardown(void **state)
{
    struct pipe_fixture *fx = *state;
    test_tempdir_remove(fx->dir);
    free(fx);
    return 0;
}

/* The storage settings of fx->data: defaults, synchronous I/O. */
static void pipe_storage_config(struct pipe_fixture *fx, struct storage_config *cfg)
{
    storage_config_defaults(cfg);
    cfg->dir = fx->data;
    cfg->io_mode = STORAGE_IO_SYNC;
}

/* Ingests fx->input into fx->data with one shard; returns the events accepted. */
static uint64_t pipe_ingest(struct pipe_fixture *fx, struct storage **st_out)
{
    struct storage_config cfg;
    pipe_storage_config(fx, &cfg);
    cfg.model = STORAGE_MODEL_EVENTS;
    struct storage *st = NULL;
    assert_int_equal(storage_open(&cfg, &st), 0);
    struct shard_map *map = NULL;
    assert_int_equal(shard_map_open(fx->data, PIPE_SHARDS, 0, &map), 0);
    struct ingest_file_config icfg;
    ingest_file_config_defaults(&icfg);
    icfg.storage = st;
    icfg.map = map;
    icfg.deadletter_path = fx->deadletters;
    icfg.source_name = fx->input;
    int fd = open(fx->input, O_RDONLY);
    assert_true(fd >= 0);
    struct ingest_stats stats;
    memset(&stats, 0, sizeof(stats));
    assert_int_equal(ingest_file_run(&icfg, fd, &stats), 0);
    close(fd);
    shard_map_close(map);
    *st_out = st;
    return stats.accepted;
}

struct pipe_seen {
    uint32_t count;
    uint32_t with_version;
    int64_t version_sum;
    uint32_t with_items;
    uint8_t items[8][DS_ITEMS_BYTES_MAX]; /* the first few events' canonical items */
    uint16_t items_bytes[8];
    int64_t order[8];
    uint32_t bad; /* events whose items do not match their order id (the big test) */
};

static int pipe_collect(const struct ds_event *event, void *user)
{
    struct pipe_seen *seen = user;
    if (seen->count < 8) {
        seen->order[seen->count] = event->order_id.value;
        seen->items_bytes[seen->count] = event->items_bytes;
        if (event->items_bytes > 0) {
            memcpy(seen->items[seen->count], event->items, event->items_bytes);
        }
    }
    seen->count++;
    seen->with_version += event->has_version ? 1u : 0u;
    seen->version_sum += event->has_version ? event->version : 0;
    seen->with_items += event->items_bytes > 0 ? 1u : 0u;
    return 0;
}

static void test_pipeline_stores_version_and_items(void **state)
{
    /* The canonical items (ingest.h): a count, then per item a length-prefixed product and a
     * LEB128 quantity. */
    struct pipe_fixture *fx = *state;
    FILE *f = fopen(fx->input, "w");
    assert_non_null(f);
    fputs("{\"order_id\":1,\"customer_id\":5,\"ts\":\"2026-01-21T10:00:00Z\",\"version\":7,"
          "\"items\":[{\"product\":\"tea\",\"quantity\":2},{\"product\":\"cup\",\"quantity\":"
          "300}]}\n",
          f);
    fputs("{\"order_id\":2,\"customer_id\":5,\"ts\":\"2026-01-21T11:00:00Z\"}\n", f);
    fputs("{\"order_id\":3,\"customer_id\":6,\"ts\":\"2026-01-21T12:00:00Z\",\"items\":[]}\n", f);
    fclose(f);
    struct storage *st = NULL;
    assert_int_equal(pipe_ingest(fx, &st), 3);
    struct pipe_seen *seen = calloc(1, sizeof(*seen));
    assert_non_null(seen);
    int32_t day = 0;
    assert_int_equal(ds_date_parse("2026-01-21", 10, &day), 0);
    assert_int_equal(storage_partition_scan(st, day, 0, pipe_collect, seen), 0);
    assert_int_equal(seen->count, 3);
    assert_int_equal(seen->with_version, 1);
    assert_int_equal(seen->version_sum, 7);
    const uint8_t want[] = {2, 3, 't', 'e', 'a', 2, 3, 'c', 'u', 'p', 0xAC, 0x02};
    for (uint32_t i = 0; i < 3; i++) {
        if (seen->order[i] == 1) {
            assert_int_equal(seen->items_bytes[i], sizeof(want));
            assert_memory_equal(seen->items[i], want, sizeof(want));
        } else if (seen->order[i] == 2) {
            assert_int_equal(seen->items_bytes[i], 0);
        } else {
            /* An empty array is kept as a count of 0: the order has items, none of them. */
            assert_int_equal(seen->order[i], 3);
            assert_int_equal(seen->items_bytes[i], 1);
            assert_int_equal(seen->items[i][0], 0);
        }
    }
    free(seen);
    storage_close(st);
}

static int pipe_check_big(const struct ds_event *event, void *user)
{
    /* Each event's 100 products all start with its order id: a pointer into another event's items
     * (a batch overflowing, or reused too early) shows as a mismatch. */
    struct pipe_seen *seen = user;
    seen->count++;
    char tag[16];
    int n = snprintf(tag, sizeof(tag), "%06lld", (long long)event->order_id.value);
    const uint8_t *p = event->items;
    bool ok = event->items_bytes > 1 && p[0] == 100;
    size_t at = 1;
    for (uint32_t i = 0; ok && i < 100; i++) {
        uint8_t len = p[at];
        ok = len == 40 && memcmp(p + at + 1, tag, (size_t)n) == 0;
        at += 1u + len;
        ok = ok && p[at] == 1; /* quantity 1 */
        at += 1;
    }
    seen->bad += ok && at == event->items_bytes ? 0u : 1u;
    return 0;
}

static void test_pipeline_items_across_batches(void **state)
{
    struct pipe_fixture *fx = *state;
    FILE *f = fopen(fx->input, "w");
    assert_non_null(f);
    for (uint32_t e = 1; e <= PIPE_BIG_EVENTS; e++) {
        fprintf(f, "{\"order_id\":%u,\"customer_id\":1,\"ts\":\"2026-01-21T10:00:00Z\",\"items\":[",
                e);
        for (uint32_t i = 0; i < 100; i++) {
            /* 40-byte product: the order id, zero-padded, then filler (100 such items stay
             * under the 8 KiB of JSON an event's items may take). */
            fprintf(f, "%s{\"product\":\"%06u%034u\",\"quantity\":1}", i > 0 ? "," : "", e, i);
        }
        fputs("]}\n", f);
    }
    fclose(f);
    struct storage *st = NULL;
    assert_int_equal(pipe_ingest(fx, &st), PIPE_BIG_EVENTS);
    struct pipe_seen *seen = calloc(1, sizeof(*seen));
    assert_non_null(seen);
    int32_t day = 0;
    assert_int_equal(ds_date_parse("2026-01-21", 10, &day), 0);
    assert_int_equal(storage_partition_scan(st, day, 0, pipe_check_big, seen), 0);
    assert_int_equal(seen->count, PIPE_BIG_EVENTS);
    assert_int_equal(seen->bad, 0);
    free(seen);
    storage_close(st);
}

/* Reads fx->data's first dead-letter file into buf (NUL-terminated); returns its length. */
static size_t pipe_read_deadletters(struct pipe_fixture *fx, char *buf, size_t capacity)
{
    char path[360];
    snprintf(path, sizeof(path), "%s/deadletter.00000000.jsonl", fx->data);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, capacity - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n;
}

static void test_stage_commits_dead_letters_alone(void **state)
{
    struct pipe_fixture *fx = *state;
    struct storage_config cfg;
    pipe_storage_config(fx, &cfg);
    struct storage *st = NULL;
    assert_int_equal(storage_open(&cfg, &st), 0);
    struct stage *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    struct stage_config scfg = {.storage = st,
                                .deadletter_path = fx->deadletters,
                                .deadletter_file_bytes = INGEST_DEADLETTER_FILE_BYTES_DEFAULT,
                                .source_name = "orders",
                                .commit_interval_ms = 20,
                                .commit_events = 1000};
    assert_int_equal(stage_start(s, &scfg), 0);
    struct ingest_error error = {.reason = INGEST_NOT_JSON, .byte_offset = 0};
    struct ds_source source = {.partition = 3, .offset = 7};
    const char raw[] = "{not json";
    assert_int_equal(stage_add_reject(s, &error, &source, raw, sizeof(raw) - 1), 0);
    uint64_t commits = atomic_load(&s->commits);
    assert_int_equal(stage_flush_older(s, 0), 0);
    /* Waits for the commit (the state), not for a time; 10 s is a hang, not slowness. */
    for (int i = 0; i < 10000 && atomic_load(&s->commits) == commits; i++) {
        usleep(1000);
    }
    assert_true(atomic_load(&s->commits) > commits);
    char buf[4096];
    size_t n = pipe_read_deadletters(fx, buf, sizeof(buf));
    assert_true(n > 0 && buf[n - 1] == '\n');
    assert_non_null(strstr(buf, "\"partition\":3,\"offset\":7"));
    assert_int_equal(storage_source_next(st, 3), 8);
    assert_int_equal(stage_finish(s), 0);
    free(s);
    storage_close(st);
    /* Durable: a reopened store resumes partition 3 after the bad message. */
    assert_int_equal(storage_open(&cfg, &st), 0);
    assert_int_equal(storage_source_next(st, 3), 8);
    storage_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pipeline_stores_version_and_items, pipe_setup,
                                        pipe_teardown),
        cmocka_unit_test_setup_teardown(test_pipeline_items_across_batches, pipe_setup,
                                        pipe_teardown),
        cmocka_unit_test_setup_teardown(test_stage_commits_dead_letters_alone, pipe_setup,
                                        pipe_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
