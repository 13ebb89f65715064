/*
 * Adaptive write sharding: which days must grow (the plan) and the history of growths.
 *
 * The plan reads the heat tracker's growth window (the last SHARD_HEAT_GROWTH_WINDOW_S complete
 * seconds of each active day) and the map's current counts, and applies shard_growth_target:
 * a day grows only when its events in the window exceed window x S x capacity, to the doubling
 * that takes the rate with 25% headroom. Doubling keeps `order_id mod S` balanced over the new
 * shards and makes growth rare (log2(max/base) times per day at most), which matters because
 * every growth is a durable map write and a message on the shard map topic.
 *
 * A new latest day starts from the recent rate of the day before it (shard_start_target), not
 * from that day's count: a count only ever grows within a day, so carrying the count over would
 * carry one burst's peak into every later day (more, smaller blocks, more files, more fan-out).
 * The rule is read only while the day is new (its first seconds), because the rate it reads is
 * the day before's: later, only the day's own rate may grow it. The band (a day starts lower
 * only at 80% of the lower count's threshold) is growth's own 25% headroom, so a day started
 * lower is never over its capacity at the rate that started it, and a rate hovering near a
 * threshold gives every day the same count.
 *
 * The history (DIR/shardmap.log) is one JSON line per growth, appended and synced after the
 * map file was replaced: the map is the truth, the log its explanation. Rejected: keeping the
 * history inside the map file (one atomic write for both), because the map is rewritten whole
 * on every change and the history only grows; a crash between the two writes loses one line
 * of explanation, never a growth.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "shard/shard.h"

#define GROW_LOG_FILE_NAME "shardmap.log"
/* One history line at its longest: the fixed fields plus the reason. */
#define GROW_LOG_LINE_BYTES_MAX (160u + SHARD_GROWTH_REASON_BYTES)

/* A projection from less of a second than this would be noise. */
#define GROW_ELAPSED_MS_MIN 100

struct grow_plan {
    const struct shard_heat *heat;
    const struct shard_map *map;
    int64_t second; /* the heat's current second */
    uint32_t capacity_eps;
    uint32_t max_shards;
    int64_t now_ms;
    shard_growth_fn fn;
    void *user;
};

/* The part of the current second elapsed, in ms, at least a tenth of a second (a projection
 * from the first milliseconds of a second would be noise). */
static uint64_t grow_elapsed_ms(const struct grow_plan *plan)
{
    int64_t elapsed = plan->now_ms - plan->second * 1000;
    return elapsed < GROW_ELAPSED_MS_MIN ? GROW_ELAPSED_MS_MIN
           : elapsed > 1000              ? 1000u
                                         : (uint64_t)elapsed;
}

/* The count the map's latest day starts with while it is new (see shard.h), from the recent
 * rate of the day before it; shards when the day is not the latest, not new, or has no day
 * before it. *previous_out is that day (-1 when there is none). */
static uint32_t grow_started(const struct grow_plan *plan, int32_t day, uint32_t shards,
                             uint64_t window_events, uint64_t current_events, int32_t *previous_out,
                             uint64_t *previous_events_out)
{
    *previous_out = -1;
    *previous_events_out = 0;
    if (day != shard_map_last_day(plan->map)) {
        return shards;
    }
    /* New: every event of the day the heat holds is recent. Afterwards only the day's own rate
     * grows it, so a later rise of the day before's rate (a backfill) never does. */
    if (shard_heat_day_events(plan->heat, day) > window_events + current_events) {
        return shards;
    }
    int32_t previous = shard_map_previous_day(plan->map, day);
    if (previous < 0) {
        return shards;
    }
    uint64_t events = shard_heat_day_growth_events(plan->heat, previous);
    *previous_out = previous;
    *previous_events_out = events;
    return shard_start_target(events, SHARD_HEAT_GROWTH_WINDOW_S,
                              shard_map_get(plan->map, previous), shards, plan->capacity_eps,
                              plan->max_shards);
}

static int grow_plan_day(int32_t day, uint64_t events, uint64_t current, void *user)
{
    const struct grow_plan *plan = user;
    uint32_t shards = shard_map_get(plan->map, day);
    if (shards == 0) {
        return 0;
    }
    uint32_t by_window = shard_growth_target(events, SHARD_HEAT_GROWTH_WINDOW_S, shards,
                                             plan->capacity_eps, plan->max_shards);
    uint64_t projected = 0;
    uint32_t by_now = shards;
    if (current > (uint64_t)shards * plan->capacity_eps) {
        projected = current * 1000u / grow_elapsed_ms(plan);
        projected = projected > current ? projected : current;
        by_now = shard_growth_target(projected, 1, shards, plan->capacity_eps, plan->max_shards);
    }
    int32_t previous = -1;
    uint64_t previous_events = 0;
    uint32_t started =
        grow_started(plan, day, shards, events, current, &previous, &previous_events);
    ASSERT(by_window >= shards && by_now >= shards && started >= shards);
    uint32_t target = by_window > by_now ? by_window : by_now;
    if (started > target) {
        ASSERT(previous >= 0);
        struct shard_growth growth = {
            .day = day, .from = shards, .to = started, .t = plan->second, .at_ms = plan->now_ms};
        char previous_text[DS_DATE_TEXT_SIZE];
        ds_date_format(previous, previous_text);
        int n =
            snprintf(growth.reason, sizeof(growth.reason),
                     "a new latest day starts at %u shards for the %llu events/s over %u s "
                     "of %s (%u shards)",
                     started, (unsigned long long)(previous_events / SHARD_HEAT_GROWTH_WINDOW_S),
                     SHARD_HEAT_GROWTH_WINDOW_S, previous_text, shard_map_get(plan->map, previous));
        ASSERT(n > 0 && (size_t)n < sizeof(growth.reason));
        return plan->fn(&growth, plan->user);
    }
    if (target == shards) {
        return 0;
    }
    struct shard_growth growth = {
        .day = day, .from = shards, .to = target, .t = plan->second, .at_ms = plan->now_ms};
    int n = by_now >= by_window
                ? snprintf(growth.reason, sizeof(growth.reason),
                           "%llu events in this second (~%llu/s) > %u shards x %u/s",
                           (unsigned long long)current, (unsigned long long)projected, shards,
                           plan->capacity_eps)
                : snprintf(growth.reason, sizeof(growth.reason),
                           "%llu events/s over %u s > %u shards x %u/s",
                           (unsigned long long)(events / SHARD_HEAT_GROWTH_WINDOW_S),
                           SHARD_HEAT_GROWTH_WINDOW_S, shards, plan->capacity_eps);
    ASSERT(n > 0 && (size_t)n < sizeof(growth.reason));
    return plan->fn(&growth, plan->user);
}

int shard_growth_plan(const struct shard_heat *heat, const struct shard_map *map,
                      uint32_t capacity_eps, uint32_t max_shards, int64_t now_ms,
                      shard_growth_fn fn, void *user)
{
    ASSERT(heat != NULL && map != NULL && fn != NULL);
    ASSERT(max_shards >= 1 && max_shards <= SHARD_COUNT_MAX);
    if (capacity_eps == 0) {
        return 0;
    }
    struct grow_plan plan = {.heat = heat,
                             .map = map,
                             .second = shard_heat_second(heat),
                             .capacity_eps = capacity_eps,
                             .max_shards = max_shards,
                             .now_ms = now_ms,
                             .fn = fn,
                             .user = user};
    return shard_heat_visit_active_days(heat, grow_plan_day, &plan);
}

/* The reason is our own text; a quote or a backslash in it would need escaping. */
static bool grow_reason_plain(const char *reason)
{
    for (const char *c = reason; *c != '\0'; c++) {
        if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) {
            return false;
        }
    }
    return true;
}

int shard_growth_log_append(const char *dir, const struct shard_growth *growth)
{
    ASSERT(dir != NULL && growth != NULL);
    ASSERT(growth->to > growth->from);
    ASSERT(grow_reason_plain(growth->reason));
    char path[DS_PATH_MAX];
    int n = snprintf(path, sizeof(path), "%s/%s", dir, GROW_LOG_FILE_NAME);
    if (n < 0 || (size_t)n >= sizeof(path)) {
        return -ENAMETOOLONG;
    }
    char day[DS_DATE_TEXT_SIZE];
    char at[DS_TS_TEXT_SIZE];
    ds_date_format(growth->day, day);
    ds_ts_format(growth->at_ms, at);
    char line[GROW_LOG_LINE_BYTES_MAX];
    n = snprintf(line, sizeof(line),
                 "{\"day\":\"%s\",\"from\":%u,\"to\":%u,\"at\":\"%s\",\"reason\":\"%s\"}\n", day,
                 growth->from, growth->to, at, growth->reason);
    ASSERT(n > 0 && (size_t)n < sizeof(line));
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        return -errno;
    }
    int rc = 0;
    ssize_t written = write(fd, line, (size_t)n);
    if (written < 0) {
        rc = -errno;
    } else if (written != n) {
        rc = -EIO;
    } else if (fdatasync(fd) != 0) {
        rc = -errno;
    }
    close(fd);
    return rc;
}
