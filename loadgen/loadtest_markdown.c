/*
 * The load test's report.md (loadtest_report.h): the setup, a reading of the result in prose
 * computed from the numbers, one side-by-side table of the runs, each run's shards, growths
 * and warnings, and the plots (drawn before, so their states are known). Written last, so a
 * report.md that exists is complete.
 */
#include <math.h>
#include <stdio.h>

#include <jansson.h>

#include "loadgen/loadtest_gate.h"
#include "loadgen/loadtest_report.h"

/* ---- report.md: the setup ----------------------------------------------------------------- */

static void report_md_title(struct report_file *rf, const json_t *doc)
{
    const char *profile = report_string(doc, "profile");
    const char *command = report_string(doc, "command");
    char text[REPORT_TEXT_SIZE];
    char events[REPORT_NUMBER_SIZE];
    char rate[REPORT_NUMBER_SIZE];
    char nodes[REPORT_NUMBER_SIZE];
    report_cell(doc, "nodes", 0, nodes);
    report_printf(rf, "# Load test: %s, %s events at %s/s, %s node%s\n\n",
                  profile != NULL ? report_quote(profile, REPORT_QUOTE_MD, text) : "-",
                  report_cell(doc, "events", 0, events), report_cell(doc, "rate", 0, rate), nodes,
                  strcmp(nodes, "1") == 0 ? "" : "s");
    if (command != NULL) {
        report_printf(rf, "```\n%s\n```\n\n", report_quote(command, REPORT_QUOTE_PLAIN, text));
    } else {
        report_printf(rf, "Command: -\n\n");
    }
}

static void report_md_setup(struct report_file *rf, const json_t *doc)
{
    const json_t *machine = json_object_get(doc, "machine");
    const char *started = report_string(doc, "started");
    const char *cpu = report_string(machine, "cpu");
    const char *kernel = report_string(machine, "kernel");
    char text[REPORT_TEXT_SIZE];
    char cells[4][REPORT_NUMBER_SIZE];
    report_printf(rf, "- started: %s\n",
                  started != NULL ? report_quote(started, REPORT_QUOTE_MD, text) : "-");
    report_printf(rf, "- machine: %s, %s cores, ",
                  cpu != NULL ? report_quote(cpu, REPORT_QUOTE_MD, text) : "-",
                  report_cell(machine, "cores", 0, cells[0]));
    report_printf(rf, "kernel %s\n",
                  kernel != NULL ? report_quote(kernel, REPORT_QUOTE_MD, text) : "-");
    report_printf(rf, "- shard capacity: %s events/s; at most %s shards a day\n",
                  report_cell(doc, "shard_capacity_eps", 0, cells[0]),
                  report_cell(doc, "max_shards", 0, cells[1]));
    report_printf(rf, "- Kafka partitions: %s; queries: %s/s\n\n",
                  report_cell(doc, "kafka_partitions", 0, cells[2]),
                  report_cell(doc, "queries_per_s", 0, cells[3]));
}

/* ---- report.md: the reading, clauses computed from the numbers ----------------------------- */

/* Clauses of one sentence about a run: ": " before the first, "; " between the others. */
struct report_sentence {
    struct report_file *rf;
    size_t clause_count;
};

static void report_clause(struct report_sentence *s, const char *fmt, ...) DS_PRINTF(2, 3);

static void report_clause(struct report_sentence *s, const char *fmt, ...)
{
    char text[REPORT_TEXT_SIZE];
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(text, sizeof(text), fmt, args);
    va_end(args);
    ASSERT(n >= 0);
    report_printf(s->rf, "%s%s", s->clause_count == 0 ? ": " : "; ", text);
    s->clause_count++;
}

/* The growths of one day, summed up: the hot day's when it grew, else the first growth's day. */
struct report_growth {
    const char *day;
    double from;
    double to;
    double at_s;
    size_t steps;
    size_t other_days_steps; /* growths of other days */
};

static bool report_growth_summary(const json_t *run, struct report_growth *g)
{
    const json_t *growths = json_object_get(run, "growths");
    const char *hot = report_string(run, "hot_day");
    *g = (struct report_growth){.from = NAN, .to = NAN, .at_s = NAN};
    for (size_t i = 0; i < json_array_size(growths); i++) {
        const char *day = report_string(json_array_get(growths, i), "day");
        if (day != NULL && (g->day == NULL || (hot != NULL && strcmp(day, hot) == 0))) {
            g->day = day;
        }
    }
    for (size_t i = 0; g->day != NULL && i < json_array_size(growths); i++) {
        const json_t *growth = json_array_get(growths, i);
        const char *day = report_string(growth, "day");
        if (day == NULL || strcmp(day, g->day) != 0) {
            g->other_days_steps++;
            continue;
        }
        if (g->steps++ == 0 && !report_number(growth, "from", &g->from)) {
            g->from = NAN;
        }
        if (!report_number(growth, "to", &g->to)) {
            g->to = NAN;
        }
        if (!report_number(growth, "at_s", &g->at_s)) {
            g->at_s = NAN;
        }
    }
    ASSERT(g->day == NULL || g->steps > 0);
    return g->day != NULL;
}

static void report_growth_clause(struct report_sentence *s, const json_t *run)
{
    struct report_growth g;
    if (!report_growth_summary(run, &g)) {
        return; /* a fixed strategy never grows: saying so for each is noise */
    }
    char day[REPORT_TEXT_SIZE];
    char cells[3][REPORT_NUMBER_SIZE];
    report_quote(g.day, REPORT_QUOTE_MD, day);
    report_number_text(g.from, 0, cells[0]);
    report_number_text(g.to, 0, cells[1]);
    report_number_text(g.at_s, 1, cells[2]);
    if (g.steps == 1) {
        report_clause(s, "it grew %s from %s to %s shards at %s s", day, cells[0], cells[1],
                      cells[2]);
    } else {
        report_clause(s, "it grew %s from %s to %s shards in %zu steps, the last at %s s", day,
                      cells[0], cells[1], g.steps, cells[2]);
    }
    if (g.other_days_steps > 0) {
        report_clause(s, "it grew other days %zu time%s", g.other_days_steps,
                      g.other_days_steps == 1 ? "" : "s");
    }
}

/* peak / capacity: the run's capacity_factor, else computed from the document's capacity. */
static bool report_capacity_factor(const json_t *doc, const json_t *run, double *factor)
{
    const json_t *hot = json_object_get(run, "hot_partition");
    double peak = 0;
    double capacity = 0;
    if (report_number(hot, "capacity_factor", factor)) {
        return true;
    }
    if (!report_number(hot, "peak_eps", &peak) ||
        !report_number(doc, "shard_capacity_eps", &capacity) || capacity <= 0) {
        return false;
    }
    *factor = peak / capacity;
    return true;
}

static void report_peak_clause(struct report_sentence *s, const json_t *doc, const json_t *run,
                               bool first)
{
    const json_t *hot = json_object_get(run, "hot_partition");
    const char *key = report_string(hot, "key");
    double peak = 0;
    double factor = 0;
    if (!report_number(hot, "peak_eps", &peak)) {
        return;
    }
    char code[REPORT_TEXT_SIZE] = "";
    char cells[3][REPORT_NUMBER_SIZE];
    char factor_text[2 * REPORT_CELL_SIZE] = "";
    if (key != NULL) {
        report_quote(key, REPORT_QUOTE_CODE, code);
    }
    double capacity = 0;
    if (report_capacity_factor(doc, run, &factor)) {
        report_number_text(factor, 2, cells[1]);
        if (first && report_number(doc, "shard_capacity_eps", &capacity)) {
            snprintf(factor_text, sizeof(factor_text), ", %sx the shard capacity of %s/s", cells[1],
                     report_number_text(capacity, 0, cells[2]));
        } else {
            snprintf(factor_text, sizeof(factor_text), " (%sx capacity)", cells[1]);
        }
    }
    report_clause(s, "its hottest partition%s%s%s peaked at %s events/s%s", key ? ", `" : "", code,
                  key ? "`," : "", report_number_text(peak, 0, cells[0]), factor_text);
}

static void report_throttle_clause(struct report_sentence *s, const json_t *run,
                                   const json_t *first_run)
{
    double over = 0;
    double throttled = 0;
    double first_throttled = 0;
    char cells[2][REPORT_NUMBER_SIZE];
    char name[REPORT_TEXT_SIZE];
    char quoted[REPORT_TEXT_SIZE];
    if (report_number(run, "over_capacity_seconds", &over)) {
        if (over > 0) {
            report_clause(s, "its partitions were over capacity for %s partition-seconds",
                          report_number_text(over, 0, cells[0]));
        } else {
            report_clause(s, "it never went over capacity");
        }
    }
    if (!report_number(run, "would_throttle_events", &throttled)) {
        return;
    }
    report_number_text(throttled, 0, cells[0]);
    if (throttled <= 0) {
        report_clause(s, "it would have throttled no event");
        return;
    }
    if (run == first_run || !report_number(first_run, "would_throttle_events", &first_throttled) ||
        first_throttled <= 0) {
        report_clause(s, "it would have throttled %s events", cells[0]);
        return;
    }
    report_quote(report_run_name(first_run, 0, "run", name), REPORT_QUOTE_MD, quoted);
    report_clause(s, "it would have throttled %s events, %s%% of what %s would have", cells[0],
                  report_percent_text(100 * throttled / first_throttled, cells[1]), quoted);
}

/* One sentence on run `index`: growth, hottest partition, time over capacity, throttling. */
static void report_md_reading_run(struct report_file *rf, const json_t *doc, size_t index)
{
    const json_t *runs = json_object_get(doc, "runs");
    const json_t *run = json_array_get(runs, index);
    char name[REPORT_TEXT_SIZE];
    char quoted[REPORT_TEXT_SIZE];
    report_printf(rf, "%s",
                  report_quote(report_run_name(run, index, "Run", name), REPORT_QUOTE_MD, quoted));
    struct report_sentence s = {.rf = rf};
    report_growth_clause(&s, run);
    report_peak_clause(&s, doc, run, index == 0);
    report_throttle_clause(&s, run, json_array_get(runs, 0));
    report_printf(rf, s.clause_count > 0 ? ".\n" : " reported none of these numbers.\n");
}

/* Whether every run stored what it produced; a mismatch in bold. */
static void report_md_integrity(struct report_file *rf, const json_t *runs)
{
    size_t known = 0;
    size_t mismatched = 0;
    for (size_t i = 0; i < json_array_size(runs); i++) {
        const json_t *run = json_array_get(runs, i);
        double produced = 0;
        double stored = 0;
        if (!report_number(run, "events_produced", &produced) ||
            !report_number(run, "events_stored", &stored)) {
            continue;
        }
        known++;
        if (produced == stored) {
            continue;
        }
        mismatched++;
        char name[REPORT_TEXT_SIZE];
        char quoted[REPORT_TEXT_SIZE];
        char cells[3][REPORT_NUMBER_SIZE];
        report_printf(rf, "**%s stored %s of the %s events it produced: %s %s.**\n",
                      report_quote(report_run_name(run, i, "Run", name), REPORT_QUOTE_MD, quoted),
                      report_number_text(stored, 0, cells[0]),
                      report_number_text(produced, 0, cells[1]),
                      report_number_text(stored < produced ? produced - stored : stored - produced,
                                         0, cells[2]),
                      stored < produced ? "missing" : "extra");
    }
    if (known > 0 && mismatched == 0) {
        report_printf(rf, "%s stored exactly the events it produced.\n",
                      known == 1 ? "The run" : "Every run");
    }
}

/* The range of lag p99 across runs. */
static void report_md_lag(struct report_file *rf, const json_t *runs)
{
    size_t low = SIZE_MAX;
    size_t high = SIZE_MAX;
    double low_ms = 0;
    double high_ms = 0;
    for (size_t i = 0; i < json_array_size(runs); i++) {
        double ms = 0;
        if (!report_number(json_array_get(runs, i), "lag_p99_ms", &ms)) {
            continue;
        }
        if (low == SIZE_MAX || ms < low_ms) {
            low = i;
            low_ms = ms;
        }
        if (high == SIZE_MAX || ms > high_ms) {
            high = i;
            high_ms = ms;
        }
    }
    if (low == SIZE_MAX) {
        return;
    }
    char cells[2][REPORT_NUMBER_SIZE];
    report_number_text(low_ms, 1, cells[0]);
    report_number_text(high_ms, 1, cells[1]);
    if (low == high || low_ms == high_ms) {
        report_printf(rf, "Ingest lag p99 was %s ms%s.\n", cells[0],
                      json_array_size(runs) > 1 ? " in every run that reported it" : "");
        return;
    }
    report_printf(rf, "Ingest lag p99 ranged from %s ms (run %zu) to %s ms (run %zu).\n", cells[0],
                  low + 1, cells[1], high + 1);
}

/* What makes a run's numbers suspect: a producer behind its schedule, failed queries. */
static void report_md_caveats(struct report_file *rf, const json_t *runs)
{
    for (size_t i = 0; i < json_array_size(runs); i++) {
        const json_t *run = json_array_get(runs, i);
        double behind_s = 0;
        double errors = 0;
        double queries = 0;
        char cells[2][REPORT_NUMBER_SIZE];
        if (report_number(run, "producer_behind_max_s", &behind_s) &&
            behind_s > REPORT_PRODUCER_BEHIND_NOTE_S) {
            report_printf(rf,
                          "In run %zu the producer fell up to %s s behind its schedule, so it "
                          "offered less than the asked rate.\n",
                          i + 1, report_number_text(behind_s, 1, cells[0]));
        }
        if (report_number(run, "query_errors", &errors) && errors > 0) {
            report_printf(rf, "In run %zu, %s of %s queries failed.\n", i + 1,
                          report_number_text(errors, 0, cells[0]),
                          report_number(run, "queries", &queries)
                              ? report_number_text(queries, 0, cells[1])
                              : "-");
        }
    }
}

static void report_md_reading(struct report_file *rf, const json_t *doc)
{
    const json_t *runs = json_object_get(doc, "runs");
    report_printf(rf, "## Reading\n\n");
    if (json_array_size(runs) == 0) {
        report_printf(rf, "The report holds no runs.\n\n");
        return;
    }
    for (size_t i = 0; i < json_array_size(runs); i++) {
        report_md_reading_run(rf, doc, i);
    }
    report_md_integrity(rf, runs);
    report_md_lag(rf, runs);
    report_md_caveats(rf, runs);
    report_printf(rf, "\n");
}

/* ---- report.md: the table ------------------------------------------------------------------ */

/* "600,000", or in bold with the difference when stored differs from produced. */
static const char *report_stored_cell(const json_t *run, char *dst)
{
    double produced = 0;
    double stored = 0;
    char cells[2][REPORT_NUMBER_SIZE];
    if (!report_number(run, "events_stored", &stored)) {
        return strcpy(dst, "-");
    }
    report_number_text(stored, 0, cells[0]);
    if (!report_number(run, "events_produced", &produced) || produced == stored) {
        return strcpy(dst, cells[0]);
    }
    report_number_text(stored < produced ? produced - stored : stored - produced, 0, cells[1]);
    snprintf(dst, REPORT_CELL_SIZE, "**%s MISMATCH: %s %s**", cells[0], cells[1],
             stored < produced ? "missing" : "extra");
    return dst;
}

/* "1,500 (0.9%)": would-throttle events and their share of the first run's. */
static const char *report_throttle_cell(const json_t *run, const json_t *first_run, char *dst)
{
    double throttled = 0;
    double first_throttled = 0;
    char cells[2][REPORT_NUMBER_SIZE];
    if (!report_number(run, "would_throttle_events", &throttled)) {
        return strcpy(dst, "-");
    }
    report_number_text(throttled, 0, cells[0]);
    if (throttled <= 0 || run == first_run ||
        !report_number(first_run, "would_throttle_events", &first_throttled) ||
        first_throttled <= 0) {
        return strcpy(dst, cells[0]);
    }
    snprintf(dst, REPORT_CELL_SIZE, "%s (%s%%)", cells[0],
             report_percent_text(100 * throttled / first_throttled, cells[1]));
    return dst;
}

/* "2026-01-21: 16": the hot day's final shard count. */
static const char *report_hot_day_shards_cell(const json_t *run, char *dst)
{
    const char *hot = report_string(run, "hot_day");
    double shards = 0;
    char cell[REPORT_NUMBER_SIZE];
    if (hot == NULL || !report_number(report_final_shards(run), hot, &shards)) {
        return strcpy(dst, "-");
    }
    snprintf(dst, REPORT_CELL_SIZE, "%.20s: %s", hot, report_number_text(shards, 0, cell));
    return dst;
}

static void report_md_table_row(struct report_file *rf, const json_t *doc, size_t index)
{
    const json_t *runs = json_object_get(doc, "runs");
    const json_t *run = json_array_get(runs, index);
    const json_t *hot = json_object_get(run, "hot_partition");
    const char *strategy = report_string(run, "strategy");
    const char *key = report_string(hot, "key");
    char text[2][REPORT_TEXT_SIZE];
    char c[13][REPORT_CELL_SIZE];
    char number[REPORT_NUMBER_SIZE];
    double factor = 0;
    if (report_capacity_factor(doc, run, &factor)) {
        snprintf(c[5], sizeof(c[5]), "%sx", report_number_text(factor, 2, number));
    } else {
        strcpy(c[5], "-");
    }
    report_printf(rf, "| %zu | %s | %s | %s | %s | ", index + 1,
                  strategy != NULL ? report_quote(strategy, REPORT_QUOTE_MD, text[0]) : "-",
                  report_cell(run, "events_produced", 0, c[0]), report_stored_cell(run, c[1]),
                  report_cell(run, "throughput_eps", 0, c[2]));
    if (key != NULL) {
        report_printf(rf, "`%s` | ", report_quote(key, REPORT_QUOTE_CODE, text[1]));
    } else {
        report_printf(rf, "- | ");
    }
    report_printf(rf, "%s | %s | %s | %s | %s | ", report_cell(hot, "peak_eps", 0, c[3]), c[5],
                  report_cell(run, "hot_day_skew", 2, c[6]),
                  report_cell(run, "over_capacity_seconds", 0, c[7]),
                  report_throttle_cell(run, json_array_get(runs, 0), c[8]));
    report_printf(rf, "%s | %s | %s | %s |\n", report_cell(run, "lag_p99_ms", 1, c[9]),
                  report_cell(run, "count_p99_us", 0, c[10]),
                  report_cell(run, "orders_p99_us", 0, c[11]),
                  report_hot_day_shards_cell(run, c[12]));
}

static void report_md_table(struct report_file *rf, const json_t *doc)
{
    const json_t *runs = json_object_get(doc, "runs");
    if (json_array_size(runs) == 0) {
        return;
    }
    report_printf(rf,
                  "## Runs side by side\n\n"
                  "| run | strategy | produced | stored | throughput/s | hot partition | "
                  "peak/s | x capacity | hot-day skew | over-capacity partition-s | would-throttle "
                  "(%% of run 1) | lag p99 ms | count p99 us | orders p99 us | hot-day "
                  "shards |\n"
                  "|--:|---|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|---|\n");
    for (size_t i = 0; i < json_array_size(runs); i++) {
        report_md_table_row(rf, doc, i);
    }
    report_printf(rf, "\n");
}

/* ---- report.md: each run ------------------------------------------------------------------- */

/* The numbers the table leaves out. */
static void report_md_run_details(struct report_file *rf, const json_t *run)
{
    char c[10][REPORT_NUMBER_SIZE];
    char text[REPORT_TEXT_SIZE];
    const char *key = report_string(run, "key");
    const json_t *overhead = json_object_get(run, "overhead");
    double share = 0;
    report_printf(rf, "Key %s; duration %s s; producer behind at most %s s; ",
                  key != NULL ? report_quote(key, REPORT_QUOTE_MD, text) : "-",
                  report_cell(run, "duration_s", 1, c[0]),
                  report_cell(run, "producer_behind_max_s", 2, c[1]));
    report_printf(rf, "lag max %s ms; GSI lag p99 %s ms; ", report_cell(run, "lag_max_ms", 1, c[2]),
                  report_cell(run, "gsi_lag_p99_ms", 1, c[3]));
    report_printf(rf, "count p50 %s us; orders p50 %s us; %s queries, %s failed",
                  report_cell(run, "count_p50_us", 0, c[4]),
                  report_cell(run, "orders_p50_us", 0, c[5]), report_cell(run, "queries", 0, c[6]),
                  report_cell(run, "query_errors", 0, c[7]));
    if (report_number(run, "kafka_hottest_share", &share)) {
        report_printf(rf, "; the hottest Kafka partition took %s%% of the writes",
                      report_percent_text(100 * share, c[8]));
    }
    if (report_number(overhead, "sampler_cpu_share", &share)) {
        report_printf(rf, "; the sampler used %s%% of a core",
                      report_percent_text(100 * share, c[9]));
    }
    if (json_is_true(json_object_get(run, "throttle_from_samples"))) {
        report_printf(rf, "; would-throttle is estimated from 1 s samples");
    }
    report_printf(rf, ".\n\n");
}

/* The run's latencies, one row each (runs from before they were measured have none). */
static void report_md_run_latency(struct report_file *rf, const json_t *run)
{
    static const char *const rows[][2] = {
        {"send_delay", "send delay behind the schedule"}, {"durable", "scheduled send to durable"},
        {"queryable", "scheduled send to queryable"},     {"count_query", "day-count query"},
        {"orders_query", "customer newest-10 query"},
    };
    const json_t *latency = json_object_get(run, "latency");
    if (!json_is_object(latency)) {
        return;
    }
    char c[8][REPORT_NUMBER_SIZE];
    report_printf(rf,
                  "Latency from second %s on (docs/LOADTEST_REPORT.md: how each is taken; end to "
                  "end: 1 event in %s, probed every %s ms):\n\n"
                  "| ms | p50 | p90 | p99 | p99.9 | max | measured |\n"
                  "|---|--:|--:|--:|--:|--:|--:|\n",
                  report_cell(latency, "warmup_s", 0, c[0]),
                  report_cell(latency, "e2e_sample_every", 0, c[1]),
                  report_cell(latency, "e2e_probe_interval_ms", 0, c[2]));
    for (size_t i = 0; i < DS_ARRAY_LEN(rows); i++) {
        const json_t *one = json_object_get(latency, rows[i][0]);
        report_printf(rf, "| %s | %s | %s | %s | %s | %s | %s", rows[i][1],
                      report_cell(one, "p50_ms", 2, c[0]), report_cell(one, "p90_ms", 2, c[1]),
                      report_cell(one, "p99_ms", 2, c[2]), report_cell(one, "p999_ms", 2, c[3]),
                      report_cell(one, "max_ms", 2, c[4]), report_cell(one, "count", 0, c[5]));
        double unseen = 0;
        if (report_number(one, "unseen", &unseen) && unseen > 0) {
            report_printf(rf, " (%s never seen)", report_number_text(unseen, 0, c[6]));
        }
        report_printf(rf, " |\n");
    }
    report_printf(rf, "\n");
}

/* The days that ended with more than one shard (one shard is the default, not news). */
static void report_md_run_shards(struct report_file *rf, const json_t *run)
{
    const json_t *shards = report_final_shards(run);
    if (!json_is_object(shards)) {
        return;
    }
    size_t listed = 0;
    size_t single = 0;
    const char *day;
    const json_t *count;
    report_printf(rf, "Final shards:");
    json_object_foreach((json_t *)shards, day, count)
    {
        if (!json_is_number(count) || json_number_value(count) <= 1) {
            single++;
            continue;
        }
        if (listed++ >= LOADTEST_REPORT_LIST_MAX) {
            continue;
        }
        char text[REPORT_TEXT_SIZE];
        char cell[REPORT_NUMBER_SIZE];
        report_printf(rf, "%s %s: %s", listed == 1 ? "" : ",",
                      report_quote(day, REPORT_QUOTE_MD, text),
                      report_number_text(json_number_value(count), 0, cell));
    }
    if (listed > LOADTEST_REPORT_LIST_MAX) {
        report_printf(rf, " and %zu more days", listed - LOADTEST_REPORT_LIST_MAX);
    }
    if (single > 0) {
        report_printf(rf, "%s%zu day%s with one shard", listed > 0 ? "; " : " ", single,
                      single == 1 ? "" : "s");
    }
    report_printf(rf, "%s.\n\n", listed == 0 && single == 0 ? " none" : "");
}

static void report_md_run_growths(struct report_file *rf, const json_t *run)
{
    const json_t *growths = json_object_get(run, "growths");
    if (!json_is_array(growths)) {
        report_printf(rf, "Growths: not reported.\n\n");
        return;
    }
    if (json_array_size(growths) == 0) {
        report_printf(rf, "Growths: none.\n\n");
        return;
    }
    report_printf(rf, "| at s | day | from | to | reason |\n|--:|---|--:|--:|---|\n");
    for (size_t i = 0; i < json_array_size(growths) && i < LOADTEST_REPORT_LIST_MAX; i++) {
        const json_t *g = json_array_get(growths, i);
        const char *day = report_string(g, "day");
        const char *reason = report_string(g, "reason");
        char text[2][REPORT_TEXT_SIZE];
        char c[3][REPORT_NUMBER_SIZE];
        report_printf(rf, "| %s | %s | %s | %s | %s |\n", report_cell(g, "at_s", 1, c[0]),
                      day != NULL ? report_quote(day, REPORT_QUOTE_MD, text[0]) : "-",
                      report_cell(g, "from", 0, c[1]), report_cell(g, "to", 0, c[2]),
                      reason != NULL ? report_quote(reason, REPORT_QUOTE_MD, text[1]) : "-");
    }
    if (json_array_size(growths) > LOADTEST_REPORT_LIST_MAX) {
        report_printf(rf, "\n... and %zu more growths.\n",
                      json_array_size(growths) - LOADTEST_REPORT_LIST_MAX);
    }
    report_printf(rf, "\n");
}

/* What the nodes advised (hot spots more shards cannot relieve); an older report has none. */
static void report_md_run_advice(struct report_file *rf, const json_t *run)
{
    const json_t *advice = json_object_get(run, "advice");
    if (json_array_size(advice) == 0) {
        report_printf(rf, "Advice (more shards cannot help): %s.\n\n",
                      json_is_array(advice) ? "none" : "not reported");
        return;
    }
    report_printf(rf, "Advice (more shards cannot help):\n\n");
    for (size_t i = 0; i < json_array_size(advice) && i < LOADTEST_REPORT_LIST_MAX; i++) {
        const json_t *a = json_array_get(advice, i);
        const char *texts[4] = {report_string(a, "case"), report_string(a, "subject"),
                                report_string(a, "evidence"), report_string(a, "remedy")};
        char quoted[4][REPORT_TEXT_SIZE];
        for (size_t k = 0; k < 4; k++) {
            texts[k] = texts[k] != NULL ? report_quote(texts[k], REPORT_QUOTE_MD, quoted[k]) : "-";
        }
        char first[REPORT_NUMBER_SIZE];
        report_printf(rf, "- **%s** (%s, from %s s): %s. Remedy: %s.\n", texts[0], texts[1],
                      report_cell(a, "first_s", 1, first), texts[2], texts[3]);
    }
    if (json_array_size(advice) > LOADTEST_REPORT_LIST_MAX) {
        report_printf(rf, "- ... and %zu more\n",
                      json_array_size(advice) - LOADTEST_REPORT_LIST_MAX);
    }
    report_printf(rf, "\n");
}

static void report_md_run_warnings(struct report_file *rf, const json_t *run)
{
    const json_t *warnings = json_object_get(run, "warnings");
    if (json_array_size(warnings) == 0) {
        report_printf(rf, "Warnings: %s.\n\n", json_is_array(warnings) ? "none" : "not reported");
        return;
    }
    report_printf(rf, "Warnings:\n\n");
    for (size_t i = 0; i < json_array_size(warnings) && i < LOADTEST_REPORT_LIST_MAX; i++) {
        const char *warning = json_string_value(json_array_get(warnings, i));
        char text[REPORT_TEXT_SIZE];
        report_printf(rf, "- %s\n",
                      warning != NULL ? report_quote(warning, REPORT_QUOTE_MD, text) : "-");
    }
    if (json_array_size(warnings) > LOADTEST_REPORT_LIST_MAX) {
        report_printf(rf, "- ... and %zu more\n",
                      json_array_size(warnings) - LOADTEST_REPORT_LIST_MAX);
    }
    report_printf(rf, "\n");
}

static void report_md_runs(struct report_file *rf, const json_t *doc)
{
    const json_t *runs = json_object_get(doc, "runs");
    for (size_t i = 0; i < json_array_size(runs); i++) {
        const json_t *run = json_array_get(runs, i);
        char name[REPORT_TEXT_SIZE];
        char quoted[REPORT_TEXT_SIZE];
        report_printf(rf, "## %s\n\n",
                      report_quote(report_run_name(run, i, "Run", name), REPORT_QUOTE_MD, quoted));
        report_md_run_details(rf, run);
        report_md_run_latency(rf, run);
        report_md_run_shards(rf, run);
        report_md_run_growths(rf, run);
        report_md_run_advice(rf, run);
        report_md_run_warnings(rf, run);
    }
}

/* ---- report.md: the plots ------------------------------------------------------------------ */

static void report_md_plots(struct report_file *rf, const struct report_plots *p)
{
    report_printf(rf, "## Plots\n\n");
    if (p->gnuplot_missing) {
        report_printf(rf, "gnuplot is not installed, so no plot was drawn. Their data and "
                          "scripts are in plots/: with gnuplot installed, run "
                          "`cd plots && for f in *.gp; do gnuplot \"$f\"; done`.\n\n");
    }
    for (size_t i = 0; i < p->plot_count; i++) {
        const struct report_plot *plot = &p->plots[i];
        char caption[REPORT_TEXT_SIZE];
        report_quote(plot->caption, REPORT_QUOTE_MD, caption);
        switch (plot->state) {
        case REPORT_PLOT_DRAWN:
            report_printf(rf, "![%s](plots/%s.png)\n\n", caption, plot->name);
            break;
        case REPORT_PLOT_NO_GNUPLOT:
            report_printf(rf, "- %s: plots/%s.gp, not drawn\n\n", caption, plot->name);
            break;
        case REPORT_PLOT_FAILED:
            report_printf(rf, "- %s: **gnuplot failed**, see plots/%s.log\n\n", caption,
                          plot->name);
            break;
        case REPORT_PLOT_EMPTY: report_printf(rf, "- %s: no samples to plot\n\n", caption); break;
        }
    }
}

int report_md_write(const char *out_dir, const json_t *doc, const struct report_plots *p)
{
    struct report_file rf;
    int rc = report_file_open(&rf, out_dir, "report.md");
    if (rc != 0) {
        return rc;
    }
    report_md_title(&rf, doc);
    report_md_setup(&rf, doc);
    report_md_reading(&rf, doc);
    report_md_table(&rf, doc);
    gate_md_write(&rf, doc);
    report_md_runs(&rf, doc);
    report_md_plots(&rf, p);
    return report_file_close(&rf);
}
