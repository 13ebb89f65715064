/*
 * seal.c: the sealed records of the index's log (index_private.h, "sealed records").
 */
#include "index/index_private.h"

#include <errno.h>
#include <string.h>
#include <zstd.h>

/* The layout of a run record's header that an image reproduces (store.c's header comment). */
#define INDEX_IMAGE_TYPE_RUN 1u
#define INDEX_SEAL_FLAG_STRING 1u
#define INDEX_SEAL_FLAG_TAG 2u
#define INDEX_SEAL_FLAG_LINKS 4u
#define INDEX_SEAL_FLAG_DIRECTORY 8u
#define INDEX_SEAL_ZSTD_LEVEL 3
/* An entry's head varint: ts delta << 5 | status code << 2 | amount negative << 1 | order id is a
 * string; status codes 0..6 are the record's first statuses, 7 says a varint index follows. */
#define INDEX_SEAL_HEAD_BITS 5u
#define INDEX_SEAL_STATUS_INLINE 7u
#define INDEX_SEAL_ZSTD_SAVING_MIN 8u /* 1/8 */

/* common's varint read in this file's (src, len, *at) form: false for bad input (common's
 * rule), *at then past the bytes read. */
static bool seal_varint_get(const uint8_t *src, size_t len, size_t *at, uint64_t *v)
{
    size_t taken = *at < len ? ds_varint_get(src + *at, len - *at, v) : 0;
    *at += taken;
    return taken != 0;
}

/* A string id: u8 length (1..DS_ID_BYTES_MAX), then its bytes; *at moves past it. */
static bool seal_string_id_get(const uint8_t *src, size_t len, size_t *at, struct ds_id *id)
{
    if (*at >= len || src[*at] < 1 || src[*at] > DS_ID_BYTES_MAX || len - *at < 1u + src[*at]) {
        return false;
    }
    id->is_string = true;
    id->len = src[*at];
    memcpy(id->text, src + *at + 1, id->len);
    *at += 1u + id->len;
    return true;
}

/* ---- writing ------------------------------------------------------------------------------- */

void index_seal_writer_reset(struct index_seal_writer *w, uint8_t *body)
{
    memset(w, 0, sizeof(*w));
    w->body = body;
}

bool index_seal_writer_fits(const struct index_seal_writer *w, uint32_t slot, uint32_t count)
{
    if (w->sections == 0) {
        return true;
    }
    return slot > w->last_slot && w->body_bytes < INDEX_SEAL_RAW_TARGET &&
           w->status_count + count <= INDEX_SEAL_STATUSES_MAX;
}

static int seal_status_index(struct index_seal_writer *w, const uint8_t *status, size_t len)
{
    for (uint32_t i = 0; i < w->status_count; i++) {
        if (w->status_len[i] == len && memcmp(w->status[i], status, len) == 0) {
            return (int)i;
        }
    }
    if (w->status_count == INDEX_SEAL_STATUSES_MAX) {
        return -DS_EUSAGE;
    }
    w->status_len[w->status_count] = (uint8_t)len;
    memcpy(w->status[w->status_count], status, len);
    return (int)w->status_count++;
}

int index_seal_writer_add(struct index_seal_writer *w, const struct index_seal_section *s,
                          uint32_t count, const uint8_t *const *keys, const uint8_t *key_bytes,
                          const uint8_t *const *values, const uint8_t *value_bytes)
{
    if (count < 1 || count > INDEX_SEAL_SECTION_ENTRIES ||
        !index_seal_writer_fits(w, s->slot, count) || !index_key_id_valid(&s->customer)) {
        return -DS_EUSAGE;
    }
    uint8_t *p = w->body + w->body_bytes;
    size_t n = 0;
    n += ds_varint_put(p + n, w->sections == 0 ? s->slot : s->slot - w->last_slot);
    uint8_t flags = s->customer.is_string ? INDEX_SEAL_FLAG_STRING : 0;
    flags |= s->prev != 0 ? INDEX_SEAL_FLAG_LINKS : 0;
    flags |= s->directory != 0 ? INDEX_SEAL_FLAG_DIRECTORY : 0;
    /* The tag is stored only when the slot belongs to another customer (a full probe window);
     * the reader computes the customer's own otherwise. */
    bool other = s->tag != index_key_tag(&s->customer);
    flags |= other ? INDEX_SEAL_FLAG_TAG : 0;
    p[n++] = flags;
    if (other) {
        ds_put_le64(p + n, s->tag);
        n += 8;
    }
    if (s->customer.is_string) {
        p[n++] = (uint8_t)s->customer.len;
        memcpy(p + n, s->customer.text, s->customer.len);
        n += s->customer.len;
    } else {
        n += ds_varint_put(p + n, (uint64_t)s->customer.value);
    }
    n += ds_varint_put(p + n, count);
    int64_t newest = 0;
    struct ds_id order;
    if (index_key_tail_decode(keys[0], key_bytes[0], &newest, &order) != 0) {
        return -DS_EUSAGE;
    }
    n += ds_varint_put(p + n, ds_zigzag((int64_t)((uint64_t)newest - (uint64_t)w->last_newest_ts)));
    if (s->prev != 0) {
        n += ds_varint_put(p + n, s->prev);
        n += ds_varint_put(p + n, (uint64_t)s->chain_max_ts - (uint64_t)newest);
        n += ds_varint_put(p + n, (uint64_t)s->chain_max_ts - (uint64_t)s->prev_chain_max_ts);
        n += ds_varint_put(p + n, s->prev - s->skip);
    }
    if (s->directory != 0) {
        n += ds_varint_put(p + n, s->directory);
    }
    /* The entries go after a varint of their length: written at most 3 bytes on, then moved. */
    uint8_t *e = p + n + 3;
    size_t m = 0;
    int64_t last_ts = newest;
    uint64_t last_order = 0;
    for (uint32_t i = 0; i < count; i++) {
        int64_t ts = 0;
        if (index_key_tail_decode(keys[i], key_bytes[i], &ts, &order) != 0 || ts > last_ts ||
            value_bytes[i] < 2 || values[i][0] > DS_STATUS_BYTES_MAX ||
            value_bytes[i] < 2u + values[i][0]) {
            return -DS_EUSAGE;
        }
        struct index_entry value;
        if (index_key_value_decode(values[i], value_bytes[i], &value) != 0) {
            return -DS_EUSAGE;
        }
        int index = seal_status_index(w, (const uint8_t *)value.status, value.status_len);
        if (index < 0) {
            return index;
        }
        uint64_t code =
            index < (int)INDEX_SEAL_STATUS_INLINE ? (uint64_t)index : INDEX_SEAL_STATUS_INLINE;
        bool negative = value.amount_units < 0;
        uint64_t head = ((uint64_t)last_ts - (uint64_t)ts) << INDEX_SEAL_HEAD_BITS | code << 2 |
                        (uint64_t)negative << 1 | order.is_string;
        m += ds_varint_put(e + m, head);
        last_ts = ts;
        if (order.is_string) {
            e[m++] = (uint8_t)order.len;
            memcpy(e + m, order.text, order.len);
            m += order.len;
        } else {
            m += ds_varint_put(e + m, ds_zigzag((int64_t)((uint64_t)order.value - last_order)));
            last_order = (uint64_t)order.value;
        }
        if (code == INDEX_SEAL_STATUS_INLINE) {
            m += ds_varint_put(e + m, (uint64_t)index);
        }
        uint64_t magnitude =
            negative ? 0 - (uint64_t)value.amount_units : (uint64_t)value.amount_units;
        m += ds_varint_put(e + m, magnitude);
    }
    uint8_t len_bytes[10];
    size_t l = ds_varint_put(len_bytes, m);
    memmove(p + n + l, e, m);
    memcpy(p + n, len_bytes, l);
    n += l + m;
    w->body_bytes += n;
    w->sections++;
    w->last_slot = s->slot;
    w->last_newest_ts = newest;
    return 0;
}

size_t index_seal_writer_finish(const struct index_seal_writer *w, void *cctx, uint8_t *scratch,
                                uint8_t *dst)
{
    ASSERT(w->sections > 0);
    size_t n = 0;
    n += ds_varint_put(scratch + n, w->status_count);
    for (uint32_t i = 0; i < w->status_count; i++) {
        scratch[n++] = w->status_len[i];
        memcpy(scratch + n, w->status[i], w->status_len[i]);
        n += w->status_len[i];
    }
    n += ds_varint_put(scratch + n, w->sections);
    ASSERT(n + w->body_bytes <= INDEX_SEAL_RAW_MAX);
    memcpy(scratch + n, w->body, w->body_bytes);
    n += w->body_bytes;
    memset(dst, 0, INDEX_SEAL_HEADER_BYTES);
    dst[8] = INDEX_SEAL_RECORD_TYPE;
    ds_put_le32(dst + 12, (uint32_t)n);
    size_t z = ZSTD_compressCCtx(cctx, dst + INDEX_SEAL_HEADER_BYTES,
                                 INDEX_SEAL_RECORD_BYTES_MAX - INDEX_SEAL_HEADER_BYTES, scratch, n,
                                 INDEX_SEAL_ZSTD_LEVEL);
    size_t len = 0;
    /* zstd only when it saves an eighth: the entries are deltas of ts, ids and amounts, close
     * to their entropy already (the demo month: 7%), and a query then decodes with a memcpy
     * (newest 10 of a light customer: p50 3.0 us raw, 8.3 us zstd, bench_index_store). */
    if (!ZSTD_isError(z) && z < n - n / INDEX_SEAL_ZSTD_SAVING_MIN) {
        dst[9] = INDEX_SEAL_CODEC_ZSTD;
        len = INDEX_SEAL_HEADER_BYTES + z;
    } else {
        dst[9] = INDEX_SEAL_CODEC_RAW;
        memcpy(dst + INDEX_SEAL_HEADER_BYTES, scratch, n);
        len = INDEX_SEAL_HEADER_BYTES + n;
    }
    ds_put_le32(dst + 4, (uint32_t)len);
    ds_put_le32(dst, ds_crc32c(0, dst + 4, len - 4u));
    return len;
}

/* ---- reading ------------------------------------------------------------------------------- */

int64_t index_seal_record_open(const uint8_t *record, size_t len, void *dctx, uint8_t *raw)
{
    if (len <= INDEX_SEAL_HEADER_BYTES || len > INDEX_SEAL_RECORD_BYTES_MAX ||
        ds_get_le32(record + 4) != len || record[8] != INDEX_SEAL_RECORD_TYPE || record[10] != 0 ||
        record[11] != 0 || ds_get_le32(record) != ds_crc32c(0, record + 4, len - 4u)) {
        return -DS_ECORRUPT;
    }
    uint32_t raw_len = ds_get_le32(record + 12);
    const uint8_t *payload = record + INDEX_SEAL_HEADER_BYTES;
    size_t payload_len = len - INDEX_SEAL_HEADER_BYTES;
    if (raw_len < 1 || raw_len > INDEX_SEAL_RAW_MAX) {
        return -DS_ECORRUPT;
    }
    if (record[9] == INDEX_SEAL_CODEC_RAW) {
        if (payload_len != raw_len) {
            return -DS_ECORRUPT;
        }
        memcpy(raw, payload, raw_len);
        return raw_len;
    }
    if (record[9] != INDEX_SEAL_CODEC_ZSTD) {
        return -DS_ECORRUPT;
    }
    size_t got = ZSTD_decompressDCtx(dctx, raw, raw_len, payload, payload_len);
    return !ZSTD_isError(got) && got == raw_len ? (int64_t)raw_len : -DS_ECORRUPT;
}

int index_seal_reader_init(struct index_seal_reader *r, const uint8_t *raw, size_t len,
                           uint64_t mask)
{
    memset(r, 0, sizeof(*r));
    r->raw = raw;
    r->len = len;
    r->mask = mask;
    uint64_t count = 0;
    if (!seal_varint_get(raw, len, &r->at, &count) || count > INDEX_SEAL_STATUSES_MAX) {
        return -DS_ECORRUPT;
    }
    r->status_count = (uint32_t)count;
    for (uint32_t i = 0; i < r->status_count; i++) {
        if (r->at >= len || raw[r->at] > DS_STATUS_BYTES_MAX || len - r->at < 1u + raw[r->at]) {
            return -DS_ECORRUPT;
        }
        r->status[i] = raw + r->at;
        r->at += 1u + raw[r->at];
    }
    uint64_t sections = 0;
    if (!seal_varint_get(raw, len, &r->at, &sections) || sections < 1 || sections > len) {
        return -DS_ECORRUPT;
    }
    r->sections_left = (uint32_t)sections;
    return 0;
}

static int seal_key_compare(const uint8_t *a, size_t a_bytes, const uint8_t *b, size_t b_bytes)
{
    int c = memcmp(a, b, a_bytes < b_bytes ? a_bytes : b_bytes);
    return c != 0 ? c : (a_bytes > b_bytes) - (a_bytes < b_bytes);
}

/* Decodes count entries of raw[at..end) into the image after its header and id. */
static int64_t seal_entries_image(const struct index_seal_reader *r, size_t at, size_t end,
                                  uint32_t count, int64_t newest, uint8_t *image, size_t n,
                                  int64_t *oldest)
{
    const uint8_t *raw = r->raw;
    int64_t ts = newest;
    uint64_t last_order = 0;
    const uint8_t *last_key = NULL;
    size_t last_key_bytes = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint64_t head = 0;
        if (!seal_varint_get(raw, end, &at, &head)) {
            return -DS_ECORRUPT;
        }
        uint64_t delta = head >> INDEX_SEAL_HEAD_BITS;
        if (delta > (uint64_t)ts - (uint64_t)DS_TS_MS_MIN) {
            return -DS_ECORRUPT; /* below the oldest ts an entry may have */
        }
        ts = (int64_t)((uint64_t)ts - delta);
        struct ds_id order = {0};
        if (head & 1) {
            if (!seal_string_id_get(raw, end, &at, &order)) {
                return -DS_ECORRUPT;
            }
        } else {
            uint64_t zz = 0;
            if (!seal_varint_get(raw, end, &at, &zz)) {
                return -DS_ECORRUPT;
            }
            last_order += (uint64_t)ds_unzigzag(zz);
            order.value = (int64_t)last_order;
            if (order.value < 1) {
                return -DS_ECORRUPT;
            }
        }
        uint64_t status = head >> 2 & INDEX_SEAL_STATUS_INLINE;
        if ((status == INDEX_SEAL_STATUS_INLINE &&
             (!seal_varint_get(raw, end, &at, &status) || status < INDEX_SEAL_STATUS_INLINE)) ||
            status >= r->status_count) {
            return -DS_ECORRUPT; /* an index below the inline ones is written inline */
        }
        uint64_t magnitude = 0;
        bool negative = head & 2;
        if (!seal_varint_get(raw, end, &at, &magnitude) ||
            magnitude > (uint64_t)INT64_MAX + negative || (negative && magnitude == 0)) {
            return -DS_ECORRUPT;
        }
        uint8_t *key = image + n + 1;
        size_t key_bytes = index_key_tail_encode(ts, &order, key);
        if (last_key != NULL && seal_key_compare(last_key, last_key_bytes, key, key_bytes) >= 0) {
            return -DS_ECORRUPT; /* keys ascend strictly: no copies within a section */
        }
        image[n] = (uint8_t)key_bytes;
        last_key = key;
        last_key_bytes = key_bytes;
        n += 1 + key_bytes;
        const uint8_t *s = r->status[status];
        struct index_entry value;
        value.status_len = s[0];
        memcpy(value.status, s + 1, s[0]);
        value.amount_units = (int64_t)(negative ? 0 - magnitude : magnitude);
        size_t value_bytes = index_key_value_encode(&value, image + n + 1);
        image[n++] = (uint8_t)value_bytes;
        n += value_bytes;
    }
    if (at != end) {
        return -DS_ECORRUPT;
    }
    *oldest = ts;
    return (int64_t)n;
}

int64_t index_seal_reader_next(struct index_seal_reader *r, uint32_t want_slot, bool entries,
                               uint8_t *image, uint32_t *slot)
{
    if (r->sections_left == 0) {
        return r->at == r->len ? -ENOENT : -DS_ECORRUPT;
    }
    const uint8_t *raw = r->raw;
    size_t len = r->len;
    size_t at = r->at;
    uint64_t v = 0;
    if (!seal_varint_get(raw, len, &at, &v) || (r->started && v == 0)) {
        return -DS_ECORRUPT; /* a later section's slot is above the previous one */
    }
    uint64_t this_slot = r->started ? (uint64_t)r->last_slot + v : v;
    if (this_slot > r->mask || at >= len) {
        return -DS_ECORRUPT;
    }
    uint8_t flags = raw[at++];
    if (flags & ~(INDEX_SEAL_FLAG_STRING | INDEX_SEAL_FLAG_TAG | INDEX_SEAL_FLAG_LINKS |
                  INDEX_SEAL_FLAG_DIRECTORY)) {
        return -DS_ECORRUPT;
    }
    uint64_t tag = 0;
    if (flags & INDEX_SEAL_FLAG_TAG) {
        if (len - at < 8) {
            return -DS_ECORRUPT;
        }
        tag = ds_get_le64(raw + at);
        at += 8;
    }
    struct ds_id customer = {0};
    if (flags & INDEX_SEAL_FLAG_STRING) {
        if (!seal_string_id_get(raw, len, &at, &customer)) {
            return -DS_ECORRUPT;
        }
    } else {
        if (!seal_varint_get(raw, len, &at, &v) || v < 1 || v > (uint64_t)INT64_MAX) {
            return -DS_ECORRUPT;
        }
        customer.value = (int64_t)v;
    }
    uint64_t count = 0;
    uint64_t zz = 0;
    if (!seal_varint_get(raw, len, &at, &count) || count < 1 ||
        count > INDEX_SEAL_SECTION_ENTRIES || !seal_varint_get(raw, len, &at, &zz)) {
        return -DS_ECORRUPT;
    }
    uint64_t newest_bits = (uint64_t)r->last_newest_ts + (uint64_t)ds_unzigzag(zz);
    int64_t newest = (int64_t)newest_bits;
    if (newest < DS_TS_MS_MIN || newest > DS_TS_MS_MAX) {
        return -DS_ECORRUPT;
    }
    uint64_t prev = 0;
    uint64_t skip = 0;
    int64_t chain_max = newest;
    int64_t prev_chain_max = 0;
    if (flags & INDEX_SEAL_FLAG_LINKS) {
        uint64_t up = 0;
        uint64_t down = 0;
        uint64_t back = 0;
        if (!seal_varint_get(raw, len, &at, &prev) || !seal_varint_get(raw, len, &at, &up) ||
            !seal_varint_get(raw, len, &at, &down) || !seal_varint_get(raw, len, &at, &back) ||
            prev == 0 || back > prev || up > (uint64_t)DS_TS_MS_MAX - (uint64_t)newest) {
            return -DS_ECORRUPT;
        }
        chain_max = (int64_t)((uint64_t)newest + up);
        prev_chain_max = (int64_t)((uint64_t)chain_max - down);
        skip = prev - back;
    }
    uint64_t directory = 0;
    if ((flags & INDEX_SEAL_FLAG_DIRECTORY) &&
        (!seal_varint_get(raw, len, &at, &directory) || directory == 0)) {
        return -DS_ECORRUPT;
    }
    uint64_t entry_bytes = 0;
    if (!seal_varint_get(raw, len, &at, &entry_bytes) || entry_bytes > len - at) {
        return -DS_ECORRUPT;
    }
    size_t entries_at = at;
    size_t end = at + (size_t)entry_bytes;
    r->at = end;
    r->sections_left--;
    r->started = true;
    r->last_slot = (uint32_t)this_slot;
    r->last_newest_ts = newest;
    r->directory = directory;
    *slot = (uint32_t)this_slot;
    if (want_slot != UINT32_MAX && want_slot != this_slot) {
        return 0;
    }
    if (tag == 0) {
        tag = index_key_tag(&customer);
    }
    memset(image, 0, INDEX_IMAGE_HEADER_BYTES);
    image[8] = INDEX_IMAGE_TYPE_RUN;
    image[9] = customer.is_string ? 1 : 0;
    size_t n = INDEX_IMAGE_HEADER_BYTES;
    if (customer.is_string) {
        memcpy(image + n, customer.text, customer.len);
        n += customer.len;
        image[10] = (uint8_t)customer.len;
    } else {
        ds_put_le64(image + n, (uint64_t)customer.value);
        n += 8;
        image[10] = 8;
    }
    int64_t oldest = 0;
    int64_t got = (int64_t)n;
    if (entries) {
        got = seal_entries_image(r, entries_at, end, (uint32_t)count, newest, image, n, &oldest);
        if (got < 0) {
            return got;
        }
    }
    ds_put_le32(image + 4, (uint32_t)got);
    ds_put_le32(image + 12, (uint32_t)count);
    ds_put_le64(image + 16, prev);
    ds_put_le64(image + 24, (uint64_t)chain_max);
    ds_put_le64(image + 32, (uint64_t)oldest);
    ds_put_le32(image + 40, (uint32_t)this_slot);
    ds_put_le64(image + 48, tag);
    ds_put_le64(image + 56, (uint64_t)prev_chain_max);
    ds_put_le64(image + 64, skip);
    return got;
}
