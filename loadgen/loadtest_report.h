/*
 * Private to cli/: the human side of `dayshard loadtest`. Turns the document the load test
 * writes (OUT/report.json, parsed by the caller) into OUT/report.md and PNG plots drawn by
 * gnuplot under OUT/plots/, next to the data (NAME.dat) and script (NAME.gp) of each plot so a
 * user can edit and re-run one (`cd OUT/plots && gnuplot NAME.gp`).
 *
 * Plots: throughput.png, hottest-share.png, lag.png, latency.png (one line per run) and
 * heat-N.png for run N, counted from 1 as in the report's table. report.md embeds them by the
 * relative path plots/NAME.png. Called from the main thread of the CLI; it spawns gnuplot and
 * waits for it, so the caller must not have SIGCHLD ignored.
 */
#ifndef DS_CLI_LOADTEST_REPORT_H
#define DS_CLI_LOADTEST_REPORT_H

#include <stdio.h>

#include <jansson.h>

#include "common/common.h"

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
/* Growths and warnings listed per run in report.md; the rest is counted, not listed. */
#define LOADTEST_REPORT_LIST_MAX 64

/*
 * Writes out_dir/report.md and out_dir/plots/ from report (borrowed). A field missing from an
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
DS_MUST_USE int loadtest_report_render(const char *out_dir, const json_t *report, FILE *progress);

#endif /* DS_CLI_LOADTEST_REPORT_H */
