/*
 * The report of `dayshard loadtest`: reads the parsed OUT/report.json and writes OUT/report.md
 * (the setup, a reading of the result in prose computed from the numbers, one side-by-side
 * table of the runs, each run's growths and warnings, the plots) and PNG plots drawn by
 * gnuplot: a heat map of write rate per partition for each run, and throughput, hottest share,
 * lag and query latency over time with one line per run.
 *
 * Each plot is a data file and a script under OUT/plots/; gnuplot runs on the script with that
 * directory as its working directory (paths inside are relative, so the directory can be moved
 * and a script re-run by hand), stdin from /dev/null, its messages into NAME.log, removed when
 * it succeeds. The plots are written first and report.md last, so a report.md that exists is
 * complete. Every write goes through report_printf, which keeps the first failure with its
 * path; a full disk is logged naming the file and returned, never lost in a buffer.
 *
 * A field missing from an older document, null, or of another type reads as "-" in the text
 * and as a gap (NaN) in a plot; a line with no point at all is left out of its plot (gnuplot
 * refuses a plot whose points are all undefined) and a plot with no line says so in report.md.
 * Heat maps of all runs share one colour scale with a break at the shard capacity, so runs
 * compare at a glance and anything over capacity is red; missing samples show grey.
 *
 * Rejected: plotting in C by hand (a PNG encoder, axes, tick placement, text and legends are
 * each a project, and a user could not tweak the result), and linking a plotting library
 * (cairo or PLplot: a heavy build dependency for a report gnuplot draws from a script anyone
 * can edit). gnuplot is optional: without it the report is written without images.
 */
#include <errno.h>
#include <stdio.h>

#include <jansson.h>

#include "loadgen/loadtest_report.h"

/* ---- the document's shape ------------------------------------------------------------------ */

/* True when doc can be rendered; else a reason in dst (capacity bytes). */
static bool report_check(const json_t *doc, char *dst, size_t capacity)
{
    const json_t *runs = json_object_get(doc, "runs");
    if (!json_is_object(doc) || !json_is_array(runs)) {
        snprintf(dst, capacity, json_is_object(doc) ? "no \"runs\" array" : "not a JSON object");
        return false;
    }
    if (json_array_size(runs) > LOADTEST_REPORT_RUNS_MAX) {
        snprintf(dst, capacity, "%zu runs, more than the %d a report can show",
                 json_array_size(runs), LOADTEST_REPORT_RUNS_MAX);
        return false;
    }
    for (size_t i = 0; i < json_array_size(runs); i++) {
        const json_t *run = json_array_get(runs, i);
        const json_t *series = json_object_get(run, "series");
        if (!json_is_object(run)) {
            snprintf(dst, capacity, "run %zu is not an object", i + 1);
            return false;
        }
        if (json_array_size(json_object_get(series, "t_s")) > LOADTEST_REPORT_SAMPLES_MAX) {
            snprintf(dst, capacity, "run %zu has more than %d samples", i + 1,
                     LOADTEST_REPORT_SAMPLES_MAX);
            return false;
        }
        const json_t *history = json_object_get(run, "heat_history");
        if (json_array_size(json_object_get(history, "columns")) >
            LOADTEST_REPORT_HEAT_COLUMNS_MAX) {
            snprintf(dst, capacity, "run %zu has a heat history of more than %d seconds", i + 1,
                     LOADTEST_REPORT_HEAT_COLUMNS_MAX);
            return false;
        }
        if (json_object_size(json_object_get(series, "partitions")) >
            LOADTEST_REPORT_PARTITIONS_MAX) {
            snprintf(dst, capacity, "run %zu has more than %d partition series", i + 1,
                     LOADTEST_REPORT_PARTITIONS_MAX);
            return false;
        }
    }
    return true;
}

/* ---- rendering ---------------------------------------------------------------------------- */

int loadtest_report_render(const char *out_dir, const json_t *report,
                           const struct loadgen_report_assets *assets, FILE *progress)
{
    ASSERT(out_dir != NULL);
    ASSERT(report != NULL);
    char reason[128];
    if (!report_check(report, reason, sizeof(reason))) {
        ds_log_error("%s/report.json: %s", out_dir, reason);
        return -DS_EUSAGE;
    }
    struct report_plots *p = calloc(1, sizeof(*p));
    struct report_heat_row *rows = calloc(LOADTEST_REPORT_PARTITIONS_MAX, sizeof(*rows));
    int rc = p != NULL && rows != NULL ? 0 : -ENOMEM;
    if (rc == 0 &&
        (size_t)snprintf(p->dir, sizeof(p->dir), "%s/plots", out_dir) >= sizeof(p->dir)) {
        rc = -ENAMETOOLONG;
    }
    if (rc != 0) {
        ds_log_error("%s: %s", out_dir, ds_strerror(rc));
    }
    if (rc == 0) {
        p->progress = progress;
        rc = report_plots_draw(p, report, rows);
    }
    if (rc == 0) {
        rc = report_md_write(out_dir, report, p);
    }
    if (rc == 0 && assets != NULL) {
        rc = report_html_write(out_dir, report, assets);
    }
    if (rc == 0 && p->gnuplot_missing) {
        ds_log_warn("gnuplot is not installed: %s/report.md has no plots (their data and "
                    "scripts are in %s)",
                    out_dir, p->dir);
    }
    if (rc == 0 && p->failed_count > 0) {
        rc = -EIO; /* each failure is logged, and named in report.md */
    }
    free(rows);
    free(p);
    return rc;
}
