/*
 * key: the byte encodings of the by-customer index, private to gsi/ (store.c; the unit tests and
 * the fuzz harness reach it as tests may): the RocksDB store before store.c used the same ones, so
 * the page order and the page tokens did not change when it was replaced.
 *
 * A tail key is an entry's position within its customer, compared bytewise (memcmp, a shorter
 * key that is a prefix of a longer one first; no tail key is a prefix of another):
 *
 *   ts        u64 ~ts_ms, big-endian                          (newest first)
 *   order id  integer: 0xFE, u64 ~id, big-endian
 *             string:  0xFD, ~E(bytes), where E escapes 0x00 as 0x00 0xFF and ends 0x00 0x00
 *
 * so among equal ts, string order ids come before integer ones, each descending. A value is u8
 * status length, the status bytes, the amount as a zigzag varint. A page token is the lowercase
 * hex of the tail key of the last entry of a page.
 */
#ifndef DS_GSI_KEY_H
#define DS_GSI_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "index/index.h"

#define INDEX_TAG_ORDER_STRING 0xFDu /* ~0x02 */
#define INDEX_TAG_ORDER_INT 0xFEu    /* ~0x01 */
#define INDEX_ORDER_BYTES_MAX (1u + 2u * DS_ID_BYTES_MAX + 2u)
#define INDEX_TAIL_BYTES_MAX (8u + INDEX_ORDER_BYTES_MAX)
/* The tail key of an integer order id: ~ts, 0xFE, ~id. */
#define INDEX_TAIL_INT_BYTES 17u
#define INDEX_VALUE_BYTES_MAX (1u + DS_STATUS_BYTES_MAX + 10u)

_Static_assert(INDEX_TOKEN_CHARS_MAX == 2u * INDEX_TAIL_BYTES_MAX, "a token is hex of a tail key");

void index_key_be64_put(uint8_t *dst, uint64_t v);
uint64_t index_key_be64_get(const uint8_t *src);
/* An id the index accepts: an integer >= 1 or a string of 1..DS_ID_BYTES_MAX bytes. */
bool index_key_id_valid(const struct ds_id *id);
/* The customer's tag in the slot table: a hash of kind and id, never 0 (0 marks an empty slot). */
uint64_t index_key_tag(const struct ds_id *customer);
/* Writes the tail key of (ts_ms, order) into dst (INDEX_TAIL_BYTES_MAX); returns its length. */
size_t index_key_tail_encode(int64_t ts_ms, const struct ds_id *order, uint8_t *dst);
/* Decodes a tail key of exactly len bytes. Returns 0 or -DS_ECORRUPT. */
DS_MUST_USE int index_key_tail_decode(const uint8_t *src, size_t len, int64_t *ts_ms,
                                    struct ds_id *order);
/* Writes e's status and amount into dst (INDEX_VALUE_BYTES_MAX); returns its length. */
size_t index_key_value_encode(const struct index_entry *e, uint8_t *dst);
/* Decodes a value of exactly len bytes into e's status and amount. Returns 0 or -DS_ECORRUPT. */
DS_MUST_USE int index_key_value_decode(const uint8_t *src, size_t len, struct index_entry *e);
/* Lowercase hex of src into dst (2 * len + 1 bytes, NUL-terminated). */
void index_key_hex_encode(const uint8_t *src, size_t len, char *dst);
/* Decodes a page token into its tail key (dst: INDEX_TAIL_BYTES_MAX); returns the byte count or
 * -DS_EUSAGE (not hex, or not a well-formed tail key). */
DS_MUST_USE int index_key_token_decode(const char *token, uint8_t *dst);

#endif /* DS_GSI_KEY_H */
