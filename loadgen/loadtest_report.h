/*
 * Private to loadgen/: the human side of the load test. Turns the document the load test
 * writes (OUT/report.json, parsed by the caller) into OUT/report.md and PNG plots drawn by
 * gnuplot under OUT/plots/, next to the data (NAME.dat) and script (NAME.gp) of each plot so a
 * user can edit and re-run one (`cd OUT/plots && gnuplot NAME.gp`).
 *
 * Plots: throughput.png, hottest-share.png, lag.png, latency.png, e2e-latency.png (one line per
 * run) and heat-N.png for run N, counted from 1 as in the report's table. report.md embeds them by
 * the relative path plots/NAME.png. Called from the main thread of the CLI; it spawns gnuplot and
 * waits for it, so the caller must not have SIGCHLD ignored.
 */
#ifndef DS_LOADGEN_LOADTEST_REPORT_H
#define DS_LOADGEN_LOADTEST_REPORT_H

#include <stdio.h>

#include <jansson.h>

#include "common/common.h"
#include "loadgen/loadgen.h"

/* Runs in one document: a load test compares a handful of strategies; 32 leaves room for a
 * sweep while the table and the plots' legends stay readable. */
#define LOADTEST_REPORT_RUNS_MAX 32
/* Samples in a run's series (t_s): a day at one sample a second. */
#define LOADTEST_REPORT_SAMPLES_MAX 86400
/* Keys in a run's series.partitions: the load test keeps 48; a larger map from another writer
 * is still drawn (its hottest LOADTEST_REPORT_HEAT_ROWS_MAX) up to this many keys. */
#define LOADTEST_REPORT_PARTITIONS_MAX 4096
/* Rows of a heat map: at 15 px a row, 48 key labels fit in a 900 px image and stay legible. */
#define LOADTEST_REPORT_HEAT_ROWS_MAX 48
/* Significant digits of a real in report.json (ample for every figure it holds); report.html
 * inlines the document with the same, so the page drawn after the runs and the one drawn again
 * from report.json are the same bytes. */
#define LOADTEST_REPORT_REAL_DIGITS 6
/* Seconds of a run's heat_history report.html draws: the nodes' history window. */
#define LOADTEST_REPORT_HEAT_COLUMNS_MAX 300
/* Growths and warnings listed per run in report.md; the rest is counted, not listed. */
#define LOADTEST_REPORT_LIST_MAX 64

/*
 * Writes out_dir/report.md, out_dir/report.html (when assets is not NULL; borrowed) and
 * out_dir/plots/ from report (borrowed). A field missing from an
 * older document, null or of another type renders as "-" (a gap in a plot). progress may be
 * NULL; else one line per PNG written goes to it (informational: its errors are ignored).
 * Without gnuplot on PATH, report.md is written without images, says so, a warning goes to
 * stderr and the result is 0.
 *
 * Returns 0; -DS_EUSAGE when the document has no "runs" array, a run that is not an object, or
 * exceeds a limit above; -EIO when gnuplot failed on a plot (report.md is still written and
 * names the plot's log); another negated errno when a file could not be written (ENOSPC...).
 * Every failure is logged here with the file it concerns; the caller maps the code to an exit
 * status and prints nothing more.
 */
DS_MUST_USE int loadtest_report_render(const char *out_dir, const json_t *report,
                                       const struct loadgen_report_assets *assets, FILE *progress);

/* ---- inside the report: what its files share (loadtest_report.c renders; loadtest_text.c
 * writes files and turns the document's values into text; loadtest_plot.c draws the plots with
 * gnuplot; loadtest_markdown.c writes report.md) ---------------------------------------------- */

/* A number as text (at most 27 bytes: 15 digits, 4 separators, sign, point, 6 decimals); a
 * table cell made of numbers and words; text from the document (keys, strategies, reasons). */
#define REPORT_NUMBER_SIZE 32
#define REPORT_CELL_SIZE 128
#define REPORT_TEXT_SIZE 1024
/* A plot's file stem ("hottest-share", "heat-32"). */
#define REPORT_NAME_SIZE 32
#define REPORT_PLOTS_MAX (LOADTEST_REPORT_RUNS_MAX + 5)
/* Image width, and the height of one line plot (the default of the brief: 1000x500). */
#define REPORT_WIDTH_PX 1000
#define REPORT_HEIGHT_PX 500
/* A producer further behind its schedule than this did not offer the asked rate: say so. */
#define REPORT_PRODUCER_BEHIND_NOTE_S 1.0

/* A file of the report being written. */
struct report_file {
    FILE *f;
    int err; /* the first failure (negated errno); writes after it are skipped */
    char path[DS_PATH_MAX];
};

/* Opens dir/name for writing. Returns 0 or a negated errno, logged with the path. */
int report_file_open(struct report_file *rf, const char *dir, const char *name);

void report_printf(struct report_file *rf, const char *fmt, ...) DS_PRINTF(2, 3);

/* Flushes and closes rf. Returns 0 or its first failure, logged once with the path. */
int report_file_close(struct report_file *rf);

bool report_number(const json_t *o, const char *key, double *out);

const char *report_string(const json_t *o, const char *key);

/* x with `decimals` decimals and thousands separators ("12,345.6"); dst has REPORT_NUMBER_SIZE
 * bytes. Magnitudes beyond 1e15 (no longer exact, never a real count) read as "1.2e+16". */
const char *report_number_text(double x, int decimals, char *dst);

/* o's number `key` as report_number_text, or "-". */
const char *report_cell(const json_t *o, const char *key, int decimals, char *dst);

/* A percentage with one decimal; "<0.1" for a positive share that would round to zero. */
const char *report_percent_text(double percent, char *dst);

/* Where a text from the document goes (report_quote). */
enum report_quote {
    REPORT_QUOTE_PLAIN,   /* control bytes only: a comment line of a data file */
    REPORT_QUOTE_MD,      /* Markdown text: markup punctuation escaped with '\' */
    REPORT_QUOTE_CODE,    /* inside a Markdown code span in a table: no '`', '|' escaped */
    REPORT_QUOTE_GNUPLOT, /* inside a gnuplot single-quoted string: '' for ' */
};

/* s ready for where it goes (see enum report_quote); control bytes become '?' and a text too
 * long for dst ends in "..." at a character boundary. dst has REPORT_TEXT_SIZE bytes. */
const char *report_quote(const char *s, enum report_quote how, char *dst);

/* "run N (strategy)" or "run N" for run `index` (0-based), with `word` for "run" (a sentence
 * starts with "Run"). Raw: quote it for where it goes. dst has REPORT_TEXT_SIZE bytes. */
const char *report_run_name(const json_t *run, size_t index, const char *word, char *dst);

/* The run's final shards per day: "final_shards", or "shards" when it is an object (older
 * documents used that name, which now holds the strategy's shard mode). */
const json_t *report_final_shards(const json_t *run);

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

struct report_heat_row {
    const char *key;
    const json_t *rates;
    double total; /* events over the run, the order of the rows */
};

/* Runs gnuplot on dir/NAME.gp (working directory dir) and waits; the load test's plots and the
 * soak's share it. Returns 0; -ENOENT when gnuplot is not installed (not logged: the caller says
 * it once); -EIO when gnuplot failed, or another negated errno when it could not be run (both
 * logged, naming the script and its log, dir/NAME.log). */
DS_MUST_USE int report_gnuplot(const char *dir, const char *name);

/* Every plot: the line plots, then a heat map per run. Returns 0 or a negated errno from
 * writing (logged); gnuplot's own failures are counted in p, not returned. */
int report_plots_draw(struct report_plots *p, const json_t *doc, struct report_heat_row *rows);

int report_md_write(const char *out_dir, const json_t *doc, const struct report_plots *p);

/* Writes out_dir/report.html (loadtest_html.c): one file, the console's script and style
 * sheet and the report's script inlined, the document inlined as JSON in a
 * <script type="application/json"> element (each run's series.partitions left out: the heat
 * map draws heat_history). Returns 0 or a negated errno (logged with the path); -ENOMEM. */
int report_html_write(const char *out_dir, const json_t *doc,
                      const struct loadgen_report_assets *assets);

#endif /* DS_LOADGEN_LOADTEST_REPORT_H */
