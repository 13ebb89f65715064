/*
 * Private to ingest/: what the decoder (decode.c, with decode_ts.c) shares with the rest of the
 * folder.
 */
#ifndef DS_INGEST_DECODE_H
#define DS_INGEST_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ingest/ingest.h"

/* Whether len bytes at s are valid UTF-8 by the decoder's own rule (no overlongs, surrogates,
 * code points above U+10FFFF or truncated sequences); NUL bytes count as valid. */
bool decode_utf8_valid(const char *s, size_t len);
/* Length of the valid UTF-8 sequence whose lead byte (>= 0x80) is at p, before end, or 0 when it
 * is not one, by the same rule (event_line.c writes strings with it). */
size_t decode_utf8_sequence_len(const unsigned char *p, const unsigned char *end);

/* RFC 3339 date-time in s[0..n) (decoded text) into epoch milliseconds (decode_ts.c): "T", "t"
 * or a space between date and time, an optional fraction (truncated to milliseconds), then Z, z
 * or +HH:MM / -HH:MM. Returns INGEST_OK with *ts_ms set, INGEST_BAD_TS, or INGEST_TS_RANGE
 * (outside DS_TS_MS_MIN..DS_TS_MS_MAX). */
enum ingest_reason decode_ts_parse(const char *s, size_t n, int64_t *ts_ms);

#endif /* DS_INGEST_DECODE_H */
