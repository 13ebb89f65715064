/*
 * ids_record: helpers of the orders-by-id store's record codec (ids_record.c), shared by the
 * log (ids.c) and the sealed files (ids_file.c), private to storage/. The codec itself
 * (ids_record_encode/decode/valid) is declared in ids.h for the tests and the fuzzer.
 */
#ifndef DS_STORAGE_IDS_RECORD_H
#define DS_STORAGE_IDS_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "storage/storage.h"

/* Before the varint fields: CRC32C, length, flags, status length. */
#define IDS_RECORD_FIXED_BYTES 8u

size_t ids_align4(size_t n);
/* Whether id can be stored: a string of 1..DS_ID_BYTES_MAX bytes or a positive integer. */
bool ids_id_valid(const struct ds_id *id);
/* The hash the keydir and the sealed files' filters key on: integers through splitmix's
 * finaliser, strings through FNV-1a (the routing hash) and the same finaliser. */
uint64_t ids_id_hash(const struct ds_id *id);
/* The order of ids in a sealed file: integer ids by value, then string ids by their bytes. */
int ids_id_compare(const struct ds_id *a, const struct ds_id *b);
/* At least the padded size ids_record_encode gives rec. */
size_t ids_record_bound(const struct storage_order *rec);
/* The length a record's header announces, or 0 when it cannot be one (avail bytes at src). */
size_t ids_record_length(const uint8_t *src, size_t avail);
/* The padded size of the encoded record at rec (avail bytes), or 0 when its header is bad. */
size_t ids_record_padded(const uint8_t *rec, size_t avail);
/* The order id of the encoded record at rec (false when the bytes cannot hold one). */
bool ids_record_id(const uint8_t *rec, size_t avail, struct ds_id *out);

/* The order id, day and tombstone flag of the encoded record at rec, parsed without its CRC
 * check (false when the bytes cannot hold them). */
bool ids_record_key(const uint8_t *rec, size_t avail, struct ds_id *id, int32_t *day,
                    bool *tombstone);
#endif /* DS_STORAGE_IDS_RECORD_H */
