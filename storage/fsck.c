/*
 * fsck: verify a data directory against its manifest, and with repair make it clean again
 * without deleting anything acknowledged.
 *
 * Checking is read-only and works beside a live writer: it replays the manifest (the valid
 * prefix of one damaged before its tail, reported as such), decodes every committed block and
 * looks past every committed end. Damage has two kinds. Bytes no commit reached (a torn tail,
 * an orphan segment) are cut by any writer's recovery; when they hold CRC-valid blocks, those
 * may have been acknowledged by a commit whose manifest record is damaged, so --repair copies
 * them to quarantine/ first. Committed blocks that fail a check are acknowledged data
 * damaged: --repair copies each (a block with a readable header exactly; an unreadable header
 * up to the next block header passing its CRC) to quarantine/ with a record naming its events
 * and source offsets, then writes one new MANIFEST that skips those ranges (and keeps only the
 * valid prefix of a damaged one), then lets a writer's recovery cut what no commit reached.
 *
 * Order, so that a crash anywhere leaves either the old state or the new, and never loses a
 * byte: copies and records synced (and their directory) -> segment headers rewritten and
 * segments cut short extended with zeros to their committed end (both synced) -> the MANIFEST
 * replaced by rename -> holes punched in the skipped ranges (space back; best effort) ->
 * recovery. Running repair again finds nothing to do.
 *
 * Rejected: scanning segments without the manifest and keeping every block whose CRC checks.
 * A block whose commit never completed can have valid CRCs; keeping it would duplicate events
 * that the source replays after the crash. Rejected too: deleting damaged blocks (the old
 * --repair left them, and fsck failed forever); a count would then drop silently.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/fsck_events.h"
#include "storage/fsck_orders.h"
#include "storage/quarantine.h"
#include "storage/storage.h"
#include "storage/store_read.h"
#include "storage/store_write.h"

struct orphan_walk {
    uint64_t orphans;
    bool writer_runs; /* another process holds the writer's lock */
    FILE *out;
    struct damage_list *damage; /* repair: orphans holding valid blocks are listed */
    int rc;
};

/* The same names recovery treats as segments (store_walk_tree): anything else it leaves alone,
 * so counting it here would make --repair unable to ever come clean. */
static int orphan_entry(struct storage *st, const char *dir, const char *name, int32_t day,
                        uint32_t shard, uint32_t segment_id, void *user)
{
    struct orphan_walk *ow = user;
    const struct part *p = store_part_find(st, day, shard);
    if (p != NULL && segment_id <= p->segment_id) {
        return 0;
    }
    if (p == NULL && day < store_floor(st)) {
        return 0; /* a day retention dropped: its files wait for their removal, not damage */
    }
    if (ow->writer_runs && p != NULL) {
        /* A running writer's work not committed yet: a new segment, or a compaction's rewrite
         * (STORE_REWRITE_GAP ids above). Orphans of an earlier crash are gone by now: a
         * writer's recovery removes them when it opens. */
        return 0;
    }
    ow->orphans++;
    char path[DS_PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path)) {
        return -ENAMETOOLONG;
    }
    if (ow->out != NULL) {
        fprintf(ow->out, "%s: segment no commit reached\n", path);
    }
    return store_read_range_scan(st, path, day, shard, segment_id, sizeof(struct segment_header),
                                 ow->damage, ow->out);
}

/* Whether another process holds the writer's lock now (fsck beside a running node). */
static bool writer_runs(const struct storage *st)
{
    char path[DS_PATH_MAX];
    store_path(st, "LOCK", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return false; /* no writer ever ran here */
    }
    bool held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd); /* releases a shared lock taken */
    return held;
}

/* Counts segment files on disk that the manifest does not cover; a directory that cannot be
 * read counts as one problem. Without damage (no repair) beside a running writer, its
 * uncommitted segments of known partitions are its work in progress, not orphans. */
static uint64_t count_orphans(struct storage *st, FILE *out, struct damage_list *damage)
{
    struct orphan_walk ow = {.orphans = 0,
                             .writer_runs = damage == NULL && writer_runs(st),
                             .out = out,
                             .damage = damage};
    struct store_walk walk = {.segment = orphan_entry, .part_done = NULL, .user = &ow};
    int rc = store_walk_tree(st, &walk);
    if (rc != 0) {
        if (out != NULL) {
            fprintf(out, "%s/parts: cannot be read completely: %s\n", st->dir, ds_strerror(rc));
        }
        ow.orphans++;
    }
    return ow.orphans;
}

/* The state fsck works on: the manifest's valid prefix replayed (nothing cut, nothing
 * recovered), a sync backend, and with lock the writer's lock held. */
static int state_open(const char *dir, bool lock, struct storage **out)
{
    char path[DS_PATH_MAX];
    snprintf(path, sizeof(path), "%s/MANIFEST", dir);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        struct storage *st = NULL; /* the reader's checks name what is missing */
        int rc = storage_open_reader(dir, &st);
        storage_close(st);
        return rc != 0 ? rc : -ENOENT;
    }
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = dir;
    cfg.read_only = true; /* no arena: repair writes only a MANIFEST, with a buffer of its own */
    cfg.partitions_max = STORAGE_PARTITIONS_MAX;
    struct storage *st = NULL;
    int rc = storage_config_check(&cfg);
    rc = rc == 0 ? store_create(&cfg, &st) : rc;
    if (rc == 0 && lock) {
        rc = store_lock(st);
    }
    if (rc == 0) {
        rc = storage_io_create(STORAGE_IO_SYNC, &st->owned_io);
        st->io = st->owned_io;
    }
    uint64_t valid_end = 0;
    if (rc == 0) {
        st->manifest_prefix = true;
        rc = store_manifest_load(st, &valid_end, &st->manifest_size);
    }
    if (rc == 0 && st->manifest_size == 0) {
        /* An empty MANIFEST beside segments lost its commit log (a writer creates it first). */
        snprintf(path, sizeof(path), "%s/parts", dir);
        st->manifest_damaged = stat(path, &sb) == 0;
    }
    if (rc != 0) {
        store_destroy(st);
        return rc;
    }
    *out = st;
    return 0;
}

static int verify_state(struct storage *st, FILE *out, struct storage_fsck_report *report,
                        struct damage_list *damage)
{
    memset(report, 0, sizeof(*report));
    int rc = 0;
    for (uint32_t i = 0; i < st->part_count && rc == 0; i++) {
        if (st->parts[i]->segment_id != 0) {
            report->partitions++;
            rc = store_read_verify_partition(st, st->parts[i], report, out, damage);
        }
    }
    if (rc != 0) {
        return rc;
    }
    report->orphan_segments = count_orphans(st, out, damage);
    report->torn_bytes += st->manifest_torn_bytes;
    report->manifest_damaged = st->manifest_damaged;
    report->quarantined_total = st->skip_total;
    if (out != NULL && st->manifest_torn_bytes > 0) {
        fprintf(out, "%s/MANIFEST: %llu bytes of a torn record at the end\n", st->dir,
                (unsigned long long)st->manifest_torn_bytes);
    }
    if (out != NULL && st->manifest_damaged) {
        fprintf(out,
                "%s/MANIFEST: damaged before its tail: only the valid prefix of records "
                "(to byte %llu) is trusted\n",
                st->dir, (unsigned long long)st->manifest_size);
    }
    return 0;
}

static int verify(const char *dir, FILE *out, struct storage_fsck_report *report)
{
    struct storage *st = NULL;
    int rc = state_open(dir, false, &st);
    if (rc != 0) {
        if (out != NULL) {
            fprintf(out, "%s: cannot open: %s\n", dir, ds_strerror(rc));
        }
        return rc;
    }
    rc = verify_state(st, out, report, NULL);
    store_destroy(st);
    /* The orders model's balance, on a reader's view of the last commit (fsck_orders.h). */
    rc = rc == 0 ? fsck_orders_check(dir, out, report) : rc;
    /* The events model's: each retraction row cancels a row of its source. */
    rc = rc == 0 ? fsck_events_check(dir, out, report) : rc;
    if (rc == 0 && out != NULL &&
        (report->retractions_unmatched > 0 || report->orders_mismatched > 0)) {
        fprintf(out,
                "%s: retractions do not balance: %llu cancel no earlier row, %llu rows and "
                "current orders do not match (%llu orders, %llu retractions)\n",
                dir, (unsigned long long)report->retractions_unmatched,
                (unsigned long long)report->orders_mismatched, (unsigned long long)report->orders,
                (unsigned long long)report->retractions);
    }
    return rc;
}

static bool report_clean(const struct storage_fsck_report *r)
{
    return r->blocks_bad == 0 && r->torn_bytes == 0 && r->orphan_segments == 0 &&
           !r->manifest_damaged && r->retractions_unmatched == 0 && r->orders_mismatched == 0 &&
           r->balance_unchecked == 0;
}

/* ---- repair -------------------------------------------------------------------------------- */

static void damage_segment_path(const struct storage *st, const struct damage *d, char *dst)
{
    char dir[DS_PATH_MAX];
    store_part_dir(st, d->day, d->shard, dir);
    int n = snprintf(dst, DS_PATH_MAX, "%s/%08u.seg", dir, d->segment_id);
    ASSERT(n > 0 && n < DS_PATH_MAX);
}

/* Makes a committed segment readable again around its damage: a fresh header (it only names
 * day, shard and id) and, when the file is shorter than its committed end, zeros up to it (the
 * range is skipped). The file is created when missing. Synced. */
static int segment_mend(const char *path, const struct damage *d, uint64_t end)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        return -errno;
    }
    struct stat sb;
    int rc = fstat(fd, &sb) == 0 ? 0 : -errno;
    if (rc == 0 && (d->segment_header || (uint64_t)sb.st_size < sizeof(struct segment_header))) {
        struct segment_header h = {.magic = SEGMENT_MAGIC,
                                   .version = SEGMENT_VERSION,
                                   .day = d->day,
                                   .shard = d->shard,
                                   .segment_id = d->segment_id};
        h.header_crc = ds_crc32c(0, &h, offsetof(struct segment_header, header_crc));
        rc = pwrite(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) ? 0 : -EIO;
    }
    if (rc == 0 && fstat(fd, &sb) == 0 && (uint64_t)sb.st_size < end) {
        rc = ftruncate(fd, (off_t)end) == 0 ? 0 : -errno;
    }
    if (rc == 0 && fsync(fd) != 0) {
        rc = -errno;
    }
    close(fd);
    if (rc == 0) {
        char dir[DS_PATH_MAX];
        snprintf(dir, sizeof(dir), "%s", path);
        *strrchr(dir, '/') = '\0';
        rc = ds_fsync_dir(dir);
    }
    return rc;
}

/* Gives the space of a skipped range back; the range reads as zeros and is never read. Best
 * effort: a file system without hole punching keeps the bytes. */
static void punch_hole(const char *path, const struct damage *d)
{
#if defined(FALLOC_FL_PUNCH_HOLE) && defined(FALLOC_FL_KEEP_SIZE)
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        return;
    }
    if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)d->offset,
                  (off_t)d->length) == 0) {
        (void)fdatasync(fd);
    }
    close(fd);
#else
    (void)path;
    (void)d;
#endif
}

/* Copies one damage entry to quarantine/ (all copies are made before any segment is mended,
 * so a copy never holds the zeros a mend wrote). */
static int quarantine_copy(struct storage *st, const struct damage *d, int64_t now_ms,
                           struct storage_fsck_report *report)
{
    char path[DS_PATH_MAX];
    damage_segment_path(st, d, path);
    uint64_t saved = 0;
    int rc = quarantine_save(st->dir, d, path, now_ms, &saved);
    if (rc == 0) {
        report->quarantined_bytes += saved;
    }
    if (rc == 0 && d->past_end) {
        report->quarantined_blocks += d->blocks;
        report->quarantined_events += d->events;
    }
    return rc;
}

/* Takes a copied entry of committed data out of the store: mends its segment and adds its skip
 * entry (in memory: the MANIFEST is written once, after every entry). */
static int quarantine_take(struct storage *st, const struct damage *d,
                           struct storage_fsck_report *report)
{
    if (d->past_end) {
        return 0; /* recovery cuts it */
    }
    char path[DS_PATH_MAX];
    damage_segment_path(st, d, path);
    const struct part *p = store_part_find(st, d->day, d->shard);
    ASSERT(p != NULL && d->segment_id <= p->segment_id);
    uint64_t end = d->segment_id == p->segment_id ? p->committed_end : 0;
    int rc = segment_mend(path, d, end);
    if (rc != 0 || d->segment_header) {
        return rc;
    }
    struct manifest_skip skip = {.day = d->day,
                                 .shard = d->shard,
                                 .segment_id = d->segment_id,
                                 .flags = d->events_known ? MANIFEST_SKIP_EVENTS_KNOWN : 0,
                                 .offset = d->offset,
                                 .length = d->length,
                                 .events = d->events_known ? d->events : 0};
    rc = store_skip_add(st, &skip);
    if (rc == 0) {
        report->quarantined_blocks += d->blocks > 0 ? d->blocks : 1;
        report->quarantined_events += d->events_known ? d->events : 0;
        report->events_unknown_ranges += d->events_known ? 0 : 1;
    }
    return rc;
}

static int quarantine_all(struct storage *st, const struct damage_list *damage, FILE *out,
                          struct storage_fsck_report *report)
{
    int64_t now_ms = ds_clock_realtime_ms();
    int rc = quarantine_prepare(st->dir);
    if (rc == 0 && st->manifest_damaged) {
        char src[DS_PATH_MAX];
        char name[64];
        store_path(st, "MANIFEST", src);
        snprintf(name, sizeof(name), "MANIFEST.%lld.damaged", (long long)now_ms);
        rc = quarantine_save_file(st->dir, src, name);
    }
    for (uint32_t i = 0; rc == 0 && i < damage->count; i++) {
        rc = quarantine_copy(st, &damage->v[i], now_ms, report);
    }
    for (uint32_t i = 0; rc == 0 && i < damage->count; i++) {
        rc = quarantine_take(st, &damage->v[i], report);
    }
    bool rewrite = st->manifest_damaged;
    for (uint32_t i = 0; i < damage->count; i++) {
        rewrite = rewrite || (!damage->v[i].past_end && !damage->v[i].segment_header);
    }
    if (rc == 0 && rewrite) {
        rc = store_write_manifest_rewrite(st);
    }
    for (uint32_t i = 0; rc == 0 && i < damage->count; i++) {
        const struct damage *d = &damage->v[i];
        if (!d->past_end && !d->segment_header) {
            char path[DS_PATH_MAX];
            damage_segment_path(st, d, path);
            punch_hole(path, d);
        }
    }
    if (rc == 0 && out != NULL && damage->count > 0) {
        fprintf(out,
                "%s: quarantined %llu blocks (%llu events, %llu ranges of unknown events, "
                "%llu bytes) into %s/quarantine/\n",
                st->dir, (unsigned long long)report->quarantined_blocks,
                (unsigned long long)report->quarantined_events,
                (unsigned long long)report->events_unknown_ranges,
                (unsigned long long)report->quarantined_bytes, st->dir);
    }
    return rc;
}

/* Under the writer's lock: verify again (a writer may have committed since the first look),
 * quarantine every damage found, rewrite the MANIFEST. The lock is released on return. */
static int repair_locked(const char *dir, FILE *out, struct storage_fsck_report *report)
{
    struct storage *st = NULL;
    int rc = state_open(dir, true, &st);
    if (rc != 0) {
        return rc;
    }
    struct damage_list damage = {0};
    struct storage_fsck_report seen;
    rc = verify_state(st, NULL, &seen, &damage);
    if (rc == 0 && damage.overflow) {
        ds_log_error("%s: more than %u damaged ranges: restore from the source instead", dir,
                     STORAGE_QUARANTINE_MAX);
        rc = -DS_ELIMIT;
    }
    if (rc == 0 && (damage.count > 0 || st->manifest_damaged)) {
        rc = quarantine_all(st, &damage, out, report);
    }
    free(damage.v);
    store_destroy(st);
    return rc;
}

/* After quarantine and recovery, in the orders model: when the retractions no longer balance
 * (quarantined rows and retractions, or an earlier repair that stopped midway), makes the store
 * and the partitions agree (fsck_reconcile). A balance that could not be checked is left to
 * the final verify, which reports it. */
static int reconcile_if_due(const char *dir, const struct storage_fsck_options *options,
                            struct storage_fsck_report *moved)
{
    struct storage_fsck_report balance = {0};
    int rc = fsck_orders_check(dir, NULL, &balance);
    if (rc != 0 || balance.balance_unchecked > 0 ||
        balance.retractions_unmatched + balance.orders_mismatched == 0) {
        return rc;
    }
    return fsck_reconcile(dir, options, moved);
}

int storage_fsck(const char *dir, const struct storage_fsck_options *options,
                 struct storage_fsck_report *report)
{
    FILE *out = options->report_file;
    int rc = verify(dir, out, report);
    if (rc != 0 || !options->repair || report_clean(report)) {
        return rc != 0 ? rc : (report_clean(report) ? 0 : 1);
    }
    struct storage_fsck_report moved = {0};
    rc = repair_locked(dir, out, &moved);
    if (rc == 0) {
        /* A writer's recovery cuts exactly what no commit reached (copied above when it held
         * valid blocks). */
        struct storage_config cfg;
        storage_config_defaults(&cfg);
        cfg.dir = dir;
        cfg.io_mode = STORAGE_IO_SYNC;
        cfg.partitions_max = STORAGE_PARTITIONS_MAX;
        struct storage *st = NULL;
        rc = storage_open(&cfg, &st);
        storage_close(st);
    }
    if (rc != 0) {
        if (out != NULL) {
            fprintf(out, "%s: repair failed: %s\n", dir, ds_strerror(rc));
        }
        return rc;
    }
    uint64_t fixed = report->orphan_segments + (report->torn_bytes > 0 ? 1 : 0) +
                     report->blocks_bad + (report->manifest_damaged ? 1 : 0);
    rc = options->quarantine_only ? 0 : reconcile_if_due(dir, options, &moved);
    if (rc != 0) {
        if (out != NULL) {
            fprintf(out, "%s: repair failed: %s\n", dir, ds_strerror(rc));
        }
        return rc;
    }
    rc = verify(dir, out, report);
    report->repaired = fixed;
    report->quarantined_blocks = moved.quarantined_blocks;
    report->quarantined_events = moved.quarantined_events;
    report->quarantined_bytes = moved.quarantined_bytes;
    report->events_unknown_ranges = moved.events_unknown_ranges;
    report->orders_reverted = moved.orders_reverted;
    report->orders_lost = moved.orders_lost;
    if (rc != 0) {
        return rc;
    }
    return report_clean(report) ? 0 : 1;
}
