/*
 * Unit tests of the storage side of the restore from the topic (storage/fsck_restore.c): the
 * quarantine record, the restore marker and a repair's orders.jsonl line are read back as
 * quarantine.c, fsck_restore.c and fsck_reconcile.c write them, bad ones are refused, and the
 * ranges of a directory are listed sorted with their markers.
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
#include <sys/stat.h>

#include "storage/fsck_restore.h"
#include "storage/storage.h"
#include "tests/support/tempdir.h"

/* 2026-01-21 */
#define DAY0 20474

static const char record_mixed[] =
    "{\"partition\":\"DAY#2026-01-21#2\",\"day\":\"2026-01-21\",\"shard\":2,\"segment\":1,"
    "\"segment_file\":\"parts/2026-01-21/2/00000001.seg\",\"offset\":7834,\"length\":7934,"
    "\"bytes_file\":\"2026-01-21.2.00000001.7834.bin\",\"bytes_saved\":7934,\"committed\":true,"
    "\"blocks\":1,\"events\":779,\"source_partition\":-2,\"source_offset_min\":2700,"
    "\"source_offset_max\":4093,\"reason\":\"payload checksum mismatch\","
    "\"time\":\"2026-12-05T07:45:48.235Z\"}\n";

static const char record_unknown[] =
    "{\"partition\":\"DAY#2026-01-22#0\",\"day\":\"2026-01-22\",\"shard\":0,\"segment\":3,"
    "\"segment_file\":\"parts/2026-01-22/0/00000003.seg\",\"offset\":64,\"length\":10,"
    "\"bytes_file\":\"x.bin\",\"bytes_saved\":10,\"committed\":false,\"blocks\":0,"
    "\"events\":null,\"source_partition\":null,\"source_offset_min\":null,"
    "\"source_offset_max\":null,\"reason\":\"header\",\"time\":\"2026-12-05T07:45:48.235Z\"}\n";

static void test_fsck_restore_record_read_as_written(void **state)
{
    /* Both shapes quarantine.c writes: a known range from several partitions, and a range
     * past a committed end whose header was unreadable. */
    (void)state;
    struct storage_restore_range r = {.name = "kept"};
    assert_int_equal(fsck_restore_parse_record(record_mixed, strlen(record_mixed), &r), 0);
    assert_string_equal(r.name, "kept");
    assert_int_equal(r.day, DAY0);
    assert_int_equal(r.shard, 2);
    assert_true(r.committed);
    assert_true(r.events_known);
    assert_int_equal(r.events, 779);
    assert_int_equal(r.source_partition, STORAGE_RESTORE_SOURCE_MIXED);
    assert_int_equal(r.source_offset_min, 2700);
    assert_int_equal(r.source_offset_max, 4093);
    assert_int_equal(r.state, STORAGE_RESTORE_PENDING);

    assert_int_equal(fsck_restore_parse_record(record_unknown, strlen(record_unknown), &r), 0);
    assert_int_equal(r.day, DAY0 + 1);
    assert_false(r.committed);
    assert_false(r.events_known);
    assert_int_equal(r.source_partition, STORAGE_RESTORE_SOURCE_UNKNOWN);
}

static void test_fsck_restore_record_bad_refused(void **state)
{
    /* A record cut short, a bad day, and offsets that run backwards are corrupt, not a range. */
    (void)state;
    struct storage_restore_range r = {0};
    assert_int_equal(fsck_restore_parse_record(record_mixed, 60, &r), -DS_ECORRUPT);
    char text[sizeof(record_mixed)];
    memcpy(text, record_mixed, sizeof(text));
    memcpy(strstr(text, "\"day\":\"2026-01-21\"") + 7, "2026-13-21", 10);
    assert_int_equal(fsck_restore_parse_record(text, strlen(text), &r), -DS_ECORRUPT);
    memcpy(text, record_mixed, sizeof(text));
    memcpy(strstr(text, "\"source_offset_min\":2700") + 20, "9999", 4);
    assert_int_equal(fsck_restore_parse_record(text, strlen(text), &r), -DS_ECORRUPT);
}

static void test_fsck_restore_marker_states(void **state)
{
    /* started names its commit sequence; done needs none; anything else is corrupt. */
    (void)state;
    struct storage_restore_range r = {0};
    const char *started = "{\"state\":\"started\",\"commit_seq\":41}\n";
    assert_int_equal(fsck_restore_parse_marker(started, strlen(started), &r), 0);
    assert_int_equal(r.state, STORAGE_RESTORE_STARTED);
    assert_int_equal(r.started_seq, 41);
    const char *done = "{\"state\":\"done\",\"events_read\":1,\"events_applied\":1,"
                       "\"offsets_missing\":0,\"events_lost\":0}\n";
    assert_int_equal(fsck_restore_parse_marker(done, strlen(done), &r), 0);
    assert_int_equal(r.state, STORAGE_RESTORE_DONE);
    const char *bad = "{\"state\":\"started\"}";
    assert_int_equal(fsck_restore_parse_marker(bad, strlen(bad), &r), -DS_ECORRUPT);
    const char *other = "{\"state\":\"maybe\"}";
    assert_int_equal(fsck_restore_parse_marker(other, strlen(other), &r), -DS_ECORRUPT);
}

static void test_fsck_restore_order_line_takes_had(void **state)
{
    /* The fields of "had", not of "now", which repeats their names; string ids with escapes;
     * a null version; versions_seen 0 (unknown) when a line leaves it out. */
    (void)state;
    const char *line =
        "{\"order\":\"a\\\"b\\u0001\",\"outcome\":\"reverted\","
        "\"had\":{\"day\":\"2026-01-21\",\"shard\":1,\"ts_ms\":1769036817200,"
        "\"version\":7,\"status\":\"paid\",\"versions_seen\":4},\"now\":{\"day\":\"2026-01-20\","
        "\"shard\":0,\"ts_ms\":5,\"version\":3,\"status\":\"new\"}}\n";
    struct restore_order_line o;
    assert_int_equal(fsck_restore_parse_order(line, strlen(line), &o), 0);
    assert_true(o.id.is_string);
    assert_int_equal(o.id.len, 4);
    assert_memory_equal(o.id.text, "a\"b\x01", 4);
    assert_int_equal(o.day, DAY0);
    assert_int_equal(o.ts_ms, 1769036817200LL);
    assert_true(o.has_version);
    assert_int_equal(o.version, 7);
    assert_int_equal(o.status_len, 4);
    assert_memory_equal(o.status, "paid", 4);
    assert_int_equal(o.versions_seen, 4);

    const char *lost = "{\"order\":11305,\"outcome\":\"lost\",\"had\":{\"day\":\"2026-01-21\","
                       "\"shard\":1,\"ts_ms\":1769036817200,\"version\":null,"
                       "\"status\":\"cancelled\"},\"now\":null}\n";
    assert_int_equal(fsck_restore_parse_order(lost, strlen(lost), &o), 0);
    assert_false(o.id.is_string);
    assert_int_equal(o.id.value, 11305);
    assert_false(o.has_version);
    assert_int_equal(o.versions_seen, 0);

    const char *bad_seen = "{\"order\":1,\"had\":{\"day\":\"2026-01-21\",\"ts_ms\":1,"
                           "\"version\":1,\"status\":\"paid\",\"versions_seen\":-1}}";
    assert_int_equal(fsck_restore_parse_order(bad_seen, strlen(bad_seen), &o), -DS_ECORRUPT);

    const char *bad = "{\"order\":1.5,\"had\":{}}";
    assert_int_equal(fsck_restore_parse_order(bad, strlen(bad), &o), -DS_ECORRUPT);
}

static void write_text(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/quarantine/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static void test_fsck_restore_ranges_listed_with_markers(void **state)
{
    /* A directory without quarantine has no ranges; records are listed sorted by name, other
     * files passed over, a marker read with its record, a capacity too small refused. */
    (void)state;
    char dir[64];
    assert_int_equal(test_tempdir_make(dir, sizeof(dir)), 0);
    struct storage_restore_range v[4];
    uint32_t count = 9;
    assert_int_equal(storage_restore_ranges(dir, v, 4, &count), 0);
    assert_int_equal(count, 0);

    char q[128];
    snprintf(q, sizeof(q), "%s/quarantine", dir);
    assert_int_equal(mkdir(q, 0755), 0);
    write_text(dir, "2026-01-22.0.00000003.64.json", record_unknown);
    write_text(dir, "2026-01-21.2.00000001.7834.json", record_mixed);
    write_text(dir, "2026-01-21.2.00000001.7834.bin", "raw bytes");
    write_text(dir, "1.orders.jsonl", "{}\n");
    struct storage_restore_range r = {.name = "2026-01-21.2.00000001.7834"};
    assert_int_equal(storage_restore_mark(dir, &r, STORAGE_RESTORE_STARTED, 12, NULL), 0);

    assert_int_equal(storage_restore_ranges(dir, v, 4, &count), 0);
    assert_int_equal(count, 2);
    assert_string_equal(v[0].name, "2026-01-21.2.00000001.7834");
    assert_int_equal(v[0].state, STORAGE_RESTORE_STARTED);
    assert_int_equal(v[0].started_seq, 12);
    assert_string_equal(v[1].name, "2026-01-22.0.00000003.64");
    assert_int_equal(v[1].state, STORAGE_RESTORE_PENDING);

    struct storage_restore_tally t = {.events_read = 3, .events_applied = 2};
    assert_int_equal(storage_restore_mark(dir, &r, STORAGE_RESTORE_DONE, 0, &t), 0);
    assert_int_equal(storage_restore_ranges(dir, v, 4, &count), 0);
    assert_int_equal(v[0].state, STORAGE_RESTORE_DONE);

    assert_int_equal(storage_restore_ranges(dir, v, 1, &count), -DS_ELIMIT);
    write_text(dir, "2026-01-23.0.00000001.64.json", "{\"day\":\"2026");
    assert_int_equal(storage_restore_ranges(dir, v, 4, &count), -DS_ECORRUPT);
    test_tempdir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fsck_restore_record_read_as_written),
        cmocka_unit_test(test_fsck_restore_record_bad_refused),
        cmocka_unit_test(test_fsck_restore_marker_states),
        cmocka_unit_test(test_fsck_restore_order_line_takes_had),
        cmocka_unit_test(test_fsck_restore_ranges_listed_with_markers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
