/*
 * Private to ingest/: what the decoder shares with the rest of the folder.
 */
#ifndef DS_INGEST_DECODE_H
#define DS_INGEST_DECODE_H

#include <stdbool.h>
#include <stddef.h>

/* Whether len bytes at s are valid UTF-8 by the decoder's own rule (no overlongs, surrogates,
 * code points above U+10FFFF or truncated sequences); NUL bytes count as valid. */
bool decode_utf8_valid(const char *s, size_t len);

#endif /* DS_INGEST_DECODE_H */
