/*
 * seal: the sealed records of the by-customer index's log (issue 16), private to gsi/ (store.c
 * writes them when it compacts the log and reads them on queries, scans and checks; the unit
 * tests and the fuzz harness reach it as tests may).
 *
 * A sealed record packs sections, one per slot at most, in ascending slot order. A section is
 * one customer's entries (at most INDEX_SEAL_SECTION_ENTRIES, newest first) with the fields of a
 * run header (slot, tag, prev, chain_max_ts, prev chain_max_ts, skip), encoded as varints and
 * deltas instead of fixed fields, so a customer with a few orders costs a dozen bytes of header
 * instead of 80; the payload is zstd-compressed when that is smaller. Readers turn one section
 * back into the bytes of a run record (an "image", the layout store.c's header comment gives), so
 * the query walk, the table scan and the checker read both kinds through one path.
 *
 * The record (little-endian):
 *
 *   [0]  u32 crc   CRC32C of the record's bytes after this field
 *   [4]  u32 len   the record's bytes, header included
 *   [8]  u8 type   INDEX_SEAL_RECORD_TYPE (3)
 *   [9]  u8 codec  0: the payload is raw; 1: it is one zstd frame of the raw payload
 *   [10] u16 zero
 *   [12] u32 raw payload bytes (1..INDEX_SEAL_RAW_MAX)
 *   [16] payload
 *
 * The raw payload (varint: LEB128; zz: zigzag varint; all deltas wrap in 64 bits):
 *
 *   varint status count (0..INDEX_SEAL_STATUSES_MAX), each: u8 length (0..32), the bytes
 *   varint section count (>= 1), then each section:
 *     varint slot (the first: the slot; later ones: the increase over the previous, >= 1)
 *     u8 flags: 1 the customer id is a string; 2 the slot's tag is not the customer's own (a
 *       full probe window: the customer shares its home slot's chain), u64 tag follows;
 *       4 the section links to older runs (the link fields follow; without it prev, skip and
 *       the previous chain_max_ts are 0 and chain_max_ts is the newest ts); 8 the customer's
 *       newest section of a compaction that gave it several: a directory record's offset
 *       follows the link fields
 *     [u64 tag]
 *     customer: an integer as a varint (>= 1); a string as u8 length (1..64) and the bytes
 *     varint entry count (1..INDEX_SEAL_SECTION_ENTRIES)
 *     zz newest ts: the change from the previous section's newest ts (the first: from 0)
 *     [varint prev offset, varint chain_max_ts - newest ts, varint chain_max_ts - previous
 *      chain_max_ts, varint prev - skip]
 *     [varint directory offset]
 *     varint entry bytes, then each entry (tail key order: ts descending, then order id):
 *       varint head: ts delta << 5 | status code << 2 | amount < 0 << 1 | order id is a string;
 *         ts delta is the previous entry's ts minus this one's (the first entry's: 0, its ts
 *         is the newest ts); status code 0..6 is the index into the record's statuses, 7 says
 *         the index (>= 7) follows the order id as a varint
 *       order id: an integer as zz of the change from the section's previous integer id
 *         (from 0); a string as u8 length (1..64) and the bytes
 *       [varint status index]
 *       varint |amount| (not 0 when negative)
 */
#ifndef DS_GSI_SEAL_H
#define DS_GSI_SEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "index/key.h"

#define INDEX_SEAL_RECORD_TYPE 3u
/* A directory record (store.c): a customer's sealed sections below its newest, so a page deep in
 * a heavy customer jumps to the section that holds it. */
#define INDEX_SEAL_DIRECTORY_TYPE 4u
#define INDEX_SEAL_HEADER_BYTES 16u
#define INDEX_SEAL_CODEC_RAW 0u
#define INDEX_SEAL_CODEC_ZSTD 1u
/* A section holds at most this many entries, so a page deep in a heavy customer decodes a
 * bounded amount past the entries it returns. */
#define INDEX_SEAL_SECTION_ENTRIES 128u
/* A record is closed once its raw payload passes this: a light customer's query decodes one. */
#define INDEX_SEAL_RAW_TARGET 4096u
#define INDEX_SEAL_STATUSES_MAX 256u
/* Largest entry: ts varint, string order id, status index, amount. */
#define INDEX_SEAL_ENTRY_BYTES_MAX                                                                   \
    (10u + 1u + DS_ID_BYTES_MAX + 2u + 10u) /* head, id, index, amount */
#define INDEX_SEAL_SECTION_HEADER_BYTES_MAX (5u + 1u + 8u + 1u + DS_ID_BYTES_MAX + 8u + 10u * 6u)
#define INDEX_SEAL_RAW_MAX                                                                           \
    (INDEX_SEAL_RAW_TARGET + INDEX_SEAL_SECTION_HEADER_BYTES_MAX +                                     \
     INDEX_SEAL_SECTION_ENTRIES * INDEX_SEAL_ENTRY_BYTES_MAX + 2u + INDEX_SEAL_STATUSES_MAX * 33u)
#define INDEX_SEAL_RECORD_BYTES_MAX (INDEX_SEAL_HEADER_BYTES + INDEX_SEAL_RAW_MAX + 1024u)

/* The run record an image reproduces (store.c's header comment). */
#define INDEX_IMAGE_HEADER_BYTES 72u
#define INDEX_IMAGE_ENTRY_BYTES_MAX (1u + INDEX_TAIL_BYTES_MAX + 1u + INDEX_VALUE_BYTES_MAX)
#define INDEX_IMAGE_BYTES_MAX                                                                        \
    (INDEX_IMAGE_HEADER_BYTES + DS_ID_BYTES_MAX +                                                    \
     INDEX_SEAL_SECTION_ENTRIES * INDEX_IMAGE_ENTRY_BYTES_MAX)

/* A section's header fields, as a run header holds them. */
struct index_seal_section {
    uint32_t slot;
    uint64_t tag;
    struct ds_id customer;
    uint64_t prev;
    int64_t chain_max_ts;
    int64_t prev_chain_max_ts;
    uint64_t skip;
    uint64_t directory; /* the directory record's offset, 0: none */
};

/* Builds one record's raw payload, a section at a time. */
struct index_seal_writer {
    uint8_t *body; /* INDEX_SEAL_RAW_MAX: the sections */
    size_t body_bytes;
    uint32_t sections;
    uint32_t last_slot;
    int64_t last_newest_ts;
    uint32_t status_count;
    uint8_t status_len[INDEX_SEAL_STATUSES_MAX];
    char status[INDEX_SEAL_STATUSES_MAX][DS_STATUS_BYTES_MAX];
};

/* Starts an empty record (body: INDEX_SEAL_RAW_MAX bytes, borrowed). */
void index_seal_writer_reset(struct index_seal_writer *w, uint8_t *body);
/* Whether a section of count entries for slot may join the record: its slot is above the
 * record's last one, the record is below INDEX_SEAL_RAW_TARGET and has room for count more
 * statuses. */
bool index_seal_writer_fits(const struct index_seal_writer *w, uint32_t slot, uint32_t count);
/* Adds a section: its header fields and count entries (1..INDEX_SEAL_SECTION_ENTRIES) as a run
 * holds them (keys[i], key_bytes[i]; values[i], value_bytes[i]: tail keys ascending, valid
 * encodings). Returns 0 or -DS_EUSAGE (not fits, or an entry that does not decode). */
DS_MUST_USE int index_seal_writer_add(struct index_seal_writer *w, const struct index_seal_section *s,
                                    uint32_t count, const uint8_t *const *keys,
                                    const uint8_t *key_bytes, const uint8_t *const *values,
                                    const uint8_t *value_bytes);
/* Writes the record (header, payload compressed with cctx, a ZSTD_CCtx *, when smaller) into
 * dst (INDEX_SEAL_RECORD_BYTES_MAX); returns its length. scratch: INDEX_SEAL_RAW_MAX bytes. */
size_t index_seal_writer_finish(const struct index_seal_writer *w, void *cctx, uint8_t *scratch,
                              uint8_t *dst);

/* Checks a sealed record's header and CRC (len: its whole length) and puts its raw payload in
 * raw (INDEX_SEAL_RAW_MAX; dctx: a ZSTD_DCtx *). Returns the raw length or -DS_ECORRUPT. */
DS_MUST_USE int64_t index_seal_record_open(const uint8_t *record, size_t len, void *dctx,
                                         uint8_t *raw);

/* Reads the sections of a raw payload in order. */
struct index_seal_reader {
    const uint8_t *raw;
    size_t len;
    size_t at;
    uint32_t sections_left;
    uint32_t last_slot;
    int64_t last_newest_ts;
    uint64_t mask;      /* the table's slot mask: a larger slot is damage */
    bool started;       /* a section was read: the next slot is a delta */
    uint64_t directory; /* the last section's directory offset (0: none) */
    uint32_t status_count;
    const uint8_t *status[INDEX_SEAL_STATUSES_MAX]; /* each: u8 length, the bytes */
};

/* Starts reading raw[0..len). Returns 0 or -DS_ECORRUPT. */
DS_MUST_USE int index_seal_reader_init(struct index_seal_reader *r, const uint8_t *raw, size_t len,
                                     uint64_t mask);
/* The next section as a run image in image (INDEX_IMAGE_BYTES_MAX): every field a run header
 * has, the entries as a run holds them (checked: valid ids, ts in range, keys ascending), the
 * record's CRC field 0. Without entries, the header and the customer id only (the image's
 * length and oldest ts stop there and are 0): what building the table needs. Only the slot is
 * read (and the entries skipped) when want_slot is given and differs (UINT32_MAX: every
 * section). Returns the image length, 0 when the section was skipped (its slot in *slot),
 * -ENOENT after the last one, or -DS_ECORRUPT. */
DS_MUST_USE int64_t index_seal_reader_next(struct index_seal_reader *r, uint32_t want_slot,
                                         bool entries, uint8_t *image, uint32_t *slot);

#endif /* DS_GSI_SEAL_H */
