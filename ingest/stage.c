/*
 * The writer stage: batches in, appends and dead letters out, group commits on a timer.
 *
 * Invariant: a commit covers every batch handed over before it, in order, so each source
 * partition's committed offset is the end of a prefix of what the source read; the dead-letter
 * file is synced (and rotated when full, deadletter.c) before the storage commit that records
 * its position and the offsets of the bad events in it. A crash between the two leaves dead
 * letters past the committed position; the next stage_start cuts them, and the source replays
 * those events.
 *
 * Waiting on the rings is a short sleep (50 us), not a condition variable: the rings are
 * lock-free, the source thread is busy whenever there is work, and the commit interval, not
 * wake-up latency, bounds how soon data is durable. Rejected: a mutex/condvar queue (a syscall
 * per hand-over under contention on the hot path).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ingest/decode.h"
#include "ingest/stage.h"

/* Waiting for a ring backs off from 20 us to 1 ms: short enough that a busy pipeline hands
 * batches over promptly, long enough that an idle or blocked thread does not wake 20,000
 * times a second and steal the other core (measured: with a flat 50 us sleep, a third of the
 * node's CPU went to context switches). */
#define WAIT_MIN_NS 20000L
#define WAIT_MAX_NS 1000000L

static void pause_briefly(long *wait_ns)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = *wait_ns};
    nanosleep(&ts, NULL);
    *wait_ns = *wait_ns * 2 > WAIT_MAX_NS ? WAIT_MAX_NS : *wait_ns * 2;
}

/* ---- dead letters -------------------------------------------------------------------------- */

/* A record under construction in the stage's fixed buffer. */
struct record {
    char *dst;
    size_t len;
};

static void put_bytes(struct record *r, const char *bytes, size_t len)
{
    ASSERT(r->len + len < STAGE_RECORD_BYTES);
    memcpy(r->dst + r->len, bytes, len);
    r->len += len;
}

static void put_text(struct record *r, const char *text)
{
    put_bytes(r, text, strlen(text));
}

/* Writes text as a JSON string (quotes included); text must be valid UTF-8. */
static void put_json_string(struct record *r, const char *text, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    put_bytes(r, "\"", 1);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '"' || c == '\\') {
            char escaped[2] = {'\\', (char)c};
            put_bytes(r, escaped, 2);
        } else if (c < 0x20) {
            char escaped[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            put_bytes(r, escaped, 6);
        } else {
            put_bytes(r, (const char *)&c, 1);
        }
    }
    put_bytes(r, "\"", 1);
}

/* The raw bytes as "raw" (a JSON string) when they are UTF-8, else as "raw_hex". */
static void put_raw(struct record *r, const char *raw, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    if (decode_utf8_valid(raw, len)) {
        put_text(r, ",\"raw\":");
        put_json_string(r, raw, len);
        return;
    }
    put_text(r, ",\"raw_hex\":\"");
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)raw[i];
        char pair[2] = {hex[c >> 4], hex[c & 15]};
        put_bytes(r, pair, 2);
    }
    put_bytes(r, "\"", 1);
}

static void write_record(struct stage *s, enum ingest_reason reason, const struct ds_source *source,
                         uint32_t byte_offset, const char *raw, size_t raw_len, bool truncated)
{
    struct record r = {.dst = s->record};
    char number[96];
    put_text(&r, "{\"reason\":\"");
    put_text(&r, ingest_reason_name(reason));
    put_text(&r, "\",\"source\":");
    put_json_string(&r, s->cfg.source_name, strlen(s->cfg.source_name));
    if (source->partition == DS_SOURCE_FILE) {
        snprintf(number, sizeof(number), ",\"line\":%lld", (long long)source->offset);
    } else {
        snprintf(number, sizeof(number), ",\"partition\":%d,\"offset\":%lld", source->partition,
                 (long long)source->offset);
    }
    put_text(&r, number);
    snprintf(number, sizeof(number), ",\"byte_offset\":%u", byte_offset);
    put_text(&r, number);
    put_raw(&r, raw, raw_len);
    put_text(&r, truncated ? ",\"truncated\":true}" : "}");
    deadletter_write(&s->deadletter, r.dst, r.len);
    if (s->cfg.on_reject != NULL) {
        s->cfg.on_reject(r.dst, r.len, source->partition, s->cfg.on_reject_user);
    }
}

static void write_reject(struct stage *s, const struct stage_batch *b, const struct stage_reject *j)
{
    write_record(s, j->reason, &j->source, j->byte_offset, b->raw + j->raw_offset, j->raw_len,
                 j->truncated);
}

/* An event whose day is below the retention floor: a dead letter (reason too_late) holding the
 * event as a canonical JSON line (the raw bytes are not kept past decoding; items are left
 * out, see ingest_event_format_json), and its source offset advances like a stored one's. */
static int writer_too_late(struct stage *s, const struct stage_event *e)
{
    char line[INGEST_JSON_LINE_BYTES_MAX];
    int len = ingest_event_format_json(&e->event, line, sizeof(line));
    ASSERT(len > 0);
    write_record(s, INGEST_TOO_LATE, &e->source, 0, line, (size_t)len, false);
    int rc = storage_source_advance(s->cfg.storage, &e->source);
    if (rc == 0) {
        atomic_fetch_add(&s->rejected_by_reason[INGEST_TOO_LATE], 1);
        atomic_fetch_add(&s->rejected, 1);
    }
    return rc;
}

/* ---- writer thread ------------------------------------------------------------------------- */

/* How far ahead of its appends the writer hints storage at the orders it will look up: enough
 * to cover a memory access with the work of the appends in between. */
#define STAGE_PREFETCH_AHEAD 8u

/* After a commit, in the orders model: one slice of a compaction when one is due or in
 * progress (storage.h), on this thread, between commits. */
static int writer_compact(struct stage *s)
{
    struct ingest_writer_maintenance *m = &s->maintenance;
    struct storage_compact_report r;
    bool was_compacting = storage_compacting(s->cfg.storage);
    uint64_t start_ns = ds_clock_ns();
    int rc = storage_compact_due(s->cfg.storage, &r);
    uint64_t slice_ns = ds_clock_ns() - start_ns;
    if (rc >= 0 && (was_compacting || rc == 1 || storage_compacting(s->cfg.storage))) {
        m->compaction_slices++;
        m->compaction_slice_ns_max =
            slice_ns > m->compaction_slice_ns_max ? slice_ns : m->compaction_slice_ns_max;
    }
    m->compacting = storage_compacting(s->cfg.storage);
    if (rc == 1) {
        m->compactions++;
        char day[DS_DATE_TEXT_SIZE];
        ds_date_format(r.day, day);
        ds_log_info("compacted %s#%u: %llu -> %llu rows, %llu -> %llu bytes in %.1f ms, %u "
                    "slices, the longest %.1f ms",
                    day, r.shard, (unsigned long long)r.rows_before,
                    (unsigned long long)r.rows_after, (unsigned long long)r.bytes_before,
                    (unsigned long long)r.bytes_after, (double)r.ns / 1e6, r.slices,
                    (double)r.slice_ns_max / 1e6);
    }
    return rc < 0 ? rc : 0;
}

/* A group commit that holds the writer this long is told, with where its time went: what an
 * operator needs when dayshard_writer_stall_seconds_max climbs. At most one line per
 * STAGE_SLOW_REPORT_NS, counting the slow commits in between. */
#define STAGE_SLOW_COMMIT_NS (250ull * 1000 * 1000)
#define STAGE_SLOW_REPORT_NS (10ull * 1000 * 1000 * 1000)

static void writer_slow_commit(struct stage *s, uint64_t end_ns, const uint64_t at[4])
{
    s->slow_commits++;
    if (s->slow_reported_ns != 0 && end_ns - s->slow_reported_ns < STAGE_SLOW_REPORT_NS) {
        return;
    }
    ds_log_warn("a group commit held the writer %.0f ms: dead letters %.0f ms, the commit "
                "(writes, fdatasync, MANIFEST, a seal wait) %.0f ms, compaction %.0f ms, dead "
                "letter retirement %.0f ms; %llu such commits since the last report",
                (double)(end_ns - at[0]) / 1e6, (double)(at[1] - at[0]) / 1e6,
                (double)(at[2] - at[1]) / 1e6, (double)(at[3] - at[2]) / 1e6,
                (double)(end_ns - at[3]) / 1e6, (unsigned long long)s->slow_commits);
    s->slow_commits = 0;
    s->slow_reported_ns = end_ns;
}

/* Commits everything applied so far; the pending events count as accepted before the commit
 * hook runs, so the hook sees the totals the commit made durable. */
static int writer_commit(struct stage *s, uint64_t pending)
{
    uint64_t at[4] = {ds_clock_ns(), 0, 0, 0}; /* start, dead letters, commit, compaction done */
    uint64_t start_ns = at[0];
    uint64_t position = 0;
    int rc = deadletter_sync(&s->deadletter, storage_stream_day(s->cfg.storage), &position);
    if (rc != 0) {
        return rc;
    }
    storage_deadletter_set(s->cfg.storage, position);
    at[1] = ds_clock_ns();
    rc = storage_commit(s->cfg.storage);
    at[2] = ds_clock_ns();
    at[3] = at[2];
    if (rc == 0) {
        s->last_commit_ns = at[2] - start_ns;
        rc = writer_compact(s);
        at[3] = ds_clock_ns();
    }
    if (rc == 0) {
        /* After the commit: a file is removed only once the commit naming a later one is
         * durable, and the floor it is measured against is committed. */
        int removed = deadletter_retire(&s->deadletter, storage_retention_floor(s->cfg.storage),
                                        storage_stream_day(s->cfg.storage));
        rc = removed < 0 ? removed : 0;
    }
    if (rc == 0) {
        uint64_t end_ns = ds_clock_ns();
        uint64_t stall_ns = end_ns - start_ns;
        if (stall_ns > s->maintenance.stall_ns_max) {
            s->maintenance.stall_ns_max = stall_ns;
        }
        if (stall_ns >= STAGE_SLOW_COMMIT_NS) {
            writer_slow_commit(s, end_ns, at);
        }
        atomic_fetch_add(&s->accepted, pending);
        atomic_fetch_add(&s->commits, 1);
        if (s->cfg.on_commit != NULL) {
            s->cfg.on_commit(s->cfg.storage, s->cfg.on_commit_user);
        }
    }
    return rc;
}

/* Appends a batch; *pending counts the events appended since the last commit. In the orders
 * model storage may ask for a commit first (-EAGAIN: its uncommitted versions reached their
 * memory bound), and the event is appended again after it. */
static int writer_apply(struct stage *s, const struct stage_batch *b, uint64_t *pending)
{
    for (uint32_t i = 0; i < b->count; i++) {
        const struct stage_event *e = &b->items[i];
        if (i + STAGE_PREFETCH_AHEAD < b->count) {
            storage_prefetch(s->cfg.storage, &b->items[i + STAGE_PREFETCH_AHEAD].event);
        }
        int rc = storage_append(s->cfg.storage, e->day, e->shard, &e->event, &e->source);
        if (rc == -EAGAIN) {
            rc = writer_commit(s, *pending);
            *pending = 0;
            rc = rc == 0 ? storage_append(s->cfg.storage, e->day, e->shard, &e->event, &e->source)
                         : rc;
            ASSERT(rc != -EAGAIN);
        }
        if (rc == -ERANGE) {
            rc = writer_too_late(s, e); /* below the retention floor */
            if (rc != 0) {
                return rc;
            }
            continue;
        }
        if (rc != 0) {
            return rc;
        }
        (*pending)++;
    }
    for (uint32_t i = 0; i < b->reject_count; i++) {
        const struct stage_reject *r = &b->rejects[i];
        write_reject(s, b, r);
        int rc = storage_source_advance(s->cfg.storage, &r->source);
        if (rc != 0) {
            return rc;
        }
        atomic_fetch_add(&s->rejected_by_reason[r->reason], 1);
    }
    atomic_fetch_add(&s->rejected, b->reject_count);
    return 0;
}

/* A release barrier's partitions: what the batch appended is committed first (a release gives
 * up committed data only), then each partition is released and committed, an -EAGAIN (pending
 * bytes full) committing and going on where it stopped. Orders model: the partition's orders
 * (storage_release_source); events model: its events from release_from on
 * (storage_release_range). */
static int writer_release(struct stage *s, const struct stage_batch *b, uint64_t pending)
{
    int rc = writer_commit(s, pending);
    bool orders = storage_model(s->cfg.storage) == STORAGE_MODEL_ORDERS;
    for (uint32_t i = 0; rc == 0 && i < b->release_count; i++) {
        uint64_t total = 0;
        int released_rc = -EAGAIN;
        while (rc == 0 && released_rc == -EAGAIN) {
            uint64_t released = 0;
            released_rc = orders ? storage_release_source(s->cfg.storage, b->release[i], &released)
                                 : storage_release_range(s->cfg.storage, b->release[i],
                                                         b->release_from[i], &released);
            total += released;
            rc = released_rc == 0 || released_rc == -EAGAIN ? writer_commit(s, 0) : released_rc;
        }
        if (rc == 0 && orders) {
            ds_log_info("%s: partition %" PRId32 " given up: %" PRIu64 " orders leave this node",
                        s->cfg.source_name, b->release[i], total);
        } else if (rc == 0) {
            ds_log_info("%s: partition %" PRId32 " from offset %" PRId64 " given up: %" PRIu64
                        " events leave this node (another member reads them)",
                        s->cfg.source_name, b->release[i], b->release_from[i], total);
        }
    }
    return rc;
}

static void *writer_main(void *arg)
{
    struct stage *s = arg;
    pthread_setname_np(pthread_self(), "ds-writer");
    uint64_t interval_ns = (uint64_t)s->cfg.commit_interval_ms * 1000000u;
    uint64_t pending = 0; /* events appended since the last commit */
    /* Anything applied since the last commit, dead letters and source offsets included: a
     * batch of bad messages alone appends no event, and without this a quiet stream would
     * leave them (and their offsets) uncommitted until the next good event. */
    bool unsynced = false;
    uint64_t last_commit_ns = ds_clock_ns();
    int rc = 0;
    long wait_ns = WAIT_MIN_NS;
    for (;;) {
        struct stage_batch *b = ds_ring_pop(&s->full);
        if (b != NULL) {
            wait_ns = WAIT_MIN_NS;
        } else {
            if (rc == 0 && unsynced && ds_clock_ns() - last_commit_ns >= interval_ns) {
                rc = writer_commit(s, pending);
                pending = 0;
                unsynced = false;
                last_commit_ns = ds_clock_ns();
                if (rc != 0) {
                    /* Published at once: with no batch coming (a paused consumer) it would
                     * otherwise never reach the source thread, which would wait forever. */
                    atomic_store(&s->error, rc);
                }
            }
            pause_briefly(&wait_ns);
            continue;
        }
        enum stage_batch_kind kind = b->kind;
        uint64_t barrier_seq = b->barrier_seq;
        if (rc == 0) {
            rc = writer_apply(s, b, &pending);
            unsynced |= b->count > 0 || b->reject_count > 0;
        }
        if (rc == 0 && b->release_count > 0) {
            rc = writer_release(s, b, pending);
            pending = 0;
            unsynced = false;
        }
        b->count = b->reject_count = b->raw_used = b->basket_used = b->release_count = 0;
        b->kind = STAGE_DATA;
        int pushed = ds_ring_push(&s->free, b);
        ASSERT(pushed == 0);
        bool due = pending >= s->cfg.commit_events || ds_clock_ns() - last_commit_ns >= interval_ns;
        if (rc == 0 && (kind != STAGE_DATA || due)) {
            rc = writer_commit(s, pending);
            pending = 0;
            unsynced = false;
            last_commit_ns = ds_clock_ns();
        }
        if (rc != 0) {
            atomic_store(&s->error, rc);
        }
        if (kind == STAGE_BARRIER) {
            atomic_store(&s->barrier_done, barrier_seq);
        }
        if (kind == STAGE_LAST) {
            break;
        }
    }
    return NULL;
}

/* ---- source thread ------------------------------------------------------------------------- */

static int hand_over(struct stage *s, enum stage_batch_kind kind)
{
    struct stage_batch *b = s->current;
    b->kind = kind;
    if (kind == STAGE_BARRIER) {
        b->barrier_seq = ++s->barrier_next;
    }
    long wait_ns = WAIT_MIN_NS;
    while (ds_ring_push(&s->full, b) != 0) {
        pause_briefly(&wait_ns);
    }
    s->current = NULL;
    if (kind == STAGE_LAST) {
        return 0;
    }
    wait_ns = WAIT_MIN_NS;
    while ((s->current = ds_ring_pop(&s->free)) == NULL) {
        pause_briefly(&wait_ns);
    }
    s->current->first_ns = 0;
    return atomic_load(&s->error);
}

int stage_add_event(struct stage *s, const struct ds_event *event, int32_t day, uint32_t shard,
                    const struct ds_source *source)
{
    struct stage_batch *b = s->current;
    if (b->basket_used + event->items_bytes > STAGE_ITEMS_BYTES) {
        int rc = hand_over(s, STAGE_DATA);
        if (rc != 0) {
            return rc;
        }
        b = s->current;
    }
    if (b->count == 0 && b->reject_count == 0) {
        b->first_ns = ds_clock_ns();
    }
    struct stage_event *e = &b->items[b->count++];
    e->event = *event;
    if (event->items_bytes > 0) {
        memcpy(b->basket + b->basket_used, event->items, event->items_bytes);
        e->event.items = b->basket + b->basket_used;
        b->basket_used += event->items_bytes;
    }
    e->day = day;
    e->shard = shard;
    e->source = *source;
    return b->count == INGEST_BATCH_EVENTS ? hand_over(s, STAGE_DATA) : 0;
}

int stage_add_reject(struct stage *s, const struct ingest_error *error,
                     const struct ds_source *source, const char *raw, size_t len)
{
    bool truncated = len > INGEST_EVENT_BYTES_MAX;
    len = truncated ? INGEST_EVENT_BYTES_MAX : len;
    struct stage_batch *b = s->current;
    if (b->reject_count == STAGE_REJECTS_MAX || b->raw_used + len > STAGE_RAW_BYTES) {
        int rc = hand_over(s, STAGE_DATA);
        if (rc != 0) {
            return rc;
        }
        b = s->current;
    }
    if (b->count == 0 && b->reject_count == 0) {
        b->first_ns = ds_clock_ns();
    }
    struct stage_reject *r = &b->rejects[b->reject_count++];
    r->reason = error->reason;
    r->byte_offset = (uint32_t)(error->byte_offset < UINT32_MAX ? error->byte_offset : UINT32_MAX);
    r->source = *source;
    r->raw_offset = b->raw_used;
    r->raw_len = (uint32_t)len;
    r->truncated = truncated;
    memcpy(b->raw + b->raw_used, raw, len);
    b->raw_used += (uint32_t)len;
    return 0;
}

int stage_flush_older(struct stage *s, uint64_t age_ns)
{
    struct stage_batch *b = s->current;
    if ((b->count > 0 || b->reject_count > 0) && ds_clock_ns() - b->first_ns >= age_ns) {
        return hand_over(s, STAGE_DATA);
    }
    return atomic_load(&s->error);
}

int stage_give_up(struct stage *s, const int32_t *partitions, const int64_t *from, uint32_t count)
{
    ASSERT(count <= INGEST_NODE_PARTITIONS_MAX);
    memcpy(s->current->release, partitions, count * sizeof(*partitions));
    for (uint32_t i = 0; i < count; i++) {
        s->current->release_from[i] = from != NULL ? from[i] : 0;
    }
    s->current->release_count = count;
    return stage_barrier(s);
}

int stage_barrier(struct stage *s)
{
    int rc = hand_over(s, STAGE_BARRIER);
    uint64_t want = s->barrier_next;
    long wait_ns = WAIT_MIN_NS;
    while (atomic_load(&s->barrier_done) < want && atomic_load(&s->error) == 0) {
        pause_briefly(&wait_ns);
    }
    return rc != 0 ? rc : atomic_load(&s->error);
}

int stage_error(const struct stage *s)
{
    return atomic_load(&s->error);
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

static void stage_free(struct stage *s)
{
    deadletter_close(&s->deadletter);
    free(s->batches);
    s->batches = NULL;
    free(s->record);
    s->record = NULL;
    ds_ring_deinit(&s->full);
    ds_ring_deinit(&s->free);
}

int stage_start(struct stage *s, const struct stage_config *cfg)
{
    ASSERT(cfg->storage != NULL && cfg->deadletter_path != NULL && cfg->source_name != NULL);
    ASSERT(cfg->commit_interval_ms >= 1 && cfg->commit_events >= 1);
    ASSERT(cfg->deadletter_file_bytes >= 1);
    ASSERT(cfg->deadletter_file_bytes <= DEADLETTER_FILE_BYTES_MAX);
    memset(s, 0, sizeof(*s));
    s->cfg = *cfg;
    int rc = ds_ring_init(&s->full, INGEST_BATCHES_MAX * 2);
    rc = rc == 0 ? ds_ring_init(&s->free, INGEST_BATCHES_MAX * 2) : rc;
    s->batches = rc == 0 ? calloc(INGEST_BATCHES_MAX, sizeof(*s->batches)) : NULL;
    if (rc == 0 && s->batches == NULL) {
        rc = -ENOMEM;
    }
    for (uint32_t i = 1; rc == 0 && i < INGEST_BATCHES_MAX; i++) {
        rc = ds_ring_push(&s->free, &s->batches[i]);
    }
    s->record = rc == 0 ? malloc(STAGE_RECORD_BYTES) : NULL;
    if (rc == 0 && s->record == NULL) {
        rc = -ENOMEM;
    }
    rc = rc == 0 ? deadletter_open(&s->deadletter, cfg->deadletter_path,
                                   storage_deadletter_committed(cfg->storage),
                                   cfg->deadletter_file_bytes, storage_stream_day(cfg->storage))
                 : rc;
    if (rc == 0) {
        s->current = &s->batches[0];
        rc = -pthread_create(&s->writer, NULL, writer_main, s);
    }
    if (rc != 0) {
        stage_free(s);
        return rc;
    }
    s->started = true;
    return 0;
}

int stage_finish(struct stage *s)
{
    ASSERT(s->started);
    int handed = hand_over(s, STAGE_LAST);
    ASSERT(handed == 0);
    pthread_join(s->writer, NULL);
    s->started = false;
    int rc = atomic_load(&s->error);
    stage_free(s);
    return rc;
}
