/*
 * Bodies in fixed buffers (http.h): formatted appends with sticky overflow, JSON string
 * literals, the {"error": ...} document both servers answer with, the token checks (bearer
 * header, cookie) and the redaction of tokens in logged text. Pure functions over bytes, kept
 * apart from libmicrohttpd so unit tests drive them directly.
 *
 * The cookie parser reads only what it must: pairs split at ';', names compared exactly, one
 * pair of quotes taken off a value. Every candidate is compared in full (no early exit on a
 * mismatch), so the time spent says nothing about how much of a guess was right. Redaction is
 * textual ("token=" anywhere, any case) rather than a parse of the target: it also covers the
 * lines libmicrohttpd writes, which quote a target inside free text. Rejected: logging targets
 * as they come and trusting no one to ask for /?token= (the console's own login link does).
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

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

bool http_token_equal(const char *got, size_t got_len, const char *token, size_t token_len)
{
    unsigned char diff = got_len != token_len;
    for (size_t i = 0; i < token_len; i++) {
        diff |= (unsigned char)(token[i] ^ (i < got_len ? got[i] : 0));
    }
    return diff == 0;
}

bool http_bearer_ok(const char *authorization, const char *token, size_t token_len)
{
    static const char scheme[] = "Bearer ";
    if (authorization == NULL || strncmp(authorization, scheme, sizeof(scheme) - 1) != 0) {
        return false;
    }
    const char *got = authorization + sizeof(scheme) - 1;
    return http_token_equal(got, strlen(got), token, token_len);
}

static bool cookie_space(char c)
{
    return c == ' ' || c == '\t';
}

bool http_cookie_ok(const char *cookie, const char *token, size_t token_len)
{
    static const char name[] = HTTP_TOKEN_COOKIE;
    const size_t name_len = sizeof(name) - 1;
    bool ok = false;
    const char *p = cookie;
    while (p != NULL && *p != '\0') { /* one pair a turn; bounded by the header's length */
        const char *semi = strchr(p, ';');
        const char *end = semi != NULL ? semi : p + strlen(p);
        while (p < end && cookie_space(*p)) {
            p++;
        }
        const char *value_end = end;
        while (value_end > p && cookie_space(value_end[-1])) {
            value_end--;
        }
        if ((size_t)(value_end - p) > name_len && memcmp(p, name, name_len) == 0 &&
            p[name_len] == '=') {
            const char *v = p + name_len + 1;
            size_t v_len = (size_t)(value_end - v);
            if (v_len >= 2 && v[0] == '"' && v[v_len - 1] == '"') {
                v++;
                v_len -= 2;
            }
            ok |= http_token_equal(v, v_len, token, token_len);
        }
        p = semi != NULL ? semi + 1 : NULL;
    }
    return ok;
}

bool http_token_cookie_safe(const char *token, size_t token_len)
{
    for (size_t i = 0; i < token_len; i++) {
        unsigned char c = (unsigned char)token[i];
        if (c <= 0x20 || c >= 0x7f || c == '"' || c == ',' || c == ';' || c == '\\') {
            return false;
        }
    }
    return token_len > 0;
}

/* Where the value after "token=" ends. */
static bool redact_stop(char c)
{
    return c == '&' || c == '#' || c == '"' || c == '\'' || isspace((unsigned char)c) != 0;
}

size_t http_redact_tokens(const char *text, size_t len, char *dst, size_t dst_capacity)
{
    static const char key[] = "token=";
    static const char mask[] = HTTP_REDACTED;
    const size_t key_len = sizeof(key) - 1;
    ASSERT(dst_capacity >= 1);
    size_t n = 0;
    size_t i = 0;
    while (i < len && n + 1 < dst_capacity) { /* each turn consumes at least one byte */
        if (len - i >= key_len && strncasecmp(text + i, key, key_len) == 0) {
            size_t take = key_len < dst_capacity - 1 - n ? key_len : dst_capacity - 1 - n;
            memcpy(dst + n, text + i, take);
            n += take;
            i += key_len;
            bool secret = i < len && !redact_stop(text[i]);
            while (i < len && !redact_stop(text[i])) {
                i++;
            }
            take =
                sizeof(mask) - 1 < dst_capacity - 1 - n ? sizeof(mask) - 1 : dst_capacity - 1 - n;
            memcpy(dst + n, mask, secret ? take : 0);
            n += secret ? take : 0;
            continue;
        }
        dst[n++] = text[i++];
    }
    dst[n] = '\0';
    ASSERT(n < dst_capacity);
    return n;
}
