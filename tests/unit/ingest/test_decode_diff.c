/*
 * Differential test of ingest_decode against an oracle built on libjansson.
 *
 * Inputs: random events (valid and subtly invalid), random token soup, and mutations of events
 * (bit flips, byte replacements, insertions, deletions, truncations, duplicated slices). For each
 * input the oracle says accept or reject and, when it accepts, gives every field value; the
 * decoder must agree on the verdict and on every value. Reasons are not compared: jansson reports
 * different ones, and the unit test pins ours down.
 *
 * How the oracle decides (docs/EVENTS.md applied in test code, independently of decode.c):
 * 1. more than INGEST_EVENT_BYTES_MAX bytes: reject;
 * 2. JSON validity: a raw NUL byte anywhere is invalid (RFC 8259: outside strings it is no
 *    token, inside it is an unescaped control character); the oracle checks this itself because
 *    jansson 2.14 silently skips a NUL right after a number or literal ("[1\0]" loads as [1]).
 *    Then json_loadb(JSON_DECODE_ANY | JSON_ALLOW_NUL), end-of-input check on. jansson is
 *    stricter than RFC 8259 in two places where our rule is the RFC's, so the oracle neutralises
 *    them and asks again: numbers too big for long long / double (code numeric_overflow) are
 *    valid JSON to us, so that token is replaced by a same-length " 0  "; and an escaped NUL in an
 *    object key (code null_byte_in_key) is valid to us, so every \u0000 escape becomes \u0001
 *    (validity does not change; the field values below come from the original text). Not
 *    JSON_REJECT_DUPLICATES: duplicated unknown keys are allowed, so duplicates of known keys are
 *    found by the member walk of step 5 instead;
 * 3. top level not an object: reject;
 * 4. nesting deeper than INGEST_DEPTH_MAX (top-level object counted): reject; jansson allows 2048;
 * 5. a walk over the (now known valid) text lists the top-level members in order; each key and
 *    string value is decoded by jansson on its own token; numbers are judged on their text with
 *    decimal string arithmetic (no binary floating point), timestamps with a POSIX regular
 *    expression plus timegm(3), dates the same way. Known string fields holding a NUL: reject.
 *    version: an integer token (no fraction, exponent or minus sign) up to 2^63-1. items: the
 *    token's text at most DS_ITEMS_JSON_BYTES_MAX bytes, an array of at most DS_ITEMS_COUNT_MAX
 *    objects, each with exactly one "product" (a string of 1..64 bytes without NUL) and one
 *    "quantity" (an integer token 1..2^31-1), other keys ignored; the oracle builds the
 *    canonical bytes itself (struct ds_event.items in common/common.h) and the decoder's, from
 *    ingest_decoder_decode, must be identical.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/common.h"
#include "ingest/ingest.h"

#define DIFF_TEXT_BYTES_MAX 16384u
#define DIFF_MEMBERS_MAX 64u
#define DIFF_DEPTH_ORACLE_MAX 4096u
/* Members of one item: an 8 KiB items value holds fewer than 2048. */
#define DIFF_ITEM_MEMBERS_MAX 4096u

/* ---- random numbers ------------------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t *state, uint64_t bound)
{
    return bound == 0 ? 0 : rng_next(state) % bound;
}

static bool rng_chance(uint64_t *state, uint64_t one_in)
{
    return rng_below(state, one_in) == 0;
}

static uint64_t test_seed(const char *test_name)
{
    uint64_t seed = 0x6469666664696666ull;
    const char *env = getenv("DS_TEST_SEED");
    if (env != NULL && *env != '\0') {
        seed = strtoull(env, NULL, 0);
    }
    printf("%s: seed %" PRIu64 " (replay with DS_TEST_SEED=%" PRIu64 ")\n", test_name, seed, seed);
    return seed;
}

static size_t case_count(size_t fallback)
{
    const char *env = getenv("DS_DIFF_CASES");
    return env != NULL && *env != '\0' ? (size_t)strtoull(env, NULL, 0) : fallback;
}

/* ---- the oracle ----------------------------------------------------------------------------- */

struct verdict {
    bool accept;
    const char *why; /* for failure messages */
    struct ds_event event;
    size_t items_bytes; /* canonical items, 0 when the event has none */
    uint8_t items[DS_ITEMS_BYTES_MAX];
};

static bool reject(struct verdict *v, const char *why)
{
    v->accept = false;
    v->why = why;
    return false;
}

/* Replaces every real \u0000 escape by \u0001 (a backslash always takes the next byte with it). */
static void neutralise_nul_escapes(char *text, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (text[i] != '\\') {
            continue;
        }
        if (text[i + 1] == 'u' && i + 5 < len && memcmp(text + i + 2, "0000", 4) == 0) {
            text[i + 5] = '1';
        }
        i++;
    }
}

/* The number token ending just before `end` becomes " 0" and spaces. The walk back follows the
 * number grammar, because jansson lexes the overflowing token before its parser sees that it
 * follows another one ("[3192-1e999]": only "-1e999" is the token). */
static void neutralise_number(char *text, size_t end)
{
    size_t start = end;
    while (start > 0) {
        char c = text[start - 1];
        bool after_e = start >= 2 && (text[start - 2] == 'e' || text[start - 2] == 'E');
        if ((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' ||
            ((c == '-' || c == '+') && after_e)) {
            start--;
            continue;
        }
        start -= c == '-'; /* the leading sign */
        break;
    }
    assert_true(start + 2 <= end); /* an overflowing number has at least 5 bytes ("1e999") */
    memset(text + start, ' ', end - start);
    text[start + 1] = '0'; /* a blank first, so it cannot join a token before it */
}

/* Step 2 and 3: whether jansson (with the two neutralisations) accepts, and is it an object. */
static bool oracle_json_valid(const char *json, size_t len, bool *is_object)
{
    char *copy = malloc(len + 1);
    assert_non_null(copy);
    memcpy(copy, json, len);
    bool valid = false;
    for (int attempt = 0; attempt < 1000; attempt++) {
        json_error_t error;
        json_t *root = json_loadb(copy, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &error);
        if (root != NULL) {
            *is_object = json_is_object(root);
            json_decref(root);
            valid = true;
            break;
        }
        enum json_error_code code = json_error_code(&error);
        if (code == json_error_null_byte_in_key) {
            neutralise_nul_escapes(copy, len);
        } else if (code == json_error_numeric_overflow) {
            assert_true(error.position > 0 && (size_t)error.position <= len);
            neutralise_number(copy, (size_t)error.position);
        } else {
            break;
        }
    }
    free(copy);
    return valid;
}

/* Walking text already known to be valid JSON. */
static size_t walk_blank(const char *s, size_t i, size_t n)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) {
        i++;
    }
    return i;
}

static size_t walk_string(const char *s, size_t i)
{
    for (i++; s[i] != '"'; i++) {
        if (s[i] == '\\') {
            i++;
        }
    }
    return i + 1;
}

static size_t walk_value(const char *s, size_t i, size_t n)
{
    if (s[i] == '"') {
        return walk_string(s, i);
    }
    if (s[i] != '{' && s[i] != '[') {
        while (i < n && strchr(",}] \t\r\n", s[i]) == NULL) {
            i++;
        }
        return i;
    }
    size_t depth = 0;
    do {
        if (s[i] == '"') {
            i = walk_string(s, i);
            continue;
        }
        depth += s[i] == '{' || s[i] == '[';
        depth -= s[i] == '}' || s[i] == ']';
        i++;
    } while (depth > 0);
    return i;
}

static size_t walk_max_depth(const char *s, size_t n)
{
    size_t depth = 0;
    size_t max = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] == '"') {
            i = walk_string(s, i);
            continue;
        }
        depth += s[i] == '{' || s[i] == '[';
        depth -= s[i] == '}' || s[i] == ']';
        max = depth > max ? depth : max;
        i++;
    }
    return max;
}

struct member {
    size_t key_at, key_len;
    size_t value_at, value_len;
};

/* Top-level members of the valid object text. */
static size_t walk_members(const char *s, size_t n, struct member *members, size_t capacity)
{
    size_t count = 0;
    size_t i = walk_blank(s, 0, n) + 1;
    for (;;) {
        i = walk_blank(s, i, n);
        if (s[i] == '}') {
            return count;
        }
        assert_true(count < capacity);
        struct member *m = &members[count++];
        m->key_at = i;
        i = walk_string(s, i);
        m->key_len = i - m->key_at;
        i = walk_blank(s, i, n) + 1; /* the colon */
        m->value_at = walk_blank(s, i, n);
        i = walk_value(s, m->value_at, n);
        m->value_len = i - m->value_at;
        i = walk_blank(s, i, n);
        if (s[i] == ',') {
            i++;
        }
    }
}

static const char *debug_input;
static size_t debug_len;
static void print_input(const char *json, size_t len);

/* A string token decoded by jansson into dst (NUL-terminated for convenience); the length. */
static size_t token_string(const char *token, size_t len, char *dst, size_t capacity)
{
    json_error_t error;
    json_t *value = json_loadb(token, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &error);
    if (value == NULL) {
        print_error("oracle: jansson refuses the token %.*s: %s\n", (int)len, token, error.text);
        print_input(debug_input, debug_len);
    }
    assert_non_null(value);
    assert_true(json_is_string(value));
    size_t n = json_string_length(value);
    assert_true(n < capacity);
    memcpy(dst, json_string_value(value), n);
    dst[n] = '\0';
    json_decref(value);
    return n;
}

/* A number token as decimal strings: sign, all mantissa digits, fraction digit count, exponent
 * (saturated at +-10^9). */
struct decimal {
    bool negative;
    bool integer;
    char digits[DIFF_TEXT_BYTES_MAX];
    long long point; /* value = digits * 10^point */
};

static void token_decimal(const char *t, size_t len, struct decimal *d)
{
    size_t i = 0;
    size_t n = 0;
    long long fraction = 0;
    long long exponent = 0;
    d->negative = t[0] == '-';
    d->integer = true;
    i += d->negative;
    for (; i < len && t[i] >= '0' && t[i] <= '9'; i++) {
        d->digits[n++] = t[i];
    }
    if (i < len && t[i] == '.') {
        d->integer = false;
        for (i++; i < len && t[i] >= '0' && t[i] <= '9'; i++) {
            d->digits[n++] = t[i];
            fraction++;
        }
    }
    if (i < len && (t[i] == 'e' || t[i] == 'E')) {
        d->integer = false;
        i++;
        bool negative = t[i] == '-';
        i += t[i] == '-' || t[i] == '+';
        for (; i < len; i++) {
            exponent = exponent < 1000000000 ? exponent * 10 + (t[i] - '0') : exponent;
        }
        exponent = negative ? -exponent : exponent;
    }
    d->digits[n] = '\0';
    d->point = exponent - fraction;
}

/* digits * 10^point as an integer not above max_text (a decimal string); -1 when not an integer,
 * -2 when above. Zero is fine. */
static int decimal_value(const struct decimal *d, long long point, const char *max_text,
                         uint64_t *out)
{
    const char *digits = d->digits;
    while (*digits == '0') {
        digits++;
    }
    size_t n = strlen(digits);
    if (n == 0) {
        *out = 0;
        return 0;
    }
    while (digits[n - 1] == '0') {
        n--;
        point++;
    }
    if (point < 0) {
        return -1;
    }
    if ((long long)n + point > (long long)strlen(max_text)) {
        return -2;
    }
    char text[32];
    memcpy(text, digits, n);
    memset(text + n, '0', (size_t)point);
    text[n + (size_t)point] = '\0';
    if (strlen(text) == strlen(max_text) && strcmp(text, max_text) > 0) {
        return -2;
    }
    *out = strtoull(text, NULL, 10);
    return 0;
}

static bool oracle_id(const char *token, size_t len, struct ds_id *id, struct verdict *v)
{
    memset(id, 0, sizeof(*id));
    if (token[0] == '"') {
        char text[DIFF_TEXT_BYTES_MAX];
        size_t n = token_string(token, len, text, sizeof(text));
        if (n == 0 || n > DS_ID_BYTES_MAX || memchr(text, '\0', n) != NULL) {
            return reject(v, "id string");
        }
        id->is_string = true;
        id->len = (uint8_t)n;
        memcpy(id->text, text, n);
        return true;
    }
    if (token[0] != '-' && (token[0] < '0' || token[0] > '9')) {
        return reject(v, "id type");
    }
    struct decimal d;
    uint64_t value = 0;
    token_decimal(token, len, &d);
    if (!d.integer || decimal_value(&d, d.point, "9223372036854775807", &value) != 0 ||
        value == 0 || d.negative) {
        return reject(v, "id number");
    }
    id->value = (int64_t)value;
    return true;
}

static int days_in_month(int year, int month)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    return days[month - 1] + (month == 2 && leap);
}

static int match_int(const char *s, const regmatch_t *m)
{
    int value = 0;
    for (regoff_t i = m->rm_so; i < m->rm_eo; i++) {
        value = value * 10 + (s[i] - '0');
    }
    return value;
}

/* Seconds since the epoch by timegm(3), which must not have normalised anything. */
static bool civil_seconds(int year, int month, int day, int hour, int minute, int second,
                          long long *out)
{
    if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month) || hour > 23 ||
        minute > 59 || second > 59) {
        return false;
    }
    struct tm tm = {.tm_year = year - 1900,
                    .tm_mon = month - 1,
                    .tm_mday = day,
                    .tm_hour = hour,
                    .tm_min = minute,
                    .tm_sec = second};
    time_t t = timegm(&tm);
    assert_int_equal(tm.tm_mday, day);
    assert_int_equal(tm.tm_mon, month - 1);
    *out = (long long)t;
    return true;
}

static regex_t ts_regex;
static regex_t date_regex;

static bool oracle_ts_text(const char *text, int64_t *ts_ms)
{
    regmatch_t m[9];
    if (regexec(&ts_regex, text, 9, m, 0) != 0) {
        return false;
    }
    long long seconds = 0;
    if (!civil_seconds(match_int(text, &m[1]), match_int(text, &m[2]), match_int(text, &m[3]),
                       match_int(text, &m[4]), match_int(text, &m[5]), match_int(text, &m[6]),
                       &seconds)) {
        return false;
    }
    long long ms = 0;
    if (m[7].rm_so >= 0) {
        char fraction[4] = "000";
        regoff_t digits = m[7].rm_eo - m[7].rm_so - 1;
        memcpy(fraction, text + m[7].rm_so + 1, (size_t)(digits < 3 ? digits : 3));
        ms = atoi(fraction);
    }
    long long offset_minutes = 0;
    const char *zone = text + m[8].rm_so;
    if (*zone == '+' || *zone == '-') {
        int hours = (zone[1] - '0') * 10 + (zone[2] - '0');
        int minutes = (zone[4] - '0') * 10 + (zone[5] - '0');
        if (hours > 23 || minutes > 59) {
            return false;
        }
        offset_minutes = (*zone == '-' ? -1 : 1) * (hours * 60 + minutes);
    }
    *ts_ms = seconds * 1000 + ms - offset_minutes * 60000;
    return true;
}

static bool oracle_ts(const char *token, size_t len, struct verdict *v)
{
    if (token[0] == '"') {
        char text[DIFF_TEXT_BYTES_MAX];
        size_t n = token_string(token, len, text, sizeof(text));
        if (memchr(text, '\0', n) != NULL) {
            return reject(v, "ts NUL");
        }
        if (!oracle_ts_text(text, &v->event.ts_ms)) {
            return reject(v, "ts text");
        }
        if (v->event.ts_ms < DS_TS_MS_MIN || v->event.ts_ms > DS_TS_MS_MAX) {
            return reject(v, "ts text range");
        }
        return true;
    }
    if (token[0] != '-' && (token[0] < '0' || token[0] > '9')) {
        return reject(v, "ts type");
    }
    struct decimal d;
    uint64_t value = 0;
    token_decimal(token, len, &d);
    if (!d.integer || decimal_value(&d, d.point, "253402300799999", &value) != 0 ||
        (d.negative && value != 0)) {
        return reject(v, "ts number");
    }
    v->event.ts_ms = (int64_t)value;
    return true;
}

static bool oracle_order_date(const char *token, size_t len, int64_t *ts_ms, struct verdict *v)
{
    char text[DIFF_TEXT_BYTES_MAX];
    regmatch_t m[4];
    long long seconds = 0;
    if (token[0] != '"') {
        return reject(v, "order_date type");
    }
    size_t n = token_string(token, len, text, sizeof(text));
    if (memchr(text, '\0', n) != NULL || regexec(&date_regex, text, 4, m, 0) != 0 ||
        match_int(text, &m[1]) < 1970 ||
        !civil_seconds(match_int(text, &m[1]), match_int(text, &m[2]), match_int(text, &m[3]), 0, 0,
                       0, &seconds)) {
        return reject(v, "order_date");
    }
    *ts_ms = seconds * 1000;
    return true;
}

static bool oracle_status(const char *token, size_t len, struct verdict *v)
{
    char text[DIFF_TEXT_BYTES_MAX];
    if (token[0] != '"') {
        return reject(v, "status type");
    }
    size_t n = token_string(token, len, text, sizeof(text));
    if (n > DS_STATUS_BYTES_MAX || memchr(text, '\0', n) != NULL) {
        return reject(v, "status");
    }
    v->event.status_len = (uint8_t)n;
    memcpy(v->event.status, text, n);
    return true;
}

static bool oracle_amount(const char *token, size_t len, struct verdict *v)
{
    if (token[0] != '-' && (token[0] < '0' || token[0] > '9')) {
        return reject(v, "amount type");
    }
    struct decimal d;
    uint64_t units = 0;
    token_decimal(token, len, &d);
    if (decimal_value(&d, d.point + 4, "9223372036854775807", &units) != 0) {
        return reject(v, "amount value");
    }
    v->event.amount_units = d.negative ? -(int64_t)units : (int64_t)units;
    return true;
}

static bool oracle_version(const char *token, size_t len, struct verdict *v)
{
    if (token[0] != '-' && (token[0] < '0' || token[0] > '9')) {
        return reject(v, "version type");
    }
    struct decimal d;
    uint64_t value = 0;
    token_decimal(token, len, &d);
    if (!d.integer || d.negative ||
        decimal_value(&d, d.point, "9223372036854775807", &value) != 0) {
        return reject(v, "version value");
    }
    v->event.has_version = true;
    v->event.version = (int64_t)value;
    return true;
}

/* One member of an item: a product or quantity value checked and noted. */
static bool oracle_item_member(const char *item, const struct member *m, char *product,
                               size_t *product_len, uint64_t *quantity, unsigned *seen,
                               struct verdict *v)
{
    char key[DIFF_TEXT_BYTES_MAX];
    size_t key_len = token_string(item + m->key_at, m->key_len, key, sizeof(key));
    const char *token = item + m->value_at;
    unsigned which = key_len == 7 && memcmp(key, "product", 7) == 0    ? 1u
                     : key_len == 8 && memcmp(key, "quantity", 8) == 0 ? 2u
                                                                       : 0u;
    if (which == 0) {
        return true;
    }
    if (*seen & which) {
        return reject(v, "item duplicate");
    }
    *seen |= which;
    if (which == 1) {
        char text[DIFF_TEXT_BYTES_MAX];
        if (token[0] != '"') {
            return reject(v, "product type");
        }
        size_t n = token_string(token, m->value_len, text, sizeof(text));
        if (n == 0 || n > DS_ITEM_PRODUCT_BYTES_MAX || memchr(text, '\0', n) != NULL) {
            return reject(v, "product");
        }
        memcpy(product, text, n);
        *product_len = n;
        return true;
    }
    struct decimal d;
    if (token[0] != '-' && (token[0] < '0' || token[0] > '9')) {
        return reject(v, "quantity type");
    }
    token_decimal(token, m->value_len, &d);
    if (!d.integer || d.negative || decimal_value(&d, d.point, "2147483647", quantity) != 0 ||
        *quantity == 0) {
        return reject(v, "quantity value");
    }
    return true;
}

/* One element of items, appended to the canonical bytes when valid. */
static bool oracle_item(const char *item, size_t len, struct verdict *v)
{
    if (item[0] != '{') {
        return reject(v, "item type");
    }
    struct member *members = malloc(DIFF_ITEM_MEMBERS_MAX * sizeof(*members));
    assert_non_null(members);
    size_t count = walk_members(item, len, members, DIFF_ITEM_MEMBERS_MAX);
    char product[DS_ITEM_PRODUCT_BYTES_MAX];
    size_t product_len = 0;
    uint64_t quantity = 0;
    unsigned seen = 0;
    bool ok = true;
    for (size_t i = 0; i < count && ok; i++) {
        ok = oracle_item_member(item, &members[i], product, &product_len, &quantity, &seen, v);
    }
    free(members);
    if (!ok) {
        return false;
    }
    if (seen != 3u) {
        return reject(v, "item incomplete");
    }
    uint8_t *out = v->items + v->items_bytes;
    out[0] = (uint8_t)product_len;
    memcpy(out + 1, product, product_len);
    size_t n = 1 + product_len;
    for (; quantity >= 128; quantity /= 128) {
        out[n++] = (uint8_t)(128 + quantity % 128);
    }
    out[n++] = (uint8_t)quantity;
    v->items_bytes += n;
    return true;
}

static bool oracle_items(const char *token, size_t len, struct verdict *v)
{
    if (len > DS_ITEMS_JSON_BYTES_MAX) {
        return reject(v, "items size");
    }
    if (token[0] != '[') {
        return reject(v, "items type");
    }
    size_t count = 0;
    v->items_bytes = 1;
    for (size_t i = walk_blank(token, 1, len); token[i] != ']';) {
        size_t at = i;
        i = walk_value(token, i, len);
        if (++count > DS_ITEMS_COUNT_MAX) {
            return reject(v, "items count");
        }
        if (!oracle_item(token + at, i - at, v)) {
            return false;
        }
        i = walk_blank(token, i, len);
        i = walk_blank(token, i + (token[i] == ','), len);
    }
    v->items[0] = (uint8_t)count;
    return true;
}

static const char *const known_names[] = {"order_id", "customer_id", "ts",      "order_date",
                                          "status",   "amount",      "version", "items"};

static bool oracle_member(const char *json, const struct member *m, size_t field, int64_t *date_ms,
                          struct verdict *v)
{
    const char *token = json + m->value_at;
    switch (field) {
    case 0: return oracle_id(token, m->value_len, &v->event.order_id, v);
    case 1: return oracle_id(token, m->value_len, &v->event.customer_id, v);
    case 2: return oracle_ts(token, m->value_len, v);
    case 3: return oracle_order_date(token, m->value_len, date_ms, v);
    case 4: return oracle_status(token, m->value_len, v);
    case 5: return oracle_amount(token, m->value_len, v);
    case 6: return oracle_version(token, m->value_len, v);
    default: return oracle_items(token, m->value_len, v);
    }
}

/* Step 5: the top-level members against the field rules. */
static bool oracle_fields(const char *json, size_t len, struct verdict *v)
{
    struct member members[DIFF_MEMBERS_MAX];
    size_t count = walk_members(json, len, members, DIFF_MEMBERS_MAX);
    bool seen[DS_ARRAY_LEN(known_names)] = {false};
    int64_t date_ms = 0;
    for (size_t i = 0; i < count; i++) {
        char key[DIFF_TEXT_BYTES_MAX];
        size_t key_len =
            token_string(json + members[i].key_at, members[i].key_len, key, sizeof(key));
        size_t field = 0;
        while (field < DS_ARRAY_LEN(known_names) &&
               (strlen(known_names[field]) != key_len ||
                memcmp(known_names[field], key, key_len) != 0)) {
            field++;
        }
        if (field == DS_ARRAY_LEN(known_names)) {
            continue;
        }
        if (seen[field]) {
            return reject(v, "duplicate");
        }
        seen[field] = true;
        if (!oracle_member(json, &members[i], field, &date_ms, v)) {
            return false;
        }
    }
    if (!seen[0] || !seen[1] || (!seen[2] && !seen[3])) {
        return reject(v, "missing");
    }
    if (!seen[2]) {
        v->event.ts_ms = date_ms;
    }
    return true;
}

static void oracle(const char *json, size_t len, struct verdict *v)
{
    memset(v, 0, sizeof(*v));
    v->accept = true;
    bool is_object = false;
    if (len > INGEST_EVENT_BYTES_MAX) {
        reject(v, "too large");
    } else if (memchr(json, '\0', len) != NULL) {
        reject(v, "raw NUL");
    } else if (!oracle_json_valid(json, len, &is_object)) {
        reject(v, "jansson");
    } else if (!is_object) {
        reject(v, "not object");
    } else if (walk_max_depth(json, len) > INGEST_DEPTH_MAX) {
        reject(v, "depth");
    } else {
        oracle_fields(json, len, v);
    }
}

/* ---- comparing ------------------------------------------------------------------------------ */

static void print_input(const char *json, size_t len)
{
    print_error("input (%zu bytes): ", len);
    for (size_t i = 0; i < len && i < 2000; i++) {
        unsigned char c = (unsigned char)json[i];
        print_error(c >= 0x20 && c < 0x7f && c != '\\' ? "%c" : "\\x%02x", c);
    }
    print_error("\n");
}

static bool id_equal(const struct ds_id *a, const struct ds_id *b)
{
    return a->is_string == b->is_string && a->len == b->len && a->value == b->value &&
           memcmp(a->text, b->text, a->len) == 0;
}

struct diff_stats {
    size_t cases;
    size_t accepted;
    size_t by_reason[INGEST_REASON_COUNT];
};

static void diff_check(const char *json, size_t len, uint64_t seed, size_t index,
                       struct diff_stats *stats)
{
    struct verdict want;
    oracle(json, len, &want);
    struct ds_event got;
    struct ingest_error error = {.reason = INGEST_OK};
    struct ingest_decoder *decoder = malloc(sizeof(*decoder));
    assert_non_null(decoder);
    int rc = ingest_decoder_decode(decoder, json, len, &got, &error);
    stats->cases++;
    stats->by_reason[error.reason < INGEST_REASON_COUNT ? error.reason : 0]++;
    bool same = (rc == 0) == want.accept;
    if (same && rc == 0) {
        stats->accepted++;
        same = id_equal(&got.order_id, &want.event.order_id) &&
               id_equal(&got.customer_id, &want.event.customer_id) &&
               got.ts_ms == want.event.ts_ms && got.amount_units == want.event.amount_units &&
               got.status_len == want.event.status_len &&
               memcmp(got.status, want.event.status, got.status_len) == 0 &&
               got.has_version == want.event.has_version && got.version == want.event.version &&
               got.items_bytes == want.items_bytes &&
               (got.items_bytes == 0 || memcmp(got.items, want.items, got.items_bytes) == 0);
    }
    /* Plain ingest_decode gives the same verdict and keeps no items. */
    struct ds_event plain;
    struct ingest_error plain_error;
    if ((ingest_decode(json, len, &plain, &plain_error) == 0) != (rc == 0) ||
        (rc == 0 && (plain.items_bytes != 0 || plain.items != NULL)) ||
        (rc != 0 && plain_error.reason != error.reason)) {
        print_error("ingest_decode disagrees with ingest_decoder_decode\n");
        same = false;
    }
    free(decoder);
    if (rc != 0 && error.byte_offset > len) {
        same = false;
    }
    /* The producer's key: whatever the decoder accepts, ingest_decode_order_id must agree. */
    struct ds_id key;
    int key_rc = ingest_decode_order_id(json, len, &key);
    if (rc == 0 && (key_rc != 0 || !id_equal(&key, &got.order_id))) {
        print_error("ingest_decode_order_id disagrees with ingest_decode (rc %d)\n", key_rc);
        same = false;
    }
    if (!same) {
        print_input(json, len);
        print_error("DS_TEST_SEED=%" PRIu64 " case %zu: decoder %s (%s at %zu), oracle %s (%s)\n",
                    seed, index, rc == 0 ? "accepts" : "rejects", ingest_reason_name(error.reason),
                    error.byte_offset, want.accept ? "accepts" : "rejects",
                    want.why != NULL ? want.why : "-");
        if (rc == 0 && want.accept) {
            print_error("got ts %" PRId64 " amount %" PRId64 "; want ts %" PRId64 " amount %" PRId64
                        "\n",
                        got.ts_ms, got.amount_units, want.event.ts_ms, want.event.amount_units);
        }
        fail();
    }
}

static void stats_print(const char *name, const struct diff_stats *stats)
{
    printf("%s: %zu cases, %zu accepted; rejected:", name, stats->cases, stats->accepted);
    for (int r = 1; r < INGEST_REASON_COUNT; r++) {
        if (stats->by_reason[r] > 0) {
            printf(" %s=%zu", ingest_reason_name((enum ingest_reason)r), stats->by_reason[r]);
        }
    }
    printf("\n");
}

/* ---- generating ----------------------------------------------------------------------------- */

/* Generator state: the random stream, and whether to produce only valid events (so that their
 * mutations start from something the decoder accepts). */
struct gen {
    uint64_t rng;
    bool valid_only;
};

static uint64_t gen_below(struct gen *g, uint64_t bound)
{
    return rng_below(&g->rng, bound);
}

/* True one time in one_in; never when only valid output is wanted and this is a flaw. */
static bool gen_flaw(struct gen *g, uint64_t one_in)
{
    return !g->valid_only && rng_chance(&g->rng, one_in);
}

static bool gen_chance(struct gen *g, uint64_t one_in)
{
    return rng_chance(&g->rng, one_in);
}

struct text {
    char bytes[DIFF_TEXT_BYTES_MAX];
    size_t len;
};

static void put(struct text *t, const char *s)
{
    size_t n = strlen(s);
    if (t->len + n <= sizeof(t->bytes)) {
        memcpy(t->bytes + t->len, s, n);
        t->len += n;
    }
}

static void put_char(struct text *t, char c)
{
    if (t->len < sizeof(t->bytes)) {
        t->bytes[t->len++] = c;
    }
}

static void putf(struct text *t, const char *fmt, ...) DS_PRINTF(2, 3);
static void putf(struct text *t, const char *fmt, ...)
{
    char buf[256];
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, args);
    va_end(args);
    assert_true(n >= 0 && (size_t)n < sizeof(buf));
    put(t, buf);
}

static const char *pick(struct gen *g, const char *const *choices, size_t count)
{
    return choices[gen_below(g, count)];
}
#define PICK(g, array) pick(g, array, DS_ARRAY_LEN(array))

static void put_blank(struct gen *g, struct text *t)
{
    static const char *const blanks[] = {" ", " ", "  ", "\t", "\n", "\r\n", " \t "};
    if (gen_chance(g, 3)) {
        put(t, gen_flaw(g, 300) ? "\f" : PICK(g, blanks)); /* \f is not JSON white space */
    }
}

/* String content: mostly plain, with every kind of escape and UTF-8, rarely broken. An escaped
 * NUL only when allow_nul (it is valid outside the known fields). Each piece decodes to 1..4
 * bytes. */
static void put_string_body(struct gen *g, struct text *t, size_t pieces, bool allow_nul)
{
    static const char *const plain[] = {"a", "paid", "x", "0", " ", "-", "Z", "_", "\x7f", "/"};
    static const char *const special[] = {
        "\\\"",
        "\\\\",
        "\\/",
        "\\b",
        "\\f",
        "\\n",
        "\\r",
        "\\t",
        "\\u0041",
        "\\u00e9",
        "\\u00E9",
        "\\u20ac",
        "\\ud83d\\ude00",
        "\\uDBFF\\uDFFF",
        "\\u0001",
        "\\u001f",
        "\xc3\xa9",
        "\xe2\x82\xac",
        "\xf0\x9f\x98\x80",
        "\xf4\x8f\xbf\xbf",
        "\xed\x9f\xbf",
        "\xef\xbf\xbf",
        "\\u005f",
    };
    static const char *const broken[] = {
        "\\ud800",  "\\udc00",      "\\ud800\\u0041",
        "\\x",      "\\u12",        "\\u12G4",
        "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80",
        "\xff",     "\x80",         "\xc3",
        "\x01",     "\t",           "\\",
        "\\U0041",
    };
    for (size_t i = 0; i < pieces; i++) {
        uint64_t kind = gen_below(g, 100);
        if (kind < 75) {
            put(t, PICK(g, plain));
        } else if (kind < 97) {
            put(t, PICK(g, special));
        } else if (kind < 98) {
            put(t, allow_nul || gen_flaw(g, 2) ? "\\u0000" : "a");
        } else {
            put(t, g->valid_only ? "b" : PICK(g, broken));
        }
    }
}

static void put_string(struct gen *g, struct text *t, size_t pieces, bool allow_nul)
{
    put_char(t, '"');
    put_string_body(g, t, pieces, allow_nul);
    put_char(t, '"');
}

/* An integer: below max when valid_only (1..max for ids, 0..max for ts), else anything. */
static void put_integer_text(struct gen *g, struct text *t, uint64_t max, bool zero_ok)
{
    static const char *const edges[] = {"0",
                                        "-0",
                                        "1",
                                        "-1",
                                        "9223372036854775807",
                                        "9223372036854775808",
                                        "-9223372036854775808",
                                        "18446744073709551615",
                                        "18446744073709551616",
                                        "99999999999999999999999",
                                        "253402300799999",
                                        "253402300800000",
                                        "1768996800000"};
    if (gen_flaw(g, 6)) {
        put(t, PICK(g, edges));
        return;
    }
    uint64_t value = rng_next(&g->rng) >> gen_below(g, 64);
    if (g->valid_only) {
        value %= max;
        value += !zero_ok || gen_chance(g, 2);
        value = value > max ? max : value;
    }
    putf(t, "%s%" PRIu64, gen_flaw(g, 15) ? "-" : "", value);
}

/* Amount-like numbers of all shapes: 0..6 decimals, exponents, edges. Valid ones keep at most
 * four decimals and stay far inside the range. */
static void put_number(struct gen *g, struct text *t)
{
    static const char *const edges[] = {
        "1.23456",
        "0.00001",
        "1e15",
        "922337203685477.5808",
        "1e400",
        "1e-400",
        "123456789012345678901234567890",
        "-1e-5",
    };
    static const char *const valid_edges[] = {
        "9.99",
        "100",
        "1.5e1",
        "-2.25",
        "1.23450",
        "0.0001",
        "922337203685477.5807",
        "-922337203685477.5807",
        "0e99999",
        "-0.0",
        "1000000000000000000000e-17",
        "0.00000000000000000000000000001e25",
        "12345e-4",
        "1E+2",
        "5.00",
        "1.0",
        "-0",
        "0",
    };
    uint64_t kind = gen_below(g, 10);
    if (kind == 0) {
        put(t, gen_flaw(g, 2) ? PICK(g, edges) : PICK(g, valid_edges));
    } else if (kind < 4) {
        put_integer_text(g, t, 100000000000000u, true);
    } else {
        int decimals = (int)(1 + gen_below(g, g->valid_only ? 4 : 6));
        uint64_t fraction = gen_below(g, 1000000) % (decimals == 1   ? 10u
                                                     : decimals == 2 ? 100u
                                                     : decimals == 3 ? 1000u
                                                                     : 1000000u);
        putf(t, "%s%" PRIu64 ".%0*" PRIu64, gen_chance(g, 8) ? "-" : "", gen_below(g, 1000000),
             decimals, fraction);
        if (gen_flaw(g, 6)) {
            putf(t, "%c%s%d", gen_chance(g, 2) ? 'e' : 'E',
                 gen_chance(g, 2) ? "-" : (gen_chance(g, 2) ? "+" : ""), (int)gen_below(g, 25));
        }
    }
}

static int put_bounded(struct gen *g, int valid_count, int flawed_count, int offset)
{
    return offset + (int)gen_below(g, (uint64_t)(gen_flaw(g, 20) ? flawed_count : valid_count));
}

/* An RFC 3339 timestamp, valid or (unless valid_only) off in one field. */
static void put_ts_string(struct gen *g, struct text *t)
{
    static const char *const seps[] = {"T", "T", "T", "t", " "};
    static const char *const zones[] = {"Z",      "Z",      "z",      "+02:00", "-05:30",
                                        "+00:00", "-00:00", "+23:59", "-23:59"};
    static const char *const bad_zones[] = {"+24:00", "+01:60", "", "+0100", "UTC", "x"};
    int year = 1971 + (int)gen_below(g, 8000);
    if (!g->valid_only && gen_chance(g, 10)) {
        year = gen_chance(g, 2) ? (int)gen_below(g, 10000) : (gen_chance(g, 2) ? 9999 : 1970);
    }
    int month = put_bounded(g, 12, 13, 1);
    int day = put_bounded(g, 28, 31, 1);
    int hour = put_bounded(g, 24, 25, 0);
    int minute = put_bounded(g, 60, 61, 0);
    int second = put_bounded(g, 60, 61, 0);
    putf(t, "\"%04d-%02d-%02d%s%02d:%02d:%02d", year, month, day,
         gen_flaw(g, 50) ? "x" : PICK(g, seps), hour, minute, second);
    if (gen_chance(g, 3)) {
        put_char(t, '.');
        size_t digits = gen_chance(g, 10) ? 1 + gen_below(g, 60) : 1 + gen_below(g, 9);
        for (size_t i = 0; i < digits; i++) {
            put(t, gen_chance(g, 40) ? "\\u0035" : (char[2]){(char)('0' + gen_below(g, 10)), 0});
        }
    }
    put(t, gen_flaw(g, 30) ? PICK(g, bad_zones) : PICK(g, zones));
    put_char(t, '"');
}

static void put_date_string(struct gen *g, struct text *t)
{
    int year = 1970 + (int)gen_below(g, 8000);
    if (!g->valid_only && gen_chance(g, 10)) {
        year = (int)gen_below(g, 10000);
    }
    int month = put_bounded(g, 12, 14, 1) - (gen_flaw(g, 30) ? 1 : 0);
    int day = put_bounded(g, 28, 32, 1) - (gen_flaw(g, 30) ? 1 : 0);
    putf(t, gen_flaw(g, 20) ? "\"%d-%d-%d\"" : "\"%04d-%02d-%02d\"", year, month, day);
}

static void put_value(struct gen *g, struct text *t, size_t depth_budget);

static void put_container(struct gen *g, struct text *t, size_t depth_budget)
{
    bool object = gen_chance(g, 2);
    size_t count = gen_below(g, 4);
    put_char(t, object ? '{' : '[');
    for (size_t i = 0; i < count; i++) {
        if (i > 0) {
            put_char(t, ',');
        }
        put_blank(g, t);
        if (object) {
            put_string(g, t, gen_below(g, 4), true);
            put_blank(g, t);
            put_char(t, ':');
            put_blank(g, t);
        }
        put_value(g, t, depth_budget - 1);
        put_blank(g, t);
    }
    put_char(t, object ? '}' : ']');
}

/* Any JSON value; containers nest up to depth_budget (recursion is fine in test code). */
static void put_value(struct gen *g, struct text *t, size_t depth_budget)
{
    static const char *const literals[] = {"true", "false", "null"};
    uint64_t kind = gen_below(g, 10);
    if (depth_budget > 0 && kind < 3) {
        put_container(g, t, depth_budget);
    } else if (kind < 5) {
        put_string(g, t, gen_below(g, 8), true);
    } else if (kind < 8) {
        put_number(g, t);
    } else {
        put(t, PICK(g, literals));
    }
}

/* Nesting around the limit (within it when valid_only); the top-level object adds one. */
static void put_deep(struct gen *g, struct text *t)
{
    size_t depth = INGEST_DEPTH_MAX - 4 + gen_below(g, g->valid_only ? 4 : 8);
    for (size_t i = 0; i < depth; i++) {
        put(t, i % 2 ? "[" : "{\"k\":");
    }
    put(t, "0");
    for (size_t i = depth; i > 0; i--) {
        put(t, (i - 1) % 2 ? "]" : "}");
    }
}

static void put_id(struct gen *g, struct text *t)
{
    static const char *const odd[] = {"1.0", "1e2", "true", "null", "\"\"", "[]", "{}", "-5"};
    uint64_t kind = gen_below(g, 20);
    if (gen_flaw(g, 10)) {
        put(t, PICK(g, odd));
    } else if (kind < 12) {
        put_integer_text(g, t, (uint64_t)INT64_MAX, false);
    } else {
        size_t pieces = gen_flaw(g, 8) ? 60 + gen_below(g, 10) : 1 + gen_below(g, 12);
        put_string(g, t, pieces, false);
    }
}

/* One item: product and quantity (rarely missing or twice), unknown keys, shuffled. A valid
 * product has pieces_min + (0..pieces_spread - 1) pieces, or a random length when
 * pieces_spread is 0. */
static void put_item(struct gen *g, struct text *t, size_t pieces_min, size_t pieces_spread)
{
    static const char *const odd[] = {"[]", "1", "null", "{}", "\"p\""};
    if (gen_flaw(g, 40)) {
        put(t, PICK(g, odd));
        return;
    }
    size_t order[8];
    size_t count = 0;
    for (size_t k = 0; k < 2; k++) {
        if (!gen_flaw(g, 40)) {
            order[count++] = k;
        }
        if (gen_flaw(g, 60)) {
            order[count++] = k;
        }
    }
    for (size_t u = gen_below(g, 3) == 0 ? 1 + gen_below(g, 2) : 0; u > 0; u--) {
        order[count++] = 2;
    }
    for (size_t i = count; i > 1; i--) {
        size_t j = gen_below(g, i);
        size_t tmp = order[i - 1];
        order[i - 1] = order[j];
        order[j] = tmp;
    }
    put_char(t, '{');
    for (size_t i = 0; i < count; i++) {
        static const char *const keys[2][2] = {{"\"product\"", "\"pr\\u006fduct\""},
                                               {"\"quantity\"", "\"quantit\\u0079\""}};
        put_blank(g, t);
        if (order[i] == 2) {
            put_string(g, t, gen_below(g, 4), true);
        } else {
            put(t, keys[order[i]][gen_chance(g, 20)]);
        }
        put_blank(g, t);
        put_char(t, ':');
        put_blank(g, t);
        if (order[i] == 2 || gen_flaw(g, 25)) {
            put_value(g, t, 2);
        } else if (order[i] == 0) {
            size_t pieces = gen_flaw(g, 10)     ? (gen_chance(g, 2) ? 0 : 60 + gen_below(g, 10))
                            : pieces_spread > 0 ? pieces_min + gen_below(g, pieces_spread)
                            : gen_chance(g, 4)  ? 40 + gen_below(g, 20)
                                                : 1 + gen_below(g, 8);
            put_string(g, t, pieces, false);
        } else {
            put_integer_text(g, t, DS_ITEM_QUANTITY_MAX, false);
        }
        put_blank(g, t);
        if (i + 1 < count) {
            put_char(t, ',');
        }
    }
    put_char(t, '}');
}

/* An items array: usually a few items, sometimes about a hundred, then often all valid so the
 * count limit (over 100) and, with products of ~30-60 bytes, the 8 KiB limit are reached. */
static void put_items(struct gen *g, struct text *t)
{
    bool many = gen_chance(g, 15);
    size_t count = many ? 90 + gen_below(g, g->valid_only ? 11 : 15) : gen_below(g, 5);
    bool valid_only = g->valid_only;
    bool long_products = many && gen_chance(g, 3);
    g->valid_only = valid_only || (many && gen_chance(g, 2));
    put_char(t, '[');
    for (size_t i = 0; i < count; i++) {
        put_blank(g, t);
        put_item(g, t, long_products ? 12 : 1, many ? (long_products ? 12 : 2) : 0);
        put_blank(g, t);
        if (i + 1 < count) {
            put_char(t, ',');
        }
    }
    put_char(t, ']');
    g->valid_only = valid_only;
}

static void put_field_value(struct gen *g, struct text *t, size_t field)
{
    if (field >= 2 && gen_flaw(g, 12)) {
        put_value(g, t, 1); /* most likely the wrong type */
        return;
    }
    switch (field) {
    case 0:
    case 1: put_id(g, t); break;
    case 2:
        if (gen_chance(g, 4)) {
            put_integer_text(g, t, (uint64_t)DS_TS_MS_MAX, true);
        } else {
            put_ts_string(g, t);
        }
        break;
    case 3: put_date_string(g, t); break;
    case 4:
        put_string(g, t, gen_flaw(g, 8) ? 28 + gen_below(g, 10) : gen_below(g, 7), false);
        break;
    case 5: put_number(g, t); break;
    case 6:
        if (gen_flaw(g, 8)) {
            put_number(g, t);
        } else {
            put_integer_text(g, t, (uint64_t)INT64_MAX, true);
        }
        break;
    default: put_items(g, t); break;
    }
}

static void put_key(struct gen *g, struct text *t, size_t field)
{
    static const char *const spelled[] = {"order\\u005fid",   "customer\\u005fid", "\\u0074s",
                                          "order_\\u0064ate", "st\\u0061tus",      "\\u0061mount",
                                          "v\\u0065rsion",    "\\u0069tems"};
    putf(t, "\"%s\"", gen_chance(g, 25) ? spelled[field] : known_names[field]);
}

/* An event: known fields mostly present (rarely twice), unknown fields among them, shuffled. */
static void put_event(struct gen *g, struct text *t)
{
    size_t order[24];
    size_t count = 0;
    static const uint64_t present_one_in[] = {1, 1, 1, 3, 2, 2, 3, 3}; /* by field */
    bool ts_present = false;
    for (size_t f = 0; f < DS_ARRAY_LEN(known_names); f++) {
        bool present = f == 2 ? !gen_chance(g, 5) : gen_chance(g, present_one_in[f]);
        if (g->valid_only && f == 3 && !ts_present) {
            present = true; /* no ts: order_date stands in */
        }
        if (present && !gen_flaw(g, 40)) {
            order[count++] = f;
            ts_present |= f == 2;
        }
        if (gen_flaw(g, 60)) {
            order[count++] = f; /* a duplicate */
        }
    }
    for (size_t u = gen_below(g, 4); u > 0; u--) {
        order[count++] = 100;
    }
    for (size_t i = count; i > 1; i--) {
        size_t j = gen_below(g, i);
        size_t tmp = order[i - 1];
        order[i - 1] = order[j];
        order[j] = tmp;
    }
    put_blank(g, t);
    put_char(t, '{');
    for (size_t i = 0; i < count; i++) {
        put_blank(g, t);
        if (order[i] == 100) {
            put_string(g, t, gen_below(g, 5), true);
        } else {
            put_key(g, t, order[i]);
        }
        put_blank(g, t);
        put_char(t, ':');
        put_blank(g, t);
        if (order[i] != 100) {
            put_field_value(g, t, order[i]);
        } else if (gen_chance(g, 15)) {
            put_deep(g, t);
        } else {
            put_value(g, t, 4);
        }
        put_blank(g, t);
        if (i + 1 < count) {
            put_char(t, ',');
        }
    }
    put_char(t, '}');
    put(t, gen_chance(g, 3) ? "\n" : gen_chance(g, 10) ? "\r\n" : "");
}

/* Random JSON-ish token soup. */
static void put_soup(struct gen *g, struct text *t)
{
    static const char *const tokens[] = {
        "{",   "}",    "[",    "]", ",",  ":",    "\"",   "\"a\"", "\"ts\"", "\"order_id\"",
        "1",   "-",    "0",    ".", "e",  "true", "null", " ",     "\n",     "\\",
        "\\u", "\xc3", "\xa9", "x", "01", "1.5"};
    size_t count = 1 + gen_below(g, 20);
    for (size_t i = 0; i < count; i++) {
        put(t, PICK(g, tokens));
    }
}

/* One to three mutations of t. */
static void mutate(struct gen *g, struct text *t)
{
    static const char special[] = "{}[],:\"\\0123456789.eE+-tfnu \n\t\x80\xff\xc3\xed";
    for (size_t m = 1 + gen_below(g, 3); m > 0 && t->len > 0; m--) {
        size_t at = gen_below(g, t->len);
        switch (gen_below(g, 7)) {
        case 0: t->bytes[at] = (char)(t->bytes[at] ^ (1 << gen_below(g, 8))); break;
        case 1: t->bytes[at] = special[gen_below(g, sizeof(special) - 1)]; break;
        case 2:
            memmove(t->bytes + at, t->bytes + at + 1, t->len - at - 1);
            t->len--;
            break;
        case 3:
            if (t->len < sizeof(t->bytes)) {
                memmove(t->bytes + at + 1, t->bytes + at, t->len - at);
                t->bytes[at] = special[gen_below(g, sizeof(special) - 1)];
                t->len++;
            }
            break;
        case 4: t->len = at; break;
        case 5: {
            size_t n = gen_below(g, 16);
            if (at + n <= t->len && t->len + n <= sizeof(t->bytes)) {
                memmove(t->bytes + at + n, t->bytes + at, t->len - at);
                t->len += n;
            }
            break;
        }
        default: {
            size_t other = gen_below(g, t->len);
            char tmp = t->bytes[at];
            t->bytes[at] = t->bytes[other];
            t->bytes[other] = tmp;
            break;
        }
        }
    }
}

/* ---- tests ---------------------------------------------------------------------------------- */

static int setup_regexes(void **state)
{
    (void)state;
    int rc = regcomp(&ts_regex,
                     "^([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})"
                     "(\\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$",
                     REG_EXTENDED);
    if (rc == 0) {
        rc = regcomp(&date_regex, "^([0-9]{4})-([0-9]{2})-([0-9]{2})$", REG_EXTENDED);
    }
    return rc;
}

static int teardown_regexes(void **state)
{
    (void)state;
    regfree(&ts_regex);
    regfree(&date_regex);
    return 0;
}

static void check_text(const struct text *t, uint64_t seed, size_t index, struct diff_stats *s)
{
    /* An exact-size heap copy, so ASan catches any read past the input. */
    char *copy = malloc(t->len + 1);
    assert_non_null(copy);
    memcpy(copy, t->bytes, t->len);
    debug_input = copy;
    debug_len = t->len;
    diff_check(copy, t->len, seed, index, s);
    free(copy);
}

static void test_decode_diff_oracle_sanity_agrees(void **state)
{
    /* The oracle itself gets the documented edge cases right (guards against a lenient oracle). */
    (void)state;
    static const struct {
        const char *json;
        bool accept;
    } cases[] = {
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0}", true},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"x\":99999999999999999999}", true},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"x\":[1e400,-1e400]}", true},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"a\\u0000\":1,\"s\":\"\\u0000\"}", true},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"status\":\"\\u0000\"}", false},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"x\":1,\"x\":2}", true},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"ts\":1}", false},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"amount\":1e400}", false},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"amount\":1.23450}", true},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"amount\":1.23456}", false},
        {"{\"order_id\":9223372036854775808,\"customer_id\":2,\"ts\":0}", false},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":\"2026-02-30T00:00:00Z\"}", false},
        {"{\"order_id\":1,\"customer_id\":2,\"order_date\":\"2026-02-28\"}", true},
        {"[1]", false},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0} x", false},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"version\":0}", true},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"version\":-0}", false},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"version\":1e0}", false},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"version\":9223372036854775808}", false},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"items\":[]}", true},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"items\":{}}", false},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"items\":[{\"product\":\"a\",\"quantity\":1,"
         "\"x\":[]}]}",
         true},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"items\":[{\"product\":\"a\",\"quantity\":0}]"
         "}",
         false},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"items\":[{\"product\":\"\",\"quantity\":1}]"
         "}",
         false},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"items\":[{\"product\":\"a\\u0000\","
         "\"quantity\":1}]}",
         false},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"items\":[{\"product\":\"a\",\"quantity\":1,"
         "\"quantity\":1}]}",
         false},
        {"{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"items\":[{\"quantity\":2147483648,"
         "\"product\":\"a\"}]}",
         false},
    };
    for (size_t i = 0; i < DS_ARRAY_LEN(cases); i++) {
        struct verdict v;
        oracle(cases[i].json, strlen(cases[i].json), &v);
        if (v.accept != cases[i].accept) {
            fail_msg("oracle case %zu: %s (%s)", i, v.accept ? "accepts" : "rejects", v.why);
        }
        struct diff_stats stats = {0};
        diff_check(cases[i].json, strlen(cases[i].json), 0, i, &stats);
    }
}

static void test_decode_diff_random_events_agree(void **state)
{
    /* Generated events, valid or off in one detail, get the oracle's verdict and values. */
    (void)state;
    uint64_t seed = test_seed("random_events");
    struct gen g = {.rng = seed};
    struct diff_stats stats = {0};
    static struct text t;
    for (size_t i = 0; i < case_count(150000); i++) {
        t.len = 0;
        g.valid_only = i % 2 == 0;
        put_event(&g, &t);
        check_text(&t, seed, i, &stats);
    }
    stats_print("random_events", &stats);
    assert_true(stats.accepted > stats.cases / 3);
}

static void test_decode_diff_mutated_events_agree(void **state)
{
    /* Byte flips, insertions, deletions and truncations of events get the oracle's verdict. */
    (void)state;
    uint64_t seed = test_seed("mutated_events");
    struct gen g = {.rng = seed + 1}; /* a stream of its own; failures report seed */
    struct diff_stats stats = {0};
    static struct text t;
    for (size_t i = 0; i < case_count(150000); i++) {
        t.len = 0;
        g.valid_only = i % 4 != 0;
        put_event(&g, &t);
        mutate(&g, &t);
        check_text(&t, seed, i, &stats);
    }
    stats_print("mutated_events", &stats);
    assert_true(stats.accepted > 0);
}

static void test_decode_diff_token_soup_agrees(void **state)
{
    /* Random token sequences and random values at the top level. */
    (void)state;
    uint64_t seed = test_seed("token_soup");
    struct gen g = {.rng = seed + 2}; /* a stream of its own; failures report seed */
    struct diff_stats stats = {0};
    static struct text t;
    for (size_t i = 0; i < case_count(150000) / 3; i++) {
        t.len = 0;
        if (gen_chance(&g, 2)) {
            put_soup(&g, &t);
        } else {
            put_value(&g, &t, 3);
        }
        check_text(&t, seed, i, &stats);
    }
    stats_print("token_soup", &stats);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_diff_oracle_sanity_agrees),
        cmocka_unit_test(test_decode_diff_random_events_agree),
        cmocka_unit_test(test_decode_diff_mutated_events_agree),
        cmocka_unit_test(test_decode_diff_token_soup_agrees),
    };
    return cmocka_run_group_tests(tests, setup_regexes, teardown_regexes);
}
