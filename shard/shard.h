/*
 * shard: where an event goes (a contract: docs/EVENTS.md "Days, shards and partition keys").
 *
 * - day = UTC calendar date of the event's timestamp (days since 1970-01-01);
 * - partition key = "DAY#YYYY-MM-DD#k", 0 <= k < S(day);
 * - k = order_id mod S for integer ids, FNV-1a 64 of the string's bytes mod S for string ids;
 * - S(day) comes from the shard map: per day, persisted, only ever grows. A day first seen gets
 *   the configured base count; adaptive growth may start it higher from the recent rate (a new
 *   day's count follows the rate, not the past peak). Counting fans out over every shard a day
 *   has ever had.
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
/* Default base shard count (--shards default 4). */
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
 * a newly seen day gets (1..SHARD_COUNT_MAX). dir NULL makes a map in memory only (a producer
 * following the shard map topic): it reads and writes no file, and a sync only marks it clean.
 * Returns 0, -DS_ECORRUPT for a damaged file, -DS_EFORMAT for an unknown version, or a negated
 * errno. */
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
/* Raises a known day's S to shard_count and makes it durable before returning, so no event can
 * use a new shard the file lacks. Pending changes are synced first. On a failed write the day
 * keeps its old count in memory too (the map is as before) and the error is returned. Returns
 * 0, -ENOENT (day not in the map: shard_map_ensure it first), -EINVAL (a smaller count),
 * -DS_ELIMIT, -EROFS (read-only map) or the write's negated errno. */
DS_MUST_USE int shard_map_grow_sync(struct shard_map *map, int32_t day, uint32_t shard_count);

/* Visits the known days in ascending order; stops early when fn returns non-zero and returns
 * that value. */
typedef int (*shard_map_visit_fn)(int32_t day, uint32_t shard_count, void *user);
int shard_map_visit(const struct shard_map *map, shard_map_visit_fn fn, void *user);
size_t shard_map_day_count(const struct shard_map *map);
/* The latest day in the map, or -1 when it is empty. */
int32_t shard_map_last_day(const struct shard_map *map);
/* The latest day in the map before day, or -1 when there is none. */
int32_t shard_map_previous_day(const struct shard_map *map, int32_t day);

/* ---- heat: where writes concentrate, measured where they happen ------------------------------ */

/*
 * A heat tracker counts writes per partition key (day, shard), per day, per source (Kafka
 * partition) and per customer, in 1-second buckets of *producer time* (the Kafka message's
 * timestamp), so a node catching up a backlog sees the rate producers wrote at, not its own
 * catch-up speed. The tracker's clock, the current second, is max(the wall clock given to
 * shard_heat_advance, the newest event second observed); a second before it is complete.
 *
 * - Partitions, days and sources: exact counts in a ring of SHARD_HEAT_WINDOW_S buckets (the
 *   sliding window), the peak of any one second, and events so far. Tables are fixed at create;
 *   keys idle for a whole window are dropped when room is needed; an event whose key finds no
 *   room is counted in untracked_events (never lost: storage does not depend on heat).
 * - Customers: Space-Saving heavy hitters (SHARD_HEAT_CUSTOMERS_MAX counters, a min-heap), with
 *   every counter decayed by exp(-1/SHARD_HEAT_CUSTOMER_TAU_S) at each completed second, so a
 *   counter is an exponentially weighted rate: rate_eps = count * (1 - decay). Space-Saving
 *   never misses a key whose true (decayed) weight exceeds the total / counters, and over-counts
 *   a key by at most its error_eps.
 * - Capacity accounting (capacity_eps > 0): a partition-second whose count exceeds capacity_eps
 *   counts once in over_capacity_seconds, and every event past capacity_eps in that second in
 *   would_throttle_events (what a store with that per-partition limit would have refused).
 *   Incremental, so exact however late an event of that second arrives.
 *
 * A tracker belongs to one thread (the node's consumer thread): no locks, no allocation after
 * create. Other threads get copies (struct shard_heat_snapshot).
 */

/* The sliding window: 1 s buckets, the last 60 s. */
#define SHARD_HEAT_WINDOW_S 60u
/* Adaptive growth compares a day's events over the last 5 complete seconds with its capacity:
 * fast enough for a flash sale, smooth enough that one bursty second does not grow a day. */
#define SHARD_HEAT_GROWTH_WINDOW_S 5u
/* Partition keys tracked at once: a month of days at the default most shards a day gets
 * (31 x 256 = 7,936), so the console's history can show every partition of a month. */
#define SHARD_HEAT_PARTITIONS_MAX 8192u
/* Days tracked at once (a stream rarely writes more than a few days at a time). */
#define SHARD_HEAT_DAYS_MAX 1024u
/* Sources (Kafka partitions) tracked: index = partition, as the node's own limit. */
#define SHARD_HEAT_SOURCES_MAX 4096u
/* Space-Saving counters for customers: error at most 1/1024 of the total rate. */
#define SHARD_HEAT_CUSTOMERS_MAX 1024u
/* Time constant of the customers' decayed rate. */
#define SHARD_HEAT_CUSTOMER_TAU_S 10u
/* Rows of each list in a snapshot (top N by rate; `?top=N` is at most this). */
#define SHARD_HEAT_TOP_MAX 64u
/* Sources listed in a snapshot (all of them, up to this many, by partition). */
#define SHARD_HEAT_SOURCES_SNAPSHOT_MAX 256u
/* Adaptive sharding: events/s one partition should take (DynamoDB's
 * per-partition write limit, so a shard map from dayshard is a key design for such a store),
 * and the most shards adaptive growth gives a day. */
#define SHARD_CAPACITY_DEFAULT 1000u
#define SHARD_CAPACITY_MAX 100000000u
#define SHARD_MAX_SHARDS_DEFAULT 256u

_Static_assert(SHARD_HEAT_GROWTH_WINDOW_S < SHARD_HEAT_WINDOW_S, "growth reads the window");
_Static_assert(SHARD_MAX_SHARDS_DEFAULT <= SHARD_COUNT_MAX, "the default maximum is allowed");

struct shard_heat;

struct shard_heat_partition_row {
    int32_t day;
    uint32_t shard;
    uint64_t rate_now;      /* events in the last complete second */
    uint64_t rate_peak;     /* the most events of any one second so far */
    uint64_t window_events; /* events in the window's complete seconds (rate_avg = / window) */
    uint64_t events;        /* so far */
    uint64_t over_capacity_seconds;
    uint64_t would_throttle_events;
};

struct shard_heat_day_row {
    int32_t day;
    uint64_t rate_now;
    uint64_t rate_peak;
    uint64_t window_events;
    uint64_t growth_window_events; /* the last SHARD_HEAT_GROWTH_WINDOW_S complete seconds */
    uint64_t events;
};

struct shard_heat_source_row {
    int32_t partition;
    uint64_t rate_now;
    uint64_t rate_peak;
    uint64_t window_events;  /* events in the window's complete seconds */
    uint32_t window_seconds; /* of those seconds, the ones with events */
    uint64_t events;
};

struct shard_heat_customer_row {
    struct ds_id customer;
    double rate_eps;  /* decayed estimate, an upper bound of the true decayed rate */
    double error_eps; /* the estimate exceeds the truth by at most this */
};

struct shard_heat_snapshot {
    int64_t second; /* the last complete second (epoch seconds); rates are of this second */
    uint32_t capacity_eps;
    uint64_t events;   /* observed so far */
    uint64_t rate_now; /* all events of the last complete second */
    uint64_t untracked_events;
    uint64_t over_capacity_seconds; /* totals over every partition ever tracked */
    uint64_t would_throttle_events;
    double customer_rate_eps; /* the decayed total rate that customers' shares are of */
    uint32_t partition_count; /* rows used, hottest first (rate_now, then events, then key) */
    struct shard_heat_partition_row partitions[SHARD_HEAT_TOP_MAX];
    uint32_t day_count; /* hottest first */
    struct shard_heat_day_row days[SHARD_HEAT_TOP_MAX];
    uint32_t source_count; /* by partition, ascending */
    struct shard_heat_source_row sources[SHARD_HEAT_SOURCES_SNAPSHOT_MAX];
    uint32_t customer_count; /* highest rate first */
    struct shard_heat_customer_row customers[SHARD_HEAT_TOP_MAX];
};

/* Creates a tracker (everything allocated here; ~4 MiB). capacity_eps 0 turns the capacity
 * accounting off. Returns 0 or -ENOMEM. */
DS_MUST_USE int shard_heat_create(uint32_t capacity_eps, struct shard_heat **out);
void shard_heat_destroy(struct shard_heat *heat);
/* One event written at `second` (epoch seconds, producer time) to partition (day, shard), read
 * from source partition `source` (-1: none, e.g. a file), placed by `customer` (NULL: not
 * tracked). An event older than the window still counts in events, not in rates. */
void shard_heat_observe(struct shard_heat *heat, int64_t second, int32_t day, uint32_t shard,
                        int32_t source, const struct ds_id *customer);
/* Moves the current second to max(now_second, newest event second). Returns true when the
 * current second moved forward (so seconds completed: time to check growth and publish). */
bool shard_heat_advance(struct shard_heat *heat, int64_t now_second);
/* The current second (0 before any advance or event). */
int64_t shard_heat_second(const struct shard_heat *heat);
/* A day's events in the last SHARD_HEAT_GROWTH_WINDOW_S complete seconds (0 if untracked). */
uint64_t shard_heat_day_growth_events(const struct shard_heat *heat, int32_t day);
/* A day's events so far, older than the window included (0 if untracked). */
uint64_t shard_heat_day_events(const struct shard_heat *heat, int32_t day);
/* Visits every tracked day with events in the growth window or in the current (incomplete)
 * second, in any order, with both counts; stops early when fn returns non-zero and returns
 * that value. */
typedef int (*shard_heat_day_fn)(int32_t day, uint64_t growth_window_events,
                                 uint64_t current_second_events, void *user);
int shard_heat_visit_active_days(const struct shard_heat *heat, shard_heat_day_fn fn, void *user);
/* The seconds marked late since the last take, and clears the mark: bit (s % 64) is set when an
 * event of a complete second s inside the window (current - SHARD_HEAT_WINDOW_S <= s < current)
 * was observed. Within the window each bit names one second, since 64 > SHARD_HEAT_WINDOW_S.
 * Owner thread only, as every call of a tracker: the heat history's writer re-takes those
 * seconds' columns (shard_heat_history_record). */
#define SHARD_HEAT_LATE_BITS 64u
_Static_assert(SHARD_HEAT_LATE_BITS > SHARD_HEAT_WINDOW_S, "a late bit names one window second");
uint64_t shard_heat_late_take(struct shard_heat *heat);
/* Visits every tracked partition with events in `second` (bucketed, so within the window), in
 * any order; untracked events are in no partition. */
typedef void (*shard_heat_partition_fn)(int32_t day, uint32_t shard, uint32_t events, void *user);
void shard_heat_visit_second(const struct shard_heat *heat, int64_t second,
                             shard_heat_partition_fn fn, void *user);
/* Fills *out (hottest first, at most top rows per list, 1..SHARD_HEAT_TOP_MAX). */
void shard_heat_snapshot(const struct shard_heat *heat, uint32_t top,
                         struct shard_heat_snapshot *out);

/* The adaptive growth rule, pure: a day with `shards` shards that took `events` in the last
 * `window_s` seconds is over capacity when events > window_s * shards * capacity_eps; it then
 * doubles (repeatedly) to the smallest count that takes the rate with 25% headroom
 * (count * capacity_eps * window_s >= 1.25 * events), at most max_shards. Returns the new count
 * (== shards when there is nothing to do, capacity_eps is 0, or shards >= max_shards). */
uint32_t shard_growth_target(uint64_t events, uint32_t window_s, uint32_t shards,
                             uint32_t capacity_eps, uint32_t max_shards);
/* The count a new day starts with, pure: `events` in the last `window_s` seconds is the recent
 * rate of the day before it, which has `previous` shards (capped at max_shards); the new day has
 * `shards`. Past the previous count's threshold (events > window_s x previous x capacity_eps)
 * it is the growth target from the previous count: grow at the threshold. Otherwise it is the
 * smallest of shards, 2 x shards, 4 x shards, ... below the previous count that takes the rate
 * with growth's 25% headroom (count x capacity_eps x window_s >= 1.25 x events), else the
 * previous count. So a new day starts lower only when the rate is at least 20% under the lower
 * count's threshold (the band TiKV and CockroachDB keep), and a rate near a threshold gives
 * every day the same count. Never below shards; shards when capacity_eps is 0. */
uint32_t shard_start_target(uint64_t events, uint32_t window_s, uint32_t previous, uint32_t shards,
                            uint32_t capacity_eps, uint32_t max_shards);

/* ---- adaptive growth: the plan, the record, the history file ------------------------------- */

/* Why a day grew, as people read it ("5210 events/s over 5 s > 4 shards x 1000/s"). */
#define SHARD_GROWTH_REASON_BYTES 128u

struct shard_growth {
    int32_t day;
    uint32_t from; /* shard count before */
    uint32_t to;   /* after */
    int64_t t;     /* the heat's current second when it was planned (epoch s, producer time) */
    int64_t at_ms; /* wall clock, epoch milliseconds */
    char reason[SHARD_GROWTH_REASON_BYTES];
};

/* Visits every day the heat says is over its capacity and calls fn with the planned growth
 * (t, at_ms and reason filled in); returns fn's first non-zero value, else 0. A day is over
 * capacity when either
 *   - its events in the last SHARD_HEAT_GROWTH_WINDOW_S complete seconds exceed window x S x
 *     capacity (shard_growth_target), or
 *   - its events in the current second so far exceed S x capacity: that second is over
 *     capacity whatever comes next, so waiting for it to complete only throttles more. The
 *     rate is then the count projected to a whole second from the part of it elapsed
 *     (now_ms against the heat's current second; at least a tenth of a second).
 * The larger of the two targets wins. And the map's latest day, while it is new (every event
 * of it the heat holds is in the growth window or the current second), starts from what the
 * recent rate of the day before it needs: shard_start_target of that day's events in the
 * growth window and its count. A stream in time order moves all its writes to a new day at
 * midnight, at the rate the day before had just before, so measuring the new day from nothing
 * would throttle the first second of every day; the day before's peak earlier on (a burst) is
 * not that rate and does not carry over. Rates are in producer time, as the heat counts: a
 * backlog read late shows the rate it was written at, and one older than the heat's window
 * shows none, so its days start at the base count; a time-compressed stream (many days a
 * minute) gives a day its events over the window, so a short day sizes the next one by its
 * volume, not by the feed's speed. Older days (late events, backfills) start at the base count.
 * Days the map does not know are skipped (the router gives them the base count first). */
typedef int (*shard_growth_fn)(const struct shard_growth *growth, void *user);
int shard_growth_plan(const struct shard_heat *heat, const struct shard_map *map,
                      uint32_t capacity_eps, uint32_t max_shards, int64_t now_ms,
                      shard_growth_fn fn, void *user);

/* Appends a growth as one JSON line to DIR/shardmap.log and fdatasyncs it: {"day":"2026-01-21",
 * "from":4,"to":8,"at":"2026-12-01T23:00:03.120Z","reason":"..."}. The map file is the truth;
 * this is its history, written after the map (a crash in between loses the line, not the
 * growth). Returns 0 or a negated errno. */
DS_MUST_USE int shard_growth_log_append(const char *dir, const struct shard_growth *growth);

/* ---- advice: when more shards cannot help ------------------------------------------------- */

/*
 * Growing a day's shards relieves a hot day partition, nothing else. Advice names the hot spots
 * it cannot relieve, with the evidence and the remedy:
 * - kafka_partition_skew: one Kafka partition takes far more than its fair share of the node's
 *   writes (producers key messages by day, so the busy day is one Kafka partition): one consumer
 *   reads it whatever the day's shard count. Remedy: key messages by order_id.
 * - hot_customer: the same, and one customer's share of the writes explains that partition's
 *   excess better than the busiest day's (producers key by customer). Remedy: key by order_id,
 *   or rate-limit the customer.
 * - day_at_max_shards: a day at --max-shards is still over capacity. Remedy: raise --max-shards
 *   or --shard-capacity, else the store's per-partition limit is the bound.
 *
 * Evaluated once a second over windows, never over one second: Kafka partitions by their
 * events in the heat's window (SHARD_HEAT_WINDOW_S), customers by their decayed rate (time
 * constant SHARD_HEAT_CUSTOMER_TAU_S), days by the growth window the growth rule reads. A case
 * that holds (it is in `previous`) stays until its measure falls below a lower bar (the *_KEEP
 * thresholds), so a load near a threshold does not flap between advice and none.
 */

/* Advice rows at once: a few hot spots is what a person can act on. */
#define SHARD_ADVICE_MAX 8u
/* A Kafka partition is skewed past this multiple of its fair share (1 / partitions the node
 * reads): at 2x one consumer does the work of two, the smallest imbalance worth re-keying a
 * producer for; a hash of order ids stays within a few percent of fair. */
#define SHARD_ADVICE_SKEW_FACTOR 2.0
/* A skew already advised stays until the share falls below this multiple. */
#define SHARD_ADVICE_SKEW_KEEP_FACTOR 1.5
/* A skewed partition must have written in at least SHARD_ADVICE_MIN_SECONDS seconds of the
 * window, and at least SHARD_ADVICE_MIN_EPS events/s over as many: a trickle is skewed by
 * chance (a few keys), a consumer takes a few hundred events/s whatever the keying, and one
 * second is no pattern (a stream keyed by day, replayed fast, puts its first second's day in
 * one partition). */
#define SHARD_ADVICE_MIN_EPS 100u
#define SHARD_ADVICE_MIN_SECONDS 3u
/* A customer explains a partition's skew when its share of all writes is at least this part
 * of the partition's share past fair (then re-keying, or limiting that customer, removes most
 * of the excess), and more than the busiest day's share (else keying by day explains it as
 * well: a customer that writes every day is spread over the partitions then). */
#define SHARD_ADVICE_CUSTOMER_EXPLAINS 0.5
#define SHARD_ADVICE_CUSTOMER_KEEP 0.35
/* A day at --max-shards advised while its growth-window rate is over its capacity stays until
 * the rate falls below this part of it. */
#define SHARD_ADVICE_DAY_KEEP 0.8
#define SHARD_ADVICE_SUBJECT_BYTES 80u
#define SHARD_ADVICE_TEXT_BYTES 320u

enum shard_advice_case {
    SHARD_ADVICE_KAFKA_PARTITION_SKEW,
    SHARD_ADVICE_HOT_CUSTOMER,
    SHARD_ADVICE_DAY_AT_MAX_SHARDS,
};

struct shard_advice {
    enum shard_advice_case kind;
    int32_t partition;     /* the Kafka partition (skew, hot customer), else -1 */
    int32_t day;           /* the day (day_at_max_shards), else -1 */
    struct ds_id customer; /* hot_customer only */
    char subject[SHARD_ADVICE_SUBJECT_BYTES]; /* "partition 3", "customer 42", "2026-01-21" */
    char evidence[SHARD_ADVICE_TEXT_BYTES];
    char remedy[SHARD_ADVICE_TEXT_BYTES];
};

/* "kafka_partition_skew", "hot_customer", "day_at_max_shards". */
const char *shard_advice_case_name(enum shard_advice_case kind);

/* Everything a node publishes about heat once a second (a copy; any thread may read it). */
#define SHARD_GROWTHS_KEPT 32u
struct shard_heat_report {
    struct shard_heat_snapshot heat;
    uint32_t partition_day_shards[SHARD_HEAT_TOP_MAX]; /* S of each partitions[i]'s day */
    uint32_t day_shards[SHARD_HEAT_TOP_MAX];           /* S of each days[i] */
    uint32_t base_shards;
    uint32_t max_shards;
    bool adaptive;      /* capacity_eps > 0 and growth has not stopped */
    bool growth_failed; /* a map write failed: growth stopped, events keep their shards */
    uint64_t growths_total;
    uint32_t growth_count; /* the newest first */
    struct shard_growth growths[SHARD_GROWTHS_KEPT];
    /* Kafka partitions of the topic and those this node reads (0: unknown, e.g. a file), and
     * the capacity growth measures this node's days by (its share of --shard-capacity). */
    uint32_t kafka_partitions_total;
    uint32_t kafka_partitions_assigned;
    uint32_t growth_capacity_eps;
    uint32_t advice_count; /* shard_advice_plan of this report */
    struct shard_advice advice[SHARD_ADVICE_MAX];
};

/* ---- heat history: the last seconds of every partition, for the console ------------------- */

/*
 * What each partition took in each of the last SHARD_HEAT_HISTORY_S complete heat seconds, and
 * the growths whose heat second (shard_growth.t) falls in that time: the heat console's picture
 * of where writes went, second by second.
 *
 * One writer, the node's consumer thread: shard_heat_history_record after every
 * shard_heat_advance that moved the clock takes a column for every second completed since the
 * last record (the partitions with events in it, read from the heat's ring; an empty column
 * for a second nobody wrote in), and takes again the columns of the seconds the heat marked
 * late (shard_heat_late_take: an event of an already complete second inside the heat's window,
 * as a lagging Kafka partition sends them), so a column sums every event of its second the heat
 * bucketed, however late it came, up to the record after it; shard_heat_history_growth appends
 * each growth. The kept columns are always the consecutive seconds ending at the last complete
 * one, at most SHARD_HEAT_HISTORY_S of them.
 *
 * Revisions: every column taken (appended or amended) gets the next number of one increasing
 * sequence, and a growth gets the newest when its second completes; the history's revision is
 * the newest given. A reader that remembers the revision of its last copy gets exactly what
 * changed since, new and amended columns alike (shard_heat_history_copy_since).
 *
 * Readers on any thread copy out what they ask for. A mutex guards the columns, held to take
 * one column or to copy columns out; nothing else is shared. Memory is fixed at create:
 * SHARD_HEAT_HISTORY_S columns of up to SHARD_HEAT_PARTITIONS_MAX cells (8 bytes each, 18.75 MiB
 * of address space, of which only the cells used become resident).
 */
#define SHARD_HEAT_HISTORY_S 300u
/* Growths kept: a month of days doubling from 1 to 256 shards (31 x 8 = 248) in one window. */
#define SHARD_HEAT_HISTORY_GROWTHS_MAX 256u
/* The first cursor of shard_heat_history_copy's `after`: every column kept. */
#define SHARD_HEAT_HISTORY_ALL INT64_MIN

struct shard_heat_history;

/* One partition's events in one second. */
struct shard_heat_cell {
    int32_t day;
    uint32_t shard;
    uint32_t events;
};

/* One complete second: cells[first_cell .. first_cell + cell_count - 1] of the copy, ordered by
 * day and then shard (none: nothing was written in it). */
struct shard_heat_column {
    int64_t t;
    uint64_t revision; /* when the column was last taken */
    uint32_t first_cell;
    uint32_t cell_count;
};

/* A copy of part of the history. */
struct shard_heat_history_view {
    int64_t second;        /* the last complete second recorded; -1 before any */
    uint64_t revision;     /* the history's newest revision at the copy; 0 before any */
    uint32_t column_count; /* oldest first */
    struct shard_heat_column columns[SHARD_HEAT_HISTORY_S];
    uint32_t cell_count;   /* cells copied (or needed, after -ENOSPC) */
    uint32_t growth_count; /* oldest first */
    struct shard_growth growths[SHARD_HEAT_HISTORY_GROWTHS_MAX];
};

/* Creates an empty history. Returns 0 or -ENOMEM. */
DS_MUST_USE int shard_heat_history_create(struct shard_heat_history **out);
/* Accepts NULL. */
void shard_heat_history_destroy(struct shard_heat_history *h);
/* Writer: takes the columns of the seconds the heat completed since the last call (of a clock
 * that jumped, the last SHARD_HEAT_HISTORY_S seconds, those before the heat's window empty) and
 * again those of the seconds it marked late (it takes the heat's late mark). */
void shard_heat_history_record(struct shard_heat_history *h, struct shard_heat *heat);
/* Writer: appends a growth (the oldest kept goes when SHARD_HEAT_HISTORY_GROWTHS_MAX are). */
void shard_heat_history_growth(struct shard_heat_history *h, const struct shard_growth *growth);
/* Any thread: the last complete second recorded, -1 before any (cheap: one lock). */
int64_t shard_heat_history_second(struct shard_heat_history *h);
/* Any thread: the newest revision, 0 before any (cheap: one lock). */
uint64_t shard_heat_history_revision(struct shard_heat_history *h);
/* Any thread: copies into *out the columns (empty ones too) with t in (max(after, second -
 * seconds), second] and the growths with t in the same range, where second is the last complete
 * second recorded (seconds: 1..SHARD_HEAT_HISTORY_S; after: SHARD_HEAT_HISTORY_ALL, or the
 * second of a previous copy to get only the seconds completed since, not the amendments of the
 * earlier ones: shard_heat_history_copy_since has both). Cells go to cells (cells_capacity of
 * them). Returns 0, or -ENOSPC with out->cell_count set to the cells needed (retry with as many;
 * the history may have moved on by then). */
DS_MUST_USE int shard_heat_history_copy(struct shard_heat_history *h, uint32_t seconds,
                                        int64_t after, struct shard_heat_history_view *out,
                                        struct shard_heat_cell *cells, size_t cells_capacity);
/* Any thread: as shard_heat_history_copy, but the columns (of any kept second) and growths whose
 * revision is above after_revision: 0 for everything kept, or out->revision of a previous copy
 * to get what was appended or amended since. */
DS_MUST_USE int shard_heat_history_copy_since(struct shard_heat_history *h, uint64_t after_revision,
                                              struct shard_heat_history_view *out,
                                              struct shard_heat_cell *cells, size_t cells_capacity);

/* The advice rule, pure: up to out_max rows (<= SHARD_ADVICE_MAX) for report, skewed Kafka
 * partitions first (hottest first), then days (hottest first). previous holds the advice of
 * the report before (the cases that keep at the lower bars); it must not overlap out. Returns
 * the rows written. */
uint32_t shard_advice_plan(const struct shard_heat_report *report,
                           const struct shard_advice *previous, uint32_t previous_count,
                           struct shard_advice *out, uint32_t out_max);

#endif /* DS_SHARD_H */
