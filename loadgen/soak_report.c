/*
 * The soak's report (soak.h): report.json (schema 1: the config, the feed, every series over
 * the samples, the verdicts with their windows' figures, restarts, the longest stalls, the count
 * check, pass or fail), then the plots and the summary drawn from that document alone, so
 * `--render-only` and a run draw the same. Plots are a data file and a gnuplot script per plot
 * under OUT/plots/ (run by loadtest_plot.c's report_gnuplot), the PNG in OUT/.
 *
 * Rejected: plotting against wall time (a held producer or a restart stretches it; resources
 * are judged against stream days, so they are drawn against them too).
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loadgen/loadtest_report.h"
#include "loadgen/soak.h"

#define SOAK_MIB (1024.0 * 1024.0)

/* What the plots and the summary show: series, each with its unit's divisor. */
struct soak_plot {
    const char *name;
    const char *title;
    const char *ylabel;
    double divisor;
    const char *series[8]; /* a name ending in '.' takes every series of that family */
};

static const struct soak_plot soak_plots[] = {
    {"bytes", "disk bytes per store and whole", "MiB", SOAK_MIB, {"disk_bytes", "disk_bytes."}},
    {"memory",
     "node memory",
     "MiB",
     SOAK_MIB,
     {"rss_bytes", "hwm_bytes", "ids_keydir_bytes", "ids_memory_bytes", "gsi_log_bytes"}},
    {"files", "open files", "count", 1.0, {"open_fds", "segment_fds", "disk_files"}},
    {"held",
     "held by the writer and the shard map",
     "count",
     1.0,
     {"partitions_held", "days_held", "shards_total", "ids_sealed_files"}},
    {"stalls",
     "longest stalls since the node started",
     "seconds",
     1.0,
     {"writer_stall_s", "ids_seal_stall_s", "gsi_seal_stall_s", "compaction_slice_s"}},
};

static const char *const soak_stall_series[] = {"writer_stall_s", "ids_seal_stall_s",
                                                "gsi_seal_stall_s", "compaction_slice_s"};

/* ---- report.json ------------------------------------------------------------------------ */

static json_t *soak_number(double x)
{
    return isnan(x) || isinf(x) ? json_null() : json_real(x);
}

static json_t *soak_config_json(const struct loadgen_soak_config *cfg)
{
    char first[DS_DATE_TEXT_SIZE];
    ds_date_format(cfg->first_day, first);
    json_t *args = json_array();
    for (uint32_t i = 0; i < cfg->node_arg_count; i++) {
        json_array_append_new(args, json_string(cfg->node_args[i]));
    }
    return json_pack("{s:i, s:s, s:I, s:f, s:I, s:I, s:i, s:i, s:i, s:s, s:s?, s:s?, s:s, s:o}",
                     "days", (int)cfg->days, "first_day", first, "orders_per_day",
                     (json_int_t)cfg->orders_per_day, "updated", cfg->updated, "seed",
                     (json_int_t)cfg->seed, "rate", (json_int_t)cfg->rate, "partitions",
                     (int)cfg->partitions, "retention_days", (int)cfg->retention_days,
                     "restart_every", (int)cfg->restart_every, "restart_signal",
                     cfg->restart_signal == SIGKILL ? "KILL" : "TERM", "brokers", cfg->brokers,
                     "topic", cfg->topic, "model", cfg->model, "node_args", args);
}

static json_t *soak_samples_json(const struct soak_samples *s)
{
    json_t *o = json_object();
    for (uint32_t i = 0; i < s->series_count; i++) {
        json_t *a = json_array();
        for (uint32_t k = 0; k < s->count; k++) {
            json_array_append_new(a, soak_number(s->values[i][k]));
        }
        json_object_set_new(o, s->names[i], a);
    }
    return o;
}

static json_t *soak_verdicts_json(const struct soak_verdict *v, size_t n, uint32_t retention)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        const struct soak_rule *r = v[i].rule;
        json_array_append_new(
            a, json_pack(
                   "{s:s, s:f, s:f, s:o, s:o, s:o, s:b, s:b}", "resource", v[i].series, "ratio",
                   r->ratio, "slack", r->slack + r->slack_per_retention_day * (double)retention,
                   "first_max", soak_number(v[i].first_max), "last_max", soak_number(v[i].last_max),
                   "limit", soak_number(v[i].limit), "judged", v[i].judged, "grew", v[i].grew));
    }
    return a;
}

static json_t *soak_restarts_json(const struct soak_outcome *out)
{
    json_t *a = json_array();
    for (uint32_t i = 0; i < out->restart_count; i++) {
        const struct soak_restart *r = &out->restarts[i];
        json_array_append_new(a, json_pack("{s:o, s:f, s:f, s:f, s:f}", "stream_day",
                                           soak_number(r->stream_day), "at_s", r->at_s, "stop_ms",
                                           r->stop_ms, "ready_ms", r->ready_ms, "caught_up_ms",
                                           r->caught_up_ms));
    }
    return a;
}

/* The count check; *match false names the first differing day in failures. */
static json_t *soak_counts_json(const struct soak_outcome *out, json_t *failures)
{
    json_t *days = json_array();
    bool match = out->counts_checked;
    for (uint32_t i = 0; i < out->count_day_count; i++) {
        const struct soak_count_day *d = &out->count_days[i];
        char day[DS_DATE_TEXT_SIZE], text[256];
        ds_date_format(d->day, day);
        json_array_append_new(
            days, json_pack("{s:s, s:I, s:I, s:I, s:I}", "day", day, "orders",
                            (json_int_t)d->orders, "orders_ref", (json_int_t)d->orders_ref, "paid",
                            (json_int_t)d->paid, "paid_ref", (json_int_t)d->paid_ref));
        if (out->counts_checked && (d->orders != d->orders_ref || d->paid != d->paid_ref)) {
            match = false;
            snprintf(text, sizeof(text),
                     "counts differ on %s: orders %lld (reference %lld), paid %lld (reference "
                     "%lld)",
                     day, (long long)d->orders, (long long)d->orders_ref, (long long)d->paid,
                     (long long)d->paid_ref);
            json_array_append_new(failures, json_string(text));
        }
    }
    return json_pack("{s:b, s:b, s:o}", "checked", out->counts_checked, "match", match, "days",
                     days);
}

static double soak_series_max(const struct soak_samples *s, const char *name)
{
    double max = NAN;
    for (uint32_t i = 0; i < s->series_count; i++) {
        if (strcmp(s->names[i], name) != 0) {
            continue;
        }
        for (uint32_t k = 0; k < s->count; k++) {
            double v = s->values[i][k];
            max = !isnan(v) && (isnan(max) || v > max) ? v : max;
        }
    }
    return max;
}

/* A window without a single sample cannot be judged: the soak proves nothing then. */
static void soak_window_failures(const struct soak_windows *w, const struct soak_samples *s,
                                 json_t *failures)
{
    int t = soak_samples_series((struct soak_samples *)s, "t_s");
    int day = soak_samples_series((struct soak_samples *)s, "stream_day");
    ASSERT(t >= 0 && day >= 0); /* fixed series, always there */
    const uint32_t from[2] = {w->first_from, w->last_from};
    const uint32_t to[2] = {w->first_to, w->last_to};
    for (int i = 0; i < 2; i++) {
        if (s->count > 0 &&
            isnan(soak_window_max(s->values[t], s->values[day], s->count, from[i], to[i]))) {
            char text[256];
            snprintf(text, sizeof(text),
                     "no sample in stream days [%u, %u): a stream day took under a second; "
                     "lower --rate so that each window gets samples",
                     from[i], to[i]);
            json_array_append_new(failures, json_string(text));
        }
    }
}

json_t *soak_report_build(const struct loadgen_soak_config *cfg, const struct soak_windows *w,
                          const struct soak_samples *s, const struct soak_verdict *verdicts,
                          size_t verdict_count, const struct soak_outcome *out)
{
    json_t *failures = json_array();
    if (out->failure[0] != '\0') {
        json_array_append_new(failures, json_string(out->failure));
    }
    for (size_t i = 0; i < verdict_count; i++) {
        if (verdicts[i].grew) {
            char text[256];
            snprintf(text, sizeof(text),
                     "%s grew: %.0f in the last %u days over %.0f in days "
                     "[%u, %u) (limit %.0f)",
                     verdicts[i].series, verdicts[i].last_max, w->last_to - w->last_from,
                     verdicts[i].first_max, w->first_from, w->first_to, verdicts[i].limit);
            json_array_append_new(failures, json_string(text));
        }
    }
    soak_window_failures(w, s, failures);
    json_t *counts = soak_counts_json(out, failures);
    if (!out->counts_checked && out->failure[0] == '\0') {
        json_array_append_new(failures, json_string("the counts were not checked"));
    }
    json_t *stalls = json_object();
    for (size_t i = 0; i < DS_ARRAY_LEN(soak_stall_series); i++) {
        json_object_set_new(stalls, soak_stall_series[i],
                            soak_number(soak_series_max(s, soak_stall_series[i])));
    }
    uint32_t n = cfg->retention_days;
    json_t *feed = json_pack("{s:I, s:I, s:f, s:f, s:f, s:f, s:f}", "lines", (json_int_t)out->lines,
                             "lines_acked", (json_int_t)out->lines_acked, "seconds", out->seconds,
                             "feed_s", out->feed_s, "paused_s", out->paused_s, "feed_eps",
                             out->feed_eps, "behind_max_s", out->behind_max_s);
    json_t *windows = json_pack("{s:[i,i], s:[i,i]}", "first", (int)w->first_from, (int)w->first_to,
                                "last", (int)w->last_from, (int)w->last_to);
    return json_pack(
        "{s:i, s:s?, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:b}", "schema",
        SOAK_REPORT_SCHEMA, "command", cfg->command, "config", soak_config_json(cfg), "feed", feed,
        "windows", windows, "verdicts", soak_verdicts_json(verdicts, verdict_count, n), "restarts",
        soak_restarts_json(out), "stalls", stalls, "counts", counts, "failures", failures,
        "samples", soak_samples_json(s), "passed", json_array_size(failures) == 0);
}

int soak_report_write(const char *out_dir, const json_t *doc)
{
    char path[DS_PATH_MAX + 32], tmp[DS_PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/report.json", out_dir);
    snprintf(tmp, sizeof(tmp), "%s/report.json.tmp", out_dir);
    if (json_dump_file(doc, tmp, JSON_INDENT(1) | JSON_COMPACT) != 0) {
        return soak_error(-EIO, "cannot write %s", tmp);
    }
    if (rename(tmp, path) != 0) {
        int rc = -errno;
        return soak_error(rc, "%s: %s", path, ds_strerror(rc));
    }
    return 0;
}

/* ---- plots ------------------------------------------------------------------------------ */

static bool soak_plot_takes(const struct soak_plot *p, const char *series)
{
    for (size_t i = 0; i < DS_ARRAY_LEN(p->series) && p->series[i] != NULL; i++) {
        size_t len = strlen(p->series[i]);
        bool family = p->series[i][len - 1] == '.';
        if (family ? strncmp(series, p->series[i], len) == 0 : strcmp(series, p->series[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* The plot's columns (series names, in the document's order) that have a value somewhere. */
static size_t soak_plot_columns(const struct soak_plot *p, json_t *samples, const char **cols,
                                size_t cap)
{
    size_t n = 0;
    const char *name;
    json_t *a;
    json_object_foreach(samples, name, a)
    {
        bool any = false;
        size_t i;
        json_t *v;
        json_array_foreach(a, i, v)
        {
            any = any || json_is_number(v);
        }
        if (any && n < cap && soak_plot_takes(p, name)) {
            cols[n++] = name;
        }
    }
    return n;
}

static int soak_plot_write(const char *dir, const struct soak_plot *p, json_t *doc,
                           const char **cols, size_t ncols)
{
    json_t *samples = json_object_get(doc, "samples");
    json_t *x = json_object_get(samples, "stream_day");
    struct report_file rf;
    char file[64];
    snprintf(file, sizeof(file), "%s.dat", p->name);
    int rc = report_file_open(&rf, dir, file);
    if (rc != 0) {
        return rc;
    }
    report_printf(&rf, "# stream_day");
    for (size_t c = 0; c < ncols; c++) {
        report_printf(&rf, " %s", cols[c]);
    }
    report_printf(&rf, "\n");
    for (size_t k = 0; k < json_array_size(x); k++) {
        if (!json_is_number(json_array_get(x, k))) {
            continue;
        }
        report_printf(&rf, "%.4f", json_number_value(json_array_get(x, k)));
        for (size_t c = 0; c < ncols; c++) {
            json_t *v = json_array_get(json_object_get(samples, cols[c]), k);
            if (json_is_number(v)) {
                report_printf(&rf, " %.6g", json_number_value(v) / p->divisor);
            } else {
                report_printf(&rf, " ?");
            }
        }
        report_printf(&rf, "\n");
    }
    rc = report_file_close(&rf);
    if (rc != 0) {
        return rc;
    }
    snprintf(file, sizeof(file), "%s.gp", p->name);
    rc = report_file_open(&rf, dir, file);
    if (rc != 0) {
        return rc;
    }
    json_t *windows = json_object_get(doc, "windows");
    double first_from = json_number_value(json_array_get(json_object_get(windows, "first"), 0));
    double first_to = json_number_value(json_array_get(json_object_get(windows, "first"), 1));
    double last_from = json_number_value(json_array_get(json_object_get(windows, "last"), 0));
    report_printf(&rf,
                  "# The soak's %s over stream days (re-run: gnuplot %s.gp)\n"
                  "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
                  "    set terminal pngcairo size %d,%d noenhanced font 'sans,10'\n"
                  "} else {\n"
                  "    set terminal png size %d,%d noenhanced\n"
                  "}\n"
                  "set output '../%s.png'\n"
                  "set datafile missing '?'\nset key outside right\nset grid\n"
                  "set title '%s (shaded: the windows the growth rule compares)'\n"
                  "set xlabel 'stream day'\nset ylabel '%s'\n"
                  "set object 1 rect from %g, graph 0 to %g, graph 1 fc rgb '#e8e8e8' behind\n"
                  "set object 2 rect from %g, graph 0 to graph 1, graph 1 fc rgb '#e8e8e8' "
                  "behind\nplot ",
                  p->title, p->name, REPORT_WIDTH_PX, REPORT_HEIGHT_PX, REPORT_WIDTH_PX,
                  REPORT_HEIGHT_PX, p->name, p->title, p->ylabel, first_from, first_to, last_from);
    for (size_t c = 0; c < ncols; c++) {
        report_printf(&rf, "%s'%s.dat' using 1:%zu with linespoints pt 7 ps 0.4 title '%s'",
                      c > 0 ? ", \\\n     " : "", p->name, c + 2, cols[c]);
    }
    report_printf(&rf, "\n");
    return report_file_close(&rf);
}

static int soak_plots_draw(const char *out_dir, json_t *doc)
{
    char dir[DS_PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/plots", out_dir);
    int rc = ds_mkdir_p(dir);
    if (rc != 0) {
        return soak_error(rc, "%s: %s", dir, ds_strerror(rc));
    }
    bool missing = false;
    for (size_t i = 0; i < DS_ARRAY_LEN(soak_plots) && rc == 0 && !missing; i++) {
        const char *cols[SOAK_SERIES_MAX];
        size_t n = soak_plot_columns(&soak_plots[i], json_object_get(doc, "samples"), cols,
                                     DS_ARRAY_LEN(cols));
        if (n == 0) {
            continue;
        }
        rc = soak_plot_write(dir, &soak_plots[i], doc, cols, n);
        int drawn = rc == 0 ? report_gnuplot(dir, soak_plots[i].name) : 0;
        missing = drawn == -ENOENT;
        if (drawn != 0 && !missing) {
            fprintf(stderr, "dayshard soak: warning: the %s plot failed (see %s)\n",
                    soak_plots[i].name, dir);
        }
    }
    if (missing) {
        fprintf(stderr, "dayshard soak: warning: gnuplot is not installed: no plots (the data "
                        "and scripts are in OUT/plots)\n");
    }
    return rc;
}

/* ---- the summary ------------------------------------------------------------------------ */

/* The series' value at the first sample whose stream day reaches day (the last one for day < 0). */
static double soak_value_at(json_t *samples, const char *series, double day)
{
    json_t *x = json_object_get(samples, "stream_day");
    json_t *a = json_object_get(samples, series);
    double found = NAN;
    for (size_t k = 0; k < json_array_size(a); k++) {
        json_t *v = json_array_get(a, k);
        json_t *d = json_array_get(x, k);
        if (!json_is_number(v) || !json_is_number(d)) {
            continue;
        }
        found = json_number_value(v);
        if (day >= 0 && json_number_value(d) >= day) {
            return found;
        }
    }
    return day < 0 ? found : NAN;
}

static void soak_print_value(double v, double divisor)
{
    if (isnan(v)) {
        printf(" %12s", "-");
    } else {
        printf(" %12.1f", v / divisor);
    }
}

static void soak_summary_verdicts(json_t *doc)
{
    json_t *samples = json_object_get(doc, "samples");
    double n = json_number_value(json_object_get(json_object_get(doc, "config"), "retention_days"));
    printf("%-28s %12s %12s %12s %12s %12s %12s  %s\n", "resource (MiB or count)", "at day N",
           "at day 2N", "at the end", "max first", "max last", "limit", "verdict");
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(doc, "verdicts"), i, v)
    {
        const char *name = json_string_value(json_object_get(v, "resource"));
        double divisor = strstr(name, "bytes") != NULL ? SOAK_MIB : 1.0;
        printf("%-28s", name);
        soak_print_value(soak_value_at(samples, name, n), divisor);
        soak_print_value(soak_value_at(samples, name, 2 * n), divisor);
        soak_print_value(soak_value_at(samples, name, -1), divisor);
        double first = json_number_value(json_object_get(v, "first_max"));
        double last = json_number_value(json_object_get(v, "last_max"));
        double limit = json_number_value(json_object_get(v, "limit"));
        bool judged = json_is_true(json_object_get(v, "judged"));
        soak_print_value(judged ? first : NAN, divisor);
        soak_print_value(judged ? last : NAN, divisor);
        soak_print_value(judged ? limit : NAN, divisor);
        printf("  %s\n", !judged                                    ? "no data"
                         : json_is_true(json_object_get(v, "grew")) ? "GREW"
                                                                    : "bounded");
    }
}

static void soak_summary(json_t *doc)
{
    json_t *feed = json_object_get(doc, "feed");
    printf("soak: %.0f of %.0f lines fed in %.1f s (plus %.1f s held), %.0f lines/s while "
           "feeding\n",
           json_number_value(json_object_get(feed, "lines_acked")),
           json_number_value(json_object_get(feed, "lines")),
           json_number_value(json_object_get(feed, "feed_s")),
           json_number_value(json_object_get(feed, "paused_s")),
           json_number_value(json_object_get(feed, "feed_eps")));
    soak_summary_verdicts(doc);
    const char *name;
    json_t *v;
    printf("longest stalls (s):");
    json_object_foreach(json_object_get(doc, "stalls"), name, v)
    {
        printf(" %s %s", name, json_is_number(v) ? "" : "-");
        if (json_is_number(v)) {
            printf("%.3f", json_number_value(v));
        }
    }
    printf("\n");
    size_t i;
    json_array_foreach(json_object_get(doc, "restarts"), i, v)
    {
        printf("restart at stream day %.0f: stop %.0f ms, ready %.0f ms, caught up %.0f ms\n",
               json_number_value(json_object_get(v, "stream_day")),
               json_number_value(json_object_get(v, "stop_ms")),
               json_number_value(json_object_get(v, "ready_ms")),
               json_number_value(json_object_get(v, "caught_up_ms")));
    }
    json_t *counts = json_object_get(doc, "counts");
    json_array_foreach(json_object_get(counts, "days"), i, v)
    {
        printf("count %s: orders %lld (reference %lld), paid %lld (reference %lld)\n",
               json_string_value(json_object_get(v, "day")),
               (long long)json_integer_value(json_object_get(v, "orders")),
               (long long)json_integer_value(json_object_get(v, "orders_ref")),
               (long long)json_integer_value(json_object_get(v, "paid")),
               (long long)json_integer_value(json_object_get(v, "paid_ref")));
    }
    json_array_foreach(json_object_get(doc, "failures"), i, v)
    {
        printf("FAIL: %s\n", json_string_value(v));
    }
    printf("soak: %s\n", json_is_true(json_object_get(doc, "passed")) ? "PASS" : "FAIL");
}

int soak_report_render(const char *out_dir, const json_t *report)
{
    json_t *doc = (json_t *)report; /* jansson's getters take non-const; nothing is changed */
    json_t *schema = json_object_get(doc, "schema");
    if (!json_is_integer(schema) || json_integer_value(schema) != SOAK_REPORT_SCHEMA ||
        !json_is_object(json_object_get(doc, "samples"))) {
        return soak_error(-DS_EUSAGE, "%s/report.json is not a soak report of schema %d", out_dir,
                          SOAK_REPORT_SCHEMA);
    }
    int rc = soak_plots_draw(out_dir, doc);
    soak_summary(doc);
    fflush(stdout);
    return rc;
}
