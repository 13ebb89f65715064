/*
 * ingest/event_line.c: the canonical JSON line of an event (ingest_event_format_json), the one
 * text that decode.c decodes back to the identical event: the dead-letter file and the
 * workload generator write it, and the decode fuzz target checks the round trip.
 *
 * Invariants: the line is built in a stack buffer sized for the worst event
 * (FORMAT_LINE_BYTES_WORST, checked against INGEST_JSON_LINE_BYTES_MAX at compile time) and
 * copied out only whole, so a short dst is left untouched; strings keep their UTF-8 as is
 * (validated by the decoder's own rule) and escape only quote, backslash and controls; amounts
 * are the shortest exact decimal; timestamps always carry milliseconds.
 *
 * Apart from decode.c because it is the inverse of the decoder and shares only the UTF-8 rule
 * (decode_utf8_sequence_len) with it; nothing on the decode path calls it.
 */
#include <errno.h>
#include <string.h>

#include "ingest/decode.h"
#include "ingest/ingest.h"

/* The longest line ingest_event_format_json can write: two 64-byte string ids and a 32-byte
 * status whose every byte needs a six-byte \u00XX escape, the timestamp as 24 characters, the
 * most negative amount (21 characters) and a 19-digit version, plus keys, quotes and
 * punctuation. */
#define FORMAT_LINE_BYTES_WORST                                                                    \
    (sizeof("{\"order_id\":\"\",\"customer_id\":\"\",\"ts\":\"\",\"status\":\"\",\"amount\":}") -  \
     1 + 2 * 6 * DS_ID_BYTES_MAX + 6 * DS_STATUS_BYTES_MAX + 24 + 21 + sizeof(",\"version\":") -   \
     1 + 19)
_Static_assert(FORMAT_LINE_BYTES_WORST <= INGEST_JSON_LINE_BYTES_MAX, "worst line fits");

struct line {
    char *text;
    size_t len;
};

static void line_bytes(struct line *line, const char *bytes, size_t n)
{
    memcpy(line->text + line->len, bytes, n);
    line->len += n;
}

/* Unsigned decimal of value, at least min_digits digits (zero padded). */
static void line_decimal(struct line *line, uint64_t value, size_t min_digits)
{
    char digits[24];
    size_t count = 0;
    do {
        digits[count++] = (char)('0' + value % 10);
        value /= 10;
    } while (value > 0 || count < min_digits);
    while (count > 0) {
        line->text[line->len++] = digits[--count];
    }
}

/* A JSON string of the given bytes (valid UTF-8 without NUL, asserted): quote, backslash and
 * control characters escaped, everything else verbatim. */
static void line_string(struct line *line, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    line->text[line->len++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        ASSERT(c != 0);
        if (c >= 0x80) {
            size_t seq = decode_utf8_sequence_len((const unsigned char *)s + i,
                                                  (const unsigned char *)s + n);
            ASSERT(seq != 0);
            line_bytes(line, s + i, seq);
            i += seq - 1;
        } else if (c == '"' || c == '\\') {
            char escaped[2] = {'\\', (char)c};
            line_bytes(line, escaped, 2);
        } else if (c < 0x20) {
            char escaped[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            line_bytes(line, escaped, 6);
        } else {
            line->text[line->len++] = (char)c;
        }
    }
    line->text[line->len++] = '"';
}

static void line_id(struct line *line, const struct ds_id *id)
{
    if (id->is_string) {
        ASSERT(id->len >= 1 && id->len <= DS_ID_BYTES_MAX);
        line_string(line, id->text, id->len);
    } else {
        ASSERT(id->value >= 1);
        line_decimal(line, (uint64_t)id->value, 1);
    }
}

/* "YYYY-MM-DDTHH:MM:SS.mmmZ", always with milliseconds so the value is exact. */
static void line_ts(struct line *line, int64_t ts_ms)
{
    ASSERT(ts_ms >= DS_TS_MS_MIN && ts_ms <= DS_TS_MS_MAX);
    char date[DS_DATE_TEXT_SIZE];
    int64_t ms_of_day = ts_ms % DS_DAY_MS;
    ds_date_format((int32_t)(ts_ms / DS_DAY_MS), date);
    line_bytes(line, "\"", 1);
    line_bytes(line, date, 10);
    line_bytes(line, "T", 1);
    line_decimal(line, (uint64_t)(ms_of_day / 3600000), 2);
    line_bytes(line, ":", 1);
    line_decimal(line, (uint64_t)(ms_of_day / 60000 % 60), 2);
    line_bytes(line, ":", 1);
    line_decimal(line, (uint64_t)(ms_of_day / 1000 % 60), 2);
    line_bytes(line, ".", 1);
    line_decimal(line, (uint64_t)(ms_of_day % 1000), 3);
    line_bytes(line, "Z\"", 2);
}

/* The shortest exact decimal: 99900 units -> 9.99, 1000000 -> 100, -22500 -> -2.25. */
static void line_amount(struct line *line, int64_t units)
{
    ASSERT(units != INT64_MIN);
    uint64_t magnitude = units < 0 ? (uint64_t)-units : (uint64_t)units;
    uint64_t fraction = magnitude % DS_AMOUNT_SCALE;
    size_t fraction_digits = 4;
    if (units < 0) {
        line_bytes(line, "-", 1);
    }
    line_decimal(line, magnitude / DS_AMOUNT_SCALE, 1);
    if (fraction == 0) {
        return;
    }
    while (fraction % 10 == 0) {
        fraction /= 10;
        fraction_digits--;
    }
    line_bytes(line, ".", 1);
    line_decimal(line, fraction, fraction_digits);
}

int ingest_event_format_json(const struct ds_event *event, char *dst, size_t dst_capacity)
{
    ASSERT(event != NULL);
    ASSERT(event->status_len <= DS_STATUS_BYTES_MAX);
    char text[FORMAT_LINE_BYTES_WORST];
    struct line line = {.text = text, .len = 0};
    line_bytes(&line, "{\"order_id\":", 12);
    line_id(&line, &event->order_id);
    line_bytes(&line, ",\"customer_id\":", 15);
    line_id(&line, &event->customer_id);
    line_bytes(&line, ",\"ts\":", 6);
    line_ts(&line, event->ts_ms);
    line_bytes(&line, ",\"status\":", 10);
    line_string(&line, event->status, event->status_len);
    line_bytes(&line, ",\"amount\":", 10);
    line_amount(&line, event->amount_units);
    if (event->has_version) {
        ASSERT(event->version >= 0);
        line_bytes(&line, ",\"version\":", 11);
        line_decimal(&line, (uint64_t)event->version, 1);
    }
    line_bytes(&line, "}", 1);
    ASSERT(line.len <= sizeof(text));
    if (line.len > dst_capacity) {
        return -ENOSPC; /* dst untouched */
    }
    memcpy(dst, text, line.len);
    return (int)line.len;
}
