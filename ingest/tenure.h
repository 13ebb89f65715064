/*
 * Private to ingest/: who held a Kafka partition from which offset (the tenure history kept in
 * the consumer group's committed offset metadata), what a node must release before it reads
 * (the release point), the node's own id (DIR/NODE_ID) and the start of its latest run of
 * each partition (DIR/TENURES, what the node reports as its claims).
 *
 * The history text is "dstenure1 " and entries "<node id, 16 lowercase hex digits>@<start
 * offset, decimal>" separated by ',', newest first, at most TENURE_ENTRIES_MAX. The text
 * functions are pure and any thread may call them; the file functions do blocking I/O and log
 * the errors they return (naming the file).
 */
#ifndef DS_INGEST_TENURE_H
#define DS_INGEST_TENURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "ingest/ingest.h"

/* Entries a history keeps: each handover of a partition adds one, and the release point only
 * needs the entries since the node's own latest one, so 16 handovers of one partition while a
 * node was away is where the oldest is dropped. 16 entries are ~600 bytes, well inside the
 * broker's offset.metadata.max.bytes (4096 by default). */
#define TENURE_ENTRIES_MAX 16u
#define TENURE_PREFIX "dstenure1 "
/* The longest history text: the prefix, 16 entries of 16 hex digits, '@' and up to 19 digits,
 * 15 commas, and a NUL. */
#define TENURE_TEXT_BYTES_MAX                                                                      \
    (sizeof(TENURE_PREFIX) - 1u + TENURE_ENTRIES_MAX * (16u + 1u + 19u) + TENURE_ENTRIES_MAX)
/* Kafka partitions whose latest run DIR/TENURES records: the partitions a node tracks. */
#define TENURE_PARTITIONS_MAX INGEST_NODE_PARTITIONS_MAX
#define TENURE_PARTITION_WORDS ((TENURE_PARTITIONS_MAX + 63u) / 64u)

struct tenure_entry {
    uint64_t node; /* never 0 */
    int64_t start; /* the offset the node started reading the partition at, >= 0 */
};

/* A partition's history, entries[0] the newest. */
struct tenure_history {
    uint32_t count;
    struct tenure_entry entries[TENURE_ENTRIES_MAX];
};

/* Parses len bytes of committed offset metadata (text may be NULL when len is 0; it need not
 * be NUL-terminated; borrowed). Empty metadata (nothing committed with a history yet) is an
 * empty history and 0. Anything else that is not exactly a history this file formats (another
 * client's metadata, a damaged or truncated one) leaves *h empty and returns -EINVAL with
 * *reason a constant text the caller logs; never reads past len. */
DS_MUST_USE int tenure_parse(const char *text, size_t len, struct tenure_history *h,
                             const char **reason);
/* Writes h as text with a NUL into dst (cap bytes; TENURE_TEXT_BYTES_MAX always fits).
 * Returns the length without the NUL, or -ENOSPC (dst then holds no history). */
DS_MUST_USE int64_t tenure_format(const struct tenure_history *h, char *dst, size_t cap);
/* Adds the newest entry (node, start), dropping the oldest when h is full. */
void tenure_prepend(struct tenure_history *h, uint64_t node, int64_t start);
/* Whether the node with durable next offset `next` of the partition must release [*lo, inf)
 * of it before it reads anything: T is the earliest entry newer than the node's latest own
 * entry (the oldest entry when the node has none); true with *lo = T.start when next >
 * T.start. False when the history is empty or its newest entry is the node's own. Run before
 * the node prepends its own new entry. */
bool tenure_release_point(const struct tenure_history *h, uint64_t node, int64_t next, int64_t *lo);

/* ---- DIR/NODE_ID ---------------------------------------------------------------------------- */

/* Parses a NODE_ID file's bytes: 16 lowercase hex digits of a nonzero id and a newline. */
DS_MUST_USE int tenure_node_id_parse(const char *text, size_t len, uint64_t *id);
/* Loads DIR/NODE_ID, or creates it with a random nonzero id (getrandom) written atomically
 * (temp file, fdatasync, rename, directory fsync) when it does not exist. Returns 0 with *id,
 * -DS_ECORRUPT (the file is damaged: logged with its path), or a negated errno. */
DS_MUST_USE int tenure_node_id_load(const char *dir, uint64_t *id);

/* ---- DIR/TENURES ---------------------------------------------------------------------------- */

/* For each Kafka partition, the offset where the node last started reading it. */
struct tenure_runs {
    uint64_t known[TENURE_PARTITION_WORDS];
    int64_t from[TENURE_PARTITIONS_MAX];
};

void tenure_runs_set(struct tenure_runs *runs, uint32_t partition, int64_t from);
/* Lowers a known partition's from to lo when lo is below it (after a release of [lo, inf)). */
void tenure_runs_lower(struct tenure_runs *runs, uint32_t partition, int64_t lo);
bool tenure_runs_get(const struct tenure_runs *runs, uint32_t partition, int64_t *from);
/* The file's text: "dayshard tenures 1\n", one "<partition> <from>\n" per known partition in
 * increasing order, then "crc32c <8 lowercase hex digits>\n" of every byte before that line.
 * Returns the length or -ENOSPC. */
DS_MUST_USE int64_t tenure_runs_format(const struct tenure_runs *runs, char *dst, size_t cap);
/* Parses a TENURES file's bytes strictly: 0, -DS_EFORMAT (another version), -DS_ECORRUPT. */
DS_MUST_USE int tenure_runs_parse(const char *text, size_t len, struct tenure_runs *runs);
/* Loads DIR/TENURES into *runs (a missing file: none known). Returns 0, -DS_ECORRUPT or
 * -DS_EFORMAT (logged with the file's path), or a negated errno. */
DS_MUST_USE int tenure_runs_load(const char *dir, struct tenure_runs *runs);
/* Replaces DIR/TENURES atomically (temp file, fdatasync, rename, directory fsync). */
DS_MUST_USE int tenure_runs_save(const char *dir, const struct tenure_runs *runs);

#endif /* DS_INGEST_TENURE_H */
