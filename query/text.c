/*
 * Appending formatted text to a fixed buffer (query/text.h).
 */
#include <stdarg.h>
#include <stdio.h>

#include "query/text.h"

void text_put(struct text_buf *b, const char *fmt, ...)
{
    if (b->overflow) {
        return;
    }
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(b->dst + b->len, b->capacity - b->len, fmt, args);
    va_end(args);
    if (n < 0 || (size_t)n >= b->capacity - b->len) {
        b->overflow = true;
        return;
    }
    b->len += (size_t)n;
}
