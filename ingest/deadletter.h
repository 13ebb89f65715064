/*
 * Private to ingest/: the dead-letter files, rotated by size, their recovery and retention.
 *
 * Dead letters live in numbered files DIR/deadletter.NNNNNNNN.jsonl (8 decimal digits, from
 * 00000000); the newest is the one appended to. The MANIFEST's dead-letter slot
 * (storage_deadletter_set, source entry -2) records a position: the current file's number in
 * bits 40..62 and its committed length in bits 0..39 (DEADLETTER_POSITION). A plain
 * deadletter.jsonl of an older directory is file 0 with its committed length as the position,
 * the value that directory's MANIFEST already holds; deadletter_open renames it to file 0.
 *
 * Only the writer stage's writer thread calls these, between stage_start and stage_finish.
 */
#ifndef DS_INGEST_DEADLETTER_H
#define DS_INGEST_DEADLETTER_H

#include <stdint.h>
#include <stdio.h>

#include "common/common.h"
#include "ingest/ingest.h"

/* A file's committed length fits in 40 bits (1 TiB, far above DEADLETTER_FILE_BYTES_MAX plus
 * what one commit can add); the file number takes the 23 bits above it (8 million files), so
 * a position stays a positive int64 as the MANIFEST's source table stores it. */
#define DEADLETTER_LENGTH_BITS 40u
#define DEADLETTER_NUMBER_MAX ((1u << 23) - 1u)
#define DEADLETTER_POSITION(number, length)                                                        \
    (((uint64_t)(number) << DEADLETTER_LENGTH_BITS) | (uint64_t)(length))
#define DEADLETTER_FILE_BYTES_MAX INGEST_DEADLETTER_FILE_BYTES_MAX
_Static_assert(DEADLETTER_FILE_BYTES_MAX < (1ull << DEADLETTER_LENGTH_BITS) / 2,
               "a full file plus one commit's dead letters fits a position's length");
/* Rotated files whose closing stream day is remembered one by one; older ones share the
 * latest day among them (kept longer, never dropped early). 64 files cover 4 GiB at the
 * default size. */
#define DEADLETTER_CLOSED_MAX 64u
/* A closing day not known yet (no data committed): resolved to the stream day at the next
 * deadletter_retire that knows one. */
#define DEADLETTER_DAY_UNKNOWN INT32_MIN

struct deadletter_closed {
    uint32_t number;
    int32_t day;
};

struct deadletter {
    char base[DS_PATH_MAX]; /* "DIR/deadletter": files are base.NNNNNNNN.jsonl */
    uint64_t file_bytes_max;
    FILE *file; /* the current file, opened for append */
    uint32_t number;
    uint32_t oldest; /* the lowest file number on disk (== number when none is rotated) */
    /* Retention: rotated files below closed[0].number (or all of them when closed_count is 0)
     * share held_day; the rest are in closed[], oldest first. */
    int32_t held_day;
    uint32_t closed_count;
    struct deadletter_closed closed[DEADLETTER_CLOSED_MAX];
};

/* Opens the dead letters named by legacy_path ("DIR/deadletter.jsonl", borrowed): renames a
 * legacy file to number 0, removes files above the committed position's number (a rotation no
 * commit reached), cuts the current file to the committed length, creates it if missing.
 * stream_day (storage_stream_day, -1 when unknown) dates the files already rotated. Returns 0,
 * -EEXIST (a legacy file beside numbered ones), -DS_ECORRUPT (a number past the numbering), or
 * a negated errno; logs the cause. */
DS_MUST_USE int deadletter_open(struct deadletter *d, const char *legacy_path, uint64_t committed,
                                uint64_t file_bytes_max, int32_t stream_day);
/* Appends one record and its newline (buffered; deadletter_sync makes it durable). */
void deadletter_write(struct deadletter *d, const char *record, size_t len);
/* Flushes and fdatasyncs the current file; when it has reached file_bytes_max, creates the
 * next file and syncs the directory, so the position returned (for storage_deadletter_set and
 * the next commit) names a file that survives a crash. stream_day dates the file closed.
 * Returns 0 with *position set, or a negated errno (logged). */
DS_MUST_USE int deadletter_sync(struct deadletter *d, int32_t stream_day, uint64_t *position);
/* After a commit: removes rotated files closed before the retention floor (their newest line
 * was written on a stream day now dropped), oldest first; never the current file. floor 0
 * removes nothing. Returns the number of files removed or a negated errno (logged). */
DS_MUST_USE int deadletter_retire(struct deadletter *d, int32_t floor, int32_t stream_day);
/* Closes the current file; accepts a never-opened (zeroed) or closed one. */
void deadletter_close(struct deadletter *d);
/* The path of file number (for tests and logs). */
void deadletter_path(const struct deadletter *d, uint32_t number, char *dst, size_t dst_capacity);

#endif /* DS_INGEST_DEADLETTER_H */
