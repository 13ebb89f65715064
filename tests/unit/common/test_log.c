/*
 * Unit tests of common/log.c's JSON lines (DS_LOG_FORMAT=json): the line's shape
 * (ts, level, msg), the escaping of quotes, backslashes and control characters, UTF-8 passed
 * through when valid and each byte of an invalid sequence (overlong, surrogate, past U+10FFFF,
 * cut short, stray) replaced by U+FFFD, the threshold, and a long message cut to one line that
 * still closes its JSON.
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

#include "common/common.h"
#include "tests/support/tempdir.h"

struct fixture {
    char dir[64];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(test_tempdir_make(f->dir, sizeof(f->dir)), 0);
    setenv("DS_LOG_FORMAT", "json", 1);
    unsetenv("DS_LOG");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    test_tempdir_remove(f->dir);
    free(f);
    unsetenv("DS_LOG_FORMAT");
    return 0;
}

/* Logs text (a "%s" argument, so any bytes) at level with stderr sent to a file; returns what
 * was written (malloc'd). */
static char *log_captured(const struct fixture *f, enum ds_log_level level, const char *text)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/stderr", f->dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fd, STDERR_FILENO) >= 0);
    ds_log(level, "%s", text);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    close(fd);
    char *data = NULL;
    size_t len = 0;
    assert_int_equal(ds_read_file(path, 1u << 20, &data, &len), 0);
    return data;
}

/* The msg of a captured line, checking the rest of its shape on the way; malloc'd. */
static char *line_msg(const char *line, const char *level)
{
    /* {"ts":"2026-12-02T09:00:00.123Z","level":"warn","msg":"..."}\n */
    assert_memory_equal(line, "{\"ts\":\"", 7);
    const char *ts = line + 7;
    assert_int_equal(ts[4], '-');
    assert_int_equal(ts[7], '-');
    assert_int_equal(ts[10], 'T');
    assert_int_equal(ts[13], ':');
    assert_int_equal(ts[19], '.');
    assert_int_equal(ts[23], 'Z');
    int32_t day = 0;
    assert_int_equal(ds_date_parse(ts, 10, &day), 0);
    char head[64];
    snprintf(head, sizeof(head), "\",\"level\":\"%s\",\"msg\":\"", level);
    assert_memory_equal(ts + 24, head, strlen(head));
    const char *msg = ts + 24 + strlen(head);
    size_t len = strlen(msg);
    assert_true(len >= 3);
    assert_string_equal(msg + len - 3, "\"}\n");
    assert_ptr_equal(strchr(line, '\n'), line + strlen(line) - 1); /* one line */
    char *out = strndup(msg, len - 3);
    assert_non_null(out);
    return out;
}

static void expect_msg(const struct fixture *f, const char *text, const char *escaped)
{
    char *line = log_captured(f, DS_LOG_WARN, text);
    char *msg = line_msg(line, "warn");
    assert_string_equal(msg, escaped);
    free(msg);
    free(line);
}

static void test_log_json_line_shape_and_levels(void **state)
{
    /* Each level names itself; the threshold applies as in text lines (warn by default). */
    struct fixture *f = *state;
    char *line = log_captured(f, DS_LOG_ERROR, "disk full");
    char *msg = line_msg(line, "error");
    assert_string_equal(msg, "disk full");
    free(msg);
    free(line);
    line = log_captured(f, DS_LOG_INFO, "not shown");
    assert_string_equal(line, "");
    free(line);
    setenv("DS_LOG", "debug", 1);
    line = log_captured(f, DS_LOG_DEBUG, "shown");
    msg = line_msg(line, "debug");
    assert_string_equal(msg, "shown");
    free(msg);
    free(line);
}

static void test_log_json_escapes_quotes_and_controls(void **state)
{
    /* Quotes, backslashes and every control character come out as JSON escapes. */
    struct fixture *f = *state;
    expect_msg(f, "a\"b\\c\nd\te\rf\x01g\x1fh\x7fi/",
               "a\\\"b\\\\c\\nd\\te\\rf\\u0001g\\u001fh\\u007fi/");
}

static void test_log_json_utf8_valid_passes_invalid_replaced(void **state)
{
    /* Valid UTF-8 of each length passes through byte for byte; each byte of an invalid
     * sequence becomes one U+FFFD, so the line is valid UTF-8 whatever was logged. */
    struct fixture *f = *state;
    expect_msg(f, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
               "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    expect_msg(f, "x\xffy", "x\\ufffdy");                                  /* never valid */
    expect_msg(f, "x\x80y", "x\\ufffdy");                                  /* stray continuation */
    expect_msg(f, "x\xc0\xafy", "x\\ufffd\\ufffdy");                       /* overlong '/' */
    expect_msg(f, "x\xe0\x80\xafy", "x\\ufffd\\ufffd\\ufffdy");            /* overlong, 3 bytes */
    expect_msg(f, "x\xed\xa0\x80y", "x\\ufffd\\ufffd\\ufffdy");            /* a surrogate */
    expect_msg(f, "x\xf4\x90\x80\x80y", "x\\ufffd\\ufffd\\ufffd\\ufffdy"); /* past U+10FFFF */
    expect_msg(f, "x\xf8\x88\x80\x80\x80y",
               "x\\ufffd\\ufffd\\ufffd\\ufffd\\ufffdy"); /* 5-byte form */
    expect_msg(f, "x\xe2\x82", "x\\ufffd\\ufffd");       /* cut short at the end */
    expect_msg(f, "x\xe2\x82y", "x\\ufffd\\ufffdy");     /* cut short before ASCII */
}

static void test_log_json_long_message_cut_and_closed(void **state)
{
    /* A message past the line limit is cut, yet the line still ends the JSON object; a message
     * of control characters only (6 bytes each escaped) fits as well. */
    struct fixture *f = *state;
    static char text[3000];
    memset(text, 'z', sizeof(text) - 1);
    char *line = log_captured(f, DS_LOG_WARN, text);
    char *msg = line_msg(line, "warn");
    assert_true(strlen(msg) > 900);
    assert_true(strlen(msg) < 1024);
    assert_int_equal(strspn(msg, "z"), strlen(msg));
    free(msg);
    free(line);
    memset(text, '\x01', sizeof(text) - 1);
    line = log_captured(f, DS_LOG_WARN, text);
    msg = line_msg(line, "warn");
    assert_true(strlen(msg) > 900 * 6);
    assert_int_equal(strlen(msg) % 6, 0);
    assert_memory_equal(msg, "\\u0001\\u0001", 12);
    free(msg);
    free(line);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_log_json_line_shape_and_levels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_json_escapes_quotes_and_controls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_json_utf8_valid_passes_invalid_replaced, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_log_json_long_message_cut_and_closed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
