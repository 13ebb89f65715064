/*
 * Unit tests of router/router_owner.c over merged count answers (router_merge_count): in the
 * orders model a partition two members name is refused (its orders would be summed twice), a
 * partition behind the furthest offset a complete answer of the group reached is refused (a new
 * owner still re-reading it), the frontier only rises, and the merge marks the orders model and
 * the partitions named twice. In the events model, members' claims that overlap are refused,
 * touching, empty and missing ones are not, and the frontier rule holds as well.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/router_private.h"

/* A member's count answer: count, the model ("" leaves it out), its as_of object and its
 * claims object (NULL leaves it out). */
static void answer_claims(char *dst, size_t cap, uint64_t count, const char *model,
                          const char *as_of, const char *claims)
{
    char model_field[48] = "";
    if (model[0] != '\0') {
        snprintf(model_field, sizeof(model_field), ",\"model\":\"%s\"", model);
    }
    int n = snprintf(dst, cap,
                     "{\"day\":\"2026-01-01\",\"to\":\"2026-01-01\",\"count\":%llu,"
                     "\"amount_sum\":\"1.0000\",\"partitions\":1,\"blocks\":1,\"bytes\":10,"
                     "\"damaged_blocks\":0%s,\"as_of\":%s%s%s}",
                     (unsigned long long)count, model_field, as_of,
                     claims != NULL ? ",\"claims\":" : "", claims != NULL ? claims : "");
    assert_true(n > 0 && (size_t)n < cap);
}

static void answer(char *dst, size_t cap, uint64_t count, const char *model, const char *as_of)
{
    answer_claims(dst, cap, count, model, as_of, NULL);
}

/* Merges two members' answers into *m (as_of and the model flag; the body freed). */
static void merge2(const char *model, const char *as_of_a, const char *as_of_b,
                   struct router_merged *m)
{
    struct query_route route = {.endpoint = QUERY_EP_COUNT};
    route.count.day_first = 20454; /* 2026-01-01 */
    route.count.day_last = 20454;
    char a[512];
    char b[512];
    answer(a, sizeof(a), 5, model, as_of_a);
    answer(b, sizeof(b), 7, model, as_of_b);
    const char *bodies[] = {a, b};
    memset(m, 0, sizeof(*m));
    assert_int_equal(router_merge_count(&route, bodies, 2, m), 0);
    free(m->body);
    m->body = NULL;
}

static void test_router_owner_partition_named_twice(void **state)
{
    /* Intent: the old and the new owner of partition 1 both answer with it: refused, named. */
    (void)state;
    struct router_frontier *f = calloc(1, sizeof(*f));
    struct router_merged m;
    merge2("orders", "{\"0\":10,\"1\":4}", "{\"1\":9,\"2\":3}", &m);
    assert_true(m.orders_model);
    assert_int_equal(m.as_of.twice[0], 2u);
    struct router_owner_issue issues[4];
    assert_int_equal(router_owner_check(f, &m.as_of, issues, 4), 1);
    assert_int_equal(issues[0].partition, 1);
    assert_int_equal(issues[0].fault, ROUTER_OWNER_TWICE);
    /* Once the old owner released it, the same offsets are one answer. */
    merge2("orders", "{\"0\":10}", "{\"1\":9,\"2\":3}", &m);
    assert_int_equal(m.as_of.twice[0], 0u);
    assert_int_equal(router_owner_check(f, &m.as_of, issues, 4), 0);
    free(f);
}

static void test_router_owner_behind_frontier(void **state)
{
    /* Intent: after a complete answer at offsets (10, 9, 3), a new owner of partition 1
     * re-reading it from its start (at 6) is refused until it reaches 9; the frontier never
     * goes back; an issue list longer than its capacity still counts every issue. */
    (void)state;
    struct router_frontier *f = calloc(1, sizeof(*f));
    struct router_merged m;
    merge2("orders", "{\"0\":10,\"1\":9}", "{\"2\":3}", &m);
    struct router_owner_issue issues[1];
    assert_int_equal(router_owner_check(f, &m.as_of, issues, 1), 0);
    router_frontier_advance(f, &m.as_of);

    merge2("orders", "{\"0\":10}", "{\"1\":6,\"2\":3}", &m);
    assert_int_equal(router_owner_check(f, &m.as_of, issues, 1), 1);
    assert_int_equal(issues[0].partition, 1);
    assert_int_equal(issues[0].fault, ROUTER_OWNER_BEHIND);
    assert_int_equal(issues[0].next, 6);
    assert_int_equal(issues[0].frontier, 9);
    router_frontier_advance(f, &m.as_of); /* a lower offset leaves the frontier */
    assert_int_equal(atomic_load(&f->next[1]), 9);

    merge2("orders", "{\"0\":8}", "{\"1\":6,\"2\":3}", &m);
    assert_int_equal(router_owner_check(f, &m.as_of, issues, 1), 2);
    assert_int_equal(issues[0].partition, 0);

    merge2("orders", "{\"0\":11}", "{\"1\":9,\"2\":3}", &m);
    assert_int_equal(router_owner_check(f, &m.as_of, issues, 1), 0);
    router_frontier_advance(f, &m.as_of);
    assert_int_equal(atomic_load(&f->next[0]), 11);
    free(f);
}

static void test_router_owner_events_model_not_marked(void **state)
{
    /* Intent: the events model (and a service that names no model) is not the orders model:
     * the router keeps summing a handed-over partition's two parts there. */
    (void)state;
    struct router_merged m;
    merge2("events", "{\"1\":4}", "{\"1\":9}", &m);
    assert_false(m.orders_model);
    assert_int_equal(m.as_of.twice[0], 2u);
    assert_int_equal(m.as_of.next[1], 9);
    merge2("", "{\"1\":4}", "{\"1\":9}", &m);
    assert_false(m.orders_model);
}

/* ---- events model: claims ----------------------------------------------------------------- */

/* Merges the events-model answers of count members (as_of[i], claims[i]; NULL: no claims) into
 * *m; returns what the merge returned. The claims stay in m (router_claims_free). */
static int merge_events(uint32_t count, const char *const *as_of, const char *const *claims,
                        struct router_merged *m)
{
    struct query_route route = {.endpoint = QUERY_EP_COUNT};
    route.count.day_first = 20454; /* 2026-01-01 */
    route.count.day_last = 20454;
    char text[4][512];
    const char *bodies[4];
    assert_true(count <= 4);
    for (uint32_t i = 0; i < count; i++) {
        answer_claims(text[i], sizeof(text[i]), 5, "events", as_of[i], claims[i]);
        bodies[i] = text[i];
    }
    memset(m, 0, sizeof(*m));
    int rc = router_merge_count(&route, bodies, count, m);
    free(m->body);
    m->body = NULL;
    return rc;
}

/* The issues of the members' claims against f (as_of of every member "{"1":900}"). */
static uint32_t check_claims(const struct router_frontier *f, const char *const *claims,
                             uint32_t count, struct router_owner_issue *issues, uint32_t cap)
{
    const char *as_of[4] = {"{\"1\":900}", "{\"1\":900}", "{\"1\":900}", "{\"1\":900}"};
    struct router_merged m;
    assert_int_equal(merge_events(count, as_of, claims, &m), 0);
    assert_true(m.events_model);
    assert_false(m.orders_model);
    assert_true(m.claims.all);
    uint32_t n = router_owner_check_claims(f, &m.as_of, &m.claims, issues, cap);
    router_claims_free(&m.claims);
    assert_null(m.claims.items);
    return n;
}

static void test_router_owner_claims_parsed_per_member(void **state)
{
    /* Intent: the merge keeps every member's claims (not the max), sorted by partition then
     * from, with the member's index; null is open; as_of is still the max per partition. */
    (void)state;
    const char *as_of[2] = {"{\"1\":500,\"3\":7}", "{\"1\":900}"};
    const char *claims[2] = {"{\"3\":[0,7],\"1\":[0,500]}", "{\"1\":[300,null]}"};
    struct router_merged m;
    assert_int_equal(merge_events(2, as_of, claims, &m), 0);
    assert_true(m.events_model);
    assert_true(m.claims.all);
    assert_int_equal(m.claims.count, 3);
    const struct router_claim want[3] = {
        {.partition = 1, .from = 0, .end = 500, .member = 0},
        {.partition = 1, .from = 300, .end = ROUTER_CLAIM_OPEN, .member = 1},
        {.partition = 3, .from = 0, .end = 7, .member = 0},
    };
    for (uint32_t i = 0; i < 3; i++) {
        assert_int_equal(m.claims.items[i].partition, want[i].partition);
        assert_int_equal(m.claims.items[i].from, want[i].from);
        assert_int_equal(m.claims.items[i].end, want[i].end);
        assert_int_equal(m.claims.items[i].member, want[i].member);
    }
    assert_int_equal(m.as_of.next[1], 900);
    router_claims_free(&m.claims);
    assert_int_equal(m.claims.count, 0);
}

static void test_router_owner_claims_missing_or_empty(void **state)
{
    /* Intent: one member without claims (serve, an older node) makes the answer unchecked
     * (all false), while an empty claims object is a member that holds nothing and counts as
     * reported; answers of the orders model leave events_model unset. */
    (void)state;
    const char *as_of[2] = {"{\"1\":500}", "{\"1\":900}"};
    const char *one_missing[2] = {"{\"1\":[0,500]}", NULL};
    struct router_merged m;
    assert_int_equal(merge_events(2, as_of, one_missing, &m), 0);
    assert_false(m.claims.all);
    assert_int_equal(m.claims.count, 1);
    router_claims_free(&m.claims);
    const char *none[2] = {NULL, NULL};
    assert_int_equal(merge_events(2, as_of, none, &m), 0);
    assert_false(m.claims.all);
    assert_int_equal(m.claims.count, 0);
    assert_null(m.claims.items);
    const char *one_empty[2] = {"{}", "{\"1\":[300,null]}"};
    assert_int_equal(merge_events(2, as_of, one_empty, &m), 0);
    assert_true(m.claims.all);
    assert_int_equal(m.claims.count, 1);
    router_claims_free(&m.claims);
    merge2("orders", "{\"0\":10}", "{\"1\":9}", &m);
    assert_false(m.events_model);
    merge2("", "{\"0\":10}", "{\"1\":9}", &m);
    assert_false(m.events_model);
}

static void test_router_owner_claims_overlap(void **state)
{
    /* Intent: A stored [0, 500) and B resumed at 300 (open): [300, 500) is on two disks, so
     * partition 1 is refused with both claims; once A released to 300 the claims touch and
     * the answer is complete. */
    (void)state;
    struct router_frontier *f = calloc(1, sizeof(*f));
    struct router_owner_issue issues[4];
    const char *stale[2] = {"{\"1\":[0,500]}", "{\"1\":[300,null]}"};
    assert_int_equal(check_claims(f, stale, 2, issues, 4), 1);
    assert_int_equal(issues[0].partition, 1);
    assert_int_equal(issues[0].fault, ROUTER_OWNER_CLAIMED);
    assert_int_equal(issues[0].from[0], 0);
    assert_int_equal(issues[0].end[0], 500);
    assert_int_equal(issues[0].from[1], 300);
    assert_int_equal(issues[0].end[1], ROUTER_CLAIM_OPEN);
    char text[ROUTER_OWNER_ISSUE_BYTES_MAX];
    router_owner_issue_text(&issues[0], text, sizeof(text));
    assert_string_equal(text, "partition 1 claimed by two members (0..500, 300..open)");
    const char *released[2] = {"{\"1\":[0,300]}", "{\"1\":[300,null]}"};
    assert_int_equal(check_claims(f, released, 2, issues, 4), 0);
    /* The member order does not matter; a one-offset overlap is one. */
    const char *swapped[2] = {"{\"1\":[300,null]}", "{\"1\":[0,301]}"};
    assert_int_equal(check_claims(f, swapped, 2, issues, 4), 1);
    assert_int_equal(issues[0].end[0], 301);
    free(f);
}

static void test_router_owner_claims_open_and_empty(void **state)
{
    /* Intent: two open claims overlap whatever their starts (both own the partition: a frozen
     * owner that has not heard of its loss); an empty claim (from >= end, a node that released
     * its whole latest run) overlaps nothing, even inside another's range. */
    (void)state;
    struct router_frontier *f = calloc(1, sizeof(*f));
    struct router_owner_issue issues[4];
    const char *both_open[2] = {"{\"1\":[1000,null]}", "{\"1\":[0,null]}"};
    assert_int_equal(check_claims(f, both_open, 2, issues, 4), 1);
    assert_int_equal(issues[0].from[0], 0);
    assert_int_equal(issues[0].from[1], 1000);
    const char *empty[3] = {"{\"1\":[400,300]}", "{\"1\":[300,null]}", "{\"1\":[350,350]}"};
    assert_int_equal(check_claims(f, empty, 3, issues, 4), 0);
    /* A long claim overlaps one starting after a shorter claim between them. */
    const char *reach[3] = {"{\"1\":[0,1000]}", "{\"1\":[100,200]}", "{\"1\":[500,null]}"};
    assert_int_equal(check_claims(f, reach, 3, issues, 4), 1);
    assert_int_equal(issues[0].from[0], 0);
    assert_int_equal(issues[0].from[1], 100);
    const char *chain[3] = {"{\"1\":[0,100]}", "{\"1\":[100,200]}", "{\"1\":[150,null]}"};
    assert_int_equal(check_claims(f, chain, 3, issues, 4), 1);
    assert_int_equal(issues[0].from[0], 100);
    assert_int_equal(issues[0].end[0], 200);
    assert_int_equal(issues[0].from[1], 150);
    const char *handovers[3] = {"{\"1\":[0,100]}", "{\"1\":[100,200]}", "{\"1\":[200,null]}"};
    assert_int_equal(check_claims(f, handovers, 3, issues, 4), 0);
    free(f);
}

static void test_router_owner_claims_frontier(void **state)
{
    /* Intent: in the events model the frontier rule holds too: after a complete answer at
     * next 900 of partition 1, an answer whose largest next is 600 (the old owner released
     * [600, 900), the new owner has not re-read it) is behind; a partition named by two
     * members is not a fault here; issues come in partition order and are all counted. */
    (void)state;
    struct router_frontier *f = calloc(1, sizeof(*f));
    struct router_owner_issue issues[1];
    const char *as_of[2] = {"{\"1\":900,\"2\":50}", "{\"1\":400,\"2\":70}"};
    const char *claims[2] = {"{\"1\":[0,900],\"2\":[0,50]}", "{\"2\":[50,null]}"};
    struct router_merged m;
    assert_int_equal(merge_events(2, as_of, claims, &m), 0);
    assert_int_equal(router_owner_check_claims(f, &m.as_of, &m.claims, issues, 1), 0);
    router_frontier_advance(f, &m.as_of);
    router_claims_free(&m.claims);
    assert_int_equal(atomic_load(&f->next[1]), 900);

    const char *behind_as_of[2] = {"{\"1\":600,\"2\":50}", "{\"1\":400,\"2\":70}"};
    const char *behind_claims[2] = {"{\"1\":[0,600],\"2\":[0,50]}",
                                    "{\"1\":[600,null],\"2\":[40,null]}"};
    assert_int_equal(merge_events(2, behind_as_of, behind_claims, &m), 0);
    assert_int_equal(router_owner_check_claims(f, &m.as_of, &m.claims, issues, 1), 2);
    assert_int_equal(issues[0].partition, 1);
    assert_int_equal(issues[0].fault, ROUTER_OWNER_BEHIND);
    assert_int_equal(issues[0].next, 600);
    assert_int_equal(issues[0].frontier, 900);
    struct router_owner_issue both[2];
    assert_int_equal(router_owner_check_claims(f, &m.as_of, &m.claims, both, 2), 2);
    assert_int_equal(both[1].partition, 2);
    assert_int_equal(both[1].fault, ROUTER_OWNER_CLAIMED);
    router_claims_free(&m.claims);
    free(f);
}

static void test_router_owner_issue_texts(void **state)
{
    /* Intent: each fault reads as the 503's "missing" entry says, and the longest possible
     * one (largest partition, four 19-digit offsets) fits the bound. */
    (void)state;
    char text[ROUTER_OWNER_ISSUE_BYTES_MAX];
    struct router_owner_issue o = {.partition = 3, .fault = ROUTER_OWNER_TWICE};
    router_owner_issue_text(&o, text, sizeof(text));
    assert_string_equal(text, "partition 3 held by two members");
    o = (struct router_owner_issue){
        .partition = 3, .fault = ROUTER_OWNER_BEHIND, .next = 6, .frontier = 9};
    router_owner_issue_text(&o, text, sizeof(text));
    assert_string_equal(text, "partition 3 behind (6 < 9)");
    o = (struct router_owner_issue){.partition = ROUTER_PARTITIONS_MAX - 1,
                                    .fault = ROUTER_OWNER_CLAIMED,
                                    .from = {INT64_MAX - 1, INT64_MAX - 1},
                                    .end = {INT64_MAX - 1, INT64_MAX - 1}};
    router_owner_issue_text(&o, text, sizeof(text));
    assert_int_equal(strlen(text), 122);
    assert_non_null(strstr(text, "(9223372036854775806..9223372036854775806, "));
}

static void test_router_owner_claims_refused_when_malformed(void **state)
{
    /* Intent: a claims object that is not the documented shape fails the merge, naming the
     * field, and leaves no claims behind. */
    (void)state;
    static const char *const bad[] = {
        "[]",
        "{\"1\":[1]}",
        "{\"1\":[1,2,3]}",
        "{\"1\":[\"1\",null]}",
        "{\"1\":[-1,null]}",
        "{\"1\":[1,-2]}",
        "{\"1\":[1,9223372036854775807]}",
        "{\"1\":[1.5,null]}",
        "{\"1\":{\"from\":1}}",
        "{\"01\":[1,null]}",
        "{\"+1\":[1,null]}",
        "{\"1024\":[1,null]}",
        "{\"file\":[1,null]}",
        "{\"\":[1,null]}",
    };
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        const char *as_of[2] = {"{\"1\":5}", "{\"1\":9}"};
        const char *claims[2] = {"{\"1\":[0,5]}", bad[i]};
        struct router_merged m;
        assert_int_equal(merge_events(2, as_of, claims, &m), -DS_ECORRUPT);
        assert_non_null(strstr(m.error, "claims"));
        assert_null(m.claims.items);
        assert_int_equal(m.claims.count, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_router_owner_partition_named_twice),
        cmocka_unit_test(test_router_owner_behind_frontier),
        cmocka_unit_test(test_router_owner_events_model_not_marked),
        cmocka_unit_test(test_router_owner_claims_parsed_per_member),
        cmocka_unit_test(test_router_owner_claims_missing_or_empty),
        cmocka_unit_test(test_router_owner_claims_overlap),
        cmocka_unit_test(test_router_owner_claims_open_and_empty),
        cmocka_unit_test(test_router_owner_claims_frontier),
        cmocka_unit_test(test_router_owner_claims_refused_when_malformed),
        cmocka_unit_test(test_router_owner_issue_texts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
