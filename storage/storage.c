/*
 * The public facade of the engine (storage.h): configuration, open and close, and every entry
 * point of writing and reading. It checks what a caller may do (a reader never writes; a
 * failed writer refuses everything until reopened), maps (day, shard) to a partition of the
 * table, and calls down: into the write side (store_write.h) and the read side (store_read.h),
 * both above the bottom layer (store.h). It is the only place where the two sides meet: after
 * a commit it has the read side extend the summaries of the partitions the write side made
 * durable.
 *
 * Invariants:
 * - a byte of a segment is acknowledged only once a manifest record naming an end past it is
 *   durable, and that record is written only after the segment's data sync completed;
 * - segments below a partition's current id are complete (they were synced before the record
 *   that named a higher id), so only the current one has a committed end short of its size;
 * - readers never look past committed ends, so a writer's torn or uncommitted bytes are
 *   invisible to them, and recovery may cut them.
 *
 * Summaries (per-partition totals by status and hour) are built lazily from block headers and
 * extended after each commit; a count never decompresses a block.
 *
 * Rejected: a write-ahead log in front of the blocks (every event written twice) and per-block
 * fsync (one sync per block instead of one per segment per commit). And, for the layering, the
 * write side extending summaries itself: the two sides would call each other again.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/data_model.h"
#include "storage/orders.h"
#include "storage/storage.h"
#include "storage/store_read.h"
#include "storage/store_release.h"
#include "storage/store_write.h"

void storage_config_defaults(struct storage_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->io_mode = STORAGE_IO_AUTO;
    cfg->block_events_max = STORAGE_BLOCK_EVENTS_MAX;
    cfg->segment_bytes_max = STORAGE_SEGMENT_BYTES_DEFAULT;
    cfg->open_bytes_max = STORAGE_OPEN_BYTES_DEFAULT;
    cfg->zstd_level = 1;
    cfg->compact_dead_rows_min = STORAGE_COMPACT_DEAD_ROWS_MIN;
    cfg->compact_slice_ns = STORAGE_COMPACT_SLICE_NS;
    cfg->partitions_max = 65536;
}

int storage_config_check(const struct storage_config *cfg)
{
    if (cfg->dir == NULL || cfg->dir[0] == '\0' || strlen(cfg->dir) > DS_PATH_MAX - 64) {
        return -DS_EUSAGE;
    }
    if (cfg->block_events_max < 1 || cfg->block_events_max > STORAGE_BLOCK_EVENTS_MAX) {
        return -DS_EUSAGE;
    }
    if (cfg->segment_bytes_max < 4096 || cfg->segment_bytes_max > STORAGE_SEGMENT_BYTES_MAX) {
        return -DS_EUSAGE;
    }
    if (cfg->open_bytes_max < (1u << 20) || cfg->zstd_level < 1 || cfg->zstd_level > 19) {
        return -DS_EUSAGE;
    }
    if (cfg->partitions_max < 1 || cfg->partitions_max > STORAGE_PARTITIONS_MAX) {
        return -DS_EUSAGE;
    }
    if (cfg->retention_days > STORAGE_RETENTION_DAYS_MAX) {
        return -DS_EUSAGE;
    }
    if (cfg->compact_slice_ns < 1 || cfg->compact_slice_ns > STORAGE_COMPACT_SLICE_NS) {
        return -DS_EUSAGE;
    }
    if (cfg->release_rows_max > STORAGE_RELEASE_ROWS_MAX) {
        return -DS_EUSAGE;
    }
    if (cfg->model != STORAGE_MODEL_RECORDED && cfg->model != STORAGE_MODEL_EVENTS &&
        cfg->model != STORAGE_MODEL_ORDERS) {
        return -DS_EUSAGE;
    }
    return 0;
}

/* ---- retention ----------------------------------------------------------------------------- */

int32_t storage_retention_floor(const struct storage *st)
{
    return store_retention_floor(st);
}

int32_t storage_stream_day(const struct storage *st)
{
    return st->stream_day;
}

/* A writer's stream time after recovery: the greatest day holding committed data; a floor
 * it asks for above the committed one (a smaller --retention-days than before) is applied at
 * once. (Later, each commit that raises the floor drops with its own record.) */
static int retention_open(struct storage *st)
{
    int32_t floor = store_floor(st);
    for (uint32_t i = 0; i < st->part_count; i++) {
        const struct part *p = st->parts[i];
        if (p->segment_id != 0 && p->day >= floor && p->day > st->stream_day) {
            st->stream_day = p->day;
        }
    }
    int32_t wanted = store_retention_floor(st);
    return wanted > floor ? store_write_drop_below(st, wanted) : 0;
}

/* ---- open and close ------------------------------------------------------------------------ */

/* The backend: the injected one, else a new one (owned). A reader only reads, through the
 * synchronous ops, so it gets the plain sync backend rather than a ring it would never use. */
static int io_attach(struct storage *st, const struct storage_config *cfg)
{
    if (cfg->io != NULL) {
        st->io = cfg->io;
        return 0;
    }
    int rc = storage_io_create(cfg->read_only ? STORAGE_IO_SYNC : cfg->io_mode, &st->owned_io);
    st->io = st->owned_io;
    return rc;
}

/* A reader opens only a store that exists: a mistyped path must not read as an empty store
 * (only writers create one). -ENOENT when the directory is missing, -DS_ECORRUPT when it holds
 * segments but no MANIFEST or an empty one (a store that lost its commit log, as the writer's
 * recovery says), -DS_ENOSTORE when it holds neither; logged with the path. */
static int reader_check_store(const struct storage *st)
{
    char path[DS_PATH_MAX];
    store_path(st, "MANIFEST", path);
    struct stat sb;
    if (stat(path, &sb) == 0) {
        store_path(st, "parts", path);
        if (sb.st_size > 0 || stat(path, &sb) != 0) {
            return 0; /* an empty MANIFEST without segments: nothing was committed yet */
        }
        ds_log_error("%s: empty MANIFEST beside segments: the commit log is lost", st->dir);
        return -DS_ECORRUPT;
    }
    int err = errno;
    if (err != ENOENT) {
        ds_log_error("%s: %s", path, strerror(err));
        return -err;
    }
    if (stat(st->dir, &sb) != 0) {
        ds_log_error("%s: no such directory", st->dir);
        return -ENOENT;
    }
    store_path(st, "parts", path);
    if (stat(path, &sb) == 0) {
        ds_log_error("%s: segments without a MANIFEST: the commit log is lost", st->dir);
        return -DS_ECORRUPT;
    }
    ds_log_error("%s: %s", st->dir, ds_strerror(-DS_ENOSTORE));
    return -DS_ENOSTORE;
}

/* Settles the model of this open (storage.h, "the data model"): the directory's, checked
 * against an explicit one, and refused for a writer as storage_model_check says (logged with
 * the reason). With record set (a writer holding the lock), a new directory's model is
 * recorded now, before recovery creates its MANIFEST. */
static int model_settle(struct storage *st, const struct storage_config *cfg, bool record)
{
    char why[STORAGE_MODEL_WHY_SIZE];
    struct data_model_state state;
    enum storage_model model = STORAGE_MODEL_RECORDED;
    int rc = data_model_read(st->dir, &state, why, sizeof(why));
    if (rc == 0) {
        rc = data_model_choose(st->dir, &state, cfg->model, &model, why, sizeof(why));
    }
    if (rc != 0) {
        ds_log_error("%s", why);
        return rc;
    }
    if (record && data_model_must_record(&state)) {
        rc = data_model_write(st->io, st->dir, model);
    }
    if (rc == 0) {
        st->cfg.model = model;
    }
    return rc;
}

int storage_open(const struct storage_config *cfg, struct storage **out)
{
    int rc = storage_config_check(cfg);
    if (rc != 0) {
        return rc;
    }
    struct storage *st = NULL;
    rc = store_create(cfg, &st);
    if (rc != 0) {
        return rc;
    }
    if (cfg->read_only) {
        rc = reader_check_store(st);
        rc = rc == 0 ? model_settle(st, cfg, false) : rc;
        rc = rc == 0 ? io_attach(st, cfg) : rc;
        if (rc == 0) {
            rc = storage_refresh(st);
        }
    } else {
        /* A refused model is refused before anything is created; the second look, under the
         * lock, is the one that records. */
        rc = model_settle(st, cfg, false);
        if (rc == 0) {
            rc = ds_mkdir_p(st->dir);
        }
        if (rc == 0) {
            rc = store_lock(st);
        }
        if (rc == 0) {
            rc = io_attach(st, cfg);
        }
        if (rc == 0) {
            rc = model_settle(st, cfg, true);
        }
        if (rc == 0) {
            rc = store_write_recover(st);
        }
        if (rc == 0 && st->cfg.model == STORAGE_MODEL_ORDERS) {
            rc = store_orders_open(st);
        }
        if (rc == 0) {
            rc = retention_open(st);
        }
        if (rc == 0) {
            store_parts_forget_below(st, store_floor(st));
        }
    }
    if (rc != 0) {
        store_destroy(st);
        return rc;
    }
    *out = st;
    return 0;
}

int storage_open_reader(const char *dir, struct storage **out)
{
    ASSERT(dir != NULL && out != NULL);
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = dir;
    cfg.read_only = true;
    cfg.partitions_max = STORAGE_PARTITIONS_MAX;
    return storage_open(&cfg, out);
}

void storage_close(struct storage *st)
{
    if (st != NULL && !st->read_only) {
        /* Dropped days whose MANIFEST is durable: a reader still holding their segments open
         * reads on; one opening them now gets a clean -ENOENT. */
        store_write_drop_due(st, true);
        store_orders_compact_stop(st); /* its files go; recovery would remove them too */
    }
    store_destroy(st);
}

const char *storage_io_backend(const struct storage *st)
{
    /* A reader's backend serves reads only: it reports none, as it does no I/O of its own. */
    return st->io != NULL && !st->read_only ? storage_io_name(st->io) : "none";
}

enum storage_model storage_model(const struct storage *st)
{
    ASSERT(st->cfg.model != STORAGE_MODEL_RECORDED);
    return st->cfg.model;
}

/* ---- writing ------------------------------------------------------------------------------- */

static bool source_appendable(const struct ds_source *source)
{
    return store_source_valid(source->partition) && source->partition != DS_SOURCE_DEADLETTER &&
           source->partition != STORE_SOURCE_IDS && source->partition != STORE_SOURCE_FLOOR;
}

int storage_append(struct storage *st, int32_t day, uint32_t shard, const struct ds_event *event,
                   const struct ds_source *source)
{
    ASSERT(!st->read_only);
    ASSERT(ds_day_from_ms(event->ts_ms) == day);
    if (st->failed != 0) {
        return st->failed;
    }
    if (source != NULL && !source_appendable(source)) {
        return -DS_ELIMIT;
    }
    if (day < storage_retention_floor(st)) {
        return -ERANGE; /* too late: the caller dead-letters it */
    }
    int rc = 0;
    if (st->ids != NULL) {
        rc = store_orders_append(st, day, shard, event, source);
    } else {
        struct part *p = NULL;
        rc = store_part_get(st, day, shard, &p);
        rc = rc == 0 ? store_write_append(st, p, event, source) : rc;
    }
    if (rc == 0 && day > st->stream_day) {
        st->stream_day = day;
    }
    return rc;
}

int storage_commit(struct storage *st)
{
    ASSERT(!st->read_only);
    if (st->failed != 0) {
        return st->failed;
    }
    if (st->ids != NULL) {
        /* The log's write and sync go out with the segments'; the MANIFEST record names its
         * length, so the versions and their rows are acknowledged together. */
        int rc = store_orders_queue(st);
        if (rc != 0) {
            st->failed = rc;
            return rc;
        }
    }
    int committed = store_write_commit(st, store_retention_floor(st));
    if (committed < 0) {
        return committed;
    }
    if (st->ids != NULL) {
        store_orders_committed(st);
    }
    for (int i = 0; i < committed; i++) {
        struct part *p = st->touched[i];
        /* The data is durable; on failure only the cached totals are stale, and the read side
         * dropped them to be rebuilt on next use. */
        if (p->summary != NULL && store_read_summary_extend(st, p) != 0) {
            ASSERT(p->summary == NULL);
        }
    }
    store_parts_forget_below(st, store_floor(st)); /* after the loop: it may name them */
    int rc = store_write_rotate_if_due(st);
    if (rc == 0) {
        store_write_drop_due(st, false);
    }
    return rc;
}

int storage_source_advance(struct storage *st, const struct ds_source *source)
{
    ASSERT(!st->read_only);
    if (st->failed != 0) {
        return st->failed;
    }
    if (!source_appendable(source)) {
        return -DS_ELIMIT;
    }
    store_write_source_note(st, source);
    return 0;
}

void storage_deadletter_set(struct storage *st, uint64_t bytes)
{
    ASSERT(!st->read_only);
    store_length_set(st, DS_SOURCE_DEADLETTER, bytes);
}

uint64_t storage_deadletter_committed(const struct storage *st)
{
    return store_length_committed(st, DS_SOURCE_DEADLETTER);
}

uint64_t storage_pending_events(const struct storage *st)
{
    return st->pending_events;
}

int64_t storage_source_next(const struct storage *st, int32_t source_partition)
{
    if (!store_source_valid(source_partition)) {
        return -1;
    }
    const struct source_state *s = &st->sources[store_source_index(source_partition)];
    return s->known ? s->committed_next : -1;
}

/* ---- reading ------------------------------------------------------------------------------- */

int storage_refresh(struct storage *st)
{
    ASSERT(st->read_only);
    char path[DS_PATH_MAX];
    store_path(st, "MANIFEST", path);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    /* The pinned file (store.h, manifest_pin_fd) still at the path with the size loaded: the
     * same file, unchanged (a MANIFEST only grows in place; a replacement is a new file). */
    if (st->manifest_pin_fd >= 0 && sb.st_ino == st->manifest_ino &&
        (uint64_t)sb.st_size == st->manifest_size) {
        return 0;
    }
    /* Pin first, then load: were the MANIFEST replaced in between, what was loaded is newer
     * than the pinned file, whose inode then differs from the path's at the next refresh, which
     * loads again. Never the other way round, so a change is never missed. */
    int pin = open(path, O_RDONLY | O_CLOEXEC);
    if (pin < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    struct stat pinned;
    if (fstat(pin, &pinned) != 0) {
        int rc = -errno;
        close(pin);
        return rc;
    }
    uint64_t valid_end = 0;
    uint64_t size = 0;
    int rc = store_manifest_load(st, &valid_end, &size);
    if (rc != 0) {
        close(pin);
        return rc;
    }
    if (st->manifest_pin_fd >= 0) {
        close(st->manifest_pin_fd);
    }
    st->manifest_pin_fd = pin;
    st->manifest_size = size;
    st->manifest_ino = pinned.st_ino;
    store_parts_forget_below(st, store_floor(st));
    return store_orders_refresh(st);
}

void storage_held(const struct storage *st, struct storage_held *out)
{
    *out = (struct storage_held){.partitions = st->part_count, .days = st->day_count};
    for (uint32_t i = 0; i < st->part_count; i++) {
        out->segment_fds += st->parts[i]->fd >= 0;
    }
}

uint64_t storage_commit_seq(const struct storage *st)
{
    ASSERT(st != NULL);
    return st->seq;
}

int storage_partition_totals(struct storage *st, int32_t day, uint32_t shard, const char *status,
                             size_t status_len, struct storage_partition_total *out)
{
    memset(out, 0, sizeof(*out));
    struct part *p = store_part_find(st, day, shard);
    if (p == NULL || p->segment_id == 0 || day < store_floor(st)) {
        return 0; /* never written, or dropped by retention */
    }
    return store_read_totals(st, p, status, status_len, out);
}

int storage_day_totals(struct storage *st, int32_t day, uint32_t shard_count,
                       struct storage_day_total *out)
{
    if (!st->read_only) {
        return 1; /* a writer's commits move partitions without a manifest load: no day totals */
    }
    struct day_totals *d = store_day_find(st, day);
    if (d == NULL || day < store_floor(st)) {
        memset(out, 0, sizeof(*out));
        return 0; /* never written, or dropped by retention */
    }
    if (d->shard_end > shard_count) {
        return 1;
    }
    return store_read_day_totals(st, d, out); /* out is written only on success */
}

int storage_partition_scan_sources(struct storage *st, int32_t day, uint32_t shard,
                                   struct storage_position *pos, storage_source_event_fn fn,
                                   void *user)
{
    const struct part *p = store_part_find(st, day, shard);
    if (p != NULL && day < store_floor(st)) {
        return 0; /* dropped by retention: nothing more to read */
    }
    if (p == NULL || p->segment_id == 0) {
        return pos->segment_id == 0 ? 0 : -ERANGE;
    }
    return store_read_scan_from(st, p, pos, NULL, fn, user);
}

/* A storage_event_fn behind the storage_source_event_fn the scan calls. */
struct scan_plain {
    storage_event_fn fn;
    void *user;
};

static int scan_plain_event(const struct ds_event *event, const struct ds_source *source,
                            void *user)
{
    (void)source;
    const struct scan_plain *plain = user;
    return plain->fn(event, plain->user);
}

int storage_partition_scan_from(struct storage *st, int32_t day, uint32_t shard,
                                struct storage_position *pos, storage_event_fn fn, void *user)
{
    struct scan_plain plain = {.fn = fn, .user = user};
    return storage_partition_scan_sources(st, day, shard, pos, scan_plain_event, &plain);
}

int storage_partition_scan(struct storage *st, int32_t day, uint32_t shard, storage_event_fn fn,
                           void *user)
{
    struct storage_position from = {0}; /* the partition's first event */
    return storage_partition_scan_from(st, day, shard, &from, fn, user);
}

/* storage_partition_visit's callback wrapped: days below the floor are passed over. */
struct visit_kept {
    int32_t floor;
    storage_partition_fn fn;
    void *user;
};

static int visit_kept_one(int32_t day, uint32_t shard, void *user)
{
    const struct visit_kept *v = user;
    return day < v->floor ? 0 : v->fn(day, shard, v->user);
}

int storage_partition_visit(struct storage *st, storage_partition_fn fn, void *user)
{
    struct visit_kept v = {.floor = store_floor(st), .fn = fn, .user = user};
    return store_read_visit(st, visit_kept_one, &v);
}

/* ---- orders -------------------------------------------------------------------------------- */

int storage_order_get(struct storage *st, const struct ds_id *id, struct storage_order *out,
                      void *scratch, size_t scratch_capacity)
{
    ASSERT(id != NULL && out != NULL && scratch != NULL);
    if (st->cfg.model != STORAGE_MODEL_ORDERS) {
        return -DS_EUSAGE;
    }
    int rc = store_orders_get(st, id, out, scratch, scratch_capacity);
    if (rc == 0 && out->day < store_floor(st)) {
        return -ENOENT; /* its current version's day was dropped: the order is gone */
    }
    return rc;
}

void storage_prefetch(const struct storage *st, const struct ds_event *event)
{
    if (st->ids != NULL) {
        store_orders_prefetch(st, &event->order_id);
    }
}

void storage_order_stats(const struct storage *st, struct storage_order_stats *out)
{
    *out = st->order_stats;
    out->orders = store_orders_count(st);
}

/* storage_order_visit's callback wrapped: orders whose current version's day was dropped are
 * passed over. */
struct order_visit_kept {
    int32_t floor;
    storage_order_fn fn;
    void *user;
};

static int order_visit_kept_one(const struct storage_order *order, void *user)
{
    const struct order_visit_kept *v = user;
    return order->day < v->floor ? 0 : v->fn(order, v->user);
}

int storage_order_visit(struct storage *st, storage_order_fn fn, void *user)
{
    if (st->cfg.model != STORAGE_MODEL_ORDERS) {
        return -DS_EUSAGE;
    }
    struct order_visit_kept v = {.floor = store_floor(st), .fn = fn, .user = user};
    return store_orders_visit(st, order_visit_kept_one, &v);
}

/* Starts compacting p (nothing in progress, right after a commit) with the compaction reader
 * refreshed to the last commit. */
static int compact_start(struct storage *st, struct part *p, bool merge)
{
    int rc = st->compact_reader == NULL ? storage_open_reader(st->dir, &st->compact_reader)
                                        : storage_refresh(st->compact_reader);
    p->dead_rows_hint = 0;
    return rc == 0 ? store_orders_compact_start(st, st->compact_reader, p, merge) : rc;
}

static int compact_step(struct storage *st, uint64_t deadline_ns,
                        struct storage_compact_report *out)
{
    int rc = store_orders_compact_tailing(st) ? storage_refresh(st->compact_reader) : 0;
    return rc == 0 ? store_orders_compact_step(st, deadline_ns, out) : rc;
}

int storage_compact(struct storage *st, int32_t day, uint32_t shard,
                    struct storage_compact_report *out)
{
    ASSERT(!st->read_only);
    if (st->failed != 0) {
        return st->failed;
    }
    if (st->touched_count > 0 || st->pending_events > 0) {
        return -DS_EUSAGE;
    }
    store_orders_compact_stop(st); /* one in slices gives way; it starts again when due */
    struct part *p = store_part_find(st, day, shard);
    if (p == NULL || p->segment_id == 0) {
        return 0;
    }
    /* The events model supersedes nothing: compacting there is merging its blocks. */
    int rc = compact_start(st, p, st->cfg.model != STORAGE_MODEL_ORDERS);
    rc = rc == 0 ? compact_step(st, UINT64_MAX, out) : rc;
    while (rc == 0 && st->compaction != NULL) {
        rc = compact_step(st, UINT64_MAX, out); /* the tail: nothing, nothing being pending */
    }
    return rc;
}

/* Whether p is due for a rewrite (a nonzero reason), from its totals: at least min dead rows
 * making a quarter of its rows (orders model: the events model has none), or, once idle,
 * blocks averaging under a quarter of block_events_max (both models). */
static int compact_reason(struct storage *st, struct part *p, uint64_t min, bool *merge)
{
    bool dead_due = min > 0 && p->dead_rows_hint >= min / 4;
    bool merge_due = !p->merge_looked && !p->touched &&
                     st->commits - p->touched_commit >= STORAGE_COMPACT_IDLE_COMMITS;
    if (!dead_due && !merge_due) {
        return 0;
    }
    struct storage_partition_total t;
    int rc = storage_partition_totals(st, p->day, p->shard, NULL, 0, &t);
    if (rc != 0) {
        return rc;
    }
    uint64_t dead = t.rows - t.count;
    if (dead_due && dead >= min && dead * 4 >= t.rows) {
        *merge = false;
        return 1;
    }
    p->dead_rows_hint = dead_due ? 0 : p->dead_rows_hint; /* looked: again after as many more */
    if (merge_due) {
        p->merge_looked = true;
        *merge = t.blocks >= STORAGE_COMPACT_MERGE_BLOCKS_MIN &&
                 t.rows * 4 < t.blocks * (uint64_t)st->cfg.block_events_max;
        return *merge ? 1 : 0;
    }
    return 0;
}

bool storage_compacting(const struct storage *st)
{
    return st->compaction != NULL;
}

int storage_compact_due(struct storage *st, struct storage_compact_report *out)
{
    ASSERT(!st->read_only);
    if (st->failed != 0) {
        return st->failed;
    }
    if (st->touched_count > 0 || st->pending_events > 0) {
        return -DS_EUSAGE;
    }
    store_write_retire_due(st);
    uint64_t start_ns = ds_clock_ns();
    for (uint32_t i = 0; i < st->part_count && st->compaction == NULL; i++) {
        struct part *p = st->parts[i];
        if (p->segment_id == 0 || p->day < store_floor(st)) {
            continue;
        }
        bool merge = false;
        int rc = compact_reason(st, p, st->cfg.compact_dead_rows_min, &merge);
        rc = rc == 1 ? compact_start(st, p, merge) : rc;
        if (rc != 0) {
            return rc;
        }
    }
    if (st->compaction == NULL) {
        return 0;
    }
    return compact_step(st, start_ns + st->cfg.compact_slice_ns, out);
}

int storage_release_range(struct storage *st, int32_t source, int64_t lo, uint64_t *released)
{
    ASSERT(!st->read_only);
    *released = 0;
    if (st->failed != 0) {
        return st->failed;
    }
    if (st->cfg.model != STORAGE_MODEL_EVENTS || st->touched_count > 0 || st->pending_events > 0 ||
        source < 0 || !store_source_valid(source) || lo < 0) {
        return -DS_EUSAGE;
    }
    /* Its reader is the release's: a compaction in progress gives way and starts again when
     * due (it would copy the retractions with the rest). */
    store_orders_compact_stop(st);
    int rc = st->compact_reader == NULL ? storage_open_reader(st->dir, &st->compact_reader)
                                        : storage_refresh(st->compact_reader);
    uint64_t unreleasable = 0;
    uint32_t rows_max =
        st->cfg.release_rows_max != 0 ? st->cfg.release_rows_max : STORAGE_RELEASE_ROWS_MAX;
    if (rc == 0) {
        rc = store_release_range(st, st->compact_reader, source, lo, rows_max, released,
                                 &unreleasable);
    }
    if (unreleasable > 0) {
        ds_log_warn("%s: releasing Kafka partition %d from offset %lld: %llu rows of blocks "
                    "written without row sources may be in that range and cannot be released",
                    st->dir, source, (long long)lo, (unsigned long long)unreleasable);
    }
    if (rc == 0) {
        struct source_state *s = &st->sources[store_source_index(source)];
        if (s->known && s->next > lo) {
            s->next = lo;
            s->dirty = true;
        }
    }
    return rc;
}

int storage_release_source(struct storage *st, int32_t source, uint64_t *released)
{
    ASSERT(!st->read_only);
    *released = 0;
    if (st->failed != 0) {
        return st->failed;
    }
    if (st->ids == NULL || st->touched_count > 0 || st->pending_events > 0 ||
        !store_source_valid(source) || source == DS_SOURCE_DEADLETTER ||
        source == STORE_SOURCE_IDS || source == STORE_SOURCE_FLOOR) {
        return -DS_EUSAGE;
    }
    int rc = store_orders_release(st, source, released);
    if (rc == 0) {
        struct source_state *s = &st->sources[store_source_index(source)];
        if (s->known) {
            s->next = -1; /* committed as -1: "never seen" to storage_source_next */
            s->dirty = true;
        }
    }
    return rc;
}
