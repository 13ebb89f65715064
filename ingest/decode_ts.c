/*
 * ingest/decode_ts.c: the RFC 3339 timestamps of the JSON decoder (decode.h says what is
 * accepted), into epoch milliseconds.
 *
 * Invariants: the text is already unescaped and its JSON validity checked (decode.c); the
 * answer is INGEST_OK with the milliseconds, INGEST_BAD_TS for text that is no RFC 3339
 * date-time (a date that does not exist included), or INGEST_TS_RANGE outside
 * DS_TS_MS_MIN..DS_TS_MS_MAX. A fraction is truncated to milliseconds.
 *
 * Apart from decode.c because it needs none of the scanner's state: one call per event whose
 * ts is a string, which costs nothing measurable against the rest of the decode
 * (bench_decode).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ingest/decode.h"

static inline bool ts_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Two decimal digits at s, or -1. */
static inline int32_t two_digits(const char *s)
{
    if (!ts_is_digit(s[0]) || !ts_is_digit(s[1])) {
        return -1;
    }
    return (s[0] - '0') * 10 + (s[1] - '0');
}

/* Milliseconds of the optional fraction at s[*i] ('.' then digits, truncated to ms). */
static bool ts_fraction(const char *s, size_t n, size_t *i, int64_t *ms)
{
    *ms = 0;
    if (*i >= n || s[*i] != '.') {
        return true;
    }
    size_t first = ++*i;
    int64_t scale = 100;
    while (*i < n && ts_is_digit(s[*i])) {
        *ms += (s[*i] - '0') * scale;
        scale /= 10;
        ++*i;
    }
    return *i > first;
}

/* The zone at s[i..n): Z, z or +HH:MM / -HH:MM, as signed minutes east of UTC. */
static bool ts_zone(const char *s, size_t n, size_t i, int64_t *minutes)
{
    if (i + 1 == n && (s[i] == 'Z' || s[i] == 'z')) {
        *minutes = 0;
        return true;
    }
    if (i + 6 != n || (s[i] != '+' && s[i] != '-') || s[i + 3] != ':') {
        return false;
    }
    int32_t hours = two_digits(s + i + 1);
    int32_t mins = two_digits(s + i + 4);
    if (hours < 0 || hours > 23 || mins < 0 || mins > 59) {
        return false;
    }
    *minutes = (s[i] == '-' ? -1 : 1) * (int64_t)(hours * 60 + mins);
    return true;
}

enum ingest_reason decode_ts_parse(const char *s, size_t n, int64_t *ts_ms)
{
    if (n < 20 || s[4] != '-' || s[7] != '-' || s[13] != ':' || s[16] != ':' ||
        (s[10] != 'T' && s[10] != 't' && s[10] != ' ')) {
        return INGEST_BAD_TS;
    }
    int32_t century = two_digits(s);
    int32_t year_low = two_digits(s + 2);
    int32_t month = two_digits(s + 5);
    int32_t day = two_digits(s + 8);
    int32_t hour = two_digits(s + 11);
    int32_t minute = two_digits(s + 14);
    int32_t second = two_digits(s + 17);
    if (century < 0 || year_low < 0 || month < 0 || day < 0 || hour < 0 || hour > 23 ||
        minute < 0 || minute > 59 || second < 0 || second > 59) {
        return INGEST_BAD_TS;
    }
    int32_t year = century * 100 + year_low;
    if (!ds_date_valid(year, (uint32_t)month, (uint32_t)day)) {
        return INGEST_BAD_TS;
    }
    size_t i = 19;
    int64_t fraction_ms = 0;
    int64_t zone_minutes = 0;
    if (!ts_fraction(s, n, &i, &fraction_ms) || !ts_zone(s, n, i, &zone_minutes)) {
        return INGEST_BAD_TS;
    }
    int64_t days = ds_days_from_civil(year, (uint32_t)month, (uint32_t)day);
    int64_t ms = days * DS_DAY_MS + hour * 3600000LL + minute * 60000LL + second * 1000LL +
                 fraction_ms - zone_minutes * 60000LL;
    if (ms < DS_TS_MS_MIN || ms > DS_TS_MS_MAX) {
        return INGEST_TS_RANGE;
    }
    *ts_ms = ms;
    return INGEST_OK;
}
