/*
 * The write side of the engine: appends into open blocks, sealing blocks into the arena,
 * segment creation and roll, the two-phase group commit, manifest rotation, and recovery.
 *
 * Group commit, in two I/O flushes:
 *   1. every touched partition's open block is sealed and written, then each touched segment
 *      is data-synced: one linked write+fdatasync chain per segment, all in flight together;
 *   2. a manifest record naming every touched segment's new end (and the new source offsets)
 *      is appended and synced.
 * Only after 2 completes is anything acknowledged. A crash between 1 and 2 leaves blocks past
 * the committed ends; recovery cuts them and the source (Kafka) offsets replay them.
 *
 * Rejected: syncing segments and manifest in one flush with IOSQE_IO_DRAIN ordering. A drain
 * orders submission, not durability across files; the record could be durable before a block.
 *
 * Layering (store_write.h): this side calls only the bottom layer (store.h) and the I/O
 * interface, never the read side; the facade extends summaries after a commit. Every operation
 * on segment and manifest files (create, write, sync, the cuts of recovery, the snapshot's
 * write, sync and rename) goes through st->io, so the fault-injecting backend reaches all of
 * them, and so do the syncs of the directories a commit added entries to (sync_dir, queued in
 * the flush that syncs the segments). mkdir, recovery's directory syncs and the unlink of an
 * orphan use plain system calls.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/store_write.h"

/* Puts the writer in its failed state and says so once. cause_logged: the failure was logged
 * with its file and cause where it was detected (an I/O backend's flush), so this line names
 * only the step and the consequence and a full disk reads "no space left on device" once. */
static int fail_as(struct storage *st, int rc, const char *what, bool cause_logged)
{
    ASSERT(rc < 0);
    if (st->failed == 0) {
        ds_log_error("%s: %s failed%s%s; nothing since the last commit is acknowledged and the "
                     "data directory must be reopened to recover",
                     st->dir, what, cause_logged ? "" : ": ", cause_logged ? "" : ds_strerror(rc));
        st->failed = rc;
    }
    return rc;
}

static int fail(struct storage *st, int rc, const char *what)
{
    return fail_as(st, rc, what, false);
}

static int io_flush(struct storage *st, const char *what)
{
    int rc = st->io->ops->flush(st->io);
    st->arena_used = 0;
    return rc == 0 ? 0 : fail_as(st, rc, what, true);
}

/* ---- segments ------------------------------------------------------------------------------ */

/* mkdir(2) that takes a directory already there as success: a crash may have left it, or an
 * earlier commit made it. Either way the caller syncs its parent again, which costs less than
 * knowing whether that is needed. */
static int mkdir_once(const char *path)
{
    if (mkdir(path, 0755) == 0 || errno == EEXIST) {
        return 0;
    }
    int rc = -errno;
    ds_log_error("%s: cannot create the directory: %s", path, ds_strerror(rc));
    return rc;
}

/* Notes that the commit's flush must sync day's directory (it got a partition directory).
 * Listed once per commit; past STORE_SYNC_DAYS_MAX days it is synced here instead. */
static int sync_day_note(struct storage *st, int32_t day, const char *day_dir)
{
    for (uint32_t i = 0; i < st->sync_day_count; i++) {
        if (st->sync_days[i] == day) {
            return 0;
        }
    }
    if (st->sync_day_count < STORE_SYNC_DAYS_MAX) {
        st->sync_days[st->sync_day_count++] = day;
        return 0;
    }
    int rc = ds_fsync_dir(day_dir);
    if (rc != 0) {
        ds_log_error("%s: directory fsync: %s", day_dir, ds_strerror(rc));
    }
    return rc;
}

/* Makes p's directory: parts/ the first time since open, then the day's and the partition's,
 * one mkdir each (not one per component of the data directory's path, as ds_mkdir_p does).
 * Nothing is synced here: the commit that first names p's segment syncs the partition
 * directory, its day's, parts/ and (once) DIR in the flush that syncs its segments, before its
 * manifest record is written (queue_dir_syncs). Rejected, as it was before: syncing the four
 * directories above a new partition here, one after another on the writer thread, each fsync a
 * device cache flush the thread waits for, and the day's and parts/ synced again for every
 * partition of a day that grows by dozens of shards at once. */
static int make_part_dir(struct storage *st, const struct part *p)
{
    char dir[DS_PATH_MAX];
    if (!st->parts_made) {
        store_path(st, "parts", dir);
        int rc = mkdir_once(dir);
        if (rc != 0) {
            return rc;
        }
        st->parts_made = true;
        st->root_sync = true;
    }
    store_part_dir(st, p->day, p->shard, dir);
    char *slash = strrchr(dir, '/');
    ASSERT(slash != NULL);
    *slash = '\0';
    int rc = mkdir_once(dir);
    *slash = '/';
    rc = rc == 0 ? mkdir_once(dir) : rc;
    if (rc != 0) {
        return rc;
    }
    st->parts_sync = true; /* the day directory may be new (or left by a crash) */
    *slash = '\0';
    rc = sync_day_note(st, p->day, dir);
    *slash = '/';
    return rc;
}

static int segment_create(struct storage *st, struct part *p)
{
    char path[DS_PATH_MAX];
    int rc = p->write_segment_id == 0 ? make_part_dir(st, p) : 0;
    uint32_t id = p->write_segment_id + 1;
    if (st->rewrite != NULL && p != st->rewrite && p->day == st->rewrite->day &&
        p->shard == st->rewrite->shard && id >= st->rewrite_base) {
        /* The partition outgrew the gap left below its rewrite: the rewrite gives way and
         * starts again later. */
        ds_log_warn("%s: a rewrite of partition %d#%u gives way to its appends", st->dir, p->day,
                    p->shard);
        store_write_rewrite_abort(st);
    }
    store_segment_path(st, p, id, path);
    int fd = rc == 0 ? st->io->ops->open(st->io, path, O_RDWR | O_CREAT | O_TRUNC, 0644) : rc;
    if (fd < 0) {
        ds_log_error("%s: cannot create: %s", path, ds_strerror(fd));
        return fail_as(st, fd, "segment create", true);
    }
    p->dir_sync = true; /* its new entry is synced with the segment, by the commit */
    struct segment_header h = {.magic = SEGMENT_MAGIC,
                               .version = SEGMENT_VERSION,
                               .day = p->day,
                               .shard = p->shard,
                               .segment_id = id};
    h.header_crc = ds_crc32c(0, &h, offsetof(struct segment_header, header_crc));
    ASSERT(st->arena_used + sizeof(h) <= STORE_ARENA_BYTES);
    memcpy(st->arena + st->arena_used, &h, sizeof(h));
    rc = st->io->ops->write(st->io, fd, st->arena + st->arena_used, sizeof(h), 0);
    st->arena_used += sizeof(h);
    if (rc != 0) {
        st->io->ops->close(st->io, fd);
        return fail(st, rc, "segment header write");
    }
    p->fd = fd;
    p->write_segment_id = id;
    p->write_end = sizeof(h);
    return 0;
}

static int segment_reopen(struct storage *st, struct part *p)
{
    char path[DS_PATH_MAX];
    store_segment_path(st, p, p->segment_id, path);
    int fd = st->io->ops->open(st->io, path, O_RDWR, 0);
    if (fd < 0) {
        ds_log_error("%s: cannot open: %s", path, ds_strerror(fd));
        return fail(st, fd, "segment open");
    }
    p->fd = fd;
    ASSERT(p->write_segment_id == p->segment_id);
    ASSERT(p->write_end == p->committed_end);
    return 0;
}

/* Closes the current segment after syncing what was written to it; the caller starts the
 * next one. */
static int segment_roll(struct storage *st, struct part *p)
{
    int rc = st->io->ops->sync(st->io, p->fd);
    if (rc == 0) {
        rc = io_flush(st, "segment roll");
    }
    if (rc != 0) {
        return fail(st, rc, "segment roll");
    }
    st->io->ops->close(st->io, p->fd);
    p->fd = -1;
    return 0;
}

/* ---- sealing ------------------------------------------------------------------------------- */

static int seal_part(struct storage *st, struct part *p)
{
    struct open_block *ob = p->ob;
    ASSERT(ob != NULL && ob->count > 0);
    size_t bound = block_seal_bound(ob) + sizeof(struct segment_header);
    if (st->arena_used + bound > STORE_ARENA_BYTES) {
        int rc = io_flush(st, "block write");
        if (rc != 0) {
            return rc;
        }
    }
    int rc =
        p->fd >= 0 ? 0 : (p->write_segment_id == 0 ? segment_create(st, p) : segment_reopen(st, p));
    if (rc != 0) {
        return rc;
    }
    uint8_t *dst = st->arena + st->arena_used;
    int64_t len =
        block_seal(&st->codec, ob, p->day_start_ms, dst, STORE_ARENA_BYTES - st->arena_used);
    if (len < 0) {
        return fail(st, (int)len, "block seal");
    }
    st->arena_used += (size_t)len;
    if (p->write_end + (uint64_t)len > st->cfg.segment_bytes_max &&
        p->write_end > sizeof(struct segment_header)) {
        rc = segment_roll(st, p);
        if (rc != 0) {
            return rc;
        }
        /* The roll flushed the arena, which is empty again but still holds the sealed block:
         * move it to just past where segment_create puts the new segment header. */
        ASSERT(st->arena_used == 0);
        memmove(st->arena + sizeof(struct segment_header), dst, (size_t)len);
        rc = segment_create(st, p);
        if (rc != 0) {
            return rc;
        }
        ASSERT(st->arena_used == sizeof(struct segment_header));
        dst = st->arena + st->arena_used;
        st->arena_used += (size_t)len;
    }
    rc = st->io->ops->write(st->io, p->fd, dst, (size_t)len, p->write_end);
    if (rc != 0) {
        return fail(st, rc, "block write");
    }
    p->write_end += (uint64_t)len;
    st->open_bytes -= open_block_memory(ob);
    open_block_reset(ob);
    st->open_bytes += open_block_memory(ob);
    return 0;
}

/* Brings open-block memory back under the budget: seals the open block holding the most
 * memory and releases its buffers, until under. Releasing matters: a sealed block keeps its
 * capacity for reuse, so sealing alone would not lower the total. */
static void free_block(struct storage *st, struct open_block *ob);

static int enforce_budget(struct storage *st)
{
    while (st->open_bytes > st->cfg.open_bytes_max && st->spare_count > 0) {
        free_block(st, st->spare[--st->spare_count]);
    }
    while (st->open_bytes > st->cfg.open_bytes_max) {
        struct part *largest = NULL;
        for (uint32_t i = 0; i < st->touched_count; i++) {
            struct part *p = st->touched[i];
            if (p->ob != NULL &&
                (largest == NULL || open_block_memory(p->ob) > open_block_memory(largest->ob))) {
                largest = p;
            }
        }
        if (largest == NULL) {
            return 0;
        }
        int rc = largest->ob->count > 0 ? seal_part(st, largest) : 0;
        if (rc != 0) {
            return rc;
        }
        st->open_bytes -= open_block_memory(largest->ob);
        open_block_free(largest->ob);
        free(largest->ob);
        largest->ob = NULL;
    }
    return 0;
}

static void free_block(struct storage *st, struct open_block *ob)
{
    st->open_bytes -= open_block_memory(ob);
    open_block_free(ob);
    free(ob);
}

/* Releases an open block: kept as a spare when there is room and the budget allows, else
 * freed (and uncounted). */
static void block_release(struct storage *st, struct open_block *ob)
{
    ASSERT(ob->count == 0);
    if (st->spare_count < STORE_SPARE_BLOCKS && st->open_bytes <= st->cfg.open_bytes_max / 2) {
        st->spare[st->spare_count++] = ob;
        return;
    }
    free_block(st, ob);
}

/* ---- appends ------------------------------------------------------------------------------- */

static int part_open_block(struct storage *st, struct part *p)
{
    if (p->ob != NULL) {
        return 0;
    }
    if (!p->holding) {
        p->holding = true;
        st->holding[st->holding_count++] = p;
    }
    if (st->spare_count > 0) {
        p->ob = st->spare[--st->spare_count];
        return 0;
    }
    p->ob = calloc(1, sizeof(*p->ob));
    if (p->ob == NULL) {
        return -ENOMEM;
    }
    open_block_reset(p->ob);
    st->open_bytes += open_block_memory(p->ob);
    return 0;
}

void store_write_source_note(struct storage *st, const struct ds_source *source)
{
    if (source == NULL) {
        return;
    }
    int32_t partition = source->partition;
    ASSERT(store_source_valid(partition));
    struct source_state *s = &st->sources[store_source_index(partition)];
    if (!s->known) {
        /* Seen but not committed yet: storage_source_next must still answer -1 ("never
         * seen"), not 0, which would tell a consumer to resume from offset 0. */
        s->committed_next = -1;
    }
    if (!s->known || source->offset + 1 > s->next) {
        s->next = source->offset + 1;
    }
    s->known = true;
    s->dirty = true;
}

static int append_row(struct storage *st, struct part *p, const struct ds_event *event,
                      const struct ds_source *source, bool note_source)
{
    ASSERT(!st->read_only);
    ASSERT(st->failed == 0);
    int rc = part_open_block(st, p);
    if (rc != 0) {
        return rc;
    }
    size_t before = open_block_memory(p->ob);
    bool row_source = st->cfg.model == STORAGE_MODEL_EVENTS;
    rc = open_block_add(p->ob, event, source, row_source, st->cfg.block_events_max);
    if (rc == -DS_ELIMIT) {
        /* The refused add may have grown the row buffer before finding the status table or the
         * string space full: count that memory now, or freeing the block later would take more
         * off open_bytes than was ever added (it wraps, and every append then seals). */
        st->open_bytes += open_block_memory(p->ob) - before;
        rc = seal_part(st, p);
        before = open_block_memory(p->ob);
        rc = rc == 0 ? open_block_add(p->ob, event, source, row_source, st->cfg.block_events_max)
                     : rc;
        ASSERT(rc != -DS_ELIMIT);
    }
    /* Counted whatever the outcome: a failed add (-ENOMEM) may also have grown a buffer. */
    st->open_bytes += open_block_memory(p->ob) - before;
    if (rc != 0) {
        return rc;
    }
    if (!p->touched) {
        p->touched = true;
        p->touched_commit = st->commits;
        p->merge_looked = false;
        st->touched[st->touched_count++] = p;
    }
    if (note_source) {
        store_write_source_note(st, source);
    }
    st->pending_events++;
    return st->open_bytes > st->cfg.open_bytes_max ? enforce_budget(st) : 0;
}

int store_write_append(struct storage *st, struct part *p, const struct ds_event *event,
                       const struct ds_source *source)
{
    return append_row(st, p, event, source, true);
}

int store_write_append_kept(struct storage *st, struct part *p, const struct ds_event *event,
                            const struct ds_source *source)
{
    ASSERT(st->cfg.model == STORAGE_MODEL_EVENTS);
    return append_row(st, p, event, source, false);
}

/* ---- commit -------------------------------------------------------------------------------- */

/* Closes the directory fds whose syncs a flush ran (or that a failure abandoned). */
static void dir_fds_close(struct storage *st)
{
    for (uint32_t i = 0; i < st->dir_fd_count; i++) {
        st->io->ops->close(st->io, st->dir_fds[i]);
    }
    st->dir_fd_count = 0;
}

/* Opens dir and queues its sync; with STORE_DIR_FDS_MAX open already, flushes and closes
 * those first (a commit creating more partitions than that, which only a burst of growth
 * does, takes several flushes). */
static int dir_sync_queue(struct storage *st, const char *dir)
{
    if (st->dir_fd_count == STORE_DIR_FDS_MAX) {
        int rc = io_flush(st, "segment and directory sync");
        dir_fds_close(st);
        if (rc != 0) {
            return rc;
        }
    }
    int fd = st->io->ops->open(st->io, dir, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0) {
        ds_log_error("%s: cannot open the directory to sync it: %s", dir, ds_strerror(fd));
        return fail_as(st, fd, "directory sync", true);
    }
    st->dir_fds[st->dir_fd_count++] = fd;
    int rc = st->io->ops->sync_dir(st->io, fd);
    return rc == 0 ? 0 : fail(st, rc, "directory sync");
}

/* Queues a sync of every directory that got an entry since the last commit (make_part_dir,
 * segment_create), to run beside the segments' syncs: a segment, its partition directory, the
 * day's, parts/ and DIR must all be durable before a manifest record names the segment, and
 * none of them has to be durable before another, so one flush covers them all. */
static int queue_dir_syncs(struct storage *st)
{
    char dir[DS_PATH_MAX];
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < st->touched_count; i++) {
        const struct part *p = st->touched[i];
        if (p->dir_sync) {
            store_part_dir(st, p->day, p->shard, dir);
            rc = dir_sync_queue(st, dir);
        }
    }
    for (uint32_t i = 0; rc == 0 && i < st->sync_day_count; i++) {
        store_part_dir(st, st->sync_days[i], 0, dir);
        char *slash = strrchr(dir, '/');
        ASSERT(slash != NULL);
        *slash = '\0';
        rc = dir_sync_queue(st, dir);
    }
    if (rc == 0 && st->parts_sync) {
        store_path(st, "parts", dir);
        rc = dir_sync_queue(st, dir);
    }
    return rc == 0 && st->root_sync ? dir_sync_queue(st, st->dir) : rc;
}

static void dir_syncs_done(struct storage *st)
{
    for (uint32_t i = 0; i < st->touched_count; i++) {
        st->touched[i]->dir_sync = false;
    }
    st->sync_day_count = 0;
    st->parts_sync = false;
    st->root_sync = false;
}

static int commit_blocks(struct storage *st)
{
    for (uint32_t i = 0; i < st->touched_count; i++) {
        struct part *p = st->touched[i];
        if (p->ob != NULL && p->ob->count > 0) {
            int rc = seal_part(st, p);
            if (rc != 0) {
                return rc;
            }
        }
    }
    for (uint32_t i = 0; i < st->touched_count; i++) {
        struct part *p = st->touched[i];
        if (p->fd < 0) {
            continue; /* touched, but every block went out with a roll that synced it */
        }
        int rc = st->io->ops->sync(st->io, p->fd);
        if (rc != 0) {
            return fail(st, rc, "segment sync");
        }
    }
    int rc = queue_dir_syncs(st);
    rc = rc == 0 ? io_flush(st, "segment write and sync") : rc;
    dir_fds_close(st);
    if (rc == 0) {
        dir_syncs_done(st);
    }
    return rc;
}

static uint32_t collect_sources(struct storage *st, struct manifest_source *dst, bool all)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < MANIFEST_SOURCES_MAX; i++) {
        const struct source_state *s = &st->sources[i];
        if (s->known && (all || s->dirty)) {
            dst[n++] = (struct manifest_source){.partition = (int32_t)i + STORE_SOURCE_FIRST,
                                                .next_offset = all ? s->committed_next : s->next};
        }
    }
    return n;
}

static int commit_record(struct storage *st, uint64_t *record_bytes)
{
    uint32_t parts = st->touched_count;
    size_t bound = manifest_record_bound(parts, MANIFEST_SOURCES_MAX);
    ASSERT(bound <= STORE_ARENA_BYTES);
    ASSERT(st->arena_used == 0);
    struct manifest_part *entries = (struct manifest_part *)(void *)st->arena;
    for (uint32_t i = 0; i < parts; i++) {
        const struct part *p = st->touched[i];
        entries[i] = (struct manifest_part){.day = p->day,
                                            .shard = p->shard,
                                            .segment_id = p->write_segment_id,
                                            .end = p->write_end};
    }
    struct manifest_source *sources = (struct manifest_source *)(void *)(entries + parts);
    uint32_t source_count = collect_sources(st, sources, false);
    uint8_t *record = (uint8_t *)(sources + source_count);
    size_t capacity = STORE_ARENA_BYTES - (size_t)(record - st->arena);
    int64_t len = manifest_encode(MANIFEST_DELTA, st->seq + 1, entries, parts, sources,
                                  source_count, record, capacity);
    ASSERT(len > 0);
    int rc = st->io->ops->write(st->io, st->manifest_fd, record, (size_t)len, st->manifest_size);
    if (rc == 0) {
        rc = st->io->ops->sync(st->io, st->manifest_fd);
    }
    if (rc != 0) {
        return fail(st, rc, "manifest write");
    }
    *record_bytes = (uint64_t)len;
    return io_flush(st, "manifest write and sync");
}

static int manifest_rotate(struct storage *st);

/* Closes the segment descriptors of partitions untouched for STORE_IDLE_COMMITS commits: what
 * they wrote is committed and synced, and their next block reopens the segment. */
static void close_idle_segments(struct storage *st)
{
    for (uint32_t i = 0; i < st->part_count; i++) {
        struct part *p = st->parts[i];
        /* A partition being rewritten (compaction) writes a segment not committed yet. */
        if (p->fd >= 0 && !p->touched && st->commits - p->touched_commit >= STORE_IDLE_COMMITS &&
            p->write_segment_id == p->segment_id && p->write_end == p->committed_end) {
            st->io->ops->close(st->io, p->fd);
            p->fd = -1;
        }
    }
}

/* Frees the open-block buffers of partitions that took no event since the previous commit, so
 * memory follows the partitions in use, not every partition ever written. */
static void commit_done(struct storage *st, bool record_written, uint64_t record_bytes)
{
    /* Idle partitions give their (empty) open blocks back; the rest keep theirs for the next
     * commit interval. */
    uint32_t kept = 0;
    for (uint32_t i = 0; i < st->holding_count; i++) {
        struct part *p = st->holding[i];
        if (p->ob != NULL && !p->touched) {
            block_release(st, p->ob);
            p->ob = NULL;
        }
        if (p->ob != NULL) {
            st->holding[kept++] = p;
        } else {
            p->holding = false;
        }
    }
    st->holding_count = kept;
    for (uint32_t i = 0; i < st->touched_count; i++) {
        struct part *p = st->touched[i];
        p->segment_id = p->write_segment_id;
        p->committed_end = p->write_end;
        p->touched = false;
    }
    for (uint32_t i = 0; i < MANIFEST_SOURCES_MAX; i++) {
        struct source_state *s = &st->sources[i];
        if (s->dirty) {
            s->committed_next = s->next;
            s->dirty = false;
        }
    }
    st->touched_count = 0; /* the entries stay, for the caller of store_write_commit */
    st->pending_events = 0;
    st->seq += record_written;
    st->manifest_size += record_bytes;
    if (++st->commits % STORE_IDLE_COMMITS == 0) {
        close_idle_segments(st);
    }
}

int store_write_commit(struct storage *st, int32_t floor)
{
    ASSERT(!st->read_only);
    ASSERT(st->failed == 0);
    bool sources_dirty = false;
    for (uint32_t i = 0; i < MANIFEST_SOURCES_MAX && !sources_dirty; i++) {
        sources_dirty = st->sources[i].dirty;
    }
    bool drop = floor > store_floor(st);
    if (st->touched_count == 0 && !sources_dirty && !drop) {
        return 0;
    }
    int rc = commit_blocks(st);
    uint64_t record_bytes = 0;
    if (rc == 0 && !drop) {
        rc = commit_record(st, &record_bytes);
    }
    if (rc != 0) {
        return rc;
    }
    uint32_t committed = st->touched_count;
    commit_done(st, !drop, record_bytes);
    if (drop) {
        /* The commit's record is the drop's snapshot: one rename makes the new data, the new
         * floor and the dropped days durable together, so no reader sees the commit's
         * positions without its drop. On failure nothing of it is acknowledged. */
        rc = store_write_drop_below(st, floor);
        if (rc != 0) {
            return rc;
        }
    }
    ASSERT(committed <= st->cfg.partitions_max);
    return (int)committed;
}

int store_write_rotate_if_due(struct storage *st)
{
    return st->manifest_size > MANIFEST_BYTES_ROTATE ? manifest_rotate(st) : 0;
}

/* ---- manifest rotation --------------------------------------------------------------------- */

static int open_manifest(struct storage *st)
{
    char path[DS_PATH_MAX];
    store_path(st, "MANIFEST", path);
    int fd = st->io->ops->open(st->io, path, O_RDWR, 0);
    if (fd < 0) {
        ds_log_error("%s: cannot open: %s", path, ds_strerror(fd));
        return fd;
    }
    if (st->manifest_fd >= 0) {
        st->io->ops->close(st->io, st->manifest_fd);
    }
    st->manifest_fd = fd;
    return 0;
}

/* Replaces MANIFEST with a file holding data: written and synced as MANIFEST.tmp, renamed over
 * MANIFEST, then the directory synced. All but the directory sync go through st->io, in one
 * flush of its own (nothing else is queued: rotation follows a completed commit, creation
 * precedes the first). data is borrowed for the call. */
static int manifest_replace(struct storage *st, const void *data, size_t len)
{
    char path[DS_PATH_MAX];
    char tmp[DS_PATH_MAX];
    store_path(st, "MANIFEST", path);
    store_path(st, "MANIFEST.tmp", tmp);
    int fd = st->io->ops->open(st->io, tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        ds_log_error("%s: cannot create: %s", tmp, ds_strerror(fd));
        return fd;
    }
    int rc = st->io->ops->write(st->io, fd, data, len, 0);
    if (rc == 0) {
        rc = st->io->ops->sync(st->io, fd);
    }
    int flushed = st->io->ops->flush(st->io); /* also when queueing failed: leave none queued */
    rc = rc != 0 ? rc : flushed;
    st->io->ops->close(st->io, fd);
    if (rc == 0) {
        rc = st->io->ops->rename(st->io, tmp, path);
    }
    if (rc != 0) {
        (void)unlink(tmp);
        return rc;
    }
    rc = ds_fsync_dir(st->dir);
    if (rc != 0) {
        ds_log_error("%s: directory fsync: %s", st->dir, ds_strerror(rc));
    }
    return rc;
}

/* Gathers every partition's skip entries into dst (st->skip_total entries). */
static uint32_t collect_skips(const struct storage *st, struct manifest_skip *dst)
{
    uint32_t n = 0;
    uint32_t dropped = 0;
    int32_t floor = store_floor(st);
    for (uint32_t i = 0; i < st->part_count; i++) {
        const struct part *p = st->parts[i];
        if (p->day < floor) {
            dropped += p->skip_count; /* a dropped day's ranges go with it */
            continue;
        }
        if (p->skip_count > 0) {
            memcpy(dst + n, p->skips, (size_t)p->skip_count * sizeof(*dst));
        }
        n += p->skip_count;
    }
    ASSERT(n + dropped == st->skip_total);
    return n;
}

/* Writes the whole state as one snapshot record into a new MANIFEST (atomic rename), followed,
 * when the store has quarantined ranges, by one MANIFEST_QUARANTINE record listing them all (a
 * format-2 file), and when compactions rewrote partitions, by one MANIFEST_BASE record naming
 * their first segments (a format-3 file). */
static int write_snapshot(struct storage *st, uint64_t *size_out)
{
    uint32_t parts = 0;
    uint32_t bases = 0;
    size_t skips_bytes = (size_t)st->skip_total * sizeof(struct manifest_skip);
    size_t bound = 8 + manifest_record_bound(st->part_count, MANIFEST_SOURCES_MAX) +
                   sizeof(struct manifest_record_header) + skips_bytes +
                   manifest_record_bound(st->part_count, 0);
    uint8_t *buf = malloc(bound + 2 * (size_t)st->part_count * sizeof(struct manifest_part) +
                          MANIFEST_SOURCES_MAX * sizeof(struct manifest_source) + skips_bytes);
    if (buf == NULL) {
        return -ENOMEM;
    }
    struct manifest_part *entries = (struct manifest_part *)(void *)(buf + bound);
    struct manifest_part *base_entries = entries + st->part_count;
    int32_t floor = store_floor(st);
    for (uint32_t i = 0; i < st->part_count; i++) {
        const struct part *p = st->parts[i];
        if (p->day < floor) {
            continue; /* dropped by retention: recovery removes what is left of its files */
        }
        if (p->segment_id != 0) {
            entries[parts++] = (struct manifest_part){.day = p->day,
                                                      .shard = p->shard,
                                                      .segment_id = p->segment_id,
                                                      .end = p->committed_end};
        }
        if (p->base_segment_id != 0) {
            base_entries[bases++] = (struct manifest_part){
                .day = p->day, .shard = p->shard, .segment_id = p->base_segment_id};
        }
    }
    struct manifest_source *sources =
        (struct manifest_source *)(void *)(base_entries + st->part_count);
    uint32_t source_count = collect_sources(st, sources, true);
    struct manifest_skip *skips = (struct manifest_skip *)(void *)(sources + MANIFEST_SOURCES_MAX);
    uint32_t skip_count = collect_skips(st, skips);
    uint64_t magic = floor > 0        ? MANIFEST_FILE_MAGIC_V4
                     : bases > 0      ? MANIFEST_FILE_MAGIC_V3
                     : skip_count > 0 ? MANIFEST_FILE_MAGIC_V2
                                      : MANIFEST_FILE_MAGIC;
    memcpy(buf, &magic, sizeof(magic));
    uint64_t seq = st->seq;
    int64_t len = manifest_encode(MANIFEST_SNAPSHOT, ++seq, entries, parts, sources, source_count,
                                  buf + 8, bound - 8);
    ASSERT(len > 0);
    size_t total = 8 + (size_t)len;
    if (skip_count > 0) {
        len = manifest_encode_skips(++seq, skips, skip_count, buf + total, bound - total);
        ASSERT(len > 0);
        total += (size_t)len;
    }
    if (bases > 0) {
        len = manifest_encode(MANIFEST_BASE, ++seq, base_entries, bases, NULL, 0, buf + total,
                              bound - total);
        ASSERT(len > 0);
        total += (size_t)len;
    }
    int rc = manifest_replace(st, buf, total);
    free(buf);
    if (rc == 0) {
        st->seq = seq;
        *size_out = total;
    }
    return rc;
}

int store_write_manifest_rewrite(struct storage *st)
{
    uint64_t size = 0;
    int rc = write_snapshot(st, &size);
    if (rc != 0) {
        ds_log_error("%s: cannot rewrite the MANIFEST: %s", st->dir, ds_strerror(rc));
        return rc;
    }
    st->manifest_size = size;
    return 0;
}

static int manifest_rotate(struct storage *st)
{
    uint64_t size = 0;
    int rc = write_snapshot(st, &size);
    if (rc == 0) {
        rc = open_manifest(st);
    }
    if (rc != 0) {
        /* Every failure but the snapshot buffer's allocation was logged with its file. */
        return fail_as(st, rc, "manifest rotation", rc != -ENOMEM);
    }
    ds_log_info("%s: manifest rotated to a %llu-byte snapshot", st->dir, (unsigned long long)size);
    st->manifest_size = size;
    return 0;
}

/* ---- compaction ---------------------------------------------------------------------------- */

/* The rewrite's segments start STORE_REWRITE_GAP ids above the partition's segment, so that
 * the partition's own rolls while the rewrite runs take the ids between; a roll that would
 * reach the rewrite's first id abandons the rewrite instead (segment_create). */
int store_write_rewrite_begin(struct storage *st, const struct part *p, struct part *shadow)
{
    ASSERT(!st->read_only && st->failed == 0);
    ASSERT(st->rewrite == NULL);
    ASSERT(p->segment_id != 0 && st->arena_used == 0);
    *shadow = (struct part){.day = p->day,
                            .shard = p->shard,
                            .day_start_ms = p->day_start_ms,
                            .fd = -1,
                            .write_segment_id = p->write_segment_id + STORE_REWRITE_GAP - 1};
    int rc = segment_create(st, shadow);
    if (rc != 0) {
        return rc;
    }
    st->rewrite = shadow;
    st->rewrite_base = shadow->write_segment_id;
    return io_flush(st, "rewrite segment create");
}

int store_write_rewrite_append(struct storage *st, struct part *shadow,
                               const struct ds_event *event, const struct ds_source *source)
{
    ASSERT(st->rewrite == shadow);
    if (shadow->ob == NULL) {
        shadow->ob = calloc(1, sizeof(*shadow->ob));
        if (shadow->ob == NULL) {
            return -ENOMEM;
        }
        open_block_reset(shadow->ob);
    }
    bool row_source = st->cfg.model == STORAGE_MODEL_EVENTS;
    int rc = open_block_add(shadow->ob, event, source, row_source, st->cfg.block_events_max);
    if (rc == -DS_ELIMIT) {
        rc = seal_part(st, shadow);
        rc = rc == 0
                 ? open_block_add(shadow->ob, event, source, row_source, st->cfg.block_events_max)
                 : rc;
        ASSERT(rc != -DS_ELIMIT);
    }
    return rc;
}

/* The end of a slice: what the rewrite sealed is written and synced, so that the swap's sync
 * has little left to do and the arena is free for the next commit. */
int store_write_rewrite_sync(struct storage *st, struct part *shadow)
{
    ASSERT(st->rewrite == shadow);
    if (shadow->fd >= 0) {
        int rc = st->io->ops->sync(st->io, shadow->fd);
        if (rc != 0) {
            return fail(st, rc, "rewrite sync");
        }
    }
    return io_flush(st, "rewrite write and sync");
}

static void open_block_drop(struct part *shadow)
{
    if (shadow->ob != NULL) {
        open_block_free(shadow->ob);
        free(shadow->ob);
        shadow->ob = NULL;
    }
}

void store_write_rewrite_abort(struct storage *st)
{
    struct part *shadow = st->rewrite;
    if (shadow == NULL) {
        return;
    }
    if (shadow->fd >= 0) {
        st->io->ops->close(st->io, shadow->fd);
        shadow->fd = -1;
    }
    open_block_drop(shadow);
    for (uint32_t id = st->rewrite_base; id <= shadow->write_segment_id; id++) {
        char path[DS_PATH_MAX];
        store_segment_path(st, shadow, id, path);
        if (unlink(path) != 0 && errno != ENOENT) {
            ds_log_warn("%s: cannot remove an abandoned rewrite: %s", path, strerror(errno));
        }
    }
    st->rewrite = NULL;
    st->rewrite_base = 0;
}

/* The last block, its sync and the partition directory's (the rewrite's new entries) in one
 * flush: all durable before the MANIFEST names them. */
static int rewrite_seal(struct storage *st, struct part *shadow)
{
    int rc = shadow->ob != NULL && shadow->ob->count > 0 ? seal_part(st, shadow) : 0;
    open_block_drop(shadow);
    if (rc == 0 && shadow->fd >= 0) {
        rc = st->io->ops->sync(st->io, shadow->fd);
        rc = rc == 0 ? 0 : fail(st, rc, "rewrite sync");
    }
    char dir[DS_PATH_MAX];
    store_part_dir(st, shadow->day, shadow->shard, dir);
    rc = rc == 0 ? dir_sync_queue(st, dir) : rc;
    rc = rc == 0 ? io_flush(st, "rewrite write and sync") : rc;
    dir_fds_close(st);
    return rc;
}

int store_write_rewrite_commit(struct storage *st, struct part *p, struct part *shadow)
{
    ASSERT(st->rewrite == shadow);
    ASSERT(st->touched_count == 0 && st->pending_events == 0);
    ASSERT(p->ob == NULL || p->ob->count == 0);
    uint32_t base = st->rewrite_base;
    int rc = rewrite_seal(st, shadow);
    if (rc != 0) {
        return rc;
    }
    /* The new segments are durable; the new MANIFEST makes them the partition. Were its
     * rename to fail, the storage is failed and reopening reads the old one. */
    uint32_t old_first = store_part_first(p);
    if (p->fd >= 0) {
        st->io->ops->close(st->io, p->fd); /* complete and synced: the commit before */
    }
    p->fd = shadow->fd;
    shadow->fd = -1;
    p->segment_id = shadow->write_segment_id;
    p->write_segment_id = shadow->write_segment_id;
    p->committed_end = shadow->write_end;
    p->write_end = shadow->write_end;
    st->rewrite = NULL;
    st->rewrite_base = 0;
    if (p->ob != NULL) {
        /* The partition's open block goes back (as a commit does with idle ones): kept, the
         * blocks of partition after partition would fill the open-block budget, and every
         * later append would seal a block of one row. */
        block_release(st, p->ob);
        p->ob = NULL;
    }
    store_part_rebase(st, p, base);
    rc = manifest_rotate(st);
    if (rc != 0) {
        return rc;
    }
    struct retired_segments *grown =
        realloc(st->retired, (st->retired_count + 1) * sizeof(*st->retired));
    if (grown == NULL) {
        return 0; /* removed by the next recovery instead */
    }
    st->retired = grown;
    st->retired[st->retired_count++] = (struct retired_segments){
        .day = p->day,
        .shard = p->shard,
        .from = old_first,
        .to = base,
        .due_ns = ds_clock_ns() + STORE_RETIRE_DELAY_NS,
    };
    return 0;
}

void store_write_retire_due(struct storage *st)
{
    uint64_t now = ds_clock_ns();
    uint32_t kept = 0;
    for (uint32_t i = 0; i < st->retired_count; i++) {
        struct retired_segments *r = &st->retired[i];
        struct part *p = store_part_find(st, r->day, r->shard);
        if (r->due_ns > now || p == NULL) {
            st->retired[kept++] = *r;
            continue;
        }
        for (uint32_t id = r->from; id < r->to; id++) {
            char path[DS_PATH_MAX];
            store_segment_path(st, p, id, path);
            if (unlink(path) != 0 && errno != ENOENT) {
                ds_log_warn("%s: cannot remove a segment a compaction replaced: %s", path,
                            strerror(errno));
            }
        }
    }
    st->retired_count = kept;
}

/* ---- retention ----------------------------------------------------------------------------- */

/* Schedules the removal of DIR/parts/<day>/ (deduplicated: a day is listed once). Without
 * memory for the list the files stay until the next recovery, which removes them. */
static void drop_schedule(struct storage *st, int32_t day, uint64_t due_ns)
{
    for (uint32_t i = 0; i < st->dropped_count; i++) {
        if (st->dropped[i].day == day) {
            return;
        }
    }
    struct dropped_day *grown = realloc(st->dropped, (st->dropped_count + 1) * sizeof(*grown));
    if (grown == NULL) {
        return;
    }
    st->dropped = grown;
    st->dropped[st->dropped_count++] = (struct dropped_day){.day = day, .due_ns = due_ns};
}

int store_write_drop_below(struct storage *st, int32_t floor)
{
    ASSERT(!st->read_only && st->failed == 0);
    ASSERT(st->pending_events == 0);
    ASSERT(floor > store_floor(st) && floor <= DS_DAY_MAX);
    struct source_state *s = &st->sources[store_source_index(STORE_SOURCE_FLOOR)];
    *s = (struct source_state){
        .known = true, .dirty = false, .next = floor, .committed_next = floor};
    /* One new MANIFEST (atomic rename) without the partitions below the floor, naming it: a
     * reader sees every partition of a day, or none (it hides days below the floor). */
    int rc = manifest_rotate(st);
    if (rc != 0) {
        return rc; /* failed: reopened, the old MANIFEST has the days whole */
    }
    uint64_t due_ns = ds_clock_ns() + STORE_RETIRE_DELAY_NS;
    for (uint32_t i = 0; i < st->part_count; i++) {
        struct part *p = st->parts[i];
        if (p->day >= floor) {
            continue;
        }
        ASSERT(p->ob == NULL || p->ob->count == 0);
        if (p->fd >= 0) {
            st->io->ops->close(st->io, p->fd);
            p->fd = -1;
        }
        if (p->ob != NULL) {
            block_release(st, p->ob);
            p->ob = NULL;
        }
        if (p->segment_id != 0 || p->write_segment_id != 0) {
            drop_schedule(st, p->day, due_ns);
        }
    }
    char date[DS_DATE_TEXT_SIZE];
    ds_date_format(floor, date);
    ds_log_info("%s: retention floor %s: the days before it are dropped", st->dir, date);
    return 0;
}

/* Removes DIR/parts/<day>/: its shard directories' segment files, then the directories. */
static void drop_remove_day(struct storage *st, int32_t day)
{
    char day_dir[DS_PATH_MAX];
    store_part_dir(st, day, 0, day_dir);
    char *slash = strrchr(day_dir, '/');
    ASSERT(slash != NULL);
    *slash = '\0';
    DIR *d = opendir(day_dir);
    if (d == NULL) {
        return; /* already gone */
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        uint32_t shard = 0;
        if (!store_parse_shard_name(de->d_name, &shard)) {
            continue;
        }
        char shard_dir[DS_PATH_MAX];
        store_part_dir(st, day, shard, shard_dir);
        DIR *sd = opendir(shard_dir);
        struct dirent *se;
        while (sd != NULL && (se = readdir(sd)) != NULL) {
            uint32_t id = 0;
            char path[DS_PATH_MAX];
            if (store_parse_segment_name(se->d_name, &id) &&
                snprintf(path, sizeof(path), "%s/%s", shard_dir, se->d_name) < (int)sizeof(path) &&
                unlink(path) != 0 && errno != ENOENT) {
                ds_log_warn("%s: cannot remove a dropped day's segment: %s", path, strerror(errno));
            }
        }
        if (sd != NULL) {
            closedir(sd);
        }
        (void)rmdir(shard_dir); /* not empty: a file the engine does not name stays */
    }
    closedir(d);
    (void)rmdir(day_dir);
}

void store_write_drop_due(struct storage *st, bool all)
{
    uint64_t now = ds_clock_ns();
    uint32_t kept = 0;
    for (uint32_t i = 0; i < st->dropped_count; i++) {
        if (!all && st->dropped[i].due_ns > now) {
            st->dropped[kept++] = st->dropped[i];
            continue;
        }
        drop_remove_day(st, st->dropped[i].day);
    }
    st->dropped_count = kept;
}

/* ---- recovery ------------------------------------------------------------------------------ */

/* Cuts the file at path back to keep bytes, through st->io: truncate, then a data sync in a
 * flush of its own, so the cut is durable before anything new is written past it. A file
 * shorter than keep lost acknowledged data: -DS_ECORRUPT. */
static int cut_tail(struct storage *st, const char *path, uint64_t keep)
{
    int fd = st->io->ops->open(st->io, path, O_RDWR, 0);
    if (fd < 0) {
        ds_log_error("%s: cannot open: %s", path, ds_strerror(fd));
        return fd;
    }
    uint64_t size = 0;
    int rc = st->io->ops->size(st->io, fd, &size);
    if (rc == 0 && size < keep) {
        ds_log_error("%s: %llu bytes but %llu were committed: acknowledged data is missing", path,
                     (unsigned long long)size, (unsigned long long)keep);
        rc = -DS_ECORRUPT;
    }
    if (rc == 0 && size > keep) {
        ds_log_warn("%s: cutting %llu uncommitted bytes (torn or unacknowledged tail)", path,
                    (unsigned long long)(size - keep));
        rc = st->io->ops->truncate(st->io, fd, keep);
        if (rc == 0) {
            rc = st->io->ops->sync(st->io, fd);
        }
        if (rc == 0) {
            rc = st->io->ops->flush(st->io);
        }
    }
    st->io->ops->close(st->io, fd);
    return rc;
}

/* Brings one segment file in line with the manifest: cut past the committed end, remove it
 * when it was never committed. Marks the partition recovered when it is the current one. */
static int recover_segment(struct storage *st, const char *path, struct part *p, int32_t day,
                           uint32_t id)
{
    if (p == NULL && day < store_floor(st)) {
        ds_log_info("%s: removing a segment of a day retention dropped", path);
        return unlink(path) == 0 ? 0 : -errno;
    }
    if (p == NULL || id > p->segment_id) {
        ds_log_warn("%s: removing a segment no commit reached", path);
        return unlink(path) == 0 ? 0 : -errno;
    }
    if (id < store_part_first(p)) {
        /* Replaced by a compaction whose commit is durable; a crash came before its removal. */
        ds_log_info("%s: removing a segment a compaction replaced", path);
        return unlink(path) == 0 ? 0 : -errno;
    }
    if (id < p->segment_id) {
        return 0;
    }
    p->recovered = true;
    return cut_tail(st, path, p->committed_end);
}

/* Recovery state while walking the tree: whether the current partition directory lost a file
 * (its directory entry removal must then be synced). */
struct recover_walk {
    bool removed;
};

static int recover_segment_entry(struct storage *st, const char *dir, const char *name, int32_t day,
                                 uint32_t shard, uint32_t segment_id, void *user)
{
    struct recover_walk *rw = user;
    struct part *p = store_part_find(st, day, shard);
    char path[DS_PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path)) {
        return -ENAMETOOLONG;
    }
    rw->removed =
        rw->removed || p == NULL || segment_id > p->segment_id || segment_id < store_part_first(p);
    return recover_segment(st, path, p, day, segment_id);
}

static int recover_part_done(struct storage *st, const char *dir, int32_t day, uint32_t shard,
                             void *user)
{
    struct recover_walk *rw = user;
    bool removed = rw->removed;
    rw->removed = false;
    if (day < store_floor(st) && store_part_find(st, day, shard) == NULL && rmdir(dir) == 0) {
        /* a dropped day's directories, empty now (else left alone) */
        char day_dir[DS_PATH_MAX];
        snprintf(day_dir, sizeof(day_dir), "%s", dir);
        char *slash = strrchr(day_dir, '/');
        if (slash != NULL) {
            *slash = '\0';
            (void)rmdir(day_dir);
        }
    }
    return removed ? ds_fsync_dir(dir) : 0;
}

/* Cuts every segment back to what the manifest committed; removes segments no commit reached.
 * No parts/ at all is fine for an empty manifest; for committed partitions the missing segments
 * are reported by store_write_recover as -DS_ECORRUPT, like any other loss. */
static int recover_tree(struct storage *st)
{
    struct recover_walk rw = {.removed = false};
    struct store_walk walk = {
        .segment = recover_segment_entry, .part_done = recover_part_done, .user = &rw};
    return store_walk_tree(st, &walk);
}

static int create_manifest(struct storage *st)
{
    char path[DS_PATH_MAX];
    /* The MANIFEST is created (atomically) at the first open, before any segment exists, and
     * only ever replaced by rename. A missing or empty one beside parts/ means the commit log
     * was lost: going on would remove every segment as uncommitted, deleting all acknowledged
     * data. Refuse instead. */
    store_path(st, "parts", path);
    struct stat sb;
    if (stat(path, &sb) == 0) {
        ds_log_error("%s: MANIFEST missing or empty but %s exists: refusing to discard it", st->dir,
                     path);
        return -DS_ECORRUPT;
    }
    if (errno != ENOENT) {
        return -errno;
    }
    uint64_t magic = MANIFEST_FILE_MAGIC;
    st->manifest_size = sizeof(magic);
    return manifest_replace(st, &magic, sizeof(magic));
}

int store_write_recover(struct storage *st)
{
    uint64_t valid_end = 0;
    uint64_t file_size = 0;
    int rc = store_manifest_load(st, &valid_end, &file_size);
    if (rc != 0) {
        return rc;
    }
    if (file_size == 0) {
        rc = create_manifest(st);
    } else if (valid_end < file_size) {
        char path[DS_PATH_MAX];
        store_path(st, "MANIFEST", path);
        rc = cut_tail(st, path, valid_end);
        st->manifest_size = valid_end;
    } else {
        st->manifest_size = file_size;
    }
    if (rc == 0) {
        rc = recover_tree(st);
    }
    for (uint32_t i = 0; rc == 0 && i < st->part_count; i++) {
        const struct part *p = st->parts[i];
        if (p->segment_id != 0 && !p->recovered) {
            char path[DS_PATH_MAX];
            store_segment_path(st, p, p->segment_id, path);
            ds_log_error("%s: committed segment is missing", path);
            rc = -DS_ECORRUPT;
        }
    }
    if (rc == 0) {
        rc = open_manifest(st);
    }
    for (uint32_t i = 0; rc == 0 && i < st->part_count; i++) {
        st->parts[i]->write_segment_id = st->parts[i]->segment_id;
        st->parts[i]->write_end = st->parts[i]->committed_end;
    }
    if (rc == 0) {
        ds_log_info("%s: opened at commit %llu with %u partitions, I/O %s", st->dir,
                    (unsigned long long)st->seq, st->part_count, storage_io_name(st->io));
    }
    return rc;
}
