/*
 * ingest/decode.c: one JSON order event into a struct ds_event (docs/EVENTS.md) and the
 * reason names. Timestamps are parsed in decode_ts.c; the canonical JSON line that decodes back
 * to the same event is written by event_line.c.
 *
 * The decoder is a single left-to-right pass over the input with no allocation and no
 * recursion. The top-level object is parsed member by member; a key is matched on its raw
 * bytes (decoded first only when it holds escapes) by length then first byte, so a known field
 * costs one memcmp. Strings are validated without copying, eight bytes at a time where no quote,
 * backslash, control or non-ASCII byte occurs; a known field's value is copied once afterwards
 * (a second, simple pass decodes it only when it had escapes). Numbers of up to 19 digits
 * without exponent are read eight digits at a time; any other number goes to an exact scanner
 * that keeps trailing zeros apart, so 1000000000000000000000e-17 is still exactly 10. Unknown
 * values are validated and skipped by an iterative scanner whose bracket stack is a 64-bit mask
 * (bit i set: the container at depth i + 1 is an object), which is why INGEST_DEPTH_MAX may not
 * exceed 64. The top-level object counts as depth 1. Cost: about 140 ns for a 114-byte event
 * on the 2-core EPYC development VM (bench/decode.c).
 *
 * Which reason wins when an input has several problems (the contract asks for determinism):
 * the first problem met scanning left to right, where every token (string, number, literal,
 * or a whole nested value) is first checked for JSON validity (syntax, escapes, UTF-8, the
 * escaped NUL rule of known fields, depth) and only then for its meaning in the field (type,
 * range, length, date). So {"amount": 1.234567, "x": ]} is amount_precision, while
 * {"order_id": [1, } is not_json. Within one number the value is judged as a whole:
 * amount_precision (more than four decimals, after the exponent, trailing zeros allowed) before
 * amount_range. Missing fields are reported last, once the whole input is otherwise valid
 * (trailing bytes included), in the order order_id, customer_id, ts.
 *
 * Where byte_offset points: the byte where a syntax error was found; the lead byte of an
 * invalid UTF-8 sequence or the backslash of a bad escape; the opening bracket that is too
 * deep; the opening quote of a duplicate key; the first byte of a value whose meaning is wrong;
 * the first non-blank byte after the object for trailing garbage; the closing brace of the
 * object for a missing field; INGEST_EVENT_BYTES_MAX for too_large.
 *
 * Strings: a lone or unpaired UTF-16 surrogate escape cannot become valid UTF-8, so it is
 * bad_utf8 (not not_json); a malformed escape (\x, \u12G4, truncated) is not_json.
 *
 * version and items (docs/EVENTS.md). version is an integer 0..2^63-1 written as one: a
 * fraction, an exponent or a minus sign (even "-0") is bad_version, as any other type is. items
 * is judged as one token: the whole value is first validated as JSON (anything there is
 * not_json, bad_utf8 or too_deep as elsewhere), then its size (over DS_ITEMS_JSON_BYTES_MAX
 * bytes from '[' to ']': items_too_large at the '['), then a second walk judges element by
 * element: not an array, an element not an object, a product missing, repeated, not a string,
 * empty or over 64 bytes, a quantity missing, repeated or not an integer 1..2^31-1 are
 * bad_items at the element, value or repeated key; a 101st element is items_too_large at that
 * element; an escaped NUL in a product is bad_utf8, as in ids and status. Unknown keys inside
 * an item are skipped. The bounds: a product is an order line's name or SKU, so the id limit
 * fits it; a quantity of 0 is no order line (a removed line is left out) and a negative one is
 * a return, which is its own event; 2^31-1 keeps every quantity an int32 in any consumer and
 * its varint at most 5 bytes. The canonical bytes (common/common.h) are written during the
 * second walk into the caller's struct ingest_decoder when there is one; ingest_decode keeps
 * none. An event without items pays only the key match.
 *
 * Rejected alternatives: a general JSON DOM (jansson, cJSON) allocates per value and visits
 * every byte twice; strtod/strtoll depend on the locale and round, while amounts must be exact.
 *
 * Why this file stays over 1,200 lines: what is left is the scanner (strings, numbers, skipped
 * values) and the field rules that call it, and they share the decoder's state and a dozen
 * static inline helpers (skip_blank, string_scan, plain_run_end, digits_run, number_scan) that
 * the per-byte and per-value loops need inlined. The build has no link-time optimisation, so a
 * second file for the field rules would turn those helpers into calls on the hottest path
 * (bench_decode), or move them into a header that every part includes, which is the same file
 * in two pieces. The parts that need none of that state are apart: decode_ts.c, event_line.c.
 */
#include <errno.h>
#include <string.h>

#include "ingest/decode.h"
#include "ingest/ingest.h"

/* The bracket stack is one uint64_t; see the file comment. */
_Static_assert(INGEST_DEPTH_MAX >= 1 && INGEST_DEPTH_MAX <= 64, "bracket mask is 64 bits");
/* Offsets and lengths of an accepted input fit comfortably in 32 bits. */
_Static_assert(INGEST_EVENT_BYTES_MAX < (1u << 24), "input limit");
_Static_assert(DS_ID_BYTES_MAX <= UINT8_MAX && DS_STATUS_BYTES_MAX <= UINT8_MAX, "uint8 lens");
/* The canonical items: the count and a product length are one byte each, a quantity at most 5
 * varint bytes, and the whole fits struct ds_event.items_bytes. */
_Static_assert(DS_ITEMS_COUNT_MAX < 128 && DS_ITEM_PRODUCT_BYTES_MAX <= UINT8_MAX, "one byte");
_Static_assert(DS_ITEM_QUANTITY_MAX < (1ull << 35), "a quantity is at most 5 varint bytes");
_Static_assert(DS_ITEMS_BYTES_MAX <= UINT16_MAX, "items_bytes is 16 bits");
_Static_assert(DS_ITEMS_JSON_BYTES_MAX < INGEST_EVENT_BYTES_MAX, "items fit an event");

/* Exponents of amounts saturate here: far beyond any length an accepted input can balance
 * (INGEST_EVENT_BYTES_MAX digits), so saturation never changes a verdict. */
#define DECODE_EXPONENT_CAP 1000000
/* A decoded ts longer than this is not RFC 3339 unless its fraction is long; see ts_unescape. */
#define DECODE_TS_TEXT_MAX 40u
/* Longest known key ("customer_id") plus room; longer keys are unknown. Also for item keys. */
#define DECODE_KEY_BYTES_MAX 16u

enum field {
    FIELD_UNKNOWN = 0,
    FIELD_ORDER_ID,
    FIELD_CUSTOMER_ID,
    FIELD_TS,
    FIELD_ORDER_DATE,
    FIELD_STATUS,
    FIELD_AMOUNT,
    FIELD_VERSION,
    FIELD_ITEMS,
};

struct decoder {
    const char *begin;    /* first input byte */
    const char *p;        /* next byte to read */
    const char *end;      /* one past the last input byte */
    const char *error_at; /* where the reported problem was found */
    struct ds_event *event;
    uint32_t depth;   /* open containers, the top-level object included */
    uint64_t objects; /* bit depth-1 set: the innermost container at that depth is an object */
    unsigned seen;    /* bit (1 << enum field) per known field already given */
    int32_t order_date_days;
    uint8_t *items;     /* where the canonical items go (DS_ITEMS_BYTES_MAX), or NULL: not kept */
    size_t items_bytes; /* canonical bytes written to items */
};

/* A scanned JSON string. */
struct string_info {
    const char *raw; /* first byte after the opening quote */
    size_t raw_len;  /* bytes between the quotes, escapes undecoded */
    size_t len;      /* decoded bytes; only the first dst_capacity of them were copied */
    bool escaped;    /* at least one backslash escape */
};

/* A scanned JSON number: value = (negative ? -1 : 1) * significand * 10^exponent. When the
 * exponent is below -4 the significand has no trailing zero, so "more than four decimals" is
 * exactly exponent < -4 with a non-zero significand. */
struct number {
    uint64_t significand; /* the digits, possibly without trailing zeros; 0 for a zero value */
    int64_t exponent;
    bool negative;
    bool integer;  /* no fraction part and no exponent part */
    bool overflow; /* the significand does not fit in 64 bits (it is then not zero) */
};

/* clang-format off */
/* 1: the byte ends a run of plain string bytes (quote, backslash, control, non-ASCII). */
#define X16(v) v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v
static const uint8_t string_special[256] = {
    X16(1), X16(1),                                     /* 0x00-0x1f control characters */
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,     /* 0x22 '"' */
    X16(0), X16(0),                                     /* 0x30-0x4f */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,     /* 0x5c '\\' */
    X16(0), X16(0),                                     /* 0x60-0x7f */
    X16(1), X16(1), X16(1), X16(1), X16(1), X16(1), X16(1), X16(1), /* non-ASCII */
};
#undef X16

static const uint64_t pow10_table[20] = {
    1u, 10u, 100u, 1000u, 10000u, 100000u, 1000000u, 10000000u, 100000000u, 1000000000u,
    10000000000u, 100000000000u, 1000000000000u, 10000000000000u, 100000000000000u,
    1000000000000000u, 10000000000000000u, 100000000000000000u, 1000000000000000000u,
    10000000000000000000u,
};
/* clang-format on */

static const char *const reason_names[INGEST_REASON_COUNT] = {
    [INGEST_OK] = "ok",
    [INGEST_NOT_JSON] = "not_json",
    [INGEST_NOT_OBJECT] = "not_object",
    [INGEST_TOO_LARGE] = "too_large",
    [INGEST_TOO_DEEP] = "too_deep",
    [INGEST_TRAILING_GARBAGE] = "trailing_garbage",
    [INGEST_DUPLICATE_FIELD] = "duplicate_field",
    [INGEST_BAD_UTF8] = "bad_utf8",
    [INGEST_MISSING_ORDER_ID] = "missing_order_id",
    [INGEST_BAD_ORDER_ID] = "bad_order_id",
    [INGEST_ORDER_ID_RANGE] = "order_id_range",
    [INGEST_MISSING_CUSTOMER_ID] = "missing_customer_id",
    [INGEST_BAD_CUSTOMER_ID] = "bad_customer_id",
    [INGEST_CUSTOMER_ID_RANGE] = "customer_id_range",
    [INGEST_STRING_TOO_LONG] = "string_too_long",
    [INGEST_MISSING_TS] = "missing_ts",
    [INGEST_BAD_TS] = "bad_ts",
    [INGEST_TS_RANGE] = "ts_range",
    [INGEST_BAD_ORDER_DATE] = "bad_order_date",
    [INGEST_BAD_STATUS] = "bad_status",
    [INGEST_BAD_AMOUNT] = "bad_amount",
    [INGEST_AMOUNT_PRECISION] = "amount_precision",
    [INGEST_AMOUNT_RANGE] = "amount_range",
    [INGEST_BAD_VERSION] = "bad_version",
    [INGEST_BAD_ITEMS] = "bad_items",
    [INGEST_ITEMS_TOO_LARGE] = "items_too_large",
    [INGEST_TOO_LATE] = "too_late",
};

const char *ingest_reason_name(enum ingest_reason reason)
{
    if ((unsigned)reason >= INGEST_REASON_COUNT) {
        return "unknown";
    }
    return reason_names[reason];
}

/* ---- lexical helpers ------------------------------------------------------------------------ */

static enum ingest_reason fail(struct decoder *d, const char *at, enum ingest_reason reason)
{
    DEBUG_ASSERT(at >= d->begin && at <= d->end);
    ASSERT(reason != INGEST_OK);
    d->error_at = at;
    return reason;
}

static inline bool is_digit(char c)
{
    return (unsigned)((unsigned char)c - '0') <= 9u;
}

/* JSON white space: space, tab, LF, CR. Anything above ' ' is settled by one comparison. */
static inline bool is_blank(char c)
{
    const uint64_t blanks = (1ull << ' ') | (1ull << '\t') | (1ull << '\n') | (1ull << '\r');
    unsigned u = (unsigned char)c;
    return u <= ' ' && ((blanks >> u) & 1u) != 0;
}

static inline void skip_blank(struct decoder *d)
{
    const char *p = d->p;
    const char *end = d->end;
    while (p < end && is_blank(*p)) {
        p++;
    }
    d->p = p;
}

/* Length of the valid UTF-8 sequence whose lead byte (>= 0x80) is at p, or 0 when it is not one:
 * no overlongs, no UTF-16 surrogates, nothing above U+10FFFF, no truncation (Unicode 15 table
 * 3-7). */
static size_t utf8_sequence_len(const unsigned char *p, const unsigned char *end)
{
    unsigned c = p[0];
    size_t avail = (size_t)(end - p);
    if (c < 0xc2 || c > 0xf4) {
        return 0;
    }
    if (c < 0xe0) {
        return avail >= 2 && (p[1] & 0xc0) == 0x80 ? 2 : 0;
    }
    unsigned lo = c == 0xe0 ? 0xa0 : (c == 0xf0 ? 0x90 : 0x80);
    unsigned hi = c == 0xed ? 0x9f : (c == 0xf4 ? 0x8f : 0xbf);
    if (avail < 3 || p[1] < lo || p[1] > hi || (p[2] & 0xc0) != 0x80) {
        return 0;
    }
    if (c < 0xf0) {
        return 3;
    }
    return avail >= 4 && (p[3] & 0xc0) == 0x80 ? 4 : 0;
}

size_t decode_utf8_sequence_len(const unsigned char *p, const unsigned char *end)
{
    return utf8_sequence_len(p, end);
}

bool decode_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    const unsigned char *end = p + len;
    while (p < end) {
        if (*p < 0x80) {
            p++;
            continue;
        }
        size_t n = utf8_sequence_len(p, end);
        if (n == 0) {
            return false;
        }
        p += n;
    }
    return true;
}

/* Four hex digits at p (p + 4 <= end checked by the caller) -> 0..0xffff, or -1. */
static int32_t hex4(const char *p)
{
    int32_t value = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = (unsigned char)p[i];
        int32_t digit;
        if (c >= '0' && c <= '9') {
            digit = c - '0';
        } else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') {
            digit = (c | 0x20) - 'a' + 10;
        } else {
            return -1;
        }
        value = value * 16 + digit;
    }
    return value;
}

static size_t utf8_encode(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* The \uXXXX escape at p (the backslash): the code point, pairing surrogates. */
static enum ingest_reason escape_unicode(struct decoder *d, const char *p, uint32_t *cp,
                                         size_t *consumed)
{
    if (d->end - p < 6) {
        return fail(d, d->end, INGEST_NOT_JSON);
    }
    int32_t unit = hex4(p + 2);
    if (unit < 0) {
        return fail(d, p, INGEST_NOT_JSON);
    }
    *consumed = 6;
    *cp = (uint32_t)unit;
    if (unit >= 0xdc00 && unit <= 0xdfff) {
        return fail(d, p, INGEST_BAD_UTF8); /* a low surrogate with no high one before it */
    }
    if (unit >= 0xd800 && unit <= 0xdbff) {
        if (d->end - p < 12 || p[6] != '\\' || p[7] != 'u') {
            return fail(d, p, INGEST_BAD_UTF8);
        }
        int32_t low = hex4(p + 8);
        if (low < 0xdc00 || low > 0xdfff) {
            return fail(d, p, INGEST_BAD_UTF8);
        }
        *cp = 0x10000u + (((uint32_t)unit - 0xd800u) << 10) + ((uint32_t)low - 0xdc00u);
        *consumed = 12;
    }
    return INGEST_OK;
}

/* The byte a one-character escape (\n, \", ...) stands for; false for any other letter. */
static bool escape_simple(char letter, char *out)
{
    switch (letter) {
    case '"': *out = '"'; return true;
    case '\\': *out = '\\'; return true;
    case '/': *out = '/'; return true;
    case 'b': *out = '\b'; return true;
    case 'f': *out = '\f'; return true;
    case 'n': *out = '\n'; return true;
    case 'r': *out = '\r'; return true;
    case 't': *out = '\t'; return true;
    default: return false;
    }
}

/* The escape at p (the backslash), validated: *consumed input bytes that decode to
 * *decoded_len bytes of UTF-8. */
static enum ingest_reason escape_check(struct decoder *d, const char *p, bool reject_nul,
                                       size_t *decoded_len, size_t *consumed)
{
    if (d->end - p < 2) {
        return fail(d, d->end, INGEST_NOT_JSON);
    }
    char ignored;
    *consumed = 2;
    *decoded_len = 1;
    if (escape_simple(p[1], &ignored)) {
        return INGEST_OK;
    }
    if (p[1] != 'u') {
        return fail(d, p, INGEST_NOT_JSON);
    }
    uint32_t cp = 0;
    enum ingest_reason r = escape_unicode(d, p, &cp, consumed);
    if (r != INGEST_OK) {
        return r;
    }
    if (cp == 0 && reject_nul) {
        return fail(d, p, INGEST_BAD_UTF8); /* ids and status must not contain NUL */
    }
    *decoded_len = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    return INGEST_OK;
}

/* The first byte at or after p that is not plain string text (quote, backslash, control,
 * non-ASCII), or end. Eight bytes at a time, read little-endian so that the first byte is the
 * lowest lane: per byte lane, a zero after XOR with '"' or '\\', a borrow below 0x20, or the top
 * bit. A borrow can only flag lanes above a truly flagged one, so the lowest flagged lane is
 * exact. */
static inline const char *plain_run_end(const char *p, const char *end)
{
    const uint64_t ones = 0x0101010101010101ull;
    const uint64_t highs = 0x8080808080808080ull;
    while (end - p >= 8) {
        uint64_t w = ds_get_le64((const uint8_t *)p);
        uint64_t quote = w ^ (ones * '"');
        uint64_t backslash = w ^ (ones * '\\');
        uint64_t special =
            ((quote - ones) & ~quote) | ((backslash - ones) & ~backslash) | (w - ones * 0x20) | w;
        special &= highs;
        if (special != 0) {
            return p + (__builtin_ctzll(special) >> 3);
        }
        p += 8;
    }
    while (p < end && string_special[(unsigned char)*p] == 0) {
        p++;
    }
    return p;
}

/* The non-plain byte at *pp inside a string (not the closing quote): an escape, a control
 * character, or a UTF-8 sequence. Validates it, advances *pp and adds its decoded length. */
static enum ingest_reason string_special_byte(struct decoder *d, const char **pp, bool reject_nul,
                                              size_t *len)
{
    const char *p = *pp;
    unsigned char c = (unsigned char)*p;
    if (c == '\\') {
        size_t decoded_len = 0;
        size_t consumed = 0;
        enum ingest_reason r = escape_check(d, p, reject_nul, &decoded_len, &consumed);
        if (r != INGEST_OK) {
            return r;
        }
        *len += decoded_len;
        *pp = p + consumed;
        return INGEST_OK;
    }
    if (c < 0x20) {
        return fail(d, p, INGEST_NOT_JSON); /* control characters must be escaped */
    }
    size_t n = utf8_sequence_len((const unsigned char *)p, (const unsigned char *)d->end);
    if (n == 0) {
        return fail(d, p, INGEST_BAD_UTF8);
    }
    *len += n;
    *pp = p + n;
    return INGEST_OK;
}

/* string_scan past the first non-plain byte at p: escapes, UTF-8, errors. Kept out of line so
 * that the plain-string path inlined into every caller stays small. */
__attribute__((noinline)) static enum ingest_reason
string_scan_rest(struct decoder *d, bool reject_nul, struct string_info *info, const char *p)
{
    const char *end = d->end;
    size_t len = (size_t)(p - info->raw);
    for (;;) {
        if (p == end) {
            return fail(d, p, INGEST_NOT_JSON); /* unterminated string */
        }
        if (*p == '"') {
            break;
        }
        if (*p == '\\') {
            info->escaped = true;
        }
        enum ingest_reason r = string_special_byte(d, &p, reject_nul, &len);
        if (r != INGEST_OK) {
            return r;
        }
        const char *run = p;
        p = plain_run_end(p, end);
        len += (size_t)(p - run);
    }
    info->raw_len = (size_t)(p - info->raw);
    info->len = len;
    d->p = p + 1;
    return INGEST_OK;
}

/* The string whose opening quote is at d->p: validated (syntax, escapes, UTF-8, and an escaped
 * NUL when reject_nul) and measured, nothing copied (see string_copy); d->p ends after the
 * closing quote. */
static inline enum ingest_reason string_scan(struct decoder *d, bool reject_nul,
                                             struct string_info *info)
{
    DEBUG_ASSERT(d->p < d->end && *d->p == '"');
    const char *p = plain_run_end(d->p + 1, d->end);
    info->raw = d->p + 1;
    info->escaped = false;
    if (DS_LIKELY(p < d->end && *p == '"')) {
        info->raw_len = (size_t)(p - info->raw);
        info->len = info->raw_len;
        d->p = p + 1;
        return INGEST_OK;
    }
    return string_scan_rest(d, reject_nul, info, p);
}

/* One character of a validated string at p: a raw byte (*escape false) or the code point of an
 * escape, surrogate pairs joined. Returns the position after it. */
static const char *unescape_next(const char *p, uint32_t *value, bool *escape)
{
    char c = *p;
    *escape = c == '\\';
    if (!*escape) {
        *value = (unsigned char)c;
        return p + 1;
    }
    if (escape_simple(p[1], &c)) {
        *value = (unsigned char)c;
        return p + 2;
    }
    uint32_t unit = (uint32_t)hex4(p + 2);
    if (unit < 0xd800 || unit > 0xdbff) {
        *value = unit;
        return p + 6;
    }
    *value = 0x10000u + ((unit - 0xd800u) << 10) + ((uint32_t)hex4(p + 8) - 0xdc00u);
    return p + 12;
}

/* The decoded bytes of an escaped string into dst, at most dst_capacity of them. */
__attribute__((noinline)) static void string_unescape(const struct string_info *info, char *dst,
                                                      size_t dst_capacity)
{
    const char *p = info->raw;
    const char *close = info->raw + info->raw_len;
    size_t n = 0;
    while (p < close && n < dst_capacity) {
        uint32_t value = 0;
        bool escape = false;
        p = unescape_next(p, &value, &escape);
        char out[4] = {(char)value};
        size_t out_len = escape ? utf8_encode(value, out) : 1;
        for (size_t i = 0; i < out_len && n < dst_capacity; i++) {
            dst[n++] = out[i];
        }
    }
}

/* The decoded bytes of a scanned string into dst, at most dst_capacity of them. */
static inline void string_copy(const struct string_info *info, char *dst, size_t dst_capacity)
{
    if (DS_LIKELY(!info->escaped)) {
        memcpy(dst, info->raw, info->raw_len < dst_capacity ? info->raw_len : dst_capacity);
        return;
    }
    string_unescape(info, dst, dst_capacity);
}

/* ---- numbers -------------------------------------------------------------------------------- */

/* Appends one decimal digit to the significand, keeping trailing zeros apart in *zeros so that
 * 1000000000000000000000e-17 stays exact. */
static inline void number_push_digit(struct number *n, uint32_t *zeros, unsigned digit)
{
    if (digit == 0) {
        (*zeros)++;
        return;
    }
    if (DS_LIKELY(*zeros == 0 && n->significand <= (UINT64_MAX - 9) / 10)) {
        n->significand = n->significand * 10 + digit;
        return;
    }
    if (n->significand == 0 && !n->overflow) {
        n->significand = digit; /* zeros before the first non-zero digit carry no value */
        *zeros = 0;
        return;
    }
    uint32_t shift = *zeros + 1;
    *zeros = 0;
    if (shift >= DS_ARRAY_LEN(pow10_table) ||
        __builtin_mul_overflow(n->significand, pow10_table[shift], &n->significand) ||
        __builtin_add_overflow(n->significand, digit, &n->significand)) {
        n->overflow = true;
    }
}

/* The optional exponent part at d->p; returns its value, saturated at DECODE_EXPONENT_CAP. */
static enum ingest_reason number_exponent(struct decoder *d, int64_t *exponent)
{
    const char *p = d->p + 1; /* past 'e' or 'E' */
    bool negative = false;
    if (p < d->end && (*p == '+' || *p == '-')) {
        negative = *p == '-';
        p++;
    }
    if (p == d->end || !is_digit(*p)) {
        return fail(d, p, INGEST_NOT_JSON);
    }
    int64_t value = 0;
    while (p < d->end && is_digit(*p)) {
        if (value < DECODE_EXPONENT_CAP) {
            value = value * 10 + (*p - '0');
        }
        p++;
    }
    *exponent = negative ? -value : value;
    d->p = p;
    return INGEST_OK;
}

/* The number at d->p (strict RFC 8259 grammar), any length; d->p ends after it. */
static enum ingest_reason number_scan_exact(struct decoder *d, struct number *n)
{
    const char *p = d->p;
    const char *end = d->end;
    uint32_t zeros = 0;
    *n = (struct number){.negative = *p == '-', .integer = true};
    if (n->negative) {
        p++;
    }
    if (p == end || !is_digit(*p)) {
        return fail(d, p, INGEST_NOT_JSON);
    }
    if (*p == '0') {
        p++;
        if (p < end && is_digit(*p)) {
            return fail(d, p, INGEST_NOT_JSON); /* leading zero */
        }
    }
    while (p < end && is_digit(*p)) {
        number_push_digit(n, &zeros, (unsigned)(*p - '0'));
        p++;
    }
    int64_t fraction_digits = 0;
    if (p < end && *p == '.') {
        const char *first = ++p;
        while (p < end && is_digit(*p)) {
            number_push_digit(n, &zeros, (unsigned)(*p - '0'));
            p++;
        }
        if (p == first) {
            return fail(d, p, INGEST_NOT_JSON);
        }
        fraction_digits = p - first;
        n->integer = false;
    }
    int64_t exponent = 0;
    d->p = p;
    if (p < end && (*p == 'e' || *p == 'E')) {
        enum ingest_reason r = number_exponent(d, &exponent);
        if (r != INGEST_OK) {
            return r;
        }
        n->integer = false;
    }
    n->exponent = (n->significand == 0 && !n->overflow) ? 0 : zeros + exponent - fraction_digits;
    return INGEST_OK;
}

/* The leading decimal digits of the eight bytes at p (p + 8 <= end): returns their count and
 * sets *value. Per byte lane, subtracting '0' leaves 0..9 for a digit; a lane that borrows or
 * holds 10 or more (which +0x76 carries into the top bit) is not one. Lanes above the first
 * non-digit may be disturbed by a borrow or carry, but they are shifted out before the digits
 * are combined pairwise (the multiply-shift steps of simdjson's parse_eight_digits). */
static inline unsigned digits8(const char *p, uint64_t *value)
{
    uint64_t w = ds_get_le64((const uint8_t *)p); /* the first digit is the lowest lane */
    uint64_t t = w - 0x3030303030303030ull;
    uint64_t non_digit = (t | (t + 0x7676767676767676ull)) & 0x8080808080808080ull;
    unsigned count = non_digit != 0 ? (unsigned)__builtin_ctzll(non_digit) >> 3 : 8;
    if (count == 0) {
        *value = 0;
        return 0;
    }
    t <<= 8 * (8 - count); /* the first digit is the lowest lane: zeros become leading zeros */
    t = ((t & 0x0f0f0f0f0f0f0f0full) * 2561) >> 8;
    t = ((t & 0x00ff00ff00ff00ffull) * 6553601) >> 16;
    *value = ((t & 0x0000ffff0000ffffull) * 42949672960001ull) >> 32;
    return count;
}

/* The run of digits at p appended to *value, which stays exact while *count <= 19 (beyond, it
 * wraps harmlessly: callers then take the exact path). Returns the end of the run. */
static inline const char *digits_run(const char *p, const char *end, uint64_t *value,
                                     unsigned *count)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (end - p >= 8) {
        uint64_t chunk = 0;
        unsigned n = digits8(p, &chunk);
        *value = *value * pow10_table[n] + chunk;
        *count += n;
        p += n;
        if (n < 8) {
            return p;
        }
    }
#endif
    for (; p < end && is_digit(*p); p++) {
        *value = *value * 10 + (uint64_t)(*p - '0');
        (*count)++;
    }
    return p;
}

/* The number at d->p; d->p ends after it. The common shape (at most 19 digits, no exponent)
 * is read in one pass; anything else, errors included, goes to number_scan_exact. */
static enum ingest_reason number_scan(struct decoder *d, struct number *n)
{
    const char *p = d->p;
    const char *end = d->end;
    bool negative = *p == '-';
    const char *first = p + (negative ? 1 : 0);
    if (first == end || !is_digit(*first) ||
        (*first == '0' && first + 1 < end && is_digit(first[1]))) {
        return number_scan_exact(d, n);
    }
    uint64_t significand = 0;
    unsigned integer_digits = 0;
    unsigned fraction_digits = 0;
    p = digits_run(first, end, &significand, &integer_digits);
    const char *point = p;
    if (p < end && *p == '.') {
        p = digits_run(p + 1, end, &significand, &fraction_digits);
        if (fraction_digits == 0) {
            return number_scan_exact(d, n);
        }
    }
    if (integer_digits + fraction_digits > 19 || (p < end && (*p == 'e' || *p == 'E'))) {
        return number_scan_exact(d, n);
    }
    *n = (struct number){.significand = significand,
                         .exponent = -(int64_t)fraction_digits,
                         .negative = negative,
                         .integer = p == point};
    while (n->exponent < -4 && n->significand != 0 && n->significand % 10 == 0) {
        n->significand /= 10; /* the invariant: see struct number */
        n->exponent++;
    }
    d->p = p;
    return INGEST_OK;
}

/* The magnitude significand * 10^exponent when it is an integer not above max. */
static bool number_magnitude(const struct number *n, int64_t exponent, uint64_t max, uint64_t *out)
{
    uint64_t value = 0;
    if (n->significand == 0 && !n->overflow) {
        *out = 0;
        return true;
    }
    if (n->overflow || exponent < 0 || exponent >= (int64_t)DS_ARRAY_LEN(pow10_table) ||
        __builtin_mul_overflow(n->significand, pow10_table[exponent], &value) || value > max) {
        return false;
    }
    *out = value;
    return true;
}

/* ---- skipping values ------------------------------------------------------------------------ */

static enum ingest_reason literal_scan(struct decoder *d)
{
    static const char *const words[3] = {"true", "false", "null"};
    const char *word = *d->p == 't' ? words[0] : (*d->p == 'f' ? words[1] : words[2]);
    size_t n = strlen(word);
    for (size_t i = 0; i < n; i++) {
        if (d->p + i == d->end || d->p[i] != word[i]) {
            return fail(d, d->p + i, INGEST_NOT_JSON);
        }
    }
    d->p += n;
    return INGEST_OK;
}

/* A scalar value at d->p (string, number, literal). */
static enum ingest_reason scalar_skip(struct decoder *d)
{
    char c = *d->p;
    if (c == '"') {
        struct string_info info;
        return string_scan(d, false, &info);
    }
    if (c == '-' || is_digit(c)) {
        struct number n;
        return number_scan(d, &n);
    }
    if (c == 't' || c == 'f' || c == 'n') {
        return literal_scan(d);
    }
    return fail(d, d->p, INGEST_NOT_JSON);
}

/* After '{' or ',' inside an object: the key string and the colon, up to the value. */
static enum ingest_reason member_head_skip(struct decoder *d)
{
    if (d->p == d->end || *d->p != '"') {
        return fail(d, d->p, INGEST_NOT_JSON);
    }
    struct string_info info;
    enum ingest_reason r = string_scan(d, false, &info);
    if (r != INGEST_OK) {
        return r;
    }
    skip_blank(d);
    if (d->p == d->end || *d->p != ':') {
        return fail(d, d->p, INGEST_NOT_JSON);
    }
    d->p++;
    skip_blank(d);
    return INGEST_OK;
}

/* The bracket at d->p opens a container: push it, and consume it whole when it is empty.
 * *want_value tells whether a value comes next (false: the container closed at once). */
static enum ingest_reason container_open(struct decoder *d, bool *want_value)
{
    const char *at = d->p;
    bool object = *at == '{';
    if (d->depth == INGEST_DEPTH_MAX) {
        return fail(d, at, INGEST_TOO_DEEP);
    }
    uint64_t bit = 1ull << d->depth;
    d->objects = object ? d->objects | bit : d->objects & ~bit;
    d->depth++;
    d->p++;
    skip_blank(d);
    if (d->p < d->end && *d->p == (object ? '}' : ']')) {
        d->p++;
        d->depth--;
        *want_value = false;
        return INGEST_OK;
    }
    *want_value = true;
    return object ? member_head_skip(d) : INGEST_OK;
}

/* After a value inside a container: a comma (then *want_value) or the closing bracket. */
static enum ingest_reason container_next(struct decoder *d, bool *want_value)
{
    bool object = (d->objects >> (d->depth - 1)) & 1u;
    skip_blank(d);
    if (d->p == d->end) {
        return fail(d, d->p, INGEST_NOT_JSON);
    }
    if (*d->p == ',') {
        d->p++;
        skip_blank(d);
        *want_value = true;
        return object ? member_head_skip(d) : INGEST_OK;
    }
    if (*d->p != (object ? '}' : ']')) {
        return fail(d, d->p, INGEST_NOT_JSON);
    }
    d->p++;
    d->depth--;
    *want_value = false;
    return INGEST_OK;
}

/* Validates and skips the value at d->p, nested containers included, without recursion. Each
 * turn consumes at least one byte, so the loop is bounded by the input length. */
static enum ingest_reason value_skip(struct decoder *d)
{
    const uint32_t base = d->depth;
    bool want_value = true;
    for (;;) {
        enum ingest_reason r;
        if (want_value) {
            if (d->p == d->end) {
                return fail(d, d->p, INGEST_NOT_JSON);
            }
            if (*d->p == '{' || *d->p == '[') {
                r = container_open(d, &want_value);
            } else {
                r = scalar_skip(d);
                want_value = false;
            }
        } else if (d->depth == base) {
            return INGEST_OK;
        } else {
            r = container_next(d, &want_value);
        }
        if (r != INGEST_OK) {
            return r;
        }
    }
}

/* ---- timestamps (parsed in decode_ts.c) ---------------------------------------------------- */

/* Decodes an escaped ts string (already validated) into buf, dropping fraction digits beyond
 * the third, which change neither the verdict nor the value, so any valid RFC 3339 text fits.
 * Non-ASCII characters become 0x80, which no timestamp accepts. Returns the length, or
 * cap + 1 when the text does not fit (then it is not a timestamp). */
static size_t ts_unescape(const char *p, const char *close, char *buf, size_t cap)
{
    size_t n = 0;
    while (p < close && n < cap) {
        uint32_t value = 0;
        bool escape = false;
        p = unescape_next(p, &value, &escape);
        char c = value < 0x80 ? (char)value : (char)0x80;
        /* Once ".ddd" stands at 19..22, n stays 23 for as long as the fraction goes on. */
        bool fraction_tail = n == 23 && buf[19] == '.' && is_digit(buf[20]) && is_digit(buf[21]) &&
                             is_digit(buf[22]) && is_digit(c);
        if (!fraction_tail) {
            buf[n++] = c;
        }
    }
    return p < close ? cap + 1 : n;
}

/* ---- known fields --------------------------------------------------------------------------- */

struct id_reasons {
    enum ingest_reason bad;
    enum ingest_reason range;
};

static enum ingest_reason field_id(struct decoder *d, struct ds_id *id,
                                   const struct id_reasons *reasons)
{
    const char *at = d->p;
    if (*at == '"') {
        struct string_info info;
        enum ingest_reason r = string_scan(d, true, &info);
        if (r != INGEST_OK) {
            return r;
        }
        if (info.len == 0) {
            return fail(d, at, reasons->bad);
        }
        if (info.len > DS_ID_BYTES_MAX) {
            return fail(d, at, INGEST_STRING_TOO_LONG);
        }
        string_copy(&info, id->text, DS_ID_BYTES_MAX);
        id->is_string = true;
        id->len = (uint8_t)info.len;
        return INGEST_OK;
    }
    if (*at == '-' || is_digit(*at)) {
        struct number n;
        uint64_t value = 0;
        enum ingest_reason r = number_scan(d, &n);
        if (r != INGEST_OK) {
            return r;
        }
        if (!n.integer) {
            return fail(d, at, reasons->bad);
        }
        if (!number_magnitude(&n, n.exponent, INT64_MAX, &value) || value == 0 || n.negative) {
            return fail(d, at, reasons->range);
        }
        id->value = (int64_t)value;
        return INGEST_OK;
    }
    enum ingest_reason r = value_skip(d);
    return r != INGEST_OK ? r : fail(d, at, reasons->bad);
}

static enum ingest_reason field_ts_string(struct decoder *d)
{
    const char *at = d->p;
    char buf[DECODE_TS_TEXT_MAX];
    struct string_info info;
    enum ingest_reason r = string_scan(d, true, &info);
    if (r != INGEST_OK) {
        return r;
    }
    const char *text = info.raw; /* unescaped: the raw bytes are the text, however long */
    size_t len = info.raw_len;
    if (info.escaped) {
        text = buf;
        len = ts_unescape(info.raw, info.raw + info.raw_len, buf, sizeof(buf));
        if (len > sizeof(buf)) {
            return fail(d, at, INGEST_BAD_TS);
        }
    }
    r = decode_ts_parse(text, len, &d->event->ts_ms);
    return r != INGEST_OK ? fail(d, at, r) : INGEST_OK;
}

static enum ingest_reason field_ts(struct decoder *d)
{
    const char *at = d->p;
    if (*at == '"') {
        return field_ts_string(d);
    }
    if (*at == '-' || is_digit(*at)) {
        struct number n;
        uint64_t value = 0;
        enum ingest_reason r = number_scan(d, &n);
        if (r != INGEST_OK) {
            return r;
        }
        if (!n.integer) {
            return fail(d, at, INGEST_BAD_TS);
        }
        if (!number_magnitude(&n, n.exponent, (uint64_t)DS_TS_MS_MAX, &value) ||
            (n.negative && value != 0)) {
            return fail(d, at, INGEST_TS_RANGE);
        }
        d->event->ts_ms = (int64_t)value;
        return INGEST_OK;
    }
    enum ingest_reason r = value_skip(d);
    return r != INGEST_OK ? r : fail(d, at, INGEST_BAD_TS);
}

static enum ingest_reason field_order_date(struct decoder *d)
{
    const char *at = d->p;
    if (*at != '"') {
        enum ingest_reason r = value_skip(d);
        return r != INGEST_OK ? r : fail(d, at, INGEST_BAD_ORDER_DATE);
    }
    char buf[DS_DATE_TEXT_SIZE - 1];
    struct string_info info;
    enum ingest_reason r = string_scan(d, true, &info);
    if (r != INGEST_OK) {
        return r;
    }
    if (info.len != sizeof(buf)) {
        return fail(d, at, INGEST_BAD_ORDER_DATE);
    }
    string_copy(&info, buf, sizeof(buf));
    if (ds_date_parse(buf, sizeof(buf), &d->order_date_days) != 0) {
        return fail(d, at, INGEST_BAD_ORDER_DATE);
    }
    return INGEST_OK;
}

static enum ingest_reason field_status(struct decoder *d)
{
    const char *at = d->p;
    if (*at != '"') {
        enum ingest_reason r = value_skip(d);
        return r != INGEST_OK ? r : fail(d, at, INGEST_BAD_STATUS);
    }
    struct string_info info;
    enum ingest_reason r = string_scan(d, true, &info);
    if (r != INGEST_OK) {
        return r;
    }
    if (info.len > DS_STATUS_BYTES_MAX) {
        return fail(d, at, INGEST_STRING_TOO_LONG);
    }
    string_copy(&info, d->event->status, DS_STATUS_BYTES_MAX);
    d->event->status_len = (uint8_t)info.len;
    return INGEST_OK;
}

static enum ingest_reason field_amount(struct decoder *d)
{
    const char *at = d->p;
    if (*at != '-' && !is_digit(*at)) {
        enum ingest_reason r = value_skip(d);
        return r != INGEST_OK ? r : fail(d, at, INGEST_BAD_AMOUNT);
    }
    struct number n;
    uint64_t units = 0;
    enum ingest_reason r = number_scan(d, &n);
    if (r != INGEST_OK) {
        return r;
    }
    int64_t exponent = n.exponent + 4; /* units of 1/10000 */
    if ((n.significand != 0 || n.overflow) && exponent < 0) {
        return fail(d, at, INGEST_AMOUNT_PRECISION); /* the significand ends in a non-zero */
    }
    if (!number_magnitude(&n, exponent, INT64_MAX, &units)) {
        return fail(d, at, INGEST_AMOUNT_RANGE);
    }
    d->event->amount_units = n.negative ? -(int64_t)units : (int64_t)units;
    return INGEST_OK;
}

/* version: an integer 0..2^63-1 written as one (no fraction, exponent or minus sign, so "-0"
 * and 1e2 are bad_version like 1.5, "1" or null). */
static enum ingest_reason field_version(struct decoder *d)
{
    const char *at = d->p;
    if (*at != '-' && !is_digit(*at)) {
        enum ingest_reason r = value_skip(d);
        return r != INGEST_OK ? r : fail(d, at, INGEST_BAD_VERSION);
    }
    struct number n;
    uint64_t value = 0;
    enum ingest_reason r = number_scan(d, &n);
    if (r != INGEST_OK) {
        return r;
    }
    if (!n.integer || n.negative || !number_magnitude(&n, n.exponent, INT64_MAX, &value)) {
        return fail(d, at, INGEST_BAD_VERSION);
    }
    d->event->has_version = true;
    d->event->version = (int64_t)value;
    return INGEST_OK;
}

enum item_key { ITEM_KEY_UNKNOWN = 0, ITEM_KEY_PRODUCT, ITEM_KEY_QUANTITY };

/* The key string at d->p (already validated) as an item key; d->p ends after the colon and the
 * blanks that follow it. */
static enum item_key item_key_take(struct decoder *d)
{
    struct string_info info;
    enum ingest_reason r = string_scan(d, false, &info);
    ASSERT(r == INGEST_OK); /* the whole items value passed value_skip */
    char key[DECODE_KEY_BYTES_MAX];
    const char *text = info.raw;
    if (info.escaped && info.len <= sizeof(key)) {
        string_copy(&info, key, sizeof(key));
        text = key;
    }
    enum item_key k = ITEM_KEY_UNKNOWN;
    if (info.len == 7 && memcmp(text, "product", 7) == 0) {
        k = ITEM_KEY_PRODUCT;
    } else if (info.len == 8 && memcmp(text, "quantity", 8) == 0) {
        k = ITEM_KEY_QUANTITY;
    }
    skip_blank(d);
    ASSERT(d->p < d->end && *d->p == ':');
    d->p++;
    skip_blank(d);
    return k;
}

/* A product value at d->p: a string of 1..DS_ITEM_PRODUCT_BYTES_MAX bytes without NUL. */
static enum ingest_reason item_product(struct decoder *d, struct string_info *product)
{
    const char *at = d->p;
    if (*at != '"') {
        enum ingest_reason r = value_skip(d);
        return r != INGEST_OK ? r : fail(d, at, INGEST_BAD_ITEMS);
    }
    enum ingest_reason r = string_scan(d, true, product);
    if (r != INGEST_OK) {
        return r; /* an escaped NUL: bad_utf8, as in ids and status */
    }
    if (product->len == 0 || product->len > DS_ITEM_PRODUCT_BYTES_MAX) {
        return fail(d, at, INGEST_BAD_ITEMS);
    }
    return INGEST_OK;
}

/* A quantity value at d->p: an integer 1..DS_ITEM_QUANTITY_MAX written as one. */
static enum ingest_reason item_quantity(struct decoder *d, uint64_t *quantity)
{
    const char *at = d->p;
    if (*at != '-' && !is_digit(*at)) {
        enum ingest_reason r = value_skip(d);
        return r != INGEST_OK ? r : fail(d, at, INGEST_BAD_ITEMS);
    }
    struct number n;
    enum ingest_reason r = number_scan(d, &n);
    if (r != INGEST_OK) {
        return r;
    }
    if (!n.integer || n.negative ||
        !number_magnitude(&n, n.exponent, DS_ITEM_QUANTITY_MAX, quantity) || *quantity == 0) {
        return fail(d, at, INGEST_BAD_ITEMS);
    }
    return INGEST_OK;
}

/* Appends one item to the canonical bytes, when they are kept. */
static void item_append(struct decoder *d, const struct string_info *product, uint64_t quantity)
{
    if (d->items == NULL) {
        return;
    }
    uint8_t *out = d->items + d->items_bytes;
    ASSERT(d->items_bytes + 1u + product->len + 5u <= DS_ITEMS_BYTES_MAX);
    out[0] = (uint8_t)product->len;
    string_copy(product, (char *)out + 1, product->len);
    size_t n = 1u + product->len;
    n += ds_varint_put(out + n, quantity);
    d->items_bytes += n;
}

/* One element of an items array at d->p (valid JSON): an object with exactly one product and
 * one quantity; other keys are skipped. d->p ends after the element. */
static enum ingest_reason item_parse(struct decoder *d)
{
    const char *item_at = d->p;
    if (*item_at != '{') {
        enum ingest_reason r = value_skip(d);
        return r != INGEST_OK ? r : fail(d, item_at, INGEST_BAD_ITEMS);
    }
    struct string_info product = {0};
    uint64_t quantity = 0;
    unsigned seen = 0;
    d->p++;
    skip_blank(d);
    while (*d->p != '}') {
        const char *key_at = d->p;
        enum item_key key = item_key_take(d);
        enum ingest_reason r = INGEST_OK;
        if (key != ITEM_KEY_UNKNOWN && (seen & (1u << key)) != 0) {
            return fail(d, key_at, INGEST_BAD_ITEMS); /* a duplicated product or quantity */
        }
        seen |= 1u << key;
        r = key == ITEM_KEY_PRODUCT    ? item_product(d, &product)
            : key == ITEM_KEY_QUANTITY ? item_quantity(d, &quantity)
                                       : value_skip(d);
        if (r != INGEST_OK) {
            return r;
        }
        skip_blank(d);
        if (*d->p == ',') {
            d->p++;
            skip_blank(d);
        }
    }
    d->p++;
    if ((seen & (1u << ITEM_KEY_PRODUCT)) == 0 || (seen & (1u << ITEM_KEY_QUANTITY)) == 0) {
        return fail(d, item_at, INGEST_BAD_ITEMS);
    }
    item_append(d, &product, quantity);
    return INGEST_OK;
}

/* items: the whole value is first validated as JSON (value_skip: syntax, UTF-8, depth), then
 * its size is judged, then a second walk over the now valid text judges its meaning element by
 * element, left to right, and writes the canonical bytes. Two walks cost nothing to events
 * without items and keep "validity before meaning" exact for a nested value. */
static enum ingest_reason field_items(struct decoder *d)
{
    const char *at = d->p;
    enum ingest_reason r = value_skip(d);
    if (r != INGEST_OK) {
        return r;
    }
    const char *value_end = d->p;
    if (*at != '[') {
        return fail(d, at, INGEST_BAD_ITEMS);
    }
    if ((size_t)(value_end - at) > DS_ITEMS_JSON_BYTES_MAX) {
        return fail(d, at, INGEST_ITEMS_TOO_LARGE);
    }
    uint32_t depth = d->depth;
    d->depth = depth + 2; /* the array and an item: nested unknown values were checked above */
    d->items_bytes = d->items != NULL ? 1u : 0u;
    d->p = at + 1;
    skip_blank(d);
    uint32_t count = 0;
    while (r == INGEST_OK && *d->p != ']') {
        if (count == DS_ITEMS_COUNT_MAX) {
            return fail(d, d->p, INGEST_ITEMS_TOO_LARGE);
        }
        count++;
        r = item_parse(d);
        skip_blank(d);
        if (r == INGEST_OK && *d->p == ',') {
            d->p++;
            skip_blank(d);
        }
    }
    if (r != INGEST_OK) {
        return r;
    }
    ASSERT(d->p + 1 == value_end);
    d->p = value_end;
    d->depth = depth;
    if (d->items != NULL) {
        d->items[0] = (uint8_t)count;
    }
    return INGEST_OK;
}

/* ---- the object ----------------------------------------------------------------------------- */

static inline enum field field_lookup(const char *key, size_t len)
{
    switch (len) {
    case 2: return memcmp(key, "ts", 2) == 0 ? FIELD_TS : FIELD_UNKNOWN;
    case 5: return memcmp(key, "items", 5) == 0 ? FIELD_ITEMS : FIELD_UNKNOWN;
    case 6:
        if (key[0] == 's') {
            return memcmp(key, "status", 6) == 0 ? FIELD_STATUS : FIELD_UNKNOWN;
        }
        return memcmp(key, "amount", 6) == 0 ? FIELD_AMOUNT : FIELD_UNKNOWN;
    case 7: return memcmp(key, "version", 7) == 0 ? FIELD_VERSION : FIELD_UNKNOWN;
    case 8: return memcmp(key, "order_id", 8) == 0 ? FIELD_ORDER_ID : FIELD_UNKNOWN;
    case 10: return memcmp(key, "order_date", 10) == 0 ? FIELD_ORDER_DATE : FIELD_UNKNOWN;
    case 11: return memcmp(key, "customer_id", 11) == 0 ? FIELD_CUSTOMER_ID : FIELD_UNKNOWN;
    default: return FIELD_UNKNOWN;
    }
}

static enum ingest_reason field_parse(struct decoder *d, enum field field)
{
    static const struct id_reasons order_reasons = {INGEST_BAD_ORDER_ID, INGEST_ORDER_ID_RANGE};
    static const struct id_reasons customer_reasons = {INGEST_BAD_CUSTOMER_ID,
                                                       INGEST_CUSTOMER_ID_RANGE};
    if (d->p == d->end) {
        return fail(d, d->p, INGEST_NOT_JSON);
    }
    switch (field) {
    case FIELD_ORDER_ID: return field_id(d, &d->event->order_id, &order_reasons);
    case FIELD_CUSTOMER_ID: return field_id(d, &d->event->customer_id, &customer_reasons);
    case FIELD_TS: return field_ts(d);
    case FIELD_ORDER_DATE: return field_order_date(d);
    case FIELD_STATUS: return field_status(d);
    case FIELD_AMOUNT: return field_amount(d);
    case FIELD_VERSION: return field_version(d);
    case FIELD_ITEMS: return field_items(d);
    case FIELD_UNKNOWN: break;
    }
    return value_skip(d);
}

/* One "key": value member at d->p (the key's opening quote expected). */
static enum ingest_reason member_parse(struct decoder *d)
{
    const char *key_at = d->p;
    if (key_at == d->end || *key_at != '"') {
        return fail(d, key_at, INGEST_NOT_JSON);
    }
    struct string_info info;
    enum ingest_reason r = string_scan(d, false, &info);
    if (r != INGEST_OK) {
        return r;
    }
    enum field field = FIELD_UNKNOWN;
    if (!info.escaped) {
        field = field_lookup(info.raw, info.len);
    } else if (info.len <= DECODE_KEY_BYTES_MAX) {
        char key[DECODE_KEY_BYTES_MAX];
        string_copy(&info, key, sizeof(key));
        field = field_lookup(key, info.len);
    }
    if (field != FIELD_UNKNOWN) {
        if (d->seen & (1u << field)) {
            return fail(d, key_at, INGEST_DUPLICATE_FIELD);
        }
        d->seen |= 1u << field;
    }
    skip_blank(d);
    if (d->p == d->end || *d->p != ':') {
        return fail(d, d->p, INGEST_NOT_JSON);
    }
    d->p++;
    skip_blank(d);
    return field_parse(d, field);
}

/* The top-level object at d->p; d->p ends after its closing brace. */
static enum ingest_reason object_parse(struct decoder *d)
{
    d->p++;
    d->depth = 1;
    d->objects = 1;
    skip_blank(d);
    if (d->p < d->end && *d->p == '}') {
        d->p++;
        return INGEST_OK;
    }
    for (;;) {
        enum ingest_reason r = member_parse(d);
        if (r != INGEST_OK) {
            return r;
        }
        skip_blank(d);
        if (d->p == d->end) {
            return fail(d, d->p, INGEST_NOT_JSON);
        }
        if (*d->p == '}') {
            d->p++;
            return INGEST_OK;
        }
        if (*d->p != ',') {
            return fail(d, d->p, INGEST_NOT_JSON);
        }
        d->p++;
        skip_blank(d);
    }
}

/* Required fields, checked once everything else passed; order_date stands in for ts. */
static enum ingest_reason event_complete(struct decoder *d, const char *object_close)
{
    if (!(d->seen & (1u << FIELD_ORDER_ID))) {
        return fail(d, object_close, INGEST_MISSING_ORDER_ID);
    }
    if (!(d->seen & (1u << FIELD_CUSTOMER_ID))) {
        return fail(d, object_close, INGEST_MISSING_CUSTOMER_ID);
    }
    if (!(d->seen & (1u << FIELD_TS))) {
        if (!(d->seen & (1u << FIELD_ORDER_DATE))) {
            return fail(d, object_close, INGEST_MISSING_TS);
        }
        d->event->ts_ms = (int64_t)d->order_date_days * DS_DAY_MS;
    }
    ASSERT(d->event->ts_ms >= DS_TS_MS_MIN && d->event->ts_ms <= DS_TS_MS_MAX);
    return INGEST_OK;
}

static enum ingest_reason document_parse(struct decoder *d)
{
    skip_blank(d);
    const char *start = d->p;
    if (start == d->end) {
        return fail(d, start, INGEST_NOT_JSON); /* empty or only white space */
    }
    enum ingest_reason r = *start == '{' ? object_parse(d) : value_skip(d);
    if (r != INGEST_OK) {
        return r;
    }
    const char *value_end = d->p;
    skip_blank(d);
    if (d->p != d->end) {
        return fail(d, d->p, INGEST_TRAILING_GARBAGE);
    }
    if (*start != '{') {
        return fail(d, start, INGEST_NOT_OBJECT);
    }
    return event_complete(d, value_end - 1);
}

/* ingest_decode with the canonical items written to items (DS_ITEMS_BYTES_MAX), or not kept
 * when items is NULL. */
static int event_decode(const char *json, size_t len, uint8_t *items, struct ds_event *event,
                        struct ingest_error *error)
{
    ASSERT(event != NULL);
    ASSERT(error != NULL);
    ASSERT(json != NULL || len == 0);
    if (len > INGEST_EVENT_BYTES_MAX) {
        error->reason = INGEST_TOO_LARGE;
        error->byte_offset = INGEST_EVENT_BYTES_MAX;
        return -EINVAL;
    }
    if (len == 0) {
        error->reason = INGEST_NOT_JSON;
        error->byte_offset = 0;
        return -EINVAL;
    }
    /* Member by member: a memset of the whole struct becomes "rep stos", slow to start on AMD. */
    event->order_id = (struct ds_id){.is_string = false};
    event->customer_id = (struct ds_id){.is_string = false};
    event->ts_ms = 0;
    event->amount_units = 0;
    event->status_len = 0;
    memset(event->status, 0, sizeof(event->status));
    event->has_version = false;
    event->retract = false; /* only the orders-model writer makes retractions */
    event->version = 0;
    event->items_bytes = 0;
    event->items = NULL;
    struct decoder d = {
        .begin = json, .p = json, .end = json + len, .event = event, .items = items};
    enum ingest_reason r = document_parse(&d);
    if (r != INGEST_OK) {
        error->reason = r;
        error->byte_offset = (size_t)(d.error_at - json);
        ASSERT(error->byte_offset <= len);
        return -EINVAL;
    }
    if (items != NULL && (d.seen & (1u << FIELD_ITEMS)) != 0) {
        ASSERT(d.items_bytes >= 1 && d.items_bytes <= DS_ITEMS_BYTES_MAX);
        event->items = items;
        event->items_bytes = (uint16_t)d.items_bytes;
    }
    error->reason = INGEST_OK;
    error->byte_offset = 0;
    return 0;
}

int ingest_decode(const char *json, size_t len, struct ds_event *event, struct ingest_error *error)
{
    return event_decode(json, len, NULL, event, error);
}

int ingest_decoder_decode(struct ingest_decoder *decoder, const char *json, size_t len,
                          struct ds_event *event, struct ingest_error *error)
{
    ASSERT(decoder != NULL);
    return event_decode(json, len, decoder->items, event, error);
}

/* The fast path of ingest_decode_order_id: the first member, when it is "order_id" spelled
 * without escapes and its value is a valid id. */
static bool order_id_first(struct decoder *d, struct ds_id *order_id)
{
    static const struct id_reasons reasons = {INGEST_BAD_ORDER_ID, INGEST_ORDER_ID_RANGE};
    skip_blank(d);
    if (d->p == d->end || *d->p != '{') {
        return false;
    }
    d->p++;
    d->depth = 1;
    d->objects = 1;
    skip_blank(d);
    struct string_info info;
    if (d->p == d->end || *d->p != '"' || string_scan(d, false, &info) != INGEST_OK ||
        info.escaped || field_lookup(info.raw, info.len) != FIELD_ORDER_ID) {
        return false;
    }
    skip_blank(d);
    if (d->p == d->end || *d->p != ':') {
        return false;
    }
    d->p++;
    skip_blank(d);
    return d->p != d->end && field_id(d, order_id, &reasons) == INGEST_OK;
}

int ingest_decode_order_id(const char *json, size_t len, struct ds_id *order_id)
{
    ASSERT(order_id != NULL);
    ASSERT(json != NULL || len == 0);
    if (len > 0 && len <= INGEST_EVENT_BYTES_MAX) {
        struct ds_event scratch;
        *order_id = (struct ds_id){.is_string = false};
        struct decoder d = {.begin = json, .p = json, .end = json + len, .event = &scratch};
        if (order_id_first(&d, order_id)) {
            return 0;
        }
    }
    struct ds_event event;
    struct ingest_error error;
    if (ingest_decode(json, len, &event, &error) != 0) {
        return -EINVAL;
    }
    *order_id = event.order_id;
    return 0;
}
