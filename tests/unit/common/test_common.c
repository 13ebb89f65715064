/*
 * Unit tests of common/: CRC32C (vectors, hardware against software), civil dates against the
 * libc oracle, fixed-point amount formatting, the SPSC ring (single-threaded and a two-thread
 * stress), small-file helpers, error names, clocks, logging and assertions.
 *
 * Randomised tests use seed 42, or DS_TEST_SEED when set; main prints the seed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "tests/support/events.h"
#include "tests/support/tempdir.h"

/* ---- helpers ------------------------------------------------------------------------------- */

/* The randomised tests' seed unless DS_TEST_SEED gives one; main prints the seed in use. */
#define COMMON_SEED_DEFAULT 42

struct fixture {
    char dir[64];
};

static int setup_dir(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(test_tempdir_make(f->dir, sizeof(f->dir)), 0);
    *state = f;
    return 0;
}

static int teardown_dir(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(test_tempdir_remove_checked(f->dir), 0);
    free(f);
    return 0;
}

/* ---- CRC32C -------------------------------------------------------------------------------- */

static void test_common_crc32c_rfc3720_vectors(void **state)
{
    /* RFC 3720 B.4 vectors and the classic check value, through both implementations. */
    (void)state;
    uint8_t zeros[32];
    uint8_t ones[32];
    uint8_t ascending[32];
    uint8_t descending[32];
    memset(zeros, 0, sizeof(zeros));
    memset(ones, 0xFF, sizeof(ones));
    for (size_t i = 0; i < 32; i++) {
        ascending[i] = (uint8_t)i;
        descending[i] = (uint8_t)(31 - i);
    }
    uint32_t (*const fns[])(uint32_t, const void *, size_t) = {ds_crc32c, ds_crc32c_sw};
    for (size_t i = 0; i < DS_ARRAY_LEN(fns); i++) {
        assert_int_equal(fns[i](0, zeros, sizeof(zeros)), 0x8A9136AAu);
        assert_int_equal(fns[i](0, ones, sizeof(ones)), 0x62A8AB43u);
        assert_int_equal(fns[i](0, ascending, sizeof(ascending)), 0x46DD794Eu);
        assert_int_equal(fns[i](0, descending, sizeof(descending)), 0x113FDB5Cu);
        assert_int_equal(fns[i](0, "123456789", 9), 0xE3069283u);
        assert_int_equal(fns[i](0, "", 0), 0);
    }
}

static void test_common_crc32c_hw_matches_sw_every_length(void **state)
{
    /* The accelerated path equals the table path for every length 0..1024 at every alignment,
     * and extending a CRC over two pieces equals one pass over both. */
    (void)state;
    uint64_t seed = test_seed_or(COMMON_SEED_DEFAULT);
    uint8_t buffer[1024 + 16];
    for (size_t i = 0; i < sizeof(buffer); i++) {
        buffer[i] = (uint8_t)test_rng_next(&seed);
    }
    for (size_t offset = 0; offset < 8; offset++) {
        for (size_t len = 0; len <= 1024; len++) {
            uint32_t hw = ds_crc32c(0, buffer + offset, len);
            uint32_t sw = ds_crc32c_sw(0, buffer + offset, len);
            if (hw != sw) {
                fail_msg("offset %zu len %zu: hw %08x sw %08x", offset, len, hw, sw);
            }
            size_t split = len / 3;
            uint32_t piecewise = ds_crc32c(ds_crc32c(0, buffer + offset, split),
                                           buffer + offset + split, len - split);
            assert_int_equal(piecewise, hw);
            assert_int_equal(ds_crc32c_sw(ds_crc32c_sw(0, buffer + offset, split),
                                          buffer + offset + split, len - split),
                             sw);
        }
    }
}

/* ---- dates --------------------------------------------------------------------------------- */

/* Checks one day against gmtime_r and timegm. */
static void date_check_against_libc(int32_t days)
{
    time_t t = (time_t)days * 86400;
    struct tm tm;
    assert_non_null(gmtime_r(&t, &tm));
    int32_t year = 0;
    uint32_t month = 0;
    uint32_t day = 0;
    ds_civil_from_days(days, &year, &month, &day);
    if (year != tm.tm_year + 1900 || month != (uint32_t)tm.tm_mon + 1 ||
        day != (uint32_t)tm.tm_mday) {
        fail_msg("day %d: got %d-%u-%u, libc %d-%d-%d", days, year, month, day, tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday);
    }
    assert_int_equal(ds_days_from_civil(year, month, day), days);
    assert_true(ds_date_valid(year, month, day));
    struct tm back = {.tm_year = year - 1900, .tm_mon = (int)month - 1, .tm_mday = (int)day};
    assert_true(timegm(&back) == t);
}

static void test_common_days_from_civil_matches_libc(void **state)
{
    /* Hinnant's algorithms agree with gmtime_r/timegm on every day of 1970..2200 and on a
     * sample of days up to 9999-12-31 and before the epoch. */
    (void)state;
    int32_t year_2200 = ds_days_from_civil(2200, 1, 1);
    for (int32_t days = 0; days < year_2200; days++) {
        date_check_against_libc(days);
    }
    uint64_t seed = test_seed_or(COMMON_SEED_DEFAULT);
    for (int i = 0; i < 200000; i++) {
        int32_t days =
            year_2200 + (int32_t)(test_rng_next(&seed) % (uint64_t)(DS_DAY_MAX - year_2200 + 1));
        date_check_against_libc(days);
    }
    date_check_against_libc(DS_DAY_MAX);
    for (int32_t days = -1; days > -800000; days -= 997) {
        date_check_against_libc(days);
    }
    assert_int_equal(ds_days_from_civil(1970, 1, 1), 0);
    assert_int_equal(ds_days_from_civil(1969, 12, 31), -1);
    assert_int_equal(ds_days_from_civil(9999, 12, 31), DS_DAY_MAX);
    assert_int_equal(ds_days_from_civil(2026, 1, 21), 20474);
}

static void test_common_date_valid_leap_years(void **state)
{
    /* Leap years follow the Gregorian rule (1900 no, 2000 yes, 2024 yes); month lengths hold. */
    (void)state;
    assert_false(ds_date_valid(1900, 2, 29));
    assert_true(ds_date_valid(2000, 2, 29));
    assert_true(ds_date_valid(2024, 2, 29));
    assert_false(ds_date_valid(2023, 2, 29));
    assert_false(ds_date_valid(2100, 2, 29));
    assert_true(ds_date_valid(2400, 2, 29));
    assert_true(ds_date_valid(2023, 2, 28));
    assert_false(ds_date_valid(2026, 4, 31));
    assert_true(ds_date_valid(2026, 12, 31));
    assert_false(ds_date_valid(2026, 0, 1));
    assert_false(ds_date_valid(2026, 13, 1));
    assert_false(ds_date_valid(2026, 1, 0));
    assert_false(ds_date_valid(2026, 1, 32));
}

static void test_common_date_parse_round_trip_and_rejects(void **state)
{
    /* ds_date_parse takes exactly YYYY-MM-DD of a real date from 1970 on; failures leave the
     * output untouched. */
    (void)state;
    int32_t days = -7;
    assert_int_equal(ds_date_parse("1970-01-01", 10, &days), 0);
    assert_int_equal(days, 0);
    assert_int_equal(ds_date_parse("9999-12-31", 10, &days), 0);
    assert_int_equal(days, DS_DAY_MAX);
    assert_int_equal(ds_date_parse("2024-02-29", 10, &days), 0);
    assert_int_equal(days, ds_days_from_civil(2024, 2, 29));
    /* Only len bytes are read. */
    assert_int_equal(ds_date_parse("2026-01-21T10:00:00Z", 10, &days), 0);
    assert_int_equal(days, 20474);
    char text[DS_DATE_TEXT_SIZE];
    ds_date_format(20474, text);
    assert_string_equal(text, "2026-01-21");
    ds_date_format(DS_DAY_MAX, text);
    assert_string_equal(text, "9999-12-31");
    ds_date_format(0, text);
    assert_string_equal(text, "1970-01-01");
    /* Timestamps: milliseconds kept, both ends of the valid range. */
    char ts[DS_TS_TEXT_SIZE];
    ds_ts_format(0, ts);
    assert_string_equal(ts, "1970-01-01T00:00:00.000Z");
    ds_ts_format(DS_TS_MS_MAX, ts);
    assert_string_equal(ts, "9999-12-31T23:59:59.999Z");
    ds_ts_format(1769004000123LL, ts);
    assert_string_equal(ts, "2026-01-21T14:00:00.123Z");

    const char *bad[] = {
        "",           "2026-01-1",   "2026-01-011", "2026/01/01", "2026-00-10",
        "2026-13-01", "2026-02-29",  "2026-02-30",  "1900-02-29", "1969-12-31",
        "0000-01-01", " 2026-01-01", "2026-01-0a",  "+026-01-01", "2026- 1-01",
        "2026-1-010", "20260-1-01",  "2026-01-00",  "-026-01-01", "2026_01_01",
    };
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        days = -7;
        if (ds_date_parse(bad[i], strlen(bad[i]), &days) != -DS_EUSAGE) {
            fail_msg("accepted \"%s\"", bad[i]);
        }
        assert_int_equal(days, -7);
    }
    assert_int_equal(ds_date_parse("2026-01-21", 9, &days), -DS_EUSAGE);
}

static void test_common_day_from_ms_floors(void **state)
{
    /* Milliseconds map to days by floor division, also before the epoch. */
    (void)state;
    assert_int_equal(ds_day_from_ms(0), 0);
    assert_int_equal(ds_day_from_ms(86399999), 0);
    assert_int_equal(ds_day_from_ms(86400000), 1);
    assert_int_equal(ds_day_from_ms(-1), -1);
    assert_int_equal(ds_day_from_ms(-86400000), -1);
    assert_int_equal(ds_day_from_ms(-86400001), -2);
    assert_int_equal(ds_day_from_ms(DS_TS_MS_MAX), DS_DAY_MAX);
    assert_int_equal(ds_day_from_ms(DS_TS_MS_MAX + 1), DS_DAY_MAX + 1);
    assert_int_equal(ds_day_from_ms(1768989600000LL), 20474); /* 2026-01-21T10:00:00Z */
}

/* ---- amounts ------------------------------------------------------------------------------- */

static void amount_check(ds_i128 units, const char *expected)
{
    char text[DS_AMOUNT_TEXT_SIZE];
    memset(text, 'X', sizeof(text));
    size_t len = ds_amount_format(units, text);
    assert_string_equal(text, expected);
    assert_int_equal(len, strlen(expected));
}

static void test_common_amount_format_exact(void **state)
{
    /* Amount sums print exactly with four decimals, from tiny to the 128-bit extremes. */
    (void)state;
    amount_check(0, "0.0000");
    amount_check(1, "0.0001");
    amount_check(-5, "-0.0005");
    amount_check(99900, "9.9900");
    amount_check(10000, "1.0000");
    amount_check(-10000, "-1.0000");
    amount_check(123456789, "12345.6789");
    amount_check(INT64_MAX, "922337203685477.5807");
    amount_check(INT64_MIN, "-922337203685477.5808");
    ds_i128 big = (ds_i128)1000000000000000000LL * (ds_i128)1000000000000LL + 1; /* 10^30 + 1 */
    amount_check(big, "100000000000000000000000000.0001");
    __extension__ unsigned __int128 umax = ~(unsigned __int128)0;
    ds_i128 max = (ds_i128)(umax >> 1);
    ds_i128 min = -max - 1;
    amount_check(max, "17014118346046923173168730371588410.5727");
    amount_check(min, "-17014118346046923173168730371588410.5728");
    char text[DS_AMOUNT_TEXT_SIZE];
    assert_true(ds_amount_format(min, text) < DS_AMOUNT_TEXT_SIZE);
}

/* ---- ring ---------------------------------------------------------------------------------- */

static void *item_of(uintptr_t n)
{
    return (void *)n;
}

static void test_common_ring_init_checks_capacity(void **state)
{
    /* Capacity must be a power of two in 2..DS_RING_CAPACITY_MAX. */
    (void)state;
    struct ds_ring ring;
    const size_t bad[] = {0, 1, 3, 6, 1000, DS_RING_CAPACITY_MAX + 1, DS_RING_CAPACITY_MAX * 2};
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        assert_int_equal(ds_ring_init(&ring, bad[i]), -EINVAL);
    }
    assert_int_equal(ds_ring_init(&ring, 2), 0);
    ds_ring_deinit(&ring);
    assert_int_equal(ds_ring_init(&ring, DS_RING_CAPACITY_MAX), 0);
    ds_ring_deinit(&ring);
    ds_ring_deinit(NULL);
}

static void test_common_ring_push_pop_full_empty(void **state)
{
    /* FIFO order; a full ring refuses with -EAGAIN and an empty one pops NULL, across many
     * wrap-arounds. */
    (void)state;
    struct ds_ring ring;
    assert_int_equal(ds_ring_init(&ring, 8), 0);
    assert_null(ds_ring_pop(&ring));
    uintptr_t pushed = 0;
    uintptr_t popped = 0;
    for (int round = 0; round < 100; round++) {
        size_t burst = (size_t)round % 9;
        for (size_t i = 0; i < burst; i++) {
            if (ds_ring_count(&ring) == 8) {
                assert_int_equal(ds_ring_push(&ring, item_of(pushed + 1)), -EAGAIN);
                break;
            }
            assert_int_equal(ds_ring_push(&ring, item_of(++pushed)), 0);
        }
        assert_int_equal(ds_ring_count(&ring), pushed - popped);
        size_t take = (size_t)(round * 7) % 5;
        for (size_t i = 0; i < take && popped < pushed; i++) {
            assert_ptr_equal(ds_ring_pop(&ring), item_of(++popped));
        }
    }
    while (ds_ring_count(&ring) < 8) {
        assert_int_equal(ds_ring_push(&ring, item_of(++pushed)), 0);
    }
    assert_int_equal(ds_ring_push(&ring, item_of(pushed + 1)), -EAGAIN);
    while (popped < pushed) {
        assert_ptr_equal(ds_ring_pop(&ring), item_of(++popped));
    }
    assert_null(ds_ring_pop(&ring));
    assert_int_equal(ds_ring_count(&ring), 0);
    ds_ring_deinit(&ring);
}

#define RING_STRESS_ITEMS 2000000u

static void *ring_producer(void *arg)
{
    struct ds_ring *ring = arg;
    for (uintptr_t n = 1; n <= RING_STRESS_ITEMS;) {
        if (ds_ring_push(ring, item_of(n)) == 0) {
            n++;
        } else {
            sched_yield();
        }
    }
    return NULL;
}

static void test_common_ring_two_threads_order_and_no_loss(void **state)
{
    /* One producer and one consumer thread: every item arrives once, in order. */
    (void)state;
    struct ds_ring ring;
    assert_int_equal(ds_ring_init(&ring, 64), 0);
    pthread_t producer;
    assert_int_equal(pthread_create(&producer, NULL, ring_producer, &ring), 0);
    uintptr_t expected = 1;
    while (expected <= RING_STRESS_ITEMS) {
        void *item = ds_ring_pop(&ring);
        if (item == NULL) {
            sched_yield();
            continue;
        }
        if (item != item_of(expected)) {
            fail_msg("got %p, want %zu", item, (size_t)expected);
        }
        expected++;
    }
    assert_int_equal(pthread_join(producer, NULL), 0);
    assert_null(ds_ring_pop(&ring));
    ds_ring_deinit(&ring);
}

/* ---- files --------------------------------------------------------------------------------- */

static void test_common_write_file_atomic_round_trip(void **state)
{
    /* What ds_write_file_atomic writes, ds_read_file reads back, empty and large files too;
     * a rewrite replaces the whole file and no temp file is left behind. */
    struct fixture *f = *state;
    char path[128];
    char tmp[160];
    snprintf(path, sizeof(path), "%s/meta", f->dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    size_t big_len = 1u << 20;
    char *big = malloc(big_len);
    assert_non_null(big);
    uint64_t seed = test_seed_or(COMMON_SEED_DEFAULT);
    for (size_t i = 0; i < big_len; i++) {
        big[i] = (char)test_rng_next(&seed);
    }
    const size_t lengths[] = {big_len, 0, 5, 1};
    for (size_t i = 0; i < DS_ARRAY_LEN(lengths); i++) {
        assert_int_equal(ds_write_file_atomic(path, big, lengths[i]), 0);
        char *data = NULL;
        size_t len = 99;
        assert_int_equal(ds_read_file(path, big_len, &data, &len), 0);
        assert_int_equal(len, lengths[i]);
        assert_memory_equal(data, big, len);
        assert_int_equal(data[len], '\0');
        free(data);
        assert_int_equal(access(tmp, F_OK), -1);
    }
    free(big);
}

static void test_common_read_file_errors(void **state)
{
    /* A file over size_max is -EFBIG, a missing one -ENOENT, a directory -EISDIR; a write
     * into a missing directory is -ENOENT. Outputs stay untouched on failure. */
    struct fixture *f = *state;
    char path[128];
    snprintf(path, sizeof(path), "%s/meta", f->dir);
    assert_int_equal(ds_write_file_atomic(path, "0123456789", 10), 0);
    char *data = (char *)f;
    size_t len = 77;
    assert_int_equal(ds_read_file(path, 9, &data, &len), -EFBIG);
    assert_int_equal(ds_read_file(path, 10, &data, &len), 0);
    assert_int_equal(len, 10);
    free(data);
    data = (char *)f;
    len = 77;
    char missing[160];
    snprintf(missing, sizeof(missing), "%s/missing", f->dir);
    assert_int_equal(ds_read_file(missing, 100, &data, &len), -ENOENT);
    assert_int_equal(ds_read_file(f->dir, 1u << 20, &data, &len), -EISDIR);
    assert_ptr_equal(data, (char *)f);
    assert_int_equal(len, 77);
    char below[192];
    snprintf(below, sizeof(below), "%s/missing/meta", f->dir);
    assert_int_equal(ds_write_file_atomic(below, "x", 1), -ENOENT);
    assert_int_equal(ds_fsync_dir(f->dir), 0);
    assert_int_equal(ds_fsync_dir(missing), -ENOENT);
    assert_int_equal(ds_fsync_dir(path), -ENOTDIR);
}

static void test_common_mkdir_p_nested_and_errors(void **state)
{
    /* mkdir -p creates every level, accepts existing dirs and trailing slashes, and refuses a
     * path through a regular file or an empty path. */
    struct fixture *f = *state;
    char nested[160];
    snprintf(nested, sizeof(nested), "%s/a/b//c/", f->dir);
    assert_int_equal(ds_mkdir_p(nested), 0);
    assert_int_equal(ds_mkdir_p(nested), 0);
    assert_int_equal(ds_mkdir_p(f->dir), 0);
    struct stat st;
    char deepest[160];
    snprintf(deepest, sizeof(deepest), "%s/a/b/c", f->dir);
    assert_int_equal(stat(deepest, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    char file_path[160];
    char through[192];
    snprintf(file_path, sizeof(file_path), "%s/plain", f->dir);
    snprintf(through, sizeof(through), "%s/x/y", file_path);
    assert_int_equal(ds_write_file_atomic(file_path, "x", 1), 0);
    assert_int_equal(ds_mkdir_p(through), -ENOTDIR);
    assert_int_equal(ds_mkdir_p(file_path), -ENOTDIR);
    assert_int_equal(ds_mkdir_p(""), -ENOENT);
    assert_int_equal(ds_mkdir_p("/"), 0);
}

static void test_common_remove_tree_removes_below_and_keeps_link_targets(void **state)
{
    /* rm -r: nested directories and files go, a symbolic link is removed and its target (outside
     * the tree) kept, a path already gone is fine, a second removal too. */
    struct fixture *f = *state;
    char tree[160];
    char nested[192];
    char file_path[224];
    char outside[160];
    char link_path[192];
    snprintf(tree, sizeof(tree), "%s/tree", f->dir);
    snprintf(nested, sizeof(nested), "%s/a/b", tree);
    snprintf(file_path, sizeof(file_path), "%s/data", nested);
    snprintf(outside, sizeof(outside), "%s/kept", f->dir);
    snprintf(link_path, sizeof(link_path), "%s/link", tree);
    assert_int_equal(ds_mkdir_p(nested), 0);
    assert_int_equal(ds_write_file_atomic(file_path, "x", 1), 0);
    assert_int_equal(ds_write_file_atomic(outside, "y", 1), 0);
    assert_int_equal(symlink(outside, link_path), 0);
    assert_int_equal(ds_remove_tree(tree), 0);
    struct stat st;
    assert_int_equal(lstat(tree, &st), -1);
    assert_int_equal(errno, ENOENT);
    assert_int_equal(stat(outside, &st), 0);
    assert_int_equal(ds_remove_tree(tree), 0);
}

/* ---- errors, clocks, logging, assertions ------------------------------------------------- */

static void test_common_strerror_names_every_code(void **state)
{
    /* ds_strerror names errno values and every project code, and never returns NULL. */
    (void)state;
    assert_string_equal(ds_strerror(0), "success");
    assert_string_equal(ds_strerror(-ENOENT), "No such file or directory");
    assert_string_equal(ds_strerror(-EAGAIN), "Resource temporarily unavailable");
    assert_non_null(strstr(ds_strerror(-DS_ECORRUPT), "corrupt"));
    assert_non_null(strstr(ds_strerror(-DS_EFORMAT), "format"));
    assert_non_null(strstr(ds_strerror(-DS_ELIMIT), "limit"));
    for (int code = DS_ERR_BASE; code < DS_ERR_END; code++) {
        const char *name = ds_strerror(-code);
        assert_non_null(name);
        assert_string_not_equal(name, "unknown dayshard error");
        assert_string_not_equal(name, "unknown error");
    }
    assert_string_equal(ds_strerror(-DS_ERR_END), "unknown error");
    assert_string_equal(ds_strerror(-3999), "unknown error");
    assert_non_null(ds_strerror(INT_MIN));
    assert_non_null(ds_strerror(INT_MAX));
}

static void test_common_clock_monotonic_and_realtime(void **state)
{
    /* The monotonic clock never goes back; the real clock is past 2020. */
    (void)state;
    uint64_t last = ds_clock_ns();
    for (int i = 0; i < 1000; i++) {
        uint64_t now = ds_clock_ns();
        assert_true(now >= last);
        last = now;
    }
    assert_true(ds_clock_realtime_ms() > 1577836800000LL);
}

/* Runs fn with stderr sent to a file and returns what it wrote (malloc'd). */
static char *capture_stderr(const struct fixture *f, void (*fn)(void))
{
    char path[128];
    snprintf(path, sizeof(path), "%s/stderr", f->dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fd, STDERR_FILENO) >= 0);
    fn();
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    close(fd);
    char *data = NULL;
    size_t len = 0;
    assert_int_equal(ds_read_file(path, 1u << 20, &data, &len), 0);
    return data;
}

static void log_some_lines(void)
{
    ds_log_debug("debug %d", 1);
    ds_log_info("info %d", 2);
    ds_log_warn("warn %d", 3);
    ds_log_error("error %s", "four");
}

static void log_long_line(void)
{
    char text[3000];
    memset(text, 'z', sizeof(text) - 1);
    text[sizeof(text) - 1] = '\0';
    ds_log_error("%s", text);
}

static void test_common_log_threshold_and_truncation(void **state)
{
    /* DS_LOG sets the threshold (warn by default); each message is one line, long ones are
     * cut to fit the 1 KiB line and still end in a newline. */
    struct fixture *f = *state;
    const char *old = getenv("DS_LOG");
    char *saved = old != NULL ? strdup(old) : NULL;
    unsetenv("DS_LOG");
    char *out = capture_stderr(f, log_some_lines);
    assert_string_equal(out, "dayshard: warn: warn 3\ndayshard: error: error four\n");
    free(out);
    setenv("DS_LOG", "error", 1);
    out = capture_stderr(f, log_some_lines);
    assert_string_equal(out, "dayshard: error: error four\n");
    free(out);
    setenv("DS_LOG", "debug", 1);
    out = capture_stderr(f, log_some_lines);
    assert_string_equal(out, "dayshard: debug: debug 1\ndayshard: info: info 2\n"
                             "dayshard: warn: warn 3\ndayshard: error: error four\n");
    free(out);
    out = capture_stderr(f, log_long_line);
    assert_int_equal(strlen(out), 1023);
    assert_int_equal(out[1022], '\n');
    assert_ptr_equal(strchr(out, '\n'), out + 1022);
    free(out);
    if (saved != NULL) {
        setenv("DS_LOG", saved, 1);
        free(saved);
    } else {
        unsetenv("DS_LOG");
    }
}

static void test_common_assert_aborts_with_expression(void **state)
{
    /* A failed ASSERT prints the expression, file and line, then aborts (also under NDEBUG). */
    (void)state;
    int pipe_fds[2];
    assert_int_equal(pipe(pipe_fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(pipe_fds[1], STDERR_FILENO);
        int one = 1;
        ASSERT(one == 2);
        _exit(0);
    }
    close(pipe_fds[1]);
    char text[512] = {0};
    size_t len = 0;
    ssize_t n = 0;
    while ((n = read(pipe_fds[0], text + len, sizeof(text) - 1 - len)) > 0) {
        len += (size_t)n;
    }
    close(pipe_fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
    assert_non_null(strstr(text, "dayshard: assertion failed: one == 2 ("));
    assert_non_null(strstr(text, "test_common.c:"));
}

int main(void)
{
    printf("common tests: seed %lu (set DS_TEST_SEED to replay another)\n",
           (unsigned long)test_seed_or(COMMON_SEED_DEFAULT));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_common_crc32c_rfc3720_vectors),
        cmocka_unit_test(test_common_crc32c_hw_matches_sw_every_length),
        cmocka_unit_test(test_common_days_from_civil_matches_libc),
        cmocka_unit_test(test_common_date_valid_leap_years),
        cmocka_unit_test(test_common_date_parse_round_trip_and_rejects),
        cmocka_unit_test(test_common_day_from_ms_floors),
        cmocka_unit_test(test_common_amount_format_exact),
        cmocka_unit_test(test_common_ring_init_checks_capacity),
        cmocka_unit_test(test_common_ring_push_pop_full_empty),
        cmocka_unit_test(test_common_ring_two_threads_order_and_no_loss),
        cmocka_unit_test_setup_teardown(test_common_write_file_atomic_round_trip, setup_dir,
                                        teardown_dir),
        cmocka_unit_test_setup_teardown(test_common_read_file_errors, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(
            test_common_remove_tree_removes_below_and_keeps_link_targets, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_common_mkdir_p_nested_and_errors, setup_dir,
                                        teardown_dir),
        cmocka_unit_test(test_common_strerror_names_every_code),
        cmocka_unit_test(test_common_clock_monotonic_and_realtime),
        cmocka_unit_test_setup_teardown(test_common_log_threshold_and_truncation, setup_dir,
                                        teardown_dir),
        cmocka_unit_test(test_common_assert_aborts_with_expression),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
