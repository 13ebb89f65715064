/*
 * `dayshard soak`: the proof that a node with retention holds every bounded resource steady
 * over months of stream time (loadgen's soak, loadgen.h). This file parses the arguments into a
 * struct loadgen_soak_config; the soak, its verdict and its report are loadgen's.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "loadgen/loadgen.h"

const char cmd_soak_usage[] =
    "usage: dayshard soak [options]\n"
    "\n"
    "Runs one real node (`dayshard run`) over a compressed stream: uniform orders from\n"
    "2026-01-01, each update on its order's day, through the embedded broker (held while the\n"
    "node's lag nears what that broker keeps). Samples /metrics and /proc once a second,\n"
    "restarts the node every K stream days, then counts the last N days, all orders and paid,\n"
    "against `dayshard ingest` of the same stream. Writes OUT/report.json, OUT/*.png (gnuplot)\n"
    "and a summary.\n"
    "\n"
    "Growth rule: for each bounded resource, its largest value over a first window of stream\n"
    "days against its largest over a last window. With K >= N both follow the restart\n"
    "cycles: the first is [R, R + K), R the first restart at or after day 2N, the last runs\n"
    "from the last restart at least K days before the end to the end; else [2N, 3N) and the\n"
    "last N days. It grows when\n"
    "last > first x ratio + slack: data directory and each store's bytes 1.25x + 1 MiB, RSS\n"
    "+12 MiB, open fds and segment fds +64, partitions held 1.25x + 16, days held 1.25x + 1,\n"
    "ids keydir bytes 1.25x + 1 MiB, ids sealed files + N + 2. Shard counts, rates and the\n"
    "dropped days awaiting removal (30 s of wall time: many compressed days) are reported,\n"
    "not judged. A compressed day takes the whole feed rate (heat's clock is the\n"
    "producer's): the node gets --shard-capacity of the feed's lines/s / 4, so a day at the\n"
    "full rate needs 4 shards (a --node-arg --shard-capacity wins).\n"
    "\n"
    "options:\n"
    "  --days D              stream days (default 60; at least R + 2K, else 4N)\n"
    "  --orders-per-day O    new orders a day (default 60000)\n"
    "  --updated U           updates per new order (default 0.5)\n"
    "  --rate R              the producer's schedule, new orders/s (default 100000)\n"
    "  --retention-days N    the node's retention (default 5)\n"
    "  --restart-every K     restart the node every K stream days (default 20; 0 never)\n"
    "  --restart-signal S    TERM (default) or KILL (kill -9)\n"
    "  --partitions P        partitions of the embedded broker's topic (default 8)\n"
    "  --brokers B           a Kafka cluster instead of the embedded broker (with --topic)\n"
    "  --topic T             the topic to use on --brokers (both or neither)\n"
    "  --model M             orders (default) or events\n"
    "  --node-arg ARG        one more argument for `dayshard run` (repeatable; later wins)\n"
    "  --seed S              generator seed (default 25)\n"
    "  --out DIR             output directory (default soak-YYYYMMDD-HHMMSS)\n"
    "  --keep-data           keep OUT/data (the node's) and OUT/ref (the reference's)\n"
    "  --render-only DIR     draw the plots and the summary again from DIR/report.json\n"
    "  --help                this text\n"
    "\n"
    "Exit status: 0 passed; 1 a resource grew, a count differed or the node died (named);\n"
    "2 usage.\n";

struct soak_args {
    struct loadgen_soak_config cfg;
    char out[DS_PATH_MAX];
    char command[2048];
    const char *render_only;
};

static int soak_parse_u32(const char *value, uint64_t min, uint64_t max, uint32_t *out)
{
    uint64_t n = 0;
    if (cli_parse_u64(value, min, max, &n) != 0) {
        return -DS_EUSAGE;
    }
    *out = (uint32_t)n;
    return 0;
}

static int soak_parse_more(struct soak_args *a, int c, const char *value)
{
    struct loadgen_soak_config *cfg = &a->cfg;
    switch (c) {
    case 'S':
        if (strcmp(value, "TERM") != 0 && strcmp(value, "KILL") != 0) {
            return -DS_EUSAGE;
        }
        cfg->restart_signal = strcmp(value, "KILL") == 0 ? SIGKILL : SIGTERM;
        return 0;
    case 'A':
        if (cfg->node_arg_count == LOADGEN_SOAK_NODE_ARGS_MAX) {
            return -DS_EUSAGE;
        }
        cfg->node_args[cfg->node_arg_count++] = value;
        return 0;
    case 'u': {
        char *end = NULL;
        cfg->updated = strtod(value, &end);
        return end != value && *end == '\0' ? 0 : -DS_EUSAGE;
    }
    case 'm': cfg->model = value; return 0;
    case 'b': cfg->brokers = value; return 0;
    case 't': cfg->topic = value; return 0;
    case 'o': snprintf(a->out, sizeof(a->out), "%s", value); return 0;
    case 'D': cfg->keep_data = true; return 0;
    case 'R': a->render_only = value; return 0;
    default: return -DS_EUSAGE;
    }
}

static int soak_parse_one(int c, const char *value, void *user)
{
    struct soak_args *a = user;
    struct loadgen_soak_config *cfg = &a->cfg;
    switch (c) {
    case 'd': return soak_parse_u32(value, 1, 36500, &cfg->days);
    case 'O': return cli_parse_u64(value, 1, 100000000, &cfg->orders_per_day);
    case 'r': return cli_parse_u64(value, 1, LOADGEN_WORKLOAD_RATE_EPS_MAX, &cfg->rate);
    case 'N':
        return soak_parse_u32(value, 1, LOADGEN_SOAK_RETENTION_DAYS_MAX, &cfg->retention_days);
    case 'K': return soak_parse_u32(value, 0, 36500, &cfg->restart_every);
    case 'P': return soak_parse_u32(value, 1, LOADGEN_BROKER_PARTITIONS_MAX, &cfg->partitions);
    case 's': return cli_parse_u64(value, 0, UINT64_MAX, &cfg->seed);
    default: return soak_parse_more(a, c, value);
    }
}

static int soak_parse(int argc, char **argv, struct soak_args *a)
{
    static const struct option options[] = {{"days", required_argument, NULL, 'd'},
                                            {"orders-per-day", required_argument, NULL, 'O'},
                                            {"updated", required_argument, NULL, 'u'},
                                            {"rate", required_argument, NULL, 'r'},
                                            {"retention-days", required_argument, NULL, 'N'},
                                            {"restart-every", required_argument, NULL, 'K'},
                                            {"restart-signal", required_argument, NULL, 'S'},
                                            {"partitions", required_argument, NULL, 'P'},
                                            {"brokers", required_argument, NULL, 'b'},
                                            {"topic", required_argument, NULL, 't'},
                                            {"model", required_argument, NULL, 'm'},
                                            {"node-arg", required_argument, NULL, 'A'},
                                            {"seed", required_argument, NULL, 's'},
                                            {"out", required_argument, NULL, 'o'},
                                            {"keep-data", no_argument, NULL, 'D'},
                                            {"render-only", required_argument, NULL, 'R'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    int rc = cli_options_parse_only("soak", argc, argv, options, soak_parse_one, a);
    if (rc != 0) {
        return rc;
    }
    if (a->render_only == NULL && loadgen_soak_config_check(&a->cfg) != 0) {
        return CLI_USAGE;
    }
    return 0;
}

int cmd_soak(int argc, char **argv)
{
    struct soak_args *a = calloc(1, sizeof(*a));
    if (a == NULL) {
        return cli_error("soak", CLI_FAIL, "out of memory");
    }
    loadgen_soak_config_defaults(&a->cfg);
    cli_report_dir_default("soak", a->out, sizeof(a->out));
    int rc = soak_parse(argc, argv, a);
    if (rc != 0 || a->render_only != NULL) {
        rc = rc == -1                                   ? cli_help(cmd_soak_usage)
             : rc != 0                                  ? rc
             : loadgen_soak_render(a->render_only) == 0 ? CLI_OK
                                                        : CLI_FAIL;
        free(a);
        return rc;
    }
    char self[DS_PATH_MAX];
    cli_report_self(self, sizeof(self));
    a->cfg.self = self;
    a->cfg.out_dir = a->out;
    cli_report_command(argc, argv, a->command, sizeof(a->command));
    a->cfg.command = a->command;
    rc = loadgen_soak_run(&a->cfg);
    free(a);
    return rc == 0 ? CLI_OK : CLI_FAIL;
}
