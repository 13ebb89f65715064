/*
 * ids_file: one sealed file of the orders-by-id store (ids.c), private to storage/.
 *
 * A sealed file holds the current versions of the orders whose current version is on one day,
 * sorted by order id (integer ids by value, then string ids by their bytes), as the records of
 * the log (ids.h's codec) grouped in blocks of about IDS_FILE_BLOCK_BYTES. It is written once
 * (ids_file_writer_*), fsynced, and never changed; a seal writes a new file in its place. Opening
 * one reads only its block index (first id of each block) and its bloom filter, never the
 * records: a lookup tests the filter and the file's integer id range, then reads one block.
 *
 * Threads: a file and a writer belong to one thread.
 */
#ifndef DS_STORAGE_IDS_FILE_H
#define DS_STORAGE_IDS_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zstd.h>

#include "common/common.h"
#include "storage/storage.h"

/* A block closes before a record that would take it past this size (a record larger than it is
 * a block of its own); it is stored as one zstd frame (level IDS_FILE_ZSTD_LEVEL). 16 KiB is
 * about 500 typical records: zstd finds the repeats of neighbouring orders (a 4 KiB block
 * compressed worse), and a lookup that hits reads a few KiB and decompresses one block. */
#define IDS_FILE_BLOCK_BYTES 16384u
#define IDS_FILE_ZSTD_LEVEL 1
/* Bloom filter bits per record: 10 bits and 6 probes in one 512-bit line give about 1% false
 * positives, so a miss (a new order) reads a block of one file in a hundred. */
#define IDS_FILE_BLOOM_BITS_PER_RECORD 10u

struct ids_file;
struct ids_file_writer;

/* Opens a sealed file and loads its index and filter; day is the day the descriptor names it
 * for. Returns 0, -DS_ECORRUPT (a bad footer, checksum or index, or another day: logged with
 * the path), -ENOMEM, or a negated errno (-ENOENT when the file is gone). */
DS_MUST_USE int ids_file_open(const char *path, int32_t day, struct ids_file **out);
void ids_file_close(struct ids_file *f);
uint64_t ids_file_records(const struct ids_file *f);
uint64_t ids_file_bytes(const struct ids_file *f);
/* Memory the open file holds (index and filter). */
uint64_t ids_file_memory_bytes(const struct ids_file *f);

/* Looks id (of hash ids_id_hash) up: 0 with the record's bytes copied to dst (capacity
 * IDS_RECORD_BYTES_MAX) and decoded into out (items point into dst), -ENOENT, -DS_ECORRUPT or a
 * negated errno of the read. block (IDS_FILE_BLOCK_BYTES + IDS_RECORD_BYTES_MAX bytes) and
 * dctx (the calling thread's) are scratch. Several threads may look up one file at once. */
DS_MUST_USE int ids_file_find(struct ids_file *f, const struct ds_id *id, uint64_t hash,
                              uint8_t *block, ZSTD_DCtx *dctx, uint8_t *dst,
                              struct storage_order *out);

/* Reads the records in order: next gives each record's bytes (valid until the next call).
 * Returns 1 (a record), 0 (the end), -DS_ECORRUPT, -ENOMEM or a negated errno. end frees what
 * the iterator holds. */
struct ids_file_iter {
    struct ids_file *f;
    ZSTD_DCtx *dctx;
    uint32_t block;
    size_t used;
    size_t bytes;
    uint8_t buf[IDS_FILE_BLOCK_BYTES + IDS_RECORD_BYTES_MAX];
};
void ids_file_iter_start(struct ids_file *f, struct ids_file_iter *it);
DS_MUST_USE int ids_file_iter_next(struct ids_file_iter *it, const uint8_t **rec, size_t *bytes);
void ids_file_iter_end(struct ids_file_iter *it);

/* Writes a file at path for day, records_max records at most (sizes the filter). Records come
 * in ascending id order, each a checked record of day. finish writes the index, the filter and
 * the footer and fsyncs; abort removes the file. Both free the writer. */
DS_MUST_USE int ids_file_writer_open(const char *path, int32_t day, uint64_t records_max,
                                     struct ids_file_writer **out);
DS_MUST_USE int ids_file_writer_add(struct ids_file_writer *w, const uint8_t *rec, size_t bytes);
uint64_t ids_file_writer_records(const struct ids_file_writer *w);
DS_MUST_USE int ids_file_writer_finish(struct ids_file_writer *w);
void ids_file_writer_abort(struct ids_file_writer *w);

#endif /* DS_STORAGE_IDS_FILE_H */
