/*
 * The deterministic workload generator: synthetic order streams for the demo, the benchmarks
 * and `dayshard produce`.
 *
 * Time: event k of N gets the quantile q = (k + u) / N, u uniform in [0, 1) (stratified
 * sampling), mapped through the piecewise-linear inverse of the profile's time distribution:
 * one segment over all days (uniform, hot-customer) or up to three (busy-day: the days before
 * the busy one, the busy day with busy_fraction of the mass, the days after it), each spread
 * evenly over its 24-hour days at millisecond resolution. Every step is monotone under IEEE
 * rounding and segments cover disjoint, ascending time ranges, so timestamps never decrease
 * and each day's share of events is exact to within one event, without sorting or buffering.
 *
 * flash-sale: the uniform stream as above, over events minus the window's extra ones, merged by
 * send time with the window's extra events. A uniform event of index j is due at j / rate_eps;
 * the window starts at flash_start_fraction of the schedule (the uniform events' count /
 * rate_eps) and its E = (flash_factor - 1) * rate_eps * flash_seconds / days extra events (rounded)
 * are due every flash_seconds / E from there, with timestamps spread in order over the busy day
 * by the same stratified mapping. Ties go to the uniform event, so send times never decrease.
 *
 * Customers: Zipf(zipf_s) over 1..customers by rejection-inversion (W. Hörmann and
 * G. Derflinger, "Rejection-inversion to generate variates from monotone discrete
 * distributions", 1996, as in Apache Commons RNG): O(1) per sample, at most 1.015 attempts on
 * average (measured for s = 0.01..10 and 1..2^62 customers), no tables, any customer count.
 * hot-customer: each order comes from customer 1 with probability hot_fraction, otherwise
 * from Zipf over 2..customers, so the hot share does not depend on zipf_s.
 *
 * Orders, not events: with update_fraction or duplicate_fraction above 0, each line
 * is drawn as a new order, an update or a duplicate by sampling without replacement (line i is
 * a new order with probability remaining new orders / remaining lines; updates weigh less
 * while the first WORKLOAD_RECENT_ORDERS orders arrive, see workload_kind_draw), so the stream
 * has exactly round(events * fraction) updates and duplicates, and the new orders are the stream
 * above, of events minus those (ids 1, 2, ... in ts order, the time machinery over their
 * count). The first line is always a new order. An update takes an order from a ring of the
 * latest WORKLOAD_RECENT_ORDERS new orders, skewed to the newest (age = n u^2: most updates
 * follow their order within a few thousand lines), or, one in ten, from every 16th of the
 * orders before those (the late ones). It moves the status along pending -> paid ->
 * shipped (or cancelled), or changes the amount when the status is final, sometimes both;
 * rarely it moves the day (ts +- 1..3 days, inside the stream's days; never
 * under updates_keep_day) or the customer. Every
 * update changes the order, so a repeat is always a duplicate. With updates, half of the
 * orders carry "version" (1 on the new order, +1 per update); one in twenty of their updates
 * is sent as a reordered pair: version v+2 first, and v+1 (the state in between) at a later
 * update slot, where it is stale. A duplicate repeats one of the last WORKLOAD_RECENT_LINES
 * lines (age n u^3: mostly the line just sent, a producer's retry) and so is the same bytes.
 * Updates and duplicates draw their randomness only when their fractions are above 0, so with
 * them 0 the stream is byte for byte the plain event stream: a seed recorded with a benchmark or
 * a test keeps its stream.
 *
 * Randomness: xoshiro256** seeded through splitmix64 from cfg->seed. The stream is a pure
 * function of the configuration for a given libm; another libm may round exp/log differently
 * in the last bit and so change an occasional customer or amount (timestamps, ids and statuses
 * use only exact arithmetic and IEEE-rounded basic operations).
 *
 * Rejected: drawing independent timestamps and sorting them (needs all N in memory, and the
 * generator feeds benchmarks of 10^8 events); a Zipf table with binary search (O(customers)
 * memory, 8 MB per million customers, and slower than rejection-inversion past cache size);
 * a flash window that takes its events from the other days (thinning them while it lasts): the
 * total rate would not rise, yet a flash sale adds load, and that is what a load test wants to
 * see; and a flash window placed where the uniform stream passes the busy day (keeping the whole
 * stream in ts order): the window would then depend on the month's length, not on the schedule.
 * For stale versions, resending an order's previous line late: it would be the same bytes as
 * that line, so a stale version and a producer's retry could not be told apart in the stream
 * (nor their shares measured); the state in between a reordered pair is a line of its own.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/ingest.h"
#include "loadgen/loadgen.h"
#include "loadgen/workload.h"

/* Rejection-inversion accepts more than 98% of attempts for every s in (0, 10] (measured), so
 * 64 rejections in a row never happen in practice; the bound only keeps the loop finite, after
 * it the last candidate is taken. */
#define WORKLOAD_ZIPF_ATTEMPTS_MAX 64u
/* Amounts: log-uniform-ish (a 4-term Irwin-Hall sum, close to normal) over
 * [ln 1.00, ln 500.00], median about 22.36, in cents. */
#define WORKLOAD_AMOUNT_CENTS_MIN 100
#define WORKLOAD_AMOUNT_CENTS_MAX 50000
#define WORKLOAD_UNITS_PER_CENT (DS_AMOUNT_SCALE / 100)
/* At most three time segments: before the busy day, the busy day, after it. */
#define WORKLOAD_SEGMENTS_MAX 3u
/* Updates pick their order among the latest 4096 new orders (at 30% updates, an order's
 * versions then mostly follow it within a few thousand lines, as in a shop where payment
 * follows the order within minutes), or, WORKLOAD_LATE_UPDATE_PERCENT of the time, among
 * every 16th of the 16384 orders before those (a return much later). Rejected: a reservoir
 * sample of all older orders: the first orders stay in it longest, so the first day's orders
 * took several times their share of the late updates (measured: day 1 with 17% more events). */
#define WORKLOAD_RECENT_ORDERS 4096u
#define WORKLOAD_OLD_ORDERS 1024u
#define WORKLOAD_OLD_STRIDE 16u
#define WORKLOAD_LATE_UPDATE_PERCENT 10u
/* A producer's retry repeats one of the last lines it sent. */
#define WORKLOAD_RECENT_LINES 256u
/* Versioned updates sent as a reordered pair (the later version first), per mille, and how
 * many of the earlier versions can wait for their (stale) turn. */
#define WORKLOAD_STALE_PAIR_PERMILLE 50u
#define WORKLOAD_STALE_WAITING_MAX 16u
/* Per-update chances, percent: an amount change besides a status change, a moved day, a
 * moved customer. */
#define WORKLOAD_AMOUNT_CHANGE_PERCENT 10u
#define WORKLOAD_MOVE_DAY_PERCENT 3u
#define WORKLOAD_MOVE_CUSTOMER_PERCENT 1u
#define WORKLOAD_MOVE_DAYS_MAX 3u

/* A slice [q_begin, q_end) of the quantile range spread evenly over [ms_begin, ms_begin +
 * ms_len). */
struct workload_segment {
    double q_begin;
    double q_end;
    double ms_per_q; /* ms_len / (q_end - q_begin) */
    int64_t ms_begin;
    int64_t ms_len;
};

/* Zipf(exponent) over 1..n by rejection-inversion; fields named as in the paper's H, h. */
struct workload_zipf {
    double exponent;
    double n;
    double h_integral_x1; /* H(1.5) - 1 */
    double h_integral_n;  /* H(n + 0.5) */
    double s;             /* 2 - H^-1(H(2.5) - h(2)): the squeeze of the acceptance test */
};

struct workload_status {
    uint32_t cumulative_percent; /* this status when the draw in [0, 100) is below this */
    const char *name;
};

/* Paid 60%, shipped 20%, pending 12%, cancelled 5%, refunded 3%. */
static const struct workload_status workload_statuses[] = {
    {60, "paid"}, {80, "shipped"}, {92, "pending"}, {97, "cancelled"}, {100, "refunded"},
};
/* Indexes into workload_statuses, for the updates' transitions. */
enum workload_status_index {
    WORKLOAD_PAID = 0,
    WORKLOAD_SHIPPED = 1,
    WORKLOAD_PENDING = 2,
    WORKLOAD_CANCELLED = 3,
    WORKLOAD_REFUNDED = 4,
};

/* The first status of a new order in a stream with updates, as the cumulative percent below
 * which a draw in [0, 100) picks it: pending 50%, paid 30%, shipped 10%, cancelled 6%,
 * refunded 4%, so that most updates are status steps, as in a shop whose orders are placed,
 * then paid, then shipped. */
struct workload_first_status {
    uint32_t cumulative_percent;
    uint8_t status; /* enum workload_status_index */
};
static const struct workload_first_status workload_first_statuses[] = {
    {50, WORKLOAD_PENDING},   {80, WORKLOAD_PAID},      {90, WORKLOAD_SHIPPED},
    {96, WORKLOAD_CANCELLED}, {100, WORKLOAD_REFUNDED},
};

/* Products of generated items; plain ASCII, so a line's length is easy to bound. */
static const char *const workload_products[] = {
    "Pen",    "Notebook", "Stapler", "Ink cartridge", "Desk lamp", "Paper A4 500",
    "Folder", "Marker",   "Eraser",  "Ruler 30 cm",   "Scissors",  "Tape",
};

/* The canonical items of one generated order (common.h): a count byte, then per item a
 * length byte, the product and a one-byte quantity varint. */
#define WORKLOAD_PRODUCT_BYTES_MAX 16u
#define WORKLOAD_ITEMS_BYTES_MAX                                                                   \
    (1u + LOADGEN_WORKLOAD_ITEMS_MAX * (2u + WORKLOAD_PRODUCT_BYTES_MAX))
#define WORKLOAD_QUANTITY_MAX 5u
_Static_assert(WORKLOAD_ITEMS_BYTES_MAX <= DS_ITEMS_BYTES_MAX, "generated items are valid");
_Static_assert(LOADGEN_WORKLOAD_ITEMS_MAX < 0x80u && WORKLOAD_QUANTITY_MAX < 0x80u,
               "the count and a quantity are one varint byte each");

/* One version of an order: enough to write its line again byte for byte. */
struct workload_order {
    uint64_t id;
    uint64_t customer;
    int64_t ts_ms;
    int64_t amount_units;
    uint64_t version;    /* 0: the order carries no version */
    uint64_t items_seed; /* the items are drawn from it (workload_items_format) */
    uint8_t item_count;
    bool has_items;
    bool as_string;
    uint8_t status; /* enum workload_status_index */
};

/* Updates and duplicates: the orders an update can take and the lines a duplicate can repeat
 * (allocated only when their fractions are above 0). */
struct workload_repeats {
    struct workload_order recent[WORKLOAD_RECENT_ORDERS];      /* ring, by new-order index */
    struct workload_order old[WORKLOAD_OLD_ORDERS];            /* ring of every 16th evicted */
    uint64_t old_seen;                                         /* orders kept in old so far */
    struct workload_order lines[WORKLOAD_RECENT_LINES];        /* ring, by line index */
    struct workload_order waiting[WORKLOAD_STALE_WAITING_MAX]; /* stale versions, FIFO */
    size_t waiting_head;
    size_t waiting_count;
};

struct loadgen_workload {
    struct loadgen_workload_config cfg;
    uint64_t rng[4];
    uint64_t emitted;
    uint64_t uniform_events;  /* events of the month's stream: cfg.events - flash_events */
    uint64_t uniform_emitted; /* its next index */
    double events_inverse;    /* 1 / uniform_events */
    int64_t last_ts_ms;       /* of the uniform events */
    double send_time_s;       /* of the event last returned */
    /* flash-sale's window (flash_events is 0 for the other profiles). */
    uint64_t flash_events;
    uint64_t flash_emitted;
    double flash_start_s;
    double flash_step_s;       /* flash_seconds / flash_events */
    double flash_ms_per_event; /* a day's milliseconds / flash_events */
    int64_t flash_day_ms;      /* the busy day's first millisecond */
    int64_t flash_last_ts_ms;
    size_t segment_count;
    struct workload_segment segments[WORKLOAD_SEGMENTS_MAX];
    bool zipf_used;      /* false when every customer is the hot one */
    uint64_t zipf_first; /* the customer id of Zipf rank 1 */
    struct workload_zipf zipf;
    double amount_center; /* ln of the median amount in cents */
    double amount_spread; /* ln-scale per unit of the normalised Irwin-Hall sum */
    /* Orders, not events: line kinds and their state. */
    uint64_t orders;                  /* new orders of the stream */
    uint64_t updates;                 /* update lines of the stream */
    uint64_t duplicates;              /* duplicate lines of the stream */
    struct workload_repeats *repeats; /* NULL when there are neither updates nor duplicates */
    struct workload_order line;       /* the line last returned */
    struct loadgen_workload_stats stats;
    uint8_t items[WORKLOAD_ITEMS_BYTES_MAX]; /* the last event's canonical items */
};

/* ---- randomness ---------------------------------------------------------------------------- */

static uint64_t workload_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t workload_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* xoshiro256** (Blackman and Vigna). */
static uint64_t workload_next_u64(struct loadgen_workload *w)
{
    uint64_t *s = w->rng;
    uint64_t result = workload_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = workload_rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static double workload_next_unit(struct loadgen_workload *w)
{
    return (double)(workload_next_u64(w) >> 11) * 0x1.0p-53;
}

/* Uniform integer in [0, bound) by multiply-shift of 32 random bits (bias below 2^-22 for the
 * bounds used here). */
static uint32_t workload_next_below(struct loadgen_workload *w, uint32_t bound)
{
    uint64_t r = workload_next_u64(w) >> 32;
    return (uint32_t)((r * bound) >> 32);
}

/* ---- Zipf by rejection-inversion ----------------------------------------------------------- */

/* log1p(x) / x, accurate near 0. */
static double zipf_helper1(double x)
{
    if (fabs(x) > 1e-8) {
        return log1p(x) / x;
    }
    return 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}

/* expm1(x) / x, accurate near 0. */
static double zipf_helper2(double x)
{
    if (fabs(x) > 1e-8) {
        return expm1(x) / x;
    }
    return 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x));
}

/* h(x) = x^-s, the (continuous) unnormalised density. */
static double zipf_h(const struct workload_zipf *z, double x)
{
    return exp(-z->exponent * log(x));
}

/* H(x) = (x^(1-s) - 1) / (1 - s), an antiderivative of h (log x when s = 1). */
static double zipf_h_integral(const struct workload_zipf *z, double x)
{
    double log_x = log(x);
    return zipf_helper2((1.0 - z->exponent) * log_x) * log_x;
}

static double zipf_h_integral_inverse(const struct workload_zipf *z, double x)
{
    double t = x * (1.0 - z->exponent);
    if (t < -1.0) {
        /* Only rounding gets here; -1 is the limit of the domain. */
        t = -1.0;
    }
    return exp(zipf_helper1(t) * x);
}

static void zipf_init(struct workload_zipf *z, double exponent, uint64_t n)
{
    ASSERT(exponent > 0.0);
    ASSERT(n >= 1);
    z->exponent = exponent;
    z->n = (double)n;
    z->h_integral_x1 = zipf_h_integral(z, 1.5) - 1.0;
    z->h_integral_n = zipf_h_integral(z, z->n + 0.5);
    z->s = 2.0 - zipf_h_integral_inverse(z, zipf_h_integral(z, 2.5) - zipf_h(z, 2.0));
}

/* A rank in 1..n with probability proportional to rank^-s. */
static uint64_t zipf_sample(const struct workload_zipf *z, struct loadgen_workload *w)
{
    double k = 1.0;
    for (uint32_t attempt = 0; attempt < WORKLOAD_ZIPF_ATTEMPTS_MAX; attempt++) {
        double u = z->h_integral_n + workload_next_unit(w) * (z->h_integral_x1 - z->h_integral_n);
        double x = zipf_h_integral_inverse(z, u);
        k = floor(x + 0.5);
        if (k < 1.0) {
            k = 1.0;
        } else if (k > z->n) {
            k = z->n;
        }
        if (k - x <= z->s || u >= zipf_h_integral(z, k + 0.5) - zipf_h(z, k)) {
            break;
        }
    }
    uint64_t rank = (uint64_t)k;
    ASSERT(rank >= 1 && rank <= (uint64_t)z->n);
    return rank;
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

/* Appends the segment of quantiles [q_begin, q_end) over days [day_begin, day_end), unless it
 * is empty. */
static void workload_segment_add(struct loadgen_workload *w, double q_begin, double q_end,
                                 uint32_t day_begin, uint32_t day_end)
{
    if (!(q_end > q_begin) || day_end <= day_begin) {
        return;
    }
    ASSERT(w->segment_count < WORKLOAD_SEGMENTS_MAX);
    struct workload_segment *segment = &w->segments[w->segment_count++];
    segment->q_begin = q_begin;
    segment->q_end = q_end;
    segment->ms_begin = ((int64_t)w->cfg.first_day + day_begin) * DS_DAY_MS;
    segment->ms_len = (int64_t)(day_end - day_begin) * DS_DAY_MS;
    segment->ms_per_q = (double)segment->ms_len / (q_end - q_begin);
}

static void workload_segments_init(struct loadgen_workload *w)
{
    const struct loadgen_workload_config *cfg = &w->cfg;
    if (cfg->profile != LOADGEN_PROFILE_BUSY_DAY || cfg->days == 1) {
        workload_segment_add(w, 0.0, 1.0, 0, cfg->days);
        return;
    }
    uint32_t busy = cfg->busy_day_index;
    double other_day_share = (1.0 - cfg->busy_fraction) / (double)(cfg->days - 1);
    double busy_begin = other_day_share * (double)busy;
    double busy_end = busy_begin + cfg->busy_fraction;
    workload_segment_add(w, 0.0, busy_begin, 0, busy);
    workload_segment_add(w, busy_begin, busy_end, busy, busy + 1);
    workload_segment_add(w, busy_end, 1.0, busy + 1, cfg->days);
    ASSERT(w->segment_count >= 1);
    /* The last segment takes whatever rounding left above its end. */
    w->segments[w->segment_count - 1].q_end = 1.0;
}

/* flash-sale: where the window starts and how its events are spaced in time and over the day. */
static void workload_flash_init(struct loadgen_workload *w)
{
    const struct loadgen_workload_config *cfg = &w->cfg;
    ASSERT(cfg->rate_eps > 0.0);
    ASSERT(w->flash_events > 0);
    double schedule_s = (double)w->uniform_events / cfg->rate_eps;
    w->flash_start_s = cfg->flash_start_fraction * schedule_s;
    w->flash_step_s = (double)cfg->flash_seconds / (double)w->flash_events;
    w->flash_ms_per_event = (double)DS_DAY_MS / (double)w->flash_events;
    w->flash_day_ms = ((int64_t)cfg->first_day + cfg->busy_day_index) * DS_DAY_MS;
    /* The check made the window end inside the schedule. */
    ASSERT(w->flash_start_s + (double)cfg->flash_seconds <= schedule_s * (1.0 + 1e-9));
}

int loadgen_workload_create(const struct loadgen_workload_config *cfg,
                            struct loadgen_workload **out)
{
    ASSERT(cfg != NULL);
    ASSERT(out != NULL);
    int rc = loadgen_workload_config_check(cfg);
    if (rc != 0) {
        return rc;
    }
    struct loadgen_workload *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        return -ENOMEM;
    }
    w->cfg = *cfg;
    workload_repeat_counts(cfg, &w->updates, &w->duplicates);
    w->orders = cfg->events - w->updates - w->duplicates;
    if (w->updates > 0 || w->duplicates > 0) {
        w->repeats = calloc(1, sizeof(*w->repeats));
        if (w->repeats == NULL) {
            free(w);
            return -ENOMEM;
        }
    }
    uint64_t seed_state = cfg->seed;
    for (size_t i = 0; i < DS_ARRAY_LEN(w->rng); i++) {
        w->rng[i] = workload_splitmix64(&seed_state);
    }
    w->flash_events = workload_flash_events(cfg);
    ASSERT(w->flash_events <= w->orders);
    w->uniform_events = w->orders - w->flash_events;
    w->events_inverse = w->uniform_events > 0 ? 1.0 / (double)w->uniform_events : 0.0;
    w->last_ts_ms = INT64_MIN;
    w->flash_last_ts_ms = INT64_MIN;
    workload_segments_init(w);
    if (w->flash_events > 0) {
        workload_flash_init(w);
    }
    /* hot-customer: customer 1 is reserved for the hot share, the rest are Zipf from 2 on. */
    w->zipf_first = cfg->profile == LOADGEN_PROFILE_HOT_CUSTOMER ? 2 : 1;
    w->zipf_used = cfg->customers >= w->zipf_first;
    if (w->zipf_used) {
        zipf_init(&w->zipf, cfg->zipf_s, cfg->customers - w->zipf_first + 1);
    }
    double log_max = log((double)WORKLOAD_AMOUNT_CENTS_MAX / WORKLOAD_AMOUNT_CENTS_MIN);
    w->amount_center = log((double)WORKLOAD_AMOUNT_CENTS_MIN) + log_max / 2.0;
    /* The normalised sum spans [-2 sqrt 3, 2 sqrt 3]; map that onto the log range. */
    w->amount_spread = log_max / (4.0 * sqrt(3.0));
    *out = w;
    return 0;
}

void loadgen_workload_destroy(struct loadgen_workload *w)
{
    if (w != NULL) {
        free(w->repeats);
    }
    free(w);
}

/* ---- events -------------------------------------------------------------------------------- */

/* The timestamp of uniform event number index (0-based); non-decreasing in index. */
static int64_t workload_ts_ms(struct loadgen_workload *w, uint64_t index)
{
    double q = ((double)index + workload_next_unit(w)) * w->events_inverse;
    const struct workload_segment *segment = &w->segments[0];
    for (size_t i = 0; i + 1 < w->segment_count && q >= segment->q_end; i++) {
        segment = &w->segments[i + 1];
    }
    double offset = floor((q - segment->q_begin) * segment->ms_per_q);
    int64_t offset_ms = 0;
    if (offset >= (double)segment->ms_len) {
        offset_ms = segment->ms_len - 1;
    } else if (offset > 0.0) {
        offset_ms = (int64_t)offset;
    }
    return segment->ms_begin + offset_ms;
}

/* The timestamp of the window's event number index (0-based): spread evenly over the busy day,
 * stratified as workload_ts_ms; non-decreasing in index. */
static int64_t workload_flash_ts_ms(struct loadgen_workload *w, uint64_t index)
{
    double offset = floor(((double)index + workload_next_unit(w)) * w->flash_ms_per_event);
    int64_t offset_ms = 0;
    if (offset >= (double)DS_DAY_MS) {
        offset_ms = DS_DAY_MS - 1;
    } else if (offset > 0.0) {
        offset_ms = (int64_t)offset;
    }
    return w->flash_day_ms + offset_ms;
}

/* True when the window's next event is due before the next uniform one (a tie goes to the
 * uniform event); false for the other profiles. */
static bool workload_flash_turn(const struct loadgen_workload *w)
{
    if (w->flash_emitted >= w->flash_events) {
        return false;
    }
    if (w->uniform_emitted >= w->uniform_events) {
        return true;
    }
    double flash_due_s = w->flash_start_s + (double)w->flash_emitted * w->flash_step_s;
    return flash_due_s < (double)w->uniform_emitted / w->cfg.rate_eps;
}

/* Sets the timestamp and the send time of the next event, from the window or the uniform
 * stream, whichever is due first. */
static void workload_time_next(struct loadgen_workload *w, struct ds_event *event)
{
    if (workload_flash_turn(w)) {
        uint64_t index = w->flash_emitted++;
        event->ts_ms = workload_flash_ts_ms(w, index);
        ASSERT(event->ts_ms >= w->flash_last_ts_ms);
        w->flash_last_ts_ms = event->ts_ms;
        w->send_time_s = w->flash_start_s + (double)index * w->flash_step_s;
        return;
    }
    uint64_t index = w->uniform_emitted++;
    ASSERT(index < w->uniform_events);
    event->ts_ms = workload_ts_ms(w, index);
    ASSERT(event->ts_ms >= w->last_ts_ms);
    w->last_ts_ms = event->ts_ms;
    w->send_time_s = w->cfg.rate_eps > 0.0 ? (double)index / w->cfg.rate_eps : 0.0;
}

static uint64_t workload_customer(struct loadgen_workload *w)
{
    if (w->cfg.profile == LOADGEN_PROFILE_HOT_CUSTOMER &&
        (!w->zipf_used || workload_next_unit(w) < w->cfg.hot_fraction)) {
        return 1;
    }
    return w->zipf_first - 1 + zipf_sample(&w->zipf, w);
}

/* Amount units: whole cents between 1.00 and 500.00, log-normal-ish. */
static int64_t workload_amount_units(struct loadgen_workload *w)
{
    uint64_t bits = workload_next_u64(w);
    double sum = 0.0;
    for (int i = 0; i < 4; i++) {
        sum += ((double)((bits >> (16 * i)) & 0xFFFFu) + 0.5) * 0x1.0p-16;
    }
    double normal = (sum - 2.0) * sqrt(3.0);
    double cents = floor(exp(w->amount_center + w->amount_spread * normal) + 0.5);
    int64_t whole = (int64_t)cents;
    if (whole < WORKLOAD_AMOUNT_CENTS_MIN) {
        whole = WORKLOAD_AMOUNT_CENTS_MIN;
    } else if (whole > WORKLOAD_AMOUNT_CENTS_MAX) {
        whole = WORKLOAD_AMOUNT_CENTS_MAX;
    }
    return whole * WORKLOAD_UNITS_PER_CENT;
}

/* Sets id to the integer value, or to the string prefix + decimal value. */
static void workload_id_set(struct ds_id *id, uint64_t value, bool as_string, const char *prefix)
{
    ASSERT(value >= 1 && value <= (uint64_t)INT64_MAX);
    if (!as_string) {
        id->value = (int64_t)value;
        return;
    }
    size_t len = strlen(prefix);
    memcpy(id->text, prefix, len);
    char digits[20];
    size_t count = 0;
    do {
        digits[count++] = (char)('0' + value % 10u);
        value /= 10u;
    } while (value > 0);
    ASSERT(len + count <= DS_ID_BYTES_MAX);
    while (count > 0) {
        id->text[len++] = digits[--count];
    }
    id->is_string = true;
    id->len = (uint8_t)len;
}

/* A status drawn from the distribution of workload_statuses (with updates: of
 * workload_first_statuses, by the same one draw): its index. */
static uint8_t workload_status_draw(struct loadgen_workload *w)
{
    uint32_t draw = workload_next_below(w, 100);
    if (w->updates > 0) {
        size_t k = 0;
        while (draw >= workload_first_statuses[k].cumulative_percent) {
            k++;
        }
        ASSERT(k < DS_ARRAY_LEN(workload_first_statuses));
        return workload_first_statuses[k].status;
    }
    size_t i = 0;
    while (draw >= workload_statuses[i].cumulative_percent) {
        i++;
    }
    ASSERT(i < DS_ARRAY_LEN(workload_statuses));
    return (uint8_t)i;
}

static void workload_status_copy(struct ds_event *event, uint8_t status)
{
    ASSERT(status < DS_ARRAY_LEN(workload_statuses));
    size_t len = strlen(workload_statuses[status].name);
    ASSERT(len <= DS_STATUS_BYTES_MAX);
    memcpy(event->status, workload_statuses[status].name, len);
    event->status_len = (uint8_t)len;
}

/* Zeroes the whole event, unused id and status bytes included, so that equal streams are equal
 * byte for byte. Three member-sized memsets compile to vector stores; one memset of the whole
 * 216-byte struct becomes `rep stos`, measured at 13% of the generator's time. */
_Static_assert(offsetof(struct ds_event, order_id) == 0, "workload_event_clear covers the event");
_Static_assert(offsetof(struct ds_event, customer_id) == sizeof(struct ds_id),
               "workload_event_clear covers the event");
_Static_assert(offsetof(struct ds_event, ts_ms) == 2 * sizeof(struct ds_id),
               "workload_event_clear covers the event");
static void workload_event_clear(struct ds_event *event)
{
    memset(&event->order_id, 0, sizeof(event->order_id));
    memset(&event->customer_id, 0, sizeof(event->customer_id));
    memset(&event->ts_ms, 0, sizeof(*event) - offsetof(struct ds_event, ts_ms));
}

/* The event of one version of an order, its version included, its items not (the caller
 * points event->items at them when it wants them). */
static void workload_event_from_order(const struct workload_order *order, struct ds_event *event)
{
    workload_event_clear(event);
    event->ts_ms = order->ts_ms;
    workload_id_set(&event->order_id, order->id, order->as_string, "ord-");
    workload_id_set(&event->customer_id, order->customer, order->as_string, "cust-");
    event->amount_units = order->amount_units;
    workload_status_copy(event, order->status);
    event->has_version = order->version > 0;
    event->version = (int64_t)order->version;
}

/* Item number i of an order, drawn from the stream state (seeded with the order's items_seed):
 * the items are a pure function of the seed and the count. */
static void workload_item_draw(uint64_t *state, const char **product, unsigned *quantity)
{
    uint64_t draw = workload_splitmix64(state);
    *product = workload_products[draw % DS_ARRAY_LEN(workload_products)];
    *quantity = (unsigned)(1u + (draw >> 32) % WORKLOAD_QUANTITY_MAX);
    ASSERT(strlen(*product) <= WORKLOAD_PRODUCT_BYTES_MAX);
}

/* Sets the version and the items of the event of w->line (the items in w->items, valid until
 * the next event). */
static void workload_event_extras(struct loadgen_workload *w, struct ds_event *event)
{
    event->has_version = w->line.version > 0;
    event->version = (int64_t)w->line.version;
    if (!w->line.has_items) {
        return;
    }
    uint64_t state = w->line.items_seed;
    size_t n = 0;
    w->items[n++] = w->line.item_count;
    for (uint8_t i = 0; i < w->line.item_count; i++) {
        const char *product = NULL;
        unsigned quantity = 0;
        workload_item_draw(&state, &product, &quantity);
        size_t len = strlen(product);
        w->items[n++] = (uint8_t)len;
        memcpy(&w->items[n], product, len);
        n += len;
        w->items[n++] = (uint8_t)quantity;
    }
    ASSERT(n <= sizeof(w->items));
    event->items = w->items;
    event->items_bytes = (uint16_t)n;
}

/* Where a new order gets its version and items: drawn only when the stream has updates (a
 * version) or items, so that without them the random sequence is the one of old. */
static void workload_order_extras(struct loadgen_workload *w, struct workload_order *order)
{
    if (w->updates > 0 && workload_next_below(w, 2) == 0) {
        order->version = 1;
    }
    if (w->cfg.items_fraction > 0.0 && workload_next_unit(w) < w->cfg.items_fraction) {
        order->has_items = true;
        order->item_count = (uint8_t)workload_next_below(w, LOADGEN_WORKLOAD_ITEMS_MAX + 1);
        order->items_seed = workload_next_u64(w);
    }
}

/* A new order: its time, ids, amount and status as the stream always drew them. */
static void workload_new_order(struct loadgen_workload *w, struct ds_event *event)
{
    workload_event_clear(event);
    uint64_t index = w->stats.orders++;
    double send_time_before_s = w->send_time_s;
    workload_time_next(w, event);
    ASSERT(w->send_time_s >= send_time_before_s);
    ASSERT(w->uniform_emitted + w->flash_emitted == w->stats.orders);
    bool as_string = w->cfg.string_id_permille > 0 &&
                     workload_next_below(w, WORKLOAD_PERMILLE) < w->cfg.string_id_permille;
    uint64_t customer = workload_customer(w);
    workload_id_set(&event->order_id, index + 1, as_string, "ord-");
    workload_id_set(&event->customer_id, customer, as_string, "cust-");
    event->amount_units = workload_amount_units(w);
    uint8_t status = workload_status_draw(w);
    workload_status_copy(event, status);
    w->line = (struct workload_order){.id = index + 1,
                                      .customer = customer,
                                      .ts_ms = event->ts_ms,
                                      .amount_units = event->amount_units,
                                      .as_string = as_string,
                                      .status = status};
    workload_order_extras(w, &w->line);
}

/* Moves ts by 1..WORKLOAD_MOVE_DAYS_MAX days either way, staying inside the stream's days
 * (unchanged when it has one day, or under updates_keep_day, which still draws the move so that
 * every later draw is the same). */
static void workload_move_day(struct loadgen_workload *w, struct workload_order *order)
{
    int64_t first_ms = (int64_t)w->cfg.first_day * DS_DAY_MS;
    int64_t end_ms = first_ms + (int64_t)w->cfg.days * DS_DAY_MS;
    int64_t shift_ms = (int64_t)(1 + workload_next_below(w, WORKLOAD_MOVE_DAYS_MAX)) * DS_DAY_MS;
    if (workload_next_below(w, 2) == 0) {
        shift_ms = -shift_ms;
    }
    if (order->ts_ms + shift_ms < first_ms || order->ts_ms + shift_ms >= end_ms) {
        shift_ms = -shift_ms;
    }
    if (w->cfg.updates_keep_day) {
        return;
    }
    if (order->ts_ms + shift_ms >= first_ms && order->ts_ms + shift_ms < end_ms) {
        order->ts_ms += shift_ms;
    }
}

/* The next version of an order: a status step (pending -> paid or cancelled, paid -> shipped
 * or cancelled), else (a final status) a new amount; sometimes both; rarely a moved day or
 * customer. The version goes up by one on a versioned order. */
static void workload_order_step(struct loadgen_workload *w, struct workload_order *order)
{
    bool amount_changes = false;
    uint32_t draw = workload_next_below(w, 100);
    if (order->status == WORKLOAD_PENDING) {
        order->status = draw < 85 ? WORKLOAD_PAID : WORKLOAD_CANCELLED;
    } else if (order->status == WORKLOAD_PAID) {
        order->status = draw < 90 ? WORKLOAD_SHIPPED : WORKLOAD_CANCELLED;
    } else {
        amount_changes = true;
    }
    if (amount_changes || workload_next_below(w, 100) < WORKLOAD_AMOUNT_CHANGE_PERCENT) {
        int64_t before = order->amount_units;
        order->amount_units = workload_amount_units(w);
        if (order->amount_units == before) {
            /* An update always changes the order: a repeat is a duplicate's business. */
            order->amount_units += WORKLOAD_UNITS_PER_CENT;
        }
        if (order->has_items) {
            order->items_seed = workload_next_u64(w);
        }
    }
    if (workload_next_below(w, 100) < WORKLOAD_MOVE_DAY_PERCENT) {
        workload_move_day(w, order);
    }
    if (workload_next_below(w, 100) < WORKLOAD_MOVE_CUSTOMER_PERCENT) {
        order->customer = workload_customer(w);
    }
    if (order->version > 0) {
        order->version++;
    }
}

/* The order an update takes: mostly a recent one (the newest most often), sometimes an old
 * one from the reservoir. Never NULL once a new order was sent. */
static struct workload_order *workload_update_target(struct loadgen_workload *w)
{
    struct workload_repeats *r = w->repeats;
    uint64_t old_count = r->old_seen < WORKLOAD_OLD_ORDERS ? r->old_seen : WORKLOAD_OLD_ORDERS;
    if (old_count > 0 && workload_next_below(w, 100) < WORKLOAD_LATE_UPDATE_PERCENT) {
        return &r->old[workload_next_below(w, (uint32_t)old_count)];
    }
    uint64_t recent =
        w->stats.orders < WORKLOAD_RECENT_ORDERS ? w->stats.orders : WORKLOAD_RECENT_ORDERS;
    ASSERT(recent > 0);
    double u = workload_next_unit(w);
    uint64_t age = (uint64_t)((double)recent * u * u);
    ASSERT(age < recent);
    return &r->recent[(w->stats.orders - 1 - age) % WORKLOAD_RECENT_ORDERS];
}

/* An update line into w->line: a stale version waiting for its turn, or the next version of
 * an earlier order (for one in twenty versioned ones, the version after it, the one in
 * between left waiting). */
static void workload_update(struct loadgen_workload *w)
{
    struct workload_repeats *r = w->repeats;
    w->stats.updates++;
    if (r->waiting_count > 0) {
        w->line = r->waiting[r->waiting_head];
        r->waiting_head = (r->waiting_head + 1) % WORKLOAD_STALE_WAITING_MAX;
        r->waiting_count--;
        w->stats.stale++;
        return;
    }
    struct workload_order *order = workload_update_target(w);
    workload_order_step(w, order);
    if (order->version > 0 && r->waiting_count < WORKLOAD_STALE_WAITING_MAX &&
        workload_next_below(w, WORKLOAD_PERMILLE) < WORKLOAD_STALE_PAIR_PERMILLE) {
        size_t tail = (r->waiting_head + r->waiting_count) % WORKLOAD_STALE_WAITING_MAX;
        r->waiting[tail] = *order;
        r->waiting_count++;
        workload_order_step(w, order);
    }
    w->line = *order;
}

/* Remembers w->line (a new order also as an order updates can take; every 16th order it
 * pushes out of the ring moves to the ring of old ones). */
static void workload_remember(struct loadgen_workload *w, bool new_order)
{
    struct workload_repeats *r = w->repeats;
    uint64_t line_index = w->emitted - 1;
    r->lines[line_index % WORKLOAD_RECENT_LINES] = w->line;
    if (!new_order) {
        return;
    }
    uint64_t order_index = w->stats.orders - 1;
    struct workload_order *slot = &r->recent[order_index % WORKLOAD_RECENT_ORDERS];
    if (order_index >= WORKLOAD_RECENT_ORDERS && order_index % WORKLOAD_OLD_STRIDE == 0) {
        r->old[r->old_seen++ % WORKLOAD_OLD_ORDERS] = *slot;
    }
    *slot = w->line;
}

/* The kinds of line. */
enum workload_kind { WORKLOAD_NEW_ORDER, WORKLOAD_UPDATE, WORKLOAD_DUPLICATE };

/* What the next line is: sampling without replacement (weights the lines of each kind still
 * to come), so the stream holds exactly w->orders new orders, w->updates updates and
 * w->duplicates duplicates. Updates weigh less while the ring of recent orders fills (by the
 * share it holds): else the first few thousand orders, being all there is to update, would
 * take several updates each; the updates held back then come a little more often later. */
static enum workload_kind workload_kind_draw(struct loadgen_workload *w)
{
    uint64_t orders_left = w->orders - w->stats.orders;
    uint64_t updates_left = w->updates - w->stats.updates;
    uint64_t duplicates_left = w->duplicates - w->stats.duplicates;
    ASSERT(orders_left + updates_left + duplicates_left == w->cfg.events - w->emitted);
    if (w->emitted == 0) {
        ASSERT(orders_left > 0);
        return WORKLOAD_NEW_ORDER;
    }
    double ramp = w->stats.orders < WORKLOAD_RECENT_ORDERS
                      ? (double)w->stats.orders / WORKLOAD_RECENT_ORDERS
                      : 1.0;
    double update_weight = (double)updates_left * ramp;
    double draw =
        workload_next_unit(w) * ((double)orders_left + update_weight + (double)duplicates_left);
    enum workload_kind kind = draw < (double)orders_left                   ? WORKLOAD_NEW_ORDER
                              : draw < (double)orders_left + update_weight ? WORKLOAD_UPDATE
                                                                           : WORKLOAD_DUPLICATE;
    /* Rounding can pick a kind with no lines left; take the next one that has some. */
    if (kind == WORKLOAD_DUPLICATE && duplicates_left == 0) {
        kind = WORKLOAD_UPDATE;
    }
    if (kind == WORKLOAD_UPDATE && updates_left == 0) {
        kind = duplicates_left > 0 ? WORKLOAD_DUPLICATE : WORKLOAD_NEW_ORDER;
    }
    if (kind == WORKLOAD_NEW_ORDER && orders_left == 0) {
        kind = updates_left > 0 ? WORKLOAD_UPDATE : WORKLOAD_DUPLICATE;
    }
    return kind;
}

/* A duplicate into w->line: one of the last lines, the newest most often (age n u^3). */
static void workload_duplicate(struct loadgen_workload *w)
{
    ASSERT(w->emitted >= 2);
    uint64_t earlier = w->emitted - 1; /* lines before this one */
    uint64_t recent = earlier < WORKLOAD_RECENT_LINES ? earlier : WORKLOAD_RECENT_LINES;
    double u = workload_next_unit(w);
    uint64_t age = (uint64_t)((double)recent * u * u * u);
    ASSERT(age < recent);
    w->line = w->repeats->lines[(earlier - 1 - age) % WORKLOAD_RECENT_LINES];
    w->stats.duplicates++;
}

/* The next line of a stream with updates or duplicates. */
static void workload_repeat_line(struct loadgen_workload *w, struct ds_event *event)
{
    enum workload_kind kind = workload_kind_draw(w);
    w->emitted++;
    if (kind == WORKLOAD_NEW_ORDER) {
        workload_new_order(w, event);
        workload_remember(w, true);
        return;
    }
    if (kind == WORKLOAD_UPDATE) {
        workload_update(w);
    } else {
        workload_duplicate(w);
    }
    workload_event_from_order(&w->line, event);
    workload_remember(w, false);
}

bool loadgen_workload_next(struct loadgen_workload *w, struct ds_event *event)
{
    ASSERT(w != NULL);
    ASSERT(event != NULL);
    if (w->emitted >= w->cfg.events) {
        return false;
    }
    if (w->repeats != NULL) {
        workload_repeat_line(w, event);
    } else {
        w->emitted++;
        workload_new_order(w, event);
    }
    workload_event_extras(w, event);
    w->stats.versioned += w->line.version > 0;
    w->stats.with_items += w->line.has_items;
    ASSERT(w->stats.orders + w->stats.updates + w->stats.duplicates == w->emitted);
    return true;
}

/* Appends ,"items":[...] of an order to dst[0..len) (len < capacity); returns the new length
 * or -ENOSPC. The items are a pure function of the order's seed and count. */
static int workload_items_format(const struct workload_order *order, char *dst, size_t len,
                                 size_t capacity)
{
    ASSERT(len < capacity);
    ASSERT(order->item_count <= LOADGEN_WORKLOAD_ITEMS_MAX);
    uint64_t state = order->items_seed;
    int written = snprintf(dst + len, capacity - len, ",\"items\":[");
    for (uint8_t i = 0; i < order->item_count; i++) {
        if (written < 0 || (size_t)written >= capacity - len) {
            return -ENOSPC;
        }
        len += (size_t)written;
        const char *product = NULL;
        unsigned quantity = 0;
        workload_item_draw(&state, &product, &quantity);
        written = snprintf(dst + len, capacity - len, "%s{\"product\":\"%s\",\"quantity\":%u}",
                           i > 0 ? "," : "", product, quantity);
    }
    if (written < 0 || (size_t)written + 1 >= capacity - len) {
        return -ENOSPC;
    }
    len += (size_t)written;
    dst[len++] = ']';
    return (int)len;
}

int loadgen_workload_line(const struct loadgen_workload *w, char *dst, size_t dst_capacity)
{
    ASSERT(w != NULL);
    ASSERT(w->emitted > 0);
    struct ds_event event;
    workload_event_from_order(&w->line, &event);
    if (!w->line.has_items) {
        return ingest_event_format_json(&event, dst, dst_capacity);
    }
    /* Built aside, so that dst stays untouched when it is too small. */
    char text[LOADGEN_WORKLOAD_LINE_BYTES_MAX];
    int n = ingest_event_format_json(&event, text, sizeof(text));
    ASSERT(n > 0 && text[n - 1] == '}');
    /* The items go before the closing brace, after the version the line may end with. */
    int rc = workload_items_format(&w->line, text, (size_t)n - 1, sizeof(text));
    ASSERT(rc > 0 && (size_t)rc < sizeof(text));
    size_t len = (size_t)rc;
    text[len++] = '}';
    if (len > dst_capacity) {
        return -ENOSPC;
    }
    memcpy(dst, text, len);
    return (int)len;
}

void loadgen_workload_stats(const struct loadgen_workload *w, struct loadgen_workload_stats *out)
{
    ASSERT(w != NULL);
    ASSERT(out != NULL);
    *out = w->stats;
}

double loadgen_workload_send_time(const struct loadgen_workload *w)
{
    ASSERT(w != NULL);
    ASSERT(w->emitted > 0);
    return w->send_time_s;
}

int loadgen_workload_write(const struct loadgen_workload_config *cfg, FILE *out, uint64_t *bytes)
{
    ASSERT(cfg != NULL);
    ASSERT(out != NULL);
    struct loadgen_workload *w = NULL;
    int rc = loadgen_workload_create(cfg, &w);
    if (rc != 0) {
        return rc;
    }
    struct ds_event event;
    char line[LOADGEN_WORKLOAD_LINE_BYTES_MAX + 1];
    while (rc == 0 && loadgen_workload_next(w, &event)) {
        int n = loadgen_workload_line(w, line, sizeof(line) - 1);
        ASSERT(n > 0);
        line[n] = '\n';
        if (fwrite(line, 1, (size_t)n + 1, out) != (size_t)n + 1) {
            rc = errno != 0 ? -errno : -EIO;
        } else if (bytes != NULL) {
            *bytes += (uint64_t)n + 1;
        }
    }
    loadgen_workload_destroy(w);
    return rc;
}
