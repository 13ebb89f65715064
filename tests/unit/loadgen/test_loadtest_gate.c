/*
 * Unit tests of loadgen/loadtest_gate.c: the --fail-if grammar (every operator, the x and %
 * forms, spaces, and each way a threshold is malformed), the evaluation (each operator on both
 * sides of its limit, ratios and percentages against a baseline, a baseline of 0, and every
 * reason a threshold cannot be checked), the summary derived from a schema-1 run, and the gate
 * as a whole over documents: breaches counted, verdicts and the baseline's summary written into
 * the document, a strategy missing from the baseline said, bad baselines refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "loadgen/loadtest_gate.h"

/* ---- parsing -------------------------------------------------------------------------------- */

static void parse_ok(const char *text, const char *field, enum gate_op op, enum gate_form form,
                     double number)
{
    struct gate_expr e;
    char why[256] = "";
    assert_int_equal(gate_expr_parse(text, &e, why, sizeof(why)), 0);
    assert_string_equal(e.field, field);
    assert_int_equal(e.op, op);
    assert_int_equal(e.form, form);
    assert_true(e.number == number);
}

static void parse_fails(const char *text, const char *why_has)
{
    struct gate_expr e;
    memset(&e, 0x5A, sizeof(e));
    struct gate_expr before = e;
    char why[256] = "";
    assert_int_equal(gate_expr_parse(text, &e, why, sizeof(why)), -DS_EUSAGE);
    if (strstr(why, why_has) == NULL) {
        fail_msg("'%s': reason '%s' lacks '%s'", text, why, why_has);
    }
    assert_memory_equal(&e, &before, sizeof(e)); /* untouched on failure */
}

static void test_loadtest_gate_parse_every_operator(void **state)
{
    (void)state;
    /* Each operator, including the two-character ones that start like a one-character one. */
    parse_ok("over_capacity_seconds>0", "over_capacity_seconds", GATE_GT, GATE_ABSOLUTE, 0);
    parse_ok("count_p99_us>=2000", "count_p99_us", GATE_GE, GATE_ABSOLUTE, 2000);
    parse_ok("events_per_s<9000.5", "events_per_s", GATE_LT, GATE_ABSOLUTE, 9000.5);
    parse_ok("lag_p99_ms<=500", "lag_p99_ms", GATE_LE, GATE_ABSOLUTE, 500);
    parse_ok("query_errors==0", "query_errors", GATE_EQ, GATE_ABSOLUTE, 0);
    parse_ok("growths!=3", "growths", GATE_NE, GATE_ABSOLUTE, 3);
}

static void test_loadtest_gate_parse_relative_forms_and_spaces(void **state)
{
    (void)state;
    /* x and % suffixes, negative numbers, exponents; spaces anywhere are ignored. */
    parse_ok("count_p99_us>1.2x", "count_p99_us", GATE_GT, GATE_RATIO, 1.2);
    parse_ok("events_per_s<-10%", "events_per_s", GATE_LT, GATE_PERCENT, -10);
    parse_ok(" count_p99_us >  2e3 ", "count_p99_us", GATE_GT, GATE_ABSOLUTE, 2000);
    parse_ok("lag_p99_ms >= +25 %", "lag_p99_ms", GATE_GE, GATE_PERCENT, 25);
    struct gate_expr e;
    char why[64];
    assert_int_equal(gate_expr_parse("lag_p99_ms >= 25 %", &e, why, sizeof(why)), 0);
    assert_string_equal(e.text, "lag_p99_ms>=25%"); /* as written, spaces removed */
}

static void test_loadtest_gate_parse_rejects_malformed(void **state)
{
    (void)state;
    /* Every malformed threshold is refused with a reason that names what is wrong. */
    parse_fails("", "field name");
    parse_fails(">3", "field name");
    parse_fails("Count_p99_us>3", "field name");
    parse_fails("count_p99_us", "no operator after count_p99_us");
    parse_fails("count_p99_us=3", "no operator after count_p99_us");
    parse_fails("count_p99_us=>3", "no operator after count_p99_us");
    parse_fails("count_p99_us>", "no number after count_p99_us>");
    parse_fails("count_p99_us>x", "no number");
    parse_fails("count_p99_us>-", "no number");
    parse_fails("count_p99_us>.", "no number");
    parse_fails("count_p99_us>1e999", "no number");
    parse_fails("count_p99_us>inf", "no number");
    parse_fails("count_p99_us>0x10", "unexpected '10'"); /* 0, then x, then junk */
    parse_fails("count_p99_us>1.2.3", "no number");
    parse_fails("count_p99_us>3ms", "unexpected 'ms'");
    parse_fails("count_p99_us>3x%", "unexpected '%'");
    parse_fails("count_p99_us>3;rm", "unexpected ';rm'");
    char long_field[100];
    memset(long_field, 'a', sizeof(long_field) - 1);
    long_field[sizeof(long_field) - 1] = '\0';
    parse_fails(long_field, "field name");
    char long_text[300];
    memset(long_text, '1', sizeof(long_text) - 1);
    memcpy(long_text, "growths>", 8);
    long_text[sizeof(long_text) - 1] = '\0';
    parse_fails(long_text, "longer than");
}

static void test_loadtest_gate_field_table(void **state)
{
    (void)state;
    /* Names are unique, the ones the docs promise exist, a wrong one is unknown. */
    size_t n = 0;
    const struct gate_field *f = gate_fields(&n);
    assert_true(n >= 20);
    for (size_t i = 0; i < n; i++) {
        assert_ptr_equal(gate_field_find(f[i].name), &f[i]);
        assert_true(strlen(f[i].name) < GATE_FIELD_NAME_SIZE);
    }
    const char *promised[] = {"over_capacity_seconds", "events_per_s",     "count_p50_us",
                              "count_p99_us",          "lag_max_messages", "lag_p99_ms",
                              "hottest_share_max",     "growths"};
    for (size_t i = 0; i < sizeof(promised) / sizeof(promised[0]); i++) {
        assert_non_null(gate_field_find(promised[i]));
    }
    assert_null(gate_field_find("count_p99"));
    assert_null(gate_field_find(""));
}

/* ---- evaluation ----------------------------------------------------------------------------- */

static enum gate_state eval(const char *text, const char *summary, const char *baseline,
                            struct gate_verdict *v)
{
    struct gate_expr e;
    char why[256];
    assert_int_equal(gate_expr_parse(text, &e, why, sizeof(why)), 0);
    json_t *s = json_loads(summary, 0, NULL);
    json_t *b = baseline != NULL ? json_loads(baseline, 0, NULL) : NULL;
    assert_non_null(s);
    assert_true(baseline == NULL || b != NULL);
    gate_expr_eval(&e, s, b, v);
    json_decref(s);
    json_decref(b);
    return v->state;
}

static void test_loadtest_gate_eval_absolute(void **state)
{
    (void)state;
    /* Each operator just on both sides of its limit. */
    struct gate_verdict v;
    const char *s = "{\"over_capacity_seconds\": 12, \"count_p99_us\": 2000.5}";
    assert_int_equal(eval("over_capacity_seconds>0", s, NULL, &v), GATE_BREACHED);
    assert_true(v.value == 12 && v.limit == 0 && v.compared == 12);
    assert_int_equal(eval("over_capacity_seconds>12", s, NULL, &v), GATE_PASSED);
    assert_int_equal(eval("over_capacity_seconds>=12", s, NULL, &v), GATE_BREACHED);
    assert_int_equal(eval("over_capacity_seconds>=13", s, NULL, &v), GATE_PASSED);
    assert_int_equal(eval("count_p99_us<2001", s, NULL, &v), GATE_BREACHED);
    assert_int_equal(eval("count_p99_us<2000.5", s, NULL, &v), GATE_PASSED);
    assert_int_equal(eval("count_p99_us<=2000.5", s, NULL, &v), GATE_BREACHED);
    assert_int_equal(eval("count_p99_us<=2000", s, NULL, &v), GATE_PASSED);
    assert_int_equal(eval("over_capacity_seconds==12", s, NULL, &v), GATE_BREACHED);
    assert_int_equal(eval("over_capacity_seconds==11", s, NULL, &v), GATE_PASSED);
    assert_int_equal(eval("over_capacity_seconds!=11", s, NULL, &v), GATE_BREACHED);
    assert_int_equal(eval("over_capacity_seconds!=12", s, NULL, &v), GATE_PASSED);
    /* An absolute threshold ignores the baseline, present or not. */
    assert_int_equal(eval("over_capacity_seconds>0", s, "{\"over_capacity_seconds\": 99}", &v),
                     GATE_BREACHED);
    assert_true(v.baseline == 99);
}

static void test_loadtest_gate_eval_relative(void **state)
{
    (void)state;
    /* x: against NUMBER times the baseline's; %: the change in percent. */
    struct gate_verdict v;
    const char *now = "{\"count_p99_us\": 1300, \"events_per_s\": 8900}";
    const char *old = "{\"count_p99_us\": 1000, \"events_per_s\": 10000}";
    assert_int_equal(eval("count_p99_us>1.2x", now, old, &v), GATE_BREACHED);
    assert_true(fabs(v.limit - 1200) < 1e-9);
    assert_true(v.value == 1300 && v.baseline == 1000);
    assert_int_equal(eval("count_p99_us>1.3x", now, old, &v), GATE_PASSED);
    assert_int_equal(eval("events_per_s<-10%", now, old, &v), GATE_BREACHED);
    assert_true(fabs(v.compared - -11.0) < 1e-9);
    assert_true(v.limit == -10);
    assert_int_equal(eval("events_per_s<-12%", now, old, &v), GATE_PASSED);
    assert_int_equal(eval("count_p99_us>=30%", now, old, &v), GATE_BREACHED);
    assert_int_equal(eval("count_p99_us>30%", now, old, &v), GATE_PASSED);
    /* A negative baseline: the change is measured against its magnitude. */
    assert_int_equal(
        eval("count_p99_us>100%", "{\"count_p99_us\": 1}", "{\"count_p99_us\": -1}", &v),
        GATE_BREACHED);
    assert_true(fabs(v.compared - 200.0) < 1e-9);
}

static void test_loadtest_gate_eval_baseline_zero(void **state)
{
    (void)state;
    /* From 0: any rise is +inf percent, no change is 0%; x against 0 is against 0. */
    struct gate_verdict v;
    const char *old = "{\"over_capacity_seconds\": 0}";
    assert_int_equal(eval("over_capacity_seconds>50%", "{\"over_capacity_seconds\": 1}", old, &v),
                     GATE_BREACHED);
    assert_true(isinf(v.compared) && v.compared > 0);
    assert_int_equal(eval("over_capacity_seconds>50%", "{\"over_capacity_seconds\": 0}", old, &v),
                     GATE_PASSED);
    assert_true(v.compared == 0);
    assert_int_equal(eval("over_capacity_seconds<-50%", "{\"over_capacity_seconds\": -1}", old, &v),
                     GATE_BREACHED);
    assert_int_equal(eval("over_capacity_seconds>2x", "{\"over_capacity_seconds\": 1}", old, &v),
                     GATE_BREACHED);
    assert_int_equal(eval("over_capacity_seconds>2x", "{\"over_capacity_seconds\": 0}", old, &v),
                     GATE_PASSED);
}

static void test_loadtest_gate_eval_unchecked(void **state)
{
    (void)state;
    /* Nothing to compare is never a pass: a missing or null value, no baseline run, or a
     * baseline that did not measure the field. */
    struct gate_verdict v;
    assert_int_equal(eval("count_p99_us>1", "{\"count_p99_us\": null}", NULL, &v), GATE_UNCHECKED);
    assert_string_equal(v.why, "not measured in this run");
    assert_true(isnan(v.value));
    assert_int_equal(eval("count_p99_us>1", "{}", NULL, &v), GATE_UNCHECKED);
    assert_int_equal(eval("count_p99_us>1", "{\"count_p99_us\": \"12\"}", NULL, &v),
                     GATE_UNCHECKED);
    assert_int_equal(eval("count_p99_us>1.2x", "{\"count_p99_us\": 5}", NULL, &v), GATE_UNCHECKED);
    assert_string_equal(v.why, "the baseline has no run of this strategy");
    assert_int_equal(
        eval("count_p99_us>10%", "{\"count_p99_us\": 5}", "{\"count_p99_us\": null}", &v),
        GATE_UNCHECKED);
    assert_string_equal(v.why, "not measured in the baseline's run");
}

/* ---- the summary ---------------------------------------------------------------------------- */

/* A run as a schema-1 report.json holds it: no summary, the final shards under "shards". */
static const char *const run_v1 =
    "{\"strategy\": \"fixed:1\", \"events_produced\": 600000, \"events_stored\": 600000,"
    " \"duration_s\": 61.2, \"throughput_eps\": 9803.9,"
    " \"hot_partition\": {\"key\": \"DAY#2026-01-21#0\", \"peak_eps\": 10012,"
    "                     \"capacity_factor\": 10.012},"
    " \"over_capacity_seconds\": 58, \"count_p99_us\": null, \"growths\": [{}, {}],"
    " \"warnings\": [], \"shards\": {\"2026-01-20\": 1, \"2026-01-21\": 16},"
    " \"overhead\": {\"sampler_cpu_share\": 0.0007},"
    " \"series\": {\"hottest_share\": [0.5, null, 0.97, 0.2]}}";

static void test_loadtest_gate_summary_from_schema1_run(void **state)
{
    (void)state;
    /* Every field is in the summary; each comes from where the table says; a field the run
     * lacks (lag_messages series, kafka share) or holds as null is null. */
    json_t *run = json_loads(run_v1, 0, NULL);
    assert_non_null(run);
    json_t *s = gate_summary_of(run);
    size_t n = 0;
    const struct gate_field *f = gate_fields(&n);
    assert_int_equal(json_object_size(s), n);
    for (size_t i = 0; i < n; i++) {
        assert_non_null(json_object_get(s, f[i].name));
    }
    assert_true(json_number_value(json_object_get(s, "events_per_s")) == 9803.9);
    assert_true(json_number_value(json_object_get(s, "hot_partition_peak_eps")) == 10012);
    assert_true(json_number_value(json_object_get(s, "hot_partition_capacity_factor")) == 10.012);
    assert_true(json_number_value(json_object_get(s, "hottest_share_max")) == 0.97);
    assert_int_equal(json_integer_value(json_object_get(s, "over_capacity_seconds")), 58);
    assert_int_equal(json_integer_value(json_object_get(s, "growths")), 2);
    assert_int_equal(json_integer_value(json_object_get(s, "warnings")), 0);
    assert_int_equal(json_integer_value(json_object_get(s, "final_shards_max")), 16);
    assert_true(json_number_value(json_object_get(s, "sampler_cpu_share")) == 0.0007);
    assert_true(json_is_null(json_object_get(s, "count_p99_us")));
    assert_true(json_is_null(json_object_get(s, "lag_max_messages")));
    assert_true(json_is_null(json_object_get(s, "kafka_hottest_share")));
    assert_true(json_is_null(json_object_get(s, "send_delay_p99_ms"))); /* absent, not 0 */
    assert_true(json_is_null(json_object_get(s, "durable_max_ms")));
    json_decref(s);
    /* A run with a summary object (schema 2) is read from it, not derived again. */
    json_object_set_new(run, "summary", json_pack("{s:i}", "growths", 7));
    s = gate_summary_of(run);
    assert_int_equal(json_integer_value(json_object_get(s, "growths")), 7);
    json_decref(s);
    s = gate_summary_derive(run);
    assert_int_equal(json_integer_value(json_object_get(s, "growths")), 2);
    json_decref(s);
    json_decref(run);
}

static void test_loadtest_gate_summary_latency_fields(void **state)
{
    /* Intent: the latency figures come from the run's nested "latency" object, one figure each,
     * a null figure stays null, and --fail-if 'send_delay_p99_ms>50' reads them. */
    (void)state;
    json_t *run = json_pack("{s:{s:{s:f, s:f}, s:{s:f, s:n}, s:{s:f}}}", "latency", "send_delay",
                            "p99_ms", 12.5, "max_ms", 80.0, "durable", "p50_ms", 40.0, "p999_ms",
                            "count_query", "max_ms", 3.0);
    assert_non_null(run);
    json_t *s = gate_summary_derive(run);
    assert_true(json_number_value(json_object_get(s, "send_delay_p99_ms")) == 12.5);
    assert_true(json_number_value(json_object_get(s, "send_delay_max_ms")) == 80.0);
    assert_true(json_number_value(json_object_get(s, "durable_p50_ms")) == 40.0);
    assert_true(json_is_null(json_object_get(s, "durable_p999_ms")));
    assert_true(json_is_null(json_object_get(s, "queryable_p99_ms")));
    assert_true(json_number_value(json_object_get(s, "count_max_ms")) == 3.0);
    struct gate_expr e;
    char why[256] = "";
    assert_int_equal(gate_expr_parse("send_delay_p99_ms>50", &e, why, sizeof(why)), 0);
    assert_non_null(gate_field_find(e.field));
    struct gate_verdict v;
    gate_expr_eval(&e, s, NULL, &v);
    assert_int_equal(v.state, GATE_PASSED);
    assert_int_equal(gate_expr_parse("send_delay_max_ms>50", &e, why, sizeof(why)), 0);
    gate_expr_eval(&e, s, NULL, &v);
    assert_int_equal(v.state, GATE_BREACHED);
    assert_int_equal(gate_expr_parse("durable_p999_ms>50", &e, why, sizeof(why)), 0);
    gate_expr_eval(&e, s, NULL, &v);
    assert_int_equal(v.state, GATE_UNCHECKED);
    json_decref(s);
    json_decref(run);
}

static void test_loadtest_gate_summary_advice_fields(void **state)
{
    /* Intent: a CI job can fail on the nodes' advice: advice_count is every (case, subject) the
     * run recorded, each advice_<case> the subjects of that case; an empty advice array is 0
     * (nothing advised), a run without one (an older report) is null, so a threshold on it is
     * unchecked rather than passed. */
    (void)state;
    json_t *run = json_loads("{\"advice\": ["
                             " {\"case\": \"hot_customer\", \"subject\": \"customer 7\"},"
                             " {\"case\": \"kafka_partition_skew\", \"subject\": \"partition 3\"},"
                             " {\"case\": \"kafka_partition_skew\", \"subject\": \"partition 5\"},"
                             " {\"case\": \"day_at_max_shards\", \"subject\": \"2026-01-21\"},"
                             " {\"subject\": \"no case\"}]}",
                             0, NULL);
    assert_non_null(run);
    json_t *s = gate_summary_derive(run);
    assert_int_equal(json_integer_value(json_object_get(s, "advice_count")), 5);
    assert_int_equal(json_integer_value(json_object_get(s, "advice_kafka_partition_skew")), 2);
    assert_int_equal(json_integer_value(json_object_get(s, "advice_hot_customer")), 1);
    assert_int_equal(json_integer_value(json_object_get(s, "advice_day_at_max_shards")), 1);
    struct gate_verdict v;
    assert_int_equal(eval("advice_hot_customer>0", "{\"advice_hot_customer\": 1}", NULL, &v),
                     GATE_BREACHED);
    json_decref(s);
    json_object_set_new(run, "advice", json_array());
    s = gate_summary_derive(run);
    const char *cases[] = {"advice_count", "advice_kafka_partition_skew", "advice_hot_customer",
                           "advice_day_at_max_shards"};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_true(json_is_integer(json_object_get(s, cases[i])));
        assert_int_equal(json_integer_value(json_object_get(s, cases[i])), 0);
    }
    json_decref(s);
    json_object_del(run, "advice");
    s = gate_summary_derive(run);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_true(json_is_null(json_object_get(s, cases[i])));
    }
    struct gate_expr e;
    char why[256] = "";
    assert_int_equal(gate_expr_parse("advice_hot_customer>0", &e, why, sizeof(why)), 0);
    gate_expr_eval(&e, s, NULL, &v);
    assert_int_equal(v.state, GATE_UNCHECKED);
    json_decref(s);
    json_decref(run);
}

static void test_loadtest_gate_field_names_lists_every_field(void **state)
{
    /* Intent: the answer to an unknown --fail-if field names every field, the advice ones
     * included, and the whole list fits the line it is printed in; a buffer too small for it
     * says so and keeps only whole names. */
    (void)state;
    char names[REPORT_TEXT_SIZE];
    size_t len = gate_field_names(names, sizeof(names));
    assert_true(len < sizeof(names));
    assert_int_equal(strlen(names), len);
    size_t n = 0;
    const struct gate_field *f = gate_fields(&n);
    for (size_t i = 0; i < n; i++) {
        char word[GATE_FIELD_NAME_SIZE + 2];
        snprintf(word, sizeof(word), " %s", f[i].name);
        if (i == 0 ? strncmp(names, f[i].name, strlen(f[i].name)) != 0
                   : strstr(names, word) == NULL) {
            fail_msg("'%s' lacks %s", names, f[i].name);
        }
    }
    assert_non_null(strstr(names, " advice_hot_customer"));
    char small[40];
    assert_int_equal(gate_field_names(small, sizeof(small)), sizeof(small));
    assert_string_equal(small, "events_produced events_stored");
}

/* ---- the gate over documents ------------------------------------------------------------ */

struct fixture {
    char dir[64];
    char path[96];
};

static int fixture_setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    snprintf(fx->dir, sizeof(fx->dir), "/tmp/test_loadtest_gate.XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    snprintf(fx->path, sizeof(fx->path), "%s/report.json", fx->dir);
    *state = fx;
    return 0;
}

static int fixture_teardown(void **state)
{
    struct fixture *fx = *state;
    unlink(fx->path);
    rmdir(fx->dir);
    free(fx);
    return 0;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

/* The baseline: schema 1, one run of strategy "fixed:1". */
static const char *const baseline_v1 =
    "{\"version\": 1, \"runs\": [{\"strategy\": \"fixed:1\", \"throughput_eps\": 10000,"
    " \"over_capacity_seconds\": 40, \"count_p99_us\": 1000}]}";

/* This run: two strategies, one of them in the baseline. */
static const char *const doc_v2 =
    "{\"schema\": 2, \"runs\": ["
    " {\"strategy\": \"fixed:1\", \"summary\": {\"events_per_s\": 8500, "
    "  \"over_capacity_seconds\": 58, \"count_p99_us\": 1100}},"
    " {\"strategy\": \"adaptive\", \"summary\": {\"events_per_s\": 9900, "
    "  \"over_capacity_seconds\": 0, \"count_p99_us\": 900}}]}";

/* Runs the gate over doc_v2; returns the breaches and the document (caller frees). */
static size_t apply(const char *baseline, const char *const *exprs, uint32_t count, json_t **doc,
                    char *out, size_t out_size)
{
    struct loadgen_loadtest_gate *g = NULL;
    assert_int_equal(loadgen_loadtest_gate_create(baseline, exprs, count, &g), 0);
    assert_non_null(g);
    *doc = json_loads(doc_v2, 0, NULL);
    assert_non_null(*doc);
    FILE *f = fmemopen(out, out_size, "w");
    assert_non_null(f);
    size_t breaches = gate_apply(g, *doc, f);
    assert_int_equal(fclose(f), 0);
    loadgen_loadtest_gate_destroy(g);
    return breaches;
}

static void test_loadtest_gate_apply_against_baseline(void **state)
{
    /* Over two runs: the baseline's run of the same strategy is compared, the other is said to
     * be missing and its relative threshold unchecked; breaches and verdicts are written. */
    struct fixture *fx = *state;
    write_text(fx->path, baseline_v1);
    const char *exprs[] = {"over_capacity_seconds>0", "events_per_s<-10%", "count_p99_us>1.2x"};
    json_t *doc = NULL;
    static char out[16384];
    size_t breaches = apply(fx->path, exprs, 3, &doc, out, sizeof(out));
    /* fixed:1: 58 > 0 breached; 8500 is -15% breached; 1100 < 1200 passed.
     * adaptive: 0 passed; both relative ones unchecked (not in the baseline). */
    assert_int_equal(breaches, 4);
    json_t *gate = json_object_get(doc, "gate");
    assert_true(json_is_false(json_object_get(gate, "passed")));
    assert_int_equal(json_integer_value(json_object_get(gate, "breaches")), 4);
    assert_string_equal(json_string_value(json_object_get(gate, "baseline")), fx->path);
    json_t *verdicts = json_object_get(gate, "verdicts");
    assert_int_equal(json_array_size(verdicts), 6);
    const char *states[] = {"breached", "breached", "passed", "passed", "unchecked", "unchecked"};
    for (size_t i = 0; i < 6; i++) {
        json_t *v = json_array_get(verdicts, i);
        assert_string_equal(json_string_value(json_object_get(v, "state")), states[i]);
        assert_int_equal(json_integer_value(json_object_get(v, "run")), i < 3 ? 1 : 2);
    }
    json_t *v1 = json_array_get(verdicts, 1);
    assert_true(json_number_value(json_object_get(v1, "baseline")) == 10000);
    assert_true(fabs(json_number_value(json_object_get(v1, "compared")) - -15.0) < 1e-9);
    /* The baseline's summary is kept in the run that has one, null in the other. */
    json_t *runs = json_object_get(doc, "runs");
    json_t *old = json_object_get(json_array_get(runs, 0), "baseline_summary");
    assert_int_equal(json_integer_value(json_object_get(old, "over_capacity_seconds")), 40);
    assert_true(json_is_null(json_object_get(json_array_get(runs, 1), "baseline_summary")));
    /* Printed: the comparison with its change, the missing strategy, each verdict. */
    assert_non_null(strstr(out, "run 1 (fixed:1) against the baseline"));
    assert_non_null(strstr(out, "-1,500 (-15%)"));
    assert_non_null(strstr(out, "+18 (+45%)"));
    assert_non_null(strstr(out, "run 2 (adaptive): not in the baseline"));
    assert_non_null(strstr(out, "'over_capacity_seconds>0': over_capacity_seconds = 58: BREACHED"));
    assert_non_null(strstr(out, "gate: FAILED"));
    assert_non_null(strstr(out, "run 2 (adaptive): --fail-if 'events_per_s<-10%': events_per_s = "
                                "9,900: the baseline has no run of this strategy: UNCHECKED"));
    json_decref(doc);
}

static void test_loadtest_gate_apply_unmeasured_fails(void **state)
{
    /* A figure neither run measured: each run's threshold is unchecked, and says why. */
    (void)state;
    const char *exprs[] = {"lag_p99_ms>500"};
    json_t *doc = NULL;
    static char out[4096];
    assert_int_equal(apply(NULL, exprs, 1, &doc, out, sizeof(out)), 2);
    assert_non_null(strstr(out, "run 1 (fixed:1): --fail-if 'lag_p99_ms>500': lag_p99_ms: not "
                                "measured in this run: UNCHECKED"));
    json_t *v = json_array_get(json_object_get(json_object_get(doc, "gate"), "verdicts"), 1);
    assert_string_equal(json_string_value(json_object_get(v, "state")), "unchecked");
    assert_true(json_is_null(json_object_get(v, "value")));
    json_decref(doc);
}

static void test_loadtest_gate_apply_passes_within_thresholds(void **state)
{
    /* Thresholds every run holds: no breach, "passed" in the document and the output. */
    struct fixture *fx = *state;
    (void)fx;
    const char *exprs[] = {"over_capacity_seconds>100", "count_p99_us>=2000"};
    json_t *doc = NULL;
    static char out[4096];
    assert_int_equal(apply(NULL, exprs, 2, &doc, out, sizeof(out)), 0);
    json_t *gate = json_object_get(doc, "gate");
    assert_true(json_is_true(json_object_get(gate, "passed")));
    assert_true(json_is_null(json_object_get(gate, "baseline")));
    assert_int_equal(json_array_size(json_object_get(gate, "fail_if")), 2);
    assert_non_null(strstr(out, "gate: passed"));
    json_decref(doc);
}

static void test_loadtest_gate_apply_advice_against_baseline(void **state)
{
    /* Intent: --baseline shows advice that appeared since the baseline (0 -> 1), and
     * --fail-if 'advice_hot_customer>0' breaches the run that has it, naming the field. */
    struct fixture *fx = *state;
    write_text(fx->path, "{\"schema\": 3, \"runs\": [{\"strategy\": \"adaptive, key customer\","
                         " \"advice\": []}]}");
    const char *exprs[] = {"advice_hot_customer>0", "advice_day_at_max_shards>0"};
    struct loadgen_loadtest_gate *g = NULL;
    assert_int_equal(loadgen_loadtest_gate_create(fx->path, exprs, 2, &g), 0);
    json_t *doc = json_loads("{\"schema\": 3, \"runs\": [{\"strategy\": \"adaptive, key "
                             "customer\", \"advice\": [{\"case\": \"hot_customer\", "
                             "\"subject\": \"customer 7\"}]}]}",
                             0, NULL);
    assert_non_null(doc);
    static char out[16384];
    FILE *f = fmemopen(out, sizeof(out), "w");
    assert_non_null(f);
    assert_int_equal(gate_apply(g, doc, f), 1);
    assert_int_equal(fclose(f), 0);
    loadgen_loadtest_gate_destroy(g);
    if (strstr(out, "  advice_hot_customer ") == NULL) {
        fail_msg("no advice_hot_customer comparison line in:\n%s", out);
    }
    const char *line = strstr(out, "  advice_hot_customer ");
    assert_non_null(strstr(line, "+1\n"));
    assert_non_null(strstr(out, "'advice_hot_customer>0': advice_hot_customer = 1: BREACHED"));
    assert_non_null(
        strstr(out, "'advice_day_at_max_shards>0': advice_day_at_max_shards = 0: passed"));
    json_t *old =
        json_object_get(json_array_get(json_object_get(doc, "runs"), 0), "baseline_summary");
    assert_int_equal(json_integer_value(json_object_get(old, "advice_hot_customer")), 0);
    json_decref(doc);
}

static void test_loadtest_gate_create_refuses(void **state)
{
    /* Usage errors before any run: unknown field, relative form without a baseline, too many
     * thresholds, and baselines that are missing, not JSON, not a report, or newer. */
    struct fixture *fx = *state;
    struct loadgen_loadtest_gate *g = NULL;
    const char *unknown[] = {"count_p99>1"};
    assert_int_equal(loadgen_loadtest_gate_create(NULL, unknown, 1, &g), -DS_EUSAGE);
    const char *relative[] = {"count_p99_us>1.2x"};
    assert_int_equal(loadgen_loadtest_gate_create(NULL, relative, 1, &g), -DS_EUSAGE);
    const char *malformed[] = {"count_p99_us>>1"};
    assert_int_equal(loadgen_loadtest_gate_create(NULL, malformed, 1, &g), -DS_EUSAGE);
    const char *many[LOADGEN_LOADTEST_GATE_EXPRS_MAX + 1];
    for (size_t i = 0; i < LOADGEN_LOADTEST_GATE_EXPRS_MAX + 1; i++) {
        many[i] = "growths>1";
    }
    assert_int_equal(loadgen_loadtest_gate_create(NULL, many, LOADGEN_LOADTEST_GATE_EXPRS_MAX, &g),
                     0);
    loadgen_loadtest_gate_destroy(g);
    g = NULL;
    assert_int_equal(
        loadgen_loadtest_gate_create(NULL, many, LOADGEN_LOADTEST_GATE_EXPRS_MAX + 1, &g),
        -DS_EUSAGE);
    assert_int_equal(loadgen_loadtest_gate_create(fx->path, NULL, 0, &g), -DS_EUSAGE); /* none */
    const char *bad[] = {"{\"runs\": [",
                         "[]",
                         "{\"runs\": {}}",
                         "{\"schema\": 4, \"runs\": []}",
                         "{\"schema\": \"2\", \"runs\": []}",
                         "{\"schema\": 0, \"runs\": []}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        write_text(fx->path, bad[i]);
        assert_int_equal(loadgen_loadtest_gate_create(fx->path, NULL, 0, &g), -DS_EUSAGE);
    }
    assert_null(g); /* untouched on every failure */
    write_text(fx->path, "{\"schema\": 2, \"runs\": []}");
    assert_int_equal(loadgen_loadtest_gate_create(fx->path, relative, 1, &g), 0);
    loadgen_loadtest_gate_destroy(g);
    loadgen_loadtest_gate_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loadtest_gate_parse_every_operator),
        cmocka_unit_test(test_loadtest_gate_parse_relative_forms_and_spaces),
        cmocka_unit_test(test_loadtest_gate_parse_rejects_malformed),
        cmocka_unit_test(test_loadtest_gate_field_table),
        cmocka_unit_test(test_loadtest_gate_eval_absolute),
        cmocka_unit_test(test_loadtest_gate_eval_relative),
        cmocka_unit_test(test_loadtest_gate_eval_baseline_zero),
        cmocka_unit_test(test_loadtest_gate_eval_unchecked),
        cmocka_unit_test(test_loadtest_gate_summary_from_schema1_run),
        cmocka_unit_test(test_loadtest_gate_summary_latency_fields),
        cmocka_unit_test(test_loadtest_gate_summary_advice_fields),
        cmocka_unit_test(test_loadtest_gate_field_names_lists_every_field),
        cmocka_unit_test_setup_teardown(test_loadtest_gate_apply_against_baseline, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_loadtest_gate_apply_unmeasured_fails, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_loadtest_gate_apply_passes_within_thresholds,
                                        fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_loadtest_gate_apply_advice_against_baseline,
                                        fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_loadtest_gate_create_refuses, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
