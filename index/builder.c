/*
 * The index builder (index.h: index_builder_*, index_reader_*): a thread that follows the durable
 * base data of a data directory and keeps the by-customer index (index/index.h) up to date, with a
 * measured lag.
 *
 * It reads the base data through its own read-only storage handle, exactly like `count --data`
 * beside a writer: after each wake-up (a durable group commit announced by index_builder_notify, or
 * a poll every BUILDER_POLL_MS) it refreshes the handle and, for every partition, scans the
 * blocks committed since its position (storage_partition_scan_from) into a batch of entries.
 * A batch goes to index_apply together with the cursor: every partition's position and the
 * storage commit sequence they reach. A full batch is applied in the middle of a round with the
 * positions reached so far (a block is only passed once all its events are in the batch), so
 * memory stays at one batch however far behind the builder is.
 *
 * Crash safety: the cursor is stored atomically with the entries it covers (index_apply), so a
 * restarted builder resumes from its own cursor and never re-reads everything; entries are keyed
 * by (customer, ts, order id), so what a replay applies again changes nothing.
 *
 * Lag: index_builder_notify records (commit sequence, when it became durable, events durable so
 * far). Once the builder has applied everything up to a sequence, each recorded commit up to it
 * is queryable: its lag (now - durable time) goes to lag_observe (the node's histogram), and the
 * current lag is the age of the oldest commit not yet queryable (0 when caught up).
 * index_builder_should_pause tells the node to stop consuming once the lag is predicted to pass
 * half the bound (its age plus the time the builder needs, at its measured rate, for the events
 * durable but not yet indexed) and to go on once the prediction is below a quarter, so commits
 * already on their way do not push the lag over the bound.
 *
 * Cursor format (little-endian): "GSC1", u64 commit sequence, u32 count, then per partition in
 * (day, shard) order: i32 day, u32 shard, u32 segment id, u64 offset (20 bytes each). The index
 * stores only the bytes that change from one apply to the next (its delta records), so the
 * builder hands it the whole cursor and pays no log bytes for the partitions that did not move;
 * the positions of days below storage's retention floor are dropped each round, so with
 * retention the cursor holds the kept days only.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "index/index.h"

#define BUILDER_POLL_MS 50u
/* No apply for this long: the builder seals what is live (index_seal_due's idle rule), so a
 * node that stopped receiving holds its index sealed well within a minute. */
#define BUILDER_SEAL_IDLE_MS 3000u
/* The builder's nice value: it shares two cores with the consumer, the writer and (in the
 * benchmark) the producer and broker, and the lag is its latency; -5 lowered the per-commit
 * lag p50 from 67 to 48-51 ms in bench_index_e2e. Best effort: without CAP_SYS_NICE it keeps
 * the default. */
#define BUILDER_NICE (-5)
/* A seal is behind when what it has still to move of the applies made since its snapshot
 * passes a quarter of the log it started from (and at least this): the builder then waits
 * after its round, in steps of BUILDER_SEAL_WAIT_STEP_MS, until the seal is no longer behind
 * or BUILDER_SEAL_WAIT_MAX_MS have passed, so the seal's thread (below the builder's
 * priority: nice 0 against -5) catches up, and the node's back-pressure on index lag slows
 * ingest to what maintenance sustains: a log must not outgrow the seals that fold it. Waiting
 * one round's time, with the seal behind only once the log had doubled, bound nothing on a
 * loaded machine: a soak fed 86,000 lines/s grew the log to 288 MB while one seal chased
 * the applies for 30 s, at the pace they grew. */
#define BUILDER_SEAL_BEHIND_MIN_BYTES (16ull << 20)
#define BUILDER_SEAL_BEHIND_SHARE 4u
#define BUILDER_SEAL_WAIT_STEP_MS 20u
#define BUILDER_SEAL_WAIT_MAX_MS 500u
/* A seal is far behind when the applies made since its snapshot pass half the log it started
 * from (and twice the minimum above): the builder then waits until the seal has finished, so
 * ingest holds on the index's lag. What a seal copies after its snapshot is not folded (the
 * next seal does that), so this bounds the log: a seal that starts from S leaves at most the
 * table plus S / 2, and the logs seals start from stay within about twice the table (or the
 * minimum). Waits capped at 500 ms slowed the applies without bounding them: at load 5-8 a
 * 60-day soak fed 150,000 lines/s had seals that started from 5-8 MB copy 37-49 MB of
 * applies made after their snapshots, and the log peaked at 76-79 MB against 38-50 in other
 * cycles. A seal's thread needs nothing of the builder's to end (it stops copying after
 * INDEX_SEAL_COPY_ROUNDS_MAX rounds and sets done, failed or not), so the wait ends; with no
 * applies meanwhile its last rounds are short. */
#define BUILDER_SEAL_FAR_BEHIND_MIN_BYTES (2u * BUILDER_SEAL_BEHIND_MIN_BYTES)
/* Commits announced but not yet queryable that the lag tracker remembers; past it the oldest
 * are merged (the lag stays measured from the oldest). */
#define BUILDER_PENDING_MAX 4096u
/* Indexing rate assumed until a warm round large enough to measure: 1M entries/s, a third of
 * what bench_index_e2e measures while storage appends flat out beside the builder (10M events
 * appended and indexed at 2.9M/s). At 500k/s the first large commit (~150k events) was
 * predicted past half the bound and paused the node for nothing. */
#define BUILDER_RATE_GUESS_PER_NS 1e-3
/* A round smaller than this tells little about the rate. */
#define BUILDER_RATE_ENTRIES_MIN 10000u
/* A batch must hold any whole block: the scan stops at the start of a block that does not fit
 * and resumes there after the apply, so a block larger than a batch would never pass (seen:
 * batches of 16,384 entries looped forever on blocks of up to 65,535 events). */
_Static_assert(INDEX_BATCH_ENTRIES_DEFAULT >= STORAGE_BLOCK_EVENTS_MAX,
               "a builder batch holds a whole block");
#define CURSOR_MAGIC "GSC1"
#define CURSOR_HEADER_BYTES 16u
#define CURSOR_ENTRY_BYTES 20u
/* 13.4M partitions (INDEX_CURSOR_BYTES_MAX): 143 years of days of 256 shards without retention. */
#define CURSOR_PARTITIONS_MAX ((INDEX_CURSOR_BYTES_MAX - CURSOR_HEADER_BYTES) / CURSOR_ENTRY_BYTES)

struct builder_position {
    int32_t day;
    uint32_t shard;
    struct storage_position pos;
};

struct builder_pending {
    uint64_t seq;
    uint64_t durable_ns;
    uint64_t events_durable;
};

struct index_builder {
    struct index_builder_config cfg;
    char gsi_dir[DS_PATH_MAX];
    struct index *ix;
    struct storage *base; /* read-only, builder thread only */
    pthread_t thread;
    bool started;

    /* builder thread only */
    struct builder_position *positions; /* sorted by (day, shard) */
    uint32_t position_count;
    uint32_t position_capacity;
    struct index_entry *batch;
    uint32_t batch_count;
    uint32_t batch_max;
    uint8_t *cursor; /* cursor_cap bytes, grown with the positions */
    size_t cursor_cap;
    uint64_t applied_seq;
    uint64_t round_entries;    /* entries applied in the current round */
    struct index_seal *seal;   /* a seal running beside the applies, NULL: none */
    uint64_t seal_from_bytes;  /* the log's bytes when it started */
    uint64_t applied_ns;       /* when the last round applied something */
    uint64_t seal_retry_bytes; /* after a failed seal: none before the log passes this */

    /* shared, under lock */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stop;
    bool notified;
    struct builder_pending pending[BUILDER_PENDING_MAX];
    uint32_t pending_head;
    uint32_t pending_count;
    uint64_t indexed_seq;             /* every commit up to it is queryable */
    uint64_t indexed_events;          /* events durable at the newest queryable commit */
    uint64_t durable_events;          /* events durable at the newest announced commit */
    int error;                        /* first builder error, 0 while fine */
    bool pausing;                     /* back-pressure state (hysteresis) */
    double entries_per_ns;            /* the builder's measured indexing rate (moving average) */
    bool rate_warm;                   /* a first (cold) round was seen and not measured */
    struct index_builder_seals seals; /* the builder's seals, for index_builder_seals */
};

/* ---- positions and the cursor ------------------------------------------------------------ */

static int position_cmp(int32_t day, uint32_t shard, const struct builder_position *p)
{
    if (day != p->day) {
        return day < p->day ? -1 : 1;
    }
    return shard < p->shard ? -1 : (shard > p->shard ? 1 : 0);
}

/* The position of (day, shard), inserted at {0, 0} when new; NULL when the table is full. */
static struct builder_position *position_get(struct index_builder *g, int32_t day, uint32_t shard)
{
    uint32_t lo = 0;
    uint32_t hi = g->position_count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = position_cmp(day, shard, &g->positions[mid]);
        if (c == 0) {
            return &g->positions[mid];
        }
        if (c < 0) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    if (g->position_count == CURSOR_PARTITIONS_MAX) {
        return NULL;
    }
    if (g->position_count == g->position_capacity) {
        uint32_t capacity = g->position_capacity == 0 ? 256 : g->position_capacity * 2;
        capacity = capacity > CURSOR_PARTITIONS_MAX ? CURSOR_PARTITIONS_MAX : capacity;
        struct builder_position *grown = realloc(g->positions, capacity * sizeof(*grown));
        if (grown == NULL) {
            return NULL;
        }
        g->positions = grown;
        g->position_capacity = capacity;
    }
    memmove(&g->positions[lo + 1], &g->positions[lo],
            (g->position_count - lo) * sizeof(*g->positions));
    g->position_count++;
    g->positions[lo] = (struct builder_position){.day = day, .shard = shard};
    return &g->positions[lo];
}

static size_t cursor_encode(const struct index_builder *g, uint64_t seq, uint8_t *dst)
{
    memcpy(dst, CURSOR_MAGIC, 4);
    ds_put_le64(dst + 4, seq);
    ds_put_le32(dst + 12, g->position_count);
    uint8_t *p = dst + CURSOR_HEADER_BYTES;
    for (uint32_t i = 0; i < g->position_count; i++, p += CURSOR_ENTRY_BYTES) {
        const struct builder_position *b = &g->positions[i];
        ds_put_le32(p, (uint32_t)b->day);
        ds_put_le32(p + 4, b->shard);
        ds_put_le32(p + 8, b->pos.segment_id);
        ds_put_le64(p + 12, b->pos.offset);
    }
    return (size_t)(p - dst);
}

int index_cursor_decode(const uint8_t *cursor, size_t len, uint64_t *seq,
                        struct index_cursor_position **positions, uint32_t *count)
{
    *seq = 0;
    *positions = NULL;
    *count = 0;
    if (len == 0) {
        return 0;
    }
    if (len < CURSOR_HEADER_BYTES || memcmp(cursor, CURSOR_MAGIC, 4) != 0 ||
        len != CURSOR_HEADER_BYTES + (size_t)ds_get_le32(cursor + 12) * CURSOR_ENTRY_BYTES) {
        return -DS_ECORRUPT;
    }
    uint32_t n = ds_get_le32(cursor + 12);
    struct index_cursor_position *out = n > 0 ? calloc(n, sizeof(*out)) : NULL;
    if (n > 0 && out == NULL) {
        return -ENOMEM;
    }
    const uint8_t *p = cursor + CURSOR_HEADER_BYTES;
    for (uint32_t i = 0; i < n; i++, p += CURSOR_ENTRY_BYTES) {
        out[i] = (struct index_cursor_position){
            .day = (int32_t)ds_get_le32(p),
            .shard = ds_get_le32(p + 4),
            .pos = {.segment_id = ds_get_le32(p + 8), .offset = ds_get_le64(p + 12)}};
        const struct index_cursor_position *a = i > 0 ? &out[i - 1] : NULL;
        if (a != NULL &&
            (a->day > out[i].day || (a->day == out[i].day && a->shard >= out[i].shard))) {
            free(out);
            return -DS_ECORRUPT; /* cursor_encode writes them in (day, shard) order */
        }
    }
    *seq = ds_get_le64(cursor + 4);
    *positions = out;
    *count = n;
    return 0;
}

/* The stored cursor into *buf (capacity *cap, grown to fit) and its length into *len. */
static int cursor_fetch(struct index *ix, uint8_t **buf, size_t *cap, size_t *len)
{
    for (;;) { /* a reader's refresh between the calls may grow it again */
        int rc = index_cursor(ix, *buf, *cap, len);
        if (rc != -ENOSPC) {
            return rc;
        }
        uint8_t *grown = realloc(*buf, *len);
        if (grown == NULL) {
            return -ENOMEM;
        }
        *buf = grown;
        *cap = *len;
    }
}

/* Loads the stored cursor into the positions; an empty store starts from nothing. */
static int cursor_load(struct index_builder *g)
{
    size_t len = 0;
    int rc = cursor_fetch(g->ix, &g->cursor, &g->cursor_cap, &len);
    if (rc != 0 || len == 0) {
        return rc;
    }
    struct index_cursor_position *stored = NULL;
    uint32_t count = 0;
    rc = index_cursor_decode(g->cursor, len, &g->applied_seq, &stored, &count);
    if (rc == -DS_ECORRUPT) {
        ds_log_error("%s: the builder's cursor is damaged; `dayshard gsi rebuild` restores it",
                     g->gsi_dir);
    }
    for (uint32_t i = 0; i < count && rc == 0; i++) {
        struct builder_position *b = position_get(g, stored[i].day, stored[i].shard);
        if (b == NULL) {
            rc = -ENOMEM;
        } else {
            b->pos = stored[i].pos;
        }
    }
    free(stored);
    return rc;
}

/* ---- applying ------------------------------------------------------------------------------ */

static int batch_apply(struct index_builder *g, uint64_t seq)
{
    size_t want = CURSOR_HEADER_BYTES + (size_t)g->position_count * CURSOR_ENTRY_BYTES;
    if (want > g->cursor_cap) {
        uint8_t *grown = realloc(g->cursor, want + want / 2);
        if (grown == NULL) {
            return -ENOMEM;
        }
        g->cursor = grown;
        g->cursor_cap = want + want / 2;
    }
    size_t len = cursor_encode(g, seq, g->cursor);
    int rc = index_apply(g->ix, g->batch, g->batch_count, g->cursor, len);
    g->round_entries += g->batch_count;
    if (rc == 0 && g->cfg.test_slow_ms > 0) {
        struct timespec ts = {.tv_sec = g->cfg.test_slow_ms / 1000,
                              .tv_nsec = (long)(g->cfg.test_slow_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    g->batch_count = 0;
    return rc;
}

struct builder_scan {
    struct index_builder *g;
    int32_t day;
};

/* One base event into the batch; refuses (1) when the batch is full, so the scan stops at the
 * start of the block and resumes there after the batch is applied. */
static int builder_event(const struct ds_event *event, void *user)
{
    struct builder_scan *s = user;
    struct index_builder *g = s->g;
    if (event->retract) {
        return 0; /* the index keeps inserts only: the orders view checks versions */
    }
    if (g->batch_count == g->batch_max) {
        return 1;
    }
    index_entry_of_event(event, s->day, &g->batch[g->batch_count++]);
    return 0;
}

/* Indexes everything partition (day, shard) committed since its position. */
static int follow_partition(int32_t day, uint32_t shard, void *user)
{
    struct index_builder *g = user;
    struct builder_position *b = position_get(g, day, shard);
    if (b == NULL) {
        ds_log_error("gsi: more than %u partitions to follow", (unsigned)CURSOR_PARTITIONS_MAX);
        return -DS_ELIMIT;
    }
    struct builder_scan scan = {.g = g, .day = day};
    for (;;) {
        struct storage_position pos = b->pos;
        int rc = storage_partition_scan_from(g->base, day, shard, &pos, builder_event, &scan);
        b->pos = pos; /* the table only grows in position_get above, so b stays valid */
        if (rc != 1) {
            return rc;
        }
        /* The batch is full: apply it with the positions reached so far (this partition's at
         * the start of the block that did not fit, whose events in the batch are applied too
         * and simply applied again later). The sequence stays the previous one: the round is
         * not complete. */
        rc = batch_apply(g, g->applied_seq);
        if (rc != 0) {
            return rc;
        }
    }
}

/* Records that every commit up to seq is queryable. */
static void mark_indexed(struct index_builder *g, uint64_t seq)
{
    uint64_t now = ds_clock_ns();
    pthread_mutex_lock(&g->lock);
    while (g->pending_count > 0 && g->pending[g->pending_head].seq <= seq) {
        const struct builder_pending *p = &g->pending[g->pending_head];
        if (g->cfg.lag_observe != NULL) {
            g->cfg.lag_observe(g->cfg.lag_user, now - p->durable_ns);
        }
        g->indexed_events = p->events_durable;
        g->pending_head = (g->pending_head + 1) % BUILDER_PENDING_MAX;
        g->pending_count--;
    }
    if (g->pending_count == 0) {
        g->indexed_events = g->durable_events;
    }
    g->indexed_seq = seq > g->indexed_seq ? seq : g->indexed_seq;
    pthread_cond_broadcast(&g->wake);
    pthread_mutex_unlock(&g->lock);
}

/* Folds a round's rate (entries indexed over the time it took) into the moving average. */
static void note_rate(struct index_builder *g, uint64_t entries, uint64_t ns)
{
    if (entries < BUILDER_RATE_ENTRIES_MIN || ns == 0) {
        return; /* too small to tell */
    }
    if (!g->rate_warm) {
        /* The first round opens every partition's segments and faults in the slot table and
         * the batch buffers: measured at 44k-84k entries/s against ~1M later, it made the
         * node pause for nothing (bench_index_e2e). The guess stands until the second round. */
        g->rate_warm = true;
        return;
    }
    double rate = (double)entries / (double)ns;
    pthread_mutex_lock(&g->lock);
    g->entries_per_ns = g->entries_per_ns == 0 ? rate : 0.7 * g->entries_per_ns + 0.3 * rate;
    pthread_mutex_unlock(&g->lock);
}

/* Positions of days retention dropped go (sorted by day: a prefix), so that the cursor holds
 * the kept days only: a node that keeps N days follows N days of partitions. */
static void positions_prune(struct index_builder *g, int32_t floor)
{
    uint32_t dropped = 0;
    while (dropped < g->position_count && g->positions[dropped].day < floor) {
        dropped++;
    }
    if (dropped > 0) {
        memmove(&g->positions[0], &g->positions[dropped],
                (g->position_count - dropped) * sizeof(*g->positions));
        g->position_count -= dropped;
    }
}

/* One round: refresh, follow every partition, apply what is left with the round's sequence. */
static int builder_round(struct index_builder *g)
{
    int rc = storage_refresh(g->base);
    if (rc != 0) {
        return rc;
    }
    positions_prune(g, storage_retention_floor(g->base));
    uint64_t seq = storage_commit_seq(g->base);
    if (seq == g->applied_seq) {
        mark_indexed(g, seq); /* nothing new (or nothing at all yet) */
        return 0;
    }
    uint64_t start_ns = ds_clock_ns();
    g->round_entries = 0;
    rc = storage_partition_visit(g->base, follow_partition, g);
    if (rc == 0) {
        rc = batch_apply(g, seq);
    }
    if (rc == 0) {
        note_rate(g, g->round_entries, ds_clock_ns() - start_ns);
    }
    if (rc == 0) {
        g->applied_seq = seq;
        mark_indexed(g, seq);
    }
    return rc;
}

/* The index sealed beside the applies (index_seal_due's rule; idle: no apply for
 * BUILDER_SEAL_IDLE_MS), entries of days below the retention floor left out. A seal that fails
 * is logged and tried again after INDEX_SEAL_LIVE_MIN_BYTES more log: the old log stays
 * whole, so the builder goes on. */
static void builder_maintain_seal(struct index_builder *g)
{
    uint64_t sealed = 0;
    uint64_t live = 0;
    index_log_bytes(g->ix, &sealed, &live);
    if (g->seal != NULL) {
        struct index_compact_stats stats = {0};
        int rc = index_seal_finish(g->seal, false, &stats);
        if (rc != -EAGAIN) {
            g->seal = NULL;
            g->seal_retry_bytes = rc != 0 ? sealed + live + INDEX_SEAL_LIVE_MIN_BYTES : 0;
            pthread_mutex_lock(&g->lock);
            g->seals.seals += rc == 0;
            g->seals.failures += rc != 0;
            g->seals.finish_ns_max =
                stats.finish_ns > g->seals.finish_ns_max ? stats.finish_ns : g->seals.finish_ns_max;
            pthread_mutex_unlock(&g->lock);
        }
        return;
    }
    bool idle = ds_clock_ns() - g->applied_ns >= (uint64_t)BUILDER_SEAL_IDLE_MS * 1000000u;
    if (sealed + live < g->seal_retry_bytes || !index_seal_due(g->ix, idle)) {
        return;
    }
    g->seal_from_bytes = sealed + live;
    if (index_seal_start(g->ix, storage_retention_floor(g->base), &g->seal) != 0) {
        g->seal = NULL; /* logged */
        g->seal_retry_bytes = sealed + live + INDEX_SEAL_LIVE_MIN_BYTES;
        pthread_mutex_lock(&g->lock);
        g->seals.failures++;
        pthread_mutex_unlock(&g->lock);
    }
}

/* Whether the running seal is behind the applies (BUILDER_SEAL_BEHIND_MIN_BYTES). */
static bool builder_seal_behind(const struct index_builder *g, uint64_t log_bytes)
{
    if (g->seal == NULL) {
        return false;
    }
    uint64_t moved = index_seal_moved_end(g->seal);
    uint64_t left = log_bytes > moved ? log_bytes - moved : 0;
    return left >= BUILDER_SEAL_BEHIND_MIN_BYTES &&
           left > g->seal_from_bytes / BUILDER_SEAL_BEHIND_SHARE;
}

/* Whether the running seal is far behind (BUILDER_SEAL_FAR_BEHIND_MIN_BYTES). */
static bool builder_seal_far_behind(const struct index_builder *g, uint64_t log_bytes)
{
    if (g->seal == NULL || log_bytes <= g->seal_from_bytes) {
        return false;
    }
    uint64_t since = log_bytes - g->seal_from_bytes;
    return since >= BUILDER_SEAL_FAR_BEHIND_MIN_BYTES && since > g->seal_from_bytes / 2;
}

static bool builder_stopping(struct index_builder *g)
{
    pthread_mutex_lock(&g->lock);
    bool stop = g->stop;
    pthread_mutex_unlock(&g->lock);
    return stop;
}

/* Seals as above, then publishes the log's sizes and whether a seal runs, for
 * index_builder_seals (index_log_bytes is the builder thread's alone); waits a little when the
 * seal is behind, and until it has finished when it is far behind. */
static void builder_maintain(struct index_builder *g)
{
    builder_maintain_seal(g);
    uint64_t sealed = 0;
    uint64_t live = 0;
    index_log_bytes(g->ix, &sealed, &live);
    bool far = builder_seal_far_behind(g, sealed + live);
    for (uint32_t waited = 0;
         g->seal != NULL && !index_seal_ready(g->seal) && !builder_stopping(g) &&
         (far || (waited < BUILDER_SEAL_WAIT_MAX_MS && builder_seal_behind(g, sealed + live)));
         waited += BUILDER_SEAL_WAIT_STEP_MS) {
        struct timespec step = {.tv_nsec = (long)BUILDER_SEAL_WAIT_STEP_MS * 1000000L};
        nanosleep(&step, NULL);
    }
    pthread_mutex_lock(&g->lock);
    g->seals.sealed_bytes = sealed;
    g->seals.live_bytes = live;
    g->seals.sealing = g->seal != NULL;
    pthread_mutex_unlock(&g->lock);
}

void index_builder_seals(struct index_builder *g, struct index_builder_seals *out)
{
    ASSERT(g != NULL && out != NULL);
    pthread_mutex_lock(&g->lock);
    *out = g->seals;
    pthread_mutex_unlock(&g->lock);
}

static void *builder_main(void *arg)
{
    struct index_builder *g = arg;
    pthread_setname_np(pthread_self(), "ds-gsi");
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), BUILDER_NICE) != 0) {
        ds_log_debug("gsi: builder keeps the default priority (setpriority: %s)", strerror(errno));
    }
    for (;;) {
        pthread_mutex_lock(&g->lock);
        if (!g->stop && !g->notified) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += (long)BUILDER_POLL_MS * 1000000L;
            until.tv_sec += until.tv_nsec / 1000000000L;
            until.tv_nsec %= 1000000000L;
            pthread_cond_timedwait(&g->wake, &g->lock, &until);
        }
        bool stop = g->stop;
        g->notified = false;
        pthread_mutex_unlock(&g->lock);
        if (stop) {
            break;
        }
        uint64_t applied = g->applied_seq;
        int rc = builder_round(g);
        if (rc == 0 && g->applied_seq != applied) {
            g->applied_ns = ds_clock_ns();
        }
        if (rc == 0) {
            builder_maintain(g);
        }
        if (rc != 0) {
            ds_log_error("gsi: the builder stopped: %s", ds_strerror(rc));
            pthread_mutex_lock(&g->lock);
            g->error = rc;
            pthread_cond_broadcast(&g->wake);
            pthread_mutex_unlock(&g->lock);
            break;
        }
    }
    return NULL;
}

/* ---- the public side ------------------------------------------------------------------------ */

void index_builder_config_defaults(struct index_builder_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->max_lag_ms = INDEX_BUILDER_MAX_LAG_MS_DEFAULT;
}

void index_dir(const char *data_dir, char *dst)
{
    int n = snprintf(dst, DS_PATH_MAX, "%s/gsi", data_dir);
    ASSERT(n > 0 && n < DS_PATH_MAX);
}

int index_builder_start(const struct index_builder_config *cfg, struct index_builder **out)
{
    ASSERT(cfg != NULL && cfg->data_dir != NULL && out != NULL);
    if (strlen(cfg->data_dir) + 8 >= DS_PATH_MAX || cfg->max_lag_ms == 0) {
        return -DS_EUSAGE;
    }
    struct index_builder *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        return -ENOMEM;
    }
    g->cfg = *cfg;
    index_dir(cfg->data_dir, g->gsi_dir);
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->wake, NULL);
    struct index_config gcfg;
    index_config_defaults(&gcfg);
    gcfg.dir = g->gsi_dir;
    if (cfg->table_slots_log2 != 0) {
        gcfg.table_slots_log2 = cfg->table_slots_log2;
    }
    gcfg.checkpoint_inline = cfg->checkpoint_inline;
    g->batch_max = gcfg.batch_entries_max;
    g->batch = malloc((size_t)g->batch_max * sizeof(*g->batch));
    int rc = g->batch != NULL ? 0 : -ENOMEM;
    rc = rc == 0 ? index_open(&gcfg, &g->ix) : rc;
    rc = rc == 0 ? cursor_load(g) : rc;
    if (rc == 0) {
        rc = storage_open_reader(cfg->data_dir, &g->base);
    }
    if (rc == 0 && storage_commit_seq(g->base) > g->applied_seq) {
        /* Commits an earlier process made durable that the index has not reached (a crash, a
         * run with --no-gsi): pending from now, since their durable time is not known, so the
         * lag gauge and back-pressure see the catch-up instead of reading 0. */
        g->pending[0] = (struct builder_pending){.seq = storage_commit_seq(g->base),
                                                 .durable_ns = ds_clock_ns()};
        g->pending_count = 1;
    }
    if (rc == 0) {
        g->indexed_seq = g->applied_seq;
        rc = -pthread_create(&g->thread, NULL, builder_main, g);
        g->started = rc == 0;
    }
    if (rc != 0) {
        index_builder_stop(g);
        return rc;
    }
    ds_log_info("gsi: following %s from commit %llu (%u partitions known) into %s", cfg->data_dir,
                (unsigned long long)g->applied_seq, g->position_count, g->gsi_dir);
    *out = g;
    return 0;
}

void index_builder_stop(struct index_builder *g)
{
    if (g == NULL) {
        return;
    }
    if (g->started) {
        pthread_mutex_lock(&g->lock);
        g->stop = true;
        pthread_cond_broadcast(&g->wake);
        pthread_mutex_unlock(&g->lock);
        pthread_join(g->thread, NULL);
    }
    index_seal_cancel(g->seal);
    index_close(g->ix);
    storage_close(g->base);
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->lock);
    free(g->positions);
    free(g->batch);
    free(g->cursor);
    free(g);
}

void index_builder_notify(struct index_builder *g, uint64_t commit_seq, uint64_t events_durable)
{
    uint64_t now = ds_clock_ns();
    pthread_mutex_lock(&g->lock);
    if (commit_seq > g->indexed_seq) {
        if (g->pending_count == BUILDER_PENDING_MAX) {
            /* Keep the oldest durable time (the lag is measured from it); drop the one after. */
            uint32_t second = (g->pending_head + 1) % BUILDER_PENDING_MAX;
            g->pending[second].durable_ns = g->pending[g->pending_head].durable_ns;
            g->pending_head = second;
            g->pending_count--;
        }
        uint32_t tail = (g->pending_head + g->pending_count) % BUILDER_PENDING_MAX;
        g->pending[tail] = (struct builder_pending){
            .seq = commit_seq, .durable_ns = now, .events_durable = events_durable};
        g->pending_count++;
    }
    g->durable_events = events_durable;
    g->notified = true;
    pthread_cond_broadcast(&g->wake);
    pthread_mutex_unlock(&g->lock);
}

/* Age of the oldest commit not yet queryable, under lock. */
static uint64_t lag_ns_locked(const struct index_builder *g, uint64_t now)
{
    if (g->pending_count == 0) {
        return 0;
    }
    uint64_t oldest = g->pending[g->pending_head].durable_ns;
    return now > oldest ? now - oldest : 0;
}

void index_builder_lag(struct index_builder *g, uint64_t *lag_ms, uint64_t *lag_events)
{
    pthread_mutex_lock(&g->lock);
    *lag_ms = lag_ns_locked(g, ds_clock_ns()) / 1000000u;
    *lag_events = g->durable_events > g->indexed_events ? g->durable_events - g->indexed_events : 0;
    pthread_mutex_unlock(&g->lock);
}

int index_builder_error(struct index_builder *g)
{
    pthread_mutex_lock(&g->lock);
    int rc = g->error;
    pthread_mutex_unlock(&g->lock);
    return rc;
}

bool index_builder_should_pause(struct index_builder *g)
{
    pthread_mutex_lock(&g->lock);
    uint64_t lag_ns = lag_ns_locked(g, ds_clock_ns());
    uint64_t bound_ns = (uint64_t)g->cfg.max_lag_ms * 1000000u;
    /* When the oldest waiting commit will be queryable: its age now plus the time the builder
     * needs for everything durable but not indexed, at its measured rate (a cautious guess
     * before the first measurement). Pausing on the prediction, not on the lag alone, keeps
     * the bound when a burst is more than the builder can index in what is left of it. */
    uint64_t behind =
        g->durable_events > g->indexed_events ? g->durable_events - g->indexed_events : 0;
    double rate = g->entries_per_ns > 0 ? g->entries_per_ns : BUILDER_RATE_GUESS_PER_NS;
    uint64_t predicted_ns = lag_ns + (uint64_t)((double)behind / rate);
    if (g->error != 0) {
        g->pausing = true; /* a dead builder must not let the index fall behind unbounded */
    } else if (!g->pausing && (predicted_ns > bound_ns / 2 || lag_ns > bound_ns / 2)) {
        g->pausing = true;
    } else if (g->pausing && predicted_ns < bound_ns / 4) {
        g->pausing = false;
    }
    bool pause = g->pausing;
    if (g->cfg.lag_gauge != NULL) {
        g->cfg.lag_gauge(g->cfg.lag_user, (int64_t)(lag_ns / 1000000u));
    }
    pthread_mutex_unlock(&g->lock);
    return pause;
}

int index_builder_wait(struct index_builder *g, uint64_t commit_seq, uint32_t timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&g->lock);
    int rc = 0;
    while (g->indexed_seq < commit_seq && g->error == 0 && rc == 0) {
        rc = pthread_cond_timedwait(&g->wake, &g->lock, &until) == ETIMEDOUT ? -ETIMEDOUT : 0;
    }
    if (g->indexed_seq >= commit_seq) {
        rc = 0;
    } else if (g->error != 0) {
        rc = g->error;
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

struct index *index_builder_store(struct index_builder *g)
{
    return g->ix;
}

/* ---- readers in other processes ------------------------------------------------------------ */

struct index_reader {
    struct index *ix;
    uint8_t *cursor; /* cursor_cap bytes, grown to the stored cursor */
    size_t cursor_cap;
    char dir[DS_PATH_MAX]; /* DATA/gsi, to open again after a rebuild replaced it */
};

static int reader_gsi_open(const char *dir, struct index **out)
{
    struct index_config cfg;
    index_config_defaults(&cfg);
    cfg.dir = dir;
    return index_open_reader(&cfg, out);
}

int index_reader_open(const char *data_dir, struct index_reader **out)
{
    struct index_reader *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return -ENOMEM;
    }
    index_dir(data_dir, r->dir);
    int rc = reader_gsi_open(r->dir, &r->ix);
    if (rc != 0) {
        index_reader_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

int index_reader_refresh(struct index_reader *r)
{
    if (index_replaced(r->ix)) {
        struct index *fresh = NULL;
        int rc = reader_gsi_open(r->dir, &fresh);
        if (rc != 0) {
            return rc == -ENOENT ? 0 : rc; /* the new index is not there yet: keep the old view */
        }
        ds_log_info("%s: the index was rebuilt; reading the new one", r->dir);
        index_close(r->ix);
        r->ix = fresh;
        return 0;
    }
    return index_refresh(r->ix);
}

int index_reader_indexed_seq(struct index_reader *r, uint64_t *seq)
{
    size_t len = 0;
    int rc = cursor_fetch(r->ix, &r->cursor, &r->cursor_cap, &len);
    if (rc != 0) {
        return rc;
    }
    if (len == 0) {
        *seq = 0;
        return 0;
    }
    if (len < CURSOR_HEADER_BYTES || memcmp(r->cursor, CURSOR_MAGIC, 4) != 0) {
        return -DS_ECORRUPT;
    }
    *seq = ds_get_le64(r->cursor + 4);
    return 0;
}

struct index *index_reader_store(struct index_reader *r)
{
    return r->ix;
}

void index_reader_close(struct index_reader *r)
{
    if (r == NULL) {
        return;
    }
    index_close(r->ix);
    free(r->cursor);
    free(r);
}
