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
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "loadgen/loadtest_report.h"

/* A number as text (at most 27 bytes: 15 digits, 4 separators, sign, point, 6 decimals); a
 * table cell made of numbers and words; text from the document (keys, strategies, reasons). */
#define REPORT_NUMBER_SIZE 32
#define REPORT_CELL_SIZE 128
#define REPORT_TEXT_SIZE 1024
/* A plot's file stem ("hottest-share", "heat-32"). */
#define REPORT_NAME_SIZE 32
#define REPORT_PLOTS_MAX (LOADTEST_REPORT_RUNS_MAX + 4)
/* Image width, and the height of one line plot (the default of the brief: 1000x500). */
#define REPORT_WIDTH_PX 1000
#define REPORT_HEIGHT_PX 500
/* A producer further behind its schedule than this did not offer the asked rate: say so. */
#define REPORT_PRODUCER_BEHIND_NOTE_S 1.0

/* ---- files: every write checked, the first failure kept with its path ----------------------- */

struct report_file {
    FILE *f;
    int err; /* the first failure (negated errno); writes after it are skipped */
    char path[DS_PATH_MAX];
};

/* Opens dir/name for writing. Returns 0 or a negated errno, logged with the path. */
static int report_file_open(struct report_file *rf, const char *dir, const char *name)
{
    rf->f = NULL;
    rf->err = 0;
    int n = snprintf(rf->path, sizeof(rf->path), "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof(rf->path)) {
        ds_log_error("%s/%s: %s", dir, name, ds_strerror(-ENAMETOOLONG));
        return -ENAMETOOLONG;
    }
    rf->f = fopen(rf->path, "w");
    if (rf->f == NULL) {
        int err = -errno;
        ds_log_error("%s: %s", rf->path, ds_strerror(err));
        return err;
    }
    return 0;
}

static void report_printf(struct report_file *rf, const char *fmt, ...) DS_PRINTF(2, 3);

static void report_printf(struct report_file *rf, const char *fmt, ...)
{
    ASSERT(rf->f != NULL);
    if (rf->err != 0) {
        return;
    }
    va_list args;
    va_start(args, fmt);
    errno = 0;
    int n = vfprintf(rf->f, fmt, args);
    int err = errno;
    va_end(args);
    if (n < 0) {
        rf->err = err != 0 ? -err : -EIO;
    }
}

/* Flushes and closes rf. Returns 0 or its first failure, logged once with the path. */
static int report_file_close(struct report_file *rf)
{
    ASSERT(rf->f != NULL);
    int err = rf->err;
    if (fflush(rf->f) != 0 && err == 0) {
        err = -errno;
    }
    if (fclose(rf->f) != 0 && err == 0) {
        err = -errno;
    }
    rf->f = NULL;
    if (err != 0) {
        ds_log_error("%s: %s", rf->path, ds_strerror(err));
    }
    return err;
}

/* ---- values of the document as text ------------------------------------------------------ */

static bool report_number(const json_t *o, const char *key, double *out)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_number(v)) {
        return false;
    }
    *out = json_number_value(v);
    return true;
}

static const char *report_string(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* x with `decimals` decimals and thousands separators ("12,345.6"); dst has REPORT_NUMBER_SIZE
 * bytes. Magnitudes beyond 1e15 (no longer exact, never a real count) read as "1.2e+16". */
static const char *report_number_text(double x, int decimals, char *dst)
{
    ASSERT(decimals >= 0);
    ASSERT(decimals <= 6);
    double magnitude = x < 0 ? -x : x;
    if (!isfinite(x) || magnitude >= 1e15) {
        snprintf(dst, REPORT_NUMBER_SIZE, "%.3g", x);
        return dst;
    }
    char digits[48];
    int len = snprintf(digits, sizeof(digits), "%.*f", decimals, magnitude);
    ASSERT(len > 0 && (size_t)len < sizeof(digits));
    size_t integer_len = strcspn(digits, ".");
    size_t n = 0;
    if (x < 0 && strspn(digits, "0.") != (size_t)len) {
        dst[n++] = '-'; /* not for a value that rounds to zero: no "-0" */
    }
    for (size_t i = 0; i < (size_t)len; i++) {
        if (i > 0 && i < integer_len && (integer_len - i) % 3 == 0) {
            dst[n++] = ',';
        }
        dst[n++] = digits[i];
    }
    dst[n] = '\0';
    return dst;
}

/* o's number `key` as report_number_text, or "-". */
static const char *report_cell(const json_t *o, const char *key, int decimals, char *dst)
{
    double x = 0;
    if (!report_number(o, key, &x)) {
        snprintf(dst, REPORT_NUMBER_SIZE, "-");
        return dst;
    }
    return report_number_text(x, decimals, dst);
}

/* A percentage with one decimal; "<0.1" for a positive share that would round to zero. */
static const char *report_percent_text(double percent, char *dst)
{
    if (percent > 0 && percent < 0.05) {
        snprintf(dst, REPORT_NUMBER_SIZE, "<0.1");
        return dst;
    }
    return report_number_text(percent, 1, dst);
}

enum report_quote {
    REPORT_QUOTE_PLAIN,   /* control bytes only: a comment line of a data file */
    REPORT_QUOTE_MD,      /* Markdown text: markup punctuation escaped with '\' */
    REPORT_QUOTE_CODE,    /* inside a Markdown code span in a table: no '`', '|' escaped */
    REPORT_QUOTE_GNUPLOT, /* inside a gnuplot single-quoted string: '' for ' */
};

/* s ready for where it goes (see enum report_quote); control bytes become '?' and a text too
 * long for dst ends in "..." at a character boundary. dst has REPORT_TEXT_SIZE bytes. */
static const char *report_quote(const char *s, enum report_quote how, char *dst)
{
    ASSERT(s != NULL);
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        bool starts_character = (*p & 0xC0u) != 0x80u;
        if ((starts_character && n + 8 >= REPORT_TEXT_SIZE) || n + 5 >= REPORT_TEXT_SIZE) {
            memcpy(dst + n, "...", 3);
            n += 3;
            break;
        }
        char c = *p < 0x20u || *p == 0x7Fu ? '?' : (char)*p;
        if (how == REPORT_QUOTE_MD && strchr("\\`*_[]<>|", c) != NULL) {
            dst[n++] = '\\';
        } else if (how == REPORT_QUOTE_CODE && c == '|') {
            dst[n++] = '\\';
        } else if (how == REPORT_QUOTE_GNUPLOT && c == '\'') {
            dst[n++] = '\'';
        }
        dst[n++] = how == REPORT_QUOTE_CODE && c == '`' ? '\'' : c;
    }
    ASSERT(n < REPORT_TEXT_SIZE);
    dst[n] = '\0';
    return dst;
}

/* "run N (strategy)" or "run N" for run `index` (0-based), with `word` for "run" (a sentence
 * starts with "Run"). Raw: quote it for where it goes. dst has REPORT_TEXT_SIZE bytes. */
static const char *report_run_name(const json_t *run, size_t index, const char *word, char *dst)
{
    const char *strategy = report_string(run, "strategy");
    if (strategy != NULL) {
        snprintf(dst, REPORT_TEXT_SIZE, "%s %zu (%.900s)", word, index + 1, strategy);
    } else {
        snprintf(dst, REPORT_TEXT_SIZE, "%s %zu", word, index + 1);
    }
    return dst;
}

/* The run's final shards per day: "final_shards", or "shards" when it is an object (older
 * documents used that name, which now holds the strategy's shard mode). */
static const json_t *report_final_shards(const json_t *run)
{
    const json_t *shards = json_object_get(run, "final_shards");
    return json_is_object(shards) ? shards : json_object_get(run, "shards");
}

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
        if (json_object_size(json_object_get(series, "partitions")) >
            LOADTEST_REPORT_PARTITIONS_MAX) {
            snprintf(dst, capacity, "run %zu has more than %d partition series", i + 1,
                     LOADTEST_REPORT_PARTITIONS_MAX);
            return false;
        }
    }
    return true;
}

/* ---- gnuplot ------------------------------------------------------------------------------- */

enum report_plot_state {
    REPORT_PLOT_DRAWN,
    REPORT_PLOT_NO_GNUPLOT, /* data and script written, gnuplot not installed */
    REPORT_PLOT_FAILED,     /* gnuplot failed: NAME.log says why */
    REPORT_PLOT_EMPTY,      /* nothing to draw: no run has a sample of it */
};

struct report_plot {
    char name[REPORT_NAME_SIZE];
    char caption[REPORT_TEXT_SIZE];
    enum report_plot_state state;
};

struct report_plots {
    char dir[DS_PATH_MAX]; /* OUT/plots */
    FILE *progress;        /* borrowed, may be NULL */
    bool gnuplot_missing;
    size_t failed_count;
    size_t plot_count;
    struct report_plot plots[REPORT_PLOTS_MAX];
};

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

/* Runs gnuplot on p->dir/NAME.gp and waits. Returns 0; -ENOENT when gnuplot is not installed
 * (not logged: the caller says it once); -EIO when gnuplot failed, or another negated errno
 * when it could not be run (both logged, naming the script and its log). */
static int report_gnuplot(const struct report_plots *p, const char *name)
{
    char script[REPORT_NAME_SIZE + 4];
    char log[REPORT_NAME_SIZE + 4];
    char log_path[DS_PATH_MAX + REPORT_NAME_SIZE + 8];
    snprintf(script, sizeof(script), "%s.gp", name);
    snprintf(log, sizeof(log), "%s.log", name);
    snprintf(log_path, sizeof(log_path), "%s/%s", p->dir, log);
    pid_t pid = 0;
    int rc = report_spawn_gnuplot(p->dir, script, log, &pid);
    if (rc != 0) {
        unlink(log_path); /* glibc reports a failed exec after the child opened the log */
        if (rc != ENOENT) {
            ds_log_error("%s/%s: cannot run gnuplot: %s", p->dir, script, ds_strerror(-rc));
        }
        return -rc;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            rc = -errno;
            ds_log_error("%s/%s: waiting for gnuplot: %s", p->dir, script, ds_strerror(rc));
            return rc;
        }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        unlink(log_path);
        return 0;
    }
    ds_log_error("%s/%s: gnuplot failed (%s %d), its messages are in %s", p->dir, script,
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
    int rc = report_gnuplot(p, plot->name);
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

struct report_heat_row {
    const char *key;
    const json_t *rates;
    double total; /* events over the run, the order of the rows */
};

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
static int report_plots_draw(struct report_plots *p, const json_t *doc,
                             struct report_heat_row *rows)
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

/* ---- report.md: the setup ----------------------------------------------------------------- */

static void report_md_title(struct report_file *rf, const json_t *doc)
{
    const char *profile = report_string(doc, "profile");
    const char *command = report_string(doc, "command");
    char text[REPORT_TEXT_SIZE];
    char events[REPORT_NUMBER_SIZE];
    char rate[REPORT_NUMBER_SIZE];
    char nodes[REPORT_NUMBER_SIZE];
    report_cell(doc, "nodes", 0, nodes);
    report_printf(rf, "# Load test: %s, %s events at %s/s, %s node%s\n\n",
                  profile != NULL ? report_quote(profile, REPORT_QUOTE_MD, text) : "-",
                  report_cell(doc, "events", 0, events), report_cell(doc, "rate", 0, rate), nodes,
                  strcmp(nodes, "1") == 0 ? "" : "s");
    if (command != NULL) {
        report_printf(rf, "```\n%s\n```\n\n", report_quote(command, REPORT_QUOTE_PLAIN, text));
    } else {
        report_printf(rf, "Command: -\n\n");
    }
}

static void report_md_setup(struct report_file *rf, const json_t *doc)
{
    const json_t *machine = json_object_get(doc, "machine");
    const char *started = report_string(doc, "started");
    const char *cpu = report_string(machine, "cpu");
    const char *kernel = report_string(machine, "kernel");
    char text[REPORT_TEXT_SIZE];
    char cells[4][REPORT_NUMBER_SIZE];
    report_printf(rf, "- started: %s\n",
                  started != NULL ? report_quote(started, REPORT_QUOTE_MD, text) : "-");
    report_printf(rf, "- machine: %s, %s cores, ",
                  cpu != NULL ? report_quote(cpu, REPORT_QUOTE_MD, text) : "-",
                  report_cell(machine, "cores", 0, cells[0]));
    report_printf(rf, "kernel %s\n",
                  kernel != NULL ? report_quote(kernel, REPORT_QUOTE_MD, text) : "-");
    report_printf(rf, "- shard capacity: %s events/s; at most %s shards a day\n",
                  report_cell(doc, "shard_capacity_eps", 0, cells[0]),
                  report_cell(doc, "max_shards", 0, cells[1]));
    report_printf(rf, "- Kafka partitions: %s; queries: %s/s\n\n",
                  report_cell(doc, "kafka_partitions", 0, cells[2]),
                  report_cell(doc, "queries_per_s", 0, cells[3]));
}

/* ---- report.md: the reading, clauses computed from the numbers ----------------------------- */

/* Clauses of one sentence about a run: ": " before the first, "; " between the others. */
struct report_sentence {
    struct report_file *rf;
    size_t clause_count;
};

static void report_clause(struct report_sentence *s, const char *fmt, ...) DS_PRINTF(2, 3);

static void report_clause(struct report_sentence *s, const char *fmt, ...)
{
    char text[REPORT_TEXT_SIZE];
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(text, sizeof(text), fmt, args);
    va_end(args);
    ASSERT(n >= 0);
    report_printf(s->rf, "%s%s", s->clause_count == 0 ? ": " : "; ", text);
    s->clause_count++;
}

/* The growths of one day, summed up: the hot day's when it grew, else the first growth's day. */
struct report_growth {
    const char *day;
    double from;
    double to;
    double at_s;
    size_t steps;
    size_t other_days_steps; /* growths of other days */
};

static bool report_growth_summary(const json_t *run, struct report_growth *g)
{
    const json_t *growths = json_object_get(run, "growths");
    const char *hot = report_string(run, "hot_day");
    *g = (struct report_growth){.from = NAN, .to = NAN, .at_s = NAN};
    for (size_t i = 0; i < json_array_size(growths); i++) {
        const char *day = report_string(json_array_get(growths, i), "day");
        if (day != NULL && (g->day == NULL || (hot != NULL && strcmp(day, hot) == 0))) {
            g->day = day;
        }
    }
    for (size_t i = 0; g->day != NULL && i < json_array_size(growths); i++) {
        const json_t *growth = json_array_get(growths, i);
        const char *day = report_string(growth, "day");
        if (day == NULL || strcmp(day, g->day) != 0) {
            g->other_days_steps++;
            continue;
        }
        if (g->steps++ == 0 && !report_number(growth, "from", &g->from)) {
            g->from = NAN;
        }
        if (!report_number(growth, "to", &g->to)) {
            g->to = NAN;
        }
        if (!report_number(growth, "at_s", &g->at_s)) {
            g->at_s = NAN;
        }
    }
    ASSERT(g->day == NULL || g->steps > 0);
    return g->day != NULL;
}

static void report_growth_clause(struct report_sentence *s, const json_t *run)
{
    struct report_growth g;
    if (!report_growth_summary(run, &g)) {
        return; /* a fixed strategy never grows: saying so for each is noise */
    }
    char day[REPORT_TEXT_SIZE];
    char cells[3][REPORT_NUMBER_SIZE];
    report_quote(g.day, REPORT_QUOTE_MD, day);
    report_number_text(g.from, 0, cells[0]);
    report_number_text(g.to, 0, cells[1]);
    report_number_text(g.at_s, 1, cells[2]);
    if (g.steps == 1) {
        report_clause(s, "it grew %s from %s to %s shards at %s s", day, cells[0], cells[1],
                      cells[2]);
    } else {
        report_clause(s, "it grew %s from %s to %s shards in %zu steps, the last at %s s", day,
                      cells[0], cells[1], g.steps, cells[2]);
    }
    if (g.other_days_steps > 0) {
        report_clause(s, "it grew other days %zu time%s", g.other_days_steps,
                      g.other_days_steps == 1 ? "" : "s");
    }
}

/* peak / capacity: the run's capacity_factor, else computed from the document's capacity. */
static bool report_capacity_factor(const json_t *doc, const json_t *run, double *factor)
{
    const json_t *hot = json_object_get(run, "hot_partition");
    double peak = 0;
    double capacity = 0;
    if (report_number(hot, "capacity_factor", factor)) {
        return true;
    }
    if (!report_number(hot, "peak_eps", &peak) ||
        !report_number(doc, "shard_capacity_eps", &capacity) || capacity <= 0) {
        return false;
    }
    *factor = peak / capacity;
    return true;
}

static void report_peak_clause(struct report_sentence *s, const json_t *doc, const json_t *run,
                               bool first)
{
    const json_t *hot = json_object_get(run, "hot_partition");
    const char *key = report_string(hot, "key");
    double peak = 0;
    double factor = 0;
    if (!report_number(hot, "peak_eps", &peak)) {
        return;
    }
    char code[REPORT_TEXT_SIZE] = "";
    char cells[3][REPORT_NUMBER_SIZE];
    char factor_text[2 * REPORT_CELL_SIZE] = "";
    if (key != NULL) {
        report_quote(key, REPORT_QUOTE_CODE, code);
    }
    double capacity = 0;
    if (report_capacity_factor(doc, run, &factor)) {
        report_number_text(factor, 2, cells[1]);
        if (first && report_number(doc, "shard_capacity_eps", &capacity)) {
            snprintf(factor_text, sizeof(factor_text), ", %sx the shard capacity of %s/s", cells[1],
                     report_number_text(capacity, 0, cells[2]));
        } else {
            snprintf(factor_text, sizeof(factor_text), " (%sx capacity)", cells[1]);
        }
    }
    report_clause(s, "its hottest partition%s%s%s peaked at %s events/s%s", key ? ", `" : "", code,
                  key ? "`," : "", report_number_text(peak, 0, cells[0]), factor_text);
}

static void report_throttle_clause(struct report_sentence *s, const json_t *run,
                                   const json_t *first_run)
{
    double over = 0;
    double throttled = 0;
    double first_throttled = 0;
    char cells[2][REPORT_NUMBER_SIZE];
    char name[REPORT_TEXT_SIZE];
    char quoted[REPORT_TEXT_SIZE];
    if (report_number(run, "over_capacity_seconds", &over)) {
        if (over > 0) {
            report_clause(s, "its partitions were over capacity for %s partition-seconds",
                          report_number_text(over, 0, cells[0]));
        } else {
            report_clause(s, "it never went over capacity");
        }
    }
    if (!report_number(run, "would_throttle_events", &throttled)) {
        return;
    }
    report_number_text(throttled, 0, cells[0]);
    if (throttled <= 0) {
        report_clause(s, "it would have throttled no event");
        return;
    }
    if (run == first_run || !report_number(first_run, "would_throttle_events", &first_throttled) ||
        first_throttled <= 0) {
        report_clause(s, "it would have throttled %s events", cells[0]);
        return;
    }
    report_quote(report_run_name(first_run, 0, "run", name), REPORT_QUOTE_MD, quoted);
    report_clause(s, "it would have throttled %s events, %s%% of what %s would have", cells[0],
                  report_percent_text(100 * throttled / first_throttled, cells[1]), quoted);
}

/* One sentence on run `index`: growth, hottest partition, time over capacity, throttling. */
static void report_md_reading_run(struct report_file *rf, const json_t *doc, size_t index)
{
    const json_t *runs = json_object_get(doc, "runs");
    const json_t *run = json_array_get(runs, index);
    char name[REPORT_TEXT_SIZE];
    char quoted[REPORT_TEXT_SIZE];
    report_printf(rf, "%s",
                  report_quote(report_run_name(run, index, "Run", name), REPORT_QUOTE_MD, quoted));
    struct report_sentence s = {.rf = rf};
    report_growth_clause(&s, run);
    report_peak_clause(&s, doc, run, index == 0);
    report_throttle_clause(&s, run, json_array_get(runs, 0));
    report_printf(rf, s.clause_count > 0 ? ".\n" : " reported none of these numbers.\n");
}

/* Whether every run stored what it produced; a mismatch in bold. */
static void report_md_integrity(struct report_file *rf, const json_t *runs)
{
    size_t known = 0;
    size_t mismatched = 0;
    for (size_t i = 0; i < json_array_size(runs); i++) {
        const json_t *run = json_array_get(runs, i);
        double produced = 0;
        double stored = 0;
        if (!report_number(run, "events_produced", &produced) ||
            !report_number(run, "events_stored", &stored)) {
            continue;
        }
        known++;
        if (produced == stored) {
            continue;
        }
        mismatched++;
        char name[REPORT_TEXT_SIZE];
        char quoted[REPORT_TEXT_SIZE];
        char cells[3][REPORT_NUMBER_SIZE];
        report_printf(rf, "**%s stored %s of the %s events it produced: %s %s.**\n",
                      report_quote(report_run_name(run, i, "Run", name), REPORT_QUOTE_MD, quoted),
                      report_number_text(stored, 0, cells[0]),
                      report_number_text(produced, 0, cells[1]),
                      report_number_text(stored < produced ? produced - stored : stored - produced,
                                         0, cells[2]),
                      stored < produced ? "missing" : "extra");
    }
    if (known > 0 && mismatched == 0) {
        report_printf(rf, "%s stored exactly the events it produced.\n",
                      known == 1 ? "The run" : "Every run");
    }
}

/* The range of lag p99 across runs. */
static void report_md_lag(struct report_file *rf, const json_t *runs)
{
    size_t low = SIZE_MAX;
    size_t high = SIZE_MAX;
    double low_ms = 0;
    double high_ms = 0;
    for (size_t i = 0; i < json_array_size(runs); i++) {
        double ms = 0;
        if (!report_number(json_array_get(runs, i), "lag_p99_ms", &ms)) {
            continue;
        }
        if (low == SIZE_MAX || ms < low_ms) {
            low = i;
            low_ms = ms;
        }
        if (high == SIZE_MAX || ms > high_ms) {
            high = i;
            high_ms = ms;
        }
    }
    if (low == SIZE_MAX) {
        return;
    }
    char cells[2][REPORT_NUMBER_SIZE];
    report_number_text(low_ms, 1, cells[0]);
    report_number_text(high_ms, 1, cells[1]);
    if (low == high || low_ms == high_ms) {
        report_printf(rf, "Ingest lag p99 was %s ms%s.\n", cells[0],
                      json_array_size(runs) > 1 ? " in every run that reported it" : "");
        return;
    }
    report_printf(rf, "Ingest lag p99 ranged from %s ms (run %zu) to %s ms (run %zu).\n", cells[0],
                  low + 1, cells[1], high + 1);
}

/* What makes a run's numbers suspect: a producer behind its schedule, failed queries. */
static void report_md_caveats(struct report_file *rf, const json_t *runs)
{
    for (size_t i = 0; i < json_array_size(runs); i++) {
        const json_t *run = json_array_get(runs, i);
        double behind_s = 0;
        double errors = 0;
        double queries = 0;
        char cells[2][REPORT_NUMBER_SIZE];
        if (report_number(run, "producer_behind_max_s", &behind_s) &&
            behind_s > REPORT_PRODUCER_BEHIND_NOTE_S) {
            report_printf(rf,
                          "In run %zu the producer fell up to %s s behind its schedule, so it "
                          "offered less than the asked rate.\n",
                          i + 1, report_number_text(behind_s, 1, cells[0]));
        }
        if (report_number(run, "query_errors", &errors) && errors > 0) {
            report_printf(rf, "In run %zu, %s of %s queries failed.\n", i + 1,
                          report_number_text(errors, 0, cells[0]),
                          report_number(run, "queries", &queries)
                              ? report_number_text(queries, 0, cells[1])
                              : "-");
        }
    }
}

static void report_md_reading(struct report_file *rf, const json_t *doc)
{
    const json_t *runs = json_object_get(doc, "runs");
    report_printf(rf, "## Reading\n\n");
    if (json_array_size(runs) == 0) {
        report_printf(rf, "The report holds no runs.\n\n");
        return;
    }
    for (size_t i = 0; i < json_array_size(runs); i++) {
        report_md_reading_run(rf, doc, i);
    }
    report_md_integrity(rf, runs);
    report_md_lag(rf, runs);
    report_md_caveats(rf, runs);
    report_printf(rf, "\n");
}

/* ---- report.md: the table ------------------------------------------------------------------ */

/* "600,000", or in bold with the difference when stored differs from produced. */
static const char *report_stored_cell(const json_t *run, char *dst)
{
    double produced = 0;
    double stored = 0;
    char cells[2][REPORT_NUMBER_SIZE];
    if (!report_number(run, "events_stored", &stored)) {
        return strcpy(dst, "-");
    }
    report_number_text(stored, 0, cells[0]);
    if (!report_number(run, "events_produced", &produced) || produced == stored) {
        return strcpy(dst, cells[0]);
    }
    report_number_text(stored < produced ? produced - stored : stored - produced, 0, cells[1]);
    snprintf(dst, REPORT_CELL_SIZE, "**%s MISMATCH: %s %s**", cells[0], cells[1],
             stored < produced ? "missing" : "extra");
    return dst;
}

/* "1,500 (0.9%)": would-throttle events and their share of the first run's. */
static const char *report_throttle_cell(const json_t *run, const json_t *first_run, char *dst)
{
    double throttled = 0;
    double first_throttled = 0;
    char cells[2][REPORT_NUMBER_SIZE];
    if (!report_number(run, "would_throttle_events", &throttled)) {
        return strcpy(dst, "-");
    }
    report_number_text(throttled, 0, cells[0]);
    if (throttled <= 0 || run == first_run ||
        !report_number(first_run, "would_throttle_events", &first_throttled) ||
        first_throttled <= 0) {
        return strcpy(dst, cells[0]);
    }
    snprintf(dst, REPORT_CELL_SIZE, "%s (%s%%)", cells[0],
             report_percent_text(100 * throttled / first_throttled, cells[1]));
    return dst;
}

/* "2026-01-21: 16": the hot day's final shard count. */
static const char *report_hot_day_shards_cell(const json_t *run, char *dst)
{
    const char *hot = report_string(run, "hot_day");
    double shards = 0;
    char cell[REPORT_NUMBER_SIZE];
    if (hot == NULL || !report_number(report_final_shards(run), hot, &shards)) {
        return strcpy(dst, "-");
    }
    snprintf(dst, REPORT_CELL_SIZE, "%.20s: %s", hot, report_number_text(shards, 0, cell));
    return dst;
}

static void report_md_table_row(struct report_file *rf, const json_t *doc, size_t index)
{
    const json_t *runs = json_object_get(doc, "runs");
    const json_t *run = json_array_get(runs, index);
    const json_t *hot = json_object_get(run, "hot_partition");
    const char *strategy = report_string(run, "strategy");
    const char *key = report_string(hot, "key");
    char text[2][REPORT_TEXT_SIZE];
    char c[13][REPORT_CELL_SIZE];
    char number[REPORT_NUMBER_SIZE];
    double factor = 0;
    if (report_capacity_factor(doc, run, &factor)) {
        snprintf(c[5], sizeof(c[5]), "%sx", report_number_text(factor, 2, number));
    } else {
        strcpy(c[5], "-");
    }
    report_printf(rf, "| %zu | %s | %s | %s | %s | ", index + 1,
                  strategy != NULL ? report_quote(strategy, REPORT_QUOTE_MD, text[0]) : "-",
                  report_cell(run, "events_produced", 0, c[0]), report_stored_cell(run, c[1]),
                  report_cell(run, "throughput_eps", 0, c[2]));
    if (key != NULL) {
        report_printf(rf, "`%s` | ", report_quote(key, REPORT_QUOTE_CODE, text[1]));
    } else {
        report_printf(rf, "- | ");
    }
    report_printf(rf, "%s | %s | %s | %s | %s | ", report_cell(hot, "peak_eps", 0, c[3]), c[5],
                  report_cell(run, "hot_day_skew", 2, c[6]),
                  report_cell(run, "over_capacity_seconds", 0, c[7]),
                  report_throttle_cell(run, json_array_get(runs, 0), c[8]));
    report_printf(rf, "%s | %s | %s | %s |\n", report_cell(run, "lag_p99_ms", 1, c[9]),
                  report_cell(run, "count_p99_us", 0, c[10]),
                  report_cell(run, "orders_p99_us", 0, c[11]),
                  report_hot_day_shards_cell(run, c[12]));
}

static void report_md_table(struct report_file *rf, const json_t *doc)
{
    const json_t *runs = json_object_get(doc, "runs");
    if (json_array_size(runs) == 0) {
        return;
    }
    report_printf(rf,
                  "## Runs side by side\n\n"
                  "| run | strategy | produced | stored | throughput/s | hot partition | "
                  "peak/s | x capacity | hot-day skew | over-capacity partition-s | would-throttle "
                  "(%% of run 1) | lag p99 ms | count p99 us | orders p99 us | hot-day "
                  "shards |\n"
                  "|--:|---|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|---|\n");
    for (size_t i = 0; i < json_array_size(runs); i++) {
        report_md_table_row(rf, doc, i);
    }
    report_printf(rf, "\n");
}

/* ---- report.md: each run ------------------------------------------------------------------- */

/* The numbers the table leaves out. */
static void report_md_run_details(struct report_file *rf, const json_t *run)
{
    char c[10][REPORT_NUMBER_SIZE];
    char text[REPORT_TEXT_SIZE];
    const char *key = report_string(run, "key");
    const json_t *overhead = json_object_get(run, "overhead");
    double share = 0;
    report_printf(rf, "Key %s; duration %s s; producer behind at most %s s; ",
                  key != NULL ? report_quote(key, REPORT_QUOTE_MD, text) : "-",
                  report_cell(run, "duration_s", 1, c[0]),
                  report_cell(run, "producer_behind_max_s", 2, c[1]));
    report_printf(rf, "lag max %s ms; GSI lag p99 %s ms; ", report_cell(run, "lag_max_ms", 1, c[2]),
                  report_cell(run, "gsi_lag_p99_ms", 1, c[3]));
    report_printf(rf, "count p50 %s us; orders p50 %s us; %s queries, %s failed",
                  report_cell(run, "count_p50_us", 0, c[4]),
                  report_cell(run, "orders_p50_us", 0, c[5]), report_cell(run, "queries", 0, c[6]),
                  report_cell(run, "query_errors", 0, c[7]));
    if (report_number(run, "kafka_hottest_share", &share)) {
        report_printf(rf, "; the hottest Kafka partition took %s%% of the writes",
                      report_percent_text(100 * share, c[8]));
    }
    if (report_number(overhead, "sampler_cpu_share", &share)) {
        report_printf(rf, "; the sampler used %s%% of a core",
                      report_percent_text(100 * share, c[9]));
    }
    if (json_is_true(json_object_get(run, "throttle_from_samples"))) {
        report_printf(rf, "; would-throttle is estimated from 1 s samples");
    }
    report_printf(rf, ".\n\n");
}

/* The days that ended with more than one shard (one shard is the default, not news). */
static void report_md_run_shards(struct report_file *rf, const json_t *run)
{
    const json_t *shards = report_final_shards(run);
    if (!json_is_object(shards)) {
        return;
    }
    size_t listed = 0;
    size_t single = 0;
    const char *day;
    const json_t *count;
    report_printf(rf, "Final shards:");
    json_object_foreach((json_t *)shards, day, count)
    {
        if (!json_is_number(count) || json_number_value(count) <= 1) {
            single++;
            continue;
        }
        if (listed++ >= LOADTEST_REPORT_LIST_MAX) {
            continue;
        }
        char text[REPORT_TEXT_SIZE];
        char cell[REPORT_NUMBER_SIZE];
        report_printf(rf, "%s %s: %s", listed == 1 ? "" : ",",
                      report_quote(day, REPORT_QUOTE_MD, text),
                      report_number_text(json_number_value(count), 0, cell));
    }
    if (listed > LOADTEST_REPORT_LIST_MAX) {
        report_printf(rf, " and %zu more days", listed - LOADTEST_REPORT_LIST_MAX);
    }
    if (single > 0) {
        report_printf(rf, "%s%zu day%s with one shard", listed > 0 ? "; " : " ", single,
                      single == 1 ? "" : "s");
    }
    report_printf(rf, "%s.\n\n", listed == 0 && single == 0 ? " none" : "");
}

static void report_md_run_growths(struct report_file *rf, const json_t *run)
{
    const json_t *growths = json_object_get(run, "growths");
    if (!json_is_array(growths)) {
        report_printf(rf, "Growths: not reported.\n\n");
        return;
    }
    if (json_array_size(growths) == 0) {
        report_printf(rf, "Growths: none.\n\n");
        return;
    }
    report_printf(rf, "| at s | day | from | to | reason |\n|--:|---|--:|--:|---|\n");
    for (size_t i = 0; i < json_array_size(growths) && i < LOADTEST_REPORT_LIST_MAX; i++) {
        const json_t *g = json_array_get(growths, i);
        const char *day = report_string(g, "day");
        const char *reason = report_string(g, "reason");
        char text[2][REPORT_TEXT_SIZE];
        char c[3][REPORT_NUMBER_SIZE];
        report_printf(rf, "| %s | %s | %s | %s | %s |\n", report_cell(g, "at_s", 1, c[0]),
                      day != NULL ? report_quote(day, REPORT_QUOTE_MD, text[0]) : "-",
                      report_cell(g, "from", 0, c[1]), report_cell(g, "to", 0, c[2]),
                      reason != NULL ? report_quote(reason, REPORT_QUOTE_MD, text[1]) : "-");
    }
    if (json_array_size(growths) > LOADTEST_REPORT_LIST_MAX) {
        report_printf(rf, "\n... and %zu more growths.\n",
                      json_array_size(growths) - LOADTEST_REPORT_LIST_MAX);
    }
    report_printf(rf, "\n");
}

static void report_md_run_warnings(struct report_file *rf, const json_t *run)
{
    const json_t *warnings = json_object_get(run, "warnings");
    if (json_array_size(warnings) == 0) {
        report_printf(rf, "Warnings: %s.\n\n", json_is_array(warnings) ? "none" : "not reported");
        return;
    }
    report_printf(rf, "Warnings:\n\n");
    for (size_t i = 0; i < json_array_size(warnings) && i < LOADTEST_REPORT_LIST_MAX; i++) {
        const char *warning = json_string_value(json_array_get(warnings, i));
        char text[REPORT_TEXT_SIZE];
        report_printf(rf, "- %s\n",
                      warning != NULL ? report_quote(warning, REPORT_QUOTE_MD, text) : "-");
    }
    if (json_array_size(warnings) > LOADTEST_REPORT_LIST_MAX) {
        report_printf(rf, "- ... and %zu more\n",
                      json_array_size(warnings) - LOADTEST_REPORT_LIST_MAX);
    }
    report_printf(rf, "\n");
}

static void report_md_runs(struct report_file *rf, const json_t *doc)
{
    const json_t *runs = json_object_get(doc, "runs");
    for (size_t i = 0; i < json_array_size(runs); i++) {
        const json_t *run = json_array_get(runs, i);
        char name[REPORT_TEXT_SIZE];
        char quoted[REPORT_TEXT_SIZE];
        report_printf(rf, "## %s\n\n",
                      report_quote(report_run_name(run, i, "Run", name), REPORT_QUOTE_MD, quoted));
        report_md_run_details(rf, run);
        report_md_run_shards(rf, run);
        report_md_run_growths(rf, run);
        report_md_run_warnings(rf, run);
    }
}

/* ---- report.md: the plots ------------------------------------------------------------------ */

static void report_md_plots(struct report_file *rf, const struct report_plots *p)
{
    report_printf(rf, "## Plots\n\n");
    if (p->gnuplot_missing) {
        report_printf(rf, "gnuplot is not installed, so no plot was drawn. Their data and "
                          "scripts are in plots/: with gnuplot installed, run "
                          "`cd plots && for f in *.gp; do gnuplot \"$f\"; done`.\n\n");
    }
    for (size_t i = 0; i < p->plot_count; i++) {
        const struct report_plot *plot = &p->plots[i];
        char caption[REPORT_TEXT_SIZE];
        report_quote(plot->caption, REPORT_QUOTE_MD, caption);
        switch (plot->state) {
        case REPORT_PLOT_DRAWN:
            report_printf(rf, "![%s](plots/%s.png)\n\n", caption, plot->name);
            break;
        case REPORT_PLOT_NO_GNUPLOT:
            report_printf(rf, "- %s: plots/%s.gp, not drawn\n\n", caption, plot->name);
            break;
        case REPORT_PLOT_FAILED:
            report_printf(rf, "- %s: **gnuplot failed**, see plots/%s.log\n\n", caption,
                          plot->name);
            break;
        case REPORT_PLOT_EMPTY: report_printf(rf, "- %s: no samples to plot\n\n", caption); break;
        }
    }
}

static int report_md_write(const char *out_dir, const json_t *doc, const struct report_plots *p)
{
    struct report_file rf;
    int rc = report_file_open(&rf, out_dir, "report.md");
    if (rc != 0) {
        return rc;
    }
    report_md_title(&rf, doc);
    report_md_setup(&rf, doc);
    report_md_reading(&rf, doc);
    report_md_table(&rf, doc);
    report_md_runs(&rf, doc);
    report_md_plots(&rf, p);
    return report_file_close(&rf);
}

int loadtest_report_render(const char *out_dir, const json_t *report, FILE *progress)
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
