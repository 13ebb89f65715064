/*
 * Bodies in fixed buffers (http.h): formatted appends with sticky overflow, JSON string
 * literals, the {"error": ...} document both servers answer with, and the bearer-token check.
 * Pure functions over bytes, kept apart from libmicrohttpd so unit tests drive them directly.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "http/http.h"

void http_text_put(struct http_text *b, const char *fmt, ...)
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

int64_t http_json_string(const char *s, size_t len, char *dst, size_t dst_capacity)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    if (dst_capacity < 2) {
        return -ENOSPC;
    }
    dst[n++] = '"';
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        /* Room for this character's encoding plus the closing quote and the NUL: -ENOSPC only
         * when the literal really does not fit (a flat 7 refused buffers that were enough). */
        size_t need = (c == '"' || c == '\\') ? 2u : (c < 0x20 ? 6u : 1u);
        if (n + need + 2 > dst_capacity) {
            return -ENOSPC;
        }
        if (c == '"' || c == '\\') {
            dst[n++] = '\\';
            dst[n++] = (char)c;
        } else if (c < 0x20) {
            memcpy(dst + n, "\\u00", 4);
            dst[n + 4] = hex[c >> 4];
            dst[n + 5] = hex[c & 15];
            n += 6;
        } else {
            dst[n++] = (char)c;
        }
    }
    if (n + 2 > dst_capacity) {
        return -ENOSPC;
    }
    dst[n++] = '"';
    dst[n] = '\0';
    return (int64_t)n;
}

int64_t http_error_json(const char *message, char *dst, size_t dst_capacity)
{
    static const char head[] = "{\"error\":";
    if (dst_capacity < sizeof(head) + 3) {
        return -ENOSPC;
    }
    memcpy(dst, head, sizeof(head) - 1);
    size_t n = sizeof(head) - 1;
    int64_t s = http_json_string(message, strlen(message), dst + n, dst_capacity - n - 1);
    if (s < 0) {
        return s;
    }
    n += (size_t)s;
    dst[n++] = '}';
    dst[n] = '\0';
    return (int64_t)n;
}

bool http_bearer_ok(const char *authorization, const char *token, size_t token_len)
{
    static const char scheme[] = "Bearer ";
    if (authorization == NULL || strncmp(authorization, scheme, sizeof(scheme) - 1) != 0) {
        return false;
    }
    const char *got = authorization + sizeof(scheme) - 1;
    size_t len = strlen(got);
    unsigned char diff = len != token_len;
    for (size_t i = 0; i < token_len; i++) {
        diff |= (unsigned char)(token[i] ^ (i < len ? got[i] : 0));
    }
    return diff == 0;
}
