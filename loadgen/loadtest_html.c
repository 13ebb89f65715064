/*
 * OUT/report.html: the load test's report as one self-contained page, a column per run side by
 * side, drawn in the browser from the document inlined in it. The page is a skeleton; the
 * console's style sheet and script (its heat map renderer) and the report's script are inlined
 * from the binary (struct loadgen_report_assets), and report.json, less each run's
 * series.partitions (the heat map draws heat_history instead) and with a summary derived for a
 * run of an older schema that has none, as JSON in a
 * <script type="application/json" id="report-data"> element.
 *
 * Invariants: nothing in the page is fetched (no src= or href= to anything); the data cannot
 * end its element: every '<', '>' and '&' of the JSON text is written as \u003c, \u003e,
 * \u0026 (they occur only inside JSON strings, where the escape means the same character);
 * the inlined assets are compiled-in files that contain no "</script" or "</style" (asserted).
 *
 * Rejected: drawing the report in C as SVG (a second heat map renderer to keep in step with the
 * console's, and no tooltips), and a page that loads report.json beside it (browsers refuse
 * fetch() from file://, so the page would be blank when opened from disk).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "loadgen/loadtest_gate.h"
#include "loadgen/loadtest_report.h"

/* Longest run of bytes one report_printf writes ("%.*s" takes an int). */
#define HTML_CHUNK_BYTES (1u << 20)

/* n bytes of p as they are. */
static void html_raw(struct report_file *rf, const char *p, size_t n)
{
    while (n > 0) {
        size_t chunk = n < HTML_CHUNK_BYTES ? n : HTML_CHUNK_BYTES;
        report_printf(rf, "%.*s", (int)chunk, p);
        p += chunk;
        n -= chunk;
    }
}

/* JSON text, its '<', '>' and '&' escaped so it cannot close or open an element. */
static void html_json(struct report_file *rf, const char *text)
{
    const char *p = text;
    for (;;) {
        size_t plain = strcspn(p, "<>&");
        html_raw(rf, p, plain);
        p += plain;
        if (*p == '\0') {
            return;
        }
        report_printf(rf, "\\u%04x", (unsigned)(unsigned char)*p);
        p++;
    }
}

/* True when the n bytes at p hold `needle` (no NUL needed). */
static bool html_contains(const char *p, size_t n, const char *needle)
{
    size_t m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++) {
        if (strncasecmp(p + i, needle, m) == 0) {
            return true;
        }
    }
    return false;
}

/* The document as the page reads it: a copy without each run's series.partitions, and with a
 * summary where an older run has none (derived as the gate derives it), so its figures show. */
static json_t *html_data(const json_t *doc)
{
    json_t *copy = json_deep_copy(doc);
    size_t i = 0;
    json_t *run = NULL;
    json_array_foreach(json_object_get(copy, "runs"), i, run)
    {
        json_object_del(json_object_get(run, "series"), "partitions");
        if (json_is_object(run) && !json_is_object(json_object_get(run, "summary"))) {
            json_object_set_new(run, "summary", gate_summary_of(run));
        }
    }
    return copy;
}

static void html_head(struct report_file *rf, const struct loadgen_report_assets *a)
{
    report_printf(rf, "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                      "<title>dayshard load test report</title>\n<style>\n");
    html_raw(rf, a->console_css, a->console_css_len);
    /* The report's own layout over the console's style: columns, figures, charts. */
    report_printf(
        rf, "\nhtml, body { height: auto; }\n"
            ".report-main { padding: 14px 18px; }\n"
            ".command { font-family: var(--mono); color: var(--muted); margin: 0 0 12px; "
            "word-break: break-all; }\n"
            ".runs { display: grid; gap: 12px; overflow-x: auto; }\n"
            ".run h2 { text-transform: none; letter-spacing: 0; font-size: 14px; }\n"
            ".run h3 { margin: 12px 0 4px; font-size: 11px; font-weight: 600; color: #c4cad4; "
            "text-transform: uppercase; letter-spacing: 0.6px; }\n"
            ".report-map { flex: none; height: 280px; min-height: 0; }\n"
            ".run .legend-help { display: none; }\n"
            ".line-chart { width: 100%%; height: auto; display: block; }\n"
            ".line-chart .grid-line { stroke: #232934; stroke-width: 1; }\n"
            ".line-chart .line { fill: none; stroke-width: 1.4; }\n"
            ".line-chart .tick { fill: var(--muted); font-size: 9px; }\n"
            ".line-chart .tick.end { text-anchor: end; }\n"
            ".chart-legend { display: flex; gap: 10px; flex-wrap: wrap; color: var(--muted); "
            "font-size: 11px; }\n"
            ".chart-legend span { border-left: 10px solid; padding-left: 4px; }\n"
            ".notes .row { border-left: 3px solid var(--panel-edge); padding: 2px 0 2px 8px; "
            "margin-bottom: 4px; font-size: 12px; }\n"
            ".notes.advice .row, .notes.warnings .row { border-color: var(--warn); }\n"
            ".verdict.breached, .verdict.unchecked { color: var(--bad); }\n"
            ".verdict.passed { color: var(--good); }\n"
            "</style>\n</head>\n");
}

static void html_body(struct report_file *rf, const char *data,
                      const struct loadgen_report_assets *a)
{
    report_printf(rf,
                  "<body class=\"report\">\n<header class=\"bar\"><div class=\"brand\">dayshard "
                  "<span class=\"sub\">load test</span></div>"
                  "<div id=\"setup\" class=\"stats\"></div></header>\n"
                  "<main class=\"report-main\"><p id=\"command\" class=\"command\"></p>"
                  "<div id=\"runs\" class=\"runs\"></div></main>\n"
                  "<script type=\"application/json\" id=\"report-data\">");
    html_json(rf, data);
    report_printf(rf, "</script>\n<script>\n");
    html_raw(rf, a->console_js, a->console_js_len);
    report_printf(rf, "\n</script>\n<script>\n");
    html_raw(rf, a->report_js, a->report_js_len);
    report_printf(rf, "\n</script>\n</body>\n</html>\n");
}

int report_html_write(const char *out_dir, const json_t *doc,
                      const struct loadgen_report_assets *assets)
{
    ASSERT(out_dir != NULL);
    ASSERT(assets != NULL && assets->console_js != NULL && assets->report_js != NULL);
    ASSERT(!html_contains(assets->console_js, assets->console_js_len, "</script"));
    ASSERT(!html_contains(assets->report_js, assets->report_js_len, "</script"));
    ASSERT(!html_contains(assets->console_css, assets->console_css_len, "</style"));
    json_t *copy = html_data(doc);
    char *data =
        copy != NULL
            ? json_dumps(copy, JSON_COMPACT | JSON_REAL_PRECISION(LOADTEST_REPORT_REAL_DIGITS))
            : NULL;
    json_decref(copy);
    if (data == NULL) {
        ds_log_error("%s/report.html: %s", out_dir, ds_strerror(-ENOMEM));
        return -ENOMEM;
    }
    struct report_file rf;
    int rc = report_file_open(&rf, out_dir, "report.html");
    if (rc == 0) {
        html_head(&rf, assets);
        html_body(&rf, data, assets);
        rc = report_file_close(&rf);
    }
    free(data);
    return rc;
}
