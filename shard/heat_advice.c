/*
 * The advice rule (shard.h, "advice"): from a heat report, the hot spots that more shards
 * cannot relieve, each with its evidence and remedy.
 *
 * Invariants: the rule is a pure function of the report and the previous advice (the node
 * keeps the state, this file keeps none); at most SHARD_ADVICE_MAX rows; a Kafka partition is
 * advised once (as a hot customer when one customer explains its excess, else as a skew) and a
 * customer explains at most one partition; a day is advised only while adaptive growth runs and
 * the day already has --max-shards shards (below that, growth is the remedy and it is taken).
 *
 * Shares are of the node's own writes and fair is 1 / the Kafka partitions the node reads: a
 * node sees only its partitions, and partitions without writes are not in the report, so the
 * count comes from the consumer's assignment, not from the rows.
 *
 * Rejected: judging by the last second (the heat's rate_now): the producer's batching makes one
 * second of one partition swing by tens of percent, and advice that appears and vanishes every
 * few seconds is noise a person learns to ignore. The heat window and a lower bar to leave
 * cost a slower start (a skew must dominate the window) for advice that means something.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "shard/shard.h"

const char *shard_advice_case_name(enum shard_advice_case kind)
{
    switch (kind) {
    case SHARD_ADVICE_KAFKA_PARTITION_SKEW: return "kafka_partition_skew";
    case SHARD_ADVICE_HOT_CUSTOMER: return "hot_customer";
    case SHARD_ADVICE_DAY_AT_MAX_SHARDS: return "day_at_max_shards";
    }
    ASSERT(false); /* every case has a name */
    return "";
}

static void advice_text(char *dst, size_t dst_capacity, const char *fmt, ...) DS_PRINTF(3, 4);

/* A text of a row; one longer than the row's field is cut (a long string customer id and
 * large numbers can pass it; the start says what matters). */
static void advice_text(char *dst, size_t dst_capacity, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(dst, dst_capacity, fmt, args);
    va_end(args);
    ASSERT(n >= 0);
}

struct advice_list {
    const struct shard_advice *previous;
    uint32_t previous_count;
    struct shard_advice *rows;
    uint32_t count;
    uint32_t max;
};

/* Whether the previous advice held this partition (as a skew or a hot customer's). */
static bool advice_had_partition(const struct advice_list *l, int32_t partition)
{
    for (uint32_t i = 0; i < l->previous_count; i++) {
        if (l->previous[i].kind != SHARD_ADVICE_DAY_AT_MAX_SHARDS &&
            l->previous[i].partition == partition) {
            return true;
        }
    }
    return false;
}

static bool advice_had_customer(const struct advice_list *l, const struct ds_id *customer)
{
    for (uint32_t i = 0; i < l->previous_count; i++) {
        if (l->previous[i].kind == SHARD_ADVICE_HOT_CUSTOMER &&
            ds_id_equal(&l->previous[i].customer, customer)) {
            return true;
        }
    }
    return false;
}

static bool advice_had_day(const struct advice_list *l, int32_t day)
{
    for (uint32_t i = 0; i < l->previous_count; i++) {
        if (l->previous[i].kind == SHARD_ADVICE_DAY_AT_MAX_SHARDS && l->previous[i].day == day) {
            return true;
        }
    }
    return false;
}

static bool advice_customer_used(const struct advice_list *l, const struct ds_id *customer)
{
    for (uint32_t i = 0; i < l->count; i++) {
        if (l->rows[i].kind == SHARD_ADVICE_HOT_CUSTOMER &&
            ds_id_equal(&l->rows[i].customer, customer)) {
            return true;
        }
    }
    return false;
}

/* A new row (NULL when the list is full), with no partition, day or customer yet. */
static struct shard_advice *advice_add(struct advice_list *l, enum shard_advice_case kind)
{
    if (l->count == l->max) {
        return NULL;
    }
    struct shard_advice *a = &l->rows[l->count++];
    memset(a, 0, sizeof(*a));
    a->kind = kind;
    a->partition = -1;
    a->day = -1;
    return a;
}

/* "customer 42" or "customer abc" (a string id's bytes as they are, cut to fit). */
static void advice_customer_subject(const struct ds_id *id, char *dst, size_t dst_capacity)
{
    if (!id->is_string) {
        advice_text(dst, dst_capacity, "customer %" PRId64, id->value);
    } else {
        advice_text(dst, dst_capacity, "customer %.*s", (int)id->len, id->text);
    }
}

/* The day with the most events in the window, and its share of total (-1: no day). */
static int32_t advice_busiest_day(const struct shard_heat_snapshot *s, uint64_t total,
                                  double *share_out)
{
    int32_t day = -1;
    uint64_t most = 0;
    for (uint32_t i = 0; i < s->day_count; i++) {
        if (s->days[i].window_events > most) {
            most = s->days[i].window_events;
            day = s->days[i].day;
        }
    }
    *share_out = (double)most / (double)total;
    return day;
}

/* The top customer not yet advised, when its share of all writes explains `excess` (the
 * partition's share past fair) and is larger than the busiest day's share (a day keyed to one
 * partition explains it as well, and a customer that writes on every day, as a Zipf head does,
 * is spread over the partitions then); NULL otherwise. Customers come highest first, so the
 * first one not yet used is the only one that can. */
static const struct shard_heat_customer_row *
advice_explaining_customer(const struct advice_list *l, const struct shard_heat_snapshot *s,
                           double excess, double day_share, double *share_out)
{
    for (uint32_t i = 0; i < s->customer_count; i++) {
        const struct shard_heat_customer_row *c = &s->customers[i];
        if (advice_customer_used(l, &c->customer)) {
            continue;
        }
        double share = s->customer_rate_eps > 0 ? c->rate_eps / s->customer_rate_eps : 0.0;
        share = share > 1.0 ? 1.0 : share;
        double bar = advice_had_customer(l, &c->customer) ? SHARD_ADVICE_CUSTOMER_KEEP
                                                          : SHARD_ADVICE_CUSTOMER_EXPLAINS;
        *share_out = share;
        return share > 0 && share >= bar * excess && share > day_share ? c : NULL;
    }
    return NULL;
}

struct advice_skew {
    const struct shard_heat_source_row *source;
    double share; /* of the node's writes in the window */
    double fair;
    uint32_t partitions;
    int32_t day; /* the busiest day, -1: none */
    double day_share;
};

/* The texts of a skew; when the busiest day explains the excess as well, the evidence names
 * it (producers keying by day put a whole day in one partition). */
static void advice_skew_text(struct shard_advice *a, const struct advice_skew *k)
{
    char day_clause[96] = "";
    if (k->day >= 0 && k->day_share >= SHARD_ADVICE_CUSTOMER_EXPLAINS * (k->share - k->fair)) {
        char day[DS_DATE_TEXT_SIZE];
        ds_date_format(k->day, day);
        advice_text(day_clause, sizeof(day_clause),
                    "; the busiest day, %s, took %.0f%% (keyed by day, a day is one partition)",
                    day, 100.0 * k->day_share);
    }
    advice_text(a->subject, sizeof(a->subject), "partition %d", k->source->partition);
    advice_text(a->evidence, sizeof(a->evidence),
                "Kafka partition %d took %.0f%% of this node's writes over the last %u s "
                "(%" PRIu64 " events; fair share %.1f%% of %u partitions)%s: one consumer reads a "
                "Kafka partition, whatever the day's shard count",
                k->source->partition, 100.0 * k->share, SHARD_HEAT_WINDOW_S,
                k->source->window_events, 100.0 * k->fair, k->partitions, day_clause);
    advice_text(a->remedy, sizeof(a->remedy),
                "key messages by order_id (dayshard produce --key order) so the topic spreads "
                "them over its partitions; more shards cannot help");
}

/* Advice for one skewed Kafka partition: a hot customer when one explains it, else the skew. */
static void advice_partition(struct advice_list *l, const struct shard_heat_snapshot *s,
                             const struct shard_heat_source_row *source, uint64_t total,
                             uint32_t partitions)
{
    struct advice_skew k = {.source = source,
                            .share = (double)source->window_events / (double)total,
                            .fair = 1.0 / partitions,
                            .partitions = partitions};
    k.day = advice_busiest_day(s, total, &k.day_share);
    double customer_share = 0.0;
    const struct shard_heat_customer_row *c =
        advice_explaining_customer(l, s, k.share - k.fair, k.day_share, &customer_share);
    struct shard_advice *a =
        advice_add(l, c != NULL ? SHARD_ADVICE_HOT_CUSTOMER : SHARD_ADVICE_KAFKA_PARTITION_SKEW);
    if (a == NULL) {
        return;
    }
    a->partition = source->partition;
    if (c == NULL) {
        advice_skew_text(a, &k);
        return;
    }
    a->customer = c->customer;
    advice_customer_subject(&c->customer, a->subject, sizeof(a->subject));
    advice_text(a->evidence, sizeof(a->evidence),
                "%s wrote %.0f%% of this node's writes (%.0f events/s, decayed over %u s) and "
                "Kafka partition %d took %.0f%% over the last %u s (fair share %.1f%% of %u "
                "partitions): keyed by customer, one consumer takes that customer",
                a->subject, 100.0 * customer_share, c->rate_eps, SHARD_HEAT_CUSTOMER_TAU_S,
                source->partition, 100.0 * k.share, SHARD_HEAT_WINDOW_S, 100.0 * k.fair,
                partitions);
    advice_text(a->remedy, sizeof(a->remedy),
                "key messages by order_id (dayshard produce --key order), or rate-limit this "
                "customer; more shards cannot help");
}

/* Skewed Kafka partitions, hottest first. */
static void advice_partitions(struct advice_list *l, const struct shard_heat_report *r)
{
    const struct shard_heat_snapshot *s = &r->heat;
    uint32_t partitions =
        r->kafka_partitions_assigned > 0 ? r->kafka_partitions_assigned : r->kafka_partitions_total;
    uint64_t total = 0;
    for (uint32_t i = 0; i < s->source_count; i++) {
        total += s->sources[i].window_events;
    }
    if (partitions < 2 || total == 0) {
        return;
    }
    uint32_t skewed[SHARD_HEAT_SOURCES_SNAPSHOT_MAX];
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->source_count; i++) {
        const struct shard_heat_source_row *k = &s->sources[i];
        double factor = advice_had_partition(l, k->partition) ? SHARD_ADVICE_SKEW_KEEP_FACTOR
                                                              : SHARD_ADVICE_SKEW_FACTOR;
        bool busy = k->window_seconds >= SHARD_ADVICE_MIN_SECONDS &&
                    k->window_events >= (uint64_t)SHARD_ADVICE_MIN_EPS * SHARD_ADVICE_MIN_SECONDS;
        if (busy && (double)k->window_events > factor * (double)total / partitions) {
            /* Insertion keeps the hottest first (at most a few hundred rows). */
            uint32_t at = n++;
            while (at > 0 && s->sources[skewed[at - 1]].window_events < k->window_events) {
                skewed[at] = skewed[at - 1];
                at--;
            }
            skewed[at] = i;
        }
    }
    ASSERT(n <= s->source_count);
    for (uint32_t i = 0; i < n; i++) {
        advice_partition(l, s, &s->sources[skewed[i]], total, partitions);
    }
}

/* Days at --max-shards still over their capacity, hottest first (the report's order). */
static void advice_days(struct advice_list *l, const struct shard_heat_report *r)
{
    const struct shard_heat_snapshot *s = &r->heat;
    uint32_t capacity = r->growth_capacity_eps > 0 ? r->growth_capacity_eps : s->capacity_eps;
    if (!r->adaptive || capacity == 0 || r->max_shards == 0) {
        return;
    }
    for (uint32_t i = 0; i < s->day_count; i++) {
        const struct shard_heat_day_row *d = &s->days[i];
        uint32_t shards = r->day_shards[i];
        if (shards < r->max_shards) {
            continue;
        }
        double limit = (double)SHARD_HEAT_GROWTH_WINDOW_S * shards * capacity;
        double bar = advice_had_day(l, d->day) ? SHARD_ADVICE_DAY_KEEP * limit : limit;
        if ((double)d->growth_window_events <= bar) {
            continue;
        }
        struct shard_advice *a = advice_add(l, SHARD_ADVICE_DAY_AT_MAX_SHARDS);
        if (a == NULL) {
            return;
        }
        a->day = d->day;
        ds_date_format(d->day, a->subject);
        advice_text(a->evidence, sizeof(a->evidence),
                    "%s took %.0f events/s over the last %u s at %u shard%s (--max-shards %u), "
                    "past %u x %u events/s",
                    a->subject, (double)d->growth_window_events / SHARD_HEAT_GROWTH_WINDOW_S,
                    SHARD_HEAT_GROWTH_WINDOW_S, shards, shards == 1 ? "" : "s", r->max_shards,
                    shards, capacity);
        advice_text(a->remedy, sizeof(a->remedy),
                    "raise --max-shards, or --shard-capacity if the store takes more per "
                    "partition; past that the store's per-partition write limit is the bound");
    }
}

uint32_t shard_advice_plan(const struct shard_heat_report *report,
                           const struct shard_advice *previous, uint32_t previous_count,
                           struct shard_advice *out, uint32_t out_max)
{
    ASSERT(report != NULL && out != NULL);
    ASSERT(out_max <= SHARD_ADVICE_MAX);
    ASSERT(previous_count == 0 || previous != NULL);
    ASSERT(previous == NULL || previous != out);
    _Static_assert(SHARD_ADVICE_SUBJECT_BYTES >= DS_DATE_TEXT_SIZE, "a day fits a subject");
    struct advice_list l = {
        .previous = previous, .previous_count = previous_count, .rows = out, .max = out_max};
    advice_partitions(&l, report);
    advice_days(&l, report);
    ASSERT(l.count <= out_max);
    return l.count;
}
