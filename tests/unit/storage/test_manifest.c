/*
 * Unit tests of storage/manifest.c: the commit log's record codec and replay. Round trips of
 * delta and snapshot records; torn tails (every truncation length, zeros or garbage after the
 * last record) replay to the last whole record; damage followed by a valid record, a bad file
 * magic, and sequence numbers that do not increase are refused.
 *
 * The manifest functions are private to storage/; the test includes storage/format.h for them.
 * Buffers are malloc'd at their exact length so that ASan sees any read past the end.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/format.h"
#include "tests/support/events.h"
#include "tests/support/tempdir.h"

#define RECORDS_MAX 16u
#define PARTS_MAX 64u
#define SOURCES_MAX 16u

/* One record as the test built it, to compare what replay delivers. */
struct record {
    uint32_t kind;
    uint64_t seq;
    uint32_t part_count;
    uint32_t source_count;
    struct manifest_part parts[PARTS_MAX];
    struct manifest_source sources[SOURCES_MAX];
    size_t start; /* byte offset of the record in the log */
    size_t end;   /* one past its last byte */
};

/* A whole manifest file: magic then records. */
struct log {
    uint8_t *buf;
    size_t len;
    size_t capacity;
    struct record records[RECORDS_MAX];
    uint32_t count;
};

static int setup(void **state)
{
    struct log *log = calloc(1, sizeof(*log));
    assert_non_null(log);
    log->capacity = 8 + RECORDS_MAX * manifest_record_bound(PARTS_MAX, SOURCES_MAX);
    log->buf = malloc(log->capacity);
    assert_non_null(log->buf);
    uint64_t magic = MANIFEST_FILE_MAGIC;
    memcpy(log->buf, &magic, sizeof(magic));
    log->len = sizeof(magic);
    *state = log;
    return 0;
}

static int teardown(void **state)
{
    struct log *log = *state;
    free(log->buf);
    free(log);
    return 0;
}

/* Appends a record with random entries to the log. */
static void log_append(struct log *log, uint64_t *rng, uint32_t kind, uint64_t seq,
                       uint32_t part_count, uint32_t source_count)
{
    assert_true(log->count < RECORDS_MAX);
    assert_true(part_count <= PARTS_MAX && source_count <= SOURCES_MAX);
    struct record *r = &log->records[log->count];
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->seq = seq;
    r->part_count = part_count;
    r->source_count = source_count;
    for (uint32_t i = 0; i < part_count; i++) {
        r->parts[i] = (struct manifest_part){.day = (int32_t)(test_rng_next(rng) % DS_DAY_MAX),
                                             .shard = (uint32_t)(test_rng_next(rng) % 1024),
                                             .segment_id = 1 + (uint32_t)(test_rng_next(rng) % 100),
                                             .end = test_rng_next(rng) >> 20};
    }
    for (uint32_t i = 0; i < source_count; i++) {
        r->sources[i] = (struct manifest_source){.partition = (int32_t)i - 1,
                                                 .next_offset = (int64_t)(test_rng_next(rng) >> 2)};
    }
    r->start = log->len;
    int64_t n = manifest_encode(kind, seq, r->parts, part_count, r->sources, source_count,
                                log->buf + log->len, log->capacity - log->len);
    assert_true(n > 0);
    assert_int_equal((size_t)n, manifest_record_bound(part_count, source_count));
    log->len += (size_t)n;
    r->end = log->len;
    log->count++;
}

/* A log of a snapshot and deltas of varied sizes, as a writer leaves it. */
static void log_build(struct log *log, uint32_t records)
{
    uint64_t rng = 7;
    for (uint32_t i = 0; i < records; i++) {
        uint32_t kind = i == 0 ? MANIFEST_SNAPSHOT : MANIFEST_DELTA;
        log_append(log, &rng, kind, 10 + i, (i * 7) % PARTS_MAX, (i * 3) % SOURCES_MAX);
    }
}

/* What a replay saw. */
struct replayed {
    const struct log *log; /* to compare against, or NULL */
    uint32_t count;
    int stop_at; /* return 99 at this record (1-based), 0 never */
};

static int check_record(const struct manifest_replay_fn_args *got, void *user)
{
    struct replayed *r = user;
    if (r->log != NULL) {
        assert_true(r->count < r->log->count);
        const struct record *want = &r->log->records[r->count];
        assert_int_equal(got->kind, want->kind);
        assert_int_equal(got->seq, want->seq);
        assert_int_equal(got->part_count, want->part_count);
        assert_int_equal(got->source_count, want->source_count);
        if (want->part_count > 0) {
            assert_memory_equal(got->parts, want->parts,
                                want->part_count * sizeof(struct manifest_part));
        }
        if (want->source_count > 0) {
            assert_memory_equal(got->sources, want->sources,
                                want->source_count * sizeof(struct manifest_source));
        }
    }
    r->count++;
    return r->stop_at != 0 && (int)r->count == r->stop_at ? 99 : 0;
}

/* Replays the first len bytes of data from an exact-size copy. */
static int replay_copy(const uint8_t *data, size_t len, struct replayed *seen, uint64_t *valid_end)
{
    uint8_t *copy = malloc(len > 0 ? len : 1);
    assert_non_null(copy);
    if (len > 0) {
        memcpy(copy, data, len);
    }
    int rc = manifest_replay(copy, len, check_record, seen, valid_end);
    free(copy);
    return rc;
}

/* ---- round trips --------------------------------------------------------------------------- */

static void test_manifest_replay_round_trip(void **state)
{
    /* Records of every shape (empty, parts only, sources only, both) replay exactly, in order,
     * and the valid end is the whole file. */
    struct log *log = *state;
    uint64_t rng = test_seed();
    log_append(log, &rng, MANIFEST_SNAPSHOT, 1, 0, 0);
    log_append(log, &rng, MANIFEST_DELTA, 2, PARTS_MAX, 0);
    log_append(log, &rng, MANIFEST_DELTA, 3, 0, SOURCES_MAX);
    log_append(log, &rng, MANIFEST_DELTA, 4, 5, 3);
    log_append(log, &rng, MANIFEST_SNAPSHOT, 5, 9, 9);
    log_append(log, &rng, MANIFEST_DELTA, 1000, 1, 1);
    struct replayed seen = {.log = log};
    uint64_t valid_end = 0;
    assert_int_equal(replay_copy(log->buf, log->len, &seen, &valid_end), 0);
    assert_int_equal(seen.count, log->count);
    assert_int_equal(valid_end, log->len);
}

static void test_manifest_replay_empty_and_magic_only(void **state)
{
    /* A missing (empty) file and a file holding only the magic are valid and empty. */
    struct log *log = *state;
    struct replayed seen = {.log = log};
    uint64_t valid_end = 99;
    assert_int_equal(replay_copy(log->buf, 0, &seen, &valid_end), 0);
    assert_int_equal(valid_end, 0);
    assert_int_equal(replay_copy(log->buf, 8, &seen, &valid_end), 0);
    assert_int_equal(valid_end, 8);
    assert_int_equal(seen.count, 0);
}

static void test_manifest_replay_callback_error_stops(void **state)
{
    /* A non-zero callback result stops the replay and is returned as is. */
    struct log *log = *state;
    log_build(log, 5);
    struct replayed seen = {.log = log, .stop_at = 3};
    uint64_t valid_end = 0;
    assert_int_equal(replay_copy(log->buf, log->len, &seen, &valid_end), 99);
    assert_int_equal(seen.count, 3);
}

static void test_manifest_encode_small_destination(void **state)
{
    /* Encoding into less than the record's bound is refused with -ENOSPC; the bound is exact. */
    (void)state;
    struct manifest_part parts[3] = {{.day = 1, .shard = 2, .segment_id = 3, .end = 4}};
    struct manifest_source sources[2] = {{.partition = 0, .next_offset = 5}};
    size_t bound = manifest_record_bound(3, 2);
    assert_int_equal(bound, sizeof(struct manifest_record_header) + 3 * 24 + 2 * 16);
    uint8_t *buf = malloc(bound);
    assert_non_null(buf);
    assert_true(manifest_encode(MANIFEST_DELTA, 1, parts, 3, sources, 2, buf, bound - 1) ==
                -ENOSPC);
    assert_true(manifest_encode(MANIFEST_DELTA, 1, parts, 3, sources, 2, buf, bound) ==
                (int64_t)bound);
    free(buf);
}

/* ---- torn tails ---------------------------------------------------------------------------- */

static void test_manifest_torn_tail_every_truncation(void **state)
{
    /* Cut at every length, a log replays the records wholly inside the cut and reports the end
     * of the last one as its valid end: a torn tail is not an error. */
    struct log *log = *state;
    log_build(log, 8);
    for (size_t len = 8; len <= log->len; len++) {
        uint32_t whole = 0;
        size_t end = 8;
        while (whole < log->count && log->records[whole].end <= len) {
            end = log->records[whole].end;
            whole++;
        }
        struct replayed seen = {.log = log};
        uint64_t valid_end = 0;
        int rc = replay_copy(log->buf, len, &seen, &valid_end);
        if (rc != 0 || seen.count != whole || valid_end != end) {
            print_error("cut at %zu: rc %d, %u records, end %llu (want %u, %zu)\n", len, rc,
                        seen.count, (unsigned long long)valid_end, whole, end);
            fail();
        }
    }
}

static void test_manifest_torn_file_magic(void **state)
{
    /* A file shorter than its 8-byte magic cannot come from the writer (the file is created
     * whole by an atomic rename): it is damage, not a torn tail. */
    struct log *log = *state;
    for (size_t len = 1; len < 8; len++) {
        struct replayed seen = {0};
        uint64_t valid_end = 0;
        assert_int_equal(replay_copy(log->buf, len, &seen, &valid_end), -DS_ECORRUPT);
    }
}

static void test_manifest_torn_tail_zeros_and_garbage(void **state)
{
    /* Zeros (a file extended by a crash) or random bytes after the last record are a torn tail,
     * even when they start with the record magic. */
    struct log *log = *state;
    log_build(log, 4);
    size_t whole = log->len;
    uint64_t rng = test_seed();
    for (int variant = 0; variant < 3; variant++) {
        size_t extra = 5000;
        uint8_t *buf = malloc(whole + extra);
        assert_non_null(buf);
        memcpy(buf, log->buf, whole);
        for (size_t i = 0; i < extra; i++) {
            buf[whole + i] = variant == 0 ? 0 : (uint8_t)test_rng_next(&rng);
        }
        if (variant == 2) {
            uint32_t magic = MANIFEST_MAGIC;
            memcpy(buf + whole, &magic, sizeof(magic));
        }
        struct replayed seen = {.log = log};
        uint64_t valid_end = 0;
        assert_int_equal(replay_copy(buf, whole + extra, &seen, &valid_end), 0);
        assert_int_equal(seen.count, log->count);
        assert_int_equal(valid_end, whole);
        free(buf);
    }
}

static void test_manifest_damaged_last_record_is_torn(void **state)
{
    /* Any damaged byte in the last record makes it a torn tail: replay stops before it. */
    struct log *log = *state;
    log_build(log, 4);
    const struct record *last = &log->records[log->count - 1];
    uint8_t *buf = malloc(log->len);
    assert_non_null(buf);
    for (size_t at = last->start; at < last->end; at++) {
        memcpy(buf, log->buf, log->len);
        buf[at] ^= 0x20;
        struct replayed seen = {.log = log};
        uint64_t valid_end = 0;
        assert_int_equal(manifest_replay(buf, log->len, check_record, &seen, &valid_end), 0);
        assert_int_equal(seen.count, log->count - 1);
        assert_int_equal(valid_end, last->start);
    }
    free(buf);
}

/* ---- damage before valid records ----------------------------------------------------------- */

static void test_manifest_damaged_record_followed_by_valid(void **state)
{
    /* A damaged byte anywhere in a record that a valid record follows means acknowledged commits
     * were damaged: replay refuses with -DS_ECORRUPT rather than forget them. */
    struct log *log = *state;
    log_build(log, 5);
    uint8_t *buf = malloc(log->len);
    assert_non_null(buf);
    for (uint32_t r = 0; r + 1 < log->count; r++) {
        for (size_t at = log->records[r].start; at < log->records[r].end; at++) {
            memcpy(buf, log->buf, log->len);
            buf[at] ^= 0x01;
            struct replayed seen = {0};
            uint64_t valid_end = 12345;
            int rc = manifest_replay(buf, log->len, check_record, &seen, &valid_end);
            if (rc != -DS_ECORRUPT) {
                print_error("record %u byte %zu: rc %d\n", r, at, rc);
                fail();
            }
            assert_int_equal(seen.count, r); /* the records before it were applied */
        }
    }
    free(buf);
}

static void test_manifest_damaged_record_then_valid_after_garbage(void **state)
{
    /* A whole damaged record (overwritten by garbage) followed by a valid one is still refused. */
    struct log *log = *state;
    log_build(log, 3);
    const struct record *middle = &log->records[1];
    memset(log->buf + middle->start, 0xA5, middle->end - middle->start);
    struct replayed seen = {0};
    uint64_t valid_end = 0;
    assert_int_equal(replay_copy(log->buf, log->len, &seen, &valid_end), -DS_ECORRUPT);
}

/* ---- file magic ---------------------------------------------------------------------------- */

static void test_manifest_bad_file_magic(void **state)
{
    /* A file that does not start with "DSMANIF1" .. "DSMANIF4" (2 adds quarantine
     * records) is refused: -DS_EFORMAT when it is a manifest of another format version
     * ("DSMANIF5"), -DS_ECORRUPT for anything else. */
    struct log *log = *state;
    log_build(log, 2);
    static const struct {
        const char *magic;
        int rc;
    } cases[] = {
        {"DSMANIF5", -DS_EFORMAT},  {"DSMANIF9", -DS_EFORMAT},          {"XSMANIF1", -DS_ECORRUPT},
        {"DSMANIG1", -DS_ECORRUPT}, {"\0\0\0\0\0\0\0\0", -DS_ECORRUPT}, {"DSEGMENT", -DS_ECORRUPT},
    };
    for (size_t i = 0; i < DS_ARRAY_LEN(cases); i++) {
        memcpy(log->buf, cases[i].magic, 8);
        struct replayed seen = {0};
        uint64_t valid_end = 777;
        assert_int_equal(replay_copy(log->buf, log->len, &seen, &valid_end), cases[i].rc);
        assert_int_equal(seen.count, 0);
        assert_int_equal(valid_end, 777); /* untouched on failure */
    }
}

/* ---- sequence numbers ---------------------------------------------------------------------- */

static void test_manifest_sequence_backwards(void **state)
{
    /* A record whose sequence number does not exceed the previous one's (backwards or repeated,
     * zero included) is refused with -DS_ECORRUPT after the records before it were applied. */
    struct log *log = *state;
    static const uint64_t bad[][3] = {
        {5, 4, 6}, {5, 5, 6}, {5, 0, 6}, {0, 0, 1}, {UINT64_MAX, 1, 2},
    };
    for (size_t c = 0; c < DS_ARRAY_LEN(bad); c++) {
        log->len = 8;
        log->count = 0;
        uint64_t rng = 3;
        for (int i = 0; i < 3; i++) {
            log_append(log, &rng, MANIFEST_DELTA, bad[c][i], 2, 1);
        }
        struct replayed seen = {.log = log};
        uint64_t valid_end = 0;
        int rc = replay_copy(log->buf, log->len, &seen, &valid_end);
        if (rc != -DS_ECORRUPT) {
            print_error("seqs %llu %llu %llu: rc %d\n", (unsigned long long)bad[c][0],
                        (unsigned long long)bad[c][1], (unsigned long long)bad[c][2], rc);
            fail();
        }
        assert_int_equal(seen.count, 1);
    }
    /* Gaps are fine: sequence numbers only have to increase. */
    log->len = 8;
    log->count = 0;
    uint64_t rng = 3;
    log_append(log, &rng, MANIFEST_SNAPSHOT, 1, 1, 1);
    log_append(log, &rng, MANIFEST_DELTA, 7, 1, 1);
    log_append(log, &rng, MANIFEST_DELTA, 1000000, 1, 1);
    struct replayed seen = {.log = log};
    uint64_t valid_end = 0;
    assert_int_equal(replay_copy(log->buf, log->len, &seen, &valid_end), 0);
    assert_int_equal(seen.count, 3);
}

static void test_manifest_record_bad_kind_or_counts(void **state)
{
    /* A record with a valid CRC but an unknown kind or entry counts past the limits is not a
     * record: at the end it is a torn tail, before a valid record it is -DS_ECORRUPT. */
    struct log *log = *state;
    log_build(log, 3);
    const struct record *r = &log->records[1];
    struct manifest_record_header h;
    memcpy(&h, log->buf + r->start, sizeof(h));
    h.kind = 3;
    uint32_t crc = ds_crc32c(0, &h.kind, sizeof(h) - offsetof(struct manifest_record_header, kind));
    h.body_crc = ds_crc32c(crc, log->buf + r->start + sizeof(h), h.body_bytes);
    memcpy(log->buf + r->start, &h, sizeof(h));
    struct replayed seen = {0};
    uint64_t valid_end = 0;
    assert_int_equal(replay_copy(log->buf, log->len, &seen, &valid_end), -DS_ECORRUPT);
    assert_int_equal(replay_copy(log->buf, log->records[1].end, &seen, &valid_end), 0);
    assert_int_equal(valid_end, log->records[1].start);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_manifest_replay_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_manifest_replay_empty_and_magic_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_manifest_replay_callback_error_stops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_manifest_encode_small_destination, setup, teardown),
        cmocka_unit_test_setup_teardown(test_manifest_torn_tail_every_truncation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_manifest_torn_file_magic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_manifest_torn_tail_zeros_and_garbage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_manifest_damaged_last_record_is_torn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_manifest_damaged_record_followed_by_valid, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_manifest_damaged_record_then_valid_after_garbage,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_manifest_bad_file_magic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_manifest_sequence_backwards, setup, teardown),
        cmocka_unit_test_setup_teardown(test_manifest_record_bad_kind_or_counts, setup, teardown),
    };
    const char *filter = getenv("CMOCKA_TEST_FILTER");
    if (filter != NULL) {
        cmocka_set_test_filter(filter);
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
