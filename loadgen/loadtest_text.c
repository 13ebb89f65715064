/*
 * The load test's report (loadtest_report.h): its files, where every write is checked and the
 * first failure kept with its path, and the document's values as text: numbers with
 * separators, table cells, quoting for Markdown, code spans and gnuplot strings. Shared by the
 * plots (loadtest_plot.c) and report.md (loadtest_markdown.c), so that both read a missing,
 * null or mistyped field the same way: "-" in text, a gap in a plot.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>

#include <jansson.h>

#include "loadgen/loadtest_report.h"

/* ---- files: every write checked, the first failure kept with its path ----------------------- */

/* Opens dir/name for writing. Returns 0 or a negated errno, logged with the path. */
int report_file_open(struct report_file *rf, const char *dir, const char *name)
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

void report_printf(struct report_file *rf, const char *fmt, ...)
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
int report_file_close(struct report_file *rf)
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

bool report_number(const json_t *o, const char *key, double *out)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_number(v)) {
        return false;
    }
    *out = json_number_value(v);
    return true;
}

const char *report_string(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* x with `decimals` decimals and thousands separators ("12,345.6"); dst has REPORT_NUMBER_SIZE
 * bytes. Magnitudes beyond 1e15 (no longer exact, never a real count) read as "1.2e+16". */
const char *report_number_text(double x, int decimals, char *dst)
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
const char *report_cell(const json_t *o, const char *key, int decimals, char *dst)
{
    double x = 0;
    if (!report_number(o, key, &x)) {
        snprintf(dst, REPORT_NUMBER_SIZE, "-");
        return dst;
    }
    return report_number_text(x, decimals, dst);
}

/* A percentage with one decimal; "<0.1" for a positive share that would round to zero. */
const char *report_percent_text(double percent, char *dst)
{
    if (percent > 0 && percent < 0.05) {
        snprintf(dst, REPORT_NUMBER_SIZE, "<0.1");
        return dst;
    }
    return report_number_text(percent, 1, dst);
}

/* s ready for where it goes (see enum report_quote); control bytes become '?' and a text too
 * long for dst ends in "..." at a character boundary. dst has REPORT_TEXT_SIZE bytes. */
const char *report_quote(const char *s, enum report_quote how, char *dst)
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
const char *report_run_name(const json_t *run, size_t index, const char *word, char *dst)
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
const json_t *report_final_shards(const json_t *run)
{
    const json_t *shards = json_object_get(run, "final_shards");
    return json_is_object(shards) ? shards : json_object_get(run, "shards");
}
