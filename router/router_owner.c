/*
 * The router's ownership rules for the orders model (router_private.h): a Kafka partition's
 * orders are counted from one member only, and a group's answers never go back.
 *
 * Why they are needed: a node re-reads a partition it takes over from its start, and the node
 * that held it gives its orders up (storage_release_source) at its own next rebalance step. In
 * between both hold the partition's orders; a sum over the members would count them twice.
 * The new owner then holds a growing prefix of the partition's history until it catches up, so
 * a sum over the members can also be below an answer given before the takeover.
 *
 * Why these rules are sound: a node's as_of and its count come from one storage commit, and
 * storage names a partition in as_of exactly while it holds orders of it (the release's last
 * commit removes both; a release in several commits keeps the name until the last). So two
 * members naming one partition is the only way an order is summed twice, and a partition at
 * an offset at least the frontier's holds at least the orders it held then (a prefix of the
 * partition's history, and a longer prefix has at least the distinct orders of a shorter one).
 *
 * Rejected: each node filtering its count to the partitions it owns now, or the router
 * dropping the share of a member whose generation is older. Counts come from per-day totals
 * kept in block headers over every source partition (storage_day_totals), so a count of one
 * source partition means decoding every block of the range; and the ownership a node's
 * consumer thread sees is not the one of the storage commit its query reads.
 */
#include "router/router_private.h"

static bool bit(const uint64_t *bits, uint32_t p)
{
    return (bits[p / 64] >> (p % 64)) & 1u;
}

uint32_t router_owner_check(const struct router_frontier *f, const struct router_offsets *as_of,
                            struct router_owner_issue *issues, uint32_t cap)
{
    uint32_t count = 0;
    for (uint32_t p = 0; p < ROUTER_PARTITIONS_MAX; p++) {
        if (!bit(as_of->bits, p)) {
            continue;
        }
        int64_t frontier = atomic_load_explicit(&f->next[p], memory_order_acquire);
        struct router_owner_issue issue = {
            .partition = p, .next = as_of->next[p], .frontier = frontier};
        if (bit(as_of->twice, p)) {
            issue.fault = ROUTER_OWNER_TWICE;
        } else if (as_of->next[p] < frontier) {
            issue.fault = ROUTER_OWNER_BEHIND;
        } else {
            continue;
        }
        if (count < cap) {
            issues[count] = issue;
        }
        count++;
    }
    return count;
}

void router_frontier_advance(struct router_frontier *f, const struct router_offsets *as_of)
{
    for (uint32_t p = 0; p < ROUTER_PARTITIONS_MAX; p++) {
        if (!bit(as_of->bits, p)) {
            continue;
        }
        int64_t seen = atomic_load_explicit(&f->next[p], memory_order_relaxed);
        while (seen < as_of->next[p] &&
               !atomic_compare_exchange_weak_explicit(&f->next[p], &seen, as_of->next[p],
                                                      memory_order_release, memory_order_relaxed)) {
        }
    }
}
