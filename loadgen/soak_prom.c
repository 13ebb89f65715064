/*
 * The Prometheus text exposition format as the soak reads a node's /metrics (soak.h): every
 * sample line as name{labels} value [timestamp], in general, so a metric the node adds or
 * renames needs no change here; what the soak keeps is decided by its table (soak_run.c).
 *
 * Invariants: nothing is copied or allocated; a sample points into the text. A label value is
 * unescaped (\\, \", \n) only when asked for. Rejected: a regex per wanted metric (a pass over
 * the text per metric, and labels containing '}' or ',' inside quotes would split wrongly).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "loadgen/soak.h"

static bool prom_name_char(char c, bool first)
{
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    return alpha || (!first && c >= '0' && c <= '9');
}

/* The end of a quoted label value starting after its opening quote, or NULL. */
static const char *prom_quoted_end(const char *p, const char *end)
{
    while (p < end && *p != '"') { /* bounded by end */
        p += *p == '\\' && p + 1 < end ? 2 : 1;
    }
    return p < end ? p : NULL;
}

/* The labels' closing brace for labels starting after '{', or NULL. */
static const char *prom_labels_end(const char *p, const char *end)
{
    while (p < end && *p != '}') { /* bounded by end */
        if (*p == '"') {
            p = prom_quoted_end(p + 1, end);
            if (p == NULL) {
                return NULL;
            }
        }
        p++;
    }
    return p < end ? p : NULL;
}

/* One non-comment line [p, end) into *out. Returns 0 or -DS_ECORRUPT. */
static int prom_line(const char *p, const char *end, struct soak_prom_sample *out)
{
    const char *name = p;
    while (p < end && prom_name_char(*p, p == name)) {
        p++;
    }
    if (p == name) {
        return -DS_ECORRUPT;
    }
    *out = (struct soak_prom_sample){.name = name, .name_len = (size_t)(p - name)};
    if (p < end && *p == '{') {
        const char *close = prom_labels_end(p + 1, end);
        if (close == NULL) {
            return -DS_ECORRUPT;
        }
        out->labels = p + 1;
        out->labels_len = (size_t)(close - p - 1);
        p = close + 1;
    }
    if (p == end || (*p != ' ' && *p != '\t')) {
        return -DS_ECORRUPT;
    }
    char value[64];
    while (p < end && (*p == ' ' || *p == '\t')) {
        p++;
    }
    size_t n = 0;
    while (p + n < end && p[n] != ' ' && p[n] != '\t' && n + 1 < sizeof(value)) {
        value[n] = p[n];
        n++;
    }
    value[n] = '\0';
    char *stop = NULL;
    out->value = strtod(value, &stop);
    return n > 0 && *stop == '\0' ? 0 : -DS_ECORRUPT;
}

int soak_prom_parse(const char *text, size_t len, soak_prom_fn fn, void *user)
{
    ASSERT(text != NULL || len == 0);
    ASSERT(fn != NULL);
    const char *p = text;
    const char *end = text + len;
    int samples = 0;
    for (uint32_t line = 1; p < end; line++) { /* one line a turn, bounded by len */
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = nl != NULL ? nl : end;
        const char *q = p;
        while (q < line_end && (*q == ' ' || *q == '\t')) {
            q++;
        }
        if (q < line_end && *q != '#') {
            struct soak_prom_sample sample;
            if (prom_line(q, line_end, &sample) != 0) {
                ds_log_error("soak: /metrics line %u is not name{labels} value: %.*s", line,
                             (int)(line_end - q < 120 ? line_end - q : 120), q);
                return -DS_ECORRUPT;
            }
            fn(&sample, user);
            samples++;
        }
        p = line_end + 1;
    }
    return samples;
}

/* Unescapes the quoted value [p, end) into dst. Returns its length or -ENOSPC. */
static int prom_unescape(const char *p, const char *end, char *dst, size_t cap)
{
    size_t n = 0;
    for (; p < end; p++) {
        char c = *p;
        if (c == '\\' && p + 1 < end) {
            p++;
            c = *p == 'n' ? '\n' : *p;
        }
        if (n + 1 >= cap) {
            return -ENOSPC;
        }
        dst[n++] = c;
    }
    dst[n] = '\0';
    return (int)n;
}

int soak_prom_label(const struct soak_prom_sample *sample, const char *key, char *dst,
                    size_t dst_capacity)
{
    ASSERT(dst_capacity > 0);
    const char *p = sample->labels;
    const char *end = p + sample->labels_len;
    size_t key_len = strlen(key);
    while (p < end) { /* one label a turn */
        while (p < end && (*p == ' ' || *p == ',')) {
            p++;
        }
        if (p == end) {
            break;
        }
        const char *name = p;
        while (p < end && prom_name_char(*p, p == name)) {
            p++;
        }
        if (p == name || p + 1 >= end || p[0] != '=' || p[1] != '"') {
            return -DS_ECORRUPT;
        }
        const char *close = prom_quoted_end(p + 2, end);
        if (close == NULL) {
            return -DS_ECORRUPT;
        }
        if ((size_t)(p - name) == key_len && memcmp(name, key, key_len) == 0) {
            return prom_unescape(p + 2, close, dst, dst_capacity);
        }
        p = close + 1;
    }
    return -ENOENT;
}
