/*
 * Private to query/: appending formatted text to a caller's fixed buffer (JSON answers, the
 * Prometheus page). Overflow is sticky and checked once at the end.
 */
#ifndef DS_QUERY_TEXT_H
#define DS_QUERY_TEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "common/common.h"

struct text_buf {
    char *dst;
    size_t capacity;
    size_t len;
    bool overflow; /* a put did not fit: len stops growing, the text is incomplete */
};

/* Appends like snprintf at b->len; on overflow marks b and writes nothing more. */
DS_PRINTF(2, 3) void text_put(struct text_buf *b, const char *fmt, ...);

#endif /* DS_QUERY_TEXT_H */
