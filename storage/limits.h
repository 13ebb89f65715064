/*
 * storage's limits: the hard maxima and defaults that the facade (storage.h), the on-disk
 * formats (format.h) and the private units size their tables by. Part of the public API through
 * storage.h, which includes it; storage's own headers include this one instead of the facade so
 * that the bottom layers do not depend on the top one.
 */
#ifndef DS_STORAGE_LIMITS_H
#define DS_STORAGE_LIMITS_H

/* ---- limits -------------------------------------------------------------------------------- */

/* Events in one block: 65535 keeps counts in u16 columns and a block's raw payload ~1 MiB. */
#define STORAGE_BLOCK_EVENTS_MAX 65535u
/* Distinct statuses in one block; a block is sealed early rather than exceed it, so that block
 * headers always carry exact per-status counts. Real order streams have a handful. */
#define STORAGE_BLOCK_STATUS_MAX 32u
/* Distinct statuses a partition summary tracks by name; rarer ones are summed as "other" and a
 * count filtered on them reads block headers instead. */
#define STORAGE_SUMMARY_STATUS_MAX 32u
/* Segment size: large enough that a day's shard rarely needs more than a few files. */
#define STORAGE_SEGMENT_BYTES_MAX (1024ull * 1024 * 1024)
#define STORAGE_SEGMENT_BYTES_DEFAULT (64ull * 1024 * 1024)
/* Partitions one node tracks (open blocks and summaries are per partition). 1<<18 is 179 years
 * of days at 4 shards. */
#define STORAGE_PARTITIONS_MAX (1u << 18)
/* Memory of all open (not yet sealed) blocks together; past it the fullest block is sealed. */
#define STORAGE_OPEN_BYTES_DEFAULT (64u * 1024 * 1024)
/* In-flight I/O operations of one flush (io_uring queue depth). */
#define STORAGE_IO_DEPTH_MAX 256u
/* Source (Kafka) partitions whose offsets are tracked in the manifest. */
#define STORAGE_SOURCES_MAX 4096u
/* Ranges fsck --repair may take out of one store (manifest skip entries, 40 bytes each): a
 * store with more damage than this needs restoring from its source, not repairing. */
#define STORAGE_QUARANTINE_MAX 65536u

/* Retention window in days (--retention-days): 100 years; a larger value is a typo, not a
 * policy (0 keeps every day). */
#define STORAGE_RETENTION_DAYS_MAX 36500u

/* Dead rows (superseded versions and their retractions) a partition gathers before
 * storage_compact_due rewrites it (when they are also a quarter of its rows or more), the
 * default of storage_config.compact_dead_rows_min. */
#define STORAGE_COMPACT_DEAD_ROWS_MIN 16384u

/* The work storage_compact_due does after one commit: the writer takes no event meanwhile. A
 * slice ends at the first block boundary past it, then writes and syncs what it sealed, so it
 * runs over by one block's decode and encode (a few ms at 65,535 rows) and a sync; well under
 * the 100 ms the writer may stall, and small beside a commit interval. */
#define STORAGE_COMPACT_SLICE_NS (20ull * 1000 * 1000)

/* Commits a partition takes no append before storage_compact_due looks at its block sizes:
 * a partition still written gets a small block per commit, and merging them while they come
 * would rewrite it again and again. */
#define STORAGE_COMPACT_IDLE_COMMITS 16u

/* Blocks a partition needs before its small blocks are merged (fewer cost little to read). */
#define STORAGE_COMPACT_MERGE_BLOCKS_MIN 8u

/* Retraction rows one storage_release_range call appends before it returns -EAGAIN (commit and
 * call again): bounds one commit's size and how long a release holds the writer (a million
 * rows: about a second of appends and one commit of ~10 MB). */
#define STORAGE_RELEASE_ROWS_MAX (1u << 20)

#endif /* DS_STORAGE_LIMITS_H */
