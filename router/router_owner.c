/*
 * The router's ownership rules (router_private.h). Orders model: a Kafka partition's orders
 * are counted from one member only, and a group's answers never go back. Events model, when
 * every member reports claims: no offset of a partition is in two members' claims, and the
 * group's answers never go back.
 *
 * Orders model, why: a node re-reads a partition it takes over from its start, and the node
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
 *
 * Events model. A node that stored past the offset its partition's new owner resumes at holds
 * [C, N) twice until it releases [C, inf) (storage_release_range) at its next assignment. Its
 * claim (the latest run: from where it last started reading, to its durable next, or open
 * while it owns the partition) covers that range, and so does the claim of the holder that
 * started at C (or of a holder in between), so two claims overlap for as long as the double is
 * stored: a node releases before it starts a new run, so the overlap sits in its latest run.
 * The frontier rule keeps an answer from going back when a release takes away a range the new
 * owner has not re-read yet. A member without claims (`serve`, an older node) leaves the
 * answer unchecked: the check needs every holder's claims to mean anything.
 *
 * Rejected for the events model: the orders model's "named twice" rule (every handover would
 * make the group incomplete for as long as the old holder keeps its part, which is for good),
 * and merging the claims into one per partition (the overlap is between members).
 */
#include <inttypes.h>
#include <stdio.h>

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

/* The first overlap among claims[0..count) (one partition's, sorted by from): the claim with
 * the furthest end so far against each later one. Sorted by from, a later non-empty claim
 * overlaps an earlier one exactly when it starts before that one's end, and the furthest end
 * is the one to compare. */
static bool claims_overlap(const struct router_claim *claims, uint32_t count,
                           struct router_owner_issue *issue)
{
    const struct router_claim *reach = NULL; /* the non-empty claim ending furthest so far */
    for (uint32_t i = 0; i < count; i++) {
        const struct router_claim *c = &claims[i];
        ASSERT(i == 0 || claims[i - 1].from <= c->from);
        if (c->from >= c->end) {
            continue; /* empty: the member holds nothing of its latest run */
        }
        if (reach != NULL && c->from < reach->end) {
            ASSERT(reach->member != c->member);
            issue->from[0] = reach->from;
            issue->end[0] = reach->end;
            issue->from[1] = c->from;
            issue->end[1] = c->end;
            return true;
        }
        reach = reach == NULL || c->end > reach->end ? c : reach;
    }
    return false;
}

uint32_t router_owner_check_claims(const struct router_frontier *f,
                                   const struct router_offsets *as_of,
                                   const struct router_claims *claims,
                                   struct router_owner_issue *issues, uint32_t cap)
{
    ASSERT(claims->count == 0 || claims->items != NULL);
    uint32_t count = 0;
    uint32_t at = 0; /* the first claim of partition p */
    for (uint32_t p = 0; p < ROUTER_PARTITIONS_MAX; p++) {
        uint32_t end = at;
        while (end < claims->count && claims->items[end].partition == p) {
            end++;
        }
        ASSERT(end == claims->count || claims->items[end].partition > p);
        bool named = bit(as_of->bits, p);
        struct router_owner_issue issue = {
            .partition = p,
            .next = named ? as_of->next[p] : 0,
            .frontier = atomic_load_explicit(&f->next[p], memory_order_acquire)};
        if (claims_overlap(&claims->items[at], end - at, &issue)) {
            issue.fault = ROUTER_OWNER_CLAIMED;
        } else if (named && issue.next < issue.frontier) {
            issue.fault = ROUTER_OWNER_BEHIND;
        }
        at = end;
        if (issue.fault == 0) {
            continue;
        }
        if (count < cap) {
            issues[count] = issue;
        }
        count++;
    }
    ASSERT(at == claims->count);
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

void router_owner_issue_text(const struct router_owner_issue *o, char *dst, size_t cap)
{
    ASSERT(cap >= ROUTER_OWNER_ISSUE_BYTES_MAX);
    ASSERT(o->partition < ROUTER_PARTITIONS_MAX); /* 4 digits: the longest text is 122 bytes */
    int n = 0;
    if (o->fault == ROUTER_OWNER_TWICE) {
        n = snprintf(dst, cap, "partition %u held by two members", o->partition);
    } else if (o->fault == ROUTER_OWNER_BEHIND) {
        n = snprintf(dst, cap, "partition %u behind (%" PRId64 " < %" PRId64 ")", o->partition,
                     o->next, o->frontier);
    } else {
        ASSERT(o->fault == ROUTER_OWNER_CLAIMED);
        char end[2][24] = {"open", "open"};
        for (int k = 0; k < 2; k++) {
            if (o->end[k] != ROUTER_CLAIM_OPEN) {
                snprintf(end[k], sizeof(end[k]), "%" PRId64, o->end[k]);
            }
        }
        n = snprintf(dst, cap,
                     "partition %u claimed by two members (%" PRId64 "..%s, %" PRId64 "..%s)",
                     o->partition, o->from[0], end[0], o->from[1], end[1]);
    }
    ASSERT(n > 0 && (size_t)n < ROUTER_OWNER_ISSUE_BYTES_MAX);
}
