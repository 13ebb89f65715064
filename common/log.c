/*
 * One-line logging to stderr. The threshold comes from DS_LOG, read on every call through
 * getenv (cheap, and no mutable global); each line is written with one write(2) so lines from
 * several threads never interleave. DS_LOG_FORMAT=json (set by `--log-format json` before any
 * thread starts) makes each line one JSON object for log collectors:
 * {"ts":"2026-12-02T09:00:00.123Z","level":"warn","msg":"..."}, the message escaped so that any
 * bytes give valid JSON (control characters as \uXXXX, invalid UTF-8 as U+FFFD).
 * Rejected: syslog, which a CLI user does not read; logfmt, which collectors parse less
 * uniformly than JSON and which has no standard escaping.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"

/* The formatted message before escaping; a JSON line holds it escaped (at most 6 bytes per
 * input byte, \u00XX) plus the timestamp and level around it. */
#define LOG_TEXT_BYTES_MAX 1024u
#define LOG_JSON_LINE_BYTES_MAX (6u * LOG_TEXT_BYTES_MAX + 96u)

static enum ds_log_level log_threshold(void)
{
    const char *env = getenv("DS_LOG");
    if (env == NULL) {
        return DS_LOG_WARN;
    }
    if (strcmp(env, "error") == 0) {
        return DS_LOG_ERROR;
    }
    if (strcmp(env, "info") == 0) {
        return DS_LOG_INFO;
    }
    if (strcmp(env, "debug") == 0) {
        return DS_LOG_DEBUG;
    }
    return DS_LOG_WARN;
}

static bool log_json(void)
{
    const char *env = getenv("DS_LOG_FORMAT");
    return env != NULL && strcmp(env, "json") == 0;
}

/* The length of the valid UTF-8 sequence at s (of n bytes), or 0 when it is not one
 * (overlong forms, surrogates and code points past U+10FFFF are not). */
static size_t utf8_sequence_length(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len = c > 0xf4 ? 0 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    if (len == 0 || len > n) {
        return 0;
    }
    unsigned char low = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
    unsigned char high = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
    if (s[1] < low || s[1] > high) {
        return 0;
    }
    for (size_t i = 2; i < len; i++) {
        if (s[i] < 0x80 || s[i] > 0xbf) {
            return 0;
        }
    }
    return len;
}

/* Appends text[0..n) to dst as the inside of a JSON string; dst has room for 6 bytes per input
 * byte. Returns the bytes appended. */
static size_t json_escape(const char *text, size_t n, char *dst)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)text;
    size_t out = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        const char *short_form = c == '"'    ? "\\\""
                                 : c == '\\' ? "\\\\"
                                 : c == '\n' ? "\\n"
                                 : c == '\r' ? "\\r"
                                 : c == '\t' ? "\\t"
                                             : NULL;
        if (short_form != NULL) {
            memcpy(dst + out, short_form, 2);
            out += 2;
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            memcpy(dst + out, "\\u00", 4);
            dst[out + 4] = hex[c >> 4];
            dst[out + 5] = hex[c & 0xf];
            out += 6;
            i++;
        } else if (c < 0x80) {
            dst[out++] = (char)c;
            i++;
        } else {
            size_t len = utf8_sequence_length(s + i, n - i);
            if (len == 0) {
                memcpy(dst + out, "\\ufffd", 6); /* one replacement per invalid byte */
                out += 6;
                i++;
            } else {
                memcpy(dst + out, s + i, len);
                out += len;
                i += len;
            }
        }
    }
    return out;
}

/* "2026-12-02T09:00:00.123Z" (24 bytes and a NUL) for the current real time. */
static void log_timestamp(char dst[32])
{
    int64_t ms = ds_clock_realtime_ms();
    int64_t seconds = ms / 1000;
    int32_t days = (int32_t)(seconds / 86400);
    int64_t of_day = seconds % 86400;
    char date[DS_DATE_TEXT_SIZE];
    ds_date_format(days, date);
    snprintf(dst, 32, "%sT%02d:%02d:%02d.%03dZ", date, (int)(of_day / 3600),
             (int)(of_day / 60 % 60), (int)(of_day % 60), (int)(ms % 1000));
}

static void log_write_json(const char *level, const char *text, size_t text_len)
{
    char line[LOG_JSON_LINE_BYTES_MAX];
    char ts[32];
    log_timestamp(ts);
    int head =
        snprintf(line, sizeof(line), "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"", ts, level);
    ASSERT(head > 0);
    ASSERT((size_t)head < 96u - 4u);
    ASSERT(text_len < LOG_TEXT_BYTES_MAX);
    size_t len = (size_t)head + json_escape(text, text_len, line + head);
    memcpy(line + len, "\"}\n", 3);
    len += 3;
    ASSERT(len <= sizeof(line));
    ssize_t ignored = write(STDERR_FILENO, line, len);
    (void)ignored;
}

void ds_log(enum ds_log_level level, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    if (level > log_threshold()) {
        return;
    }
    bool json = log_json();
    char line[LOG_TEXT_BYTES_MAX];
    int head = json ? 0 : snprintf(line, sizeof(line), "dayshard: %s: ", names[level]);
    ASSERT(head >= 0);
    va_list args;
    va_start(args, fmt);
    int body = vsnprintf(line + head, sizeof(line) - (size_t)head - 1, fmt, args);
    va_end(args);
    size_t len = (size_t)head + (body > 0 ? (size_t)body : 0);
    if (len > sizeof(line) - 2) {
        len = sizeof(line) - 2;
    }
    if (json) {
        log_write_json(names[level], line, len);
        return;
    }
    line[len++] = '\n';
    ssize_t ignored = write(STDERR_FILENO, line, len);
    (void)ignored;
}
