/*
 * Unit tests of loadgen/loadtest_html.c, the writer of report.html: over a document of two runs,
 * the page names both runs, its inlined JSON parses back (jansson) to the document less each
 * run's series.partitions, nothing in it points outside the file (no src= or href= to a
 * network address, no <link>), text from the document that would close the data element
 * ("</script>") or open a comment is escaped and still reads back exactly, and the console's
 * renderer is inlined; a run of an older schema gets its derived summary. Also: a directory that
 * cannot be written is an error naming no success, and a heat history longer than the nodes' window
 * is refused before anything is drawn.
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
#include <strings.h>
#include <unistd.h>

#include <jansson.h>

#include "loadgen/loadtest_report.h"
#include "query/query.h"

#define HOSTILE "fixed:1 </script><script>alert(1)</script> <!-- & >"
#define DATA_OPEN "<script type=\"application/json\" id=\"report-data\">"

struct fixture {
    char dir[64];
    struct loadgen_report_assets assets;
    json_t *doc;
};

/* A run: a strategy name, a summary, two seconds of series with partitions, a heat history. */
static json_t *run_of(const char *strategy)
{
    json_t *history =
        json_pack("{s:i, s:I, s:i, s:i, s:[{s:I, s:{s:[i,i]}}], s:[]}", "version", 1, "second",
                  (json_int_t)1796510187, "seconds", 300, "shard_capacity_eps", 1000, "columns",
                  "t", (json_int_t)1796510187, "days", "2026-01-21", 1200, 30, "growths");
    return json_pack("{s:s, s:{s:f, s:i}, s:{s:[f,f], s:[f,f], s:{s:[f,f]}}, s:o}", "strategy",
                     strategy, "summary", "events_per_s", 7544.0, "over_capacity_seconds", 3,
                     "series", "t_s", 0.0, 1.0, "stored_eps", 7000.0, 8000.0, "partitions",
                     "DAY#2026-01-21#0", 1.0, 2.0, "heat_history", history);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/test_loadtest_html.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    f->assets.console_js = query_console_text("console.js", &f->assets.console_js_len);
    f->assets.console_css = query_console_text("console.css", &f->assets.console_css_len);
    f->assets.report_js = query_console_text("report.js", &f->assets.report_js_len);
    assert_non_null(f->assets.console_js);
    assert_non_null(f->assets.console_css);
    assert_non_null(f->assets.report_js);
    f->doc = json_pack("{s:i, s:s, s:i, s:[o,o]}", "schema", 3, "profile", "busy-day",
                       "shard_capacity_eps", 1000, "runs", run_of(HOSTILE),
                       run_of("adaptive, key partition"));
    assert_non_null(f->doc);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char path[128];
    snprintf(path, sizeof(path), "%s/report.html", f->dir);
    unlink(path);
    rmdir(f->dir);
    json_decref(f->doc);
    free(f);
    return 0;
}

/* The written page, NUL-terminated (free it). */
static char *read_page(const struct fixture *f)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/report.html", f->dir);
    FILE *in = fopen(path, "rb");
    assert_non_null(in);
    assert_int_equal(fseek(in, 0, SEEK_END), 0);
    long n = ftell(in);
    assert_true(n > 0);
    rewind(in);
    char *page = malloc((size_t)n + 1);
    assert_non_null(page);
    assert_int_equal(fread(page, 1, (size_t)n, in), (size_t)n);
    page[n] = '\0';
    fclose(in);
    return page;
}

static size_t count_of(const char *page, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(page, needle); p != NULL; p = strstr(p + 1, needle)) {
        n++;
    }
    return n;
}

/* The inlined document, parsed. */
static json_t *inlined_data(const char *page)
{
    const char *open = strstr(page, DATA_OPEN);
    assert_non_null(open);
    open += strlen(DATA_OPEN);
    const char *close = strstr(open, "</script>");
    assert_non_null(close);
    json_error_t err;
    json_t *data = json_loadb(open, (size_t)(close - open), 0, &err);
    if (data == NULL) {
        fail_msg("the inlined JSON does not parse: %s at %d", err.text, err.position);
    }
    return data;
}

static void test_loadtest_html_two_runs_data_reads_back(void **state)
{
    /* The page carries both runs, and its data is the document less the partition series. */
    struct fixture *f = *state;
    assert_int_equal(report_html_write(f->dir, f->doc, &f->assets), 0);
    char *page = read_page(f);
    json_t *data = inlined_data(page);
    json_t *want = json_deep_copy(f->doc);
    for (size_t i = 0; i < 2; i++) {
        json_t *series =
            json_object_get(json_array_get(json_object_get(want, "runs"), i), "series");
        assert_int_equal(json_object_del(series, "partitions"), 0);
    }
    assert_true(json_equal(data, want));
    const json_t *runs = json_object_get(data, "runs");
    assert_int_equal(json_array_size(runs), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(runs, 0), "strategy")),
                        HOSTILE);
    assert_non_null(strstr(page, "adaptive, key partition"));
    assert_non_null(json_object_get(json_array_get(runs, 1), "heat_history"));
    json_decref(want);
    json_decref(data);
    free(page);
}

static void test_loadtest_html_script_end_in_data_escaped(void **state)
{
    /* "</script>" from the document cannot end the data element: the only three are the data's,
     * the console's script's and the report script's own closing tags. */
    struct fixture *f = *state;
    assert_int_equal(report_html_write(f->dir, f->doc, &f->assets), 0);
    char *page = read_page(f);
    assert_int_equal(count_of(page, "</script"), 3);
    assert_int_equal(count_of(page, "<!--"), 0);
    assert_null(strstr(page, "alert(1)</script>"));
    assert_non_null(strstr(page, "\\u003c/script\\u003e"));
    free(page);
}

static void test_loadtest_html_nothing_external(void **state)
{
    /* One file: no attribute points at the network, no linked style sheet or script. */
    struct fixture *f = *state;
    assert_int_equal(report_html_write(f->dir, f->doc, &f->assets), 0);
    char *page = read_page(f);
    static const char *const attrs[] = {"src=", "href="};
    size_t attrs_seen = 0;
    for (size_t a = 0; a < 2; a++) {
        for (const char *p = strcasestr(page, attrs[a]); p != NULL;
             p = strcasestr(p + 1, attrs[a])) {
            const char *v = p + strlen(attrs[a]);
            v += *v == '"' || *v == '\'' ? 1 : 0;
            assert_false(strncasecmp(v, "http:", 5) == 0);
            assert_false(strncasecmp(v, "https:", 6) == 0);
            assert_false(strncmp(v, "//", 2) == 0);
            attrs_seen++;
        }
    }
    assert_int_equal(attrs_seen, 0); /* the page has none at all today; a new one gets checked */
    assert_null(strcasestr(page, "<link"));
    assert_null(strcasestr(page, "<script src"));
    free(page);
}

static void test_loadtest_html_inlines_the_console_renderer(void **state)
{
    /* The heat maps are the console's: its script and style sheet are in the page, whole. */
    struct fixture *f = *state;
    assert_int_equal(report_html_write(f->dir, f->doc, &f->assets), 0);
    char *page = read_page(f);
    assert_non_null(strstr(page, "window.DayshardHeat = "));
    char *js = strndup(f->assets.console_js, f->assets.console_js_len);
    char *css = strndup(f->assets.console_css, f->assets.console_css_len);
    assert_non_null(strstr(page, js));
    assert_non_null(strstr(page, css));
    free(js);
    free(css);
    free(page);
}

static void test_loadtest_html_old_run_gets_summary(void **state)
{
    /* A schema-1 run has no summary: the page gets the one the gate derives, so its figures
     * show; report.json's own document is left as it was. */
    struct fixture *f = *state;
    json_t *run = json_array_get(json_object_get(f->doc, "runs"), 1);
    assert_int_equal(json_object_del(run, "summary"), 0);
    json_object_set_new(run, "throughput_eps", json_real(1234.5));
    assert_int_equal(report_html_write(f->dir, f->doc, &f->assets), 0);
    assert_null(json_object_get(run, "summary"));
    char *page = read_page(f);
    json_t *data = inlined_data(page);
    const json_t *summary =
        json_object_get(json_array_get(json_object_get(data, "runs"), 1), "summary");
    assert_true(json_is_object(summary));
    assert_true(json_number_value(json_object_get(summary, "events_per_s")) == 1234.5);
    json_decref(data);
    free(page);
}

static void test_loadtest_html_unwritable_dir_fails(void **state)
{
    /* A directory that does not exist: the errno comes back, no page. */
    struct fixture *f = *state;
    char dir[96];
    snprintf(dir, sizeof(dir), "%s/missing", f->dir);
    assert_int_equal(report_html_write(dir, f->doc, &f->assets), -ENOENT);
}

static void test_loadtest_html_history_too_long_refused(void **state)
{
    /* A heat history past the nodes' 300 s window is not a load test's: refused, nothing drawn. */
    struct fixture *f = *state;
    json_t *columns = json_object_get(
        json_object_get(json_array_get(json_object_get(f->doc, "runs"), 1), "heat_history"),
        "columns");
    for (int t = 0; t < LOADTEST_REPORT_HEAT_COLUMNS_MAX; t++) {
        json_array_append_new(columns, json_pack("{s:i, s:{}}", "t", t, "days"));
    }
    assert_int_equal(loadtest_report_render(f->dir, f->doc, &f->assets, NULL), -DS_EUSAGE);
    char path[128];
    snprintf(path, sizeof(path), "%s/report.html", f->dir);
    assert_int_equal(access(path, F_OK), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_loadtest_html_two_runs_data_reads_back, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_loadtest_html_script_end_in_data_escaped, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_loadtest_html_nothing_external, setup, teardown),
        cmocka_unit_test_setup_teardown(test_loadtest_html_inlines_the_console_renderer, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_loadtest_html_old_run_gets_summary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_loadtest_html_unwritable_dir_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_loadtest_html_history_too_long_refused, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
