/*
 * The record codec of the orders-by-id store (ids.h's codec, ids_record.h's helpers): one
 * encoding for the log and the sealed files, so a seal copies records without re-encoding them.
 *
 * Record, little-endian, 4-byte aligned (the zero padding is not counted in length):
 *   0 u32 CRC32C of bytes 4..length   4 u16 length   6 u8 flags (IDS_FLAG_*)   7 u8 status length
 *   8 order id, customer id (each a varint, or for a string id a length byte and its bytes),
 *     version (a varint, when the flag says it has one), ts_ms (varint; the day follows from it),
 *     shard, zigzag amount units, versions seen, zigzag source partition (varints), the status
 *     bytes, and when the flag says so the items: a varint length and the canonical bytes.
 * Every record is checked (CRC, lengths, ranges) when it is encoded and again each time it is
 * read back.
 */
#include <string.h>

#include "shard/shard.h"
#include "storage/ids.h"
#include "storage/ids_record.h"
#include "storage/storage.h"

#define IDS_FLAG_ID_STRING 1u
#define IDS_FLAG_HAS_VERSION 2u
#define IDS_FLAG_CUSTOMER_STRING 4u
#define IDS_FLAG_ITEMS 8u
/* A tombstone: the order (the version the record repeats) left this store (storage_release). */
#define IDS_FLAG_TOMBSTONE 16u
#define IDS_FLAGS_ALL 31u

/* ---- encoding ------------------------------------------------------------------------------ */

size_t ids_align4(size_t n)
{
    return (n + 3u) & ~(size_t)3u;
}

bool ids_id_valid(const struct ds_id *id)
{
    if (id->is_string) {
        return id->len >= 1 && id->len <= DS_ID_BYTES_MAX && id->value == 0;
    }
    return id->len == 0 && id->value >= 1;
}

/* The hash of an id: integers through splitmix's finaliser, strings through FNV-1a (the
 * routing hash) and the same finaliser, so the high bits the keydir keeps are well mixed. */
uint64_t ids_id_hash(const struct ds_id *id)
{
    if (!id->is_string) {
        return ds_mix64((uint64_t)id->value);
    }
    return ds_mix64(shard_fnv1a64(id->text, id->len) ^ 0x9e3779b97f4a7c15ull);
}

bool ids_record_valid(const struct storage_order *rec)
{
    return ids_id_valid(&rec->order_id) && ids_id_valid(&rec->customer_id) && rec->version >= 0 &&
           (rec->has_version || rec->version == 0) && rec->ts_ms >= DS_TS_MS_MIN &&
           rec->ts_ms <= DS_TS_MS_MAX && rec->day == ds_day_from_ms(rec->ts_ms) &&
           rec->status_len <= DS_STATUS_BYTES_MAX && rec->items_bytes <= DS_ITEMS_BYTES_MAX &&
           (rec->items_bytes == 0) == (rec->items == NULL);
}

/* Writes id as the record holds it: a varint for an integer, a length byte and the bytes for a
 * string (its kind is a flag). */
static size_t put_id(uint8_t *dst, const struct ds_id *id)
{
    if (!id->is_string) {
        return ds_varint_put(dst, (uint64_t)id->value);
    }
    dst[0] = id->len;
    memcpy(dst + 1, id->text, id->len);
    return 1u + id->len;
}

static bool get_id(const uint8_t **p, const uint8_t *end, bool is_string, struct ds_id *id)
{
    memset(id, 0, sizeof(*id));
    id->is_string = is_string;
    if (!is_string) {
        uint64_t v = 0;
        if (!ds_varint_next(p, end, &v) || v > INT64_MAX) {
            return false;
        }
        id->value = (int64_t)v;
        return true;
    }
    if (*p >= end || **p > DS_ID_BYTES_MAX || (size_t)(end - *p) < 1u + **p) {
        return false;
    }
    id->len = *(*p)++;
    memcpy(id->text, *p, id->len);
    *p += id->len;
    return true;
}

/* At least the padded size record_encode gives rec. */
size_t ids_record_bound(const struct storage_order *rec)
{
    size_t ids = (rec->order_id.is_string ? 1u + rec->order_id.len : 10u) +
                 (rec->customer_id.is_string ? 1u + rec->customer_id.len : 10u);
    return ids_align4(IDS_RECORD_FIXED_BYTES + ids + 10u + 10u + 5u + 10u + 5u + 5u +
                      rec->status_len + 3u + rec->items_bytes);
}

/* Encodes rec (valid) into dst, zero padding included; returns the padded size. */
size_t ids_record_encode(const struct storage_order *rec, bool tombstone, uint8_t *dst)
{
    uint8_t *p = dst + IDS_RECORD_FIXED_BYTES;
    p += put_id(p, &rec->order_id);
    p += put_id(p, &rec->customer_id);
    if (rec->has_version) {
        p += ds_varint_put(p, (uint64_t)rec->version);
    }
    p += ds_varint_put(p, (uint64_t)rec->ts_ms);
    p += ds_varint_put(p, rec->shard);
    p += ds_varint_put(p, ds_zigzag(rec->amount_units));
    p += ds_varint_put(p, rec->versions_seen);
    p += ds_varint_put(p, ds_zigzag(rec->source_partition));
    memcpy(p, rec->status, rec->status_len);
    p += rec->status_len;
    if (rec->items != NULL) {
        p += ds_varint_put(p, rec->items_bytes);
        memcpy(p, rec->items, rec->items_bytes);
        p += rec->items_bytes;
    }
    size_t length = (size_t)(p - dst);
    size_t padded = ids_align4(length);
    ASSERT(padded <= IDS_RECORD_BYTES_MAX);
    memset(p, 0, padded - length);
    ds_put_le16(dst + 4, (uint16_t)length);
    dst[6] = (uint8_t)((rec->order_id.is_string ? IDS_FLAG_ID_STRING : 0u) |
                       (rec->has_version ? IDS_FLAG_HAS_VERSION : 0u) |
                       (rec->customer_id.is_string ? IDS_FLAG_CUSTOMER_STRING : 0u) |
                       (rec->items != NULL ? IDS_FLAG_ITEMS : 0u) |
                       (tombstone ? IDS_FLAG_TOMBSTONE : 0u));
    dst[7] = rec->status_len;
    ds_put_le32(dst, ds_crc32c(0, dst + 4, length - 4));
    return padded;
}

/* The record length a header announces, or 0 when it cannot be one (avail bytes at src). */
size_t ids_record_length(const uint8_t *src, size_t avail)
{
    if (avail < IDS_RECORD_FIXED_BYTES) {
        return 0;
    }
    size_t length = ds_get_le16(src + 4);
    if (length < IDS_RECORD_FIXED_BYTES + 5u || ids_align4(length) > IDS_RECORD_BYTES_MAX) {
        return 0;
    }
    return length;
}

size_t ids_record_padded(const uint8_t *rec, size_t avail)
{
    size_t length = ids_record_length(rec, avail);
    return length == 0 ? 0 : ids_align4(length);
}

bool ids_record_id(const uint8_t *rec, size_t avail, struct ds_id *out)
{
    size_t length = ids_record_length(rec, avail);
    if (length == 0 || length > avail) {
        return false;
    }
    const uint8_t *p = rec + IDS_RECORD_FIXED_BYTES;
    return get_id(&p, rec + length, (rec[6] & IDS_FLAG_ID_STRING) != 0, out) && ids_id_valid(out);
}

/* Only the header and the fields up to ts: no CRC (the seal reads records its own writer encoded
 * or its open's replay checked; the sealed files keep the CRCs, checked at every read). */
bool ids_record_key(const uint8_t *rec, size_t avail, struct ds_id *id, int32_t *day,
                    bool *tombstone)
{
    size_t length = ids_record_length(rec, avail);
    if (length == 0 || length > avail) {
        return false;
    }
    uint8_t flags = rec[6];
    const uint8_t *p = rec + IDS_RECORD_FIXED_BYTES;
    const uint8_t *end = rec + length;
    struct ds_id customer;
    uint64_t version = 0, ts = 0;
    bool ok = get_id(&p, end, flags & IDS_FLAG_ID_STRING, id) && ids_id_valid(id) &&
              get_id(&p, end, flags & IDS_FLAG_CUSTOMER_STRING, &customer) &&
              ((flags & IDS_FLAG_HAS_VERSION) == 0 || ds_varint_next(&p, end, &version)) &&
              ds_varint_next(&p, end, &ts) && ts <= (uint64_t)DS_TS_MS_MAX &&
              (int64_t)ts >= DS_TS_MS_MIN;
    if (ok) {
        *day = ds_day_from_ms((int64_t)ts);
        *tombstone = (flags & IDS_FLAG_TOMBSTONE) != 0;
    }
    return ok;
}

/* Integer ids by value, then string ids by their bytes (a prefix first). */
int ids_id_compare(const struct ds_id *a, const struct ds_id *b)
{
    if (a->is_string != b->is_string) {
        return a->is_string ? 1 : -1;
    }
    if (!a->is_string) {
        return (a->value > b->value) - (a->value < b->value);
    }
    size_t n = a->len < b->len ? a->len : b->len;
    int cmp = memcmp(a->text, b->text, n);
    return cmp != 0 ? cmp : (a->len > b->len) - (a->len < b->len);
}

/* Decodes and checks the record at src (avail bytes, at least its announced length); out->items
 * points into src. Returns 0 or -DS_ECORRUPT. */
int ids_record_decode(const uint8_t *src, size_t avail, struct storage_order *out, bool *tombstone)
{
    size_t length = ids_record_length(src, avail);
    if (length == 0 || length > avail || ds_get_le32(src) != ds_crc32c(0, src + 4, length - 4)) {
        return -DS_ECORRUPT;
    }
    uint8_t flags = src[6];
    const uint8_t *p = src + IDS_RECORD_FIXED_BYTES;
    const uint8_t *end = src + length;
    struct storage_order rec = {0};
    rec.status_len = src[7];
    rec.has_version = flags & IDS_FLAG_HAS_VERSION;
    uint64_t version = 0, ts = 0, shard = 0, amount = 0, seen = 0, items = 0, source = 0;
    bool ok = (flags & ~IDS_FLAGS_ALL) == 0 && rec.status_len <= DS_STATUS_BYTES_MAX &&
              get_id(&p, end, flags & IDS_FLAG_ID_STRING, &rec.order_id) &&
              get_id(&p, end, flags & IDS_FLAG_CUSTOMER_STRING, &rec.customer_id) &&
              (!rec.has_version || ds_varint_next(&p, end, &version)) &&
              ds_varint_next(&p, end, &ts) && ds_varint_next(&p, end, &shard) &&
              ds_varint_next(&p, end, &amount) && ds_varint_next(&p, end, &seen) &&
              ds_varint_next(&p, end, &source) && (size_t)(end - p) >= rec.status_len;
    if (ok) {
        memcpy(rec.status, p, rec.status_len);
        p += rec.status_len;
    }
    if (ok && (flags & IDS_FLAG_ITEMS) != 0) {
        ok = ds_varint_next(&p, end, &items) && items <= DS_ITEMS_BYTES_MAX &&
             (uint64_t)(end - p) >= items;
        rec.items = p;
        rec.items_bytes = (uint16_t)items;
        p += ok ? items : 0;
    }
    if (!ok || p != end || version > INT64_MAX || ts > (uint64_t)DS_TS_MS_MAX ||
        shard > UINT32_MAX || seen > UINT32_MAX || ds_unzigzag(source) < INT32_MIN ||
        ds_unzigzag(source) > INT32_MAX) {
        return -DS_ECORRUPT;
    }
    rec.source_partition = (int32_t)ds_unzigzag(source);
    rec.version = (int64_t)version;
    rec.ts_ms = (int64_t)ts;
    rec.day = ds_day_from_ms(rec.ts_ms);
    rec.shard = (uint32_t)shard;
    rec.amount_units = ds_unzigzag(amount);
    rec.versions_seen = (uint32_t)seen;
    if (!ids_record_valid(&rec)) {
        return -DS_ECORRUPT;
    }
    *out = rec;
    *tombstone = (flags & IDS_FLAG_TOMBSTONE) != 0;
    return 0;
}
