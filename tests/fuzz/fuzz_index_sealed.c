/*
 * libFuzzer harness for the sealed records of the by-customer index (index/seal.c): a
 * compacted DIR/log is outside input after a crash or a bad disk, and its sections are varints
 * and deltas decoded by hand.
 *
 * Input: a mode byte, then bytes.
 *   mode 0: the bytes are a raw payload: every section is read (with entries and without, and
 *           looking for one slot), and each image must be a well-formed run: length within
 *           INDEX_IMAGE_BYTES_MAX, count 1..INDEX_SEAL_SECTION_ENTRIES, valid tail keys strictly
 *           ascending; then a section that decoded is encoded again and must decode to the
 *           same image (the codec is a bijection on what it accepts).
 *   mode 1: the bytes are a record whose CRC the harness fixes, opened (zstd or raw) and read
 *           as in mode 0.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "index/index_private.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t raw[INDEX_SEAL_RAW_MAX];
static uint8_t image[INDEX_IMAGE_BYTES_MAX];
static uint8_t again[INDEX_IMAGE_BYTES_MAX];
static uint8_t body[INDEX_SEAL_RAW_MAX];
static uint8_t scratch[INDEX_SEAL_RAW_MAX];
static uint8_t record[INDEX_SEAL_RECORD_BYTES_MAX];

static void check(bool ok)
{
    if (!ok) {
        abort();
    }
}

static uint32_t u32_get(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static uint64_t u64_get(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static int key_compare(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c != 0 ? c : (an > bn) - (an < bn);
}

/* The image is a run: header fields in range, entries that decode, keys strictly ascending.
 * Fills the section's fields and the entries' pointers for a re-encode. */
struct parsed {
    struct index_seal_section s;
    uint32_t count;
    const uint8_t *keys[INDEX_SEAL_SECTION_ENTRIES];
    uint8_t key_bytes[INDEX_SEAL_SECTION_ENTRIES];
    const uint8_t *values[INDEX_SEAL_SECTION_ENTRIES];
    uint8_t value_bytes[INDEX_SEAL_SECTION_ENTRIES];
};

static void image_check(const uint8_t *r, int64_t len, struct parsed *p)
{
    check(len > INDEX_IMAGE_HEADER_BYTES && len <= INDEX_IMAGE_BYTES_MAX);
    check(u32_get(r + 4) == (uint32_t)len);
    uint32_t count = u32_get(r + 12);
    check(count >= 1 && count <= INDEX_SEAL_SECTION_ENTRIES);
    memset(p, 0, sizeof(*p));
    p->count = count;
    p->s.slot = u32_get(r + 40);
    p->s.tag = u64_get(r + 48);
    p->s.prev = u64_get(r + 16);
    p->s.chain_max_ts = (int64_t)u64_get(r + 24);
    p->s.prev_chain_max_ts = (int64_t)u64_get(r + 56);
    p->s.skip = u64_get(r + 64);
    check(p->s.tag != 0 && p->s.skip <= p->s.prev);
    struct ds_id *c = &p->s.customer;
    if (r[9] == 0) {
        check(r[10] == 8);
        c->value = (int64_t)u64_get(r + INDEX_IMAGE_HEADER_BYTES);
    } else {
        check(r[9] == 1 && r[10] >= 1 && r[10] <= DS_ID_BYTES_MAX);
        c->is_string = true;
        c->len = r[10];
        memcpy(c->text, r + INDEX_IMAGE_HEADER_BYTES, c->len);
    }
    check(index_key_id_valid(c));
    size_t at = INDEX_IMAGE_HEADER_BYTES + r[10];
    int64_t oldest = 0;
    for (uint32_t i = 0; i < count; i++) {
        check(at + 2 <= (size_t)len);
        size_t kb = r[at];
        const uint8_t *key = r + at + 1;
        check(at + 1 + kb + 1 <= (size_t)len);
        size_t vb = r[at + 1 + kb];
        const uint8_t *value = key + kb + 1;
        check(at + 2 + kb + vb <= (size_t)len);
        int64_t ts = 0;
        struct ds_id order;
        struct index_entry e;
        check(index_key_tail_decode(key, kb, &ts, &order) == 0);
        check(index_key_value_decode(value, vb, &e) == 0);
        check(i == 0 || key_compare(p->keys[i - 1], p->key_bytes[i - 1], key, kb) < 0);
        check(i != 0 || ts <= p->s.chain_max_ts);
        p->keys[i] = key;
        p->key_bytes[i] = (uint8_t)kb;
        p->values[i] = value;
        p->value_bytes[i] = (uint8_t)vb;
        oldest = ts;
        at += 2 + kb + vb;
    }
    check(at == (size_t)len);
    check((int64_t)u64_get(r + 32) == oldest);
}

/* Encodes p as the only section of a record and reads it back: the same image. */
static void reencode(struct parsed *p, const uint8_t *want, int64_t want_len, ZSTD_CCtx *cctx,
                     ZSTD_DCtx *dctx)
{
    struct index_seal_writer w;
    index_seal_writer_reset(&w, body);
    if (p->s.prev == 0) {
        /* without links the reader makes chain_max the newest ts and the others 0: only such
         * images re-encode to themselves */
        int64_t newest = (int64_t)~index_key_be64_get(p->keys[0]);
        if (p->s.chain_max_ts != newest || p->s.prev_chain_max_ts != 0 || p->s.skip != 0) {
            return;
        }
    }
    check(index_seal_writer_add(&w, &p->s, p->count, p->keys, p->key_bytes, p->values,
                                p->value_bytes) == 0);
    size_t len = index_seal_writer_finish(&w, cctx, scratch, record);
    int64_t n = index_seal_record_open(record, len, dctx, raw);
    check(n > 0);
    struct index_seal_reader r;
    check(index_seal_reader_init(&r, raw, (size_t)n, UINT32_MAX) == 0);
    uint32_t slot = 0;
    int64_t got = index_seal_reader_next(&r, UINT32_MAX, true, again, &slot);
    check(got == want_len && memcmp(again, want, (size_t)got) == 0);
    uint8_t none[INDEX_IMAGE_HEADER_BYTES];
    check(index_seal_reader_next(&r, UINT32_MAX, true, none, &slot) == -ENOENT);
}

static void payload_read(const uint8_t *p, size_t n, ZSTD_CCtx *cctx, ZSTD_DCtx *dctx)
{
    static uint8_t copy[INDEX_IMAGE_BYTES_MAX];
    for (int pass = 0; pass < 3; pass++) {
        struct index_seal_reader r;
        if (index_seal_reader_init(&r, p, n, UINT32_MAX) != 0) {
            return;
        }
        for (int sections = 0; sections < 4096; sections++) {
            uint32_t slot = 0;
            uint32_t want = pass == 2 ? 7u : UINT32_MAX;
            int64_t len = index_seal_reader_next(&r, want, pass != 1, image, &slot);
            if (len < 0) {
                check(len == -ENOENT || len == -DS_ECORRUPT);
                break;
            }
            if (len == 0) {
                check(pass == 2 && slot != 7);
                continue;
            }
            if (pass == 1) {
                check(len >= INDEX_IMAGE_HEADER_BYTES + 1 && len <= INDEX_IMAGE_HEADER_BYTES + 64);
                continue;
            }
            struct parsed parsed;
            image_check(image, len, &parsed);
            if (pass == 0) {
                memcpy(copy, image, (size_t)len);
                image_check(copy, len, &parsed); /* pointers into the copy */
                reencode(&parsed, copy, len, cctx, dctx);
            }
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static ZSTD_CCtx *cctx;
    static ZSTD_DCtx *dctx;
    if (cctx == NULL) {
        cctx = ZSTD_createCCtx();
        dctx = ZSTD_createDCtx();
        check(cctx != NULL && dctx != NULL);
    }
    if (size < 1 || size > INDEX_SEAL_RAW_MAX) {
        return 0;
    }
    uint8_t mode = data[0] % 2u;
    const uint8_t *d = data + 1;
    size_t n = size - 1;
    if (mode == 0) {
        payload_read(d, n, cctx, dctx);
    } else if (mode == 1) {
        if (n < INDEX_SEAL_HEADER_BYTES + 1) {
            return 0;
        }
        memcpy(record, d, n);
        uint32_t len = (uint32_t)n;
        memcpy(record + 4, &len, sizeof(len));
        record[8] = INDEX_SEAL_RECORD_TYPE;
        uint32_t crc = ds_crc32c(0, record + 4, n - 4u);
        memcpy(record, &crc, sizeof(crc));
        int64_t got = index_seal_record_open(record, n, dctx, raw);
        check(got == -DS_ECORRUPT || (got >= 1 && got <= INDEX_SEAL_RAW_MAX));
        if (got > 0) {
            static uint8_t payload[INDEX_SEAL_RAW_MAX];
            memcpy(payload, raw, (size_t)got);
            payload_read(payload, (size_t)got, cctx, dctx);
        }
    }
    return 0;
}
