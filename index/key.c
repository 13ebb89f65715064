/*
 * key.c: the index's byte encodings (index_private.h, "keys and values").
 */
#include "index/index_private.h"

#include <string.h>

void index_key_be64_put(uint8_t *dst, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        dst[i] = (uint8_t)v;
        v >>= 8;
    }
}

uint64_t index_key_be64_get(const uint8_t *src)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = v << 8 | src[i];
    }
    return v;
}

bool index_key_id_valid(const struct ds_id *id)
{
    if (id->is_string) {
        return id->len >= 1 && id->len <= DS_ID_BYTES_MAX;
    }
    return id->value >= 1;
}

uint64_t index_key_tag(const struct ds_id *customer)
{
    uint64_t h;
    if (!customer->is_string) {
        h = ds_mix64((uint64_t)customer->value);
    } else {
        h = 0xcbf29ce484222325ull;
        for (size_t i = 0; i < customer->len; i++) {
            h = (h ^ (uint8_t)customer->text[i]) * 0x100000001b3ull;
        }
        h = ds_mix64(h ^ 0x9e3779b97f4a7c15ull);
    }
    return h != 0 ? h : 1;
}

/* Writes ts and order id (the token part of a key) into dst; returns its length. */
size_t index_key_tail_encode(int64_t ts_ms, const struct ds_id *order, uint8_t *dst)
{
    ASSERT(ts_ms >= DS_TS_MS_MIN && ts_ms <= DS_TS_MS_MAX);
    index_key_be64_put(dst, ~(uint64_t)ts_ms);
    if (!order->is_string) {
        dst[8] = INDEX_TAG_ORDER_INT;
        index_key_be64_put(dst + 9, ~(uint64_t)order->value);
        return INDEX_TAIL_INT_BYTES;
    }
    size_t n = 8;
    dst[n++] = INDEX_TAG_ORDER_STRING;
    for (size_t i = 0; i < order->len; i++) {
        uint8_t b = (uint8_t)order->text[i];
        dst[n++] = (uint8_t)~b;
        if (b == 0x00) {
            dst[n++] = 0x00; /* ~0xFF: the escaped zero byte */
        }
    }
    dst[n++] = 0xFF; /* ~0x00 0x00: the terminator */
    dst[n++] = 0xFF;
    ASSERT(n <= INDEX_TAIL_BYTES_MAX);
    return n;
}

/* Decodes a token part (ts + order id) of exactly len bytes. Returns 0 or -DS_ECORRUPT. */
int index_key_tail_decode(const uint8_t *src, size_t len, int64_t *ts_ms, struct ds_id *order)
{
    if (len < 8 + 1) {
        return -DS_ECORRUPT;
    }
    uint64_t ts = ~index_key_be64_get(src);
    if (ts > (uint64_t)DS_TS_MS_MAX) {
        return -DS_ECORRUPT;
    }
    struct ds_id id = {0};
    if (src[8] == INDEX_TAG_ORDER_INT) {
        if (len != INDEX_TAIL_INT_BYTES) {
            return -DS_ECORRUPT; /* checked before the id is read: it may not be there */
        }
        uint64_t v = ~index_key_be64_get(src + 9);
        if (v == 0 || v > (uint64_t)INT64_MAX) {
            return -DS_ECORRUPT;
        }
        id.value = (int64_t)v;
    } else if (src[8] == INDEX_TAG_ORDER_STRING) {
        id.is_string = true;
        size_t i = 9;
        for (;;) {
            if (i >= len) {
                return -DS_ECORRUPT;
            }
            uint8_t c = src[i++];
            if (c == 0xFF) {
                if (i >= len || (src[i] != 0xFF && src[i] != 0x00)) {
                    return -DS_ECORRUPT;
                }
                if (src[i++] == 0xFF) {
                    break; /* terminator */
                }
                c = 0xFF; /* escaped zero byte: ~0x00 */
            }
            if (id.len == DS_ID_BYTES_MAX) {
                return -DS_ECORRUPT;
            }
            id.text[id.len++] = (char)(uint8_t)~c;
        }
        if (i != len || id.len == 0) {
            return -DS_ECORRUPT;
        }
    } else {
        return -DS_ECORRUPT;
    }
    *ts_ms = (int64_t)ts;
    *order = id;
    return 0;
}

size_t index_key_value_encode(const struct index_entry *e, uint8_t *dst)
{
    size_t n = 0;
    dst[n++] = e->status_len;
    memcpy(dst + n, e->status, e->status_len);
    n += e->status_len;
    n += ds_varint_put(dst + n, ds_zigzag(e->amount_units));
    ASSERT(n <= INDEX_VALUE_BYTES_MAX);
    return n;
}

int index_key_value_decode(const uint8_t *src, size_t len, struct index_entry *e)
{
    if (len < 2 || src[0] > DS_STATUS_BYTES_MAX || len < 2u + src[0]) {
        return -DS_ECORRUPT;
    }
    e->status_len = src[0];
    memcpy(e->status, src + 1, src[0]);
    uint64_t zz = 0;
    size_t i = 1u + src[0];
    size_t taken = ds_varint_get(src + i, len - i, &zz);
    if (taken == 0 || i + taken != len) {
        return -DS_ECORRUPT;
    }
    e->amount_units = ds_unzigzag(zz);
    return 0;
}

/* Lowercase hex of src into dst (2 * len + 1 bytes). */
void index_key_hex_encode(const uint8_t *src, size_t len, char *dst)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        dst[2 * i] = digits[src[i] >> 4];
        dst[2 * i + 1] = digits[src[i] & 0x0F];
    }
    dst[2 * len] = '\0';
}

static int index_key_hex_digit(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

/* Decodes a page token into its key part; returns the byte count or -DS_EUSAGE. */
int index_key_token_decode(const char *token, uint8_t *dst)
{
    size_t chars = strnlen(token, INDEX_TOKEN_CHARS_MAX + 1);
    if (chars == 0 || chars > INDEX_TOKEN_CHARS_MAX || chars % 2 != 0) {
        return -DS_EUSAGE;
    }
    for (size_t i = 0; i < chars / 2; i++) {
        int hi = index_key_hex_digit(token[2 * i]);
        int lo = index_key_hex_digit(token[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return -DS_EUSAGE;
        }
        dst[i] = (uint8_t)(hi << 4 | lo);
    }
    int64_t ts_ms = 0;
    struct ds_id order;
    if (index_key_tail_decode(dst, chars / 2, &ts_ms, &order) != 0) {
        return -DS_EUSAGE;
    }
    return (int)(chars / 2);
}
