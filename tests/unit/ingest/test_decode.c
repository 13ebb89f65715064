/*
 * Unit tests of ingest/decode.c: every rule of the event contract (docs/EVENTS.md), every
 * rejection reason, the byte offsets, the fixtures in tests/fixtures, and the format/decode round
 * trip.
 *
 * Inputs are written as C literals with explicit lengths, so they may hold any byte (NUL
 * included). Randomised tests print their seed and replay the one given in DS_TEST_SEED.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "ingest/decode.h"
#include "ingest/ingest.h"

#define LIT(s) (s), (sizeof(s) - 1)
#define NO_OFFSET SIZE_MAX
#define MS_PER_DAY 86400000LL
/* The valid ids and timestamp used around the field under test. */
#define IDS_TS "\"order_id\":1,\"customer_id\":2,\"ts\":0"

/* ---- helpers -------------------------------------------------------------------------------- */

static void print_input(const char *json, size_t len)
{
    print_error("input (%zu bytes): ", len);
    for (size_t i = 0; i < len && i < 400; i++) {
        unsigned char c = (unsigned char)json[i];
        if (c >= 0x20 && c < 0x7f) {
            print_error("%c", c);
        } else {
            print_error("\\x%02x", c);
        }
    }
    print_error("\n");
}

static struct ds_event decode_ok_at(const char *json, size_t len, int line)
{
    struct ds_event event;
    struct ingest_error error = {.reason = INGEST_OK};
    int rc = ingest_decode(json, len, &event, &error);
    if (rc != 0) {
        print_input(json, len);
        print_error("line %d: expected ok, got %s at %zu\n", line, ingest_reason_name(error.reason),
                    error.byte_offset);
    }
    assert_int_equal(rc, 0);
    assert_int_equal(error.reason, INGEST_OK);
    return event;
}
#define DECODE_OK(s) decode_ok_at(LIT(s), __LINE__)

static void expect_reason_at(const char *json, size_t len, enum ingest_reason reason, size_t offset,
                             int line)
{
    struct ds_event event;
    struct ingest_error error = {.reason = INGEST_OK, .byte_offset = 12345};
    int rc = ingest_decode(json, len, &event, &error);
    if (rc != -EINVAL || error.reason != reason ||
        (offset != NO_OFFSET && error.byte_offset != offset)) {
        print_input(json, len);
        print_error("line %d: expected %s at %zu, got rc %d %s at %zu\n", line,
                    ingest_reason_name(reason), offset, rc, ingest_reason_name(error.reason),
                    error.byte_offset);
        fail();
    }
}
#define EXPECT(s, reason) expect_reason_at(LIT(s), reason, NO_OFFSET, __LINE__)
#define EXPECT_AT(s, reason, offset) expect_reason_at(LIT(s), reason, offset, __LINE__)

/* Decodes prefix + value + suffix (all NUL-terminated text). */
static int decode_parts(const char *prefix, const char *value, const char *suffix,
                        struct ds_event *event, struct ingest_error *error)
{
    char json[512];
    size_t a = strlen(prefix);
    size_t b = strlen(value);
    size_t c = strlen(suffix);
    assert_true(a + b + c <= sizeof(json));
    memcpy(json, prefix, a);
    memcpy(json + a, value, b);
    memcpy(json + a + b, suffix, c);
    return ingest_decode(json, a + b + c, event, error);
}

/* The reason for an event whose field `name` has the JSON text `value` (ids and ts valid). */
static enum ingest_reason field_reason(const char *name, const char *value, struct ds_event *event)
{
    char prefix[64];
    struct ingest_error error = {.reason = INGEST_OK};
    snprintf(prefix, sizeof(prefix), "{\"order_id\":7,\"customer_id\":8,\"ts\":5,\"%s\":", name);
    if (strcmp(name, "order_id") == 0 || strcmp(name, "customer_id") == 0 ||
        strcmp(name, "ts") == 0) {
        snprintf(prefix, sizeof(prefix), "{\"%s\":", name);
    }
    const char *suffix = "}";
    if (strcmp(name, "order_id") == 0) {
        suffix = ",\"customer_id\":8,\"ts\":5}";
    } else if (strcmp(name, "customer_id") == 0) {
        suffix = ",\"order_id\":7,\"ts\":5}";
    } else if (strcmp(name, "ts") == 0) {
        suffix = ",\"order_id\":7,\"customer_id\":8}";
    }
    int rc = decode_parts(prefix, value, suffix, event, &error);
    assert_true(rc == 0 ? error.reason == INGEST_OK : error.reason != INGEST_OK);
    return error.reason;
}

static void expect_field(const char *name, const char *value, enum ingest_reason reason, int line)
{
    struct ds_event event;
    enum ingest_reason got = field_reason(name, value, &event);
    if (got != reason) {
        print_error("line %d: %s = %s: expected %s, got %s\n", line, name, value,
                    ingest_reason_name(reason), ingest_reason_name(got));
        fail();
    }
}
#define EXPECT_FIELD(name, value, reason) expect_field(name, value, reason, __LINE__)

static int64_t ts_of(const char *value, int line)
{
    struct ds_event event;
    enum ingest_reason got = field_reason("ts", value, &event);
    if (got != INGEST_OK) {
        print_error("line %d: ts %s: %s\n", line, value, ingest_reason_name(got));
        fail();
    }
    return event.ts_ms;
}
#define TS_OF(value) ts_of(value, __LINE__)

static int64_t amount_of(const char *value, int line)
{
    struct ds_event event;
    enum ingest_reason got = field_reason("amount", value, &event);
    if (got != INGEST_OK) {
        print_error("line %d: amount %s: %s\n", line, value, ingest_reason_name(got));
        fail();
    }
    return event.amount_units;
}
#define AMOUNT_OF(value) amount_of(value, __LINE__)

static int64_t utc_ms(int32_t year, uint32_t month, uint32_t day, int64_t hour, int64_t minute,
                      int64_t second, int64_t ms)
{
    return ds_days_from_civil(year, month, day) * MS_PER_DAY + hour * 3600000 + minute * 60000 +
           second * 1000 + ms;
}

static void assert_int_id(const struct ds_id *id, int64_t value)
{
    assert_false(id->is_string);
    assert_int_equal(id->len, 0);
    assert_true(id->value == value);
}

static void assert_string_id(const struct ds_id *id, const char *text, size_t len)
{
    assert_true(id->is_string);
    assert_int_equal(id->len, len);
    assert_int_equal(id->value, 0);
    assert_memory_equal(id->text, text, len);
}

static void assert_status(const struct ds_event *event, const char *text, size_t len)
{
    assert_int_equal(event->status_len, len);
    if (len > 0) {
        assert_memory_equal(event->status, text, len);
    }
}

static bool id_equal(const struct ds_id *a, const struct ds_id *b)
{
    return a->is_string == b->is_string && a->len == b->len && a->value == b->value &&
           memcmp(a->text, b->text, a->len) == 0;
}

static bool event_equal(const struct ds_event *a, const struct ds_event *b)
{
    return id_equal(&a->order_id, &b->order_id) && id_equal(&a->customer_id, &b->customer_id) &&
           a->ts_ms == b->ts_ms && a->amount_units == b->amount_units &&
           a->status_len == b->status_len && memcmp(a->status, b->status, a->status_len) == 0 &&
           a->has_version == b->has_version && a->version == b->version;
}

/* splitmix64: small, fast and good enough to draw test events. */
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

static uint64_t test_seed(const char *test_name)
{
    uint64_t seed = 0x6461797368617264ull; /* "dayshard" */
    const char *env = getenv("DS_TEST_SEED");
    if (env != NULL && *env != '\0') {
        seed = strtoull(env, NULL, 0);
    }
    printf("%s: seed %" PRIu64 " (replay with DS_TEST_SEED=%" PRIu64 ")\n", test_name, seed, seed);
    return seed;
}

/* ---- fixtures and names --------------------------------------------------------------------- */

/* The lines of tests/fixtures (busy-day.jsonl then shop.jsonl), copied verbatim so the
 * test is hermetic. */
static const char *const fixture_lines[] = {
    "{\"order_id\": 340, \"customer_id\": 2, \"status\": \"paid\", \"amount\": 9.99, \"ts\": "
    "\"2026-01-21T09:15:00Z\"}\n",
    "{\"order_id\": 341, \"customer_id\": 1, \"status\": \"pending\", \"amount\": 5.00, \"ts\": "
    "\"2026-01-21T12:30:00+02:00\"}\n",
    "{\"order_id\": 342, \"customer_id\": 3, \"status\": \"paid\", \"amount\": 100, \"ts\": "
    "1768996800000}\n",
    "{\"order_id\": 101, \"customer_id\": 1, \"status\": \"paid\", \"amount\": 40.00, "
    "\"order_date\": \"2026-01-03\"}\n",
    "{\"order_id\": 102, \"customer_id\": 2, \"status\": \"shipped\", \"amount\": 25.50, "
    "\"order_date\": \"2026-01-05\"}\n",
    "{\"order_id\": 103, \"customer_id\": 3, \"status\": \"paid\", \"amount\": 12.00, "
    "\"order_date\": \"2026-01-10\"}\n",
    "{\"order_id\": 104, \"customer_id\": 4, \"status\": \"shipped\", \"amount\": 60.25, "
    "\"order_date\": \"2026-01-15\"}\n",
    "{\"order_id\": 105, \"customer_id\": 3, \"status\": \"pending\", \"order_date\": "
    "\"2026-01-20\"}\n",
    "{\"order_id\": 106, \"customer_id\": 5, \"status\": \"paid\", \"amount\": 18.75, "
    "\"order_date\": \"2026-01-21\"}\n",
};

struct fixture_expect {
    int64_t order_id;
    int64_t customer_id;
    const char *status;
    int64_t amount_units;
    int64_t ts_ms;
};

static const struct fixture_expect fixture_expected[] = {
    {340, 2, "paid", 99900, 1768986900000LL},     {341, 1, "pending", 50000, 1768991400000LL},
    {342, 3, "paid", 1000000, 1768996800000LL},   {101, 1, "paid", 400000, 1767398400000LL},
    {102, 2, "shipped", 255000, 1767571200000LL}, {103, 3, "paid", 120000, 1768003200000LL},
    {104, 4, "shipped", 602500, 1768435200000LL}, {105, 3, "pending", 0, 1768867200000LL},
    {106, 5, "paid", 187500, 1768953600000LL},
};

static void test_decode_fixtures_match_expected_values(void **state)
{
    /* Every shared fixture line decodes to the values its README describes. */
    (void)state;
    assert_int_equal(DS_ARRAY_LEN(fixture_lines), DS_ARRAY_LEN(fixture_expected));
    for (size_t i = 0; i < DS_ARRAY_LEN(fixture_lines); i++) {
        const struct fixture_expect *want = &fixture_expected[i];
        struct ds_event event = decode_ok_at(fixture_lines[i], strlen(fixture_lines[i]), __LINE__);
        assert_int_id(&event.order_id, want->order_id);
        assert_int_id(&event.customer_id, want->customer_id);
        assert_status(&event, want->status, strlen(want->status));
        assert_int_equal(event.amount_units, want->amount_units);
        assert_int_equal(event.ts_ms, want->ts_ms);
    }
    /* The README's arithmetic: 12:30+02:00 is 10:30Z, and the epoch-ms order is noon UTC. */
    assert_int_equal(fixture_expected[1].ts_ms, utc_ms(2026, 1, 21, 10, 30, 0, 0));
    assert_int_equal(fixture_expected[2].ts_ms, utc_ms(2026, 1, 21, 12, 0, 0, 0));
}

static void test_decode_reason_name_every_reason_named(void **state)
{
    /* Each reason has its stable metric name; unknown values still get a string. */
    (void)state;
    static const char *const names[INGEST_REASON_COUNT] = {
        "ok",
        "not_json",
        "not_object",
        "too_large",
        "too_deep",
        "trailing_garbage",
        "duplicate_field",
        "bad_utf8",
        "missing_order_id",
        "bad_order_id",
        "order_id_range",
        "missing_customer_id",
        "bad_customer_id",
        "customer_id_range",
        "string_too_long",
        "missing_ts",
        "bad_ts",
        "ts_range",
        "bad_order_date",
        "bad_status",
        "bad_amount",
        "amount_precision",
        "amount_range",
        "bad_version",
        "bad_items",
        "items_too_large",
        "too_late",
    };
    for (int i = 0; i < INGEST_REASON_COUNT; i++) {
        assert_non_null(names[i]);
        assert_string_equal(ingest_reason_name((enum ingest_reason)i), names[i]);
    }
    assert_string_equal(ingest_reason_name(INGEST_REASON_COUNT), "unknown");
    int bogus = -1;
    assert_string_equal(ingest_reason_name((enum ingest_reason)bogus), "unknown");
}

/* ---- document level ------------------------------------------------------------------------- */

static void test_decode_input_empty_is_not_json(void **state)
{
    /* Nothing, or only white space, is not JSON. */
    (void)state;
    struct ds_event event;
    struct ingest_error error;
    assert_int_equal(ingest_decode(NULL, 0, &event, &error), -EINVAL);
    assert_int_equal(error.reason, INGEST_NOT_JSON);
    EXPECT_AT("", INGEST_NOT_JSON, 0);
    EXPECT_AT(" ", INGEST_NOT_JSON, 1);
    EXPECT_AT("\n", INGEST_NOT_JSON, 1);
    EXPECT_AT(" \t\r\n", INGEST_NOT_JSON, 4);
    EXPECT_AT("\0", INGEST_NOT_JSON, 0);
}

static void test_decode_input_too_large_checked_first(void **state)
{
    /* Over INGEST_EVENT_BYTES_MAX is too_large whatever the bytes; exactly the limit is fine. */
    (void)state;
    size_t len = INGEST_EVENT_BYTES_MAX + 1;
    char *json = malloc(len);
    assert_non_null(json);
    memset(json, 'x', len);
    expect_reason_at(json, len, INGEST_TOO_LARGE, INGEST_EVENT_BYTES_MAX, __LINE__);
    static const char event_text[] = "{" IDS_TS "}";
    memset(json, ' ', len);
    memcpy(json, event_text, sizeof(event_text) - 1);
    expect_reason_at(json, len, INGEST_TOO_LARGE, INGEST_EVENT_BYTES_MAX, __LINE__);
    struct ds_event event = decode_ok_at(json, INGEST_EVENT_BYTES_MAX, __LINE__);
    assert_int_id(&event.order_id, 1);
    /* A big unknown string inside the limit is skipped. */
    size_t big = INGEST_EVENT_BYTES_MAX;
    memcpy(json, "{" IDS_TS ",\"blob\":\"", sizeof("{" IDS_TS ",\"blob\":\"") - 1);
    json[big - 2] = '"';
    json[big - 1] = '}';
    event = decode_ok_at(json, big, __LINE__);
    assert_int_id(&event.customer_id, 2);
    free(json);
}

static void test_decode_top_level_non_object_not_object(void **state)
{
    /* Valid JSON whose top level is not an object is not_object; invalid JSON stays not_json. */
    (void)state;
    EXPECT_AT("[]", INGEST_NOT_OBJECT, 0);
    EXPECT_AT(" [1, {\"order_id\": 1}]\n", INGEST_NOT_OBJECT, 1);
    EXPECT_AT("\"order\"", INGEST_NOT_OBJECT, 0);
    EXPECT_AT("123", INGEST_NOT_OBJECT, 0);
    EXPECT_AT("-1.5e3", INGEST_NOT_OBJECT, 0);
    EXPECT_AT("true", INGEST_NOT_OBJECT, 0);
    EXPECT_AT("false", INGEST_NOT_OBJECT, 0);
    EXPECT_AT("null", INGEST_NOT_OBJECT, 0);
    EXPECT_AT("[1,", INGEST_NOT_JSON, 3);
    EXPECT_AT("[1,]", INGEST_NOT_JSON, 3);
    EXPECT_AT("]", INGEST_NOT_JSON, 0);
    EXPECT_AT("nul", INGEST_NOT_JSON, 3);
    EXPECT_AT("\"abc", INGEST_NOT_JSON, 4);
    EXPECT_AT("[1] x", INGEST_TRAILING_GARBAGE, 4);
    EXPECT_AT("\"\xff\"", INGEST_BAD_UTF8, 1);
}

static void test_decode_trailing_newline_accepted(void **state)
{
    /* A line may end in \n or \r\n, and white space may surround the object. */
    (void)state;
    DECODE_OK("{" IDS_TS "}\n");
    DECODE_OK("{" IDS_TS "}\r\n");
    DECODE_OK(" \t{" IDS_TS "} \t\r\n\n");
    DECODE_OK("\r\n{ \"order_id\" : 1 ,\n\t\"customer_id\"\r:\n2 , \"ts\" :0 }");
}

static void test_decode_trailing_garbage_rejected(void **state)
{
    /* Anything but white space after the object is trailing garbage, at its first byte. */
    (void)state;
    EXPECT_AT("{" IDS_TS "}x", INGEST_TRAILING_GARBAGE, 37);
    EXPECT_AT("{" IDS_TS "} \n x", INGEST_TRAILING_GARBAGE, 40);
    EXPECT_AT("{" IDS_TS "}{}", INGEST_TRAILING_GARBAGE, 37);
    EXPECT_AT("{" IDS_TS "},", INGEST_TRAILING_GARBAGE, 37);
    EXPECT_AT("{" IDS_TS "}\0", INGEST_TRAILING_GARBAGE, 37);
    EXPECT_AT("{" IDS_TS "}\n\f", INGEST_TRAILING_GARBAGE, 38);
    EXPECT_AT("{}}", INGEST_TRAILING_GARBAGE, 2);
}

struct reason_case {
    const char *json;
    enum ingest_reason reason;
};

static void expect_cases(const struct reason_case *cases, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        expect_reason_at(cases[i].json, strlen(cases[i].json), cases[i].reason, NO_OFFSET, (int)i);
    }
}

static const struct reason_case syntax_cases[] = {
    {"{" IDS_TS ",}", INGEST_NOT_JSON},           /* trailing comma */
    {"{" IDS_TS ",\"x\":[1,]}", INGEST_NOT_JSON}, /* trailing comma in array */
    {"{" IDS_TS ",\"x\":[,1]}", INGEST_NOT_JSON},
    {"{," IDS_TS "}", INGEST_NOT_JSON},
    {"{" IDS_TS ",,\"x\":1}", INGEST_NOT_JSON},
    {"{" IDS_TS " /* c */}", INGEST_NOT_JSON}, /* comment */
    {"{" IDS_TS "} // c", INGEST_TRAILING_GARBAGE},
    {"{'order_id':1}", INGEST_NOT_JSON}, /* single quotes */
    {"{order_id:1}", INGEST_NOT_JSON},   /* bare key */
    {"{" IDS_TS ",\"x\":NaN}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":Infinity}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":-Infinity}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":01}", INGEST_NOT_JSON}, /* leading zero */
    {"{" IDS_TS ",\"x\":-01}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":00}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":+1}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":.5}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":1.}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":1.e3}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":1e}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":1e+}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":-}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":--1}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":0x10}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":1 2}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":truE}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":tru}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":nul}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":True}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":undefined}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":truex}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\"1}", INGEST_NOT_JSON}, /* missing colon */
    {"{" IDS_TS ",\"x\"::1}", INGEST_NOT_JSON},
    {"{" IDS_TS " \"x\":1}", INGEST_NOT_JSON}, /* missing comma */
    {"{" IDS_TS ",\"x\":}", INGEST_NOT_JSON},  /* missing value */
    {"{" IDS_TS ",\"x\":[1 2]}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":{\"a\" 1}}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":{1:2}}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":[}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":{]}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":{\"a\":1]}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":[1}}", INGEST_NOT_JSON},
    {"{" IDS_TS, INGEST_NOT_JSON}, /* unterminated */
    {"{" IDS_TS ",", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\"", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":[", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":{", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":{\"a\"", INGEST_NOT_JSON},
    {"{", INGEST_NOT_JSON},
    {"{\f" IDS_TS "}", INGEST_NOT_JSON}, /* form feed is not blank */
    {"{\v" IDS_TS "}", INGEST_NOT_JSON},
    {"\xc2\xa0{" IDS_TS "}", INGEST_NOT_JSON},        /* no-break space */
    {"\xef\xbb\xbf{" IDS_TS "}", INGEST_NOT_JSON},    /* byte order mark */
    {"{" IDS_TS ",\"x\":\"a\tb\"}", INGEST_NOT_JSON}, /* raw control in string */
    {"{" IDS_TS ",\"x\":\"a\nb\"}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":\"\x1f\"}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":\"\\x41\"}", INGEST_NOT_JSON}, /* bad escapes */
    {"{" IDS_TS ",\"x\":\"\\'\"}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":\"\\U0041\"}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":\"\\u12G4\"}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":\"\\u123\"}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":\"\\u\"}", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":\"\\", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":\"\\u00", INGEST_NOT_JSON},
    {"{" IDS_TS ",\"x\":\"\\ u0041\"}", INGEST_NOT_JSON},
};

static void test_decode_syntax_not_strict_json_not_json(void **state)
{
    /* RFC 8259 strictly: every extension or slip other parsers forgive is not_json. */
    (void)state;
    expect_cases(syntax_cases, DS_ARRAY_LEN(syntax_cases));
    EXPECT_AT("{" IDS_TS ",}", INGEST_NOT_JSON, 37);
    EXPECT_AT("{" IDS_TS ",\"x\":01}", INGEST_NOT_JSON, 42);
    EXPECT_AT("{" IDS_TS ",\"x\":tru}", INGEST_NOT_JSON, 44);
    EXPECT_AT("{" IDS_TS ",\"x\":\"\\q\"}", INGEST_NOT_JSON, 42);
    EXPECT_AT("{" IDS_TS ",\"x\":\"a\tb\"}", INGEST_NOT_JSON, 43);
    EXPECT_AT("{" IDS_TS, INGEST_NOT_JSON, 36);
}

/* ---- strings: escapes, UTF-8, names --------------------------------------------------------- */

static void test_decode_escapes_all_forms_decoded(void **state)
{
    /* The eight one-letter escapes and \uXXXX (either hex case, surrogate pairs) decode. */
    (void)state;
    struct ds_event event = DECODE_OK("{" IDS_TS ",\"status\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}");
    assert_status(&event, "\"\\/\b\f\n\r\t", 8);
    event = DECODE_OK("{" IDS_TS ",\"status\":\"caf\\u00e9 \\u00C9\\u20ac\"}");
    assert_status(&event, "caf\xc3\xa9 \xc3\x89\xe2\x82\xac", 11);
    event = DECODE_OK("{" IDS_TS ",\"status\":\"\\ud83d\\ude00\\uDBFF\\uDFFF\"}");
    assert_status(&event, "\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf", 8);
    event = DECODE_OK("{" IDS_TS ",\"status\":\"\\u0041\\u007f\\u0080\\u07ff\\u0800\\uffff\"}");
    assert_status(&event, "A\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf", 12);
    event = DECODE_OK("{\"order_id\":\"\\u0001x\",\"customer_id\":\"a\\\"b\",\"ts\":0}");
    assert_string_id(&event.order_id, "\x01x", 2);
    assert_string_id(&event.customer_id, "a\"b", 3);
}

static void test_decode_escapes_invalid_surrogate_bad_utf8(void **state)
{
    /* A surrogate escape that does not form a pair cannot become UTF-8: bad_utf8, anywhere. */
    (void)state;
    static const struct reason_case cases[] = {
        {"{" IDS_TS ",\"status\":\"\\ud800\"}", INGEST_BAD_UTF8},
        {"{" IDS_TS ",\"status\":\"\\udc00\"}", INGEST_BAD_UTF8},
        {"{" IDS_TS ",\"status\":\"\\udfff\\ud800\"}", INGEST_BAD_UTF8},
        {"{" IDS_TS ",\"status\":\"\\ud800x\"}", INGEST_BAD_UTF8},
        {"{" IDS_TS ",\"status\":\"\\ud800\\n\"}", INGEST_BAD_UTF8},
        {"{" IDS_TS ",\"status\":\"\\ud800\\u0041\"}", INGEST_BAD_UTF8},
        {"{" IDS_TS ",\"status\":\"\\ud800\\ud800\"}", INGEST_BAD_UTF8},
        {"{" IDS_TS ",\"status\":\"\\ud800\\uzzzz\"}", INGEST_BAD_UTF8},
        {"{" IDS_TS ",\"status\":\"\\ud800", INGEST_BAD_UTF8},
        {"{" IDS_TS ",\"x\":\"\\udbff\"}", INGEST_BAD_UTF8},
        {"{" IDS_TS ",\"\\ud800\":1}", INGEST_BAD_UTF8},
        {"{" IDS_TS ",\"x\":[{\"y\":\"\\ude00\"}]}", INGEST_BAD_UTF8},
        {"[\"\\ud800\"]", INGEST_BAD_UTF8},
    };
    expect_cases(cases, DS_ARRAY_LEN(cases));
    EXPECT_AT("{" IDS_TS ",\"status\":\"ab\\ud800\"}", INGEST_BAD_UTF8, 49);
}

static void test_decode_utf8_valid_sequences_accepted(void **state)
{
    /* Raw UTF-8 of every length, up to U+10FFFF, is kept byte for byte. */
    (void)state;
    struct ds_event event =
        DECODE_OK("{" IDS_TS ",\"status\":\"\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80"
                  "\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\"}");
    assert_status(&event,
                  "\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xf0\x90\x80\x80"
                  "\xf4\x8f\xbf\xbf",
                  21);
    event = DECODE_OK("{\"order_id\":\"\xe6\xb3\xa8\xe6\x96\x87\",\"customer_id\":\"\xc3\xa9\","
                      "\"ts\":0,\"\xe2\x82\xac\":\"\xf0\x9f\x98\x80\"}");
    assert_string_id(&event.order_id, "\xe6\xb3\xa8\xe6\x96\x87", 6);
    assert_string_id(&event.customer_id, "\xc3\xa9", 2);
}

static void test_decode_utf8_invalid_sequences_bad_utf8(void **state)
{
    /* Overlongs, UTF-8-encoded surrogates, > U+10FFFF, stray or missing continuation bytes:
     * bad_utf8 at the lead byte, in known fields, unknown values and keys alike. */
    (void)state;
    static const char *const bad[] = {
        "\xc0\x80",
        "\xc1\xbf",
        "\xe0\x80\x80",
        "\xe0\x9f\xbf",
        "\xf0\x80\x80\x80",
        "\xf0\x8f\xbf\xbf",
        "\xed\xa0\x80",
        "\xed\xbf\xbf",
        "\xf4\x90\x80\x80",
        "\xf5\x80\x80\x80",
        "\xf8\x88\x80\x80\x80",
        "\xfe",
        "\xff",
        "\x80",
        "\xbf",
        "\xc3",
        "\xe2\x82",
        "\xf0\x9f\x98",
        "\xc3"
        "A",
        "\xe2\x82"
        "A",
        "\xf0\x9f\x98"
        "A",
        "\xc3\xc3\xa9",
    };
    static const char *const prefixes[] = {
        "{" IDS_TS ",\"status\":\"a",
        "{" IDS_TS ",\"x\":[\"a",
        "{" IDS_TS ",\"a",
        "{\"order_id\":\"a",
    };
    for (size_t p = 0; p < DS_ARRAY_LEN(prefixes); p++) {
        for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
            char json[128];
            size_t prefix_len = strlen(prefixes[p]);
            int len = snprintf(json, sizeof(json), "%s%s\":1}", prefixes[p], bad[i]);
            assert_true(len > 0 && (size_t)len < sizeof(json));
            expect_reason_at(json, (size_t)len, INGEST_BAD_UTF8, prefix_len, __LINE__);
        }
    }
    EXPECT_AT("{" IDS_TS ",\"status\":\"a\xc3", INGEST_BAD_UTF8, 48);
}

static void test_decode_nul_escape_known_field_bad_utf8(void **state)
{
    /* An escaped NUL may not enter an id, status, ts or order_date, but is fine elsewhere. */
    (void)state;
    EXPECT_AT("{\"order_id\":\"a\\u0000\",\"customer_id\":2,\"ts\":0}", INGEST_BAD_UTF8, 14);
    EXPECT_FIELD("customer_id", "\"\\u0000\"", INGEST_BAD_UTF8);
    EXPECT_FIELD("status", "\"paid\\u0000\"", INGEST_BAD_UTF8);
    EXPECT_FIELD("ts", "\"2026-01-21T10:00:00Z\\u0000\"", INGEST_BAD_UTF8);
    EXPECT_FIELD("order_date", "\"2026-01-21\\u0000\"", INGEST_BAD_UTF8);
    EXPECT_FIELD("note", "\"a\\u0000b\"", INGEST_OK);
    EXPECT_FIELD("note", "[\"\\u0000\"]", INGEST_OK);
    struct ds_event event = DECODE_OK("{" IDS_TS ",\"order_id\\u0000\":\"x\",\"\\u0000\":1}");
    assert_int_id(&event.order_id, 1);
    /* A raw NUL byte is an unescaped control character. */
    EXPECT_AT("{" IDS_TS ",\"status\":\"a\0\"}", INGEST_NOT_JSON, 48);
}

static void test_decode_field_name_matches_decoded_name(void **state)
{
    /* Keys are compared after decoding: "order\u005fid" is order_id, also for duplicates. */
    (void)state;
    struct ds_event event = DECODE_OK("{\"order\\u005fid\":5,\"\\u0063ustomer_id\":6,"
                                      "\"\\u0074\\u0073\":7,\"st\\u0061tus\":\"x\"}");
    assert_int_id(&event.order_id, 5);
    assert_int_id(&event.customer_id, 6);
    assert_int_equal(event.ts_ms, 7);
    assert_status(&event, "x", 1);
    EXPECT_AT("{\"order_id\":1,\"order\\u005fid\":1}", INGEST_DUPLICATE_FIELD, 14);
    /* Near misses are unknown fields, ignored. */
    event = DECODE_OK("{" IDS_TS ",\"Order_id\":\"x\",\"order_id \":[],\"orderid\":1,\"ts2\":1,"
                      "\"t\":1,\"amounts\":1,\"statu\":1,\"customer_idx\":1,\"order_datex\":1}");
    assert_int_id(&event.order_id, 1);
}

/* ---- timestamps ----------------------------------------------------------------------------- */

static void test_decode_ts_rfc3339_forms_accepted(void **state)
{
    /* Z or z, numeric offsets, 'T', 't' or ' ', fractions of any length truncated to ms. */
    (void)state;
    int64_t base = utc_ms(2026, 1, 21, 10, 30, 0, 0);
    assert_int_equal(TS_OF("\"2026-01-21T10:30:00Z\""), base);
    assert_int_equal(TS_OF("\"2026-01-21T10:30:00z\""), base);
    assert_int_equal(TS_OF("\"2026-01-21t10:30:00Z\""), base);
    assert_int_equal(TS_OF("\"2026-01-21 10:30:00Z\""), base);
    assert_int_equal(TS_OF("\"2026-01-21T12:30:00+02:00\""), base);
    assert_int_equal(TS_OF("\"2026-01-21T05:00:00-05:30\""), base);
    assert_int_equal(TS_OF("\"2026-01-21T10:30:00+00:00\""), base);
    assert_int_equal(TS_OF("\"2026-01-21T10:30:00-00:00\""), base);
    assert_int_equal(TS_OF("\"2026-01-22T10:29:00+23:59\""), base);
    assert_int_equal(TS_OF("\"2026-01-20T10:31:00-23:59\""), base);
    assert_int_equal(TS_OF("\"2026-01-21T10:30:00.5Z\""), base + 500);
    assert_int_equal(TS_OF("\"2026-01-21T10:30:00.12Z\""), base + 120);
    assert_int_equal(TS_OF("\"2026-01-21T10:30:00.123Z\""), base + 123);
    assert_int_equal(TS_OF("\"2026-01-21T10:30:00.1239Z\""), base + 123);
    assert_int_equal(TS_OF("\"2026-01-21T10:30:00.999999999999999999999999Z\""), base + 999);
    assert_int_equal(TS_OF("\"2026-01-21T10:30:00.000000001+01:00\""), base - 3600000);
    assert_int_equal(TS_OF("\"2024-02-29T23:59:59.999Z\""), 1709251199999LL);
    assert_int_equal(TS_OF("\"2000-02-29T00:00:00Z\""), utc_ms(2000, 2, 29, 0, 0, 0, 0));
    assert_int_equal(TS_OF("\"2026-01-21T10:30:00-05:30\""), 1769011200000LL);
    assert_int_equal(TS_OF("\"2026-01-21T12:30:00+02:00\""), 1768991400000LL);
}

static void test_decode_ts_escaped_text_accepted(void **state)
{
    /* ts text is decoded like any string before it is parsed, long fractions included. */
    (void)state;
    int64_t base = utc_ms(2026, 1, 21, 10, 30, 0, 0);
    assert_int_equal(TS_OF("\"\\u0032026-01-21\\u005410:30:00\\u005a\""), base);
    assert_int_equal(TS_OF("\"2026-01-21T10:30:00.12345678901234567890123456789\\u0030Z\""),
                     base + 123);
    assert_int_equal(TS_OF("\"2026-01-21T10:30:00.1\\u00323456789012345678901234567890+01:00\""),
                     base - 3600000 + 123);
    assert_int_equal(TS_OF("\"\\u0032026-01-21T10:30:00.9\\u0039Z\""), base + 990);
}

static const char *const bad_ts_values[] = {
    "\"2026-02-30T10:00:00Z\"",
    "\"2023-02-29T10:00:00Z\"",
    "\"1900-02-29T10:00:00Z\"",
    "\"2026-04-31T10:00:00Z\"",
    "\"2026-13-01T10:00:00Z\"",
    "\"2026-00-01T10:00:00Z\"",
    "\"2026-01-00T10:00:00Z\"",
    "\"2026-01-32T10:00:00Z\"",
    "\"2026-01-21T24:00:00Z\"",
    "\"2026-01-21T10:60:00Z\"",
    "\"2026-01-21T10:00:60Z\"",
    "\"2026-01-21T23:59:60Z\"",
    "\"2026-01-21T10:00:00+24:00\"",
    "\"2026-01-21T10:00:00+05:60\"",
    "\"2026-01-21T10:00:00\"",
    "\"2026-01-21T10:00Z\"",
    "\"2026-01-21\"",
    "\"\"",
    "\"2026-01-21X10:00:00Z\"",
    "\"2026-01-21T10:00:00\\u00a0Z\"",
    "\"2026-1-21T10:00:00Z\"",
    "\"26-01-21T10:00:00Z\"",
    "\"+2026-01-21T10:00:00Z\"",
    "\"2026-01-21T10:00:00.Z\"",
    "\"2026-01-21T10:00:00,5Z\"",
    "\"2026-01-21T10:00:00+0200\"",
    "\"2026-01-21T10:00:00+02\"",
    "\"2026-01-21T10:00:00+02:00:00\"",
    "\"2026-01-21T10:00:00Z \"",
    "\" 2026-01-21T10:00:00Z\"",
    "\"2026-01-21T10:00:00ZZ\"",
    "\"2026-01-21T10:00:00UTC\"",
    "\"2026-01-21T1a:00:00Z\"",
    "\"2026-01-21T10:00:00.5\"",
    "\"2026-01-21T10:00:00.5.5Z\"",
    "\"2026-01-21T10:00:00\xc3\xa9\"",
    "\"2026\\u002d01-21T10:00:00.1234\\u00e9\"",
    "\"2026-01-21T10:00:00.123\\u00e9Z\"",
    "\"\\u0032026-01-21T10:00:00.1234567890123456789012345678901234567890\"",
    "\"2026-01-21T-1:00:00Z\"",
    "\"2026-01-21T10:00:00+-1:00\"",
    "\"2026-01-21T10:00:00.\\u0031Z5\"",
    "\"2026-01-21T10:00:00.123+01:00x\"",
    "\"2026-01-21T10:00:00.123456+1:000\"",
    "true",
    "false",
    "null",
    "{}",
    "[]",
    "[\"2026-01-21T10:00:00Z\"]",
    "{\"a\":1}",
    "1.0",
    "1e3",
    "1768996800000.5",
    "-1.5",
    "0.0",
    "1E0",
};

static void test_decode_ts_invalid_text_bad_ts(void **state)
{
    /* Invalid calendar dates and times, and every malformed shape, are bad_ts. */
    (void)state;
    for (size_t i = 0; i < DS_ARRAY_LEN(bad_ts_values); i++) {
        expect_field("ts", bad_ts_values[i], INGEST_BAD_TS, (int)i);
    }
    /* The offset is the value's first byte. */
    EXPECT_AT("{\"ts\":\"2026-02-30T10:00:00Z\"}", INGEST_BAD_TS, 6);
    EXPECT_AT("{\"ts\": true}", INGEST_BAD_TS, 7);
    /* A wrong-type value that is not even JSON is not_json. */
    EXPECT_FIELD("ts", "[1,}", INGEST_NOT_JSON);
    EXPECT_FIELD("ts", "tru", INGEST_NOT_JSON);
}

static void test_decode_ts_out_of_range_ts_range(void **state)
{
    /* Before 1970 (after the offset) or after 9999 is ts_range; the bounds themselves pass. */
    (void)state;
    assert_int_equal(TS_OF("\"1970-01-01T00:00:00Z\""), 0);
    assert_int_equal(TS_OF("\"1970-01-01T01:00:00+01:00\""), 0);
    assert_int_equal(TS_OF("\"9999-12-31T23:59:59.999Z\""), DS_TS_MS_MAX);
    assert_int_equal(TS_OF("\"9999-12-31T23:59:59.999999Z\""), DS_TS_MS_MAX);
    EXPECT_FIELD("ts", "\"1969-12-31T23:59:59.999Z\"", INGEST_TS_RANGE);
    EXPECT_FIELD("ts", "\"1970-01-01T00:30:00+01:00\"", INGEST_TS_RANGE);
    EXPECT_FIELD("ts", "\"0000-01-01T00:00:00Z\"", INGEST_TS_RANGE);
    EXPECT_FIELD("ts", "\"1000-06-15T12:00:00Z\"", INGEST_TS_RANGE);
    EXPECT_FIELD("ts", "\"9999-12-31T23:59:59-00:01\"", INGEST_TS_RANGE);
    EXPECT_FIELD("ts", "\"9999-12-31T23:30:00-23:59\"", INGEST_TS_RANGE);
    assert_int_equal(TS_OF("\"9999-12-31T23:59:59+00:01\""), DS_TS_MS_MAX - 999 - 60000);
    EXPECT_AT("{\"ts\":\"1969-12-31T23:59:59Z\"}", INGEST_TS_RANGE, 6);
}

static void test_decode_ts_epoch_ms_integer(void **state)
{
    /* An integer ts is epoch milliseconds in [DS_TS_MS_MIN, DS_TS_MS_MAX]; no fraction/exponent. */
    (void)state;
    assert_int_equal(TS_OF("1768996800000"), 1768996800000LL);
    assert_int_equal(TS_OF("0"), 0);
    assert_int_equal(TS_OF("-0"), 0);
    assert_int_equal(TS_OF("1"), 1);
    assert_int_equal(TS_OF("253402300799999"), DS_TS_MS_MAX);
    assert_int_equal(TS_OF("100000000000000"), 100000000000000LL);
    EXPECT_FIELD("ts", "253402300800000", INGEST_TS_RANGE);
    EXPECT_FIELD("ts", "-1", INGEST_TS_RANGE);
    EXPECT_FIELD("ts", "-1768996800000", INGEST_TS_RANGE);
    EXPECT_FIELD("ts", "9223372036854775807", INGEST_TS_RANGE);
    EXPECT_FIELD("ts", "9223372036854775808", INGEST_TS_RANGE);
    EXPECT_FIELD("ts", "18446744073709551616", INGEST_TS_RANGE);
    EXPECT_FIELD("ts", "99999999999999999999999999999999999999", INGEST_TS_RANGE);
    EXPECT_FIELD("ts", "-99999999999999999999999999999999999999", INGEST_TS_RANGE);
    EXPECT_FIELD("ts", "1768996800000.0", INGEST_BAD_TS);
    EXPECT_FIELD("ts", "1.7689968e12", INGEST_BAD_TS);
    EXPECT_FIELD("ts", "17689968e5", INGEST_BAD_TS);
    EXPECT_FIELD("ts", "\"1768996800000\"", INGEST_BAD_TS);
    EXPECT_FIELD("ts", "01768996800000", INGEST_NOT_JSON);
}

static void test_decode_order_date_used_when_ts_absent(void **state)
{
    /* order_date is midnight UTC, used only without ts; ts wins when both are present. */
    (void)state;
    struct ds_event event =
        DECODE_OK("{\"order_id\":1,\"customer_id\":2,\"order_date\":\"2026-01-03\"}");
    assert_int_equal(event.ts_ms, 1767398400000LL);
    event = DECODE_OK("{\"order_id\":1,\"customer_id\":2,\"order_date\":\"1970-01-01\"}");
    assert_int_equal(event.ts_ms, 0);
    event = DECODE_OK("{\"order_id\":1,\"customer_id\":2,\"order_date\":\"9999-12-31\"}");
    assert_int_equal(event.ts_ms, DS_TS_MS_MAX - MS_PER_DAY + 1);
    event = DECODE_OK("{\"order_id\":1,\"customer_id\":2,\"order_date\":\"2024-02-29\"}");
    assert_int_equal(event.ts_ms, utc_ms(2024, 2, 29, 0, 0, 0, 0));
    event = DECODE_OK("{\"order_id\":1,\"customer_id\":2,\"order_date\":\"2026-01-03\",\"ts\":5}");
    assert_int_equal(event.ts_ms, 5);
    event = DECODE_OK("{\"order_id\":1,\"ts\":5,\"customer_id\":2,\"order_date\":\"2026-01-03\"}");
    assert_int_equal(event.ts_ms, 5);
    event = DECODE_OK("{\"order_id\":1,\"customer_id\":2,\"order_date\":\"2026\\u002d01-03\"}");
    assert_int_equal(event.ts_ms, 1767398400000LL);
}

static void test_decode_order_date_invalid_bad_order_date(void **state)
{
    /* A present order_date must be valid even when ts is given. */
    (void)state;
    static const char *const bad[] = {
        "\"2026-02-30\"",
        "\"2023-02-29\"",
        "\"2026-13-01\"",
        "\"2026-00-10\"",
        "\"2026-01-00\"",
        "\"2026-1-3\"",
        "\"2026-01-3\"",
        "\"26-01-03\"",
        "\"2026-01-03 \"",
        "\"2026/01/03\"",
        "\"2026-01-03T00:00:00Z\"",
        "\"\"",
        "\"1969-12-31\"",
        "\"0000-01-01\"",
        "\"+026-01-03\"",
        "\"2026-01-0\\u00e9\"",
        "20260103",
        "null",
        "true",
        "[\"2026-01-03\"]",
        "{}",
        "\"2026-01-03xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"",
    };
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        expect_field("order_date", bad[i], INGEST_BAD_ORDER_DATE, (int)i);
    }
    EXPECT_AT("{\"order_id\":1,\"customer_id\":2,\"ts\":5,\"order_date\":\"2026-02-30\"}",
              INGEST_BAD_ORDER_DATE, 50);
    EXPECT_AT("{\"order_date\":\"2026-02-30\",\"order_id\":1,\"customer_id\":2,\"ts\":5}",
              INGEST_BAD_ORDER_DATE, 14);
}

static void test_decode_missing_fields_reported_last_in_order(void **state)
{
    /* Missing fields come after the whole input parsed, order_id, customer_id then ts, at the
     * object's closing brace. */
    (void)state;
    EXPECT_AT("{}", INGEST_MISSING_ORDER_ID, 1);
    EXPECT_AT(" { } \n", INGEST_MISSING_ORDER_ID, 3);
    EXPECT_AT("{\"customer_id\":2}", INGEST_MISSING_ORDER_ID, 16);
    EXPECT_AT("{\"ts\":0}", INGEST_MISSING_ORDER_ID, 7);
    EXPECT_AT("{\"order_id\":1}", INGEST_MISSING_CUSTOMER_ID, 13);
    EXPECT_AT("{\"order_id\":1,\"ts\":0}", INGEST_MISSING_CUSTOMER_ID, 20);
    EXPECT_AT("{\"order_id\":1,\"customer_id\":2}", INGEST_MISSING_TS, 29);
    EXPECT_AT("{\"order_id\":1,\"customer_id\":2,\"status\":\"paid\",\"amount\":1}",
              INGEST_MISSING_TS, 56);
    /* Any other problem wins, wherever it is. */
    EXPECT("{\"x\":tru}", INGEST_NOT_JSON);
    EXPECT("{\"customer_id\":true}", INGEST_BAD_CUSTOMER_ID);
    EXPECT("{\"ts\":0} x", INGEST_TRAILING_GARBAGE);
    EXPECT("{\"status\":1}", INGEST_BAD_STATUS);
    EXPECT("{\"order_id\":1,\"customer_id\":2", INGEST_NOT_JSON);
}

/* ---- ids ------------------------------------------------------------------------------------ */

static void test_decode_ids_kept_in_type(void **state)
{
    /* Integer ids stay integers and string ids stay strings, even "123". */
    (void)state;
    struct ds_event event = DECODE_OK("{\"order_id\":123,\"customer_id\":\"123\",\"ts\":0}");
    assert_int_id(&event.order_id, 123);
    assert_string_id(&event.customer_id, "123", 3);
    event = DECODE_OK("{\"order_id\":\"A-9\",\"customer_id\":9223372036854775807,\"ts\":0}");
    assert_string_id(&event.order_id, "A-9", 3);
    assert_int_id(&event.customer_id, INT64_MAX);
    event = DECODE_OK("{\"order_id\":1000000000000000000,\"customer_id\":10,\"ts\":0}");
    assert_int_id(&event.order_id, 1000000000000000000LL);
    assert_int_id(&event.customer_id, 10);
    event = DECODE_OK("{\"order_id\":\" \",\"customer_id\":\"0\",\"ts\":0}");
    assert_string_id(&event.order_id, " ", 1);
    assert_string_id(&event.customer_id, "0", 1);
}

static void test_decode_ids_out_of_range_id_range(void **state)
{
    /* Integer ids must be 1..2^63-1: zero, negatives and 2^63 and beyond are *_id_range. */
    (void)state;
    static const char *const bad[] = {
        "0",
        "-0",
        "-1",
        "-9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808",
        "9999999999999999999",
        "18446744073709551615",
        "18446744073709551616",
        "100000000000000000000",
        "123456789012345678901234567890",
    };
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        expect_field("order_id", bad[i], INGEST_ORDER_ID_RANGE, (int)i);
        expect_field("customer_id", bad[i], INGEST_CUSTOMER_ID_RANGE, (int)i);
    }
    EXPECT_AT("{\"order_id\":0}", INGEST_ORDER_ID_RANGE, 12);
    EXPECT_AT("{\"order_id\":1,\"customer_id\": -5}", INGEST_CUSTOMER_ID_RANGE, 29);
}

static void test_decode_ids_wrong_type_bad_id(void **state)
{
    /* Fractions, exponents, booleans, null, containers and "" are bad_*_id. */
    (void)state;
    static const char *const bad[] = {
        "1.0",   "1.5",  "1e2",  "1E+2", "10e-1", "-1.5", "0.0",        "true",
        "false", "null", "\"\"", "[]",   "[1]",   "{}",   "{\"id\":1}", "9223372036854775808.0",
    };
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        expect_field("order_id", bad[i], INGEST_BAD_ORDER_ID, (int)i);
        expect_field("customer_id", bad[i], INGEST_BAD_CUSTOMER_ID, (int)i);
    }
    EXPECT_AT("{\"order_id\": 1.0}", INGEST_BAD_ORDER_ID, 13);
    EXPECT_AT("{\"order_id\":1,\"customer_id\":\"\"}", INGEST_BAD_CUSTOMER_ID, 28);
}

static void test_decode_ids_string_length_limits(void **state)
{
    /* String ids are 1..64 decoded bytes; 65 is string_too_long, escapes counted decoded. */
    (void)state;
    char id64[] = "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"";
    char id65[] = "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"";
    assert_int_equal(strlen(id64), 66);
    assert_int_equal(strlen(id65), 67);
    struct ds_event event;
    assert_int_equal(field_reason("order_id", id64, &event), INGEST_OK);
    assert_int_equal(event.order_id.len, 64);
    assert_int_equal(field_reason("customer_id", id64, &event), INGEST_OK);
    assert_int_equal(event.customer_id.len, 64);
    EXPECT_FIELD("order_id", id65, INGEST_STRING_TOO_LONG);
    EXPECT_FIELD("customer_id", id65, INGEST_STRING_TOO_LONG);
    /* 32 escaped e-acutes are 64 bytes; 21 euro signs are 63 plus one byte is 64; 22 are 66. */
    char text[400];
    strcpy(text, "\"");
    for (int i = 0; i < 32; i++) {
        strcat(text, "\\u00e9");
    }
    strcat(text, "\"");
    assert_int_equal(field_reason("order_id", text, &event), INGEST_OK);
    assert_int_equal(event.order_id.len, 64);
    strcpy(text + strlen(text) - 1, "x\"");
    EXPECT_FIELD("order_id", text, INGEST_STRING_TOO_LONG);
    strcpy(text, "\"x");
    for (int i = 0; i < 21; i++) {
        strcat(text, "\xe2\x82\xac");
    }
    strcat(text, "\"");
    assert_int_equal(field_reason("customer_id", text, &event), INGEST_OK);
    assert_int_equal(event.customer_id.len, 64);
    strcpy(text + strlen(text) - 1, "\xe2\x82\xac\"");
    EXPECT_FIELD("customer_id", text, INGEST_STRING_TOO_LONG);
    EXPECT_AT(
        "{\"order_id\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
        INGEST_STRING_TOO_LONG, 12);
}

/* ---- status --------------------------------------------------------------------------------- */

static void test_decode_status_length_and_type(void **state)
{
    /* status is a string of 0..32 decoded bytes, empty by default; other types are bad_status. */
    (void)state;
    struct ds_event event = DECODE_OK("{" IDS_TS "}");
    assert_int_equal(event.status_len, 0);
    event = DECODE_OK("{" IDS_TS ",\"status\":\"\"}");
    assert_int_equal(event.status_len, 0);
    event = DECODE_OK("{" IDS_TS ",\"status\":\"abcdefghijklmnopqrstuvwxyz012345\"}");
    assert_status(&event, "abcdefghijklmnopqrstuvwxyz012345", 32);
    EXPECT_AT("{" IDS_TS ",\"status\":\"abcdefghijklmnopqrstuvwxyz0123456\"}",
              INGEST_STRING_TOO_LONG, 46);
    EXPECT_FIELD("status",
                 "\"\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9"
                 "\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9x\"",
                 INGEST_STRING_TOO_LONG);
    static const char *const bad[] = {"1",  "-1.5",       "true", "false",           "null",
                                      "[]", "[\"paid\"]", "{}",   "{\"s\":\"paid\"}"};
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        expect_field("status", bad[i], INGEST_BAD_STATUS, (int)i);
    }
    EXPECT_AT("{" IDS_TS ",\"status\":null}", INGEST_BAD_STATUS, 46);
}

/* ---- amounts -------------------------------------------------------------------------------- */

static void test_decode_amount_fixed_point_exact(void **state)
{
    /* Amounts are exact units of 1/10000: exponents applied, trailing zeros harmless. */
    (void)state;
    assert_int_equal(AMOUNT_OF("9.99"), 99900);
    assert_int_equal(AMOUNT_OF("100"), 1000000);
    assert_int_equal(AMOUNT_OF("1.5e1"), 150000);
    assert_int_equal(AMOUNT_OF("-2.25"), -22500);
    assert_int_equal(AMOUNT_OF("1.23450"), 12345);
    assert_int_equal(AMOUNT_OF("1.2345000000000000000000000"), 12345);
    assert_int_equal(AMOUNT_OF("0"), 0);
    assert_int_equal(AMOUNT_OF("-0"), 0);
    assert_int_equal(AMOUNT_OF("-0.0e-99"), 0);
    assert_int_equal(AMOUNT_OF("0e999999999999"), 0);
    assert_int_equal(AMOUNT_OF("0.0001"), 1);
    assert_int_equal(AMOUNT_OF("-0.0001"), -1);
    assert_int_equal(AMOUNT_OF("1E2"), 1000000);
    assert_int_equal(AMOUNT_OF("1e+2"), 1000000);
    assert_int_equal(AMOUNT_OF("12345e-4"), 12345);
    assert_int_equal(AMOUNT_OF("123450e-5"), 12345);
    assert_int_equal(AMOUNT_OF("1000000000000000000000e-17"), 100000000);
    assert_int_equal(AMOUNT_OF("0.00000000000000000000000000001e25"), 1);
    assert_int_equal(AMOUNT_OF("10.05"), 100500);
    assert_int_equal(AMOUNT_OF("1001"), 10010000);
    assert_int_equal(AMOUNT_OF("922337203685477.5807"), INT64_MAX);
    assert_int_equal(AMOUNT_OF("-922337203685477.5807"), -INT64_MAX);
    assert_int_equal(AMOUNT_OF("9223372036854775807e-4"), INT64_MAX);
    assert_int_equal(AMOUNT_OF("92233720368547758070000e-8"), INT64_MAX);
    assert_int_equal(AMOUNT_OF("5.00"), 50000);
    struct ds_event event = DECODE_OK("{" IDS_TS "}");
    assert_int_equal(event.amount_units, 0);
}

static void test_decode_amount_too_precise_amount_precision(void **state)
{
    /* More than four decimal places of value is amount_precision, even when also too big. */
    (void)state;
    static const char *const bad[] = {
        "1.23456",
        "0.00001",
        "-0.00001",
        "1e-5",
        "12345e-9",
        "1.000001",
        "0.123456789",
        "123456789012345678901234567890.00001",
        "1.00001e-100",
        "1e-1000000000000",
        "100000000000000000000000000000000000001e-5",
    };
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        expect_field("amount", bad[i], INGEST_AMOUNT_PRECISION, (int)i);
    }
    EXPECT_AT("{" IDS_TS ",\"amount\": 1.23456}", INGEST_AMOUNT_PRECISION, 47);
}

static void test_decode_amount_too_big_amount_range(void **state)
{
    /* |amount| * 10000 must fit in int64 (so -2^63 units is out as well). */
    (void)state;
    static const char *const bad[] = {
        "922337203685477.5808",
        "-922337203685477.5808",
        "922337203685478",
        "1e15",
        "1e400",
        "-1e400",
        "99999999999999999999",
        "1e1000000000000000",
        "9223372036854775808e-4",
        "18446744073709551616",
        "1.00001e30",
    };
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        expect_field("amount", bad[i], INGEST_AMOUNT_RANGE, (int)i);
    }
}

static void test_decode_amount_not_number_bad_amount(void **state)
{
    /* A string, boolean, null or container amount is bad_amount; broken numbers are not_json. */
    (void)state;
    static const char *const bad[] = {"\"9.99\"", "\"\"", "true", "false",
                                      "null",     "[]",   "[1]",  "{}"};
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        expect_field("amount", bad[i], INGEST_BAD_AMOUNT, (int)i);
    }
    static const char *const broken[] = {"1.", "01", "+1", ".5", "1e", "-", "1.2.3", "NaN", "0x1"};
    for (size_t i = 0; i < DS_ARRAY_LEN(broken); i++) {
        expect_field("amount", broken[i], INGEST_NOT_JSON, (int)i);
    }
}

static void test_decode_number_every_digit_count_exact(void **state)
{
    /* Integers and amounts of 1..25 digits, across the 8-digit chunks and the 19-digit switch
     * to the exact path, decode exactly or are out of range. */
    (void)state;
    for (size_t digits = 1; digits <= 25; digits++) {
        char text[32];
        for (size_t i = 0; i < digits; i++) {
            text[i] = (char)('1' + i % 9); /* 123456789123... */
        }
        text[digits] = '\0';
        uint64_t value = 0;
        bool fits = true;
        for (size_t i = 0; i < digits && fits; i++) {
            fits = !__builtin_mul_overflow(value, 10, &value) &&
                   !__builtin_add_overflow(value, (uint64_t)(text[i] - '0'), &value) &&
                   value <= (uint64_t)INT64_MAX;
        }
        struct ds_event event;
        enum ingest_reason got = field_reason("order_id", text, &event);
        assert_int_equal(got, fits ? INGEST_OK : INGEST_ORDER_ID_RANGE);
        if (fits) {
            assert_true(event.order_id.value == (int64_t)value);
        }
        /* The same digits with the point four places from the end: exact units. */
        if (digits > 4) {
            char amount[40];
            snprintf(amount, sizeof(amount), "%.*s.%s", (int)(digits - 4), text, text + digits - 4);
            got = field_reason("amount", amount, &event);
            assert_int_equal(got, fits ? INGEST_OK : INGEST_AMOUNT_RANGE);
            if (fits) {
                assert_true(event.amount_units == (int64_t)value);
            }
        }
    }
    /* Exactly 19 digits: the largest values. */
    EXPECT_FIELD("order_id", "9223372036854775807", INGEST_OK);
    assert_int_equal(AMOUNT_OF("922337203685477.5807"), INT64_MAX);
    assert_int_equal(AMOUNT_OF("0.000000000000000001e14"), 1);
    /* A number as the last bytes of the input (no room for an 8-byte read). */
    EXPECT_AT("12345678", INGEST_NOT_OBJECT, 0);
    EXPECT_AT("1234567", INGEST_NOT_OBJECT, 0);
    EXPECT_AT("-0.5", INGEST_NOT_OBJECT, 0);
    EXPECT_AT("{\"order_id\":12345678", INGEST_NOT_JSON, 20);
    EXPECT_AT("{\"order_id\":1.", INGEST_NOT_JSON, 14);
}

static void test_decode_strings_special_byte_at_every_position(void **state)
{
    /* A quote, escape, UTF-8 or control byte at each position of a string, inside or across
     * 8-byte words, is found exactly where it is. */
    (void)state;
    for (size_t at = 0; at < 24; at++) {
        char value[64];
        char json[128];
        memset(value, 'a', at);
        memcpy(value + at, "\\u00e9", 7); /* decodes to two bytes */
        struct ds_event event;
        assert_int_equal(
            field_reason("status", (snprintf(json, sizeof(json), "\"%s\"", value), json), &event),
            at + 2 <= DS_STATUS_BYTES_MAX ? INGEST_OK : INGEST_STRING_TOO_LONG);
        if (at + 2 <= DS_STATUS_BYTES_MAX) {
            assert_int_equal(event.status_len, at + 2);
            assert_memory_equal(event.status + at, "\xc3\xa9", 2);
        }
        memset(value, 'a', at);
        value[at] = '\x01';
        value[at + 1] = '\0';
        snprintf(json, sizeof(json), "{" IDS_TS ",\"status\":\"%s\"}", value);
        expect_reason_at(json, strlen(json), INGEST_NOT_JSON, 47 + at, __LINE__);
        value[at] = '\xff';
        snprintf(json, sizeof(json), "{" IDS_TS ",\"status\":\"%s\"}", value);
        expect_reason_at(json, strlen(json), INGEST_BAD_UTF8, 47 + at, __LINE__);
        /* Unterminated at the very end of the input. */
        value[at] = '\0';
        snprintf(json, sizeof(json), "{" IDS_TS ",\"status\":\"%s", value);
        expect_reason_at(json, strlen(json), INGEST_NOT_JSON, strlen(json), __LINE__);
    }
}

/* ---- structure ------------------------------------------------------------------------------ */

static void test_decode_duplicate_known_field_rejected(void **state)
{
    /* A known field given twice is duplicate_field at the second key; unknown ones may repeat. */
    (void)state;
    static const char *const fields[] = {"order_id\":1",   "customer_id\":2",
                                         "ts\":0",         "order_date\":\"2026-01-01\"",
                                         "status\":\"a\"", "amount\":1"};
    for (size_t i = 0; i < DS_ARRAY_LEN(fields); i++) {
        char json[256];
        int len =
            snprintf(json, sizeof(json),
                     "{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"status\":\"a\",\"amount\":1,"
                     "\"order_date\":\"2026-01-01\",\"%s}",
                     fields[i]);
        assert_true(len > 0);
        expect_reason_at(json, (size_t)len, INGEST_DUPLICATE_FIELD, 87, (int)i);
    }
    /* The duplicate wins over a later bad value: it is found first. */
    EXPECT_AT("{\"order_id\":1,\"order_id\":true}", INGEST_DUPLICATE_FIELD, 14);
    EXPECT_AT("{\"order_id\":1,\"order_id\" 1}", INGEST_DUPLICATE_FIELD, 14);
    /* ts and order_date are different fields. */
    struct ds_event event = DECODE_OK("{" IDS_TS ",\"order_date\":\"2026-01-01\"}");
    assert_int_equal(event.ts_ms, 0);
    event = DECODE_OK("{" IDS_TS ",\"x\":1,\"x\":[],\"x\":{\"y\":1,\"y\":2}}");
    assert_int_id(&event.customer_id, 2);
}

static void test_decode_unknown_fields_ignored(void **state)
{
    /* Unknown fields of any type and nesting are validated and skipped. */
    (void)state;
    struct ds_event event = DECODE_OK(
        "{\"a\":1,\"b\":-1.5e-3,\"c\":\"s}]\\\"{[\",\"d\":true,\"e\":false,\"f\":null,\"g\":[],"
        "\"h\":{},\"i\":[1,\"x\",[2,[3,{}]],{\"j\":{\"k\":[null]}}],\"order_id\":9,"
        "\"l\":{\"order_id\":\"nested\",\"ts\":\"bad\",\"amount\":\"x\"},\"customer_id\":8,"
        "\"ts\":7,\"m\" : [ 1 , { \"n\" : [ ] } ] ,\"\":0,\"big\":123456789012345678901234567890,"
        "\"huge\":1e999999,\"tiny\":-1e-999999}");
    assert_int_id(&event.order_id, 9);
    assert_int_id(&event.customer_id, 8);
    assert_int_equal(event.ts_ms, 7);
    assert_int_equal(event.status_len, 0);
    assert_int_equal(event.amount_units, 0);
}

/* depth open brackets: n - 1 inside the top-level object (which counts as depth 1). */
static void decode_nested(size_t depth, bool arrays, enum ingest_reason reason, size_t offset)
{
    char json[1024];
    size_t len = 0;
    len += (size_t)snprintf(json, sizeof(json), "{" IDS_TS ",\"x\":");
    for (size_t i = 1; i < depth; i++) {
        if (arrays) {
            json[len++] = '[';
        } else {
            memcpy(json + len, "{\"a\":", 5);
            len += 5;
        }
    }
    json[len++] = '0';
    for (size_t i = 1; i < depth; i++) {
        json[len++] = arrays ? ']' : '}';
    }
    json[len++] = '}';
    assert_true(len < sizeof(json));
    if (reason == INGEST_OK) {
        decode_ok_at(json, len, __LINE__);
    } else {
        expect_reason_at(json, len, reason, offset, __LINE__);
    }
}

static void test_decode_depth_over_max_too_deep(void **state)
{
    /* INGEST_DEPTH_MAX levels (top-level object included) pass; one more is too_deep at the
     * bracket that opens it. */
    (void)state;
    size_t prefix = sizeof("{" IDS_TS ",\"x\":") - 1;
    decode_nested(INGEST_DEPTH_MAX, true, INGEST_OK, 0);
    decode_nested(INGEST_DEPTH_MAX, false, INGEST_OK, 0);
    decode_nested(INGEST_DEPTH_MAX + 1, true, INGEST_TOO_DEEP, prefix + INGEST_DEPTH_MAX - 1);
    decode_nested(INGEST_DEPTH_MAX + 1, false, INGEST_TOO_DEEP,
                  prefix + 5 * (INGEST_DEPTH_MAX - 1));
    decode_nested(INGEST_DEPTH_MAX + 20, true, INGEST_TOO_DEEP, prefix + INGEST_DEPTH_MAX - 1);
    /* Depth is what is open at once, not how many containers there are. */
    char json[2048];
    int len = snprintf(json, sizeof(json), "{" IDS_TS ",\"x\":[");
    for (int i = 0; i < 300; i++) {
        len += snprintf(json + len, sizeof(json) - (size_t)len, "[{}],");
    }
    len += snprintf(json + len, sizeof(json) - (size_t)len, "[]]}");
    decode_ok_at(json, (size_t)len, __LINE__);
    /* A top-level array obeys the same limit. */
    memset(json, '[', INGEST_DEPTH_MAX + 1);
    memset(json + INGEST_DEPTH_MAX + 1, ']', INGEST_DEPTH_MAX + 1);
    expect_reason_at(json, 2 * (INGEST_DEPTH_MAX + 1), INGEST_TOO_DEEP, INGEST_DEPTH_MAX, __LINE__);
    expect_reason_at(json + 1, 2 * INGEST_DEPTH_MAX, INGEST_NOT_OBJECT, 0, __LINE__);
    /* Deep but broken: the depth problem comes first. */
    memset(json, '[', 200);
    expect_reason_at(json, 200, INGEST_TOO_DEEP, INGEST_DEPTH_MAX, __LINE__);
}

static void test_decode_first_problem_wins_left_to_right(void **state)
{
    /* Several problems: the first met scanning left to right, each token judged whole. */
    (void)state;
    EXPECT_AT("{\"order_id\":true,\"customer_id\":tru}", INGEST_BAD_ORDER_ID, 12);
    EXPECT_AT("{\"order_id\":1,\"customer_id\":2,\"ts\":0,\"amount\":1.23456,\"x\":]}",
              INGEST_AMOUNT_PRECISION, 46);
    EXPECT_AT("{\"order_id\":[1,}", INGEST_NOT_JSON, 15);
    EXPECT_AT("{\"order_id\":{\"a\":\"\xff\"}}", INGEST_BAD_UTF8, 18);
    EXPECT_AT("{\"status\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\xff\"}", INGEST_BAD_UTF8,
              52);
    EXPECT_AT("{\"status\":\"a\\u0000\xff\"}", INGEST_BAD_UTF8, 12);
    EXPECT_AT("{\"status\":\"a\xff\\u0000\"}", INGEST_BAD_UTF8, 12);
    EXPECT_AT("{\"amount\":1.23456} x", INGEST_AMOUNT_PRECISION, 10);
    EXPECT_AT("{\"ts\":-1,\"order_id\":0}", INGEST_TS_RANGE, 6);
    EXPECT_AT("{\"x\":[[[[]]]],\"order_date\":\"x\",\"order_date\":1}", INGEST_BAD_ORDER_DATE, 27);
    EXPECT_AT("{\"a\":1,\"a\":1,\"ts\":1,\"ts\":2}", INGEST_DUPLICATE_FIELD, 20);
    EXPECT_AT("{\"order_id\":\"\",\"order_id\":1}", INGEST_BAD_ORDER_ID, 12);
    EXPECT_AT("{\"amount\":1e400}", INGEST_AMOUNT_RANGE, 10);
}

/* ---- format --------------------------------------------------------------------------------- */

static void test_decode_format_json_canonical_line(void **state)
{
    /* The canonical line: fixed key order, ts with milliseconds, the shortest exact amount. */
    (void)state;
    struct ds_event event =
        DECODE_OK("{\"amount\": 9.99, \"status\": \"paid\", \"ts\": "
                  "\"2026-01-21T12:30:00.5+02:00\", \"customer_id\": \"c\\u00e9\\n\", "
                  "\"order_id\": 340}");
    char line[INGEST_JSON_LINE_BYTES_MAX];
    int len = ingest_event_format_json(&event, line, sizeof(line));
    static const char want[] = "{\"order_id\":340,\"customer_id\":\"c\xc3\xa9\\u000a\","
                               "\"ts\":\"2026-01-21T10:30:00.500Z\",\"status\":\"paid\","
                               "\"amount\":9.99}";
    assert_int_equal(len, sizeof(want) - 1);
    assert_memory_equal(line, want, sizeof(want) - 1);
    static const struct {
        int64_t units;
        const char *text;
    } amounts[] = {{0, "0"},
                   {1, "0.0001"},
                   {-1, "-0.0001"},
                   {1000000, "100"},
                   {-22500, "-2.25"},
                   {50, "0.005"},
                   {INT64_MAX, "922337203685477.5807"},
                   {-INT64_MAX, "-922337203685477.5807"},
                   {123450000, "12345"}};
    for (size_t i = 0; i < DS_ARRAY_LEN(amounts); i++) {
        event.amount_units = amounts[i].units;
        len = ingest_event_format_json(&event, line, sizeof(line));
        assert_true(len > 0);
        line[len] = '\0';
        char tail[64];
        snprintf(tail, sizeof(tail), ",\"amount\":%s}", amounts[i].text);
        assert_string_equal(line + (size_t)len - strlen(tail), tail);
    }
    /* Too small a buffer is -ENOSPC and leaves it untouched. */
    memset(line, 'Q', sizeof(line));
    assert_int_equal(ingest_event_format_json(&event, line, 20), -ENOSPC);
    assert_int_equal(line[0], 'Q');
    assert_int_equal(ingest_event_format_json(&event, line, 0), -ENOSPC);
}

static void test_decode_format_json_worst_case_fits(void **state)
{
    /* The longest possible line (control-character strings) fits INGEST_JSON_LINE_BYTES_MAX
     * and decodes back. */
    (void)state;
    struct ds_event event;
    memset(&event, 0, sizeof(event));
    event.order_id.is_string = true;
    event.order_id.len = DS_ID_BYTES_MAX;
    memset(event.order_id.text, 0x01, DS_ID_BYTES_MAX);
    event.customer_id = event.order_id;
    event.status_len = DS_STATUS_BYTES_MAX;
    memset(event.status, 0x1f, DS_STATUS_BYTES_MAX);
    event.ts_ms = DS_TS_MS_MAX;
    event.amount_units = -INT64_MAX;
    char line[INGEST_JSON_LINE_BYTES_MAX];
    int len = ingest_event_format_json(&event, line, sizeof(line));
    assert_int_equal(len, 1067);
    assert_int_equal(ingest_event_format_json(&event, line, 1066), -ENOSPC);
    struct ds_event back = decode_ok_at(line, (size_t)len, __LINE__);
    assert_true(event_equal(&event, &back));
    event.has_version = true;
    event.version = INT64_MAX;
    len = ingest_event_format_json(&event, line, sizeof(line));
    assert_int_equal(len, 1097);
    assert_int_equal(ingest_event_format_json(&event, line, 1096), -ENOSPC);
    back = decode_ok_at(line, (size_t)len, __LINE__);
    assert_true(event_equal(&event, &back));
}

/* A random valid UTF-8 string without NUL, of exactly len bytes (a mix of ASCII, JSON-special
 * characters, controls and multibyte sequences). */
static void random_text(uint64_t *rng, char *dst, size_t len)
{
    static const char *const pieces[] = {"a",
                                         "Z",
                                         "0",
                                         " ",
                                         "\"",
                                         "\\",
                                         "/",
                                         "\x01",
                                         "\x1f",
                                         "\n",
                                         "\x7f",
                                         "\xc3\xa9",
                                         "\xe2\x82\xac",
                                         "\xf0\x9f\x98\x80",
                                         "\xf4\x8f\xbf\xbf",
                                         "\xed\x9f\xbf"};
    size_t n = 0;
    while (n < len) {
        const char *piece = pieces[rng_below(rng, DS_ARRAY_LEN(pieces))];
        size_t piece_len = strlen(piece);
        if (n + piece_len > len) {
            piece = "x";
            piece_len = 1;
        }
        memcpy(dst + n, piece, piece_len);
        n += piece_len;
    }
}

static void random_id(uint64_t *rng, struct ds_id *id)
{
    memset(id, 0, sizeof(*id));
    if (rng_below(rng, 3) == 0) {
        id->is_string = true;
        id->len = (uint8_t)(1 + rng_below(rng, DS_ID_BYTES_MAX));
        random_text(rng, id->text, id->len);
    } else {
        uint64_t value = rng_next(rng) >> (1 + rng_below(rng, 63)); /* below 2^63 */
        id->value = (int64_t)(value == 0 ? 1 : value);
        if (rng_below(rng, 50) == 0) {
            id->value = INT64_MAX;
        }
    }
}

static void random_event(uint64_t *rng, struct ds_event *event)
{
    memset(event, 0, sizeof(*event));
    random_id(rng, &event->order_id);
    random_id(rng, &event->customer_id);
    event->ts_ms = (int64_t)rng_below(rng, (uint64_t)DS_TS_MS_MAX + 1);
    if (rng_below(rng, 20) == 0) {
        event->ts_ms = rng_below(rng, 2) ? DS_TS_MS_MAX : 0;
    }
    uint64_t magnitude = rng_next(rng) >> rng_below(rng, 64);
    if (magnitude > (uint64_t)INT64_MAX) {
        magnitude = (uint64_t)INT64_MAX;
    }
    event->amount_units = rng_below(rng, 2) ? -(int64_t)magnitude : (int64_t)magnitude;
    event->status_len = (uint8_t)rng_below(rng, DS_STATUS_BYTES_MAX + 1);
    random_text(rng, event->status, event->status_len);
    if (rng_below(rng, 2) == 0) {
        event->has_version = true;
        event->version = (int64_t)(rng_next(rng) >> (1 + rng_below(rng, 63)));
    }
}

static void test_decode_round_trip_random_events_identical(void **state)
{
    /* format_json then decode gives back the identical event, and formatting is stable. */
    (void)state;
    uint64_t rng = test_seed("round_trip");
    for (int i = 0; i < 200000; i++) {
        struct ds_event event;
        random_event(&rng, &event);
        char line[INGEST_JSON_LINE_BYTES_MAX];
        int len = ingest_event_format_json(&event, line, sizeof(line));
        assert_true(len > 0);
        struct ds_event back = decode_ok_at(line, (size_t)len, __LINE__);
        if (!event_equal(&event, &back)) {
            print_input(line, (size_t)len);
            fail_msg("event %d differs after the round trip", i);
        }
        char again[INGEST_JSON_LINE_BYTES_MAX];
        assert_int_equal(ingest_event_format_json(&back, again, sizeof(again)), len);
        assert_memory_equal(line, again, (size_t)len);
    }
}

/* ---- version and items ---------------------------------------------------------------------- */

/* Decodes with a decoder, so the items are kept. */
static struct ds_event decode_items_ok_at(struct ingest_decoder *decoder, const char *json,
                                          size_t len, int line)
{
    struct ds_event event;
    struct ingest_error error = {.reason = INGEST_OK};
    int rc = ingest_decoder_decode(decoder, json, len, &event, &error);
    if (rc != 0) {
        print_input(json, len);
        print_error("line %d: expected ok, got %s at %zu\n", line, ingest_reason_name(error.reason),
                    error.byte_offset);
    }
    assert_int_equal(rc, 0);
    return event;
}

static void test_decode_version_integer_range(void **state)
{
    /* version: integers 0..2^63-1 are kept; anything else is bad_version at the value. */
    (void)state;
    struct ds_event event = DECODE_OK("{" IDS_TS "}");
    assert_false(event.has_version);
    assert_int_equal(event.version, 0);
    event = DECODE_OK("{" IDS_TS ",\"version\":0}");
    assert_true(event.has_version);
    assert_int_equal(event.version, 0);
    event = DECODE_OK("{\"version\" : 7 ," IDS_TS "}");
    assert_true(event.has_version);
    assert_int_equal(event.version, 7);
    event = DECODE_OK("{" IDS_TS ",\"version\":9223372036854775807}");
    assert_int_equal(event.version, INT64_MAX);
    event = DECODE_OK("{" IDS_TS ",\"vers\\u0069on\":12}");
    assert_int_equal(event.version, 12);
    static const char *const bad[] = {
        "9223372036854775808",
        "18446744073709551616",
        "-1",
        "-0",
        "1.0",
        "1.5",
        "1e2",
        "0e0",
        "\"1\"",
        "null",
        "true",
        "[1]",
        "{}",
    };
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        EXPECT_FIELD("version", bad[i], INGEST_BAD_VERSION);
    }
    EXPECT_AT("{" IDS_TS ",\"version\":1.5}", INGEST_BAD_VERSION, 47);
    EXPECT_AT("{" IDS_TS ",\"version\":-}", INGEST_NOT_JSON, 48);
    EXPECT("{" IDS_TS ",\"version\":1,\"version\":2}", INGEST_DUPLICATE_FIELD);
}

static void test_decode_items_canonical_bytes(void **state)
{
    /* Items become the canonical bytes: count, then per item product length, product bytes
     * (escapes decoded), LEB128 quantity. Unknown item keys are skipped; [] is one byte. */
    (void)state;
    struct ingest_decoder *decoder = malloc(sizeof(*decoder));
    assert_non_null(decoder);
    struct ds_event event = decode_items_ok_at(
        decoder,
        LIT("{" IDS_TS ",\"items\": [ {\"product\": \"Pen\", \"quantity\": 2} , {\"sku\": [1, "
            "{\"a\": null}], \"quantity\": 300, \"pro\\u0064uct\": \"Note\\u0062ook\"}]}"),
        __LINE__);
    static const uint8_t want[] = {2,   3,   'P', 'e', 'n', 2,   8,    'N', 'o',
                                   't', 'e', 'b', 'o', 'o', 'k', 0xac, 0x02};
    assert_int_equal(event.items_bytes, sizeof(want));
    assert_memory_equal(event.items, want, sizeof(want));
    event = decode_items_ok_at(decoder, LIT("{" IDS_TS ",\"items\":[]}"), __LINE__);
    assert_int_equal(event.items_bytes, 1);
    assert_int_equal(event.items[0], 0);
    event = decode_items_ok_at(decoder, LIT("{" IDS_TS "}"), __LINE__);
    assert_int_equal(event.items_bytes, 0);
    assert_null(event.items);
    event = decode_items_ok_at(
        decoder, LIT("{" IDS_TS ",\"items\":[{\"product\":\"\xc3\xa9\",\"quantity\":2147483647}]}"),
        __LINE__);
    static const uint8_t want_max[] = {1, 2, 0xc3, 0xa9, 0xff, 0xff, 0xff, 0xff, 0x07};
    assert_int_equal(event.items_bytes, sizeof(want_max));
    assert_memory_equal(event.items, want_max, sizeof(want_max));
    /* Plain ingest_decode validates the same input but keeps no items. */
    event = DECODE_OK("{" IDS_TS ",\"items\":[{\"product\":\"a\",\"quantity\":1}]}");
    assert_int_equal(event.items_bytes, 0);
    assert_null(event.items);
    free(decoder);
}

static void test_decode_items_bad_items_every_rule(void **state)
{
    /* Every item rule: the array, the element type, product (string, 1..64 bytes, once),
     * quantity (integer 1..2^31-1, once), both required. */
    (void)state;
    static const char *const bad[] = {
        "{}",
        "null",
        "\"Pen\"",
        "3",
        "[1]",
        "[[]]",
        "[null]",
        "[{}]",
        "[{\"product\":\"a\"}]",
        "[{\"quantity\":1}]",
        "[{\"product\":\"\",\"quantity\":1}]",
        "[{\"product\":1,\"quantity\":1}]",
        "[{\"product\":null,\"quantity\":1}]",
        "[{\"product\":\"a\",\"quantity\":0}]",
        "[{\"product\":\"a\",\"quantity\":-1}]",
        "[{\"product\":\"a\",\"quantity\":-0}]",
        "[{\"product\":\"a\",\"quantity\":1.0}]",
        "[{\"product\":\"a\",\"quantity\":1e0}]",
        "[{\"product\":\"a\",\"quantity\":2147483648}]",
        "[{\"product\":\"a\",\"quantity\":\"1\"}]",
        "[{\"product\":\"a\",\"quantity\":1,\"product\":\"b\"}]",
        "[{\"product\":\"a\",\"quantity\":1,\"quantity\":1}]",
        "[{\"product\":\"a\",\"quantity\":1},2]",
        ("[{\"product\":\"0123456789012345678901234567890123456789012345678901234567890123x\","
         "\"quantity\":1}]"),
    };
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        EXPECT_FIELD("items", bad[i], INGEST_BAD_ITEMS);
    }
    EXPECT_FIELD(
        "items",
        "[{\"product\":\"0123456789012345678901234567890123456789012345678901234567890123\","
        "\"quantity\":1}]",
        INGEST_OK);
    /* Where: the element, the value, or the duplicated key. */
    EXPECT_AT("{" IDS_TS ",\"items\":{}}", INGEST_BAD_ITEMS, 45);
    EXPECT_AT("{" IDS_TS ",\"items\":[{\"product\":\"a\",\"quantity\":1}, 7]}", INGEST_BAD_ITEMS,
              76);
    EXPECT_AT("{" IDS_TS ",\"items\":[{\"product\":\"a\",\"quantity\":0}]}", INGEST_BAD_ITEMS, 72);
    EXPECT_AT("{" IDS_TS ",\"items\":[{\"quantity\":1}]}", INGEST_BAD_ITEMS, 46);
    EXPECT_AT("{" IDS_TS ",\"items\":[{\"product\":\"a\",\"product\":\"a\"}]}", INGEST_BAD_ITEMS,
              61);
    /* An escaped NUL in a product is bad_utf8, as in ids and status. */
    EXPECT_AT("{" IDS_TS ",\"items\":[{\"product\":\"a\\u0000\",\"quantity\":1}]}", INGEST_BAD_UTF8,
              59);
    EXPECT("{" IDS_TS ",\"items\":[],\"items\":[]}", INGEST_DUPLICATE_FIELD);
}

/* "items":[ then count items of the given product, then ]; returns the JSON length. */
static size_t items_json(char *dst, size_t capacity, size_t count, const char *product)
{
    int n = snprintf(dst, capacity, "{" IDS_TS ",\"items\":[");
    size_t at = (size_t)n;
    for (size_t i = 0; i < count; i++) {
        n = snprintf(dst + at, capacity - at, "%s{\"product\":\"%s\",\"quantity\":%zu}",
                     i ? "," : "", product, i + 1);
        assert_true(n > 0 && (size_t)n < capacity - at);
        at += (size_t)n;
    }
    n = snprintf(dst + at, capacity - at, "]}");
    assert_true(n > 0 && (size_t)n < capacity - at);
    return at + (size_t)n;
}

static void test_decode_items_limits_items_too_large(void **state)
{
    /* 100 items and 8 KiB of JSON text pass; 101 items or one byte more than 8 KiB is
     * items_too_large (at the 101st element, or at the array's bracket). */
    (void)state;
    enum { PREFIX = sizeof("{" IDS_TS ",\"items\":") - 1 };
    char *json = malloc(65536);
    assert_non_null(json);
    struct ingest_decoder *decoder = malloc(sizeof(*decoder));
    assert_non_null(decoder);
    size_t len = items_json(json, 65536, 100, "p");
    struct ds_event event = decode_items_ok_at(decoder, json, len, __LINE__);
    assert_int_equal(event.items[0], 100);
    len = items_json(json, 65536, 101, "p");
    expect_reason_at(json, len, INGEST_ITEMS_TOO_LARGE, NO_OFFSET, __LINE__);
    struct ingest_error error;
    assert_int_equal(ingest_decode(json, len, &event, &error), -EINVAL);
    assert_int_equal(json[error.byte_offset], '{'); /* the 101st element */
    assert_true(error.byte_offset > PREFIX + 100 * 26);
    /* 100 items of a 64-byte product: the largest canonical encoding that 8 KiB admits. */
    char product[65];
    memset(product, 'x', 64);
    product[64] = '\0';
    len = items_json(json, 65536, 100, product);
    assert_true(len - PREFIX - 1 > DS_ITEMS_JSON_BYTES_MAX); /* ~9.5 KiB: too large */
    expect_reason_at(json, len, INGEST_ITEMS_TOO_LARGE, PREFIX, __LINE__);
    /* Exactly 8192 bytes of items pass, 8193 do not: pad with blanks before the ']'. */
    len = items_json(json, 65536, 50, "p");
    size_t value = len - PREFIX - 1;
    assert_true(value < DS_ITEMS_JSON_BYTES_MAX);
    size_t pad = DS_ITEMS_JSON_BYTES_MAX - value;
    memmove(json + len - 2 + pad, json + len - 2, 2);
    memset(json + len - 2, ' ', pad);
    event = decode_items_ok_at(decoder, json, len + pad, __LINE__);
    assert_int_equal(event.items[0], 50);
    memmove(json + len - 2 + pad + 1, json + len - 2 + pad, 2);
    json[len - 2 + pad] = ' ';
    expect_reason_at(json, len + pad + 1, INGEST_ITEMS_TOO_LARGE, PREFIX, __LINE__);
    /* Validity before size: a syntax error anywhere in oversized items is not_json. */
    json[len + pad - 1] = ',';
    expect_reason_at(json, len + pad + 1, INGEST_NOT_JSON, NO_OFFSET, __LINE__);
    free(decoder);
    free(json);
}

static void test_decode_items_validity_before_meaning(void **state)
{
    /* The items value is one token: JSON validity first (anywhere in it), then its meaning. */
    (void)state;
    EXPECT("{" IDS_TS ",\"items\":[{\"quantity\":0}, ]}", INGEST_NOT_JSON);
    EXPECT("{" IDS_TS ",\"items\":[{\"quantity\":0}, \"\xff\"]}", INGEST_BAD_UTF8);
    EXPECT("{" IDS_TS ",\"items\":[{\"quantity\":0}],\"amount\":1.23456}", INGEST_BAD_ITEMS);
    EXPECT("{\"amount\":1.23456," IDS_TS ",\"items\":[{\"quantity\":0}]}", INGEST_AMOUNT_PRECISION);
    EXPECT("{\"items\":[{\"quantity\":0}]}", INGEST_BAD_ITEMS); /* before missing fields */
    EXPECT("{\"items\":[]}", INGEST_MISSING_ORDER_ID);
    char deep[256];
    int n = snprintf(deep, sizeof(deep),
                     "{" IDS_TS ",\"items\":[{\"product\":\"a\",\"quantity\":1,"
                     "\"x\":");
    size_t at = (size_t)n;
    for (uint32_t i = 3; i < INGEST_DEPTH_MAX; i++) {
        deep[at++] = '[';
    }
    for (uint32_t i = 3; i < INGEST_DEPTH_MAX; i++) {
        deep[at++] = ']';
    }
    memcpy(deep + at, "}]}", 3);
    decode_ok_at(deep, at + 3, __LINE__);
    memmove(deep + n + 1, deep + n, at + 3 - (size_t)n);
    deep[n] = '[';
    memmove(deep + at + 2, deep + at + 1, 3);
    deep[at + 1] = ']';
    expect_reason_at(deep, at + 5, INGEST_TOO_DEEP, NO_OFFSET, __LINE__);
}

static void test_decode_updates_fixture_accepted(void **state)
{
    /* Every line of the shared updates.jsonl decodes; order 107 carries versions, 108 items. */
    (void)state;
    static const char v2[] = "{\"order_id\": 107, \"customer_id\": 4, \"status\": \"paid\", "
                             "\"amount\": 7.50, \"order_date\": \"2026-01-21\", \"version\": 2}";
    static const char items[] =
        "{\"order_id\": 108, \"customer_id\": 5, \"status\": \"paid\", \"amount\": 12.00, "
        "\"order_date\": \"2026-01-22\", \"items\": [{\"product\": \"Pen\", \"quantity\": 2}, "
        "{\"product\": \"Notebook\", \"quantity\": 1}]}";
    struct ds_event event = DECODE_OK(v2);
    assert_true(event.has_version);
    assert_int_equal(event.version, 2);
    assert_int_equal(event.amount_units, 75000);
    struct ingest_decoder *decoder = malloc(sizeof(*decoder));
    assert_non_null(decoder);
    event = decode_items_ok_at(decoder, LIT(items), __LINE__);
    assert_false(event.has_version);
    static const uint8_t want[] = {2,   3,   'P', 'e', 'n', 2,   8,   'N',
                                   'o', 't', 'e', 'b', 'o', 'o', 'k', 1};
    assert_int_equal(event.items_bytes, sizeof(want));
    assert_memory_equal(event.items, want, sizeof(want));
    free(decoder);
}

/* ---- regressions ---------------------------------------------------------------------------- */

/* The UTF-8 rule the dead-letter writer shares with the decoder. */
static void test_decode_utf8_valid_rule(void **state)
{
    (void)state;
    assert_true(decode_utf8_valid("", 0));
    assert_true(decode_utf8_valid("plain \0 ascii", 13));
    assert_true(decode_utf8_valid("\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 11));
    assert_true(decode_utf8_valid("\xf4\x8f\xbf\xbf", 4));  /* U+10FFFF */
    assert_false(decode_utf8_valid("\xc0\x80", 2));         /* overlong NUL */
    assert_false(decode_utf8_valid("\xe0\x80\xaf", 3));     /* overlong */
    assert_false(decode_utf8_valid("\xed\xa0\x80", 3));     /* surrogate */
    assert_false(decode_utf8_valid("\xf4\x90\x80\x80", 4)); /* above U+10FFFF */
    assert_false(decode_utf8_valid("ok \xe2\x82", 5));      /* truncated */
    assert_false(decode_utf8_valid("\x80", 1));             /* lone continuation */
    assert_false(decode_utf8_valid("\xff", 1));
}

/* The producer's key: the order_id, read from the first member when it is there, else from a
 * full decode; a bad event gets a key only when its first member is a good order_id. */
static void test_decode_order_id_matches_full_decode(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        int rc;
        bool is_string;
        int64_t value;
        const char *text;
    } cases[] = {
        {"{\"order_id\":42,\"customer_id\":7,\"ts\":\"2026-01-21T10:00:00Z\"}", 0, false, 42, NULL},
        {" { \"order_id\" : \"ord-9\" ,\"customer_id\":7,\"ts\":\"2026-01-21T10:00:00Z\"}", 0, true,
         0, "ord-9"},
        {"{\"customer_id\":7,\"ts\":\"2026-01-21T10:00:00Z\",\"order_id\":100}", 0, false, 100,
         NULL},
        {"{\"order\\u005fid\":5,\"customer_id\":7,\"ts\":\"2026-01-21T10:00:00Z\"}", 0, false, 5,
         NULL},
        {"{\"order_id\":5,\"customer_id\":7}", 0, false, 5, NULL}, /* bad event, good key */
        {"{\"customer_id\":7,\"order_id\":5}", -EINVAL, false, 0, NULL},
        {"{\"order_id\":0,\"customer_id\":7,\"ts\":\"2026-01-21T10:00:00Z\"}", -EINVAL, false, 0,
         NULL},
        {"{\"order_id\":1.5,\"customer_id\":7,\"ts\":\"2026-01-21T10:00:00Z\"}", -EINVAL, false, 0,
         NULL},
        {"{\"order_id\":\"\",\"customer_id\":7,\"ts\":\"2026-01-21T10:00:00Z\"}", -EINVAL, false, 0,
         NULL},
        {"[1,2]", -EINVAL, false, 0, NULL},
        {"", -EINVAL, false, 0, NULL},
        {"{\"order_id\":", -EINVAL, false, 0, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct ds_id id;
        int rc = ingest_decode_order_id(cases[i].json, strlen(cases[i].json), &id);
        if (rc != cases[i].rc) {
            print_error("case %zu: %s: rc %d, want %d\n", i, cases[i].json, rc, cases[i].rc);
            fail();
        }
        if (rc == 0) {
            assert_int_equal(id.is_string, cases[i].is_string);
            if (id.is_string) {
                assert_int_equal(id.len, strlen(cases[i].text));
                assert_memory_equal(id.text, cases[i].text, id.len);
            } else {
                assert_int_equal(id.value, cases[i].value);
            }
        }
    }
}

static void test_decode_regress_inputs_no_crash(void **state)
{
    /* Inputs cut at every byte of a valid event never crash and never read past len. */
    (void)state;
    static const char full[] = "{\"order_id\":\"\\ud83d\\ude00\",\"customer_id\":-0,\"ts\":"
                               "\"2026-01-21T10:30:00.123456+02:00\",\"status\":\"\xc3\xa9\","
                               "\"amount\":1.5e1,\"x\":[{\"y\":null}]}";
    for (size_t len = 0; len < sizeof(full) - 1; len++) {
        char *copy = malloc(len + 1);
        assert_non_null(copy);
        memcpy(copy, full, len);
        struct ds_event event;
        struct ingest_error error;
        assert_int_equal(ingest_decode(copy, len, &event, &error), -EINVAL);
        assert_true(error.byte_offset <= len);
        free(copy);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_fixtures_match_expected_values),
        cmocka_unit_test(test_decode_reason_name_every_reason_named),
        cmocka_unit_test(test_decode_input_empty_is_not_json),
        cmocka_unit_test(test_decode_input_too_large_checked_first),
        cmocka_unit_test(test_decode_top_level_non_object_not_object),
        cmocka_unit_test(test_decode_trailing_newline_accepted),
        cmocka_unit_test(test_decode_trailing_garbage_rejected),
        cmocka_unit_test(test_decode_syntax_not_strict_json_not_json),
        cmocka_unit_test(test_decode_escapes_all_forms_decoded),
        cmocka_unit_test(test_decode_escapes_invalid_surrogate_bad_utf8),
        cmocka_unit_test(test_decode_utf8_valid_sequences_accepted),
        cmocka_unit_test(test_decode_utf8_invalid_sequences_bad_utf8),
        cmocka_unit_test(test_decode_nul_escape_known_field_bad_utf8),
        cmocka_unit_test(test_decode_field_name_matches_decoded_name),
        cmocka_unit_test(test_decode_ts_rfc3339_forms_accepted),
        cmocka_unit_test(test_decode_ts_escaped_text_accepted),
        cmocka_unit_test(test_decode_ts_invalid_text_bad_ts),
        cmocka_unit_test(test_decode_ts_out_of_range_ts_range),
        cmocka_unit_test(test_decode_ts_epoch_ms_integer),
        cmocka_unit_test(test_decode_order_date_used_when_ts_absent),
        cmocka_unit_test(test_decode_order_date_invalid_bad_order_date),
        cmocka_unit_test(test_decode_missing_fields_reported_last_in_order),
        cmocka_unit_test(test_decode_ids_kept_in_type),
        cmocka_unit_test(test_decode_ids_out_of_range_id_range),
        cmocka_unit_test(test_decode_ids_wrong_type_bad_id),
        cmocka_unit_test(test_decode_ids_string_length_limits),
        cmocka_unit_test(test_decode_status_length_and_type),
        cmocka_unit_test(test_decode_amount_fixed_point_exact),
        cmocka_unit_test(test_decode_amount_too_precise_amount_precision),
        cmocka_unit_test(test_decode_amount_too_big_amount_range),
        cmocka_unit_test(test_decode_amount_not_number_bad_amount),
        cmocka_unit_test(test_decode_number_every_digit_count_exact),
        cmocka_unit_test(test_decode_strings_special_byte_at_every_position),
        cmocka_unit_test(test_decode_duplicate_known_field_rejected),
        cmocka_unit_test(test_decode_unknown_fields_ignored),
        cmocka_unit_test(test_decode_depth_over_max_too_deep),
        cmocka_unit_test(test_decode_first_problem_wins_left_to_right),
        cmocka_unit_test(test_decode_format_json_canonical_line),
        cmocka_unit_test(test_decode_format_json_worst_case_fits),
        cmocka_unit_test(test_decode_round_trip_random_events_identical),
        cmocka_unit_test(test_decode_regress_inputs_no_crash),
        cmocka_unit_test(test_decode_order_id_matches_full_decode),
        cmocka_unit_test(test_decode_utf8_valid_rule),
        cmocka_unit_test(test_decode_version_integer_range),
        cmocka_unit_test(test_decode_items_canonical_bytes),
        cmocka_unit_test(test_decode_items_bad_items_every_rule),
        cmocka_unit_test(test_decode_items_limits_items_too_large),
        cmocka_unit_test(test_decode_items_validity_before_meaning),
        cmocka_unit_test(test_decode_updates_fixture_accepted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
