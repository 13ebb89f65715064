/*
 * The manifest: an append-only log of group commits, the single truth of what is durable.
 *
 * File: u64 MANIFEST_FILE_MAGIC, then records. A record is a manifest_record_header (magic,
 * body length, CRC32C of the body, kind, sequence number, entry counts) followed by part
 * entries (day, shard, segment id, committed end of that segment) and source entries (source
 * partition, next offset). A delta record lists only what the commit changed; a snapshot lists
 * everything and starts a rotated file.
 *
 * A record is appended and synced only after the blocks it covers are synced, so every segment
 * end it names is on disk. Replay applies records in order and stops at the first one that is
 * incomplete or fails its CRC: that is a torn tail, cut by the writer at open. If a valid record
 * follows a damaged one, acknowledged commits were damaged and replay refuses (-DS_ECORRUPT)
 * rather than silently forget them (fsck --repair replays the valid prefix instead, and
 * quarantines what the records past it covered).
 *
 * Formats (storage/format.h; docs/FORMATS.md has the byte layout): a store's file carries the
 * lowest format whose records it needs, so an older binary keeps reading a store that used no
 * newer record. 1 is the above; 2 ("DSMANIF2") adds MANIFEST_QUARANTINE records, ranges of
 * committed segments fsck --repair moved to DIR/quarantine/, which readers pass over; 3 adds
 * MANIFEST_BASE records, a compacted partition's first live segment; 4 adds the retention floor
 * (source slot -4).
 *
 * Rejected: one small "checkpoint" file rewritten at every commit by rename (two syncs plus a
 * directory sync per commit, against one data sync of an append).
 */
#include <errno.h>
#include <string.h>

#include "storage/format.h"

size_t manifest_record_bound(uint32_t part_count, uint32_t source_count)
{
    return sizeof(struct manifest_record_header) +
           (size_t)part_count * sizeof(struct manifest_part) +
           (size_t)source_count * sizeof(struct manifest_source);
}

int64_t manifest_encode(uint32_t kind, uint64_t seq, const struct manifest_part *parts,
                        uint32_t part_count, const struct manifest_source *sources,
                        uint32_t source_count, uint8_t *dst, size_t dst_capacity)
{
    ASSERT(kind == MANIFEST_DELTA || kind == MANIFEST_SNAPSHOT || kind == MANIFEST_BASE);
    ASSERT(part_count <= STORAGE_PARTITIONS_MAX && source_count <= MANIFEST_SOURCES_MAX);
    size_t total = manifest_record_bound(part_count, source_count);
    if (total > dst_capacity) {
        return -ENOSPC;
    }
    struct manifest_record_header h = {
        .magic = MANIFEST_MAGIC,
        .kind = kind,
        .seq = seq,
        .part_count = part_count,
        .source_count = source_count,
    };
    size_t parts_bytes = (size_t)part_count * sizeof(*parts);
    size_t sources_bytes = (size_t)source_count * sizeof(*sources);
    uint8_t *body = dst + sizeof(h);
    if (parts_bytes > 0) {
        memcpy(body, parts, parts_bytes);
    }
    if (sources_bytes > 0) {
        memcpy(body + parts_bytes, sources, sources_bytes);
    }
    h.body_bytes = (uint32_t)(parts_bytes + sources_bytes);
    /* The CRC covers kind, seq and counts too: everything after the crc field. */
    uint32_t crc = ds_crc32c(0, &h.kind, sizeof(h) - offsetof(struct manifest_record_header, kind));
    h.body_crc = ds_crc32c(crc, body, h.body_bytes);
    memcpy(dst, &h, sizeof(h));
    return (int64_t)total;
}

int64_t manifest_encode_skips(uint64_t seq, const struct manifest_skip *skips, uint32_t skip_count,
                              uint8_t *dst, size_t dst_capacity)
{
    ASSERT(skip_count <= STORAGE_QUARANTINE_MAX);
    size_t body_bytes = (size_t)skip_count * sizeof(*skips);
    if (sizeof(struct manifest_record_header) + body_bytes > dst_capacity) {
        return -ENOSPC;
    }
    struct manifest_record_header h = {
        .magic = MANIFEST_MAGIC,
        .body_bytes = (uint32_t)body_bytes,
        .kind = MANIFEST_QUARANTINE,
        .seq = seq,
        .part_count = skip_count,
    };
    uint8_t *body = dst + sizeof(h);
    if (body_bytes > 0) {
        memcpy(body, skips, body_bytes);
    }
    uint32_t crc = ds_crc32c(0, &h.kind, sizeof(h) - offsetof(struct manifest_record_header, kind));
    h.body_crc = ds_crc32c(crc, body, body_bytes);
    memcpy(dst, &h, sizeof(h));
    return (int64_t)(sizeof(h) + body_bytes);
}

/* The body bytes a record header announces into *body; false when its kind or counts are
 * impossible. */
static bool record_body_bytes(const struct manifest_record_header *h, size_t *body)
{
    if (h->kind == MANIFEST_QUARANTINE) {
        *body = (size_t)h->part_count * sizeof(struct manifest_skip);
        return h->part_count <= STORAGE_QUARANTINE_MAX && h->source_count == 0;
    }
    *body = (size_t)h->part_count * sizeof(struct manifest_part) +
            (size_t)h->source_count * sizeof(struct manifest_source);
    return (h->kind == MANIFEST_DELTA || h->kind == MANIFEST_SNAPSHOT ||
            (h->kind == MANIFEST_BASE && h->source_count == 0)) &&
           h->part_count <= STORAGE_PARTITIONS_MAX && h->source_count <= MANIFEST_SOURCES_MAX;
}

/* Returns the record length when a valid record starts at buf, else 0. */
static size_t record_valid(const uint8_t *buf, size_t len)
{
    struct manifest_record_header h;
    if (len < sizeof(h)) {
        return 0;
    }
    memcpy(&h, buf, sizeof(h));
    if (h.magic != MANIFEST_MAGIC) {
        return 0;
    }
    size_t body = 0;
    if (!record_body_bytes(&h, &body) || body != h.body_bytes || sizeof(h) + body > len) {
        return 0;
    }
    uint32_t crc = ds_crc32c(0, buf + offsetof(struct manifest_record_header, kind),
                             sizeof(h) - offsetof(struct manifest_record_header, kind));
    crc = ds_crc32c(crc, buf + sizeof(h), body);
    return crc == h.body_crc ? sizeof(h) + body : 0;
}

/* True when some valid record starts anywhere in buf: the damage is not a torn tail. */
static bool any_valid_record_after(const uint8_t *buf, size_t len)
{
    for (size_t at = 1; at + sizeof(struct manifest_record_header) <= len; at++) {
        uint32_t magic = ds_get_le32(buf + at);
        if (magic == MANIFEST_MAGIC && record_valid(buf + at, len - at) != 0) {
            return true;
        }
    }
    return false;
}

/* The file magic: 0 for formats 1 to 4, -DS_EFORMAT for another version ("DSMANIF<other>", the
 * version being the most significant byte of the little-endian u64), else -DS_ECORRUPT. */
static int file_magic_check(const uint8_t *buf)
{
    uint64_t magic = ds_get_le64(buf);
    if (magic == MANIFEST_FILE_MAGIC || magic == MANIFEST_FILE_MAGIC_V2 ||
        magic == MANIFEST_FILE_MAGIC_V3 || magic == MANIFEST_FILE_MAGIC_V4) {
        return 0;
    }
    return (magic & 0x00FFFFFFFFFFFFFFull) == (MANIFEST_FILE_MAGIC & 0x00FFFFFFFFFFFFFFull)
               ? -DS_EFORMAT
               : -DS_ECORRUPT;
}

static void record_args(const uint8_t *at, const struct manifest_record_header *h,
                        struct manifest_replay_fn_args *args)
{
    const uint8_t *body = at + sizeof(*h);
    *args = (struct manifest_replay_fn_args){.kind = h->kind, .seq = h->seq};
    if (h->kind == MANIFEST_QUARANTINE) {
        args->skips = (const struct manifest_skip *)(const void *)body;
        args->skip_count = h->part_count;
        return;
    }
    args->parts = (const struct manifest_part *)(const void *)body;
    args->part_count = h->part_count;
    args->sources =
        (const struct manifest_source *)(const void *)(body + (size_t)h->part_count *
                                                                  sizeof(struct manifest_part));
    args->source_count = h->source_count;
}

/* Replays records from the file start; with prefix, damage ends the replay instead of failing
 * it and *damaged says whether valid records were left behind. */
static int replay(const uint8_t *buf, size_t len, bool prefix, manifest_record_fn fn, void *user,
                  uint64_t *valid_end_out, bool *damaged)
{
    *damaged = false;
    if (len < sizeof(uint64_t)) {
        *valid_end_out = 0;
        *damaged = len > 0;
        return len == 0 || prefix ? 0 : -DS_ECORRUPT;
    }
    int rc = file_magic_check(buf);
    if (rc == -DS_EFORMAT && prefix &&
        any_valid_record_after(buf + sizeof(uint64_t), len - sizeof(uint64_t))) {
        /* Repair: another version byte in a file holding records of this format is a damaged
         * magic (flipped bytes), not a newer file; repair keeps the valid prefix (none when
         * the first record is damaged too) and quarantines what the rest acknowledged. */
        rc = -DS_ECORRUPT;
    }
    if (rc == -DS_EFORMAT || (rc != 0 && !prefix)) {
        return rc;
    }
    *damaged = rc != 0;
    size_t at = sizeof(uint64_t);
    uint64_t last_seq = 0;
    bool have_seq = false; /* a first record may carry any sequence number, 0 included */
    while (at < len) {
        size_t n = record_valid(buf + at, len - at);
        struct manifest_record_header h;
        if (n != 0) {
            memcpy(&h, buf + at, sizeof(h));
        }
        if (n == 0 || (have_seq && h.seq <= last_seq)) {
            if (n == 0 && !any_valid_record_after(buf + at, len - at)) {
                break; /* a torn tail */
            }
            if (prefix) {
                *damaged = true;
                break;
            }
            ds_log_error(n == 0 ? "manifest: damaged record at byte %zu followed by valid ones"
                                : "manifest: sequence going backwards at byte %zu",
                         at);
            return -DS_ECORRUPT;
        }
        last_seq = h.seq;
        have_seq = true;
        struct manifest_replay_fn_args args;
        record_args(buf + at, &h, &args);
        rc = fn(&args, user);
        if (rc != 0) {
            return rc;
        }
        at += n;
    }
    *valid_end_out = at;
    return 0;
}

int manifest_replay(const uint8_t *buf, size_t len, manifest_record_fn fn, void *user,
                    uint64_t *valid_end_out)
{
    bool damaged = false;
    return replay(buf, len, false, fn, user, valid_end_out, &damaged);
}

int manifest_replay_prefix(const uint8_t *buf, size_t len, manifest_record_fn fn, void *user,
                           uint64_t *valid_end_out, bool *damaged_out)
{
    return replay(buf, len, true, fn, user, valid_end_out, damaged_out);
}
