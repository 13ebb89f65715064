/*
 * Unit tests of loadgen/soak_prom.c: the Prometheus text the soak reads from a node's /metrics.
 * Checks samples with and without labels, comments and blank lines skipped, special values and
 * timestamps, label values with escapes and commas, and -DS_ECORRUPT for malformed lines.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "loadgen/soak.h"

struct seen {
    int count;
    char names[8][64];
    char labels[8][128];
    double values[8];
};

static void collect(const struct soak_prom_sample *s, void *user)
{
    struct seen *seen = user;
    assert_true(seen->count < 8);
    snprintf(seen->names[seen->count], 64, "%.*s", (int)s->name_len, s->name);
    snprintf(seen->labels[seen->count], 128, "%.*s", (int)s->labels_len,
             s->labels != NULL ? s->labels : "");
    seen->values[seen->count++] = s->value;
}

static void test_soak_prom_parse_samples_comments_labels(void **state)
{
    /* Every sample line is reported once, with its name, raw labels and value. */
    (void)state;
    const char text[] = "# HELP dayshard_disk_bytes Bytes.\n"
                        "# TYPE dayshard_disk_bytes gauge\n"
                        "dayshard_disk_bytes{store=\"parts\"} 1234\n"
                        "\n"
                        "dayshard_disk_bytes{store=\"ids\",x=\"a,}b\"} 5e3\n"
                        "dayshard_ready 1 1700000000000\n"
                        "dayshard_fsync_seconds_bucket{le=\"+Inf\"} +Inf\n"
                        "dayshard_ids_seal_stall_seconds_max 0.000123456";
    struct seen seen = {0};
    assert_int_equal(soak_prom_parse(text, strlen(text), collect, &seen), 5);
    assert_int_equal(seen.count, 5);
    assert_string_equal(seen.names[0], "dayshard_disk_bytes");
    assert_string_equal(seen.labels[0], "store=\"parts\"");
    assert_true(seen.values[0] == 1234.0);
    assert_string_equal(seen.labels[1], "store=\"ids\",x=\"a,}b\"");
    assert_true(seen.values[1] == 5000.0);
    assert_string_equal(seen.names[2], "dayshard_ready");
    assert_string_equal(seen.labels[2], "");
    assert_true(seen.values[2] == 1.0);
    assert_true(isinf(seen.values[3]));
    assert_true(fabs(seen.values[4] - 0.000123456) < 1e-12);
}

static void check_label(const char *labels, const char *key, int want_rc, const char *want)
{
    struct soak_prom_sample s = {
        .name = "m", .name_len = 1, .labels = labels, .labels_len = strlen(labels), .value = 0};
    char dst[16];
    int rc = soak_prom_label(&s, key, dst, sizeof(dst));
    assert_int_equal(rc, want_rc);
    if (want != NULL) {
        assert_string_equal(dst, want);
    }
}

static void test_soak_prom_label_values_and_errors(void **state)
{
    /* A label is found by exact key, unescaped; missing, too long and malformed are told apart. */
    (void)state;
    check_label("store=\"parts\"", "store", 5, "parts");
    check_label("a=\"1\", store=\"g\\\"s\\\\i\"", "store", 5, "g\"s\\i");
    check_label("stores=\"x\",store=\"y\"", "store", 1, "y");
    check_label("store=\"parts\"", "reason", -ENOENT, NULL);
    check_label("", "store", -ENOENT, NULL);
    check_label("store=\"0123456789abcdef\"", "store", -ENOSPC, NULL);
    check_label("store=parts", "store", -DS_ECORRUPT, NULL);
    check_label("store=\"open", "store", -DS_ECORRUPT, NULL);
}

static void test_soak_prom_parse_malformed_lines(void **state)
{
    /* A line that is not name{labels} value fails the parse after the good lines before it. */
    (void)state;
    const char *bad[] = {"ok 1\n{x=\"1\"} 2\n", "ok 1\nm{x=\"1\" 2\n", "ok 1\nm 12abc\n",
                         "ok 1\nm\n", "ok 1\nm{x=\"1\"}2\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct seen seen = {0};
        assert_int_equal(soak_prom_parse(bad[i], strlen(bad[i]), collect, &seen), -DS_ECORRUPT);
        assert_int_equal(seen.count, 1);
    }
    struct seen seen = {0};
    assert_int_equal(soak_prom_parse("", 0, collect, &seen), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_soak_prom_parse_samples_comments_labels),
        cmocka_unit_test(test_soak_prom_label_values_and_errors),
        cmocka_unit_test(test_soak_prom_parse_malformed_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
