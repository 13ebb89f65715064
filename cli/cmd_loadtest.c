/*
 * `dayshard loadtest`: drives a skewed load through the real pipeline (broker, node processes,
 * an open-loop producer, a query load) under one shard strategy or, with --compare, several,
 * and reports what sharding did: write heat per partition over time, the hottest share,
 * throttling against --shard-capacity, lag, query latency, final shard counts
 * (OUT/report.json, OUT/report.md, OUT/report.html, PNG plots).
 *
 * This file parses the arguments into a struct loadgen_loadtest_config (and the gate, from
 * --baseline and --fail-if, before anything runs) and maps the result to an exit status; the
 * load test itself (strategies, runs, report.json, report.md, the plots, the gate) is loadgen's.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "loadgen/loadgen.h"
#include "query/query.h"
#include "shard/shard.h"
#include "storage/storage.h"

const char cmd_loadtest_usage[] =
    "usage: dayshard loadtest [--profile P] [--events N] [--rate R] [options]\n"
    "\n"
    "Drives a skewed load through the real pipeline: the embedded Kafka broker (or --brokers),\n"
    "K `dayshard run` node processes, an open-loop paced producer (a slow pipeline shows as\n"
    "lag, not as a slower producer) and Q queries a second (day counts and a customer's newest\n"
    "10), sampling every node's /v1/heat once a second. Writes OUT/report.json, OUT/report.md\n"
    "and PNG plots (gnuplot): write heat per partition over time, the hottest partition's\n"
    "share, lag, query latency; and OUT/report.html, one offline page, a run per column.\n"
    "\n"
    "options:\n"
    "  --profile P          uniform, busy-day (default: 30% of a month's orders on one day),\n"
    "                       hot-customer (one customer places 20%) or flash-sale (a day's rate\n"
    "                       jumps 50x for a minute)\n"
    "  --events N           events to produce (default 600000)\n"
    "  --rate R             events/s, the producer's schedule (default 10000)\n"
    "  --nodes K            node processes in one consumer group, 1..8 (default 1)\n"
    "  --key K              what the producer keys messages by: order (default), customer, day\n"
    "                       (one Kafka partition takes a whole day) or partition (DAY#d#k from\n"
    "                       the shard map: salted keys)\n"
    "  --shards S           adaptive (default: start at 4, grow with the rate) or N (fixed)\n"
    "  --compare            run fixed:1, fixed:4 and adaptive with --key, then adaptive with\n"
    "                       --key day and with --key partition, side by side\n"
    "  --queries Q          query requests a second during the run (default 50; 0: none)\n"
    "  --warmup S           leave the first S seconds out of the whole-run latency figures\n"
    "                       (the per-second series keep them, marked); below the schedule's\n"
    "                       length, --events / --rate (default 0)\n"
    "  --shard-capacity R   events/s one partition should take (default 1000, DynamoDB's\n"
    "                       per-partition write limit): the growth threshold, and what\n"
    "                       would-throttle counts against\n"
    "  --max-shards M       adaptive growth stops at M shards a day (default 256)\n"
    "  --partitions P       Kafka partitions of the embedded broker's topic (default 8)\n"
    "  --brokers B          a real Kafka cluster instead (a topic per run)\n"
    "  --seed S             the generator's seed (default 42)\n"
    "  --no-gsi             nodes without the by-customer index (customer queries then fail)\n"
    "  --model M            what the nodes count (`dayshard run --model`): orders (default:\n"
    "                       one per order_id, its latest version) or events\n"
    "  --out DIR            where the report goes (default loadtest-YYYYMMDD-HHMMSS); each\n"
    "                       run's node logs stay in DIR/run-N\n"
    "  --keep-data          keep the nodes' data directories too (DIR/run-N/node-K)\n"
    "  --open-console       xdg-open each run's live console (its URL is always printed)\n"
    "  --render-only DIR    draw DIR/report.{md,html} and the plots again from DIR/report.json;\n"
    "                       with --baseline or --fail-if, check that report instead of a run\n"
    "  --baseline FILE      an earlier report.json: each run's summary against the run of\n"
    "                       the same strategy there (old -> new, change)\n"
    "  --fail-if EXPR       a threshold on every run (repeatable): FIELD OP NUMBER, OP one of\n"
    "                       > >= < <= == !=; NUMBERx: against NUMBER times the baseline's,\n"
    "                       NUMBER%: the change from the baseline in percent. For example\n"
    "                       over_capacity_seconds>0, count_p99_us>1.2x, events_per_s<-10%,\n"
    "                       advice_hot_customer>0. A figure not measured fails it. FIELDs:\n"
    "                       docs/LOADTEST_REPORT.md\n"
    "  --help               this text\n"
    "Exit status: 0 done, every threshold held; 1 a run failed; 2 usage error (bad EXPR or\n"
    "--baseline); 3 a threshold breached or not checkable (each named on stderr).\n"
    "The embedded broker keeps ~5 MiB per partition: a node that falls ~80,000 messages behind\n"
    "on a partition loses events there, and the run warns when lag nears that.\n";

/* C11 promises string literals of 4,095 characters (5.2.4.1), and -Wpedantic warns past it:
 * text that outgrows this goes to docs/LOADTEST_REPORT.md, which the help already points to. */
_Static_assert(sizeof(cmd_loadtest_usage) - 1 <= 4095, "the usage text fits one C literal");

/* A threshold breached or not checkable: distinct from a run that failed (CLI_FAIL), so a CI
 * job can tell "slower than allowed" from "broken". */
#define LOADTEST_EXIT_BREACHED 3

struct loadtest_args {
    struct loadgen_loadtest_config cfg;
    char out[DS_PATH_MAX];
    const char *render_only;
    const char *baseline;
    const char *fail_if[LOADGEN_LOADTEST_GATE_EXPRS_MAX];
    uint32_t fail_if_count;
    char command[2048];
};

static int loadtest_parse_shards(struct loadtest_args *a, const char *value)
{
    uint64_t n = 0;
    if (strcmp(value, "adaptive") == 0) {
        a->cfg.adaptive = true;
        return 0;
    }
    if (cli_parse_u64(value, 1, SHARD_COUNT_MAX, &n) != 0) {
        return -DS_EUSAGE;
    }
    a->cfg.adaptive = false;
    a->cfg.fixed_shards = (uint32_t)n;
    return 0;
}

/* One --fail-if, kept for loadgen_loadtest_gate_create, which parses them all. */
static int loadtest_add_fail_if(struct loadtest_args *a, const char *value)
{
    if (a->fail_if_count == LOADGEN_LOADTEST_GATE_EXPRS_MAX) {
        return cli_error("loadtest", CLI_USAGE, "more than %u --fail-if thresholds",
                         LOADGEN_LOADTEST_GATE_EXPRS_MAX);
    }
    a->fail_if[a->fail_if_count++] = value;
    return 0;
}

static int loadtest_parse_one(int c, const char *value, void *user)
{
    struct loadtest_args *a = user;
    uint64_t n = 0;
    struct loadgen_loadtest_config *cfg = &a->cfg;
    switch (c) {
    case 'n':
    case 'p':
    case 's': return cli_parse_workload_option(c, value, &cfg->workload);
    case 'r':
        if (cli_parse_u64(value, 1, LOADGEN_WORKLOAD_RATE_EPS_MAX, &cfg->rate) != 0) {
            return -DS_EUSAGE;
        }
        cfg->workload.rate_eps = (double)cfg->rate;
        return 0;
    case 'K':
        if (cli_parse_u64(value, 1, LOADGEN_LOADTEST_NODES_MAX, &n) != 0) {
            return -DS_EUSAGE;
        }
        cfg->nodes = (uint32_t)n;
        return 0;
    case 'k': return loadgen_produce_key_parse(value, &a->cfg.key);
    case 'S': return loadtest_parse_shards(a, value);
    case 'c': a->cfg.compare = true; return 0;
    case 'q':
        if (cli_parse_u64(value, 0, LOADGEN_LOADTEST_QUERIES_PER_S_MAX, &n) != 0) {
            return -DS_EUSAGE;
        }
        cfg->queries_per_s = (uint32_t)n;
        return 0;
    case 'W':
        if (cli_parse_u64(value, 0, UINT32_MAX, &n) != 0) {
            return -DS_EUSAGE;
        }
        cfg->warmup_s = (uint32_t)n;
        return 0;
    case 'C':
        if (cli_parse_u64(value, 1, SHARD_CAPACITY_MAX, &n) != 0) {
            return -DS_EUSAGE;
        }
        cfg->capacity_eps = (uint32_t)n;
        return 0;
    case 'M':
        if (cli_parse_u64(value, 1, SHARD_COUNT_MAX, &n) != 0) {
            return -DS_EUSAGE;
        }
        a->cfg.max_shards = (uint32_t)n;
        return 0;
    case 'P':
        if (cli_parse_u64(value, 1, LOADGEN_BROKER_PARTITIONS_MAX, &n) != 0) {
            return -DS_EUSAGE;
        }
        cfg->partitions = (uint32_t)n;
        return 0;
    case 'b': cfg->brokers = value; return 0;
    case 'G': cfg->no_gsi = true; return 0;
    case 'D': cfg->keep_data = true; return 0;
    case 'O': cfg->open_console = true; return 0;
    case 'o': snprintf(a->out, sizeof(a->out), "%s", value); return 0;
    case 'R': a->render_only = value; return 0;
    case 'B': a->baseline = value; return 0;
    case 'F': return loadtest_add_fail_if(a, value);
    case 'm': {
        enum storage_model model = STORAGE_MODEL_RECORDED;
        if (storage_model_parse(value, &model) != 0) {
            return -DS_EUSAGE;
        }
        cfg->model = storage_model_name(model);
        return 0;
    }
    }
    return -DS_EUSAGE;
}

static void loadtest_defaults(struct loadtest_args *a)
{
    loadgen_workload_defaults(&a->cfg.workload);
    a->cfg.workload.profile = LOADGEN_PROFILE_BUSY_DAY;
    a->cfg.workload.events = 600000;
    a->cfg.workload.seed = 42;
    /* hot-customer: customer 1 places a fifth of the orders, as --help says. The generator's
     * own default (1%) is below the Zipf head's share (customer 2, about 12%), so that customer
     * would not be the hot one and, keyed by customer, its partition would not be skewed. */
    a->cfg.workload.hot_fraction = 0.2;
    a->cfg.rate = 10000;
    a->cfg.workload.rate_eps = 10000.0;
    a->cfg.nodes = 1;
    a->cfg.queries_per_s = 50;
    a->cfg.capacity_eps = SHARD_CAPACITY_DEFAULT;
    a->cfg.partitions = 8;
    a->cfg.adaptive = true;
    a->cfg.max_shards = SHARD_MAX_SHARDS_DEFAULT;
    a->cfg.key = LOADGEN_PRODUCE_KEY_ORDER;
    cli_report_dir_default("loadtest", a->out, sizeof(a->out));
}

/* The nodes' directories are new ones (OUT/run-N/node-K): the model they would get, checked
 * on the first before any node starts, so a refused one is a usage error here rather than a
 * node that exits. Returns 0 or CLI_USAGE (reported). */
static int loadtest_model_check(const struct loadtest_args *a)
{
    char dir[sizeof(a->out) + 32];
    snprintf(dir, sizeof(dir), "%s/run-1/node-0", a->out);
    enum storage_model wanted = STORAGE_MODEL_RECORDED;
    if (a->cfg.model != NULL) {
        int parsed = storage_model_parse(a->cfg.model, &wanted);
        ASSERT(parsed == 0); /* a name storage_model_name gave */
    }
    char why[STORAGE_MODEL_WHY_SIZE];
    enum storage_model model = STORAGE_MODEL_RECORDED;
    int rc = storage_model_check(dir, wanted, &model, why, sizeof(why));
    return rc == 0 ? 0 : cli_error("loadtest", rc == -DS_EUSAGE ? CLI_USAGE : CLI_FAIL, "%s", why);
}

static int loadtest_parse(int argc, char **argv, struct loadtest_args *a)
{
    static const struct option options[] = {{"profile", required_argument, NULL, 'p'},
                                            {"events", required_argument, NULL, 'n'},
                                            {"rate", required_argument, NULL, 'r'},
                                            {"nodes", required_argument, NULL, 'K'},
                                            {"key", required_argument, NULL, 'k'},
                                            {"shards", required_argument, NULL, 'S'},
                                            {"compare", no_argument, NULL, 'c'},
                                            {"queries", required_argument, NULL, 'q'},
                                            {"warmup", required_argument, NULL, 'W'},
                                            {"shard-capacity", required_argument, NULL, 'C'},
                                            {"max-shards", required_argument, NULL, 'M'},
                                            {"partitions", required_argument, NULL, 'P'},
                                            {"brokers", required_argument, NULL, 'b'},
                                            {"seed", required_argument, NULL, 's'},
                                            {"no-gsi", no_argument, NULL, 'G'},
                                            {"out", required_argument, NULL, 'o'},
                                            {"render-only", required_argument, NULL, 'R'},
                                            {"keep-data", no_argument, NULL, 'D'},
                                            {"open-console", no_argument, NULL, 'O'},
                                            {"model", required_argument, NULL, 'm'},
                                            {"baseline", required_argument, NULL, 'B'},
                                            {"fail-if", required_argument, NULL, 'F'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    int rc = cli_options_parse_only("loadtest", argc, argv, options, loadtest_parse_one, a);
    if (rc != 0) {
        return rc;
    }
    if (!a->cfg.adaptive && a->cfg.fixed_shards > a->cfg.max_shards) {
        return cli_error("loadtest", CLI_USAGE, "--shards %u is above --max-shards %u",
                         a->cfg.fixed_shards, a->cfg.max_shards);
    }
    if (a->cfg.workload.events == 0) {
        return cli_error("loadtest", CLI_USAGE, "--events must be at least 1");
    }
    /* The schedule sends --events at --rate (a flash sale's window sends faster: shorter). */
    double schedule_s = (double)a->cfg.workload.events / (double)a->cfg.rate;
    if ((double)a->cfg.warmup_s >= schedule_s) {
        return cli_error("loadtest", CLI_USAGE,
                         "--warmup %u s leaves nothing to measure: the schedule lasts %.1f s "
                         "(--events / --rate)",
                         a->cfg.warmup_s, schedule_s);
    }
    rc = loadtest_model_check(a);
    if (rc != 0) {
        return rc;
    }
    return loadgen_workload_config_check(&a->cfg.workload) == 0
               ? 0
               : cli_error("loadtest", CLI_USAGE, "the workload does not fit (see above)");
}

/* The exit status of a load test or a render that returned rc (breaches, or a negative code
 * already printed). */
static int loadtest_exit(int rc)
{
    return rc < 0 ? CLI_FAIL : rc > 0 ? LOADTEST_EXIT_BREACHED : CLI_OK;
}

/* The console's files report.html inlines (loadgen cannot reach query/). */
static void loadtest_assets(struct loadgen_report_assets *a)
{
    a->console_js = query_console_text("console.js", &a->console_js_len);
    a->console_css = query_console_text("console.css", &a->console_css_len);
    a->report_js = query_console_text("report.js", &a->report_js_len);
    ASSERT(a->console_js != NULL && a->console_css != NULL && a->report_js != NULL);
}

/* --render-only DIR: the report drawn again from DIR/report.json (and checked by the gate). */
static int loadtest_render_only(const char *dir, const struct loadgen_loadtest_gate *gate)
{
    struct loadgen_report_assets assets;
    loadtest_assets(&assets);
    int rc = loadgen_loadtest_render(dir, gate, &assets);
    if (rc >= 0) {
        printf("%s/report.md\n%s/report.html\n", dir, dir);
    }
    return loadtest_exit(rc);
}

/* Runs the load test (or --render-only) with the gate parsed from a. */
static int loadtest_main(int argc, char **argv, struct loadtest_args *a)
{
    struct loadgen_loadtest_gate *gate = NULL;
    if ((a->baseline != NULL || a->fail_if_count > 0) &&
        loadgen_loadtest_gate_create(a->baseline, a->fail_if, a->fail_if_count, &gate) != 0) {
        return CLI_USAGE; /* printed */
    }
    int rc = 0;
    if (a->render_only != NULL) {
        rc = loadtest_render_only(a->render_only, gate);
        loadgen_loadtest_gate_destroy(gate);
        return rc;
    }
    char self[DS_PATH_MAX];
    cli_report_self(self, sizeof(self));
    a->cfg.self = self;
    a->cfg.out_dir = a->out;
    a->cfg.progress_tty = isatty(STDERR_FILENO) == 1;
    cli_report_command(argc, argv, a->command, sizeof(a->command));
    a->cfg.command = a->command;
    a->cfg.gate = gate;
    struct loadgen_report_assets assets;
    loadtest_assets(&assets);
    a->cfg.assets = &assets;
    rc = loadgen_loadtest_run(&a->cfg);
    loadgen_loadtest_gate_destroy(gate);
    return loadtest_exit(rc);
}

int cmd_loadtest(int argc, char **argv)
{
    struct loadtest_args *a = calloc(1, sizeof(*a));
    if (a == NULL) {
        return cli_error("loadtest", CLI_FAIL, "out of memory");
    }
    loadtest_defaults(a);
    int rc = loadtest_parse(argc, argv, a);
    rc = rc == -1 ? cli_help(cmd_loadtest_usage) : rc != 0 ? rc : loadtest_main(argc, argv, a);
    free(a);
    return rc;
}
