/*
 * A node's heat and adaptive sharding (see node_heat.h).
 *
 * Order of a growth, all on the consumer thread, between two batches of messages:
 * (1) shard_map_grow_sync: the map file holds the new count before any event is routed with
 * it (a restart therefore fans counts out over every shard that holds data); (2) the history
 * line in DIR/shardmap.log; (3) the message on the shard map topic. A failure in (1) stops
 * growth; (2) and (3) failing only cost explanation and agreement, so they are logged.
 *
 * Merging another node's growth takes the same path as (1), so the merged count is durable
 * before use too. Another node's message below this node's count (a late publisher, or history
 * before compaction) is answered by publishing this node's count again, so the compacted topic
 * ends at the maximum of every day; this node's own messages are skipped (reading back its own
 * 8 after it grew to 16 needs no answer: its 16 follows in the topic).
 *
 * Rejected: evaluating growth per event (a division and a map lookup per event on the hot
 * path, for a decision that only changes once a second).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/node_heat.h"
#include "ingest/shardmap_topic.h"

/* How often growth is planned between whole seconds (the current-second rule): a day over
 * capacity grows within this much of crossing it. */
#define NODE_HEAT_PLAN_NS (50ull * 1000000u)

struct node_heat {
    const struct ingest_node_config *cfg;
    struct shard_map *map;
    struct shard_heat *heat;
    struct shardmap_topic *topic; /* NULL with no_shardmap_topic */
    struct shard_heat_report *report;
    bool growth_failed;
    uint32_t capacity_eps;        /* the node's share of --shard-capacity (node_heat_share) */
    uint32_t partitions_assigned; /* of the topic's, as node_heat_share last said */
    uint32_t partitions_total;
    uint64_t last_plan_ns;
    uint64_t growths;
    uint64_t merged;
};

static void node_heat_record(struct node_heat *nh, const struct shard_growth *growth)
{
    struct shard_heat_report *r = nh->report;
    uint32_t kept = r->growth_count < SHARD_GROWTHS_KEPT ? r->growth_count + 1 : SHARD_GROWTHS_KEPT;
    memmove(&r->growths[1], &r->growths[0], (kept - 1) * sizeof(r->growths[0]));
    r->growths[0] = *growth;
    r->growth_count = kept;
    r->growths_total++;
    if (nh->cfg->heat_history != NULL) {
        shard_heat_history_growth(nh->cfg->heat_history, growth);
    }
}

/* The history line of a growth (made or merged); failing costs explanation only. */
static void node_heat_log(struct node_heat *nh, const struct shard_growth *growth)
{
    int rc = shard_growth_log_append(nh->cfg->data_dir, growth);
    if (rc != 0) {
        char day[DS_DATE_TEXT_SIZE];
        ds_date_format(growth->day, day);
        ds_log_warn("shard map: %s/shardmap.log: cannot record the growth of %s: %s",
                    nh->cfg->data_dir, day, ds_strerror(rc));
    }
    node_heat_record(nh, growth);
}

/* A day to grow, from the plan: durable first, then explained and shared. */
static int node_heat_grow(const struct shard_growth *growth, void *user)
{
    struct node_heat *nh = user;
    char day[DS_DATE_TEXT_SIZE];
    ds_date_format(growth->day, day);
    int rc = shard_map_grow_sync(nh->map, growth->day, growth->to);
    if (rc != 0) {
        ds_log_error("shard map: cannot grow %s from %u to %u shards: %s; adaptive sharding "
                     "stops (events keep the shard counts the map has; nothing is lost)",
                     day, growth->from, growth->to, ds_strerror(rc));
        nh->growth_failed = true;
        return 1;
    }
    nh->growths++;
    ds_log_info("shard map: %s grew from %u to %u shards (%s)", day, growth->from, growth->to,
                growth->reason);
    node_heat_log(nh, growth);
    if (nh->topic != NULL) {
        shardmap_topic_publish(nh->topic, growth->day, growth->to, growth->at_ms, growth->reason);
    }
    return 0;
}

struct node_heat_merge {
    struct node_heat *nh;
    int rc;
};

/* A (day, count) read from the shard map topic. This node's own messages hold nothing its map
 * lacks: an older, smaller one of them is followed in the topic by the larger one it
 * published since, so only another node's smaller count is answered. */
static void node_heat_merge_one(int32_t day, uint32_t count, bool published_here, void *user)
{
    struct node_heat_merge *m = user;
    struct node_heat *nh = m->nh;
    if (m->rc != 0 || published_here) {
        return;
    }
    uint32_t own = shard_map_get(nh->map, day);
    if (own > count) {
        shardmap_topic_publish(nh->topic, day, own, ds_clock_realtime_ms(),
                               "republished: a node had a smaller count");
        return;
    }
    int rc = shardmap_topic_merge(nh->map, day, count);
    if (rc < 0) {
        char text[DS_DATE_TEXT_SIZE];
        ds_date_format(day, text);
        ds_log_error("shard map: cannot take %s = %u shards from the map topic: %s", text, count,
                     ds_strerror(rc));
        m->rc = rc;
        return;
    }
    if (rc == 1) {
        /* A day this node had not seen yet got the base count first. */
        uint32_t from = own > 0 ? own : nh->cfg->base_shards;
        struct shard_growth growth = {.day = day,
                                      .from = from,
                                      .to = count,
                                      .t = shard_heat_second(nh->heat),
                                      .at_ms = ds_clock_realtime_ms()};
        snprintf(growth.reason, sizeof(growth.reason), "merged from %s",
                 shardmap_topic_name(nh->topic));
        nh->merged++;
        node_heat_log(nh, &growth);
    }
}

int node_heat_open(const struct ingest_node_config *cfg, struct shard_map *map,
                   struct node_heat **out)
{
    ASSERT(cfg != NULL && map != NULL && out != NULL);
    ASSERT(cfg->max_shards >= 1 && cfg->max_shards <= SHARD_COUNT_MAX);
    struct node_heat *nh = calloc(1, sizeof(*nh));
    if (nh == NULL) {
        return -ENOMEM;
    }
    nh->cfg = cfg;
    nh->map = map;
    nh->capacity_eps = cfg->shard_capacity_eps;
    nh->report = calloc(1, sizeof(*nh->report));
    int rc = nh->report != NULL ? shard_heat_create(cfg->shard_capacity_eps, &nh->heat) : -ENOMEM;
    if (rc == 0 && !cfg->no_shardmap_topic) {
        rc = shardmap_topic_open(cfg->brokers, cfg->topic, cfg->group, cfg->props, &nh->topic);
    }
    if (rc == 0 && nh->topic != NULL) {
        struct node_heat_merge merge = {.nh = nh};
        int read = shardmap_topic_catch_up(nh->topic, SHARDMAP_TOPIC_CATCH_UP_MS,
                                           node_heat_merge_one, &merge);
        rc = merge.rc;
        if (rc == 0 && read > 0) {
            ds_log_info("shard map: read %d growths from %s (%llu taken)", read,
                        shardmap_topic_name(nh->topic), (unsigned long long)nh->merged);
        }
    }
    if (rc != 0) {
        node_heat_close(nh);
        return rc;
    }
    *out = nh;
    return 0;
}

void node_heat_close(struct node_heat *nh)
{
    if (nh == NULL) {
        return;
    }
    shardmap_topic_close(nh->topic);
    shard_heat_destroy(nh->heat);
    free(nh->report);
    free(nh);
}

void node_heat_observe(struct node_heat *nh, int64_t second, int32_t day, uint32_t shard,
                       int32_t source, const struct ds_id *customer)
{
    shard_heat_observe(nh->heat, second, day, shard, source, customer);
}

/* Whether list (count rows) holds a's case for a's subject. */
static bool node_heat_advice_in(const struct shard_advice *list, uint32_t count,
                                const struct shard_advice *a)
{
    for (uint32_t i = 0; i < count; i++) {
        if (list[i].kind == a->kind && strcmp(list[i].subject, a->subject) == 0) {
            return true;
        }
    }
    return false;
}

/* The advice of this report. A case that starts (not in the previous report's advice) is
 * logged once, with its evidence and remedy, and one that ends is logged too, so the log says
 * how long each lasted; a line every second it holds would drown the log. */
static void node_heat_advise(struct node_heat *nh)
{
    struct shard_heat_report *r = nh->report;
    struct shard_advice previous[SHARD_ADVICE_MAX];
    uint32_t previous_count = r->advice_count;
    ASSERT(previous_count <= SHARD_ADVICE_MAX);
    memcpy(previous, r->advice, previous_count * sizeof(previous[0]));
    r->advice_count = shard_advice_plan(r, previous, previous_count, r->advice, SHARD_ADVICE_MAX);
    for (uint32_t i = 0; i < r->advice_count; i++) {
        const struct shard_advice *a = &r->advice[i];
        if (!node_heat_advice_in(previous, previous_count, a)) {
            ds_log_warn("advice: %s (%s): %s; remedy: %s", shard_advice_case_name(a->kind),
                        a->subject, a->evidence, a->remedy);
        }
    }
    for (uint32_t k = 0; k < previous_count; k++) {
        if (!node_heat_advice_in(r->advice, r->advice_count, &previous[k])) {
            ds_log_info("advice: %s (%s) no longer holds", shard_advice_case_name(previous[k].kind),
                        previous[k].subject);
        }
    }
}

/* The report for the observer: the snapshot plus each listed day's shard count. */
static void node_heat_publish(struct node_heat *nh)
{
    struct shard_heat_report *r = nh->report;
    shard_heat_snapshot(nh->heat, SHARD_HEAT_TOP_MAX, &r->heat);
    for (uint32_t i = 0; i < r->heat.partition_count; i++) {
        r->partition_day_shards[i] = shard_map_get(nh->map, r->heat.partitions[i].day);
    }
    for (uint32_t i = 0; i < r->heat.day_count; i++) {
        r->day_shards[i] = shard_map_get(nh->map, r->heat.days[i].day);
    }
    r->base_shards = nh->cfg->base_shards;
    r->max_shards = nh->cfg->max_shards;
    r->adaptive = nh->cfg->shard_capacity_eps > 0 && !nh->growth_failed;
    r->growth_failed = nh->growth_failed;
    r->kafka_partitions_total = nh->partitions_total;
    r->kafka_partitions_assigned = nh->partitions_assigned;
    r->growth_capacity_eps = nh->capacity_eps;
    node_heat_advise(nh);
    nh->cfg->on_heat(r, nh->cfg->observer_user);
}

void node_heat_share(struct node_heat *nh, uint32_t assigned, uint32_t total)
{
    ASSERT(nh != NULL);
    uint64_t capacity = nh->cfg->shard_capacity_eps;
    if (capacity > 0 && total > 0 && assigned > 0 && assigned < total) {
        capacity = capacity * assigned / total;
        capacity = capacity > 0 ? capacity : 1;
    }
    if (capacity != nh->capacity_eps) {
        ds_log_info("shard map: this node reads %u of %u partitions: it grows days past %llu "
                    "events/s per shard of its own (of %u)",
                    assigned, total, (unsigned long long)capacity, nh->cfg->shard_capacity_eps);
    }
    nh->capacity_eps = (uint32_t)capacity;
    nh->partitions_assigned = assigned;
    nh->partitions_total = total;
}

int node_heat_tick(struct node_heat *nh, struct ingest_node_stats *stats)
{
    ASSERT(nh != NULL && stats != NULL);
    if (nh->topic != NULL) {
        struct node_heat_merge merge = {.nh = nh};
        (void)shardmap_topic_poll(nh->topic, node_heat_merge_one, &merge);
        if (merge.rc != 0) {
            return merge.rc;
        }
    }
    int64_t now_ms = ds_clock_realtime_ms();
    uint64_t now_ns = ds_clock_ns();
    bool moved = shard_heat_advance(nh->heat, now_ms / 1000);
    if (moved && nh->cfg->heat_history != NULL) {
        shard_heat_history_record(nh->cfg->heat_history, nh->heat);
    }
    /* The current-second rule needs a look more often than once a second; the loop runs after
     * every batch of messages, so the plan is bounded to every NODE_HEAT_PLAN_NS. */
    if (nh->cfg->shard_capacity_eps > 0 && !nh->growth_failed &&
        (moved || now_ns - nh->last_plan_ns >= NODE_HEAT_PLAN_NS)) {
        nh->last_plan_ns = now_ns;
        (void)shard_growth_plan(nh->heat, nh->map, nh->capacity_eps, nh->cfg->max_shards, now_ms,
                                node_heat_grow, nh);
    }
    if (moved && nh->cfg->on_heat != NULL) {
        node_heat_publish(nh);
    }
    stats->growths = nh->growths;
    stats->merged = nh->merged;
    return 0;
}
