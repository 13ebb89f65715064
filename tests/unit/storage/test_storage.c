/*
 * Unit tests of the storage engine through its public API (storage.h): appends, group commit,
 * reopen and recovery, read-only readers, totals and scans, fsck, and fault injection with the
 * fake I/O backend (tests/support/fake_io.h).
 *
 * Every test compares storage against a model kept here: the events appended to each partition
 * (committed and pending) and the source offsets, from which the expected scans, totals by hour
 * and by status, and source positions follow. After any failure or simulated crash the engine
 * must answer exactly like the model's last acknowledged state: everything a commit returned 0
 * for is there, nothing else is (the one exception is documented in fault_check_state).
 *
 * Each test gets a fresh temp dir. Randomised tests print their seed and replay DS_TEST_SEED.
 * fdatasync costs milliseconds on a real disk, so the scenarios keep partitions and commits few.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/format.h"
#include "storage/storage.h"
#include "tests/support/events.h"
#include "tests/support/fake_io.h"
#include "tests/support/tempdir.h"

#define DAY_MS 86400000LL
#define HOUR_MS 3600000LL
/* 2026-01-21, the contract example's day. */
#define DAY0 20474
#define MODEL_PARTS_MAX 512u
/* Source partitions the model follows: DS_SOURCE_FILE (-1) .. 14. */
#define MODEL_SOURCES 16u

/* ---- the model ----------------------------------------------------------------------------- */

/* The partition of a row stored without a source (struct evvec.src). */
#define NO_SOURCE INT32_MIN

struct evvec {
    struct ds_event *v;
    struct ds_source *src; /* each row's source, partition NO_SOURCE for none */
    size_t n;
    size_t cap;
};

static void evvec_push_source(struct evvec *vec, const struct ds_event *e,
                              const struct ds_source *src)
{
    if (vec->n == vec->cap) {
        vec->cap = vec->cap == 0 ? 64 : vec->cap * 2;
        vec->v = realloc(vec->v, vec->cap * sizeof(*vec->v));
        vec->src = realloc(vec->src, vec->cap * sizeof(*vec->src));
        assert_non_null(vec->v);
        assert_non_null(vec->src);
    }
    vec->src[vec->n] = src != NULL ? *src : (struct ds_source){.partition = NO_SOURCE};
    vec->v[vec->n++] = *e;
}

static void evvec_push(struct evvec *vec, const struct ds_event *e)
{
    evvec_push_source(vec, e, NULL);
}

static void evvec_free(struct evvec *vec)
{
    free(vec->v);
    free(vec->src);
    memset(vec, 0, sizeof(*vec));
}

struct mpart {
    int32_t day;
    uint32_t shard;
    struct evvec committed;
    struct evvec pending;
};

struct model {
    struct mpart parts[MODEL_PARTS_MAX];
    uint32_t count;
    int64_t src_committed[MODEL_SOURCES]; /* storage_source_next's answer; -1 unknown */
    int64_t src_pending[MODEL_SOURCES];
};

static struct model *model_new(void)
{
    struct model *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    for (uint32_t i = 0; i < MODEL_SOURCES; i++) {
        m->src_committed[i] = -1;
        m->src_pending[i] = -1;
    }
    return m;
}

static void model_free(struct model *m)
{
    if (m == NULL) {
        return;
    }
    for (uint32_t i = 0; i < m->count; i++) {
        evvec_free(&m->parts[i].committed);
        evvec_free(&m->parts[i].pending);
    }
    free(m);
}

static struct mpart *model_part(struct model *m, int32_t day, uint32_t shard)
{
    for (uint32_t i = 0; i < m->count; i++) {
        if (m->parts[i].day == day && m->parts[i].shard == shard) {
            return &m->parts[i];
        }
    }
    assert_true(m->count < MODEL_PARTS_MAX);
    struct mpart *p = &m->parts[m->count++];
    memset(p, 0, sizeof(*p));
    p->day = day;
    p->shard = shard;
    return p;
}

static void model_append(struct model *m, int32_t day, uint32_t shard, const struct ds_event *e,
                         const struct ds_source *src)
{
    evvec_push_source(&model_part(m, day, shard)->pending, e, src);
    if (src != NULL && src->partition + 1 < (int32_t)MODEL_SOURCES) {
        int64_t *next = &m->src_pending[src->partition + 1];
        if (*next < src->offset + 1) {
            *next = src->offset + 1;
        }
    }
}

static void model_commit(struct model *m)
{
    for (uint32_t i = 0; i < m->count; i++) {
        struct mpart *p = &m->parts[i];
        for (size_t j = 0; j < p->pending.n; j++) {
            evvec_push_source(&p->committed, &p->pending.v[j], &p->pending.src[j]);
        }
        p->pending.n = 0;
    }
    memcpy(m->src_committed, m->src_pending, sizeof(m->src_committed));
}

static void model_drop_pending(struct model *m)
{
    for (uint32_t i = 0; i < m->count; i++) {
        m->parts[i].pending.n = 0;
    }
    memcpy(m->src_pending, m->src_committed, sizeof(m->src_pending));
}

static uint64_t model_events(const struct model *m)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < m->count; i++) {
        n += m->parts[i].committed.n;
    }
    return n;
}

/* ---- fixture and small file helpers -------------------------------------------------------- */

struct fixture {
    char dir[64];
    char path[DS_PATH_MAX];
    struct model *m;
};

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    assert_int_equal(test_tempdir_make(fx->dir, sizeof(fx->dir)), 0);
    fx->m = model_new();
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    model_free(fx->m);
    test_tempdir_remove(fx->dir);
    free(fx);
    return 0;
}

static void config_init(struct storage_config *cfg, const char *dir)
{
    storage_config_defaults(cfg);
    cfg->dir = dir;
    cfg->io_mode = STORAGE_IO_SYNC;
    /* These tests are about storing events: every append is a row (test_orders.c tests the
     * orders model). */
    cfg->model = STORAGE_MODEL_EVENTS;
    /* Far above any test's partitions, and the table is then cheap to allocate at each of the
     * thousands of opens (fsck's own opens keep the default). */
    cfg->partitions_max = 4096;
}

static struct storage *open_with(const struct storage_config *cfg)
{
    struct storage *st = NULL;
    int rc = storage_open(cfg, &st);
    if (rc != 0) {
        print_error("storage_open %s: %s\n", cfg->dir, ds_strerror(rc));
    }
    assert_int_equal(rc, 0);
    assert_non_null(st);
    return st;
}

static struct storage *open_dir(const char *dir, bool read_only)
{
    struct storage_config cfg;
    config_init(&cfg, dir);
    cfg.read_only = read_only;
    return open_with(&cfg);
}

static void segment_path(const char *dir, int32_t day, uint32_t shard, uint32_t id, char *dst)
{
    char date[DS_DATE_TEXT_SIZE];
    ds_date_format(day, date);
    snprintf(dst, DS_PATH_MAX, "%s/parts/%s/%u/%08u.seg", dir, date, shard, id);
}

static uint64_t file_size(const char *path)
{
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    return (uint64_t)sb.st_size;
}

static bool file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static void file_truncate(const char *path, uint64_t len)
{
    assert_int_equal(truncate(path, (off_t)len), 0);
}

static void file_append(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
}

static void file_write(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
}

static void *file_read(const char *path, size_t *len)
{
    uint64_t size = file_size(path);
    uint8_t *buf = malloc(size + 1);
    assert_non_null(buf);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, buf, size), (ssize_t)size);
    close(fd);
    *len = (size_t)size;
    return buf;
}

/* Segment files (*.seg) in a partition directory. */
static uint32_t count_segments(const char *dir, int32_t day, uint32_t shard)
{
    char path[DS_PATH_MAX];
    char date[DS_DATE_TEXT_SIZE];
    ds_date_format(day, date);
    snprintf(path, sizeof(path), "%s/parts/%s/%u", dir, date, shard);
    DIR *d = opendir(path);
    if (d == NULL) {
        return 0;
    }
    uint32_t n = 0;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        size_t len = strlen(e->d_name);
        n += len > 4 && strcmp(e->d_name + len - 4, ".seg") == 0;
    }
    closedir(d);
    return n;
}

/* ---- appending through storage and model together ------------------------------------------ */

static void append_ok(struct storage *st, struct model *m, int32_t day, uint32_t shard,
                      const struct ds_event *e, const struct ds_source *src)
{
    int rc = storage_append(st, day, shard, e, src);
    if (rc != 0) {
        print_error("storage_append: %s\n", ds_strerror(rc));
    }
    assert_int_equal(rc, 0);
    model_append(m, day, shard, e, src);
}

static void commit_ok(struct storage *st, struct model *m)
{
    int rc = storage_commit(st);
    if (rc != 0) {
        print_error("storage_commit: %s\n", ds_strerror(rc));
    }
    assert_int_equal(rc, 0);
    assert_int_equal(storage_pending_events(st), 0);
    model_commit(m);
}

/* Source offsets per source partition, increasing as a Kafka consumer's would. */
struct sources {
    int64_t next[MODEL_SOURCES];
};

static struct ds_source next_source(uint64_t *rng, struct sources *s, uint32_t partitions)
{
    uint32_t index = (uint32_t)test_rng_below(rng, partitions);
    s->next[index] += 1 + (int64_t)test_rng_below(rng, 3);
    return (struct ds_source){.partition = (int32_t)index - 1, .offset = s->next[index]};
}

/* Appends count random events over days [DAY0, DAY0 + days) and shards [0, shards), committing
 * about commits times on the way (and always at the end when commit_at_end). */
static void workload(struct storage *st, struct model *m, uint64_t *rng, uint32_t count,
                     uint32_t days, uint32_t shards, uint32_t commits, bool commit_at_end)
{
    struct sources src = {{0}};
    for (uint32_t i = 0; i < MODEL_SOURCES; i++) {
        src.next[i] = m->src_pending[i] > 0 ? m->src_pending[i] : 0;
    }
    for (uint32_t i = 0; i < count; i++) {
        int32_t day = DAY0 + (int32_t)test_rng_below(rng, days);
        uint32_t shard = (uint32_t)test_rng_below(rng, shards);
        struct ds_event e;
        test_event_random_plain(rng, day, &e);
        struct ds_source s = next_source(rng, &src, 5);
        append_ok(st, m, day, shard, &e, test_rng_below(rng, 8) == 0 ? NULL : &s);
        if (commits > 0 && test_rng_below(rng, count / commits + 1) == 0) {
            commit_ok(st, m);
        }
    }
    if (commit_at_end) {
        commit_ok(st, m);
    }
}

/* ---- comparing storage with the model ------------------------------------------------------ */

struct scan_buf {
    struct evvec events;
};

static int scan_collect(const struct ds_event *event, void *user)
{
    struct scan_buf *b = user;
    evvec_push(&b->events, event);
    return 0;
}

static int scan_collect_sources(const struct ds_event *event, const struct ds_source *source,
                                void *user)
{
    struct scan_buf *b = user;
    evvec_push_source(&b->events, event, source);
    return 0;
}

struct visit_buf {
    int32_t day[MODEL_PARTS_MAX];
    uint32_t shard[MODEL_PARTS_MAX];
    uint32_t count;
};

static int visit_collect(int32_t day, uint32_t shard, void *user)
{
    struct visit_buf *b = user;
    if (b->count == MODEL_PARTS_MAX) {
        return -1;
    }
    b->day[b->count] = day;
    b->shard[b->count] = shard;
    b->count++;
    return 0;
}

#define WHY_BYTES 512

/* Expected events of one partition: committed, plus pending when asked. */
static const struct ds_event *expected_at(const struct mpart *p, bool with_pending, size_t i)
{
    (void)with_pending;
    return i < p->committed.n ? &p->committed.v[i] : &p->pending.v[i - p->committed.n];
}

static const struct ds_source *expected_source_at(const struct mpart *p, size_t i)
{
    return i < p->committed.n ? &p->committed.src[i] : &p->pending.src[i - p->committed.n];
}

/* Whether a scanned row's source (got) is the one it was appended with (want). A file source
 * (line numbers) is kept only in a block that also holds a row with a Kafka source (block
 * version 4 is written for those alone), so one may come back as none. */
static bool source_equal(const struct ds_source *want, const struct ds_source *got)
{
    if (want->partition == DS_SOURCE_FILE && got->partition == NO_SOURCE) {
        return true;
    }
    return want->partition == got->partition &&
           (want->partition == NO_SOURCE || want->offset == got->offset);
}

/* Totals of one partition (all statuses, or one) must equal a re-aggregation of events. */
static bool totals_match(struct storage *st, const struct mpart *p, bool with_pending,
                         const char *status, size_t status_len, char *why)
{
    size_t n = p->committed.n + (with_pending ? p->pending.n : 0);
    struct storage_partition_total want;
    memset(&want, 0, sizeof(want));
    for (size_t i = 0; i < n; i++) {
        const struct ds_event *e = expected_at(p, with_pending, i);
        if (status != NULL &&
            (e->status_len != status_len || memcmp(e->status, status, status_len) != 0)) {
            continue;
        }
        uint32_t hour = (uint32_t)((e->ts_ms - (int64_t)p->day * DAY_MS) / HOUR_MS);
        want.count++;
        want.amount_units += e->amount_units;
        want.hours[hour].count++;
        want.hours[hour].amount_units += e->amount_units;
        want.ts_min_ms = want.count == 1 || e->ts_ms < want.ts_min_ms ? e->ts_ms : want.ts_min_ms;
        want.ts_max_ms = want.count == 1 || e->ts_ms > want.ts_max_ms ? e->ts_ms : want.ts_max_ms;
    }
    struct storage_partition_total got;
    int rc = storage_partition_totals(st, p->day, p->shard, status, status_len, &got);
    if (rc != 0) {
        snprintf(why, WHY_BYTES, "totals %d/%u: %s", p->day, p->shard, ds_strerror(rc));
        return false;
    }
    if (got.count != want.count || got.amount_units != want.amount_units) {
        snprintf(why, WHY_BYTES, "totals %d/%u status %.*s: count %llu want %llu", p->day, p->shard,
                 status ? (int)status_len : 3, status ? status : "all",
                 (unsigned long long)got.count, (unsigned long long)want.count);
        return false;
    }
    for (int h = 0; h < 24; h++) {
        if (got.hours[h].count != want.hours[h].count ||
            got.hours[h].amount_units != want.hours[h].amount_units) {
            snprintf(why, WHY_BYTES, "totals %d/%u hour %d differ", p->day, p->shard, h);
            return false;
        }
    }
    if (status == NULL && want.count > 0 &&
        (got.ts_min_ms != want.ts_min_ms || got.ts_max_ms != want.ts_max_ms || got.blocks == 0 ||
         got.bytes == 0)) {
        snprintf(why, WHY_BYTES, "totals %d/%u: ts range or blocks differ", p->day, p->shard);
        return false;
    }
    if (status == NULL && want.count == 0 && (got.blocks != 0 || got.bytes != 0)) {
        snprintf(why, WHY_BYTES, "totals %d/%u: blocks without events", p->day, p->shard);
        return false;
    }
    return true;
}

static bool partition_matches(struct storage *st, const struct mpart *p, bool with_pending,
                              char *why)
{
    size_t n = p->committed.n + (with_pending ? p->pending.n : 0);
    struct scan_buf scan = {{0}};
    struct storage_position from = {0};
    int rc =
        storage_partition_scan_sources(st, p->day, p->shard, &from, scan_collect_sources, &scan);
    bool ok = rc == 0 && scan.events.n == n;
    if (!ok) {
        snprintf(why, WHY_BYTES, "scan %d/%u: rc %d, %zu events, want %zu", p->day, p->shard, rc,
                 scan.events.n, n);
    }
    for (size_t i = 0; ok && i < n; i++) {
        if (!test_event_equal(expected_at(p, with_pending, i), &scan.events.v[i])) {
            snprintf(why, WHY_BYTES, "scan %d/%u: event %zu differs", p->day, p->shard, i);
            ok = false;
        } else if (!source_equal(expected_source_at(p, i), &scan.events.src[i])) {
            /* The events model keeps every row's source (block version 4). */
            snprintf(why, WHY_BYTES, "scan %d/%u: event %zu's source %d:%lld, want %d:%lld", p->day,
                     p->shard, i, scan.events.src[i].partition,
                     (long long)scan.events.src[i].offset, expected_source_at(p, i)->partition,
                     (long long)expected_source_at(p, i)->offset);
            ok = false;
        }
    }
    evvec_free(&scan.events);
    ok = ok && totals_match(st, p, with_pending, NULL, 0, why);
    /* Every status present, and one that is not. */
    for (size_t i = 0; ok && i < n; i++) {
        const struct ds_event *e = expected_at(p, with_pending, i);
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) {
            const struct ds_event *prev = expected_at(p, with_pending, j);
            seen = prev->status_len == e->status_len &&
                   memcmp(prev->status, e->status, e->status_len) == 0;
        }
        if (!seen) {
            ok = totals_match(st, p, with_pending, e->status, e->status_len, why);
        }
    }
    ok = ok && totals_match(st, p, with_pending, "no-such-status", 14, why);
    return ok;
}

/* True when storage answers exactly as the model: committed state, or committed + pending. */
static bool storage_matches(struct storage *st, const struct model *m, bool with_pending, char *why)
{
    for (uint32_t i = 0; i < m->count; i++) {
        if (!partition_matches(st, &m->parts[i], with_pending, why)) {
            return false;
        }
    }
    /* The partitions with data, in (day, shard) order, are exactly the model's non-empty ones. */
    struct visit_buf *visited = calloc(1, sizeof(*visited));
    assert_non_null(visited);
    int rc = storage_partition_visit(st, visit_collect, visited);
    uint32_t want = 0;
    bool ok = rc == 0;
    for (uint32_t i = 0; ok && i < m->count; i++) {
        const struct mpart *p = &m->parts[i];
        if (p->committed.n + (with_pending ? p->pending.n : 0) == 0) {
            continue;
        }
        want++;
        bool found = false;
        for (uint32_t j = 0; j < visited->count && !found; j++) {
            found = visited->day[j] == p->day && visited->shard[j] == p->shard;
        }
        ok = found;
    }
    for (uint32_t j = 1; ok && j < visited->count; j++) {
        ok = visited->day[j - 1] < visited->day[j] ||
             (visited->day[j - 1] == visited->day[j] && visited->shard[j - 1] < visited->shard[j]);
    }
    if (!ok || visited->count != want) {
        snprintf(why, WHY_BYTES, "visit: rc %d, %u partitions, want %u", rc, visited->count, want);
        free(visited);
        return false;
    }
    free(visited);
    for (uint32_t i = 0; i < MODEL_SOURCES; i++) {
        int64_t expect = with_pending ? m->src_pending[i] : m->src_committed[i];
        int64_t got = storage_source_next(st, (int32_t)i - 1);
        if (got != expect) {
            snprintf(why, WHY_BYTES, "source %d: next %lld want %lld", (int)i - 1, (long long)got,
                     (long long)expect);
            return false;
        }
    }
    return true;
}

static void assert_matches(struct storage *st, const struct model *m)
{
    char why[WHY_BYTES] = "";
    if (!storage_matches(st, m, false, why)) {
        print_error("storage differs from the model: %s\n", why);
        fail();
    }
}

/* Reopens dir as a writer and as a reader; both must match the model's committed state. */
static void assert_reopen_matches(const char *dir, const struct model *m)
{
    struct storage *st = open_dir(dir, false);
    assert_matches(st, m);
    storage_close(st);
    st = open_dir(dir, true);
    assert_matches(st, m);
    storage_close(st);
}

static int fsck(const char *dir, bool repair, struct storage_fsck_report *report)
{
    struct storage_fsck_options options = {.repair = repair, .report_file = NULL};
    memset(report, 0, sizeof(*report));
    return storage_fsck(dir, &options, report);
}

/* ---- retractions --------------------------------------------------------------------------- */

#define RETRACT_ORDERS 400u
#define RETRACT_PARTS 3u /* (DAY0, 0), (DAY0, 1), (DAY0 + 1, 0) */

/* The live version of each order, and expected net totals per partition, status and hour. */
struct retract_truth {
    struct ds_event live[RETRACT_ORDERS];
    struct ds_source live_source[RETRACT_ORDERS]; /* a retraction repeats its row's */
    int64_t next_offset;
    uint32_t part_of[RETRACT_ORDERS];
    uint64_t rows, retractions[RETRACT_PARTS];
};

static const char *const retract_statuses[2] = {"paid", "sent"};

static void retract_part(uint32_t part, int32_t *day, uint32_t *shard)
{
    *day = DAY0 + (part == 2 ? 1 : 0);
    *shard = part == 1 ? 1u : 0u;
}

static void retract_version(uint64_t *rng, uint32_t order, int64_t version, struct ds_event *e,
                            uint32_t *part)
{
    memset(e, 0, sizeof(*e));
    *part = (uint32_t)test_rng_below(rng, RETRACT_PARTS);
    int32_t day = 0;
    uint32_t shard = 0;
    retract_part(*part, &day, &shard);
    test_id_int(&e->order_id, order + 1);
    test_id_int(&e->customer_id, order % 13 + 1);
    e->ts_ms = (int64_t)day * DAY_MS + (int64_t)test_rng_below(rng, (uint64_t)DAY_MS);
    e->amount_units = (int64_t)test_rng_below(rng, 1000000) - 1000; /* some negative */
    test_event_set_status(e, retract_statuses[test_rng_below(rng, 2)]);
    e->has_version = true;
    e->version = version;
}

/* Appends e: a retraction with the source of the row it cancels (order's live one), as the
 * events model's release makes them; a row at the next offset of Kafka partition 0. */
static void retract_append(struct storage *st, struct retract_truth *t, uint32_t part,
                           uint32_t order, const struct ds_event *e)
{
    int32_t day = 0;
    uint32_t shard = 0;
    retract_part(part, &day, &shard);
    if (!e->retract) {
        t->live_source[order] = (struct ds_source){.partition = 0, .offset = t->next_offset++};
    }
    assert_int_equal(storage_append(st, day, shard, e, &t->live_source[order]), 0);
    t->rows++;
    t->retractions[part] += e->retract ? 1u : 0u;
}

/* Every partition's totals (all statuses, each status, every hour, amounts) equal the sums of
 * the live versions: inserts minus retractions. */
static void retract_assert_totals(struct storage *st, const struct retract_truth *t)
{
    for (uint32_t part = 0; part < RETRACT_PARTS; part++) {
        int32_t day = 0;
        uint32_t shard = 0;
        retract_part(part, &day, &shard);
        for (int s = -1; s < 2; s++) {
            int64_t count[24] = {0};
            ds_i128 amount[24] = {0};
            uint64_t want_count = 0;
            ds_i128 want_amount = 0;
            for (uint32_t o = 0; o < RETRACT_ORDERS; o++) {
                const struct ds_event *e = &t->live[o];
                if (t->part_of[o] != part ||
                    (s >= 0 && strcmp(e->status, retract_statuses[s]) != 0)) {
                    continue;
                }
                int h = (int)((e->ts_ms - (int64_t)day * DAY_MS) / HOUR_MS);
                count[h]++;
                amount[h] += e->amount_units;
                want_count++;
                want_amount += e->amount_units;
            }
            struct storage_partition_total got;
            const char *status = s >= 0 ? retract_statuses[s] : NULL;
            assert_int_equal(
                storage_partition_totals(st, day, shard, status, s >= 0 ? strlen(status) : 0, &got),
                0);
            assert_int_equal(got.count, want_count);
            assert_true(got.amount_units == want_amount);
            for (int h = 0; h < 24; h++) {
                assert_true(got.hours[h].count == count[h]);
                assert_true(got.hours[h].amount_units == amount[h]);
            }
        }
    }
}

static int retract_scan_count(const struct ds_event *event, void *user)
{
    uint64_t *retractions = user;
    *retractions += event->retract ? 1u : 0u;
    return 0;
}

static void test_storage_retractions_net_totals(void **state)
{
    /* Orders inserted, then over several commits superseded: a retraction of the old version
     * into its old partition and the new version into any partition. Small blocks put
     * retractions in other blocks than their rows (negative block cells). Totals per partition,
     * status and hour, and amounts, are inserts minus retractions, from the writer, after
     * reopen and from a reader; scans expose the retraction rows; fsck is clean. */
    struct fixture *fx = *state;
    uint64_t rng = test_seed();
    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    cfg.block_events_max = 37;
    struct storage *st = open_with(&cfg);
    struct retract_truth *t = calloc(1, sizeof(*t));
    assert_non_null(t);
    for (uint32_t o = 0; o < RETRACT_ORDERS; o++) {
        retract_version(&rng, o, 0, &t->live[o], &t->part_of[o]);
        retract_append(st, t, t->part_of[o], o, &t->live[o]);
    }
    assert_int_equal(storage_commit(st), 0);
    retract_assert_totals(st, t);
    for (int round = 1; round <= 4; round++) {
        for (uint32_t o = 0; o < RETRACT_ORDERS; o++) {
            if (test_rng_below(&rng, 3) != 0) {
                continue;
            }
            struct ds_event old = t->live[o];
            old.retract = true;
            retract_append(st, t, t->part_of[o], o, &old);
            retract_version(&rng, o, round, &t->live[o], &t->part_of[o]);
            retract_append(st, t, t->part_of[o], o, &t->live[o]);
        }
        assert_int_equal(storage_commit(st), 0);
        retract_assert_totals(st, t);
    }
    uint64_t retractions = 0;
    for (uint32_t part = 0; part < RETRACT_PARTS; part++) {
        assert_true(t->retractions[part] > 0);
        retractions += t->retractions[part];
    }
    storage_close(st);
    st = open_dir(fx->dir, false);
    retract_assert_totals(st, t);
    storage_close(st);
    st = open_dir(fx->dir, true);
    retract_assert_totals(st, t);
    uint64_t scanned = 0;
    for (uint32_t part = 0; part < RETRACT_PARTS; part++) {
        int32_t day = 0;
        uint32_t shard = 0;
        retract_part(part, &day, &shard);
        assert_int_equal(storage_partition_scan(st, day, shard, retract_scan_count, &scanned), 0);
    }
    assert_int_equal(scanned, retractions);
    storage_close(st);
    struct storage_fsck_report report;
    assert_int_equal(fsck(fx->dir, false, &report), 0);
    assert_int_equal(report.events_ok, t->rows);
    assert_int_equal(report.blocks_bad, 0);
    free(t);
}

static void test_storage_retractions_more_than_rows_refused(void **state)
{
    /* A partition holding a retraction of a row it does not have (yet) is inconsistent: its
     * totals are -DS_ECORRUPT (never a negative or wrapped count); others still count. */
    struct fixture *fx = *state;
    struct storage *st = open_dir(fx->dir, false);
    struct ds_event e;
    memset(&e, 0, sizeof(e));
    test_id_int(&e.order_id, 5);
    test_id_int(&e.customer_id, 6);
    e.ts_ms = (int64_t)DAY0 * DAY_MS + 5;
    e.amount_units = 700;
    test_event_set_status(&e, "paid");
    assert_int_equal(storage_append(st, DAY0, 1, &e, NULL), 0);
    e.retract = true;
    assert_int_equal(storage_append(st, DAY0, 0, &e, NULL), 0);
    assert_int_equal(storage_commit(st), 0);
    struct storage_partition_total got;
    assert_int_equal(storage_partition_totals(st, DAY0, 0, NULL, 0, &got), -DS_ECORRUPT);
    assert_int_equal(storage_partition_totals(st, DAY0, 0, "paid", 4, &got), -DS_ECORRUPT);
    assert_int_equal(storage_partition_totals(st, DAY0, 1, NULL, 0, &got), 0);
    assert_int_equal(got.count, 1);
    /* A retraction committed before the row it cancels: the sums end at 0, but a partition's
     * append order never has it so, and the summary refuses the block that goes below zero. */
    assert_int_equal(storage_append(st, DAY0, 2, &e, NULL), 0);
    assert_int_equal(storage_commit(st), 0);
    e.retract = false;
    assert_int_equal(storage_append(st, DAY0, 2, &e, NULL), 0);
    assert_int_equal(storage_commit(st), 0);
    assert_int_equal(storage_partition_totals(st, DAY0, 2, NULL, 0, &got), -DS_ECORRUPT);
    storage_close(st);
}

/* ---- configuration and limits -------------------------------------------------------------- */

static void test_storage_config_check_rejects_bad_values(void **state)
{
    /* Each knob outside its hard limits is refused with -DS_EUSAGE, by the check and by open. */
    struct fixture *fx = *state;
    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    assert_int_equal(storage_config_check(&cfg), 0);
    struct storage_config bad[9];
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        bad[i] = cfg;
    }
    bad[0].dir = NULL;
    bad[1].dir = "";
    bad[2].block_events_max = 0;
    bad[3].block_events_max = STORAGE_BLOCK_EVENTS_MAX + 1;
    bad[4].segment_bytes_max = 4095;
    bad[5].segment_bytes_max = STORAGE_SEGMENT_BYTES_MAX + 1;
    bad[6].open_bytes_max = (1u << 20) - 1;
    bad[7].zstd_level = 20;
    bad[8].partitions_max = STORAGE_PARTITIONS_MAX + 1;
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        assert_int_equal(storage_config_check(&bad[i]), -DS_EUSAGE);
        struct storage *st = NULL;
        assert_int_equal(storage_open(&bad[i], &st), -DS_EUSAGE);
        assert_null(st);
    }
    storage_close(NULL); /* teardown accepts NULL */
}

static void test_storage_append_partition_limit(void **state)
{
    /* Past partitions_max distinct partitions, or with a source partition out of range, an
     * append is refused with -DS_ELIMIT and nothing else changes. */
    struct fixture *fx = *state;
    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    cfg.partitions_max = 2;
    struct storage *st = open_with(&cfg);
    uint64_t rng = 5;
    struct ds_event e;
    test_event_random_plain(&rng, DAY0, &e);
    append_ok(st, fx->m, DAY0, 0, &e, NULL);
    append_ok(st, fx->m, DAY0, 1, &e, NULL);
    assert_int_equal(storage_append(st, DAY0, 2, &e, NULL), -DS_ELIMIT);
    /* Partitions -1 .. STORAGE_SOURCES_MAX - 3 are sources; -2 is the dead-letter length. */
    struct ds_source bad = {.partition = (int32_t)STORAGE_SOURCES_MAX - 2, .offset = 1};
    assert_int_equal(storage_append(st, DAY0, 0, &e, &bad), -DS_ELIMIT);
    bad.partition = -2;
    assert_int_equal(storage_append(st, DAY0, 0, &e, &bad), -DS_ELIMIT);
    assert_int_equal(storage_pending_events(st), 2);
    commit_ok(st, fx->m); /* a refused append does not poison the writer */
    assert_matches(st, fx->m);
    storage_close(st);
    assert_reopen_matches(fx->dir, fx->m);
    /* A directory holding more partitions than an opener's partitions_max is refused. */
    cfg.partitions_max = 1;
    st = NULL;
    assert_int_equal(storage_open(&cfg, &st), -DS_ELIMIT);
    assert_null(st);
    cfg.read_only = true;
    assert_int_equal(storage_open(&cfg, &st), -DS_ELIMIT);
}

/* ---- round trips --------------------------------------------------------------------------- */

static void test_storage_round_trip_partitions(void **state)
{
    /* Events appended to several (day, shard) partitions over several commits read back exactly
     * (scan, totals by hour and status, sources) from the writer, after reopen, and from a
     * read-only reader. */
    struct fixture *fx = *state;
    uint64_t rng = test_seed();
    struct storage *st = open_dir(fx->dir, false);
    assert_string_equal(storage_io_backend(st), "sync");
    workload(st, fx->m, &rng, 3000, 3, 3, 4, true);
    assert_matches(st, fx->m);
    /* A partition never written reads as zeros. */
    struct storage_partition_total t;
    assert_int_equal(storage_partition_totals(st, DAY0 + 100, 0, NULL, 0, &t), 0);
    assert_int_equal(t.count, 0);
    assert_int_equal(t.blocks, 0);
    storage_close(st);
    assert_reopen_matches(fx->dir, fx->m);
    struct storage_fsck_report report;
    assert_int_equal(fsck(fx->dir, false, &report), 0);
    assert_int_equal(report.events_ok, model_events(fx->m));
    assert_int_equal(report.partitions, 9);
    assert_int_equal(report.blocks_bad, 0);
}

static void test_storage_uncommitted_dropped_at_close(void **state)
{
    /* Close without commit is a crash: appends since the last commit are gone after reopen, even
     * those whose blocks were already sealed and written to the segment. */
    struct fixture *fx = *state;
    uint64_t rng = test_seed();
    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    cfg.block_events_max = 4; /* uncommitted blocks reach the file */
    struct storage *st = open_with(&cfg);
    workload(st, fx->m, &rng, 200, 2, 2, 2, true);
    workload(st, fx->m, &rng, 150, 2, 2, 0, false);
    assert_int_equal(storage_pending_events(st), 150);
    /* Before the commit the writer itself answers with the committed state only. */
    assert_matches(st, fx->m);
    storage_close(st);
    model_drop_pending(fx->m);

    /* The uncommitted blocks are on disk, past the committed ends: fsck sees a torn tail. */
    struct storage_fsck_report report;
    assert_int_equal(fsck(fx->dir, false, &report), 1);
    assert_true(report.torn_bytes > 0);
    assert_int_equal(report.blocks_bad, 0);
    assert_reopen_matches(fx->dir, fx->m);
    assert_int_equal(fsck(fx->dir, false, &report), 0);
}

static void test_storage_commit_nothing_is_noop(void **state)
{
    /* A commit with nothing appended writes nothing and succeeds, before and after data. */
    struct fixture *fx = *state;
    struct storage *st = open_dir(fx->dir, false);
    char manifest[DS_PATH_MAX];
    snprintf(manifest, sizeof(manifest), "%s/MANIFEST", fx->dir);
    uint64_t before = file_size(manifest);
    assert_int_equal(storage_commit(st), 0);
    assert_int_equal(file_size(manifest), before);
    uint64_t rng = 1;
    workload(st, fx->m, &rng, 10, 1, 1, 0, true);
    before = file_size(manifest);
    assert_int_equal(storage_commit(st), 0);
    assert_int_equal(file_size(manifest), before);
    storage_close(st);
    assert_reopen_matches(fx->dir, fx->m);
}

static bool totals_equal(const struct storage_partition_total *a,
                         const struct storage_partition_total *b)
{
    bool equal = a->count == b->count && a->amount_units == b->amount_units &&
                 a->blocks == b->blocks && a->bytes == b->bytes && a->ts_min_ms == b->ts_min_ms &&
                 a->ts_max_ms == b->ts_max_ms;
    for (int h = 0; equal && h < 24; h++) {
        equal = a->hours[h].count == b->hours[h].count &&
                a->hours[h].amount_units == b->hours[h].amount_units;
    }
    return equal;
}

/* Runs the same seeded workload in dir with mode; returns 0 or the open error. */
static int run_mode(const char *dir, enum storage_io_mode mode, struct model *m, uint64_t seed)
{
    struct storage_config cfg;
    config_init(&cfg, dir);
    cfg.io_mode = mode;
    cfg.block_events_max = 50;
    struct storage *st = NULL;
    int rc = storage_open(&cfg, &st);
    if (rc != 0) {
        return rc;
    }
    assert_string_equal(storage_io_backend(st), mode == STORAGE_IO_URING ? "uring" : "sync");
    uint64_t rng = seed;
    workload(st, m, &rng, 2000, 2, 3, 3, true);
    assert_matches(st, m);
    storage_close(st);
    assert_reopen_matches(dir, m);
    return 0;
}

static void test_storage_io_sync_and_uring_identical(void **state)
{
    /* The pwrite/fdatasync path and io_uring store the same workload identically: same answers,
     * same block counts and bytes (the io_uring case skips when the kernel refuses io_uring). */
    struct fixture *fx = *state;
    uint64_t seed = test_seed();
    char sync_dir[DS_PATH_MAX];
    char uring_dir[DS_PATH_MAX];
    snprintf(sync_dir, sizeof(sync_dir), "%s/sync", fx->dir);
    snprintf(uring_dir, sizeof(uring_dir), "%s/uring", fx->dir);
    assert_int_equal(run_mode(sync_dir, STORAGE_IO_SYNC, fx->m, seed), 0);
    struct model *um = model_new();
    int rc = run_mode(uring_dir, STORAGE_IO_URING, um, seed);
    if (rc == -ENOSYS || rc == -EPERM) {
        model_free(um);
        skip();
    }
    assert_int_equal(rc, 0);
    struct storage *a = open_dir(sync_dir, true);
    struct storage *b = open_dir(uring_dir, true);
    for (uint32_t i = 0; i < fx->m->count; i++) {
        struct storage_partition_total ta;
        struct storage_partition_total tb;
        assert_int_equal(
            storage_partition_totals(a, fx->m->parts[i].day, fx->m->parts[i].shard, NULL, 0, &ta),
            0);
        assert_int_equal(
            storage_partition_totals(b, fx->m->parts[i].day, fx->m->parts[i].shard, NULL, 0, &tb),
            0);
        assert_true(totals_equal(&ta, &tb));
    }
    storage_close(a);
    storage_close(b);
    model_free(um);
}

static void test_storage_uring_commit_beyond_queue_depth(void **state)
{
    /* A commit of more operations than the io_uring queue holds (STORAGE_IO_DEPTH_MAX: here 50
     * partitions of 4 blocks each, a header and a sync) is drained in parts, every segment's
     * writes still before its sync; everything reads back. Skips without io_uring. */
    struct fixture *fx = *state;
    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    cfg.io_mode = STORAGE_IO_URING;
    cfg.block_events_max = 5;
    struct storage *st = NULL;
    int rc = storage_open(&cfg, &st);
    if (rc == -ENOSYS || rc == -EPERM) {
        skip();
    }
    assert_int_equal(rc, 0);
    uint64_t rng = test_seed();
    for (int32_t day = 0; day < 10; day++) {
        for (uint32_t shard = 0; shard < 5; shard++) {
            for (int i = 0; i < 20; i++) {
                struct ds_event e;
                test_event_random_plain(&rng, DAY0 + day, &e);
                append_ok(st, fx->m, DAY0 + day, shard, &e, NULL);
            }
        }
    }
    assert_true(50u * 6u > STORAGE_IO_DEPTH_MAX);
    commit_ok(st, fx->m);
    assert_matches(st, fx->m);
    workload(st, fx->m, &rng, 500, 10, 5, 0, true);
    assert_matches(st, fx->m);
    storage_close(st);
    assert_reopen_matches(fx->dir, fx->m);
}

static int stop_at_three(const struct ds_event *event, void *user)
{
    (void)event;
    int *seen = user;
    return ++*seen == 3 ? 77 : 0;
}

static int stop_at_second(int32_t day, uint32_t shard, void *user)
{
    (void)day;
    (void)shard;
    int *seen = user;
    return ++*seen == 2 ? 55 : 0;
}

static void test_storage_scan_and_visit_stop_early(void **state)
{
    /* A non-zero callback result stops a scan or a visit and is returned as is; a reader has no
     * I/O backend. */
    struct fixture *fx = *state;
    struct storage *st = open_dir(fx->dir, false);
    uint64_t rng = 8;
    workload(st, fx->m, &rng, 100, 2, 2, 0, true);
    int seen = 0;
    assert_int_equal(storage_partition_scan(st, DAY0, 0, stop_at_three, &seen), 77);
    assert_int_equal(seen, 3);
    seen = 0;
    assert_int_equal(storage_partition_visit(st, stop_at_second, &seen), 55);
    assert_int_equal(seen, 2);
    storage_close(st);
    st = open_dir(fx->dir, true);
    assert_string_equal(storage_io_backend(st), "none");
    storage_close(st);
}

/* ---- recovery ------------------------------------------------------------------------------ */

/* One committed partition (DAY0, 0) of a few blocks, closed cleanly. */
static void committed_partition(struct fixture *fx, uint32_t events)
{
    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    cfg.block_events_max = 20;
    struct storage *st = open_with(&cfg);
    uint64_t rng = 77;
    for (uint32_t i = 0; i < events; i++) {
        struct ds_event e;
        test_event_random_plain(&rng, DAY0, &e);
        struct ds_source s = {.partition = 0, .offset = i};
        append_ok(st, fx->m, DAY0, 0, &e, &s);
        if (i % 50 == 49) {
            commit_ok(st, fx->m);
        }
    }
    commit_ok(st, fx->m);
    storage_close(st);
}

/* ---- damage and quarantine ----------------------------------------------------------------- */

/* Byte offsets of the blocks of a segment file (read as fsck would, header lengths only). */
static uint32_t block_offsets(const char *path, uint64_t *offsets, uint32_t capacity)
{
    size_t len = 0;
    uint8_t *data = file_read(path, &len);
    uint32_t n = 0;
    for (size_t at = sizeof(struct segment_header); at + sizeof(struct block_header) <= len;) {
        struct block_header h;
        memcpy(&h, data + at, sizeof(h));
        assert_int_equal(h.magic, BLOCK_MAGIC);
        assert_true(n < capacity);
        offsets[n++] = at;
        at += (size_t)h.header_bytes + h.payload_bytes;
    }
    free(data);
    return n;
}

static void file_flip(const char *path, uint64_t offset)
{
    size_t len = 0;
    uint8_t *data = file_read(path, &len);
    assert_true(offset < len);
    data[offset] ^= 0x5A;
    file_write(path, data, len);
    free(data);
}

/* Totals of (DAY0, 0) through a fresh reader. */
static struct storage_partition_total reader_totals(const char *dir)
{
    struct storage *st = open_dir(dir, true);
    struct storage_partition_total t;
    assert_int_equal(storage_partition_totals(st, DAY0, 0, NULL, 0, &t), 0);
    storage_close(st);
    return t;
}

/* Events a full scan of (DAY0, 0) reads; the scan must succeed. */
static uint64_t reader_scan_events(const char *dir)
{
    struct storage *st = open_dir(dir, true);
    struct scan_buf scan = {{0}};
    assert_int_equal(storage_partition_scan(st, DAY0, 0, scan_collect, &scan), 0);
    uint64_t n = scan.events.n;
    evvec_free(&scan.events);
    storage_close(st);
    return n;
}

/* The JSON records in DIR/quarantine/, concatenated into text (capacity bytes). */
static uint32_t quarantine_records(const char *dir, char *text, size_t capacity)
{
    char path[DS_PATH_MAX];
    snprintf(path, sizeof(path), "%s/quarantine", dir);
    DIR *d = opendir(path);
    text[0] = '\0';
    if (d == NULL) {
        return 0;
    }
    uint32_t n = 0;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".json") != 0) {
            continue;
        }
        char file[DS_PATH_MAX * 2];
        snprintf(file, sizeof(file), "%s/%s", path, e->d_name);
        size_t flen = 0;
        char *body = file_read(file, &flen);
        size_t used = strlen(text);
        assert_true(used + flen + 1 < capacity);
        memcpy(text + used, body, flen);
        text[used + flen] = '\0';
        free(body);
        n++;
    }
    closedir(d);
    return n;
}

/* After a repair: clean, a second repair does nothing, and a writer opens, appends and commits
 * on top (the totals follow); fsck stays clean. expect is the count after the repair. */
static void assert_repaired_and_writable(struct fixture *fx, uint64_t expect)
{
    struct storage_fsck_report report;
    assert_int_equal(fsck(fx->dir, false, &report), 0);
    assert_int_equal(fsck(fx->dir, true, &report), 0);
    assert_int_equal(report.quarantined_blocks, 0);
    assert_int_equal(report.quarantined_events, 0);
    struct storage_partition_total t = reader_totals(fx->dir);
    assert_int_equal(t.count, expect);
    assert_int_equal(t.damaged_blocks, 0);
    assert_int_equal(reader_scan_events(fx->dir), expect);

    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    cfg.block_events_max = 20;
    struct storage *st = open_with(&cfg);
    uint64_t rng = 991;
    for (uint32_t i = 0; i < 30; i++) {
        struct ds_event e;
        test_event_random_plain(&rng, DAY0, &e);
        struct ds_source src = {.partition = 0, .offset = 100000 + i};
        assert_int_equal(storage_append(st, DAY0, 0, &e, &src), 0);
    }
    assert_true(storage_commit(st) >= 0);
    storage_close(st);
    t = reader_totals(fx->dir);
    assert_int_equal(t.count, expect + 30);
    assert_int_equal(reader_scan_events(fx->dir), expect + 30);
    assert_int_equal(fsck(fx->dir, false, &report), 0);
    assert_int_equal(report.events_ok, expect + 30);
}

static void test_storage_recovery_truncated_committed_block(void **state)
{
    /* Acknowledged bytes missing from the current segment (cut inside the last committed block)
     * make the writer's open fail with -DS_ECORRUPT; a reader's count answers and says a block
     * is damaged; fsck reports damage (1); repair quarantines the cut block (its header names
     * 20 events), after which everything is clean and the count is 20 lower. */
    struct fixture *fx = *state;
    committed_partition(fx, 120);
    segment_path(fx->dir, DAY0, 0, 1, fx->path);
    uint64_t size = file_size(fx->path);
    uint64_t offsets[16];
    assert_int_equal(block_offsets(fx->path, offsets, 16), 7); /* 20,20,10,20,20,10,20 */
    file_truncate(fx->path, size - 7);
    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    struct storage *st = NULL;
    assert_int_equal(storage_open(&cfg, &st), -DS_ECORRUPT);
    assert_null(st);
    struct storage_partition_total t = reader_totals(fx->dir);
    assert_int_equal(t.count, 120);
    assert_int_equal(t.damaged_blocks, 1);
    struct storage_fsck_report report;
    assert_int_equal(fsck(fx->dir, false, &report), 1);
    assert_true(report.blocks_bad >= 1);
    assert_int_equal(fsck(fx->dir, true, &report), 0);
    assert_int_equal(report.quarantined_blocks, 1);
    assert_int_equal(report.quarantined_events, 20);
    assert_int_equal(report.quarantined_bytes, size - 7 - offsets[6]); /* what was left of it */
    assert_int_equal(file_size(fx->path), size); /* zeros up to the committed end, skipped */
    assert_repaired_and_writable(fx, 100);
    /* A committed segment removed altogether is missing data too. */
    assert_int_equal(unlink(fx->path), 0);
    assert_int_equal(storage_open(&cfg, &st), -DS_ECORRUPT);
}

static void test_storage_corrupt_committed_payload(void **state)
{
    /* A damaged byte inside the last committed block's payload: totals (read from the intact
     * headers) still answer and say one block is damaged, a scan fails with -DS_ECORRUPT, fsck
     * reports the bad block (1); repair copies the block to quarantine/ with its record, skips
     * it, and the segment keeps its size (a hole). */
    struct fixture *fx = *state;
    committed_partition(fx, 120);
    segment_path(fx->dir, DAY0, 0, 1, fx->path);
    uint64_t size = file_size(fx->path);
    file_flip(fx->path, size - 3);
    struct storage *st = open_dir(fx->dir, false);
    struct storage_partition_total t;
    assert_int_equal(storage_partition_totals(st, DAY0, 0, NULL, 0, &t), 0);
    assert_int_equal(t.count, 120);
    assert_int_equal(t.damaged_blocks, 1);
    struct scan_buf scan = {{0}};
    assert_int_equal(storage_partition_scan(st, DAY0, 0, scan_collect, &scan), -DS_ECORRUPT);
    evvec_free(&scan.events);
    storage_close(st);
    struct storage_fsck_report report;
    assert_int_equal(fsck(fx->dir, false, &report), 1);
    assert_int_equal(report.blocks_bad, 1);
    assert_int_equal(report.blocks_ok + report.blocks_bad, t.blocks);
    assert_int_equal(fsck(fx->dir, true, &report), 0);
    assert_int_equal(report.blocks_bad, 0);
    assert_int_equal(report.quarantined_blocks, 1);
    assert_int_equal(report.quarantined_events, 20);
    assert_int_equal(report.events_unknown_ranges, 0);
    assert_int_equal(report.quarantined_total, 1);
    assert_int_equal(file_size(fx->path), size);
    char text[4096];
    assert_int_equal(quarantine_records(fx->dir, text, sizeof(text)), 1);
    assert_non_null(strstr(text, "\"partition\":\"DAY#2026-01-21#0\""));
    assert_non_null(strstr(text, "\"events\":20,"));
    assert_non_null(strstr(text, "\"source_partition\":0,\"source_offset_min\":100,"
                                 "\"source_offset_max\":119"));
    assert_non_null(strstr(text, "\"reason\":\"payload checksum mismatch\""));
    assert_repaired_and_writable(fx, 100);
}

static void test_storage_quarantine_payload_block_mid_segment(void **state)
{
    /* A flipped byte in the payload of a block between intact ones: only that block (events
     * known from its header) goes to quarantine/; the blocks after it stay readable. */
    struct fixture *fx = *state;
    committed_partition(fx, 120);
    segment_path(fx->dir, DAY0, 0, 1, fx->path);
    uint64_t offsets[16];
    assert_int_equal(block_offsets(fx->path, offsets, 16), 7); /* 20,20,10,20,20,10,20 */
    file_flip(fx->path, offsets[4] - 5); /* the end of block 3's payload: events 50..69 */
    struct storage_partition_total t = reader_totals(fx->dir);
    assert_int_equal(t.count, 120);
    assert_int_equal(t.damaged_blocks, 1);
    struct storage_fsck_report report;
    assert_int_equal(fsck(fx->dir, false, &report), 1);
    assert_int_equal(report.blocks_bad, 1);
    assert_int_equal(report.blocks_ok, 6); /* the walk goes on past the damaged block */
    assert_int_equal(fsck(fx->dir, true, &report), 0);
    assert_int_equal(report.quarantined_events, 20);
    assert_int_equal(report.quarantined_bytes, offsets[4] - offsets[3]);
    char text[4096];
    assert_int_equal(quarantine_records(fx->dir, text, sizeof(text)), 1);
    char want[96];
    snprintf(want, sizeof(want), "\"offset\":%llu,\"length\":%llu,", (unsigned long long)offsets[3],
             (unsigned long long)(offsets[4] - offsets[3]));
    assert_non_null(strstr(text, want));
    assert_non_null(strstr(text, "\"source_offset_min\":50,\"source_offset_max\":69"));
    assert_repaired_and_writable(fx, 100);
}

static void test_storage_quarantine_header_damaged_block(void **state)
{
    /* A damaged block header: its events are unknown, so the count leaves them out and says so;
     * repair quarantines the range up to the next block header that passes its CRC (exactly
     * the block), with "events":null, and the blocks after it count again. */
    struct fixture *fx = *state;
    committed_partition(fx, 120);
    segment_path(fx->dir, DAY0, 0, 1, fx->path);
    uint64_t offsets[16];
    assert_int_equal(block_offsets(fx->path, offsets, 16), 7); /* 20,20,10,20,20,10,20 */
    file_flip(fx->path, offsets[1] + 30);                      /* inside block 1's fixed header */
    struct storage_partition_total t = reader_totals(fx->dir);
    assert_int_equal(t.count, 100);
    assert_int_equal(t.damaged_blocks, 1);
    struct storage_fsck_report report;
    assert_int_equal(fsck(fx->dir, false, &report), 1);
    assert_int_equal(report.blocks_bad, 1);
    assert_int_equal(report.blocks_ok, 6);
    assert_int_equal(fsck(fx->dir, true, &report), 0);
    assert_int_equal(report.quarantined_events, 0);
    assert_int_equal(report.events_unknown_ranges, 1);
    assert_int_equal(report.quarantined_bytes, offsets[2] - offsets[1]);
    char text[4096];
    assert_int_equal(quarantine_records(fx->dir, text, sizeof(text)), 1);
    assert_non_null(strstr(text, "\"events\":null,\"source_partition\":null"));
    assert_non_null(strstr(text, "\"reason\":\"block header unreadable\""));
    assert_repaired_and_writable(fx, 100);
}

static void test_storage_quarantine_issue_cut_and_garbage(void **state)
{
    /* A torn tail with garbage after it: the segment cut 37 bytes short of its end, then 5 KB
     * of garbage appended. fsck finds it (1); repair quarantines the last block (20 events), cuts
     * the garbage (no valid block in it, so nothing of it is kept) and ends clean (0). */
    struct fixture *fx = *state;
    committed_partition(fx, 120);
    segment_path(fx->dir, DAY0, 0, 1, fx->path);
    uint64_t size = file_size(fx->path);
    file_truncate(fx->path, size - 37);
    uint8_t garbage[5120];
    uint64_t rng = 13;
    for (size_t i = 0; i < sizeof(garbage); i++) {
        garbage[i] = (uint8_t)test_rng_next(&rng);
    }
    file_append(fx->path, garbage, sizeof(garbage));
    struct storage_partition_total t = reader_totals(fx->dir);
    assert_int_equal(t.count, 120);
    assert_int_equal(t.damaged_blocks, 1);
    struct storage_fsck_report report;
    assert_int_equal(fsck(fx->dir, false, &report), 1);
    assert_int_equal(report.blocks_bad, 1);
    assert_int_equal(report.torn_bytes, sizeof(garbage) - 37);
    assert_int_equal(fsck(fx->dir, true, &report), 0);
    assert_int_equal(report.quarantined_blocks, 1);
    assert_int_equal(report.quarantined_events, 20);
    assert_int_equal(report.torn_bytes, 0);
    assert_int_equal(file_size(fx->path), size);
    char text[4096];
    assert_int_equal(quarantine_records(fx->dir, text, sizeof(text)), 1);
    assert_repaired_and_writable(fx, 100);
}

static void test_storage_quarantine_damaged_manifest_middle(void **state)
{
    /* A damaged manifest record between valid ones: plain fsck reports it (1, not a refusal);
     * repair keeps the valid prefix (the first commit, 50 events), copies the damaged MANIFEST
     * and the blocks past the prefix's committed end (70 events, CRC-valid: possibly
     * acknowledged) to quarantine/, and the count after is truth - events_rolled_back. */
    struct fixture *fx = *state;
    committed_partition(fx, 120); /* commits at 50, 100 and 120 events: three 72-byte records */
    char manifest[DS_PATH_MAX];
    snprintf(manifest, sizeof(manifest), "%s/MANIFEST", fx->dir);
    file_flip(manifest, 8 + 72 + 20);
    struct storage_fsck_report report;
    assert_int_equal(fsck(fx->dir, false, &report), 1);
    assert_true(report.manifest_damaged);
    assert_int_equal(report.events_ok, 50);
    assert_int_equal(fsck(fx->dir, true, &report), 0);
    assert_false(report.manifest_damaged);
    assert_int_equal(report.quarantined_events, 0);
    assert_int_equal(report.events_rolled_back, 70);
    assert_int_equal(report.blocks_rolled_back, 4);
    assert_int_equal(report.rolled_back_ranges, 1);
    assert_int_equal(report.events_unknown_ranges, 0);
    char text[4096];
    assert_int_equal(quarantine_records(fx->dir, text, sizeof(text)), 1);
    assert_non_null(strstr(text, "\"committed\":false"));
    assert_non_null(strstr(text, "\"events\":70,\"source_partition\":0,\"source_offset_min\":50,"
                                 "\"source_offset_max\":119"));
    assert_non_null(strstr(text, "\"reason\":\"past the committed end\""));
    assert_repaired_and_writable(fx, 50);
}

static void test_storage_quarantine_survives_rotation(void **state)
{
    /* The skip list lives in the manifest: a rotation's snapshot carries it (format 2), so after
     * many commits past MANIFEST_BYTES_ROTATE the quarantined block stays skipped; a format-1
     * binary refuses such a file as another version (-DS_EFORMAT), checked here by its magic. */
    struct fixture *fx = *state;
    committed_partition(fx, 120);
    segment_path(fx->dir, DAY0, 0, 1, fx->path);
    uint64_t offsets[16];
    assert_int_equal(block_offsets(fx->path, offsets, 16), 7); /* 20,20,10,20,20,10,20 */
    file_flip(fx->path, offsets[4] - 5);
    struct storage_fsck_report report;
    assert_int_equal(fsck(fx->dir, true, &report), 0);
    char manifest[DS_PATH_MAX];
    snprintf(manifest, sizeof(manifest), "%s/MANIFEST", fx->dir);
    size_t len = 0;
    char *data = file_read(manifest, &len);
    assert_memory_equal(data, "DSMANIF2", 8);
    free(data);
    /* Commits that advance every source partition grow the log ~64 KiB each (as in
     * test_storage_manifest_rotation); their events go to another partition. */
    struct storage *st = open_dir(fx->dir, false);
    uint64_t rng = 5;
    uint32_t commits = 0;
    uint64_t max_size = 0;
    bool rotated = false;
    while (!rotated) {
        assert_true(commits < 100);
        for (uint32_t i = 0; i < STORAGE_SOURCES_MAX - 1; i++) {
            struct ds_event e;
            test_event_random_plain(&rng, DAY0, &e);
            struct ds_source src = {.partition = (int32_t)i - 1, .offset = 1000 + commits};
            assert_int_equal(storage_append(st, DAY0, 1, &e, &src), 0);
        }
        assert_int_equal(storage_commit(st), 0);
        commits++;
        uint64_t size = file_size(manifest);
        rotated = size < max_size;
        max_size = size > max_size ? size : max_size;
    }
    storage_close(st);
    data = file_read(manifest, &len);
    assert_memory_equal(data, "DSMANIF2", 8);
    free(data);
    assert_true(commits > 1);
    struct storage_partition_total t = reader_totals(fx->dir);
    assert_int_equal(t.count, 100);
    assert_int_equal(t.damaged_blocks, 0);
    assert_int_equal(fsck(fx->dir, false, &report), 0);
    assert_int_equal(report.quarantined_total, 1);
}

static void test_storage_recovery_garbage_after_committed_end(void **state)
{
    /* Bytes past the committed end (a torn or unacknowledged tail) are invisible to readers,
     * reported by fsck (torn_bytes, exit 1), and cut by the writer's recovery and by --repair;
     * answers stay identical throughout. */
    struct fixture *fx = *state;
    committed_partition(fx, 120);
    segment_path(fx->dir, DAY0, 0, 1, fx->path);
    uint64_t size = file_size(fx->path);
    uint8_t garbage[777];
    uint64_t rng = 3;
    for (size_t i = 0; i < sizeof(garbage); i++) {
        garbage[i] = (uint8_t)test_rng_next(&rng);
    }
    file_append(fx->path, garbage, sizeof(garbage));

    struct storage *reader = open_dir(fx->dir, true);
    assert_matches(reader, fx->m);
    storage_close(reader);
    struct storage_fsck_report report;
    assert_int_equal(fsck(fx->dir, false, &report), 1);
    assert_int_equal(report.torn_bytes, sizeof(garbage));
    /* One line per problem in the report file. */
    FILE *out = tmpfile();
    assert_non_null(out);
    struct storage_fsck_options options = {.repair = false, .report_file = out};
    assert_int_equal(storage_fsck(fx->dir, &options, &report), 1);
    char text[1024] = "";
    rewind(out);
    text[fread(text, 1, sizeof(text) - 1, out)] = '\0';
    fclose(out);
    assert_non_null(strstr(text, "00000001.seg: 777 bytes past the committed end"));
    assert_int_equal(report.orphan_segments, 0);
    assert_int_equal(report.blocks_bad, 0);
    assert_int_equal(fsck(fx->dir, true, &report), 0);
    assert_true(report.repaired >= 1);
    assert_int_equal(report.torn_bytes, 0);
    assert_int_equal(file_size(fx->path), size);
    assert_reopen_matches(fx->dir, fx->m);

    /* The writer's own recovery cuts it too. */
    file_append(fx->path, garbage, sizeof(garbage));
    struct storage *st = open_dir(fx->dir, false);
    assert_int_equal(file_size(fx->path), size);
    assert_matches(st, fx->m);
    storage_close(st);
    assert_int_equal(fsck(fx->dir, false, &report), 0);
}

static void test_storage_recovery_orphan_segment(void **state)
{
    /* Segment files no commit reached (a higher id, or a partition the manifest never named)
     * are reported as orphans and removed by recovery and --repair; answers are unchanged. */
    struct fixture *fx = *state;
    committed_partition(fx, 60);
    segment_path(fx->dir, DAY0, 0, 1, fx->path);
    size_t len = 0;
    void *copy = file_read(fx->path, &len);
    char orphan[DS_PATH_MAX];
    segment_path(fx->dir, DAY0, 0, 2, orphan);
    file_write(orphan, copy, len);
    char stranger[DS_PATH_MAX];
    segment_path(fx->dir, DAY0, 0, 1, stranger);
    char *slash = strstr(stranger, "/0/00000001.seg");
    assert_non_null(slash);
    strcpy(slash, "/5");
    assert_int_equal(mkdir(stranger, 0755), 0);
    strcat(stranger, "/00000001.seg");
    file_write(stranger, copy, len);
    free(copy);

    struct storage_fsck_report report;
    assert_int_equal(fsck(fx->dir, false, &report), 1);
    assert_int_equal(report.orphan_segments, 2);
    assert_int_equal(report.torn_bytes, 0);
    assert_int_equal(fsck(fx->dir, true, &report), 0);
    assert_int_equal(report.repaired, 2);
    assert_false(file_exists(orphan));
    assert_false(file_exists(stranger));
    assert_true(file_exists(fx->path));
    assert_reopen_matches(fx->dir, fx->m);

    /* The writer's recovery removes an orphan by itself. */
    file_write(orphan, "x", 1);
    struct storage *st = open_dir(fx->dir, false);
    assert_false(file_exists(orphan));
    assert_matches(st, fx->m);
    /* While a writer runs, a segment of a known partition past the manifest is its work in
     * progress (a new segment, a compaction's rewrite), not damage; once it has stopped, the
     * same file is an orphan again. */
    file_write(orphan, "x", 1);
    assert_int_equal(fsck(fx->dir, false, &report), 0);
    assert_int_equal(report.orphan_segments, 0);
    storage_close(st);
    assert_int_equal(fsck(fx->dir, false, &report), 1);
    assert_int_equal(report.orphan_segments, 1);
}

static void test_storage_recovery_torn_manifest_tail(void **state)
{
    /* Half a manifest record at the end (a torn commit) is reported by fsck, cut by repair and
     * by the writer, and the writer then commits after the cut as usual. */
    struct fixture *fx = *state;
    committed_partition(fx, 60);
    char manifest[DS_PATH_MAX];
    snprintf(manifest, sizeof(manifest), "%s/MANIFEST", fx->dir);
    uint64_t size = file_size(manifest);
    struct manifest_part part = {.day = DAY0, .shard = 0, .segment_id = 1, .end = 1u << 30};
    uint8_t record[256];
    int64_t n = manifest_encode(MANIFEST_DELTA, 1000, &part, 1, NULL, 0, record, sizeof(record));
    assert_true(n > 0);
    size_t half = (size_t)n / 2;
    file_append(manifest, record, half);

    struct storage_fsck_report report;
    assert_int_equal(fsck(fx->dir, false, &report), 1);
    assert_int_equal(report.torn_bytes, half);
    assert_int_equal(fsck(fx->dir, true, &report), 0);
    assert_int_equal(file_size(manifest), size);
    assert_reopen_matches(fx->dir, fx->m);

    file_append(manifest, record, half);
    struct storage *st = open_dir(fx->dir, false);
    assert_int_equal(file_size(manifest), size);
    assert_matches(st, fx->m);
    uint64_t rng = 9;
    workload(st, fx->m, &rng, 30, 1, 2, 0, true);
    storage_close(st);
    assert_reopen_matches(fx->dir, fx->m);
    assert_int_equal(fsck(fx->dir, false, &report), 0);
}

static void test_storage_recovery_damaged_manifest_refused(void **state)
{
    /* A damaged manifest record followed by a valid one (acknowledged commits damaged) fails the
     * open with -DS_ECORRUPT (fsck reports it, --repair keeps the valid prefix); a manifest of
     * another format version fails with -DS_EFORMAT. */
    struct fixture *fx = *state;
    committed_partition(fx, 120); /* three commits: three records */
    char manifest[DS_PATH_MAX];
    snprintf(manifest, sizeof(manifest), "%s/MANIFEST", fx->dir);
    size_t len = 0;
    uint8_t *data = file_read(manifest, &len);
    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    struct storage *st = NULL;

    data[8 + 20] ^= 0x40; /* inside the first record */
    file_write(manifest, data, len);
    assert_int_equal(storage_open(&cfg, &st), -DS_ECORRUPT);
    cfg.read_only = true;
    assert_int_equal(storage_open(&cfg, &st), -DS_ECORRUPT);
    struct storage_fsck_report report; /* reported, not refused: see the quarantine tests */
    assert_int_equal(fsck(fx->dir, false, &report), 1);
    assert_true(report.manifest_damaged);

    data[8 + 20] ^= 0x40;
    data[7] = '5'; /* "DSMANIF5": a format this binary does not know */
    file_write(manifest, data, len);
    assert_int_equal(storage_open(&cfg, &st), -DS_EFORMAT);
    cfg.read_only = false;
    assert_int_equal(storage_open(&cfg, &st), -DS_EFORMAT);
    assert_null(st);
    free(data);
}

static void test_storage_recovery_missing_manifest_refused(void **state)
{
    /* Segments without a MANIFEST (lost or emptied: the writer creates it before any segment)
     * make the writer's open and a reader's open fail with -DS_ECORRUPT instead of removing
     * every segment as uncommitted or reading as an empty store. fsck --repair refuses a
     * missing MANIFEST (nothing is touched); an emptied one is a MANIFEST damaged before its
     * tail with an empty valid prefix: every block is copied to quarantine/ (60 events) before
     * the segment goes, and the store is clean and empty after. */
    struct fixture *fx = *state;
    committed_partition(fx, 60);
    char manifest[DS_PATH_MAX];
    snprintf(manifest, sizeof(manifest), "%s/MANIFEST", fx->dir);
    size_t len = 0;
    void *saved = file_read(manifest, &len);
    segment_path(fx->dir, DAY0, 0, 1, fx->path);
    uint64_t size = file_size(fx->path);
    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    struct storage_fsck_report report;
    for (int variant = 0; variant < 2; variant++) {
        if (variant == 0) {
            assert_int_equal(unlink(manifest), 0);
        } else {
            file_write(manifest, "", 0);
        }
        struct storage *st = NULL;
        assert_int_equal(storage_open(&cfg, &st), -DS_ECORRUPT);
        cfg.read_only = true;
        assert_int_equal(storage_open(&cfg, &st), -DS_ECORRUPT);
        cfg.read_only = false;
        if (variant == 0) {
            assert_int_equal(fsck(fx->dir, true, &report), -DS_ECORRUPT);
        } else {
            assert_int_equal(fsck(fx->dir, false, &report), 1);
            assert_true(report.manifest_damaged);
        }
        assert_true(file_exists(fx->path));
        assert_int_equal(file_size(fx->path), size);
    }
    assert_int_equal(fsck(fx->dir, true, &report), 0);
    assert_int_equal(report.events_rolled_back, 60);
    assert_int_equal(report.quarantined_events, 0);
    assert_false(file_exists(fx->path));
    char bin[DS_PATH_MAX];
    snprintf(bin, sizeof(bin), "%s/quarantine/2026-01-21.0.00000001.64.bin", fx->dir);
    assert_int_equal(file_size(bin), size - sizeof(struct segment_header));
    assert_int_equal(reader_totals(fx->dir).count, 0);

    file_write(manifest, saved, len); /* the log back: the copy restores the segment */
    free(saved);
    size_t bytes_len = 0;
    uint8_t *bytes = file_read(bin, &bytes_len);
    struct segment_header h = {.magic = SEGMENT_MAGIC,
                               .version = SEGMENT_VERSION,
                               .day = DAY0,
                               .shard = 0,
                               .segment_id = 1};
    h.header_crc = ds_crc32c(0, &h, offsetof(struct segment_header, header_crc));
    file_write(fx->path, &h, sizeof(h));
    file_append(fx->path, bytes, bytes_len);
    free(bytes);
    assert_reopen_matches(fx->dir, fx->m);
}

static void test_storage_recovery_missing_directories(void **state)
{
    /* Committed data whose partition directory, or the whole parts/ tree, is gone makes the
     * writer's open fail with -DS_ECORRUPT (acknowledged data is missing), not a bare errno. */
    struct fixture *fx = *state;
    committed_partition(fx, 60);
    char parts[DS_PATH_MAX];
    snprintf(parts, sizeof(parts), "%s/parts", fx->dir);
    char moved[DS_PATH_MAX];
    snprintf(moved, sizeof(moved), "%s/parts.moved", fx->dir);
    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    struct storage *st = NULL;

    assert_int_equal(rename(parts, moved), 0);
    assert_int_equal(storage_open(&cfg, &st), -DS_ECORRUPT);
    assert_null(st);
    assert_int_equal(rename(moved, parts), 0);

    char day_dir[DS_PATH_MAX];
    snprintf(day_dir, sizeof(day_dir), "%s/parts/2026-01-21", fx->dir);
    snprintf(moved, sizeof(moved), "%s/parts/2026-01-21.moved", fx->dir);
    assert_int_equal(rename(day_dir, moved), 0);
    assert_int_equal(storage_open(&cfg, &st), -DS_ECORRUPT);
    assert_int_equal(rename(moved, day_dir), 0);

    assert_reopen_matches(fx->dir, fx->m);
}

static void test_storage_fsck_ignores_what_recovery_ignores(void **state)
{
    /* Files in a partition directory that are not the engine's segments (no ".seg" name, or
     * segment id 0, which the engine never uses) are left alone by recovery, so fsck must not
     * count them as orphans either: else --repair could never report clean. */
    struct fixture *fx = *state;
    committed_partition(fx, 60);
    char junk[DS_PATH_MAX];
    segment_path(fx->dir, DAY0, 0, 0, junk);
    file_write(junk, "junk", 4);
    char notes[DS_PATH_MAX];
    segment_path(fx->dir, DAY0, 0, 1, notes);
    strcat(notes, ".bak");
    file_write(notes, "junk", 4);
    /* The same in a partition directory the manifest never named. */
    char stray[DS_PATH_MAX];
    segment_path(fx->dir, DAY0, 7, 0, stray);
    char *slash = strrchr(stray, '/');
    *slash = '\0';
    assert_int_equal(mkdir(stray, 0755), 0);
    *slash = '/';
    file_write(stray, "junk", 4);
    struct storage_fsck_report report;
    assert_int_equal(fsck(fx->dir, true, &report), 0);
    assert_int_equal(report.orphan_segments, 0);
    assert_int_equal(fsck(fx->dir, false, &report), 0);
    assert_reopen_matches(fx->dir, fx->m);
    assert_true(file_exists(junk));
    assert_true(file_exists(stray));
}

/* ---- block and segment shapes -------------------------------------------------------------- */

static void test_storage_segment_roll_tiny_segments(void **state)
{
    /* With 4 KiB segments, many blocks roll over many segment files; every event stays readable,
     * reopen answers the same, and fsck counts every segment and block as sound. */
    struct fixture *fx = *state;
    uint64_t rng = test_seed();
    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    cfg.segment_bytes_max = 4096;
    cfg.block_events_max = 16;
    struct storage *st = open_with(&cfg);
    workload(st, fx->m, &rng, 2500, 1, 2, 6, true);
    assert_matches(st, fx->m);
    storage_close(st);
    uint32_t segments = count_segments(fx->dir, DAY0, 0) + count_segments(fx->dir, DAY0, 1);
    assert_true(segments > 10);
    for (uint32_t shard = 0; shard < 2; shard++) {
        for (uint32_t id = 1; id <= count_segments(fx->dir, DAY0, shard); id++) {
            segment_path(fx->dir, DAY0, shard, id, fx->path);
            assert_true(file_size(fx->path) <= 4096);
        }
    }
    assert_reopen_matches(fx->dir, fx->m);
    struct storage_fsck_report report;
    assert_int_equal(fsck(fx->dir, false, &report), 0);
    assert_int_equal(report.segments, segments);
    assert_int_equal(report.events_ok, model_events(fx->m));

    /* More commits after the reopen continue in the last segment and roll on. */
    st = open_with(&cfg);
    workload(st, fx->m, &rng, 500, 1, 2, 2, true);
    storage_close(st);
    assert_reopen_matches(fx->dir, fx->m);
}

/* ---- directory durability ------------------------------------------------------------------ */

/* Syncs of one directory (rel under the data directory, "" for the data directory itself). */
struct dir_syncs {
    const char *rel;
    uint32_t syncs;
};

static void assert_dir_syncs(struct fake_io *fake, const char *dir, const struct dir_syncs *want,
                             size_t count, uint32_t total)
{
    for (size_t i = 0; i < count; i++) {
        char path[DS_PATH_MAX];
        snprintf(path, sizeof(path), "%s%s%s", dir, want[i].rel[0] != '\0' ? "/" : "", want[i].rel);
        uint32_t got = fake_io_dir_syncs(fake, path);
        if (got != want[i].syncs) {
            print_error("%s: %u directory syncs, expected %u\n", path, got, want[i].syncs);
        }
        assert_int_equal(got, want[i].syncs);
    }
    assert_int_equal(fake_io_dir_syncs_total(fake), total);
}

/* Appends one random event to (day, shard) through storage and model. */
static void append_one(struct storage *st, struct model *m, uint64_t *rng, int32_t day,
                       uint32_t shard)
{
    struct ds_event e;
    test_event_random_plain(rng, day, &e);
    append_ok(st, m, day, shard, &e, NULL);
}

static void test_storage_commit_syncs_each_new_directory_once(void **state)
{
    /* A commit syncs, through the I/O interface (so that the fault injector reaches them) and
     * in the flush that syncs its segments, every directory that got an entry since the last
     * commit: each new partition directory (its segment), each day directory that got a
     * partition (once, however many), parts/ and, the first time, the data directory. A commit
     * that creates nothing syncs no directory; a segment roll syncs its partition's only. */
    struct fixture *fx = *state;
    struct fake_io *fake = NULL;
    assert_int_equal(fake_io_create(&fake), 0);
    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    cfg.io = fake_io_base(fake);
    cfg.segment_bytes_max = 4096;
    cfg.block_events_max = 16;
    struct storage *st = open_with(&cfg);
    uint64_t rng = test_seed();
    assert_int_equal(fake_io_dir_syncs_total(fake), 0);

    for (uint32_t shard = 0; shard < 3; shard++) {
        append_one(st, fx->m, &rng, DAY0, shard);
    }
    append_one(st, fx->m, &rng, DAY0 + 1, 0);
    commit_ok(st, fx->m);
    const struct dir_syncs first[] = {
        {"parts/2026-01-21/0", 1},
        {"parts/2026-01-21/1", 1},
        {"parts/2026-01-21/2", 1},
        {"parts/2026-01-22/0", 1},
        {"parts/2026-01-21", 1},
        {"parts/2026-01-22", 1},
        {"parts", 1},
        {"", 1},
    };
    assert_dir_syncs(fake, fx->dir, first, sizeof(first) / sizeof(first[0]), 8);

    /* The same partitions again: no directory got an entry. */
    for (uint32_t shard = 0; shard < 3; shard++) {
        append_one(st, fx->m, &rng, DAY0, shard);
    }
    append_one(st, fx->m, &rng, DAY0 + 1, 0);
    commit_ok(st, fx->m);
    assert_dir_syncs(fake, fx->dir, first, sizeof(first) / sizeof(first[0]), 8);

    /* One new partition beside an old one: its directory, its day's and parts/, not DIR. */
    append_one(st, fx->m, &rng, DAY0, 3);
    append_one(st, fx->m, &rng, DAY0, 0);
    commit_ok(st, fx->m);
    const struct dir_syncs grown[] = {
        {"parts/2026-01-21/3", 1},
        {"parts/2026-01-21/0", 1},
        {"parts/2026-01-21", 2},
        {"parts/2026-01-22", 1},
        {"parts", 2},
        {"", 1},
    };
    assert_dir_syncs(fake, fx->dir, grown, sizeof(grown) / sizeof(grown[0]), 11);

    /* Rolls over several new segments of one partition in one commit: its directory once. */
    for (uint32_t i = 0; i < 300; i++) {
        append_one(st, fx->m, &rng, DAY0 + 1, 0);
    }
    commit_ok(st, fx->m);
    assert_true(count_segments(fx->dir, DAY0 + 1, 0) > 2);
    const struct dir_syncs rolled[] = {
        {"parts/2026-01-22/0", 2}, {"parts/2026-01-22", 1}, {"parts", 2}, {"", 1}};
    assert_dir_syncs(fake, fx->dir, rolled, sizeof(rolled) / sizeof(rolled[0]), 12);
    storage_close(st);
    fake_io_destroy(fake);
    assert_reopen_matches(fx->dir, fx->m);

    /* A writer opened later makes parts/ and DIR durable again with its first new partition:
     * it cannot know that the writer before it did (a crash may have come first). */
    assert_int_equal(fake_io_create(&fake), 0);
    cfg.io = fake_io_base(fake);
    st = open_with(&cfg);
    append_one(st, fx->m, &rng, DAY0 + 2, 0);
    append_one(st, fx->m, &rng, DAY0, 0);
    commit_ok(st, fx->m);
    const struct dir_syncs reopened[] = {
        {"parts/2026-01-23/0", 1}, {"parts/2026-01-23", 1}, {"parts", 1}, {"", 1}};
    assert_dir_syncs(fake, fx->dir, reopened, sizeof(reopened) / sizeof(reopened[0]), 4);
    storage_close(st);
    fake_io_destroy(fake);
    assert_reopen_matches(fx->dir, fx->m);
}

static void test_storage_commit_syncs_directories_past_its_limits(void **state)
{
    /* One commit creating a partition in each of 70 days: past STORE_SYNC_DAYS_MAX (64) days
     * the further days' directories are synced at creation (not through the I/O interface),
     * and past 64 open directory fds the commit flushes and closes them before opening more.
     * Every directory is still synced and the data reads back. */
    struct fixture *fx = *state;
    struct fake_io *fake = NULL;
    assert_int_equal(fake_io_create(&fake), 0);
    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    cfg.io = fake_io_base(fake);
    struct storage *st = open_with(&cfg);
    uint64_t rng = test_seed();
    for (int32_t day = 0; day < 70; day++) {
        append_one(st, fx->m, &rng, DAY0 + day, 0);
    }
    commit_ok(st, fx->m);
    /* 70 partition directories, 64 day directories (6 synced at creation), parts/, DIR. */
    const struct dir_syncs some[] = {
        {"parts/2026-01-21/0", 1},
        {"parts/2026-03-31/0", 1},
        {"parts/2026-01-21", 1},
        {"parts/2026-03-25", 1},
        {"parts/2026-03-26", 0},
        {"parts", 1},
        {"", 1},
    };
    assert_dir_syncs(fake, fx->dir, some, sizeof(some) / sizeof(some[0]), 70 + 64 + 2);
    storage_close(st);
    fake_io_destroy(fake);
    assert_reopen_matches(fx->dir, fx->m);
}

/* One run for test_storage_commit_fails_when_a_directory_sync_fails: a first commit of one
 * partition, then a second creating two partitions (a new day among them) with its n-th I/O
 * failing (0: none), a power cut of mode, and a reopen that must show the first commit, and the
 * second only when it was acknowledged. Returns the second commit's I/O operations; *dir_syncs
 * gets how many of them were directory syncs. */
static uint64_t dir_fault_run(struct fixture *fx, uint64_t n, enum fake_crash_mode mode,
                              uint32_t *dir_syncs)
{
    snprintf(fx->path, sizeof(fx->path), "%s/dirs-%llu-%d", fx->dir, (unsigned long long)n,
             (int)mode);
    struct model *m = model_new();
    struct fake_io *fake = NULL;
    assert_int_equal(fake_io_create(&fake), 0);
    struct storage_config cfg;
    config_init(&cfg, fx->path);
    cfg.io = fake_io_base(fake);
    struct storage *st = open_with(&cfg);
    uint64_t rng = n + 11;
    append_one(st, m, &rng, DAY0, 0);
    commit_ok(st, m);
    append_one(st, m, &rng, DAY0, 1);
    append_one(st, m, &rng, DAY0 + 1, 0);
    uint64_t ops_before = fake_io_ops(fake);
    uint32_t dirs_before = fake_io_dir_syncs_total(fake);
    fake_io_fail_nth(fake, n, -EIO);
    int rc = storage_commit(st);
    uint64_t ops = fake_io_ops(fake) - ops_before;
    *dir_syncs = fake_io_dir_syncs_total(fake) - dirs_before;
    if (n == 0) {
        assert_int_equal(rc, 0);
        model_commit(m);
    } else {
        /* Never acknowledged, whichever file or directory failed. */
        assert_true(rc < 0);
        model_drop_pending(m);
    }
    storage_close(st);
    assert_int_equal(fake_io_crash(fake, n * 17 + 3, mode), 0);
    fake_io_destroy(fake);
    assert_reopen_matches(fx->path, m);
    model_free(m);
    return ops;
}

static void test_storage_commit_fails_when_a_directory_sync_fails(void **state)
{
    /* Fail each I/O operation of a commit that creates partitions in turn (the segments'
     * writes and syncs and the syncs of their new directories), then cut the power: the commit
     * is never acknowledged, and a reopened directory holds exactly the commit before it. */
    struct fixture *fx = *state;
    uint32_t dir_syncs = 0;
    uint64_t total = dir_fault_run(fx, 0, FAKE_CRASH_CLEAN, &dir_syncs);
    assert_int_equal(dir_syncs, 5); /* 2026-01-21/1, 2026-01-22/0, both days, parts/ */
    for (uint64_t n = 1; n <= total; n++) {
        dir_fault_run(fx, n, FAKE_CRASH_CLEAN, &dir_syncs);
        dir_fault_run(fx, n, FAKE_CRASH_TORN, &dir_syncs);
    }
    assert_true(total >= 2 * 3 + 5 + 2); /* 2 segment headers + blocks + syncs, dirs, record */
}

/* Collects events until a budget runs out, then refuses (a follower stopping mid-block). */
struct follow_buf {
    struct evvec events;
    size_t budget;
};

static int follow_collect(const struct ds_event *event, void *user)
{
    struct follow_buf *b = user;
    if (b->budget == 0) {
        return 1;
    }
    b->budget--;
    evvec_push(&b->events, event);
    return 0;
}

static void assert_events_equal(const struct ds_event *a, const struct ds_event *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        test_event_assert_equal(&a[i], &b[i]);
    }
}

static void test_storage_scan_from_follows_commits(void **state)
{
    /* A reader follows a writer commit by commit from saved positions, across segment rolls:
     * what it gathers equals the full scan and the model, each event once. */
    struct fixture *fx = *state;
    uint64_t rng = test_seed();
    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    cfg.segment_bytes_max = 4096;
    cfg.block_events_max = 16;
    struct storage *st = open_with(&cfg);
    struct storage *reader = open_dir(fx->dir, true);
    struct storage_position pos[2] = {{0, 0}, {0, 0}};
    struct follow_buf got[2] = {{.budget = SIZE_MAX}, {.budget = SIZE_MAX}};
    for (int round = 0; round < 12; round++) {
        workload(st, fx->m, &rng, 150, 1, 2, 1, true);
        assert_int_equal(storage_refresh(reader), 0);
        for (uint32_t shard = 0; shard < 2; shard++) {
            assert_int_equal(storage_partition_scan_from(reader, DAY0, shard, &pos[shard],
                                                         follow_collect, &got[shard]),
                             0);
            /* Nothing new: a second call adds nothing. */
            size_t before = got[shard].events.n;
            assert_int_equal(storage_partition_scan_from(reader, DAY0, shard, &pos[shard],
                                                         follow_collect, &got[shard]),
                             0);
            assert_int_equal(got[shard].events.n, before);
        }
    }
    assert_true(count_segments(fx->dir, DAY0, 0) > 3);
    for (uint32_t shard = 0; shard < 2; shard++) {
        const struct mpart *mp = model_part(fx->m, DAY0, shard);
        assert_int_equal(got[shard].events.n, mp->committed.n);
        assert_events_equal(got[shard].events.v, mp->committed.v, mp->committed.n);
        evvec_free(&got[shard].events);
    }
    /* A position beyond what the handle knows is refused, not read. */
    struct storage_position far = {.segment_id = pos[0].segment_id + 1, .offset = 64};
    assert_int_equal(storage_partition_scan_from(reader, DAY0, 0, &far, follow_collect,
                                                 &(struct follow_buf){.budget = 1}),
                     -ERANGE);
    storage_close(reader);
    storage_close(st);
}

static void test_storage_scan_from_stop_resumes_at_block_start(void **state)
{
    /* A follower that stops after k events (mid-block) resumes at the start of the unfinished
     * block: the first call's events up to that block plus the resumed scan are exactly the
     * partition, and what the first call saw of the unfinished block comes again. */
    struct fixture *fx = *state;
    uint64_t rng = test_seed();
    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    cfg.segment_bytes_max = 4096;
    cfg.block_events_max = 16;
    struct storage *st = open_with(&cfg);
    workload(st, fx->m, &rng, 400, 1, 1, 5, true);
    const struct mpart *mp = model_part(fx->m, DAY0, 0);
    size_t all = mp->committed.n;
    for (size_t k = 0; k < all; k += 1 + (size_t)test_rng_below(&rng, 23)) {
        struct storage_position pos = {0, 0};
        struct follow_buf first = {.budget = k};
        int rc = storage_partition_scan_from(st, DAY0, 0, &pos, follow_collect, &first);
        assert_int_equal(rc, 1);
        assert_int_equal(first.events.n, k);
        struct follow_buf rest = {.budget = SIZE_MAX};
        assert_int_equal(storage_partition_scan_from(st, DAY0, 0, &pos, follow_collect, &rest), 0);
        assert_true(rest.events.n <= all && rest.events.n >= all - k);
        size_t done = all - rest.events.n; /* events of the blocks the first call finished */
        assert_true(done <= k && k - done < 16);
        assert_events_equal(first.events.v, mp->committed.v, k);
        assert_events_equal(rest.events.v, mp->committed.v + done, rest.events.n);
        evvec_free(&first.events);
        evvec_free(&rest.events);
    }
    storage_close(st);
}

static void test_storage_small_blocks_many_per_commit(void **state)
{
    /* block_events_max 7 seals full blocks while appending: 100 events in one commit make
     * ceil(100 / 7) = 15 blocks, all read back. */
    struct fixture *fx = *state;
    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    cfg.block_events_max = 7;
    struct storage *st = open_with(&cfg);
    uint64_t rng = test_seed();
    for (int i = 0; i < 100; i++) {
        struct ds_event e;
        test_event_random_plain(&rng, DAY0, &e);
        append_ok(st, fx->m, DAY0, 3, &e, NULL);
    }
    commit_ok(st, fx->m);
    struct storage_partition_total t;
    assert_int_equal(storage_partition_totals(st, DAY0, 3, NULL, 0, &t), 0);
    assert_int_equal(t.blocks, 15);
    assert_int_equal(t.count, 100);
    assert_matches(st, fx->m);
    storage_close(st);
    assert_reopen_matches(fx->dir, fx->m);
}

/* The i-th event of the arena test, regenerated for checking instead of kept in memory: ids of
 * 64 random bytes, so that blocks hardly compress and fill the write arena. */
static void arena_event(uint32_t partition, uint32_t i, struct ds_event *e)
{
    memset(e, 0, sizeof(*e));
    uint64_t rng = ((uint64_t)partition << 32) | i;
    struct ds_id *ids[2] = {&e->order_id, &e->customer_id};
    for (int k = 0; k < 2; k++) {
        ids[k]->is_string = true;
        ids[k]->len = DS_ID_BYTES_MAX;
        for (size_t b = 0; b < DS_ID_BYTES_MAX; b += 8) {
            uint64_t bits = test_rng_next(&rng);
            memcpy(ids[k]->text + b, &bits, 8);
        }
    }
    e->ts_ms = (int64_t)DAY0 * DAY_MS + (int64_t)i * 1000 + partition;
    e->amount_units = (int64_t)(test_rng_next(&rng) >> 1);
    test_event_set_status(e, test_status_pool[i % TEST_STATUS_PLAIN_COUNT]);
}

struct arena_check {
    uint32_t partition;
    uint32_t next;
    bool ok;
};

static int arena_check_event(const struct ds_event *event, void *user)
{
    struct arena_check *c = user;
    struct ds_event want;
    arena_event(c->partition, c->next++, &want);
    c->ok = c->ok && test_event_equal(&want, event);
    return 0;
}

static void test_storage_commit_larger_than_arena(void **state)
{
    /* One commit of ~27 MB of nearly incompressible blocks (random 64-byte ids: a block is
     * sealed at 1 MiB of strings, 8065 events) overflows the 24 MiB write arena: it is flushed
     * in the middle of the appends and every event still reads back. */
    struct fixture *fx = *state;
    struct storage *st = open_dir(fx->dir, false);
    const uint32_t partitions = 3;
    const uint32_t per_partition = 70000;
    for (uint32_t i = 0; i < per_partition; i++) {
        for (uint32_t p = 0; p < partitions; p++) {
            struct ds_event e;
            arena_event(p, i, &e);
            struct ds_source src = {.partition = (int32_t)p, .offset = i};
            assert_int_equal(storage_append(st, DAY0, p, &e, &src), 0);
        }
    }
    assert_int_equal(storage_commit(st), 0);
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t p = 0; p < partitions; p++) {
            struct storage_partition_total t;
            assert_int_equal(storage_partition_totals(st, DAY0, p, NULL, 0, &t), 0);
            assert_int_equal(t.count, per_partition);
            assert_int_equal(t.blocks, 9); /* ceil(70000 / 8065) */
            assert_true(t.bytes > 8u * 1000000u);
            struct arena_check check = {.partition = p, .ok = true};
            assert_int_equal(storage_partition_scan(st, DAY0, p, arena_check_event, &check), 0);
            assert_true(check.ok);
            assert_int_equal(check.next, per_partition);
            assert_true(storage_source_next(st, (int32_t)p) == per_partition);
        }
        storage_close(st);
        st = open_dir(fx->dir, pass == 0);
    }
    storage_close(st);
}

static void test_storage_status_overflow_slow_path(void **state)
{
    /* A partition with more distinct statuses than a summary names: totals filtered on a rare
     * status (only in the summary's "other" row) are still exact, read from block headers, on
     * the writer, after reopen and on a reader. */
    struct fixture *fx = *state;
    struct storage *st = open_dir(fx->dir, false);
    uint64_t rng = test_seed();
    for (int round = 0; round < 3; round++) {
        for (uint32_t i = 0; i < 400; i++) {
            struct ds_event e;
            test_event_random_plain(&rng, DAY0, &e);
            /* Common statuses first; the rare ones (index >= 32) now and then. */
            uint32_t index = test_rng_below(&rng, 10) == 0
                                 ? STORAGE_SUMMARY_STATUS_MAX + (uint32_t)test_rng_below(&rng, 8)
                                 : (uint32_t)test_rng_below(&rng, STORAGE_SUMMARY_STATUS_MAX);
            if (round == 0 && i < STORAGE_SUMMARY_STATUS_MAX) {
                index = i; /* every common one is seen before any rare one */
            }
            char status[16];
            snprintf(status, sizeof(status), "status-%u", index);
            test_event_set_status(&e, status);
            append_ok(st, fx->m, DAY0, 0, &e, NULL);
        }
        commit_ok(st, fx->m);
        assert_matches(st, fx->m);
    }
    storage_close(st);
    assert_reopen_matches(fx->dir, fx->m);
}

static void test_storage_open_bytes_budget_many_partitions(void **state)
{
    /* With the smallest open-block budget (1 MiB) and many partitions taking events at once,
     * blocks are sealed early to stay under it, and every event is still stored exactly. */
    struct fixture *fx = *state;
    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    cfg.open_bytes_max = 1u << 20;
    struct storage *st = open_with(&cfg);
    uint64_t rng = test_seed();
    workload(st, fx->m, &rng, 6000, 10, 4, 2, true);
    assert_matches(st, fx->m);
    storage_close(st);
    assert_reopen_matches(fx->dir, fx->m);
}

static void test_storage_budget_counts_growth_of_refused_add(void **state)
{
    /* An add refused for a full status table may still have grown the block's row buffer; that
     * memory must be counted in the open-block total, or freeing the block later takes more off
     * the total than was ever added: it wraps below zero, and from then on every append seals a
     * one-event block to "get under budget". */
    struct fixture *fx = *state;
    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    cfg.open_bytes_max = 2u << 20;
    struct storage *st = open_with(&cfg);
    /* 32768 events with 32 statuses fill a 32768-row buffer exactly (1.3 MB, within budget); a
     * 33rd status then grows it to 65535 rows before the add is refused and the block sealed. */
    const uint32_t fill = 32768;
    for (uint32_t i = 0; i <= fill; i++) {
        struct ds_event e;
        memset(&e, 0, sizeof(e));
        e.order_id.value = i + 1;
        e.customer_id.value = 1;
        e.ts_ms = (int64_t)DAY0 * DAY_MS + i;
        char status[16];
        snprintf(status, sizeof(status), "s%u", i < fill ? i % STORAGE_BLOCK_STATUS_MAX : 99);
        test_event_set_status(&e, status);
        append_ok(st, fx->m, DAY0, 0, &e, NULL);
    }
    commit_ok(st, fx->m);
    /* Partition 1 only: partition 0's block is released (freed: over half the budget). */
    struct ds_event e;
    uint64_t rng = 1;
    test_event_random_plain(&rng, DAY0, &e);
    append_ok(st, fx->m, DAY0, 1, &e, NULL);
    commit_ok(st, fx->m);
    for (int i = 0; i < 100; i++) {
        test_event_random_plain(&rng, DAY0, &e);
        append_ok(st, fx->m, DAY0, 1, &e, NULL);
    }
    commit_ok(st, fx->m);
    struct storage_partition_total t;
    assert_int_equal(storage_partition_totals(st, DAY0, 1, NULL, 0, &t), 0);
    assert_int_equal(t.count, 101);
    assert_int_equal(t.blocks, 2); /* one per commit */
    assert_matches(st, fx->m);
    storage_close(st);
}

/* ---- writers and readers ------------------------------------------------------------------- */

static void test_storage_second_writer_locked(void **state)
{
    /* A second writer of the same directory is refused with -DS_ELOCKED while the first is
     * open, and gets in once it closed. */
    struct fixture *fx = *state;
    struct storage *st = open_dir(fx->dir, false);
    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    struct storage *second = NULL;
    assert_int_equal(storage_open(&cfg, &second), -DS_ELOCKED);
    assert_null(second);
    storage_close(st);
    second = open_with(&cfg);
    storage_close(second);
}

static void test_storage_reader_beside_writer(void **state)
{
    /* A read-only opener beside a live writer sees exactly the committed state (not pending
     * appends, not blocks already written but uncommitted); storage_refresh shows later
     * commits, its partition summaries extending incrementally. */
    struct fixture *fx = *state;
    uint64_t rng = test_seed();
    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    cfg.block_events_max = 8;
    struct storage *writer = open_with(&cfg);
    struct storage *reader = open_dir(fx->dir, true);
    assert_int_equal(storage_refresh(reader), 0);
    assert_matches(reader, fx->m); /* empty */
    workload(writer, fx->m, &rng, 300, 2, 2, 0, true);
    workload(writer, fx->m, &rng, 100, 2, 2, 0, false);
    struct model *empty = model_new();
    assert_matches(reader, empty); /* not refreshed: still the view of its last load */
    model_free(empty);
    storage_close(reader);
    reader = open_dir(fx->dir, true);
    assert_matches(reader, fx->m); /* committed only */
    for (int round = 0; round < 3; round++) {
        commit_ok(writer, fx->m);
        assert_int_equal(storage_refresh(reader), 0);
        assert_matches(reader, fx->m);
        assert_int_equal(storage_refresh(reader), 0); /* nothing new: a no-op */
        workload(writer, fx->m, &rng, 150, 3, 2, 0, false);
        assert_matches(reader, fx->m);
    }
    storage_close(writer);
    model_drop_pending(fx->m);
    assert_int_equal(storage_refresh(reader), 0);
    assert_matches(reader, fx->m);
    storage_close(reader);
}

static void test_storage_reader_of_no_store_refused(void **state)
{
    /* A reader is pointed at a store, never at nothing: a missing directory is -ENOENT, a
     * directory that holds no store -DS_ENOSTORE (a mistyped path must not read as an empty
     * store), and neither creates anything. Only a writer makes a store. */
    struct fixture *fx = *state;
    snprintf(fx->path, sizeof(fx->path), "%s/none", fx->dir);
    struct storage *st = NULL;
    assert_int_equal(storage_open_reader(fx->path, &st), -ENOENT);
    assert_null(st);
    assert_false(file_exists(fx->path));
    assert_int_equal(mkdir(fx->path, 0755), 0);
    assert_int_equal(storage_open_reader(fx->path, &st), -DS_ENOSTORE);
    char manifest[DS_PATH_MAX + 16];
    snprintf(manifest, sizeof(manifest), "%s/MANIFEST", fx->path);
    assert_false(file_exists(manifest));
    st = open_dir(fx->path, false); /* the writer creates the store */
    storage_close(st);
    st = open_dir(fx->path, true);
    assert_matches(st, fx->m);
    assert_int_equal(storage_refresh(st), 0);
    storage_close(st);
}

static void test_storage_source_advance_and_deadletter_commit_together(void **state)
{
    /* A dead-lettered event advances its source offset and the dead-letter length with the
     * next commit, atomically with the data; before that commit neither is visible, and the
     * dead-letter partition (-2) is not a source an event may name. */
    struct fixture *fx = *state;
    struct storage *st = open_dir(fx->dir, false);
    assert_int_equal(storage_deadletter_committed(st), 0);
    struct ds_source bad = {.partition = 3, .offset = 41};
    assert_int_equal(storage_source_advance(st, &bad), 0);
    storage_deadletter_set(st, 1234);
    assert_true(storage_source_next(st, 3) == -1);
    assert_int_equal(storage_deadletter_committed(st), 0);
    struct ds_source reserved = {.partition = DS_SOURCE_DEADLETTER, .offset = 1};
    assert_int_equal(storage_source_advance(st, &reserved), -DS_ELIMIT);
    assert_int_equal(storage_commit(st), 0);
    assert_true(storage_source_next(st, 3) == 42);
    assert_int_equal(storage_deadletter_committed(st), 1234);
    /* Set but not committed: a crash keeps the committed length. */
    storage_deadletter_set(st, 9999);
    storage_close(st);
    st = open_dir(fx->dir, false);
    assert_true(storage_source_next(st, 3) == 42);
    assert_int_equal(storage_deadletter_committed(st), 1234);
    storage_close(st);
    struct storage *reader = open_dir(fx->dir, true);
    assert_int_equal(storage_deadletter_committed(reader), 1234);
    storage_close(reader);
}

static void test_storage_source_offsets(void **state)
{
    /* storage_source_next is one past the highest committed offset of each source partition,
     * -1 for one never seen; pending appends do not move it; it survives reopen. */
    struct fixture *fx = *state;
    struct storage *st = open_dir(fx->dir, false);
    for (int32_t p = -1; p < 20; p++) {
        assert_true(storage_source_next(st, p) == -1);
    }
    assert_true(storage_source_next(st, -2) == -1);
    assert_true(storage_source_next(st, (int32_t)STORAGE_SOURCES_MAX) == -1);
    uint64_t rng = 4;
    static const struct ds_source sources[] = {{0, 10},  {0, 12}, {3, 7}, {0, 11},
                                               {-1, 41}, {3, 5},  {14, 0}};
    for (size_t i = 0; i < DS_ARRAY_LEN(sources); i++) {
        struct ds_event e;
        test_event_random_plain(&rng, DAY0, &e);
        append_ok(st, fx->m, DAY0, (uint32_t)i % 2, &e, &sources[i]);
    }
    assert_true(storage_source_next(st, 0) == -1);
    commit_ok(st, fx->m);
    assert_true(storage_source_next(st, 0) == 13);
    assert_true(storage_source_next(st, 3) == 8);
    assert_true(storage_source_next(st, -1) == 42);
    assert_true(storage_source_next(st, 14) == 1);
    assert_true(storage_source_next(st, 1) == -1);
    assert_matches(st, fx->m);
    struct ds_event e;
    test_event_random_plain(&rng, DAY0, &e);
    struct ds_source later = {.partition = 0, .offset = 100};
    append_ok(st, fx->m, DAY0, 0, &e, &later);
    assert_true(storage_source_next(st, 0) == 13);
    storage_close(st);
    model_drop_pending(fx->m);
    st = open_dir(fx->dir, false);
    assert_true(storage_source_next(st, 0) == 13);
    assert_matches(st, fx->m);
    append_ok(st, fx->m, DAY0, 0, &e, &later);
    commit_ok(st, fx->m);
    assert_true(storage_source_next(st, 0) == 101);
    storage_close(st);
    assert_reopen_matches(fx->dir, fx->m);
}

static void test_storage_manifest_rotation(void **state)
{
    /* Commits that each advance all 4095 source partitions grow the manifest ~64 KiB a commit;
     * past 4 MiB it is rotated into one snapshot, and the state (events, totals, every source
     * offset) survives the rotation, a reopen, and a reader's refresh across it. */
    struct fixture *fx = *state;
    char manifest[DS_PATH_MAX];
    snprintf(manifest, sizeof(manifest), "%s/MANIFEST", fx->dir);
    struct storage *st = open_dir(fx->dir, false);
    struct storage *reader = open_dir(fx->dir, true);
    uint64_t max_size = 0;
    bool rotated = false;
    uint64_t count[2] = {0, 0};
    ds_i128 amount[2] = {0, 0};
    uint32_t commits = 0;
    uint32_t after_rotation = 0;
    while (after_rotation < 5) {
        assert_true(commits < 100);
        for (uint32_t s = 0; s < STORAGE_SOURCES_MAX - 1; s++) {
            struct ds_event e;
            memset(&e, 0, sizeof(e));
            e.order_id.value = (int64_t)commits * STORAGE_SOURCES_MAX + s + 1;
            e.customer_id.value = s + 1;
            e.ts_ms = (int64_t)DAY0 * DAY_MS + s;
            e.amount_units = (int64_t)s * 100;
            test_event_set_status(&e, "paid");
            struct ds_source src = {.partition = (int32_t)s - 1, .offset = (int64_t)commits};
            assert_int_equal(storage_append(st, DAY0, s % 2, &e, &src), 0);
            count[s % 2]++;
            amount[s % 2] += e.amount_units;
        }
        assert_int_equal(storage_commit(st), 0);
        commits++;
        uint64_t size = file_size(manifest);
        rotated = rotated || size < max_size;
        after_rotation += rotated;
        max_size = size > max_size ? size : max_size;
        if (commits == 10) {
            assert_int_equal(storage_refresh(reader), 0); /* follows the old file for a while */
        }
    }
    /* Sizes are seen after each commit, rotation included: the largest is just under 4 MiB. */
    assert_true(max_size + 2 * manifest_record_bound(2, STORAGE_SOURCES_MAX) >
                MANIFEST_BYTES_ROTATE);
    assert_true(file_size(manifest) < MANIFEST_BYTES_ROTATE);
    /* The rotated file starts with a snapshot record. */
    size_t len = 0;
    uint8_t *data = file_read(manifest, &len);
    struct manifest_record_header h;
    assert_true(len > 8 + sizeof(h));
    memcpy(&h, data + 8, sizeof(h));
    assert_int_equal(h.kind, MANIFEST_SNAPSHOT);
    free(data);
    assert_int_equal(storage_refresh(reader), 0);
    struct storage *views[2] = {st, reader};
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            storage_close(views[0]);
            storage_close(views[1]);
            views[0] = open_dir(fx->dir, false);
            views[1] = open_dir(fx->dir, true);
        }
        for (int v = 0; v < 2; v++) {
            for (uint32_t shard = 0; shard < 2; shard++) {
                struct storage_partition_total t;
                assert_int_equal(storage_partition_totals(views[v], DAY0, shard, NULL, 0, &t), 0);
                assert_int_equal(t.count, count[shard]);
                assert_true(t.amount_units == amount[shard]);
            }
            for (uint32_t s = 0; s < STORAGE_SOURCES_MAX - 1; s++) {
                assert_true(storage_source_next(views[v], (int32_t)s - 1) == (int64_t)commits);
            }
        }
    }
    storage_close(views[0]);
    storage_close(views[1]);
    struct storage_fsck_report report;
    assert_int_equal(fsck(fx->dir, false, &report), 0);
    assert_int_equal(report.events_ok, count[0] + count[1]);
}

/* ---- the data model ------------------------------------------------------------------------ */

/* DIR/MODEL's bytes as a string ("" when there is none). */
static void model_record(const char *dir, char *dst, size_t dst_capacity)
{
    char path[DS_PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/MODEL", dir);
    dst[0] = '\0';
    if (!file_exists(path)) {
        return;
    }
    size_t len = 0;
    char *data = file_read(path, &len);
    assert_true(len < dst_capacity);
    memcpy(dst, data, len);
    dst[len] = '\0';
    free(data);
}

static void model_record_write(const char *dir, const char *text)
{
    char path[DS_PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/MODEL", dir);
    file_write(path, text, strlen(text));
}

static int open_model(const char *dir, bool read_only, enum storage_model model,
                      struct storage **out)
{
    struct storage_config cfg;
    config_init(&cfg, dir);
    cfg.read_only = read_only;
    cfg.model = model;
    *out = NULL;
    return storage_open(&cfg, out);
}

/* Opens dir with model and checks the model it reports; closes it. */
static void open_model_ok(const char *dir, bool read_only, enum storage_model model,
                          enum storage_model want)
{
    struct storage *st = NULL;
    assert_int_equal(open_model(dir, read_only, model, &st), 0);
    assert_int_equal(storage_model(st), want);
    storage_close(st);
}

/* A writer's explicit model refused before anything is opened: -DS_EUSAGE, and the reason
 * storage_model_check gives contains each of the words. */
static void model_refused(const char *dir, enum storage_model model, const char *word1,
                          const char *word2)
{
    struct storage *st = NULL;
    assert_int_equal(open_model(dir, false, model, &st), -DS_EUSAGE);
    assert_null(st);
    char why[STORAGE_MODEL_WHY_SIZE] = "";
    enum storage_model got = STORAGE_MODEL_RECORDED;
    assert_int_equal(storage_model_check(dir, model, &got, why, sizeof(why)), -DS_EUSAGE);
    assert_int_equal(got, STORAGE_MODEL_RECORDED); /* untouched on failure */
    if (strstr(why, word1) == NULL || strstr(why, word2) == NULL) {
        print_error("reason \"%s\" lacks \"%s\" or \"%s\"\n", why, word1, word2);
        fail();
    }
}

static void test_storage_model_parse_and_config(void **state)
{
    /* The command line's two words and nothing else; a config with an unknown model is a bad
     * config. */
    struct fixture *fx = *state;
    enum storage_model m = STORAGE_MODEL_RECORDED;
    assert_int_equal(storage_model_parse("events", &m), 0);
    assert_int_equal(m, STORAGE_MODEL_EVENTS);
    assert_int_equal(storage_model_parse("orders", &m), 0);
    assert_int_equal(m, STORAGE_MODEL_ORDERS);
    assert_int_equal(storage_model_parse("bogus", &m), -DS_EUSAGE);
    assert_int_equal(storage_model_parse("Events", &m), -DS_EUSAGE);
    assert_int_equal(storage_model_parse("", &m), -DS_EUSAGE);
    assert_int_equal(m, STORAGE_MODEL_ORDERS);
    assert_string_equal(storage_model_name(STORAGE_MODEL_EVENTS), "events");
    assert_string_equal(storage_model_name(STORAGE_MODEL_ORDERS), "orders");
    struct storage_config cfg;
    config_init(&cfg, fx->dir);
    cfg.model = (enum storage_model)7;
    assert_int_equal(storage_config_check(&cfg), -DS_EUSAGE);
}

static void test_storage_model_new_directory_recorded(void **state)
{
    /* A writer creating a directory records its model in MODEL before anything else; without
     * an explicit model that is orders (STORAGE_MODEL_NEW_DEFAULT). Writers, readers and
     * storage_model_check all find it again. */
    struct fixture *fx = *state;
    char text[64];
    snprintf(fx->path, sizeof(fx->path), "%s/default", fx->dir);
    open_model_ok(fx->path, false, STORAGE_MODEL_RECORDED, STORAGE_MODEL_ORDERS);
    model_record(fx->path, text, sizeof(text));
    assert_string_equal(text, "orders\n");
    snprintf(fx->path, sizeof(fx->path), "%s/events", fx->dir);
    open_model_ok(fx->path, false, STORAGE_MODEL_EVENTS, STORAGE_MODEL_EVENTS);
    model_record(fx->path, text, sizeof(text));
    assert_string_equal(text, "events\n");
    open_model_ok(fx->path, false, STORAGE_MODEL_RECORDED, STORAGE_MODEL_EVENTS);
    open_model_ok(fx->path, false, STORAGE_MODEL_EVENTS, STORAGE_MODEL_EVENTS);
    open_model_ok(fx->path, true, STORAGE_MODEL_RECORDED, STORAGE_MODEL_EVENTS);
    char why[STORAGE_MODEL_WHY_SIZE];
    enum storage_model m = STORAGE_MODEL_RECORDED;
    assert_int_equal(storage_model_check(fx->path, STORAGE_MODEL_RECORDED, &m, why, sizeof(why)),
                     0);
    assert_int_equal(m, STORAGE_MODEL_EVENTS);
    /* Data changes nothing: the record is made once. */
    struct storage *st = open_dir(fx->path, false);
    uint64_t rng = 3;
    struct ds_event e;
    test_event_random_plain(&rng, DAY0, &e);
    append_ok(st, fx->m, DAY0, 0, &e, NULL);
    commit_ok(st, fx->m);
    storage_close(st);
    model_record(fx->path, text, sizeof(text));
    assert_string_equal(text, "events\n");
    open_model_ok(fx->path, true, STORAGE_MODEL_RECORDED, STORAGE_MODEL_EVENTS);
}

static void test_storage_model_mismatch_refused(void **state)
{
    /* The model is fixed at creation: an explicit other one is a usage error naming both, for
     * writers and readers, and changes nothing on disk. */
    struct fixture *fx = *state;
    char text[64];
    committed_partition(fx, 30);
    model_refused(fx->dir, STORAGE_MODEL_ORDERS, "holds the events model", "--model orders");
    struct storage *st = NULL;
    assert_int_equal(open_model(fx->dir, true, STORAGE_MODEL_ORDERS, &st), -DS_EUSAGE);
    assert_null(st);
    model_record(fx->dir, text, sizeof(text));
    assert_string_equal(text, "events\n");
    model_record_write(fx->dir, "orders\n");
    model_refused(fx->dir, STORAGE_MODEL_EVENTS, "holds the orders model", "--model events");
    assert_int_equal(open_model(fx->dir, true, STORAGE_MODEL_EVENTS, &st), -DS_EUSAGE);
    model_record_write(fx->dir, "events\n");
    st = open_dir(fx->dir, true);
    assert_matches(st, fx->m);
    storage_close(st);
}

static void test_storage_model_existing_directory_reads_as_events(void **state)
{
    /* A directory made before models were recorded (a MANIFEST or segments, no MODEL) holds
     * events: it reads as events, a writer takes events without writing a record, an explicit
     * events fits and orders is a mismatch that says why. */
    struct fixture *fx = *state;
    committed_partition(fx, 30);
    char path[DS_PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/MODEL", fx->dir);
    assert_int_equal(unlink(path), 0);
    open_model_ok(fx->dir, true, STORAGE_MODEL_RECORDED, STORAGE_MODEL_EVENTS);
    open_model_ok(fx->dir, false, STORAGE_MODEL_RECORDED, STORAGE_MODEL_EVENTS);
    open_model_ok(fx->dir, false, STORAGE_MODEL_EVENTS, STORAGE_MODEL_EVENTS);
    assert_false(file_exists(path));
    model_refused(fx->dir, STORAGE_MODEL_ORDERS, "before models were recorded", "--model orders");
    struct storage *st = open_dir(fx->dir, true);
    assert_matches(st, fx->m);
    storage_close(st);
    /* A store that lost its MANIFEST but kept segments is not new either: no record is made
     * for it, and recovery refuses it as before. */
    snprintf(path, sizeof(path), "%s/MANIFEST", fx->dir);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(open_model(fx->dir, false, STORAGE_MODEL_RECORDED, &st), -DS_ECORRUPT);
    snprintf(path, sizeof(path), "%s/MODEL", fx->dir);
    assert_false(file_exists(path));
}

static void test_storage_model_damaged_record_refused(void **state)
{
    /* A MODEL whose first line is not a model's name is damage (-DS_ECORRUPT for readers and
     * writers, never a guess); bytes after the first line are not read (junk a power cut left
     * past the synced end). */
    struct fixture *fx = *state;
    committed_partition(fx, 10);
    static const char *const bad[] = {"evnts\n", "events", "", "orders events\n", "\n"};
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        model_record_write(fx->dir, bad[i]);
        struct storage *st = NULL;
        assert_int_equal(open_model(fx->dir, true, STORAGE_MODEL_RECORDED, &st), -DS_ECORRUPT);
        assert_int_equal(open_model(fx->dir, false, STORAGE_MODEL_RECORDED, &st), -DS_ECORRUPT);
        char why[STORAGE_MODEL_WHY_SIZE] = "";
        enum storage_model m = STORAGE_MODEL_RECORDED;
        assert_int_equal(storage_model_check(fx->dir, STORAGE_MODEL_EVENTS, &m, why, sizeof(why)),
                         -DS_ECORRUPT);
        assert_non_null(strstr(why, "MODEL"));
    }
    model_record_write(fx->dir, "events\n\x01\xff junk past the synced end");
    open_model_ok(fx->dir, true, STORAGE_MODEL_RECORDED, STORAGE_MODEL_EVENTS);
    open_model_ok(fx->dir, false, STORAGE_MODEL_EVENTS, STORAGE_MODEL_EVENTS);
}

/* One creation with I/O n failing (0: none): a new directory, one event appended and committed
 * (either may fail), a crash of mode. Then the rule: a directory holding anything committed has
 * its complete MODEL, and a writer opens it (recovery), with the model events, recorded.
 * Returns the operations the run issued. */
static uint64_t model_crash_run(struct fixture *fx, uint64_t n, enum fake_crash_mode mode,
                                bool *reached_model, bool *committed)
{
    snprintf(fx->path, sizeof(fx->path), "%s/crash-%llu-%d", fx->dir, (unsigned long long)n,
             (int)mode);
    struct fake_io *fake = NULL;
    assert_int_equal(fake_io_create(&fake), 0);
    fake_io_fail_nth(fake, n, -EIO);
    struct storage_config cfg;
    config_init(&cfg, fx->path);
    cfg.io = fake_io_base(fake);
    cfg.model = STORAGE_MODEL_EVENTS;
    struct storage *st = NULL;
    int rc = storage_open(&cfg, &st);
    *committed = false;
    if (rc == 0) {
        uint64_t rng = n + 1;
        struct ds_event e;
        test_event_random_plain(&rng, DAY0, &e);
        assert_int_equal(storage_append(st, DAY0, 0, &e, NULL), 0);
        *committed = storage_commit(st) == 0;
        storage_close(st);
    }
    uint64_t ops = fake_io_ops(fake);
    char model_path[DS_PATH_MAX + 16];
    snprintf(model_path, sizeof(model_path), "%s/MODEL", fx->path);
    *reached_model = *reached_model || (n > 0 && n <= 2 && rc != 0 && !file_exists(model_path));
    assert_int_equal(fake_io_crash(fake, n * 31 + 7, mode), 0);
    fake_io_destroy(fake);
    char manifest[DS_PATH_MAX + 16];
    snprintf(manifest, sizeof(manifest), "%s/MANIFEST", fx->path);
    char text[64];
    model_record(fx->path, text, sizeof(text));
    if (file_exists(manifest) || *committed) {
        assert_string_equal(text, "events\n");
    }
    /* The next writer asks for the same model (a directory without a complete MODEL holds no
     * data, so it may record it now). */
    open_model_ok(fx->path, false, STORAGE_MODEL_EVENTS, STORAGE_MODEL_EVENTS);
    model_record(fx->path, text, sizeof(text));
    assert_string_equal(text, "events\n");
    struct storage *reader = open_dir(fx->path, true);
    struct storage_partition_total t;
    assert_int_equal(storage_partition_totals(reader, DAY0, 0, NULL, 0, &t), 0);
    assert_int_equal(t.count, *committed ? 1 : 0); /* acknowledged means kept */
    storage_close(reader);
    return ops;
}

static void test_storage_model_crash_during_creation(void **state)
{
    /* Fail each write or sync of a directory's creation and first commit in turn (MODEL's
     * write and sync come first, then the MANIFEST's, then the data's), then cut the power
     * (clean and torn): the directory never holds data without its complete MODEL, and the
     * next writer finishes the creation with the model. */
    struct fixture *fx = *state;
    bool reached_model = false;
    bool committed = false;
    uint64_t total = model_crash_run(fx, 0, FAKE_CRASH_CLEAN, &reached_model, &committed);
    assert_true(committed);
    uint64_t n = 1;
    for (; n <= total; n++) {
        model_crash_run(fx, n, FAKE_CRASH_CLEAN, &reached_model, &committed);
        assert_false(committed);
        model_crash_run(fx, n, FAKE_CRASH_TORN, &reached_model, &committed);
        assert_false(committed);
    }
    assert_true(total >= 6); /* MODEL, MANIFEST, the block: a write and a sync each */
    assert_true(reached_model);
    print_message("failed each of %llu operations of a creation in turn\n",
                  (unsigned long long)total);
}

/* ---- fault injection ----------------------------------------------------------------------- */

enum fault_kind { FAULT_EIO, FAULT_ENOSPC, FAULT_SHORT };

static const char *fault_name(enum fault_kind kind)
{
    return kind == FAULT_EIO ? "EIO" : kind == FAULT_ENOSPC ? "ENOSPC" : "short write";
}

/* After a crash: fsck must answer without error, repair must leave it clean, and a writer and
 * a reader must both answer exactly the last acknowledged state. The one exception: when the
 * failure hit the sync of the failing commit's manifest record after its write, a crash may keep
 * that whole record (the disk did take it), which then shows the whole attempted commit, never
 * a part of it. A clean crash (unsynced bytes all lost) never shows it. */
static bool fault_check_state(const char *dir, const struct model *m, bool attempted_allowed,
                              const char *what)
{
    /* Repair verifies first (committed blocks must all pass), cuts, and verifies again. */
    struct storage_fsck_report report;
    int rc = fsck(dir, true, &report);
    if (rc != 0) {
        print_error("%s: fsck --repair: %d\n", what, rc);
        fail();
    }
    assert_int_equal(report.blocks_bad, 0);
    assert_int_equal(fsck(dir, false, &report), 0);
    bool attempted = false;
    for (int pass = 0; pass < 2; pass++) {
        struct storage *st = open_dir(dir, pass == 1);
        char why[WHY_BYTES] = "";
        char why_attempted[WHY_BYTES] = "";
        bool acked = storage_matches(st, m, false, why);
        bool ok = acked || (attempted_allowed && storage_matches(st, m, true, why_attempted));
        storage_close(st);
        if (!ok) {
            print_error("%s: state differs from the last acknowledged one: %s%s%s\n", what, why,
                        attempted_allowed ? "; and from the attempted one: " : "", why_attempted);
            fail();
        }
        /* Writer and reader agree on which state it is. */
        assert_true(pass == 0 || attempted == !acked);
        attempted = !acked;
    }
    return attempted;
}

/* Makes the model what the directory was found to hold. */
static void model_settle(struct model *m, bool attempted)
{
    if (attempted) {
        model_commit(m);
    } else {
        model_drop_pending(m);
    }
}

/* Copies a directory tree of regular files (a data directory is a few levels deep). */
static void copy_tree(const char *src, const char *dst)
{
    assert_int_equal(mkdir(dst, 0755), 0);
    DIR *d = opendir(src);
    assert_non_null(d);
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        char from[DS_PATH_MAX];
        char to[DS_PATH_MAX];
        snprintf(from, sizeof(from), "%s/%s", src, e->d_name);
        snprintf(to, sizeof(to), "%s/%s", dst, e->d_name);
        struct stat sb;
        assert_int_equal(lstat(from, &sb), 0);
        if (S_ISDIR(sb.st_mode)) {
            copy_tree(from, to);
        } else if (S_ISREG(sb.st_mode)) {
            size_t len = 0;
            void *data = file_read(from, &len);
            file_write(to, data, len);
            free(data);
        }
    }
    closedir(d);
}

static struct model *model_copy(const struct model *from)
{
    struct model *m = model_new();
    memcpy(m, from, sizeof(*m));
    for (uint32_t i = 0; i < m->count; i++) {
        struct evvec *vecs[2] = {&m->parts[i].committed, &m->parts[i].pending};
        for (int k = 0; k < 2; k++) {
            const struct evvec *src = k == 0 ? &from->parts[i].committed : &from->parts[i].pending;
            *vecs[k] = (struct evvec){0};
            for (size_t j = 0; j < src->n; j++) {
                evvec_push_source(vecs[k], &src->v[j], &src->src[j]);
            }
        }
    }
    return m;
}

/* The directory every fault run starts from, and its model: events committed in two partitions,
 * a manifest grown to within 48 bytes of MANIFEST_BYTES_ROTATE (so the run's first commit, whose
 * record is longer, rotates it), and torn tails on a segment and on the manifest (so the run's
 * open cuts both). Built once per loop with the sync backend. */
struct fault_template {
    char dir[256]; /* short of DS_PATH_MAX, so that paths below it fit */
    struct model *m;
    struct sources src;
};

/* Commits records of source offsets only (32 + 16 bytes per source) until the manifest is
 * within 48 bytes of the rotation threshold, never past it. */
static void fault_template_grow_manifest(struct storage *st, const char *manifest)
{
    for (int64_t round = 1;; round++) {
        assert_true(round < 1000);
        uint64_t size = file_size(manifest);
        assert_true(size <= MANIFEST_BYTES_ROTATE);
        uint64_t remaining = MANIFEST_BYTES_ROTATE - size;
        if (remaining <= 48) {
            return;
        }
        uint64_t sources = (remaining - sizeof(struct manifest_record_header)) / 16;
        sources = sources < 3900 ? sources : 3900;
        for (uint64_t i = 0; i < sources; i++) {
            /* Source partitions 100.. lie outside the model's, which they leave alone. */
            struct ds_source s = {.partition = 100 + (int32_t)i, .offset = round};
            assert_int_equal(storage_source_advance(st, &s), 0);
        }
        assert_int_equal(storage_commit(st), 0);
    }
}

static void file_append_garbage(const char *path, size_t len, uint64_t *rng)
{
    int fd = open(path, O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    uint8_t buf[256];
    assert_true(len <= sizeof(buf));
    for (size_t i = 0; i < len; i++) {
        buf[i] = (uint8_t)test_rng_next(rng);
    }
    assert_int_equal(write(fd, buf, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
}

static void fault_template_make(struct fixture *fx, bool roll, struct fault_template *t)
{
    snprintf(t->dir, sizeof(t->dir), "%s/template", fx->dir);
    t->m = model_new();
    memset(&t->src, 0, sizeof(t->src));
    struct storage_config cfg;
    config_init(&cfg, t->dir);
    cfg.block_events_max = 5;
    cfg.segment_bytes_max = roll ? 4096 : cfg.segment_bytes_max;
    struct storage *st = open_with(&cfg);
    uint64_t rng = 99;
    for (uint32_t i = 0; i < 12; i++) {
        struct ds_event e;
        test_event_random_plain(&rng, DAY0, &e);
        struct ds_source s = next_source(&rng, &t->src, 2);
        append_ok(st, t->m, DAY0, 0, &e, &s);
    }
    commit_ok(st, t->m);
    char manifest[DS_PATH_MAX + 16];
    snprintf(manifest, sizeof(manifest), "%s/MANIFEST", t->dir);
    fault_template_grow_manifest(st, manifest);
    storage_close(st);
    char segment[DS_PATH_MAX];
    segment_path(t->dir, DAY0, 0, count_segments(t->dir, DAY0, 0), segment);
    file_append_garbage(segment, 100, &rng);
    file_append_garbage(manifest, 20, &rng);
}

struct fault_case {
    enum fault_kind kind;
    uint64_t n;
    bool roll; /* 4 KiB segments, so that rolls happen in the scenario */
    const struct fault_template *from;
};

/* Where a run's failure landed, for the loop to check that it reached every phase. */
struct fault_outcome {
    bool in_open;      /* recovery's cuts: storage_open failed */
    bool after_record; /* the failing commit's record was synced: rotation failed */
};

/* The fixed scenario, from a copy of the template: open (recovery cuts the torn tails), then
 * three commits over two partitions, the second new in commit two, small blocks so that appends
 * seal early; the first commit rotates the manifest. After it, a clean crash and (on a copy of
 * the directory as the scenario left it) a torn crash, each checked. Returns the number of I/O
 * operations the scenario issued, open included. */
static uint64_t fault_run(struct fixture *fx, const struct fault_case *c,
                          struct fault_outcome *outcome)
{
    char dir[DS_PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/run-%d-%llu", fx->dir, (int)c->kind, (unsigned long long)c->n);
    copy_tree(c->from->dir, dir);
    char manifest[DS_PATH_MAX + 16];
    snprintf(manifest, sizeof(manifest), "%s/MANIFEST", dir);
    struct fake_io *fake = NULL;
    assert_int_equal(fake_io_create(&fake), 0);
    struct storage_config cfg;
    config_init(&cfg, dir);
    cfg.io = fake_io_base(fake);
    cfg.block_events_max = 5;
    if (c->roll) {
        cfg.segment_bytes_max = 4096;
    }
    int expect = c->kind == FAULT_ENOSPC ? -ENOSPC : -EIO;
    if (c->kind == FAULT_SHORT) {
        fake_io_short_nth(fake, c->n, 3);
    } else {
        fake_io_fail_nth(fake, c->n, expect);
    }
    struct storage *st = NULL;
    int failed = storage_open(&cfg, &st);
    outcome->in_open = failed != 0;
    outcome->after_record = false;
    assert_true(failed != 0 || strcmp(storage_io_backend(st), "fake") == 0);
    struct model *m = model_copy(c->from->m);
    uint64_t rng = 1234;
    bool failed_in_commit = false;
    /* Partition (DAY0, 1) first appears in the second commit: a segment created by a later
     * commit, beside one that only grows. (Few partitions: each costs four directory fsyncs.) */
    static const uint32_t shards_by_commit[] = {1, 2, 2};
    int32_t days_by_commit[] = {1, 1, 1};
    uint32_t per_commit = c->roll ? 40 : 12;
    struct sources src = c->from->src;
    for (int commit = 0; commit < 3 && failed == 0; commit++) {
        for (uint32_t i = 0; i < per_commit && failed == 0; i++) {
            int32_t day = DAY0 + (int32_t)test_rng_below(&rng, (uint64_t)days_by_commit[commit]);
            uint32_t shard = (uint32_t)test_rng_below(&rng, shards_by_commit[commit]);
            struct ds_event e;
            test_event_random_plain(&rng, day, &e);
            struct ds_source s = next_source(&rng, &src, 2);
            failed = storage_append(st, day, shard, &e, &s);
            if (failed == 0) {
                model_append(m, day, shard, &e, &s);
            }
        }
        if (failed == 0) {
            uint64_t durable_before = 0;
            uint64_t durable_after = 0;
            assert_int_equal(fake_io_durable_bytes(fake, manifest, &durable_before), 0);
            failed = storage_commit(st);
            failed_in_commit = failed != 0;
            assert_int_equal(fake_io_durable_bytes(fake, manifest, &durable_after), 0);
            outcome->after_record = failed != 0 && durable_after != durable_before;
            if (failed == 0) {
                model_commit(m);
            }
        }
    }
    uint64_t ops = fake_io_ops(fake);
    if (c->roll && failed == 0) {
        assert_true(count_segments(dir, DAY0, 0) >= 2); /* the scenario does roll */
    }
    char what[128];
    snprintf(what, sizeof(what), "%s at op %llu of %llu%s", fault_name(c->kind),
             (unsigned long long)c->n, (unsigned long long)ops, c->roll ? " (rolls)" : "");
    if (failed != 0) {
        if (failed != expect) {
            print_error("%s: error %s, want %s\n", what, ds_strerror(failed), ds_strerror(expect));
            fail();
        }
    }
    if (failed != 0 && st != NULL) {
        /* The writer stays failed until reopened. */
        struct ds_event e;
        test_event_random_plain(&rng, DAY0, &e);
        assert_int_equal(storage_append(st, DAY0, 0, &e, NULL), failed);
        assert_int_equal(storage_commit(st), failed);
    } else if (failed == 0 && ops >= c->n && c->kind != FAULT_SHORT) {
        /* The n-th operation was issued and failed, yet every commit returned 0: an error was
         * lost and data acknowledged that may not be on disk. (A short write armed on a sync
         * operation does nothing, so that case is exempt.) */
        print_error("%s: the failure was not reported\n", what);
        fail();
    }
    storage_close(st);

    /* A clean crash keeps exactly the synced bytes: the last acknowledged state, unless the
     * failing commit's record was synced and only the rotation after it failed: then exactly
     * the attempted state. It leaves every durable length as it was, so the fake still
     * describes the copy, which a torn crash then keeps a random part of the unsynced bytes of.
     * Under DS_SHORT each operation gets one of the two crashes, in turn. */
    bool both = !test_short_run();
    bool clean = both || c->n % 2 == 1;
    bool torn = both || c->n % 2 == 0;
    char copy[DS_PATH_MAX + 8];
    snprintf(copy, sizeof(copy), "%s.copy", dir);
    if (clean) {
        if (torn) {
            copy_tree(dir, copy);
        }
        char clean_what[160];
        snprintf(clean_what, sizeof(clean_what), "%s, clean crash", what);
        assert_int_equal(fake_io_crash(fake, c->n, FAKE_CRASH_CLEAN), 0);
        bool shown = fault_check_state(dir, m, outcome->after_record, clean_what);
        assert_true(shown == outcome->after_record);
        if (torn) {
            test_tempdir_remove(dir);
            assert_int_equal(rename(copy, dir), 0);
        } else {
            model_settle(m, shown);
        }
    }
    if (torn) {
        char torn_what[160];
        snprintf(torn_what, sizeof(torn_what), "%s, torn crash", what);
        assert_int_equal(fake_io_crash(fake, c->n * 7919, FAKE_CRASH_TORN), 0);
        model_settle(m, fault_check_state(dir, m, failed_in_commit, torn_what));
    }
    fake_io_destroy(fake);
    /* After recovery the directory takes new commits. */
    if (c->n % 5 == 0) {
        struct storage *again = open_dir(dir, false);
        workload(again, m, &rng, 10, 1, 2, 0, true);
        storage_close(again);
        assert_reopen_matches(dir, m);
    }
    model_free(m);
    test_tempdir_remove(dir);
    return ops;
}

/* Fails op n = 1, 2, ... until a run issues fewer than n operations (no fault hit).
 * ops_from_empty is what the loop failed when its scenario started from an empty directory:
 * starting from the template adds recovery's cuts and the rotation, so it must fail more, and
 * some failure must land in each (a short write never fails a sync, so not in recovery's). */
static void fault_loop(struct fixture *fx, enum fault_kind kind, bool roll, uint64_t ops_from_empty)
{
    struct fault_template t;
    fault_template_make(fx, roll, &t);
    bool reached_open = false;
    bool reached_rotation = false;
    uint64_t n = 1;
    for (;; n++) {
        struct fault_case c = {.kind = kind, .n = n, .roll = roll, .from = &t};
        struct fault_outcome outcome;
        uint64_t ops = fault_run(fx, &c, &outcome);
        if (ops < n) {
            break;
        }
        reached_open = reached_open || outcome.in_open;
        reached_rotation = reached_rotation || outcome.after_record;
        assert_true(n < 1000);
    }
    model_free(t.m);
    assert_true(n > 10); /* the scenario did real work */
    assert_true(n - 1 > ops_from_empty);
    assert_true(reached_open || kind == FAULT_SHORT);
    assert_true(reached_rotation);
    print_message("%s%s: failed each of %llu operations in turn\n", fault_name(kind),
                  roll ? " (rolls)" : "", (unsigned long long)(n - 1));
}

static void test_storage_fault_eio_each_op(void **state)
{
    /* -EIO on the n-th write or sync, for every n the scenario reaches (recovery's cuts at
     * open, commits, the manifest rotation): the open or commit returns it,
     * the writer stays failed, and after a clean or torn crash the data directory holds exactly
     * the last acknowledged state. */
    fault_loop(*state, FAULT_EIO, false, 22);
}

static void test_storage_fault_enospc_each_op(void **state)
{
    /* As for -EIO, with -ENOSPC (a full disk). */
    fault_loop(*state, FAULT_ENOSPC, false, 22);
}

static void test_storage_fault_short_write_each_op(void **state)
{
    /* A short write at the n-th operation is an -EIO at commit; the torn bytes it left are cut
     * at recovery. */
    fault_loop(*state, FAULT_SHORT, false, 22);
}

static void test_storage_fault_eio_each_op_with_rolls(void **state)
{
    /* -EIO at every operation of a scenario whose segments roll (4 KiB segments): roll syncs
     * and new segment files fail cleanly too. */
    fault_loop(*state, FAULT_EIO, true, 40);
}

/* ---- crashes at random points -------------------------------------------------------------- */

static void crash_run(struct fixture *fx, uint64_t seed)
{
    char dir[DS_PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/crash-%llu", fx->dir, (unsigned long long)seed);
    uint64_t rng = seed;
    enum fake_crash_mode mode = test_rng_below(&rng, 2) ? FAKE_CRASH_TORN : FAKE_CRASH_GARBAGE;
    struct fake_io *fake = NULL;
    assert_int_equal(fake_io_create(&fake), 0);
    struct storage_config cfg;
    config_init(&cfg, dir);
    cfg.io = fake_io_base(fake);
    cfg.block_events_max = 2 + (uint32_t)test_rng_below(&rng, 20);
    /* Rolled segments are closed and fully synced; GARBAGE's appended junk on one of them is
     * not a damage a power cut can do, so rolls run with TORN only. */
    if (mode == FAKE_CRASH_TORN && test_rng_below(&rng, 2) == 0) {
        cfg.segment_bytes_max = 4096;
    }
    struct storage *st = open_with(&cfg);
    struct model *m = model_new();
    uint32_t steps = 1 + (uint32_t)test_rng_below(&rng, 150);
    struct sources src = {{0}};
    for (uint32_t i = 0; i < steps; i++) {
        if (test_rng_below(&rng, 12) == 0) {
            commit_ok(st, m);
            continue;
        }
        int32_t day = DAY0 + (int32_t)test_rng_below(&rng, 2);
        uint32_t shard = (uint32_t)test_rng_below(&rng, 2);
        struct ds_event e;
        test_event_random_plain(&rng, day, &e);
        struct ds_source s = next_source(&rng, &src, 3);
        append_ok(st, m, day, shard, &e, &s);
    }
    /* Half the time the power goes in the middle of one more commit: every operation from a
     * random one on is lost (fails), as at a power cut. */
    bool attempted_allowed = false;
    if (test_rng_below(&rng, 2) == 0 && storage_pending_events(st) > 0) {
        fake_io_fail_from(fake, 1 + test_rng_below(&rng, 12), -EIO);
        int rc = storage_commit(st);
        if (rc == 0) {
            model_commit(m);
        } else {
            attempted_allowed = true;
        }
    }
    storage_close(st);
    assert_int_equal(fake_io_crash(fake, seed, mode), 0);
    fake_io_destroy(fake);
    char what[64];
    snprintf(what, sizeof(what), "crash seed %llu mode %d", (unsigned long long)seed, (int)mode);
    model_settle(m, fault_check_state(dir, m, attempted_allowed, what));
    model_free(m);
    test_tempdir_remove(dir);
}

static void test_storage_crash_at_random_points(void **state)
{
    /* Seeds 1..50 (1..15 under DS_SHORT, or DS_TEST_SEED alone): random appends and commits, then a
     * torn or garbage crash at a random point, sometimes inside a commit; reopen answers exactly
     * the last acknowledged state. */
    struct fixture *fx = *state;
    if (getenv("DS_TEST_SEED") != NULL) {
        crash_run(fx, test_seed());
        return;
    }
    uint64_t seeds = test_short_run() ? 15u : 50u;
    for (uint64_t seed = 1; seed <= seeds; seed++) {
        crash_run(fx, seed);
    }
}

/* ---- faults through both real backends --------------------------------------------------- */

/* One failure injected into a commit whose partition's segment already exists, so that the
 * commit's operations are, in order: 1 block write, 2 segment sync, 3 manifest write,
 * 4 manifest sync. */
struct backend_fault {
    const char *what;
    uint64_t op;  /* which operation of the commit fails (counted from 1) */
    bool shorten; /* a short write of 3 bytes instead of an injected error */
    int err;      /* the injected error */
    int expect;   /* what storage_commit must return */
    /* The manifest record was written before the failure: without a power cut, the reopened
     * store may hold the failed commit whole (its record and source positions agree, so
     * nothing is stored twice); the case cuts the power first and then wants the old state. */
    bool record_written;
};

static const struct backend_fault backend_faults[] = {
    {.what = "EIO on the block write", .op = 1, .err = -EIO, .expect = -EIO},
    {.what = "EIO on the segment sync", .op = 2, .err = -EIO, .expect = -EIO},
    {.what = "EIO on the manifest sync",
     .op = 4,
     .err = -EIO,
     .expect = -EIO,
     .record_written = true},
    {.what = "ENOSPC on the block write", .op = 1, .err = -ENOSPC, .expect = -ENOSPC},
    {.what = "ENOSPC on the manifest write", .op = 3, .err = -ENOSPC, .expect = -ENOSPC},
    {.what = "EDQUOT on the block write", .op = 1, .err = -EDQUOT, .expect = -EDQUOT},
    {.what = "short block write", .op = 1, .shorten = true, .expect = -EIO},
    {.what = "short manifest write", .op = 3, .shorten = true, .expect = -EIO},
};

/* Appends n events with sources to (DAY0, 0), through storage and model. */
static void backend_fault_append(struct storage *st, struct model *m, uint64_t *rng,
                                 struct sources *src, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        struct ds_event e;
        test_event_random_plain(rng, DAY0, &e);
        struct ds_source s = next_source(rng, src, 3);
        append_ok(st, m, DAY0, 0, &e, &s);
    }
}

/* Returns false when the backend is refused (io_uring in a container): the caller skips. */
static bool backend_fault_run(struct fixture *fx, enum storage_io_mode mode,
                              const struct backend_fault *f)
{
    char dir[DS_PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/%s-%llu-%d-%d", fx->dir, mode == STORAGE_IO_URING ? "u" : "s",
             (unsigned long long)f->op, f->shorten, -f->err);
    struct fake_io *fake = NULL;
    int rc = fake_io_create_over(mode, &fake);
    if (rc == -ENOSYS || rc == -EPERM) {
        return false;
    }
    assert_int_equal(rc, 0);
    struct storage_config cfg;
    config_init(&cfg, dir);
    cfg.io = fake_io_base(fake);
    struct storage *st = open_with(&cfg);
    struct model *m = model_new();
    uint64_t rng = 77;
    struct sources src = {{0}};
    backend_fault_append(st, m, &rng, &src, 30);
    commit_ok(st, m);
    backend_fault_append(st, m, &rng, &src, 30);
    if (f->shorten) {
        fake_io_short_nth(fake, f->op, 3);
    } else {
        fake_io_fail_nth(fake, f->op, f->err);
    }
    uint64_t ops_before = fake_io_ops(fake);
    rc = storage_commit(st);
    if (rc != f->expect) {
        print_error("%s (%s): commit returned %s, want %s\n", f->what, storage_io_name(cfg.io),
                    ds_strerror(rc), ds_strerror(f->expect));
        fail();
    }
    assert_true(fake_io_ops(fake) - ops_before >= f->op); /* the fault was reached */
    /* Nothing acknowledged: the source positions are the previous commit's, and the writer
     * stays failed. */
    for (uint32_t i = 0; i < 3; i++) {
        assert_int_equal(storage_source_next(st, (int32_t)i - 1), m->src_committed[i]);
    }
    assert_int_equal(storage_commit(st), rc);
    storage_close(st);
    if (f->record_written) {
        assert_int_equal(fake_io_crash(fake, 1, FAKE_CRASH_CLEAN), 0);
    }
    fake_io_destroy(fake);
    /* Reopened (recovery cuts what the failed commit left), the store holds exactly the first
     * commit, and takes commits again. */
    model_drop_pending(m);
    assert_reopen_matches(dir, m);
    st = open_dir(dir, false);
    backend_fault_append(st, m, &rng, &src, 5);
    commit_ok(st, m);
    storage_close(st);
    assert_reopen_matches(dir, m);
    model_free(m);
    return true;
}

static void backend_faults_each(struct fixture *fx, enum storage_io_mode mode)
{
    for (size_t i = 0; i < DS_ARRAY_LEN(backend_faults); i++) {
        if (!backend_fault_run(fx, mode, &backend_faults[i])) {
            print_message("io_uring refused here (container?): skipping the io_uring cases\n");
            skip();
        }
    }
}

static void test_storage_commit_fault_over_sync_backend(void **state)
{
    /* EIO on a write and on a sync, ENOSPC, EDQUOT and short writes, injected into a commit
     * run by the real sync backend: the commit returns the error (ENOSPC as -ENOSPC, not
     * -EIO), nothing is acknowledged (source positions unchanged), and the reopened store holds
     * exactly the previous commit and takes new ones. */
    backend_faults_each(*state, STORAGE_IO_SYNC);
}

static void test_storage_commit_fault_over_uring_backend(void **state)
{
    /* The same faults with io_uring running every operation that is not failed. */
    backend_faults_each(*state, STORAGE_IO_URING);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_storage_config_check_rejects_bad_values, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_append_partition_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_round_trip_partitions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_retractions_net_totals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_retractions_more_than_rows_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_uncommitted_dropped_at_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_commit_nothing_is_noop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_io_sync_and_uring_identical, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_uring_commit_beyond_queue_depth, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_scan_and_visit_stop_early, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_recovery_truncated_committed_block, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_corrupt_committed_payload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_quarantine_payload_block_mid_segment, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_quarantine_header_damaged_block, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_quarantine_issue_cut_and_garbage, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_quarantine_damaged_manifest_middle, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_quarantine_survives_rotation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_recovery_garbage_after_committed_end, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_recovery_orphan_segment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_recovery_torn_manifest_tail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_recovery_damaged_manifest_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_recovery_missing_manifest_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_recovery_missing_directories, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_fsck_ignores_what_recovery_ignores, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_segment_roll_tiny_segments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_commit_syncs_each_new_directory_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_commit_fails_when_a_directory_sync_fails,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_commit_syncs_directories_past_its_limits,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_small_blocks_many_per_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_scan_from_follows_commits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_scan_from_stop_resumes_at_block_start, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_commit_larger_than_arena, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_status_overflow_slow_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_open_bytes_budget_many_partitions, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_budget_counts_growth_of_refused_add, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_second_writer_locked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_reader_beside_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_reader_of_no_store_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_model_parse_and_config, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_model_new_directory_recorded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_model_mismatch_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_model_existing_directory_reads_as_events,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_model_damaged_record_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_model_crash_during_creation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_source_offsets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_source_advance_and_deadletter_commit_together,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_manifest_rotation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_fault_eio_each_op, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_fault_enospc_each_op, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_fault_short_write_each_op, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_fault_eio_each_op_with_rolls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_crash_at_random_points, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_commit_fault_over_sync_backend, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_commit_fault_over_uring_backend, setup,
                                        teardown),
    };
    const char *filter = getenv("CMOCKA_TEST_FILTER");
    if (filter != NULL) {
        cmocka_set_test_filter(filter);
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
