/*
 * Routing (docs/EVENTS.md, a contract): the shard of an order id and the partition key
 * "DAY#YYYY-MM-DD#k" of a (day, shard) pair, both ways.
 *
 * Invariants: shard_of_id() < shard_count for every id; shard_key_parse() accepts exactly the
 * strings shard_key_format() produces (canonical form only: no leading zeros in k, no sign, no
 * trailing bytes), so a key found on disk names one partition and one only.
 *
 * Rejected: a better-mixing hash (xxHash, SipHash) for string ids. FNV-1a is in the contract
 * because other tools must be able to reproduce the routing; its weak avalanche does not matter
 * for a modulus over at most SHARD_COUNT_MAX shards.
 */
#include <string.h>

#include "shard/shard.h"

#define FNV1A64_OFFSET_BASIS 14695981039346656037ull
#define FNV1A64_PRIME 1099511628211ull

/* "DAY#" + "YYYY-MM-DD" + "#": the fixed-length prefix before the shard digits. */
#define KEY_PREFIX "DAY#"
#define KEY_PREFIX_BYTES 4u
#define KEY_DATE_BYTES 10u
#define KEY_SHARD_OFFSET (KEY_PREFIX_BYTES + KEY_DATE_BYTES + 1u)
/* SHARD_COUNT_MAX - 1 = 1023 has four digits. */
#define KEY_SHARD_DIGITS_MAX 4u

_Static_assert(SHARD_COUNT_MAX - 1u <= 9999u, "shard digits must fit KEY_SHARD_DIGITS_MAX");
_Static_assert(KEY_SHARD_OFFSET + KEY_SHARD_DIGITS_MAX + 1u <= SHARD_KEY_TEXT_SIZE,
               "SHARD_KEY_TEXT_SIZE must hold the longest key and its NUL");

uint64_t shard_fnv1a64(const void *data, size_t len)
{
    ASSERT(data != NULL || len == 0);
    const unsigned char *p = data;
    uint64_t hash = FNV1A64_OFFSET_BASIS;
    for (size_t i = 0; i < len; i++) {
        hash ^= p[i];
        hash *= FNV1A64_PRIME;
    }
    return hash;
}

uint32_t shard_of_id(const struct ds_id *order_id, uint32_t shard_count)
{
    ASSERT(shard_count >= 1);
    uint64_t key = 0;
    if (order_id->is_string) {
        ASSERT(order_id->len >= 1 && order_id->len <= DS_ID_BYTES_MAX);
        key = shard_fnv1a64(order_id->text, order_id->len);
    } else {
        /* Decoded integer ids are 1..2^63-1 (docs/EVENTS.md). */
        ASSERT(order_id->value >= 0);
        key = (uint64_t)order_id->value;
    }
    uint32_t shard = (uint32_t)(key % shard_count);
    ASSERT(shard < shard_count);
    return shard;
}

size_t shard_key_format(int32_t day, uint32_t shard, char *dst)
{
    ASSERT(day >= 0 && day <= DS_DAY_MAX);
    ASSERT(shard < SHARD_COUNT_MAX);
    memcpy(dst, KEY_PREFIX, KEY_PREFIX_BYTES);
    ds_date_format(day, dst + KEY_PREFIX_BYTES);
    size_t len = KEY_PREFIX_BYTES + KEY_DATE_BYTES;
    dst[len++] = '#';
    char digits[KEY_SHARD_DIGITS_MAX];
    size_t count = 0;
    do {
        digits[count++] = (char)('0' + shard % 10u);
        shard /= 10u;
    } while (shard > 0);
    while (count > 0) {
        dst[len++] = digits[--count];
    }
    dst[len] = '\0';
    ASSERT(len < SHARD_KEY_TEXT_SIZE);
    return len;
}

/* Parses the canonical decimal of a shard index: 1..KEY_SHARD_DIGITS_MAX digits, no leading
 * zero unless the number is 0. */
static bool shard_digits_parse(const char *text, size_t len, uint32_t *shard)
{
    if (len == 0 || len > KEY_SHARD_DIGITS_MAX || (len > 1 && text[0] == '0')) {
        return false;
    }
    uint32_t value = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c < '0' || c > '9') {
            return false;
        }
        value = value * 10u + (uint32_t)(c - '0');
    }
    *shard = value;
    return true;
}

int shard_key_parse(const char *text, size_t len, int32_t *day, uint32_t *shard)
{
    ASSERT(text != NULL || len == 0);
    if (len <= KEY_SHARD_OFFSET || memcmp(text, KEY_PREFIX, KEY_PREFIX_BYTES) != 0 ||
        text[KEY_SHARD_OFFSET - 1] != '#') {
        return -DS_EUSAGE;
    }
    int32_t parsed_day = 0;
    if (ds_date_parse(text + KEY_PREFIX_BYTES, KEY_DATE_BYTES, &parsed_day) != 0) {
        return -DS_EUSAGE;
    }
    uint32_t parsed_shard = 0;
    if (!shard_digits_parse(text + KEY_SHARD_OFFSET, len - KEY_SHARD_OFFSET, &parsed_shard) ||
        parsed_shard >= SHARD_COUNT_MAX) {
        return -DS_EUSAGE;
    }
    *day = parsed_day;
    *shard = parsed_shard;
    return 0;
}
