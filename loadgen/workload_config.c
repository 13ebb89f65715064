/*
 * The workload generator's configuration (loadgen.h): the profiles' names, the defaults, and
 * the checks of every field and of how they fit together (the flash window inside the
 * schedule, enough new orders for the updates and duplicates), plus the counts both the
 * checks and the generator (workload.c) derive from a configuration, so the two cannot differ.
 * Apart from workload.c because none of it runs per event: the generator's file is about
 * drawing the stream.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "loadgen/loadgen.h"
#include "loadgen/workload.h"

/* The longest stream: ten years of days keeps every day's millisecond offset and day index
 * well inside double precision and bounds what a typo in --days can ask for. */
#define WORKLOAD_DAYS_MAX 3660u
/* Beyond s = 10 the distribution is a single customer; the Zipf helpers lose precision. */
#define WORKLOAD_ZIPF_S_MAX 10.0
/* Defaults of the flash-sale profile: "a day whose rate jumps 50x for a minute", a third of the
 * way into the schedule (after a steady start that a load test can take as its baseline). */
#define WORKLOAD_FLASH_FACTOR_DEFAULT 50u
#define WORKLOAD_FLASH_SECONDS_DEFAULT 60u
#define WORKLOAD_FLASH_START_FRACTION_DEFAULT (1.0 / 3.0)
/* The most extra events a window can have (before dividing by the days). */
#define WORKLOAD_FLASH_EVENTS_MAX                                                                  \
    ((uint64_t)LOADGEN_WORKLOAD_FLASH_FACTOR_MAX * LOADGEN_WORKLOAD_RATE_EPS_MAX *                 \
     LOADGEN_WORKLOAD_FLASH_SECONDS_MAX)
_Static_assert(WORKLOAD_FLASH_EVENTS_MAX < (1ull << 53),
               "a window's extra event count is exact in a double");

/* Indexed by enum loadgen_profile: the names --profile takes and report.json records. */
static const char *const workload_profile_names[] = {"uniform", "busy-day", "hot-customer",
                                                     "flash-sale"};
_Static_assert(DS_ARRAY_LEN(workload_profile_names) == LOADGEN_PROFILE_FLASH_SALE + 1,
               "every profile has a name");

const char *loadgen_profile_name(enum loadgen_profile profile)
{
    return (size_t)profile < DS_ARRAY_LEN(workload_profile_names) ? workload_profile_names[profile]
                                                                  : "unknown";
}

int loadgen_profile_parse(const char *text, enum loadgen_profile *out)
{
    for (size_t i = 0; i < DS_ARRAY_LEN(workload_profile_names); i++) {
        if (strcmp(text, workload_profile_names[i]) == 0) {
            *out = (enum loadgen_profile)i;
            return 0;
        }
    }
    return -DS_EUSAGE;
}

void loadgen_workload_defaults(struct loadgen_workload_config *cfg)
{
    ASSERT(cfg != NULL);
    memset(cfg, 0, sizeof(*cfg));
    cfg->profile = LOADGEN_PROFILE_UNIFORM;
    cfg->seed = 42;
    cfg->events = 1000000;
    cfg->first_day = ds_days_from_civil(2026, 1, 1);
    cfg->days = 28;
    cfg->customers = 1000000;
    cfg->zipf_s = 1.1;
    cfg->busy_day_index = 20; /* 2026-01-21 */
    cfg->busy_fraction = 0.3;
    cfg->hot_fraction = 0.01;
    cfg->string_id_permille = 0;
    cfg->rate_eps = 0.0;
    cfg->flash_factor = WORKLOAD_FLASH_FACTOR_DEFAULT;
    cfg->flash_seconds = WORKLOAD_FLASH_SECONDS_DEFAULT;
    cfg->flash_start_fraction = WORKLOAD_FLASH_START_FRACTION_DEFAULT;
}

/* True for a share in [0, 1]; false for NaN too. */
static bool workload_fraction_valid(double fraction)
{
    return fraction >= 0.0 && fraction <= 1.0;
}

/* Profile, counts, days and the Zipf exponent. Returns 0 or -DS_EUSAGE (logged). */
static int workload_check_shape(const struct loadgen_workload_config *cfg)
{
    if (cfg->profile != LOADGEN_PROFILE_UNIFORM && cfg->profile != LOADGEN_PROFILE_BUSY_DAY &&
        cfg->profile != LOADGEN_PROFILE_HOT_CUSTOMER &&
        cfg->profile != LOADGEN_PROFILE_FLASH_SALE) {
        ds_log_error("workload: unknown profile %d", (int)cfg->profile);
        return -DS_EUSAGE;
    }
    /* Order ids are 1..events and must stay valid ids (1..2^63-1); so must customer ids. */
    if (cfg->events > (uint64_t)INT64_MAX) {
        ds_log_error("workload: %llu events is over 2^63-1", (unsigned long long)cfg->events);
        return -DS_EUSAGE;
    }
    if (cfg->customers == 0 || cfg->customers > (uint64_t)INT64_MAX) {
        ds_log_error("workload: %llu customers is outside 1..2^63-1",
                     (unsigned long long)cfg->customers);
        return -DS_EUSAGE;
    }
    if (cfg->days == 0 || cfg->days > WORKLOAD_DAYS_MAX) {
        ds_log_error("workload: %u days is outside 1..%u", cfg->days, WORKLOAD_DAYS_MAX);
        return -DS_EUSAGE;
    }
    if (cfg->first_day < 0 || (int64_t)cfg->first_day + (int64_t)cfg->days - 1 > DS_DAY_MAX) {
        ds_log_error("workload: %u days from day %d end outside 1970-01-01..9999-12-31", cfg->days,
                     (int)cfg->first_day);
        return -DS_EUSAGE;
    }
    if (!(cfg->zipf_s > 0.0 && cfg->zipf_s <= WORKLOAD_ZIPF_S_MAX)) {
        ds_log_error("workload: Zipf exponent %g is outside (0, %g]", cfg->zipf_s,
                     WORKLOAD_ZIPF_S_MAX);
        return -DS_EUSAGE;
    }
    return 0;
}

/* The busy day and the shares. Returns 0 or -DS_EUSAGE (logged). */
static int workload_check_shares(const struct loadgen_workload_config *cfg)
{
    bool has_busy_day =
        cfg->profile == LOADGEN_PROFILE_BUSY_DAY || cfg->profile == LOADGEN_PROFILE_FLASH_SALE;
    if (has_busy_day && cfg->busy_day_index >= cfg->days) {
        ds_log_error("workload: busy day index %u is not one of the %u days (0..%u)",
                     cfg->busy_day_index, cfg->days, cfg->days - 1);
        return -DS_EUSAGE;
    }
    if (!workload_fraction_valid(cfg->busy_fraction)) {
        ds_log_error("workload: busy fraction %g is outside 0..1", cfg->busy_fraction);
        return -DS_EUSAGE;
    }
    if (!workload_fraction_valid(cfg->hot_fraction)) {
        ds_log_error("workload: hot fraction %g is outside 0..1", cfg->hot_fraction);
        return -DS_EUSAGE;
    }
    if (cfg->string_id_permille > WORKLOAD_PERMILLE) {
        ds_log_error("workload: string id share %u per mille is over %u", cfg->string_id_permille,
                     WORKLOAD_PERMILLE);
        return -DS_EUSAGE;
    }
    return 0;
}

/* Updates and duplicates of a stream: each round(events * fraction), but never all the lines
 * (the first one is a new order). Fractions must be in range. */
void workload_repeat_counts(const struct loadgen_workload_config *cfg, uint64_t *updates,
                            uint64_t *duplicates)
{
    double events = (double)cfg->events;
    uint64_t u = (uint64_t)floor(events * cfg->update_fraction + 0.5);
    uint64_t d = (uint64_t)floor(events * cfg->duplicate_fraction + 0.5);
    if (cfg->events > 0 && u + d >= cfg->events) {
        u = u < cfg->events - 1 ? u : cfg->events - 1;
        d = cfg->events - 1 - u < d ? cfg->events - 1 - u : d;
    }
    ASSERT(cfg->events == 0 || u + d < cfg->events);
    *updates = u;
    *duplicates = d;
}

/* New orders of a stream: the lines that are neither updates nor duplicates. */
static uint64_t workload_orders(const struct loadgen_workload_config *cfg)
{
    uint64_t updates = 0;
    uint64_t duplicates = 0;
    workload_repeat_counts(cfg, &updates, &duplicates);
    return cfg->events - updates - duplicates;
}

/* Updates, duplicates and items. Returns 0 or -DS_EUSAGE (logged). */
static int workload_check_repeats(const struct loadgen_workload_config *cfg)
{
    if (!workload_fraction_valid(cfg->update_fraction)) {
        ds_log_error("workload: update fraction %g is outside 0..1", cfg->update_fraction);
        return -DS_EUSAGE;
    }
    if (!workload_fraction_valid(cfg->duplicate_fraction)) {
        ds_log_error("workload: duplicate fraction %g is outside 0..1", cfg->duplicate_fraction);
        return -DS_EUSAGE;
    }
    if (cfg->update_fraction + cfg->duplicate_fraction > LOADGEN_WORKLOAD_REPEAT_FRACTION_MAX) {
        ds_log_error("workload: updates %g and duplicates %g leave no room for new orders: "
                     "together at most %g",
                     cfg->update_fraction, cfg->duplicate_fraction,
                     LOADGEN_WORKLOAD_REPEAT_FRACTION_MAX);
        return -DS_EUSAGE;
    }
    if (!workload_fraction_valid(cfg->items_fraction)) {
        ds_log_error("workload: items fraction %g is outside 0..1", cfg->items_fraction);
        return -DS_EUSAGE;
    }
    return 0;
}

/* The window's extra events: (flash_factor - 1) * rate_eps * flash_seconds / days, rounded; 0
 * for the other profiles. Every field must be in range. */
uint64_t workload_flash_events(const struct loadgen_workload_config *cfg)
{
    if (cfg->profile != LOADGEN_PROFILE_FLASH_SALE) {
        return 0;
    }
    double extra = (double)(cfg->flash_factor - 1) * cfg->rate_eps * (double)cfg->flash_seconds /
                   (double)cfg->days;
    ASSERT(extra >= 0.0 && extra < 0x1.0p53);
    return (uint64_t)floor(extra + 0.5);
}

/* The fewest uniform events whose schedule holds the window: count * (1 - start) / rate_eps
 * must reach flash_seconds (the same test as workload_check_flash_fits makes). */
static uint64_t workload_flash_uniform_min(const struct loadgen_workload_config *cfg)
{
    double share_after = 1.0 - cfg->flash_start_fraction;
    double needed = cfg->rate_eps * (double)cfg->flash_seconds;
    double count = ceil(needed / share_after);
    if (count * share_after < needed) {
        count += 1.0;
    }
    return count < 0x1.0p63 ? (uint64_t)count : (uint64_t)INT64_MAX;
}

/* flash-sale: a schedule, and a window that ends inside it. Returns 0 or -DS_EUSAGE (logged). */
static int workload_check_flash_fits(const struct loadgen_workload_config *cfg)
{
    if (cfg->rate_eps <= 0.0) {
        ds_log_error("workload: flash-sale needs a rate (rate_eps > 0): its window is in seconds "
                     "of the schedule");
        return -DS_EUSAGE;
    }
    uint64_t extra = workload_flash_events(cfg);
    uint64_t orders = workload_orders(cfg);
    uint64_t uniform = orders > extra ? orders - extra : 0;
    double share_after = 1.0 - cfg->flash_start_fraction;
    if (orders <= extra ||
        (double)uniform * share_after < cfg->rate_eps * (double)cfg->flash_seconds) {
        uint64_t uniform_min = workload_flash_uniform_min(cfg);
        unsigned long long events_min = uniform_min > (uint64_t)INT64_MAX - extra
                                            ? (unsigned long long)INT64_MAX
                                            : (unsigned long long)(uniform_min + extra);
        ds_log_error("workload: the flash-sale window (%u s from %.3g of the schedule, %llu extra "
                     "events) does not fit in %llu new orders at %g events/s: it needs at least "
                     "%llu (new orders are the events that are neither updates nor duplicates)",
                     cfg->flash_seconds, cfg->flash_start_fraction, (unsigned long long)extra,
                     (unsigned long long)orders, cfg->rate_eps, events_min);
        return -DS_EUSAGE;
    }
    return 0;
}

/* The schedule and the flash window. Returns 0 or -DS_EUSAGE (logged). */
static int workload_check_schedule(const struct loadgen_workload_config *cfg)
{
    if (!(cfg->rate_eps >= 0.0 && cfg->rate_eps <= (double)LOADGEN_WORKLOAD_RATE_EPS_MAX)) {
        ds_log_error("workload: rate %g events/s is outside 0..%u", cfg->rate_eps,
                     LOADGEN_WORKLOAD_RATE_EPS_MAX);
        return -DS_EUSAGE;
    }
    if (cfg->flash_factor == 0 || cfg->flash_factor > LOADGEN_WORKLOAD_FLASH_FACTOR_MAX) {
        ds_log_error("workload: flash factor %u is outside 1..%u", cfg->flash_factor,
                     LOADGEN_WORKLOAD_FLASH_FACTOR_MAX);
        return -DS_EUSAGE;
    }
    if (cfg->flash_seconds == 0 || cfg->flash_seconds > LOADGEN_WORKLOAD_FLASH_SECONDS_MAX) {
        ds_log_error("workload: flash window of %u s is outside 1..%u s", cfg->flash_seconds,
                     LOADGEN_WORKLOAD_FLASH_SECONDS_MAX);
        return -DS_EUSAGE;
    }
    if (!(cfg->flash_start_fraction >= 0.0 && cfg->flash_start_fraction < 1.0)) {
        ds_log_error("workload: flash start %g is outside [0, 1) of the schedule",
                     cfg->flash_start_fraction);
        return -DS_EUSAGE;
    }
    if (cfg->profile == LOADGEN_PROFILE_FLASH_SALE) {
        return workload_check_flash_fits(cfg);
    }
    return 0;
}

int loadgen_workload_config_check(const struct loadgen_workload_config *cfg)
{
    ASSERT(cfg != NULL);
    int rc = workload_check_shape(cfg);
    if (rc == 0) {
        rc = workload_check_shares(cfg);
    }
    if (rc == 0) {
        rc = workload_check_repeats(cfg);
    }
    if (rc == 0) {
        rc = workload_check_schedule(cfg);
    }
    ASSERT(rc == 0 || rc == -DS_EUSAGE);
    return rc;
}
