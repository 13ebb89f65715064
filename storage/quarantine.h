/*
 * Private to storage/: DIR/quarantine/, where fsck --repair puts what it takes out of a store
 * (quarantine.c). One entry per damaged range: <name>.bin holds the raw bytes as they were on
 * disk, <name>.json the record an operator needs to judge them and feed the events again:
 *
 *   {"partition":"DAY#2026-01-21#2","day":"2026-01-21","shard":2,"segment":1,
 *    "segment_file":"parts/2026-01-21/2/00000001.seg","offset":N,"length":N,
 *    "bytes_file":"<name>.bin","bytes_saved":N,"committed":true,"blocks":N,
 *    "events":N|null,"source_partition":N|null,"source_offset_min":N|null,
 *    "source_offset_max":N|null,"reason":"...","time":"2026-...Z"}
 *
 * events is null when the block header was unreadable; source_partition is -2 when the
 * events came from several source partitions (min/max then span all of them).
 */
#ifndef DS_STORAGE_QUARANTINE_H
#define DS_STORAGE_QUARANTINE_H

#include "storage/store.h"

/* Creates DIR/quarantine/ (durably) if missing. Returns 0 or a negated errno. */
DS_MUST_USE int quarantine_prepare(const char *dir);

/* Saves d: copies the bytes of [d->offset, d->offset + d->length) that src_path still holds
 * into <name>.bin and writes <name>.json, each synced before it is renamed into place; then
 * syncs the directory. *bytes_saved gets the bytes copied. now_ms stamps the record. Returns 0
 * or a negated errno (logged). */
DS_MUST_USE int quarantine_save(const char *dir, const struct damage *d, const char *src_path,
                                int64_t now_ms, uint64_t *bytes_saved);

/* Copies a whole file (a damaged MANIFEST) into DIR/quarantine/<name>, synced. */
DS_MUST_USE int quarantine_save_file(const char *dir, const char *src_path, const char *name);

#endif /* DS_STORAGE_QUARANTINE_H */
