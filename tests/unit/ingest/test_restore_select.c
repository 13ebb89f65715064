/*
 * Unit tests of ingest/restore_select.c: which events read back from the topic a quarantined
 * range of the events model lost, once those the partition still holds are taken away.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "ingest/restore_select.h"

static struct ds_event event(int64_t order, int64_t amount_units)
{
    struct ds_event e = {.ts_ms = 1769036817200LL, .amount_units = amount_units};
    e.order_id.value = order;
    e.customer_id.value = 7;
    memcpy(e.status, "paid", 4);
    e.status_len = 4;
    return e;
}

static void test_restore_select_hash_tells_content_apart(void **state)
{
    /* Every stored field moves the hash; an integer and a string id of the same digits differ. */
    (void)state;
    struct ds_event a = event(1, 100);
    struct ds_event b = a;
    assert_true(restore_select_hash(&a) == restore_select_hash(&b));
    b.amount_units = 101;
    assert_true(restore_select_hash(&a) != restore_select_hash(&b));
    b = a;
    b.has_version = true;
    assert_true(restore_select_hash(&a) != restore_select_hash(&b));
    b = a;
    b.status_len = 3;
    assert_true(restore_select_hash(&a) != restore_select_hash(&b));
    b = a;
    b.order_id = (struct ds_id){.is_string = true, .len = 1, .text = "1"};
    assert_true(restore_select_hash(&a) != restore_select_hash(&b));
}

static void test_restore_select_take_is_a_multiset(void **state)
{
    /* Read back: A, B, A, C. Present: A, C, D. Left: one A (the later one) and B; D matches
     * nothing. */
    (void)state;
    struct ds_event ev[4] = {event(1, 1), event(2, 2), event(1, 1), event(3, 3)};
    struct restore_key keys[4];
    for (uint64_t i = 0; i < 4; i++) {
        keys[i] = (struct restore_key){.hash = restore_select_hash(&ev[i]), .index = i};
    }
    restore_select_sort(keys, 4);
    struct ds_event d = event(4, 4);
    assert_true(restore_select_take(keys, 4, restore_select_hash(&ev[0])));
    assert_true(restore_select_take(keys, 4, restore_select_hash(&ev[3])));
    assert_false(restore_select_take(keys, 4, restore_select_hash(&d)));
    bool left[4] = {false};
    for (uint64_t i = 0; i < 4; i++) {
        left[keys[i].index] = !keys[i].taken;
    }
    assert_false(left[0]); /* the first A, in read order, went to the present copy */
    assert_true(left[1]);
    assert_true(left[2]);
    assert_false(left[3]);
    /* A third A present finds the second read copy; a fourth none. */
    assert_true(restore_select_take(keys, 4, restore_select_hash(&ev[0])));
    assert_false(restore_select_take(keys, 4, restore_select_hash(&ev[0])));
    assert_false(restore_select_take(keys, 0, restore_select_hash(&ev[0])));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restore_select_hash_tells_content_apart),
        cmocka_unit_test(test_restore_select_take_is_a_multiset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
