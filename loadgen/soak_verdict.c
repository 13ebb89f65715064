/*
 * The soak's samples and its growth rule (soak.h).
 *
 * The rule: a node with --retention-days N has written its steady state by stream day 2N
 * (N days kept, N more dropped and reclaimed). For each bounded resource the largest value in
 * a first window after that is compared with the largest in a last window at the end; the
 * resource grows when last > first x ratio + slack. With a restart every K >= N days, the
 * windows follow the restart cycles: the first is the cycle that starts at the first restart
 * at or after day 2N, the last runs from the last restart at least K days before the end to
 * the end, so both hold a node at the same ages since its start (a store that fills between
 * restarts and starts small after one, as the index's log, would otherwise be compared at its
 * young end in one window and its full cycle in the other: a 60-day soak at load 5 judged
 * days [10, 30), the end of one cycle and the young half of the next, at 43 MiB against 60 in
 * the last 20 days, while each cycle from day 20 on peaked at 60-68 MiB). Without restarts (or with
 * K < N) they are [2N, 3N) and the last N days. Maxima, not means or ends, so a sawtooth (a
 * seal, a compaction, a drop 30 s after retention) is judged by its peaks in both windows
 * alike; the ratio and slack absorb the noise of one peak more or less. The table below is
 * the one place the figures live; --help and docs/ARCHITECTURE.md quote it.
 *
 * Rejected: a fitted slope over the run (a few restarts or a burst of compaction bend it, and
 * its threshold has no unit an operator knows); the last sample against the first window's
 * (a sample taken just before a drop would fail a node that reclaims on time).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loadgen/soak.h"

#define SOAK_MIB (1024.0 * 1024.0)
/* Dropped days wait 30 s of wall time for readers before their files go: in compressed stream
 * time that is 30 s of feed, many days, and more of them the faster the feed runs, so the
 * node reports them apart and the disk rules leave them out (reported, not judged). */
#define SOAK_RETIRED "disk_bytes.retired"

/* Bytes get 1 MiB of slack so that a store of a few KiB (other, deadletters at no dead letters)
 * cannot fail on one file's block; counts of open files get the 64 of the done-when; what is
 * held gets a day more, since a sample can fall between a new day's start and the old one's
 * drop. */
static const struct soak_rule soak_rule_table[] = {
    {"disk_bytes", 1.25, SOAK_MIB, 0.0, SOAK_RETIRED},  /* the whole data directory */
    {"disk_bytes.", 1.25, SOAK_MIB, 0.0, SOAK_RETIRED}, /* each store */
    {"rss_bytes", 1.0, 12.0 * SOAK_MIB, 0.0, NULL},     /* VmRSS + 12 MiB */
    {"open_fds", 1.0, 64.0, 0.0, NULL},                 /* /proc/PID/fd + 64 */
    {"segment_fds", 1.0, 64.0, 0.0, NULL},              /* the writer's open segments + 64 */
    {"partitions_held", 1.25, 16.0, 0.0, NULL},      /* the writer's table + a new day's shards */
    {"days_held", 1.25, 1.0, 0.0, NULL},             /* the shard map's days + the day starting */
    {"ids_keydir_bytes", 1.25, SOAK_MIB, 0.0, NULL}, /* the orders-by-id keydir */
    {"ids_sealed_files", 1.0, 2.0, 1.0, NULL},       /* day files: + N + 2 */
};

size_t soak_rules(const struct soak_rule **out)
{
    *out = soak_rule_table;
    return DS_ARRAY_LEN(soak_rule_table);
}

int soak_samples_init(struct soak_samples *s)
{
    memset(s, 0, sizeof(*s));
    static const char *const fixed[] = {"t_s", "stream_day", "fed_day"};
    for (size_t i = 0; i < DS_ARRAY_LEN(fixed); i++) {
        if (soak_samples_series(s, fixed[i]) < 0) {
            soak_samples_deinit(s);
            return -ENOMEM;
        }
    }
    return 0;
}

void soak_samples_deinit(struct soak_samples *s)
{
    for (uint32_t i = 0; i < s->series_count; i++) {
        free(s->values[i]);
        s->values[i] = NULL;
    }
    s->series_count = 0;
}

int soak_samples_series(struct soak_samples *s, const char *name)
{
    ASSERT(strlen(name) < SOAK_NAME_BYTES);
    for (uint32_t i = 0; i < s->series_count; i++) {
        if (strcmp(s->names[i], name) == 0) {
            return (int)i;
        }
    }
    if (s->series_count == SOAK_SERIES_MAX) {
        return -ENOSPC;
    }
    double *v = malloc(SOAK_SAMPLES_MAX * sizeof(double));
    if (v == NULL) {
        return -ENOMEM;
    }
    for (uint32_t k = 0; k < SOAK_SAMPLES_MAX; k++) {
        v[k] = NAN;
    }
    uint32_t i = s->series_count++;
    snprintf(s->names[i], sizeof(s->names[i]), "%s", name);
    s->values[i] = v;
    return (int)i;
}

int soak_samples_begin(struct soak_samples *s)
{
    return s->count < SOAK_SAMPLES_MAX ? 0 : -ENOSPC;
}

int soak_samples_set(struct soak_samples *s, const char *name, double value)
{
    ASSERT(s->count < SOAK_SAMPLES_MAX);
    int i = soak_samples_series(s, name);
    if (i < 0) {
        return i;
    }
    s->values[i][s->count] = value;
    return 0;
}

int soak_samples_add(struct soak_samples *s, const char *name, double value)
{
    ASSERT(s->count < SOAK_SAMPLES_MAX);
    int i = soak_samples_series(s, name);
    if (i < 0) {
        return i;
    }
    double *v = &s->values[i][s->count];
    *v = isnan(*v) ? value : *v + value;
    return 0;
}

void soak_samples_end(struct soak_samples *s)
{
    ASSERT(s->count < SOAK_SAMPLES_MAX);
    s->count++;
}

double soak_window_max(const double *values, const double *stream_day, uint32_t count,
                       double day_from, double day_to)
{
    ASSERT(day_from <= day_to);
    double max = NAN;
    for (uint32_t i = 0; i < count; i++) {
        if (isnan(stream_day[i]) || stream_day[i] < day_from || stream_day[i] >= day_to ||
            isnan(values[i])) {
            continue;
        }
        max = isnan(max) || values[i] > max ? values[i] : max;
    }
    return max;
}

double soak_rule_limit(const struct soak_rule *rule, double first_max, uint32_t retention_days)
{
    ASSERT(rule->ratio >= 1.0);
    return first_max * rule->ratio + rule->slack +
           rule->slack_per_retention_day * (double)retention_days;
}

static bool soak_rule_names(const struct soak_rule *rule, const char *series)
{
    if (rule->apart != NULL && strcmp(series, rule->apart) == 0) {
        return false;
    }
    size_t len = strlen(rule->series);
    if (len > 0 && rule->series[len - 1] == '.') {
        return strncmp(series, rule->series, len) == 0 && series[len] != '\0';
    }
    return strcmp(series, rule->series) == 0;
}

/* The first restart at or after stream day 2N, with a restart every k days. */
static uint32_t soak_first_restart(uint32_t retention_days, uint32_t k)
{
    return (2u * retention_days + k - 1u) / k * k;
}

bool soak_windows_by_restart(uint32_t retention_days, uint32_t restart_every)
{
    return restart_every > 0 && restart_every >= retention_days;
}

uint32_t soak_windows_days_min(uint32_t retention_days, uint32_t restart_every)
{
    if (soak_windows_by_restart(retention_days, restart_every)) {
        return soak_first_restart(retention_days, restart_every) + 2u * restart_every;
    }
    return 4u * retention_days;
}

void soak_windows(uint32_t days, uint32_t retention_days, uint32_t restart_every,
                  struct soak_windows *out)
{
    ASSERT(days >= soak_windows_days_min(retention_days, restart_every));
    if (!soak_windows_by_restart(retention_days, restart_every)) {
        *out = (struct soak_windows){.first_from = 2u * retention_days,
                                     .first_to = 3u * retention_days,
                                     .last_from = days - retention_days,
                                     .last_to = days};
        return;
    }
    uint32_t k = restart_every;
    uint32_t first = soak_first_restart(retention_days, k);
    *out = (struct soak_windows){.first_from = first,
                                 .first_to = first + k,
                                 .last_from = (days - k) / k * k,
                                 .last_to = days};
}

static int soak_series_find(const struct soak_samples *s, const char *name)
{
    for (uint32_t i = 0; i < s->series_count; i++) {
        if (strcmp(s->names[i], name) == 0) {
            return (int)i;
        }
    }
    return -1;
}

size_t soak_verdicts(const struct soak_samples *s, const struct soak_windows *w,
                     uint32_t retention_days, struct soak_verdict *out, size_t capacity)
{
    ASSERT(w->first_to <= w->last_from);
    int day_index = -1;
    for (uint32_t i = 0; i < s->series_count; i++) {
        day_index = strcmp(s->names[i], "stream_day") == 0 ? (int)i : day_index;
    }
    ASSERT(day_index >= 0);
    const double *day = s->values[day_index];
    size_t count = 0;
    for (size_t r = 0; r < DS_ARRAY_LEN(soak_rule_table); r++) {
        const struct soak_rule *rule = &soak_rule_table[r];
        for (uint32_t i = 0; i < s->series_count && count < capacity; i++) {
            if (!soak_rule_names(rule, s->names[i])) {
                continue;
            }
            struct soak_verdict *v = &out[count++];
            *v = (struct soak_verdict){.rule = rule};
            snprintf(v->series, sizeof(v->series), "%s", s->names[i]);
            const double *values = s->values[i];
            double *less = NULL;
            int apart = rule->apart != NULL ? soak_series_find(s, rule->apart) : -1;
            if (apart >= 0 && rule->series[strlen(rule->series) - 1] != '.') {
                less = malloc(s->count * sizeof(*less));
                for (uint32_t k = 0; less != NULL && k < s->count; k++) {
                    double a = s->values[apart][k];
                    less[k] = values[k] - (isnan(a) ? 0.0 : a);
                }
                values = less != NULL ? less : values;
            }
            v->first_max = soak_window_max(values, day, s->count, w->first_from, w->first_to);
            v->last_max = soak_window_max(values, day, s->count, w->last_from, w->last_to);
            free(less);
            v->judged = !isnan(v->first_max) && !isnan(v->last_max);
            v->limit = v->judged ? soak_rule_limit(rule, v->first_max, retention_days) : NAN;
            v->grew = v->judged && v->last_max > v->limit;
        }
    }
    return count;
}
