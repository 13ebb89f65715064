/*
 * Unit tests of shard/shardmap.c: the per-day shard map in memory (ensure, grow, visit,
 * capacity), on disk (format, persistence, every kind of damage) and as a reader following a
 * writer (read-only open, reload). Each test gets its own temp dir under /tmp.
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
#include <unistd.h>

#include "shard/shard.h"
#include "tests/support/events.h"
#include "tests/support/tempdir.h"

struct fixture {
    char dir[64];
    char path[128]; /* dir/shardmap */
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(test_tempdir_make(f->dir, sizeof(f->dir)), 0);
    snprintf(f->path, sizeof(f->path), "%s/shardmap", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(test_tempdir_remove_checked(f->dir), 0);
    free(f);
    return 0;
}

static struct shard_map *map_open(const char *dir, uint32_t base, unsigned flags)
{
    struct shard_map *map = NULL;
    assert_int_equal(shard_map_open(dir, base, flags, &map), 0);
    assert_non_null(map);
    return map;
}

/* Replaces a file's contents; not durable, which a test does not need and which keeps the
 * thousand rewrites of the bit-flip test fast. */
static void file_write(const char *path, const char *data, size_t len)
{
    FILE *file = fopen(path, "wb");
    assert_non_null(file);
    assert_int_equal(fwrite(data, 1, len, file), len);
    assert_int_equal(fclose(file), 0);
}

/* Writes header + body + a correct checksum line, so only the body's content is under test. */
static void file_write_checksummed(const char *path, const char *header_and_body)
{
    char text[1024];
    size_t len = strlen(header_and_body);
    assert_true(len + 17 < sizeof(text));
    memcpy(text, header_and_body, len);
    uint32_t crc = ds_crc32c(0, text, len);
    len += (size_t)snprintf(text + len, sizeof(text) - len, "crc32c %08x\n", crc);
    file_write(path, text, len);
}

static char *file_read(const char *path, size_t *len)
{
    char *data = NULL;
    assert_int_equal(ds_read_file(path, 1u << 24, &data, len), 0);
    return data;
}

static int open_rc(const char *dir, unsigned flags)
{
    struct shard_map *map = NULL;
    int rc = shard_map_open(dir, 4, flags, &map);
    shard_map_close(map);
    if (rc != 0) {
        assert_null(map);
    }
    return rc;
}

static void test_shardmap_ensure_new_day_gets_base(void **state)
{
    /* A day first seen gets the base count and makes the map dirty; a known day is unchanged. */
    struct fixture *f = *state;
    struct shard_map *map = map_open(f->dir, 3, 0);
    int32_t day = test_day_of("2026-01-21");
    assert_false(shard_map_dirty(map));
    assert_int_equal(shard_map_get(map, day), 0);
    assert_int_equal(shard_map_day_count(map), 0);
    assert_int_equal(shard_map_ensure(map, day), 3);
    assert_true(shard_map_dirty(map));
    assert_int_equal(shard_map_get(map, day), 3);
    assert_int_equal(shard_map_ensure(map, day), 3);
    assert_int_equal(shard_map_day_count(map), 1);
    assert_int_equal(shard_map_get(map, day + 1), 0);
    shard_map_close(map);
}

static void test_shardmap_grow_raises_count(void **state)
{
    /* grow raises a day's count, also for a day not seen before; equal counts are a no-op. */
    struct fixture *f = *state;
    struct shard_map *map = map_open(f->dir, 4, 0);
    int32_t day = test_day_of("2026-01-21");
    assert_int_equal(shard_map_ensure(map, day), 4);
    assert_int_equal(shard_map_grow(map, day, 16), 0);
    assert_int_equal(shard_map_get(map, day), 16);
    assert_int_equal(shard_map_ensure(map, day), 16);
    assert_int_equal(shard_map_grow(map, day + 5, 2), 0);
    assert_int_equal(shard_map_get(map, day + 5), 2);
    assert_int_equal(shard_map_grow(map, day, SHARD_COUNT_MAX), 0);
    assert_int_equal(shard_map_get(map, day), SHARD_COUNT_MAX);
    assert_int_equal(shard_map_sync(map), 0);
    assert_int_equal(shard_map_grow(map, day, SHARD_COUNT_MAX), 0);
    assert_false(shard_map_dirty(map));
    shard_map_close(map);
}

static void test_shardmap_grow_refuses_shrink(void **state)
{
    /* The map only grows: a smaller or zero count is -EINVAL, beyond the maximum -DS_ELIMIT. */
    struct fixture *f = *state;
    struct shard_map *map = map_open(f->dir, 4, 0);
    int32_t day = test_day_of("2026-01-21");
    assert_int_equal(shard_map_grow(map, day, 8), 0);
    assert_int_equal(shard_map_sync(map), 0);
    assert_int_equal(shard_map_grow(map, day, 7), -EINVAL);
    assert_int_equal(shard_map_grow(map, day, 0), -EINVAL);
    assert_int_equal(shard_map_grow(map, day, SHARD_COUNT_MAX + 1), -DS_ELIMIT);
    assert_int_equal(shard_map_grow(map, day + 1, 0), -EINVAL);
    assert_int_equal(shard_map_get(map, day), 8);
    assert_int_equal(shard_map_get(map, day + 1), 0);
    assert_false(shard_map_dirty(map));
    shard_map_close(map);
}

static void test_shardmap_open_rejects_bad_arguments(void **state)
{
    /* A base outside 1..SHARD_COUNT_MAX, unknown flags or an over-long path are refused. */
    struct fixture *f = *state;
    struct shard_map *map = NULL;
    assert_int_equal(shard_map_open(f->dir, 0, 0, &map), -EINVAL);
    assert_int_equal(shard_map_open(f->dir, SHARD_COUNT_MAX + 1, 0, &map), -EINVAL);
    assert_int_equal(shard_map_open(f->dir, 4, 1u << 5, &map), -EINVAL);
    char *long_dir = malloc(DS_PATH_MAX + 1);
    assert_non_null(long_dir);
    memset(long_dir, 'a', DS_PATH_MAX);
    long_dir[0] = '/';
    long_dir[DS_PATH_MAX] = '\0';
    assert_int_equal(shard_map_open(long_dir, 4, 0, &map), -ENAMETOOLONG);
    free(long_dir);
    assert_null(map);
    assert_int_equal(access(f->path, F_OK), -1);
}

static void test_shardmap_open_creates_file_and_dir(void **state)
{
    /* A writable open creates the directory and an empty, valid map file at once. */
    struct fixture *f = *state;
    char sub[160];
    char sub_path[192];
    snprintf(sub, sizeof(sub), "%s/a/b", f->dir);
    snprintf(sub_path, sizeof(sub_path), "%s/shardmap", sub);
    struct shard_map *map = map_open(sub, 4, 0);
    assert_false(shard_map_dirty(map));
    shard_map_close(map);
    size_t len = 0;
    char *data = file_read(sub_path, &len);
    const char expected_header[] = "dayshard-shardmap 1\n";
    assert_int_equal(len, strlen(expected_header) + 16);
    assert_memory_equal(data, expected_header, strlen(expected_header));
    free(data);
    map = map_open(sub, 4, SHARD_MAP_READ_ONLY);
    assert_int_equal(shard_map_day_count(map), 0);
    shard_map_close(map);
}

static void test_shardmap_open_fails_when_dir_cannot_exist(void **state)
{
    /* A writable open under a regular file reports -ENOTDIR instead of an empty map. */
    struct fixture *f = *state;
    char file_path[160];
    char below[192];
    snprintf(file_path, sizeof(file_path), "%s/plain", f->dir);
    snprintf(below, sizeof(below), "%s/data", file_path);
    file_write(file_path, "x", 1);
    assert_int_equal(open_rc(below, 0), -ENOTDIR);
}

static void test_shardmap_sync_persists_across_reopen(void **state)
{
    /* Synced days and counts come back after close and open, whatever the new base. */
    struct fixture *f = *state;
    struct shard_map *map = map_open(f->dir, 4, 0);
    int32_t d21 = test_day_of("2026-01-21");
    int32_t d01 = test_day_of("2026-01-01");
    int32_t d31 = test_day_of("2025-12-31");
    assert_int_equal(shard_map_ensure(map, d21), 4);
    assert_int_equal(shard_map_ensure(map, d01), 4);
    assert_int_equal(shard_map_grow(map, d31, 1), 0);
    assert_int_equal(shard_map_grow(map, d21, 16), 0);
    assert_int_equal(shard_map_sync(map), 0);
    assert_false(shard_map_dirty(map));
    shard_map_close(map);

    size_t len = 0;
    char *data = file_read(f->path, &len);
    const char body[] = "dayshard-shardmap 1\n2025-12-31 1\n2026-01-01 4\n2026-01-21 16\n";
    char expected[128];
    snprintf(expected, sizeof(expected), "%scrc32c %08x\n", body, ds_crc32c(0, body, strlen(body)));
    assert_int_equal(len, strlen(expected));
    assert_memory_equal(data, expected, len);
    free(data);

    map = map_open(f->dir, 9, 0);
    assert_false(shard_map_dirty(map));
    assert_int_equal(shard_map_day_count(map), 3);
    assert_int_equal(shard_map_get(map, d31), 1);
    assert_int_equal(shard_map_get(map, d01), 4);
    assert_int_equal(shard_map_get(map, d21), 16);
    assert_int_equal(shard_map_ensure(map, d21 + 1), 9);
    shard_map_close(map);
}

static void test_shardmap_sync_clean_does_not_write(void **state)
{
    /* sync writes only when dirty: a clean map leaves the disk alone. */
    struct fixture *f = *state;
    struct shard_map *map = map_open(f->dir, 4, 0);
    assert_int_equal(shard_map_ensure(map, 100), 4);
    assert_int_equal(shard_map_sync(map), 0);
    assert_int_equal(unlink(f->path), 0);
    assert_int_equal(shard_map_sync(map), 0);
    assert_int_equal(access(f->path, F_OK), -1);
    assert_int_equal(shard_map_ensure(map, 101), 4);
    assert_int_equal(shard_map_sync(map), 0);
    assert_int_equal(access(f->path, F_OK), 0);
    shard_map_close(map);
}

struct visit_log {
    size_t count;
    size_t stop_after;
    int32_t days[8];
    uint32_t shard_counts[8];
};

static int visit_record(int32_t day, uint32_t shard_count, void *user)
{
    struct visit_log *log = user;
    assert_true(log->count < DS_ARRAY_LEN(log->days));
    log->days[log->count] = day;
    log->shard_counts[log->count] = shard_count;
    log->count++;
    return log->count == log->stop_after ? 42 : 0;
}

static void test_shardmap_visit_ascending_and_stops_early(void **state)
{
    /* visit goes in ascending day order whatever the insertion order, and stops on non-zero. */
    struct fixture *f = *state;
    struct shard_map *map = map_open(f->dir, 2, 0);
    const int32_t inserted[] = {500, 20, 7000, 21, 0, 499};
    const int32_t sorted[] = {0, 20, 21, 499, 500, 7000};
    for (size_t i = 0; i < DS_ARRAY_LEN(inserted); i++) {
        assert_int_equal(shard_map_grow(map, inserted[i], (uint32_t)(i + 1)), 0);
    }
    struct visit_log log = {0};
    assert_int_equal(shard_map_visit(map, visit_record, &log), 0);
    assert_int_equal(log.count, DS_ARRAY_LEN(sorted));
    for (size_t i = 0; i < DS_ARRAY_LEN(sorted); i++) {
        assert_int_equal(log.days[i], sorted[i]);
        assert_int_equal(log.shard_counts[i], shard_map_get(map, sorted[i]));
    }
    struct visit_log early = {.stop_after = 2};
    assert_int_equal(shard_map_visit(map, visit_record, &early), 42);
    assert_int_equal(early.count, 2);
    shard_map_close(map);
}

/* A valid file of three days, written by a real map; returns its length. */
static size_t write_sample_map(const struct fixture *f)
{
    struct shard_map *map = map_open(f->dir, 4, 0);
    assert_int_equal(shard_map_ensure(map, test_day_of("2026-01-01")), 4);
    assert_int_equal(shard_map_grow(map, test_day_of("2026-01-21"), 12), 0);
    assert_int_equal(shard_map_ensure(map, test_day_of("2026-02-01")), 4);
    assert_int_equal(shard_map_sync(map), 0);
    shard_map_close(map);
    struct stat st;
    assert_int_equal(stat(f->path, &st), 0);
    return (size_t)st.st_size;
}

static void test_shardmap_open_corrupt_any_flipped_bit(void **state)
{
    /* Flipping any single bit anywhere in the file is detected: -DS_ECORRUPT, or -DS_EFORMAT
     * when the flip turns the version digit into another number. */
    struct fixture *f = *state;
    size_t len = write_sample_map(f);
    size_t read_len = 0;
    char *good = file_read(f->path, &read_len);
    assert_int_equal(read_len, len);
    char *bad = malloc(len);
    assert_non_null(bad);
    const size_t version_at = strlen("dayshard-shardmap ");
    for (size_t at = 0; at < len; at++) {
        for (unsigned bit = 0; bit < 8; bit++) {
            memcpy(bad, good, len);
            bad[at] = (char)((unsigned char)bad[at] ^ (1u << bit));
            file_write(f->path, bad, len);
            int rc = open_rc(f->dir, SHARD_MAP_READ_ONLY);
            bool digit = bad[at] >= '0' && bad[at] <= '9';
            int expected = at == version_at && digit ? -DS_EFORMAT : -DS_ECORRUPT;
            if (rc != expected) {
                fail_msg("byte %zu bit %u: got %d, want %d", at, bit, rc, expected);
            }
        }
    }
    free(bad);
    free(good);
}

static void test_shardmap_open_corrupt_truncated(void **state)
{
    /* Every proper prefix of a valid file, the empty file included, is -DS_ECORRUPT; so is a
     * file with bytes appended. */
    struct fixture *f = *state;
    size_t len = write_sample_map(f);
    size_t read_len = 0;
    char *good = file_read(f->path, &read_len);
    for (size_t cut = 0; cut < len; cut++) {
        file_write(f->path, good, cut);
        assert_int_equal(open_rc(f->dir, 0), -DS_ECORRUPT);
        assert_int_equal(open_rc(f->dir, SHARD_MAP_READ_ONLY), -DS_ECORRUPT);
    }
    char longer[512];
    assert_true(len + 1 < sizeof(longer));
    memcpy(longer, good, len);
    longer[len] = '\n';
    file_write(f->path, longer, len + 1);
    assert_int_equal(open_rc(f->dir, 0), -DS_ECORRUPT);
    free(good);
}

static void test_shardmap_open_unknown_version(void **state)
{
    /* Another version number is -DS_EFORMAT, checked before the checksum it may not have. */
    struct fixture *f = *state;
    file_write_checksummed(f->path, "dayshard-shardmap 2\n2026-01-01 4\n");
    assert_int_equal(open_rc(f->dir, 0), -DS_EFORMAT);
    const char future[] = "dayshard-shardmap 17\nsomething else entirely\n";
    file_write(f->path, future, strlen(future));
    assert_int_equal(open_rc(f->dir, SHARD_MAP_READ_ONLY), -DS_EFORMAT);
    /* A malformed version is damage, not a version. */
    file_write_checksummed(f->path, "dayshard-shardmap 01\n");
    assert_int_equal(open_rc(f->dir, 0), -DS_ECORRUPT);
    file_write_checksummed(f->path, "dayshard-shardmap x\n");
    assert_int_equal(open_rc(f->dir, 0), -DS_ECORRUPT);
    file_write_checksummed(f->path, "dayshard-shardmap  1\n");
    assert_int_equal(open_rc(f->dir, 0), -DS_ECORRUPT);
    file_write_checksummed(f->path, "not-a-shardmap 1\n");
    assert_int_equal(open_rc(f->dir, 0), -DS_ECORRUPT);
    /* The valid header alone, with its checksum, is an empty map. */
    file_write_checksummed(f->path, "dayshard-shardmap 1\n");
    assert_int_equal(open_rc(f->dir, 0), 0);
}

static void test_shardmap_open_corrupt_bad_lines(void **state)
{
    /* Lines that break the format are -DS_ECORRUPT even under a correct checksum. */
    struct fixture *f = *state;
    const char *bodies[] = {
        "2026-01-01 4\n2026-01-01 4\n", /* duplicate day */
        "2026-01-02 4\n2026-01-01 4\n", /* descending days */
        "2026-01-01 0\n",               /* S = 0 */
        "2026-01-01 1025\n",            /* S > SHARD_COUNT_MAX */
        "2026-01-01 10000\n",           /* too many digits */
        "2026-01-01 04\n",              /* leading zero */
        "2026-01-01 -4\n",              /* sign */
        "2026-01-01  4\n",              /* two spaces */
        "2026-01-01 4 \n",              /* trailing space */
        "2026-01-01\t4\n",              /* tab */
        "2026-01-01 4\r\n",             /* CRLF */
        "2026-02-30 4\n",               /* not a date */
        "1969-12-31 4\n",               /* before the epoch */
        "2026-1-01 4\n",                /* short month */
        "2026-01-01\n",                 /* no count */
        "2026-01-01 \n",                /* empty count */
        "\n",                           /* empty line */
        "2026-01-01 4\nx\n",            /* garbage line */
        "2026-01-01 4",                 /* no newline before the checksum line */
    };
    for (size_t i = 0; i < DS_ARRAY_LEN(bodies); i++) {
        char text[256];
        snprintf(text, sizeof(text), "dayshard-shardmap 1\n%s", bodies[i]);
        file_write_checksummed(f->path, text);
        int rc = open_rc(f->dir, 0);
        if (rc != -DS_ECORRUPT) {
            fail_msg("body %zu: got %d", i, rc);
        }
    }
    file_write_checksummed(f->path, "dayshard-shardmap 1\n2026-01-01 4\n2026-01-02 1024\n");
    assert_int_equal(open_rc(f->dir, 0), 0);
}

static void test_shardmap_read_only_missing_file_is_empty(void **state)
{
    /* Read-only never writes: a missing file (or dir) is an empty map, and sync of changes is
     * refused with -EROFS. */
    struct fixture *f = *state;
    struct shard_map *map = map_open(f->dir, 4, SHARD_MAP_READ_ONLY);
    assert_int_equal(shard_map_day_count(map), 0);
    assert_false(shard_map_dirty(map));
    assert_int_equal(shard_map_sync(map), 0);
    assert_int_equal(shard_map_ensure(map, 7), 4);
    assert_int_equal(shard_map_sync(map), -EROFS);
    assert_true(shard_map_dirty(map));
    assert_int_equal(shard_map_reload(map), 0);
    assert_int_equal(shard_map_get(map, 7), 4);
    shard_map_close(map);
    assert_int_equal(access(f->path, F_OK), -1);

    char missing[160];
    snprintf(missing, sizeof(missing), "%s/no/such/dir", f->dir);
    map = map_open(missing, 4, SHARD_MAP_READ_ONLY);
    assert_int_equal(shard_map_day_count(map), 0);
    shard_map_close(map);
    assert_int_equal(access(missing, F_OK), -1);
}

static void test_shardmap_reload_sees_writer_changes(void **state)
{
    /* A reader following a writer picks up new days and grown counts on reload, and keeps the
     * larger count of any day it has itself (the map only grows). */
    struct fixture *f = *state;
    int32_t d1 = test_day_of("2026-01-01");
    int32_t d2 = test_day_of("2026-01-02");
    int32_t d3 = test_day_of("2026-01-03");
    struct shard_map *writer = map_open(f->dir, 4, 0);
    assert_int_equal(shard_map_ensure(writer, d1), 4);
    assert_int_equal(shard_map_sync(writer), 0);
    struct shard_map *reader = map_open(f->dir, 4, SHARD_MAP_READ_ONLY);
    assert_int_equal(shard_map_get(reader, d1), 4);
    assert_int_equal(shard_map_get(reader, d2), 0);

    assert_int_equal(shard_map_grow(writer, d1, 8), 0);
    assert_int_equal(shard_map_ensure(writer, d2), 4);
    assert_int_equal(shard_map_sync(writer), 0);
    assert_int_equal(shard_map_get(reader, d2), 0);
    assert_int_equal(shard_map_reload(reader), 0);
    assert_int_equal(shard_map_get(reader, d1), 8);
    assert_int_equal(shard_map_get(reader, d2), 4);
    assert_false(shard_map_dirty(reader));

    /* Memory ahead of the file: kept, and the map is dirty (it differs from the file). */
    assert_int_equal(shard_map_grow(reader, d2, 32), 0);
    assert_int_equal(shard_map_ensure(reader, d3), 4);
    assert_int_equal(shard_map_grow(writer, d2, 16), 0);
    assert_int_equal(shard_map_sync(writer), 0);
    assert_int_equal(shard_map_reload(reader), 0);
    assert_int_equal(shard_map_get(reader, d2), 32);
    assert_int_equal(shard_map_get(reader, d3), 4);
    assert_int_equal(shard_map_day_count(reader), 3);
    assert_true(shard_map_dirty(reader));

    /* The file catching up makes the reader clean again. */
    assert_int_equal(shard_map_grow(writer, d2, 32), 0);
    assert_int_equal(shard_map_ensure(writer, d3), 4);
    assert_int_equal(shard_map_sync(writer), 0);
    assert_int_equal(shard_map_reload(reader), 0);
    assert_false(shard_map_dirty(reader));
    shard_map_close(reader);
    shard_map_close(writer);
}

static void test_shardmap_reload_corrupt_leaves_map_unchanged(void **state)
{
    /* A failed reload reports the damage and changes nothing in memory. */
    struct fixture *f = *state;
    struct shard_map *map = map_open(f->dir, 4, SHARD_MAP_READ_ONLY);
    assert_int_equal(shard_map_day_count(map), 0);
    write_sample_map(f);
    assert_int_equal(shard_map_reload(map), 0);
    assert_int_equal(shard_map_day_count(map), 3);
    assert_int_equal(shard_map_get(map, test_day_of("2026-01-21")), 12);
    /* Valid lines first, then damage: nothing of it may be merged. */
    file_write_checksummed(f->path, "dayshard-shardmap 1\n2026-01-21 99\n2026-03-01 4\nbad\n");
    assert_int_equal(shard_map_reload(map), -DS_ECORRUPT);
    file_write_checksummed(f->path, "dayshard-shardmap 3\n");
    assert_int_equal(shard_map_reload(map), -DS_EFORMAT);
    assert_int_equal(shard_map_day_count(map), 3);
    assert_int_equal(shard_map_get(map, test_day_of("2026-01-21")), 12);
    assert_int_equal(shard_map_get(map, test_day_of("2026-03-01")), 0);
    assert_false(shard_map_dirty(map));
    shard_map_close(map);
}

static void test_shardmap_ensure_full_map_limit(void **state)
{
    /* SHARD_MAP_DAYS_MAX days fit (and survive a round trip at the longest file size); one
     * more is -DS_ELIMIT, through ensure and through grow. */
    struct fixture *f = *state;
    struct shard_map *map = map_open(f->dir, SHARD_COUNT_MAX, 0);
    for (int32_t day = 0; day < (int32_t)SHARD_MAP_DAYS_MAX; day++) {
        assert_int_equal(shard_map_ensure(map, day), SHARD_COUNT_MAX);
    }
    assert_int_equal(shard_map_day_count(map), SHARD_MAP_DAYS_MAX);
    int32_t extra = (int32_t)SHARD_MAP_DAYS_MAX + 10;
    assert_int_equal(shard_map_ensure(map, extra), -DS_ELIMIT);
    assert_int_equal(shard_map_grow(map, extra, 4), -DS_ELIMIT);
    assert_int_equal(shard_map_get(map, extra), 0);
    assert_int_equal(shard_map_ensure(map, 1234), SHARD_COUNT_MAX);
    assert_int_equal(shard_map_sync(map), 0);
    shard_map_close(map);

    map = map_open(f->dir, 4, SHARD_MAP_READ_ONLY);
    assert_int_equal(shard_map_day_count(map), SHARD_MAP_DAYS_MAX);
    assert_int_equal(shard_map_get(map, 0), SHARD_COUNT_MAX);
    assert_int_equal(shard_map_get(map, (int32_t)SHARD_MAP_DAYS_MAX - 1), SHARD_COUNT_MAX);
    /* A reload that would add days to a full map is refused and changes nothing. */
    shard_map_close(map);
    map = map_open(f->dir, 4, 0);
    struct shard_map *other = NULL;
    char other_dir[160];
    snprintf(other_dir, sizeof(other_dir), "%s/other", f->dir);
    other = map_open(other_dir, 4, 0);
    assert_int_equal(shard_map_ensure(other, extra), 4);
    assert_int_equal(shard_map_sync(other), 0);
    shard_map_close(other);
    char other_path[192];
    snprintf(other_path, sizeof(other_path), "%s/shardmap", other_dir);
    assert_int_equal(rename(other_path, f->path), 0);
    assert_int_equal(shard_map_reload(map), -DS_ELIMIT);
    assert_int_equal(shard_map_day_count(map), SHARD_MAP_DAYS_MAX);
    shard_map_close(map);
}

static void test_shardmap_sync_failure_keeps_dirty(void **state)
{
    /* When the atomic replace fails, sync returns the error, the map stays dirty and the old
     * file stays intact; a later sync succeeds. Tests run as root, so instead of permissions a
     * directory squats on the temp file's name (open(2) then fails with EISDIR). */
    struct fixture *f = *state;
    struct shard_map *map = map_open(f->dir, 4, 0);
    assert_int_equal(shard_map_ensure(map, 10), 4);
    assert_int_equal(shard_map_sync(map), 0);
    size_t old_len = 0;
    char *old = file_read(f->path, &old_len);

    char tmp[160];
    snprintf(tmp, sizeof(tmp), "%s.tmp", f->path);
    assert_int_equal(mkdir(tmp, 0755), 0);
    assert_int_equal(shard_map_ensure(map, 11), 4);
    assert_int_equal(shard_map_sync(map), -EISDIR);
    assert_true(shard_map_dirty(map));
    size_t now_len = 0;
    char *now = file_read(f->path, &now_len);
    assert_int_equal(now_len, old_len);
    assert_memory_equal(now, old, old_len);
    free(now);
    free(old);

    assert_int_equal(rmdir(tmp), 0);
    assert_int_equal(shard_map_sync(map), 0);
    assert_false(shard_map_dirty(map));
    shard_map_close(map);
    map = map_open(f->dir, 4, SHARD_MAP_READ_ONLY);
    assert_int_equal(shard_map_get(map, 11), 4);
    shard_map_close(map);
}

static void test_shardmap_grow_sync_durable_at_once(void **state)
{
    /* Adaptive growth: the new count is on disk when grow_sync returns, so a reopened map
     * (a restart, a reader) fans out over every shard events may already use. */
    struct fixture *f = *state;
    struct shard_map *map = map_open(f->dir, 4, 0);
    int32_t day = test_day_of("2026-01-21");
    assert_int_equal(shard_map_ensure(map, day), 4);
    assert_int_equal(shard_map_grow_sync(map, day, 16), 0);
    assert_false(shard_map_dirty(map));
    assert_int_equal(shard_map_get(map, day), 16);
    struct shard_map *reader = map_open(f->dir, 4, SHARD_MAP_READ_ONLY);
    assert_int_equal(shard_map_get(reader, day), 16);
    shard_map_close(reader);
    /* Growing to the same count is nothing; shrinking and unknown days are refused. */
    assert_int_equal(shard_map_grow_sync(map, day, 16), 0);
    assert_int_equal(shard_map_grow_sync(map, day, 8), -EINVAL);
    assert_int_equal(shard_map_grow_sync(map, day + 1, 8), -ENOENT);
    assert_int_equal(shard_map_grow_sync(map, day, SHARD_COUNT_MAX + 1), -DS_ELIMIT);
    shard_map_close(map);
}

static void test_shardmap_grow_sync_failed_write_keeps_old_count(void **state)
{
    /* A map write that fails stops the growth: memory keeps the count the file has, so no
     * event is routed to a shard a restart would not count. A directory where the temp file
     * goes makes the atomic replace fail (EISDIR) even for root. */
    struct fixture *f = *state;
    struct shard_map *map = map_open(f->dir, 4, 0);
    int32_t day = test_day_of("2026-01-21");
    assert_int_equal(shard_map_ensure(map, day), 4);
    assert_int_equal(shard_map_sync(map), 0);
    char tmp[160];
    snprintf(tmp, sizeof(tmp), "%s.tmp", f->path);
    assert_int_equal(mkdir(tmp, 0755), 0);
    assert_int_equal(shard_map_grow_sync(map, day, 8), -EISDIR);
    assert_int_equal(shard_map_get(map, day), 4);
    assert_false(shard_map_dirty(map));
    assert_int_equal(rmdir(tmp), 0);
    struct shard_map *reader = map_open(f->dir, 4, SHARD_MAP_READ_ONLY);
    assert_int_equal(shard_map_get(reader, day), 4);
    shard_map_close(reader);
    /* With the obstacle gone growth works again. */
    assert_int_equal(shard_map_grow_sync(map, day, 8), 0);
    assert_int_equal(shard_map_get(map, day), 8);
    shard_map_close(map);
}

static void test_shardmap_grow_sync_read_only_refused(void **state)
{
    /* A reader never writes, growth included. */
    struct fixture *f = *state;
    struct shard_map *writer = map_open(f->dir, 4, 0);
    int32_t day = test_day_of("2026-01-21");
    assert_int_equal(shard_map_ensure(writer, day), 4);
    assert_int_equal(shard_map_sync(writer), 0);
    struct shard_map *reader = map_open(f->dir, 4, SHARD_MAP_READ_ONLY);
    assert_int_equal(shard_map_grow_sync(reader, day, 8), -EROFS);
    assert_int_equal(shard_map_get(reader, day), 4);
    shard_map_close(reader);
    shard_map_close(writer);
}

static void test_shardmap_memory_only_touches_no_file(void **state)
{
    /* A producer's map (dir NULL) grows and syncs in memory and writes nothing anywhere. */
    struct fixture *f = *state;
    struct shard_map *map = map_open(NULL, 4, 0);
    int32_t day = test_day_of("2026-01-21");
    assert_int_equal(shard_map_ensure(map, day), 4);
    assert_true(shard_map_dirty(map));
    assert_int_equal(shard_map_sync(map), 0);
    assert_false(shard_map_dirty(map));
    assert_int_equal(shard_map_grow_sync(map, day, 32), 0);
    assert_int_equal(shard_map_get(map, day), 32);
    assert_int_equal(shard_map_reload(map), 0);
    assert_int_equal(shard_map_get(map, day), 32);
    shard_map_close(map);
    assert_int_equal(access(f->path, F_OK), -1);
}

static void test_shardmap_growth_log_appends_lines(void **state)
{
    /* The history: one JSON line per growth, appended. */
    struct fixture *f = *state;
    struct shard_growth g = {
        .day = test_day_of("2026-01-21"), .from = 4, .to = 8, .at_ms = 1764630003120LL};
    snprintf(g.reason, sizeof(g.reason), "5210 events/s over 5 s > 4 shards x 1000/s");
    assert_int_equal(shard_growth_log_append(f->dir, &g), 0);
    g.from = 8;
    g.to = 16;
    assert_int_equal(shard_growth_log_append(f->dir, &g), 0);
    char path[160];
    snprintf(path, sizeof(path), "%s/shardmap.log", f->dir);
    FILE *file = fopen(path, "r");
    assert_non_null(file);
    char line[512];
    assert_non_null(fgets(line, sizeof(line), file));
    assert_string_equal(line,
                        "{\"day\":\"2026-01-21\",\"from\":4,\"to\":8,\"at\":\"2025-12-01T23:00:"
                        "03.120Z\",\"reason\":\"5210 events/s over 5 s > 4 shards x "
                        "1000/s\"}\n");
    assert_non_null(fgets(line, sizeof(line), file));
    assert_non_null(strstr(line, "\"from\":8,\"to\":16,"));
    assert_null(fgets(line, sizeof(line), file));
    fclose(file);
    /* A directory that does not exist is an error, not a crash. */
    assert_int_equal(shard_growth_log_append("/nonexistent-dayshard-dir", &g), -ENOENT);
}

static void test_shardmap_last_and_previous_day(void **state)
{
    /* The neighbours the growth plan asks for: the latest day, and the day before any day. */
    (void)state;
    struct shard_map *map = map_open(NULL, 4, 0);
    assert_int_equal(shard_map_last_day(map), -1);
    assert_int_equal(shard_map_previous_day(map, 100), -1);
    const int32_t days[] = {50, 10, 30, 20};
    for (size_t i = 0; i < DS_ARRAY_LEN(days); i++) {
        assert_int_equal(shard_map_ensure(map, days[i]), 4);
    }
    assert_int_equal(shard_map_last_day(map), 50);
    assert_int_equal(shard_map_previous_day(map, 50), 30);
    assert_int_equal(shard_map_previous_day(map, 31), 30);
    assert_int_equal(shard_map_previous_day(map, 30), 20);
    assert_int_equal(shard_map_previous_day(map, 11), 10);
    assert_int_equal(shard_map_previous_day(map, 10), -1);
    assert_int_equal(shard_map_previous_day(map, 1000), 50);
    shard_map_close(map);
}

static void test_shardmap_close_accepts_null(void **state)
{
    /* Teardown accepts NULL, as every close in the project does. */
    (void)state;
    shard_map_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_shardmap_ensure_new_day_gets_base, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_grow_raises_count, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_grow_refuses_shrink, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_open_rejects_bad_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_open_creates_file_and_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_open_fails_when_dir_cannot_exist, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_sync_persists_across_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_sync_clean_does_not_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_visit_ascending_and_stops_early, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_open_corrupt_any_flipped_bit, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_open_corrupt_truncated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_open_unknown_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_open_corrupt_bad_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_read_only_missing_file_is_empty, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_reload_sees_writer_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_reload_corrupt_leaves_map_unchanged, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_ensure_full_map_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_sync_failure_keeps_dirty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_grow_sync_durable_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_grow_sync_failed_write_keeps_old_count, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_grow_sync_read_only_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_memory_only_touches_no_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shardmap_growth_log_appends_lines, setup, teardown),
        cmocka_unit_test(test_shardmap_last_and_previous_day),
        cmocka_unit_test(test_shardmap_close_accepts_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
