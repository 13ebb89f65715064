/*
 * Unit tests of router/router_owner.c over merged count answers (router_merge_count): in the
 * orders model a partition two members name is refused (its orders would be summed twice), a
 * partition behind the furthest offset a complete answer of the group reached is refused (a new
 * owner still re-reading it), the frontier only rises, and the merge marks the orders model and
 * the partitions named twice.
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

/* A member's count answer: count, the model ("" leaves it out), and its as_of object. */
static void answer(char *dst, size_t cap, uint64_t count, const char *model, const char *as_of)
{
    char model_field[48] = "";
    if (model[0] != '\0') {
        snprintf(model_field, sizeof(model_field), ",\"model\":\"%s\"", model);
    }
    int n = snprintf(dst, cap,
                     "{\"day\":\"2026-01-01\",\"to\":\"2026-01-01\",\"count\":%llu,"
                     "\"amount_sum\":\"1.0000\",\"partitions\":1,\"blocks\":1,\"bytes\":10,"
                     "\"damaged_blocks\":0%s,\"as_of\":%s}",
                     (unsigned long long)count, model_field, as_of);
    assert_true(n > 0 && (size_t)n < cap);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_router_owner_partition_named_twice),
        cmocka_unit_test(test_router_owner_behind_frontier),
        cmocka_unit_test(test_router_owner_events_model_not_marked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
