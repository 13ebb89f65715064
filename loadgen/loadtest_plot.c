/*
 * The load test's plots (loadtest_report.h): line plots with one line per run (throughput,
 * hottest share, lag, query latency) and a heat map of write rate per partition for each run,
 * each a data file and a gnuplot script under OUT/plots/, drawn by a gnuplot process spawned
 * with that directory as its working directory. See loadtest_report.c for the layout of the
 * report and the rejected alternatives.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>

#include <jansson.h>

#include "loadgen/loadtest_report.h"

/* ---- gnuplot ------------------------------------------------------------------------------- */

/* The child's side of the spawn: working directory dir, stdin from /dev/null, stdout and
 * stderr into log (relative to that directory). Returns 0 or a positive errno. */
static int report_spawn_actions(posix_spawn_file_actions_t *actions, const char *dir,
                                const char *log)
{
    int rc = posix_spawn_file_actions_addchdir_np(actions, dir);
    if (rc == 0) {
        rc = posix_spawn_file_actions_addopen(actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    }
    if (rc == 0) {
        rc = posix_spawn_file_actions_addopen(actions, STDOUT_FILENO, log,
                                              O_WRONLY | O_CREAT | O_TRUNC, 0644);
    }
    if (rc == 0) {
        rc = posix_spawn_file_actions_adddup2(actions, STDOUT_FILENO, STDERR_FILENO);
    }
    return rc;
}

/* Starts `gnuplot NAME.gp` in dir with an empty signal mask (the caller may block SIGINT
 * to wait for it). Returns 0 or a positive errno (ENOENT: gnuplot is not on PATH). */
static int report_spawn_gnuplot(const char *dir, const char *script, const char *log, pid_t *pid)
{
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    sigset_t none;
    sigemptyset(&none);
    int rc = posix_spawn_file_actions_init(&actions);
    if (rc != 0) {
        return rc;
    }
    rc = posix_spawnattr_init(&attr);
    if (rc != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return rc;
    }
    rc = report_spawn_actions(&actions, dir, log);
    if (rc == 0) {
        rc = posix_spawnattr_setsigmask(&attr, &none);
    }
    if (rc == 0) {
        rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    }
    char program[] = "gnuplot";
    char script_arg[REPORT_NAME_SIZE + 4];
    snprintf(script_arg, sizeof(script_arg), "%s", script);
    char *argv[] = {program, script_arg, NULL};
    if (rc == 0) {
        rc = posix_spawnp(pid, program, &actions, &attr, argv, environ);
    }
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    return rc;
}

int report_gnuplot(const char *dir, const char *name)
{
    char script[REPORT_NAME_SIZE + 4];
    char log[REPORT_NAME_SIZE + 4];
    char log_path[DS_PATH_MAX + REPORT_NAME_SIZE + 8];
    snprintf(script, sizeof(script), "%s.gp", name);
    snprintf(log, sizeof(log), "%s.log", name);
    snprintf(log_path, sizeof(log_path), "%s/%s", dir, log);
    pid_t pid = 0;
    int rc = report_spawn_gnuplot(dir, script, log, &pid);
    if (rc != 0) {
        unlink(log_path); /* glibc reports a failed exec after the child opened the log */
        if (rc != ENOENT) {
            ds_log_error("%s/%s: cannot run gnuplot: %s", dir, script, ds_strerror(-rc));
        }
        return -rc;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            rc = -errno;
            ds_log_error("%s/%s: waiting for gnuplot: %s", dir, script, ds_strerror(rc));
            return rc;
        }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        unlink(log_path);
        return 0;
    }
    ds_log_error("%s/%s: gnuplot failed (%s %d), its messages are in %s", dir, script,
                 WIFEXITED(status) ? "exit" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), log_path);
    return -EIO;
}

/* Draws a plot whose data and script are written, unless gnuplot is known to be missing, and
 * records the outcome for report.md. */
static void report_plot_draw(struct report_plots *p, struct report_plot *plot)
{
    ASSERT(plot->name[0] != '\0');
    if (p->gnuplot_missing) {
        plot->state = REPORT_PLOT_NO_GNUPLOT;
        return;
    }
    int rc = report_gnuplot(p->dir, plot->name);
    if (rc == -ENOENT) {
        p->gnuplot_missing = true;
        plot->state = REPORT_PLOT_NO_GNUPLOT;
        return;
    }
    if (rc != 0) {
        p->failed_count++;
        plot->state = REPORT_PLOT_FAILED;
        return;
    }
    plot->state = REPORT_PLOT_DRAWN;
    if (p->progress != NULL) {
        fprintf(p->progress, "wrote %s/%s.png\n", p->dir, plot->name);
    }
}

/* The next plot's slot, named and captioned. */
static struct report_plot *report_plot_add(struct report_plots *p, const char *name,
                                           const char *caption)
{
    ASSERT(p->plot_count < REPORT_PLOTS_MAX);
    ASSERT(strlen(name) < REPORT_NAME_SIZE);
    struct report_plot *plot = &p->plots[p->plot_count++];
    snprintf(plot->name, sizeof(plot->name), "%s", name);
    snprintf(plot->caption, sizeof(plot->caption), "%s", caption);
    plot->state = REPORT_PLOT_EMPTY;
    return plot;
}

/* The opening of every script: what it draws, how to re-run it, the terminal and output. */
static void report_gp_header(struct report_file *rf, const char *name, const char *what,
                             int height_px)
{
    char comment[REPORT_TEXT_SIZE];
    char quoted[REPORT_TEXT_SIZE];
    report_printf(rf,
                  "# %s\n"
                  "# Data: %s.dat. Re-run from this directory after editing: gnuplot %s.gp\n"
                  "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
                  "    set terminal pngcairo size %d,%d noenhanced font 'sans,10'\n"
                  "} else {\n"
                  "    set terminal png size %d,%d noenhanced\n"
                  "}\n"
                  "set output '%s.png'\n"
                  "set title '%s'\n"
                  "set xlabel 'seconds since the start'\n",
                  report_quote(what, REPORT_QUOTE_PLAIN, comment), name, name, REPORT_WIDTH_PX,
                  height_px, REPORT_WIDTH_PX, height_px, name,
                  report_quote(what, REPORT_QUOTE_GNUPLOT, quoted));
}

/* ---- line plots: one line per run --------------------------------------------------------- */

struct report_line_plot {
    const char *name;
    const char *caption;
    const char *ylabel;
    const char *keys[2];   /* series drawn; the second may be NULL */
    const char *titles[2]; /* what each is in a legend, for two series */
    double scale;          /* 100 for a share drawn as a percentage */
    bool panels;           /* two series: one panel each, else two dash types */
    int height_px;
};

static const struct report_line_plot report_line_plots[] = {
    {"throughput",
     "Produced (solid) and stored (dashed) events per second",
     "events/s",
     {"produced_eps", "stored_eps"},
     {"produced", "stored"},
     1,
     false,
     REPORT_HEIGHT_PX},
    {"hottest-share",
     "Hottest partition's share of all writes",
     "% of writes",
     {"hottest_share", NULL},
     {NULL, NULL},
     100,
     false,
     REPORT_HEIGHT_PX},
    {"lag", "Ingest lag", "ms", {"lag_ms", NULL}, {NULL, NULL}, 1, false, REPORT_HEIGHT_PX},
    {"latency",
     "Query latency p99: count (top), orders (bottom)",
     "us",
     {"count_p99_us", "orders_p99_us"},
     {"count p99", "orders p99"},
     1,
     true,
     700},
    {"e2e-latency",
     "Scheduled send to durable p99 (top) and the producer's send delay p99 (bottom)",
     "ms",
     {"durable_p99_ms", "send_delay_p99_ms"},
     {"to durable p99", "send delay p99"},
     1,
     true,
     700},
};

/* Where each run is in a line plot's data file, and how many points each of its lines has. */
struct report_line_layout {
    int block[LOADTEST_REPORT_RUNS_MAX]; /* gnuplot's `index`, -1 for a run without a time axis */
    size_t points[LOADTEST_REPORT_RUNS_MAX][2];
};

static size_t report_line_key_count(const struct report_line_plot *lp)
{
    return lp->keys[1] != NULL ? 2 : 1;
}

/* Sample i of series `key` (NaN when missing, null or not a number). */
static double report_sample(const json_t *series, const char *key, size_t i)
{
    const json_t *v = json_array_get(json_object_get(series, key), i);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* One block of a line plot's data: a row per sample with a time (t_s, then each series). */
static void report_line_block(struct report_file *rf, const struct report_line_plot *lp,
                              const json_t *run, size_t index, size_t points[2])
{
    const json_t *series = json_object_get(run, "series");
    const json_t *t = json_object_get(series, "t_s");
    size_t key_count = report_line_key_count(lp);
    char name[REPORT_TEXT_SIZE];
    char quoted[REPORT_TEXT_SIZE];
    report_printf(
        rf, "# %s: t_s %s %s\n",
        report_quote(report_run_name(run, index, "run", name), REPORT_QUOTE_PLAIN, quoted),
        lp->keys[0], key_count > 1 ? lp->keys[1] : "");
    for (size_t i = 0; i < json_array_size(t); i++) {
        const json_t *time = json_array_get(t, i);
        if (!json_is_number(time)) {
            continue;
        }
        report_printf(rf, "%.10g", json_number_value(time));
        for (size_t k = 0; k < key_count; k++) {
            double y = report_sample(series, lp->keys[k], i) * lp->scale;
            if (isnan(y)) {
                report_printf(rf, " NaN");
            } else {
                report_printf(rf, " %.10g", y);
                points[k]++;
            }
        }
        report_printf(rf, "\n");
    }
    report_printf(rf, "\n\n"); /* two blank lines end a gnuplot data block */
}

/* Writes p->dir/NAME.dat: one block for each run with a time axis. Returns 0 or a negated
 * errno (logged). */
static int report_line_data(const struct report_plots *p, const struct report_line_plot *lp,
                            const json_t *runs, struct report_line_layout *layout)
{
    char file[REPORT_NAME_SIZE + 4];
    snprintf(file, sizeof(file), "%s.dat", lp->name);
    struct report_file rf;
    int rc = report_file_open(&rf, p->dir, file);
    if (rc != 0) {
        return rc;
    }
    memset(layout, 0, sizeof(*layout));
    int block_count = 0;
    for (size_t i = 0; i < json_array_size(runs); i++) {
        const json_t *run = json_array_get(runs, i);
        layout->block[i] = -1;
        if (json_array_size(json_object_get(json_object_get(run, "series"), "t_s")) == 0) {
            continue;
        }
        layout->block[i] = block_count++;
        report_line_block(&rf, lp, run, i, layout->points[i]);
    }
    return report_file_close(&rf);
}

/* One `plot` command with a line for each run that has points in series keys[k_first..k_end). */
static void report_line_plot_command(struct report_file *rf, const struct report_line_plot *lp,
                                     const json_t *runs, const struct report_line_layout *layout,
                                     size_t k_first, size_t k_end)
{
    ASSERT(k_first < k_end);
    ASSERT(k_end <= report_line_key_count(lp));
    bool first = true;
    for (size_t i = 0; i < json_array_size(runs); i++) {
        for (size_t k = k_first; k < k_end; k++) {
            if (layout->points[i][k] == 0) {
                continue;
            }
            char name[REPORT_TEXT_SIZE];
            char title[REPORT_TEXT_SIZE];
            report_run_name(json_array_get(runs, i), i, "run", name);
            if (!lp->panels && lp->titles[k] != NULL) {
                size_t len = strlen(name);
                snprintf(name + len, sizeof(name) - len, ", %s", lp->titles[k]);
            }
            report_printf(rf,
                          "%s'%s.dat' index %d using 1:%zu with lines lw 2 lt %zu dt %zu"
                          " title '%s'",
                          first ? "plot " : ", \\\n     ", lp->name, layout->block[i], k + 2, i + 1,
                          lp->panels ? (size_t)1 : k + 1,
                          report_quote(name, REPORT_QUOTE_GNUPLOT, title));
            first = false;
        }
    }
    report_printf(rf, "\n");
}

/* Writes p->dir/NAME.gp for a line plot with at least one line. */
static int report_line_script(const struct report_plots *p, const struct report_line_plot *lp,
                              const json_t *runs, const struct report_line_layout *layout)
{
    char file[REPORT_NAME_SIZE + 4];
    snprintf(file, sizeof(file), "%s.gp", lp->name);
    struct report_file rf;
    int rc = report_file_open(&rf, p->dir, file);
    if (rc != 0) {
        return rc;
    }
    report_gp_header(&rf, lp->name, lp->caption, lp->height_px);
    report_printf(&rf,
                  "# One colour per run (Okabe-Ito, which stays apart for colour-blind readers).\n"
                  "array colours = ['#0072b2', '#d55e00', '#009e73', '#cc79a7', '#e69f00', "
                  "'#56b4e9', '#000000', '#999999']\n"
                  "do for [i = 1:8] { set linetype i linecolor rgb colours[i] }\n"
                  "set linetype cycle 8\n"
                  "set ylabel '%s'\nset yrange [0:*]\nset grid\nset key below\n",
                  lp->ylabel);
    size_t key_count = report_line_key_count(lp);
    if (!lp->panels) {
        report_line_plot_command(&rf, lp, runs, layout, 0, key_count);
        return report_file_close(&rf);
    }
    char caption[REPORT_TEXT_SIZE];
    report_printf(&rf, "set multiplot layout %zu,1 title '%s'\n", key_count,
                  report_quote(lp->caption, REPORT_QUOTE_GNUPLOT, caption));
    for (size_t k = 0; k < key_count; k++) {
        size_t points = 0;
        for (size_t i = 0; i < json_array_size(runs); i++) {
            points += layout->points[i][k];
        }
        report_printf(&rf, "set title '%s'\n", lp->titles[k]);
        if (points > 0) {
            report_line_plot_command(&rf, lp, runs, layout, k, k + 1);
        } else { /* gnuplot refuses a plot without a defined point: say it in the panel */
            report_printf(&rf, "set label 1 'no samples' at graph 0.5,0.5 center\n"
                               "set yrange [0:1]\nplot 0.5 with dots notitle\nunset label 1\n");
        }
    }
    report_printf(&rf, "unset multiplot\n");
    return report_file_close(&rf);
}

/* A line plot: data, script, drawing. Returns 0 or a negated errno from writing (logged). */
static int report_line_draw(struct report_plots *p, const struct report_line_plot *lp,
                            const json_t *runs)
{
    struct report_line_layout layout;
    struct report_plot *plot = report_plot_add(p, lp->name, lp->caption);
    int rc = report_line_data(p, lp, runs, &layout);
    if (rc != 0) {
        return rc;
    }
    size_t points = 0;
    for (size_t i = 0; i < json_array_size(runs); i++) {
        points += layout.points[i][0] + layout.points[i][1];
    }
    if (points == 0) {
        return 0; /* REPORT_PLOT_EMPTY */
    }
    rc = report_line_script(p, lp, runs, &layout);
    if (rc == 0) {
        report_plot_draw(p, plot);
    }
    return rc;
}

/* ---- heat maps: write rate per partition over time, one per run ---------------------------- */

/* What one heat map needs beside its rows. */
struct report_heat {
    char name[REPORT_NAME_SIZE];
    char title[REPORT_TEXT_SIZE];
    size_t row_count;
    size_t key_count; /* partitions in the run, for "48 of 120" */
    size_t samples;
    double t_first_s;
    double step_s;
    double capacity_eps; /* NaN when unknown */
    double scale_max_eps;
};

static int report_heat_order(const void *a, const void *b)
{
    const struct report_heat_row *x = a;
    const struct report_heat_row *y = b;
    if (x->total != y->total) {
        return x->total > y->total ? -1 : 1;
    }
    return strcmp(x->key, y->key);
}

/* The rows of a run's heat map in rows (LOADTEST_REPORT_PARTITIONS_MAX entries): its
 * partitions by events over the first `samples` samples, hottest first. Returns the count. */
static size_t report_heat_rows(const json_t *partitions, size_t samples,
                               struct report_heat_row *rows)
{
    ASSERT(json_object_size(partitions) <= LOADTEST_REPORT_PARTITIONS_MAX);
    size_t n = 0;
    const char *key;
    const json_t *rates;
    json_object_foreach((json_t *)partitions, key, rates)
    {
        double total = 0;
        for (size_t i = 0; i < samples; i++) {
            const json_t *v = json_array_get(rates, i);
            total += json_is_number(v) ? json_number_value(v) : 0;
        }
        rows[n++] = (struct report_heat_row){.key = key, .rates = rates, .total = total};
    }
    qsort(rows, n, sizeof(rows[0]), report_heat_order);
    return n;
}

/* The highest write rate of any partition of any run: the top of the shared colour scale. */
static double report_heat_peak(const json_t *runs)
{
    double peak = 0;
    for (size_t r = 0; r < json_array_size(runs); r++) {
        const json_t *series = json_object_get(json_array_get(runs, r), "series");
        size_t samples = json_array_size(json_object_get(series, "t_s"));
        const char *key;
        const json_t *rates;
        json_object_foreach(json_object_get(series, "partitions"), key, rates)
        {
            for (size_t i = 0; i < samples; i++) {
                const json_t *v = json_array_get(rates, i);
                double x = json_is_number(v) ? json_number_value(v) : 0;
                peak = x > peak ? x : peak;
            }
        }
    }
    return peak;
}

/* The time axis of a heat map: the first and last numeric t_s and the step between samples
 * (the matrix assumes evenly spaced samples, which the load test writes). */
static void report_heat_axis(const json_t *t, struct report_heat *h)
{
    h->samples = json_array_size(t);
    double first = NAN;
    double last = NAN;
    for (size_t i = 0; i < h->samples; i++) {
        const json_t *v = json_array_get(t, i);
        if (json_is_number(v)) {
            last = json_number_value(v);
            first = isnan(first) ? last : first;
        }
    }
    h->t_first_s = isnan(first) ? 1 : first;
    h->step_s = 1;
    if (!isnan(first) && h->samples > 1 && last > first) {
        h->step_s = (last - first) / (double)(h->samples - 1);
    }
    ASSERT(h->step_s > 0);
}

/* The matrix: a line per row, a column per sample, NaN for a missing one; padded with NaN to
 * at least 2x2, the smallest image gnuplot draws (the padding lies outside the ranges). */
static int report_heat_data(const struct report_plots *p, const struct report_heat *h,
                            const struct report_heat_row *rows)
{
    char file[REPORT_NAME_SIZE + 4];
    snprintf(file, sizeof(file), "%s.dat", h->name);
    struct report_file rf;
    int rc = report_file_open(&rf, p->dir, file);
    if (rc != 0) {
        return rc;
    }
    char quoted[REPORT_TEXT_SIZE];
    report_printf(&rf,
                  "# %s\n# events/s: a line per partition (hottest first), a column per "
                  "sample\n",
                  report_quote(h->title, REPORT_QUOTE_PLAIN, quoted));
    for (size_t r = 0; r < h->row_count; r++) {
        report_printf(&rf, "# line %zu: %s\n", r + 1,
                      report_quote(rows[r].key, REPORT_QUOTE_PLAIN, quoted));
    }
    size_t columns = h->samples < 2 ? 2 : h->samples;
    for (size_t r = 0; r < (h->row_count < 2 ? 2 : h->row_count); r++) {
        for (size_t i = 0; i < columns; i++) {
            const json_t *v = r < h->row_count ? json_array_get(rows[r].rates, i) : NULL;
            if (json_is_number(v)) {
                report_printf(&rf, i == 0 ? "%.10g" : " %.10g", json_number_value(v));
            } else {
                report_printf(&rf, i == 0 ? "NaN" : " NaN");
            }
        }
        report_printf(&rf, "\n");
    }
    return report_file_close(&rf);
}

/* The colour bar's tics: quarters of the capacity, the capacity, then 2x, 5x, 10x... of it up
 * to the top of the scale, each labelled with its rate and placed through heat(). */
static void report_heat_tics(struct report_file *rf, const struct report_heat *h)
{
    static const double factors[] = {2.5, 2, 2}; /* 2x, 5x, 10x, 20x, 50x, 100x... */
    char label[REPORT_NUMBER_SIZE];
    double capacity = h->capacity_eps;
    ASSERT(capacity > 0);
    report_printf(rf, "set cbtics (");
    for (int quarter = 0; quarter < 4; quarter++) {
        report_printf(rf, "'%s' %.2f, ", report_number_text(capacity * quarter / 4, 0, label),
                      quarter / 4.0);
    }
    report_printf(rf, "'%s capacity' 1", report_number_text(capacity, 0, label));
    /* Up to 10^6x the capacity: beyond, the rates are not a load test's (and the loop ends). */
    size_t i = 0;
    for (double times = 2; times * capacity <= h->scale_max_eps && i < 3 * 6;
         times *= factors[i++ % 3]) {
        report_printf(rf, ", '%s' heat(%.10g)", report_number_text(times * capacity, 0, label),
                      times * capacity);
    }
    report_printf(rf, ")\n");
}

/* The colour scale, one for the heat maps of all runs so they compare. With a known capacity:
 * linear from 0 to the capacity (white, yellow, orange), where adaptive sharding keeps its
 * shards and their balance must show, then logarithmic above it (red to dark red), where only
 * the factor over capacity matters; heat(v) in the script maps a rate onto that axis. Without
 * a capacity: linear over one gradient. */
static void report_heat_scale(struct report_file *rf, const struct report_heat *h)
{
    double top = h->scale_max_eps;
    if (isnan(h->capacity_eps)) {
        report_printf(rf,
                      "heat(v) = v\nset cbrange [0:%.10g]\nset cblabel 'events/s'\n"
                      "set palette defined (0 '#ffffff', 1 '#ffeda0', 2 '#f59e0b', 3 '#e31a1c', "
                      "4 '#4a0012')\n",
                      top);
        return;
    }
    ASSERT(top >= h->capacity_eps);
    report_printf(rf,
                  "C = %.10g # the shard capacity, events/s\n"
                  "heat(v) = v != v ? NaN : v <= C ? (v < 0 ? 0 : v / C) : 1 + log10(v / C)\n"
                  "set cbrange [0:heat(%.10g)]\n"
                  "set cblabel 'events/s: linear up to the capacity, logarithmic above'\n",
                  h->capacity_eps, top);
    if (top > h->capacity_eps) {
        report_printf(rf,
                      "set palette defined (0 '#ffffff', 0.5 '#ffeda0', 1 '#f59e0b', "
                      "1 '#e31a1c', heat(%.10g) '#4a0012')\n",
                      top);
    } else {
        report_printf(rf, "set palette defined (0 '#ffffff', 0.5 '#ffeda0', 1 '#f59e0b')\n");
    }
    report_heat_tics(rf, h);
}

/* The script: partition keys as y tics (hottest at the top), seconds on x. */
static int report_heat_script(const struct report_plots *p, const struct report_heat *h,
                              const struct report_heat_row *rows)
{
    char file[REPORT_NAME_SIZE + 4];
    snprintf(file, sizeof(file), "%s.gp", h->name);
    struct report_file rf;
    int rc = report_file_open(&rf, p->dir, file);
    if (rc != 0) {
        return rc;
    }
    int height_px = 140 + 15 * (int)h->row_count;
    report_gp_header(&rf, h->name, h->title,
                     height_px > REPORT_HEIGHT_PX ? height_px : REPORT_HEIGHT_PX);
    double t_last_s = h->t_first_s + h->step_s * (double)(h->samples - 1);
    report_printf(&rf,
                  "set xrange [%.10g:%.10g]\nset yrange [%.1f:-0.5]\nset tics out\n"
                  "# Missing samples show grey, as the background behind the image.\n"
                  "set object 1 rectangle from graph 0,0 to graph 1,1 behind "
                  "fillcolor rgb '#bdbdbd' fillstyle solid noborder\n"
                  "set ytics font ',8' (",
                  h->t_first_s - h->step_s / 2, t_last_s + h->step_s / 2,
                  (double)h->row_count - 0.5);
    for (size_t r = 0; r < h->row_count; r++) {
        char label[48]; /* cut before quoting: a cut must not split a doubled '' */
        char quoted[REPORT_TEXT_SIZE];
        snprintf(label, sizeof(label), "%.40s", rows[r].key);
        report_printf(&rf, "%s'%s' %zu", r == 0 ? " \\\n    " : ", \\\n    ",
                      report_quote(label, REPORT_QUOTE_GNUPLOT, quoted), r);
    }
    report_printf(&rf, ")\n");
    report_heat_scale(&rf, h);
    report_printf(
        &rf,
        "set rmargin 20\n"
        "plot '%s.dat' matrix using (%.10g + $1 * %.10g):2:(heat($3)) with image notitle\n",
        h->name, h->t_first_s, h->step_s);
    return report_file_close(&rf);
}

/* The heat map of run `index`. Returns 0 or a negated errno from writing (logged). */
static int report_heat_draw(struct report_plots *p, const json_t *doc, size_t index,
                            double peak_eps, struct report_heat_row *rows)
{
    const json_t *run = json_array_get(json_object_get(doc, "runs"), index);
    const json_t *series = json_object_get(run, "series");
    const json_t *partitions = json_object_get(series, "partitions");
    struct report_heat h = {.capacity_eps = NAN};
    char name[REPORT_TEXT_SIZE];
    snprintf(h.name, sizeof(h.name), "heat-%zu", index + 1);
    report_heat_axis(json_object_get(series, "t_s"), &h);
    h.key_count = report_heat_rows(partitions, h.samples, rows);
    h.row_count =
        h.key_count < LOADTEST_REPORT_HEAT_ROWS_MAX ? h.key_count : LOADTEST_REPORT_HEAT_ROWS_MAX;
    snprintf(h.title, sizeof(h.title), "Write rate per partition, %.900s",
             report_run_name(run, index, "run", name));
    if (h.key_count > 0) {
        size_t len = strlen(h.title);
        snprintf(h.title + len, sizeof(h.title) - len, " (%zu of %zu partitions)", h.row_count,
                 h.key_count);
    }
    struct report_plot *plot = report_plot_add(p, h.name, h.title);
    if (h.row_count == 0 || h.samples == 0) {
        return 0; /* REPORT_PLOT_EMPTY */
    }
    double capacity = 0;
    if (report_number(doc, "shard_capacity_eps", &capacity) && capacity > 0) {
        h.capacity_eps = capacity;
    }
    h.scale_max_eps = peak_eps > 1 ? peak_eps : 1;
    if (!isnan(h.capacity_eps) && h.capacity_eps > h.scale_max_eps) {
        h.scale_max_eps = h.capacity_eps;
    }
    int rc = report_heat_data(p, &h, rows);
    if (rc == 0) {
        rc = report_heat_script(p, &h, rows);
    }
    if (rc == 0) {
        report_plot_draw(p, plot);
    }
    return rc;
}

/* Every plot: the line plots, then a heat map per run. Returns 0 or a negated errno from
 * writing (logged); gnuplot's own failures are counted in p, not returned. */
int report_plots_draw(struct report_plots *p, const json_t *doc, struct report_heat_row *rows)
{
    const json_t *runs = json_object_get(doc, "runs");
    int rc = ds_mkdir_p(p->dir);
    if (rc != 0) {
        ds_log_error("%s: %s", p->dir, ds_strerror(rc));
        return rc;
    }
    for (size_t i = 0; rc == 0 && i < DS_ARRAY_LEN(report_line_plots); i++) {
        rc = report_line_draw(p, &report_line_plots[i], runs);
    }
    double peak_eps = report_heat_peak(runs);
    for (size_t i = 0; rc == 0 && i < json_array_size(runs); i++) {
        rc = report_heat_draw(p, doc, i, peak_eps, rows);
    }
    return rc;
}
