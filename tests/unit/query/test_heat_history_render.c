/*
 * Unit tests of query/heat_history_render.c: the /v1/heat/history document from a hand-made
 * copy of the history: days' arrays with zeros for the shards nobody wrote, columns oldest
 * first, growths with their heat second, null before any second, and the bound.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "query/query.h"
#include "tests/support/events.h"

struct fixture {
    struct shard_heat_history_view view;
    struct shard_heat_cell cells[8];
    char doc[4096];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

static const struct query_heat_history_scale scale = {
    .seconds = 300, .capacity_eps = 1000, .max_shards = 256};

static void test_heat_history_render_columns_days_and_growths(void **state)
{
    /* Two columns and an empty one between, which the document leaves out; the first has two
     * days, one with shards 0, 2 and 3 (shard 1 is a zero), the last one day; the document's
     * and each column's revision (the first column amended after the last); a growth with its
     * heat second, reason escaped. */
    struct fixture *f = *state;
    int32_t day = test_day_of("2026-01-21");
    struct shard_heat_history_view *v = &f->view;
    v->second = 1769000105;
    v->revision = 42;
    f->cells[0] = (struct shard_heat_cell){.day = day, .shard = 0, .events = 812};
    f->cells[1] = (struct shard_heat_cell){.day = day, .shard = 2, .events = 7};
    f->cells[2] = (struct shard_heat_cell){.day = day, .shard = 3, .events = 803};
    f->cells[3] = (struct shard_heat_cell){.day = day + 1, .shard = 0, .events = 3};
    f->cells[4] = (struct shard_heat_cell){.day = day, .shard = 1, .events = 4294967295u};
    v->column_count = 3;
    v->columns[0] = (struct shard_heat_column){
        .t = 1769000100, .revision = 42, .first_cell = 0, .cell_count = 4};
    v->columns[1] = (struct shard_heat_column){
        .t = 1769000103, .revision = 40, .first_cell = 4, .cell_count = 0};
    v->columns[2] = (struct shard_heat_column){
        .t = 1769000104, .revision = 41, .first_cell = 4, .cell_count = 1};
    v->cell_count = 5;
    v->growth_count = 1;
    v->growths[0] = (struct shard_growth){
        .day = day, .from = 4, .to = 8, .t = 1769000104, .at_ms = 1796083203120};
    strcpy(v->growths[0].reason, "5210 events/s \"over\" 5 s");
    size_t bound = query_heat_history_json_bound(v, f->cells);
    int64_t n = query_heat_history_json(v, f->cells, &scale, f->doc, sizeof(f->doc));
    assert_true(n > 0);
    assert_true((size_t)n <= bound);
    assert_string_equal(
        f->doc,
        "{\"version\":1,\"second\":1769000105,\"seconds\":300,\"shard_capacity_eps\":1000,"
        "\"max_shards\":256,\"revision\":42,\"columns\":[{\"t\":1769000100,\"revision\":42,"
        "\"days\":{\"2026-01-21\":[812,0,7,803],\"2026-01-22\":[3]}},{\"t\":1769000104,"
        "\"revision\":41,\"days\":{\"2026-01-21\":[0,4294967295]}}],"
        "\"growths\":[{\"t\":1769000104,\"day\":\"2026-01-21\",\"from\":4,\"to\":8,"
        "\"at\":\"2026-12-01T00:00:03.120Z\",\"reason\":\"5210 events/s \\\"over\\\" 5 s\"}]}");
    assert_null(strchr(f->doc, '\n'));
    /* One byte short of the document: -ENOSPC. */
    assert_int_equal(query_heat_history_json(v, f->cells, &scale, f->doc, (size_t)n), -ENOSPC);
}

static void test_heat_history_render_null_before_any_second(void **state)
{
    /* Nothing recorded yet: second null, empty lists. */
    struct fixture *f = *state;
    f->view.second = -1;
    int64_t n = query_heat_history_json(&f->view, NULL, &scale, f->doc, sizeof(f->doc));
    assert_true(n > 0);
    assert_string_equal(f->doc, "{\"version\":1,\"second\":null,\"seconds\":300,"
                                "\"shard_capacity_eps\":1000,\"max_shards\":256,\"revision\":0,"
                                "\"columns\":[],"
                                "\"growths\":[]}");
    assert_true((size_t)n <= query_heat_history_json_bound(&f->view, NULL));
}

static void test_heat_history_render_bound_covers_the_widest_day(void **state)
{
    /* A day whose only cell is its last shard of SHARD_COUNT_MAX renders every shard before it:
     * the bound counts them, and the document fits it exactly or under. */
    struct fixture *f = *state;
    size_t cap = 64u * 1024u;
    char *doc = malloc(cap);
    assert_non_null(doc);
    f->view.second = 10;
    f->cells[0] = (struct shard_heat_cell){
        .day = test_day_of("2026-01-21"), .shard = SHARD_COUNT_MAX - 1u, .events = 4294967295u};
    f->view.column_count = 1;
    f->view.columns[0] = (struct shard_heat_column){.t = 9, .first_cell = 0, .cell_count = 1};
    f->view.cell_count = 1;
    size_t bound = query_heat_history_json_bound(&f->view, f->cells);
    int64_t n = query_heat_history_json(&f->view, f->cells, &scale, doc, cap);
    assert_true(n > 0);
    assert_true((size_t)n <= bound);
    assert_true(bound < cap);
    assert_non_null(strstr(doc, "[0,0,0,"));
    assert_non_null(strstr(doc, ",4294967295]"));
    free(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_heat_history_render_columns_days_and_growths, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_history_render_null_before_any_second, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_history_render_bound_covers_the_widest_day, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
