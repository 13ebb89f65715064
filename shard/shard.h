/*
 * shard: where an event goes (DESIGN.md section 3, a contract).
 *
 * - day = UTC calendar date of the event's timestamp (days since 1970-01-01);
 * - partition key = "DAY#YYYY-MM-DD#k", 0 <= k < S(day);
 * - k = order_id mod S for integer ids, FNV-1a 64 of the string's bytes mod S for string ids;
 * - S(day) comes from the shard map: per day, persisted, only ever grows. A day first seen gets
 *   the configured base count. Counting fans out over every shard a day has ever had.
 *
 * The routing functions are pure and thread-safe. A struct shard_map belongs to one thread; a
 * reader in another process sees the last synced map (the file is replaced atomically).
 */
#ifndef DS_SHARD_H
#define DS_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

/* Shards a day may have. 1024 is far beyond what one node's writers can use (each shard is a
 * partition directory and an open segment) and keeps a count's fan-out bounded. */
#define SHARD_COUNT_MAX 1024u
/* Default base shard count (DESIGN.md section 6: --shards default 4). */
#define SHARD_COUNT_DEFAULT 4u
/* Days one map can hold: 65536 days is ~179 years of data; the table is fixed at open. */
#define SHARD_MAP_DAYS_MAX 65536u
/* "DAY#" + "YYYY-MM-DD" + "#" + up to 4 digits + NUL. */
#define SHARD_KEY_TEXT_SIZE 24u

/* FNV-1a, 64-bit, of len bytes. */
uint64_t shard_fnv1a64(const void *data, size_t len);
/* The shard of an order id among shard_count shards (shard_count >= 1). */
uint32_t shard_of_id(const struct ds_id *order_id, uint32_t shard_count);
/* Writes "DAY#YYYY-MM-DD#k" into dst (SHARD_KEY_TEXT_SIZE bytes); returns its length. */
size_t shard_key_format(int32_t day, uint32_t shard, char *dst);
/* Parses a partition key; returns 0 or -DS_EUSAGE. */
DS_MUST_USE int shard_key_parse(const char *text, size_t len, int32_t *day, uint32_t *shard);

/* ---- the per-day shard map ----------------------------------------------------------------- */

struct shard_map;

enum shard_map_flags {
    SHARD_MAP_READ_ONLY = 1u << 0, /* never writes; a missing file is an empty map */
};

/* Opens (or creates, unless read-only) the map stored as DIR/shardmap. base_shards is the count
 * a newly seen day gets (1..SHARD_COUNT_MAX). Returns 0, -DS_ECORRUPT for a damaged file,
 * -DS_EFORMAT for an unknown version, or a negated errno. */
DS_MUST_USE int shard_map_open(const char *dir, uint32_t base_shards, unsigned flags,
                               struct shard_map **out);
void shard_map_close(struct shard_map *map);

/* S(day), or 0 when the day has never been seen. */
uint32_t shard_map_get(const struct shard_map *map, int32_t day);
/* S(day), giving the day base_shards if it is new (the map becomes dirty). Returns the count, or
 * -DS_ELIMIT when the map is full. */
DS_MUST_USE int shard_map_ensure(struct shard_map *map, int32_t day);
/* Raises S(day) to shard_count; a smaller count than the current one is refused (-EINVAL):
 * the map only grows. */
DS_MUST_USE int shard_map_grow(struct shard_map *map, int32_t day, uint32_t shard_count);
/* True when changes are not yet on disk. */
bool shard_map_dirty(const struct shard_map *map);
/* Makes every change durable (atomic replace of the file). Returns 0 or a negated errno; on
 * failure the map stays dirty and the old file stays intact. */
DS_MUST_USE int shard_map_sync(struct shard_map *map);
/* Re-reads the file (readers following a live writer). */
DS_MUST_USE int shard_map_reload(struct shard_map *map);

/* Visits the known days in ascending order; stops early when fn returns non-zero and returns
 * that value. */
typedef int (*shard_map_visit_fn)(int32_t day, uint32_t shard_count, void *user);
int shard_map_visit(const struct shard_map *map, shard_map_visit_fn fn, void *user);
size_t shard_map_day_count(const struct shard_map *map);

#endif /* DS_SHARD_H */
