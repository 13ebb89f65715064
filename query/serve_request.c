/*
 * Routing and validation of HTTP requests, from the raw request target (path and query).
 *
 * Every malformed request is refused here with a 4xx status and a message meant for the
 * client; nothing past this point sees unchecked input. Percent-decoding is done here, not by
 * libmicrohttpd: its decoder leaves a bad escape ("%zz") as is and truncates at a decoded NUL,
 * which would silently change what a client asked for. An id in a path (/v1/customers/{id}/orders,
 * /v1/orders/{id}) is cut from the raw path and decoded once, so an id may hold '/' and '%'
 * (decoding the whole path first, as before, decoded such ids twice). Parameters are strict:
 * unknown names and repeated names are errors (a typo such as "stauts=paid" must not widen a
 * count).
 *
 * Rejected: a table-driven generic parameter parser with callbacks (five endpoints with one to
 * six parameters each read better as plain code).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "query/serve_private.h"

/* Client bytes quoted in a message: printable ASCII only (the answer must stay valid JSON and
 * UTF-8 whatever was sent), cut to 40 bytes. */
static const char *quote_input(const char *text, size_t len, char *dst, size_t dst_capacity)
{
    ASSERT(dst_capacity > 4);
    size_t n = 0;
    for (size_t i = 0; i < len && n + 4 < dst_capacity && i < 40; i++) {
        unsigned char c = (unsigned char)text[i];
        dst[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (len > 40) {
        memcpy(dst + n, "...", 3);
        n += 3;
    }
    dst[n] = '\0';
    return dst;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* Decodes %XX escapes (and '+' as a space when plus_is_space). Returns the decoded length,
 * -EINVAL for a bad escape, -ENOSPC when it does not fit. */
static int64_t percent_decode(const char *src, size_t len, bool plus_is_space, char *dst,
                              size_t dst_capacity)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        char c = src[i];
        if (c == '%') {
            int hi = i + 2 < len ? hex_value(src[i + 1]) : -1;
            int lo = i + 2 < len ? hex_value(src[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                return -EINVAL;
            }
            c = (char)(hi * 16 + lo);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        if (n + 1 >= dst_capacity) {
            return -ENOSPC;
        }
        dst[n++] = c;
    }
    dst[n] = '\0';
    return (int64_t)n;
}

DS_PRINTF(3, 4)
static unsigned fail(struct query_route *out, unsigned status, const char *fmt, ...);

static unsigned fail(struct query_route *out, unsigned status, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(out->error, sizeof(out->error), fmt, args);
    va_end(args);
    return status;
}

/* The id of /v1/customers/{id}/orders or /v1/orders/{id} (what names it in messages), from
 * the raw path segment, percent-decoded once: a positive decimal integer without leading zeros
 * (up to 2^63-1) is an integer id; "..." (quotes, %22 encoded) is the string between them (so
 * "42" names the string id 42); anything else is a string id. Decoding the raw segment, not the
 * decoded path, lets an id hold '%' and '/' (sent as %25 and %2F) and decodes it exactly once. */
static unsigned id_segment(const char *raw, size_t raw_len, const char *what, struct ds_id *id,
                           struct query_route *out)
{
    char text[3 * DS_ID_BYTES_MAX + 3];
    int64_t len = percent_decode(raw, raw_len, false, text, sizeof(text));
    char quoted[64];
    if (len == -EINVAL) {
        return fail(out, 400, "bad percent-encoding in the %s id '%s'", what,
                    quote_input(raw, raw_len, quoted, sizeof(quoted)));
    }
    if (len < 0) {
        return fail(out, 400, "%s id longer than %d bytes", what, DS_ID_BYTES_MAX);
    }
    if (memchr(text, '\0', (size_t)len) != NULL) {
        return fail(out, 400, "NUL byte in the %s id", what);
    }
    if (query_customer_id_parse(text, (size_t)len, id) != 0) {
        return fail(out, 400, "%s id must be 1..%d bytes", what, DS_ID_BYTES_MAX);
    }
    return 0;
}

int query_customer_id_parse(const char *text, size_t len, struct ds_id *id)
{
    const char *s = text;
    size_t n = len;
    bool forced_string = n >= 2 && s[0] == '"' && s[n - 1] == '"';
    if (forced_string) {
        s++;
        n -= 2;
    }
    if (n == 0 || n > DS_ID_BYTES_MAX || memchr(s, '\0', n) != NULL) {
        return -DS_EUSAGE;
    }
    bool digits = !forced_string && n <= 19 && s[0] >= '1' && s[0] <= '9';
    uint64_t value = 0;
    for (size_t i = 0; digits && i < n; i++) {
        digits = s[i] >= '0' && s[i] <= '9';
        value = value * 10u + (uint64_t)(s[i] - '0');
    }
    if (digits && value <= (uint64_t)INT64_MAX) {
        *id = (struct ds_id){.is_string = false, .value = (int64_t)value};
        return 0;
    }
    *id = (struct ds_id){.is_string = true, .len = (uint8_t)n};
    memcpy(id->text, s, n);
    return 0;
}

/* The paths with an id in them, matched on the raw path (see id_segment). Returns 0 with
 * out->endpoint still QUERY_EP_NONE when the path is neither. */
static unsigned route_id_path(const char *raw, size_t len, struct query_route *out)
{
    static const char customers[] = "/v1/customers/";
    static const char suffix[] = "/orders";
    static const char orders[] = "/v1/orders/";
    size_t p = sizeof(customers) - 1;
    size_t s = sizeof(suffix) - 1;
    if (len > p + s && memcmp(raw, customers, p) == 0 && memcmp(raw + len - s, suffix, s) == 0 &&
        memchr(raw + p, '/', len - p - s) == NULL) {
        out->endpoint = QUERY_EP_ORDERS;
        return id_segment(raw + p, len - p - s, "customer", &out->customer, out);
    }
    p = sizeof(orders) - 1;
    if (len >= p && memcmp(raw, orders, p) == 0 && memchr(raw + p, '/', len - p) == NULL) {
        out->endpoint = QUERY_EP_ORDER;
        if (len == p) {
            return fail(out, 400, "missing order id: GET /v1/orders/{order_id}");
        }
        return id_segment(raw + p, len - p, "order", &out->order_id, out);
    }
    return 0;
}

/* The paths without an id, from the decoded path (len bytes). */
static unsigned route_path(const char *path, size_t len, struct query_route *out)
{
    static const struct {
        const char *path;
        enum query_endpoint endpoint;
    } exact[] = {{"/v1/count", QUERY_EP_COUNT},
                 {"/v1/partitions", QUERY_EP_PARTITIONS},
                 {"/metrics", QUERY_EP_METRICS},
                 {"/healthz", QUERY_EP_HEALTHZ},
                 {"/readyz", QUERY_EP_READYZ},
                 {"/v1/heat", QUERY_EP_HEAT},
                 {"/v1/heat/history", QUERY_EP_HEAT_HISTORY},
                 {"/v1/heat/stream", QUERY_EP_HEAT_STREAM},
                 {"/", QUERY_EP_CONSOLE},
                 {"/console.js", QUERY_EP_CONSOLE},
                 {"/console.css", QUERY_EP_CONSOLE}};
    for (size_t i = 0; i < DS_ARRAY_LEN(exact); i++) {
        if (strlen(exact[i].path) == len && memcmp(path, exact[i].path, len) == 0) {
            out->endpoint = exact[i].endpoint;
            return 0;
        }
    }
    char quoted[64];
    return fail(out, 404, "no such path '%s'", quote_input(path, len, quoted, sizeof(quoted)));
}

static unsigned parse_day(const char *name, const char *value, size_t len, int32_t *day,
                          struct query_route *out)
{
    if (ds_date_parse(value, len, day) != 0) {
        char quoted[64];
        return fail(out, 400, "bad %s '%s': expected a real date YYYY-MM-DD", name,
                    quote_input(value, len, quoted, sizeof(quoted)));
    }
    return 0;
}

static unsigned count_param(const char *name, const char *value, size_t len,
                            struct query_route *out)
{
    struct query_count_request *req = &out->count;
    if (strcmp(name, "day") == 0) {
        return parse_day("day", value, len, &req->day_first, out);
    }
    if (strcmp(name, "to") == 0) {
        return parse_day("to", value, len, &req->day_last, out);
    }
    if (strcmp(name, "status") == 0) {
        if (len > DS_STATUS_BYTES_MAX) {
            return fail(out, 400, "status longer than %d bytes", DS_STATUS_BYTES_MAX);
        }
        req->has_status = true;
        req->status_len = (uint8_t)len;
        memcpy(req->status, value, len);
        return 0;
    }
    /* name is "by": the caller admits only known names. */
    if (query_group_parse(value, &req->by) != 0) {
        char quoted[64];
        return fail(out, 400, "bad by '%s': expected shard, hour or day",
                    quote_input(value, len, quoted, sizeof(quoted)));
    }
    return 0;
}

static bool decimal_param(const char *value, size_t len, size_t digits_max, uint32_t *out)
{
    uint32_t n = 0;
    bool ok = len > 0 && len <= digits_max;
    for (size_t i = 0; ok && i < len; i++) {
        ok = value[i] >= '0' && value[i] <= '9';
        n = n * 10u + (uint32_t)(value[i] - '0');
    }
    *out = n;
    return ok;
}

/* consistent and timeout_ms, which /v1/count and the orders endpoint both take. */
static unsigned consistency_param(const char *name, const char *value, size_t len,
                                  struct query_route *out)
{
    if (strcmp(name, "consistent") == 0) {
        if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0) {
            return fail(out, 400, "bad consistent: expected true or false");
        }
        out->consistent = strcmp(value, "true") == 0;
        return 0;
    }
    /* name is "timeout_ms": the callers admit only known names. */
    uint32_t timeout_ms = 0;
    if (!decimal_param(value, len, 5, &timeout_ms) || timeout_ms == 0 ||
        timeout_ms > QUERY_CONSISTENT_TIMEOUT_MS_MAX) {
        return fail(out, 400, "bad timeout_ms: expected 1..%u (milliseconds)",
                    QUERY_CONSISTENT_TIMEOUT_MS_MAX);
    }
    out->timeout_ms = timeout_ms;
    return 0;
}

static unsigned orders_param(const char *name, const char *value, size_t len,
                             struct query_route *out)
{
    if (strcmp(name, "limit") == 0) {
        uint32_t limit = 0;
        if (!decimal_param(value, len, 4, &limit) || limit == 0 || limit > SERVE_ORDERS_LIMIT_MAX) {
            return fail(out, 400, "bad limit: expected 1..%u", SERVE_ORDERS_LIMIT_MAX);
        }
        out->limit = limit;
        return 0;
    }
    if (strcmp(name, "consistent") == 0 || strcmp(name, "timeout_ms") == 0) {
        return consistency_param(name, value, len, out);
    }
    /* cursor: the index checks it (a malformed one is a 400 then); here only its size. */
    if (len > QUERY_ORDERS_TOKEN_CHARS_MAX) {
        return fail(out, 400, "bad cursor: longer than any the service hands out");
    }
    memcpy(out->cursor, value, len);
    out->cursor[len] = '\0';
    return 0;
}

/* A decimal of 1..digits_max digits into *out; false for anything else. */
static unsigned heat_param(const char *value, size_t len, struct query_route *out)
{
    uint32_t top = 0;
    if (!decimal_param(value, len, 3, &top) || top == 0 || top > SHARD_HEAT_TOP_MAX) {
        return fail(out, 400, "bad top: expected 1..%u", SHARD_HEAT_TOP_MAX);
    }
    out->top = top;
    return 0;
}

/* /?token=T: the console trades it for a cookie (query_console_respond checks it). */
static unsigned console_param(const char *value, size_t len, struct query_route *out)
{
    _Static_assert(SERVE_PARAM_VALUE_BYTES_MAX <= HTTP_TOKEN_BYTES_MAX,
                   "every decoded value fits the route's token");
    if (len == 0) {
        return fail(out, 400, "empty token: open /?token=<the server's --http-token>");
    }
    out->has_token = true;
    out->token_len = (uint32_t)len;
    memcpy(out->token, value, len);
    out->token[len] = '\0';
    return 0;
}

static unsigned history_param(const char *value, size_t len, struct query_route *out)
{
    uint32_t seconds = 0;
    if (!decimal_param(value, len, 3, &seconds) || seconds == 0 || seconds > SHARD_HEAT_HISTORY_S) {
        return fail(out, 400, "bad seconds: expected 1..%u", SHARD_HEAT_HISTORY_S);
    }
    out->seconds = seconds;
    return 0;
}

/* The parameter names an endpoint takes, as a space-separated list with spaces around. */
static const char *known_params(enum query_endpoint endpoint)
{
    switch (endpoint) {
    case QUERY_EP_COUNT: return " day to status by consistent timeout_ms ";
    case QUERY_EP_PARTITIONS: return " day ";
    case QUERY_EP_ORDERS: return " limit cursor consistent timeout_ms ";
    case QUERY_EP_ORDER: return " consistent timeout_ms ";
    case QUERY_EP_HEAT: return " top ";
    case QUERY_EP_CONSOLE: return " token ";
    case QUERY_EP_HEAT_HISTORY: return " seconds ";
    default: return " ";
    }
}

static unsigned one_param(const char *text, size_t len, uint32_t *seen, struct query_route *out)
{
    const char *eq = memchr(text, '=', len);
    size_t name_len = eq != NULL ? (size_t)(eq - text) : len;
    char name[SERVE_PARAM_NAME_BYTES_MAX + 3]; /* ' ', the name, ' ', NUL: see known_params */
    char value[SERVE_PARAM_VALUE_BYTES_MAX + 1];
    char quoted[64];
    int64_t n = percent_decode(text, name_len, true, name + 1, sizeof(name) - 2);
    int64_t v = eq != NULL ? percent_decode(eq + 1, len - name_len - 1, true, value, sizeof(value))
                           : (value[0] = '\0', 0);
    if (n == -EINVAL || v == -EINVAL) {
        return fail(out, 400, "bad percent-encoding in '%s'",
                    quote_input(text, len, quoted, sizeof(quoted)));
    }
    if (n < 0 || v < 0) {
        return fail(out, 400, "parameter too long: '%s'",
                    quote_input(text, len, quoted, sizeof(quoted)));
    }
    if (memchr(name + 1, '\0', (size_t)n) != NULL || memchr(value, '\0', (size_t)v) != NULL) {
        return fail(out, 400, "NUL byte in parameter '%s'",
                    quote_input(text, len, quoted, sizeof(quoted)));
    }
    name[0] = ' ';
    name[n + 1] = ' ';
    name[n + 2] = '\0';
    const char *known = known_params(out->endpoint);
    const char *at = n > 0 ? strstr(known, name) : NULL;
    if (at == NULL) {
        return fail(out, 400, "unknown parameter '%s'",
                    quote_input(name + 1, (size_t)n, quoted, sizeof(quoted)));
    }
    ASSERT(at - known < 32); /* a name's offset in the list is its bit in seen */
    uint32_t bit = 1u << (uint32_t)(at - known);
    if (*seen & bit) {
        return fail(out, 400, "parameter '%s' given twice",
                    quote_input(name + 1, (size_t)n, quoted, sizeof(quoted)));
    }
    *seen |= bit;
    name[n + 1] = '\0';
    if (out->endpoint == QUERY_EP_ORDER ||
        (out->endpoint == QUERY_EP_COUNT &&
         (strcmp(name + 1, "consistent") == 0 || strcmp(name + 1, "timeout_ms") == 0))) {
        return consistency_param(name + 1, value, (size_t)v, out);
    }
    if (out->endpoint == QUERY_EP_COUNT) {
        return count_param(name + 1, value, (size_t)v, out);
    }
    if (out->endpoint == QUERY_EP_PARTITIONS) {
        return parse_day("day", value, (size_t)v, &out->day, out);
    }
    if (out->endpoint == QUERY_EP_HEAT) {
        return heat_param(value, (size_t)v, out);
    }
    if (out->endpoint == QUERY_EP_CONSOLE) {
        return console_param(value, (size_t)v, out);
    }
    if (out->endpoint == QUERY_EP_HEAT_HISTORY) {
        return history_param(value, (size_t)v, out);
    }
    return orders_param(name + 1, value, (size_t)v, out);
}

static unsigned parse_query(const char *query, size_t len, struct query_route *out)
{
    uint32_t seen = 0;
    uint32_t params = 0;
    size_t start = 0;
    while (start <= len) { /* one parameter per turn; the text is at most HTTP_URI_BYTES_MAX */
        const char *amp = memchr(query + start, '&', len - start);
        size_t end = amp != NULL ? (size_t)(amp - query) : len;
        if (end > start) {
            if (++params > SERVE_PARAMS_MAX) {
                return fail(out, 400, "more than %u parameters", SERVE_PARAMS_MAX);
            }
            unsigned status = one_param(query + start, end - start, &seen, out);
            if (status != 0) {
                return status;
            }
        }
        start = end + 1;
    }
    return 0;
}

/* Checks that hold after every parameter was read (required ones, ranges). */
static unsigned finish(struct query_route *out, uint32_t range_days_max)
{
    if (out->endpoint == QUERY_EP_COUNT) {
        struct query_count_request *req = &out->count;
        if (req->day_first < 0) {
            return fail(out, 400, "missing parameter 'day' (YYYY-MM-DD)");
        }
        if (req->day_last < 0) {
            req->day_last = req->day_first;
        }
        if (req->day_last < req->day_first) {
            return fail(out, 400, "'to' is before 'day'");
        }
        uint32_t days = (uint32_t)(req->day_last - req->day_first) + 1;
        req->range_days_max = range_days_max;
        if (days > range_days_max) {
            char message[96];
            snprintf(message, sizeof(message), "range of %u days is longer than the maximum of %u",
                     days, range_days_max);
            return fail(out, 400, "%s", message);
        }
    }
    if (out->timeout_ms != 0 && !out->consistent) {
        return fail(out, 400, "timeout_ms bounds the wait of consistent=true: give both");
    }
    if (out->endpoint == QUERY_EP_PARTITIONS && out->day < 0) {
        return fail(out, 400, "missing parameter 'day' (YYYY-MM-DD)");
    }
    return 0;
}

unsigned query_route_parse(const char *method, const char *target, size_t len,
                           uint32_t range_days_max, struct query_route *out)
{
    ASSERT(range_days_max >= 1 && range_days_max <= QUERY_RANGE_DAYS_MAX);
    memset(out, 0, sizeof(*out));
    out->count.day_first = -1;
    out->count.day_last = -1;
    out->day = -1;
    out->limit = 20;
    out->top = SERVE_HEAT_TOP_DEFAULT;
    out->seconds = SHARD_HEAT_HISTORY_S;
    if (len > HTTP_URI_BYTES_MAX) {
        return fail(out, 414, "request target longer than %u bytes", HTTP_URI_BYTES_MAX);
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)target[i];
        if (c <= 0x20 || c >= 0x7f) {
            return fail(out, 400, "%s byte in the request target", c == 0 ? "NUL" : "bad");
        }
    }
    const char *q = memchr(target, '?', len);
    size_t path_len = q != NULL ? (size_t)(q - target) : len;
    unsigned status = route_id_path(target, path_len, out);
    if (out->endpoint == QUERY_EP_NONE) {
        char path[HTTP_URI_BYTES_MAX + 1];
        int64_t p = percent_decode(target, path_len, false, path, sizeof(path));
        if (p < 0) {
            return fail(out, 400, "bad percent-encoding in the path");
        }
        if (memchr(path, '\0', (size_t)p) != NULL) {
            return fail(out, 400, "NUL byte in the path");
        }
        status = route_path(path, (size_t)p, out);
    }
    if (out->endpoint == QUERY_EP_NONE) {
        return status;
    }
    out->needs_token = out->endpoint != QUERY_EP_HEALTHZ && out->endpoint != QUERY_EP_READYZ &&
                       out->endpoint != QUERY_EP_CONSOLE;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        char quoted[64];
        return fail(out, 405, "method %s not allowed: use GET",
                    quote_input(method, strlen(method), quoted, sizeof(quoted)));
    }
    if (status != 0) {
        return status;
    }
    status = q != NULL ? parse_query(q + 1, len - path_len - 1, out) : 0;
    return status != 0 ? status : finish(out, range_days_max);
}
