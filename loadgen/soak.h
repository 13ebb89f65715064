/*
 * Private to loadgen/: the soak (`dayshard soak`, loadgen.h). soak_run.c drives one node over
 * the compressed stream and samples it; soak_prom.c reads the node's Prometheus text;
 * soak_verdict.c keeps the samples and judges growth; soak_report.c writes report.json, the
 * plots and the summary (the last two from report.json alone, so --render-only draws the same).
 * Everything runs on the CLI's main thread except the producer (a thread of soak_run.c).
 */
#ifndef DS_LOADGEN_SOAK_H
#define DS_LOADGEN_SOAK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "loadgen/loadgen.h"

/* Series one soak keeps: the fixed ones, about 25 metrics and a few stores. */
#define SOAK_SERIES_MAX 64u
/* A series' name ("disk_bytes.deadletters"). */
#define SOAK_NAME_BYTES 48u
/* Samples, one a second: ten hours is past any soak this machine's CI or a laptop runs (the
 * 10M-order run takes minutes); 36,000 x 64 series of doubles is 18 MiB. */
#define SOAK_SAMPLES_MAX 36000u
/* Restarts one soak records: a restart every stream day over a year. */
#define SOAK_RESTARTS_MAX 366u
/* Resources one verdict list holds (every rule over every store). */
#define SOAK_VERDICTS_MAX SOAK_SERIES_MAX
#define SOAK_REPORT_SCHEMA 1

/* ---- Prometheus text (soak_prom.c) ------------------------------------------------------ */

/* One sample line, pointing into the text. labels is what is between the braces (may be
 * empty), unparsed; soak_prom_label reads one. */
struct soak_prom_sample {
    const char *name;
    size_t name_len;
    const char *labels;
    size_t labels_len;
    double value;
};
typedef void (*soak_prom_fn)(const struct soak_prom_sample *sample, void *user);

/* Calls fn for every sample line of the exposition text (comments and blank lines skipped; an
 * optional timestamp after the value ignored; values as strtod reads them, +Inf and NaN
 * included). Returns the number of samples, or -DS_ECORRUPT at the first malformed line
 * (logged with its number; fn was called for the lines before it). */
DS_MUST_USE int soak_prom_parse(const char *text, size_t len, soak_prom_fn fn, void *user);
/* The value of label key of a sample, unescaped, into dst (NUL-terminated). Returns its
 * length, -ENOENT when the sample has no such label, -ENOSPC when dst is too small,
 * -DS_ECORRUPT when the labels are malformed. */
DS_MUST_USE int soak_prom_label(const struct soak_prom_sample *sample, const char *key, char *dst,
                                size_t dst_capacity);

/* ---- samples and the growth verdict (soak_verdict.c) ------------------------------------ */

/* Series by name, one value a sample (NAN: not known at that sample). The fixed series:
 * "t_s" (seconds since the start), "stream_day" (the node's stream day, 0 = the first day),
 * "fed_day" (lines acknowledged, as days of the stream). */
struct soak_samples {
    uint32_t count;
    uint32_t series_count;
    char names[SOAK_SERIES_MAX][SOAK_NAME_BYTES];
    double *values[SOAK_SERIES_MAX]; /* SOAK_SAMPLES_MAX each */
};

DS_MUST_USE int soak_samples_init(struct soak_samples *s);
void soak_samples_deinit(struct soak_samples *s);
/* The index of series name, added (all NAN so far) when new. Returns it, or -ENOSPC when
 * SOAK_SERIES_MAX series are kept already. */
DS_MUST_USE int soak_samples_series(struct soak_samples *s, const char *name);
/* Starts sample number s->count (every series NAN); returns -ENOSPC when full. */
DS_MUST_USE int soak_samples_begin(struct soak_samples *s);
/* Sets (add: adds to, NAN counting as 0) series name at the sample begun. Returns 0 or
 * -ENOSPC (no room for a new series). */
DS_MUST_USE int soak_samples_set(struct soak_samples *s, const char *name, double value);
DS_MUST_USE int soak_samples_add(struct soak_samples *s, const char *name, double value);
/* Ends the sample begun. */
void soak_samples_end(struct soak_samples *s);

/* How one bounded resource may differ between the two windows: it grows when
 * last > first x ratio + slack (+ retention_days x slack_per_retention_day). */
struct soak_rule {
    const char *series; /* a series name, or a prefix ending in '.' for a family */
    double ratio;
    double slack;
    double slack_per_retention_day;
    const char *apart; /* a series the rule leaves out: not judged as one of a family, and
                          subtracted from a single series (NULL: none) */
};

struct soak_verdict {
    char series[SOAK_NAME_BYTES];
    const struct soak_rule *rule;
    bool judged; /* samples in both windows */
    double first_max;
    double last_max;
    double limit; /* first_max x ratio + slack */
    bool grew;
};

/* The rules (the table of the growth rule, in one place). Returns their count. */
size_t soak_rules(const struct soak_rule **out);
/* The largest value of values over the samples whose stream day is in [day_from, day_to), or
 * NAN when none there has one. */
double soak_window_max(const double *values, const double *stream_day, uint32_t count,
                       double day_from, double day_to);
/* The limit of a rule for a first window's figure. */
double soak_rule_limit(const struct soak_rule *rule, double first_max, uint32_t retention_days);
/* The growth rule's windows of stream days, [first_from, first_to) and [last_from, last_to),
 * the last ending at days. With a restart every K >= N days both follow the restart cycles (a
 * restart drops what a node warmed up, so a window must hold the same ages since a start as
 * the other): the first is [R, R + K), R the first restart at or after day 2N; the last starts
 * at the last restart at least K days before the end. Else [2N, 3N) and the last N days. */
struct soak_windows {
    uint32_t first_from, first_to;
    uint32_t last_from, last_to;
};
void soak_windows(uint32_t days, uint32_t retention_days, uint32_t restart_every,
                  struct soak_windows *out);
/* Whether the windows follow the restart cycles: restarts at least N days apart. */
bool soak_windows_by_restart(uint32_t retention_days, uint32_t restart_every);
/* The fewest stream days the windows need: R + 2K with restarts (K >= N), else 4N. */
uint32_t soak_windows_days_min(uint32_t retention_days, uint32_t restart_every);
/* A verdict for every series a rule names, over the windows w. Returns how many (at most
 * capacity). */
size_t soak_verdicts(const struct soak_samples *s, const struct soak_windows *w,
                     uint32_t retention_days, struct soak_verdict *out, size_t capacity);

/* ---- the report (soak_report.c) --------------------------------------------------------- */

struct soak_restart {
    double stream_day;
    double at_s;
    double stop_ms;
    double ready_ms;     /* exec to /readyz 200 */
    double caught_up_ms; /* exec to everything acknowledged stored */
    int exit_status;     /* as waitpid's */
};

struct soak_count_day {
    int32_t day;
    int64_t orders, orders_ref;
    int64_t paid, paid_ref;
};

/* What a run measured, besides the samples. */
struct soak_outcome {
    double seconds;
    uint64_t lines;       /* in the stream */
    uint64_t lines_acked; /* by the broker */
    double feed_s;        /* the producer's time sending, holds excluded */
    double paused_s;
    double feed_eps;     /* lines acknowledged / seconds the producer was not paused */
    double behind_max_s; /* the producer behind its own schedule */
    uint32_t restart_count;
    struct soak_restart restarts[SOAK_RESTARTS_MAX];
    uint32_t count_day_count;
    struct soak_count_day count_days[LOADGEN_SOAK_RETENTION_DAYS_MAX];
    bool counts_checked;
    char
        failure[DS_PATH_MAX + 256]; /* why the soak failed apart from growth and counts ("" none) */
};

/* The report.json document of a run (new reference). */
json_t *soak_report_build(const struct loadgen_soak_config *cfg, const struct soak_windows *w,
                          const struct soak_samples *s, const struct soak_verdict *verdicts,
                          size_t verdict_count, const struct soak_outcome *out);
/* Writes doc to out_dir/report.json (atomically). Returns 0 or a negated errno (printed). */
DS_MUST_USE int soak_report_write(const char *out_dir, const json_t *doc);
/* Draws the PNGs in out_dir from doc and prints the summary to stdout. Returns 0, or a negative
 * code (printed) when doc is not a soak report or a file could not be written; missing
 * gnuplot is a warning. */
DS_MUST_USE int soak_report_render(const char *out_dir, const json_t *doc);

/* ---- the run (soak_run.c, soak_count.c, soak_config.c) --------------------------------- */

/* Prints "dayshard soak: <message>" to stderr; returns code. */
int soak_error(int code, const char *fmt, ...) DS_PRINTF(2, 3);
/* The soak's stream as a generator config (rate_eps = cfg->rate). */
void soak_workload(const struct loadgen_soak_config *cfg, struct loadgen_workload_config *w);
/* Runs the soak; fills samples and out. Returns 0, 1 (out->failure says why) or a negative
 * code (printed). */
DS_MUST_USE int soak_run(const struct loadgen_soak_config *cfg, struct soak_samples *samples,
                         struct soak_outcome *out);
/* Fills out->count_days: the node's (at node_url) and the reference's counts of the last N
 * days. Returns 0 or a negative code (printed); a mismatch is not an error here. */
DS_MUST_USE int soak_count_check(const struct loadgen_soak_config *cfg, struct soak_outcome *out,
                                 const char *node_url);

#endif /* DS_LOADGEN_SOAK_H */
