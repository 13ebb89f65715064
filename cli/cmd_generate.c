/*
 * `dayshard generate`: synthetic order events as JSON lines on stdout, from the same generator
 * the demo, the benchmarks and (later) `dayshard produce` use. Deterministic for a seed.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "ingest/ingest.h"

const char cmd_generate_usage[] =
    "usage: dayshard generate [options] > events.jsonl\n"
    "\n"
    "Prints synthetic order events, one JSON object per line, in time order.\n"
    "\n"
    "options:\n"
    "  --events N        how many (default 1000000)\n"
    "  --profile P       uniform (default), busy-day or hot-customer\n"
    "  --seed S          random seed (default 42); the same seed gives the same events\n"
    "  --first-day D     first day, YYYY-MM-DD (default 2026-01-01)\n"
    "  --days N          days covered (default 28)\n"
    "  --customers N     distinct customers, Zipf-distributed (default 1000000)\n"
    "  --busy-fraction F share of events on the busy day 2026-01-21 (busy-day; default 0.3)\n"
    "  --help            this text\n";

int cmd_generate(int argc, char **argv)
{
    static const struct option options[] = {{"events", required_argument, NULL, 'n'},
                                            {"profile", required_argument, NULL, 'p'},
                                            {"seed", required_argument, NULL, 's'},
                                            {"first-day", required_argument, NULL, 'f'},
                                            {"days", required_argument, NULL, 'D'},
                                            {"customers", required_argument, NULL, 'c'},
                                            {"busy-fraction", required_argument, NULL, 'b'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    struct ingest_workload_config cfg;
    ingest_workload_defaults(&cfg);
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
        char name[CLI_OPTION_NAME_SIZE];
        if (c == 'h') {
            return cli_help(cmd_generate_usage);
        }
        if (c == '?' || c == ':') {
            return cli_error("generate", CLI_USAGE, "unknown or incomplete option '%s'",
                             argv[optind - 1]);
        }
        if (cli_parse_workload_option(c, optarg, &cfg) != 0) {
            return cli_error("generate", CLI_USAGE, "bad value '%s' for %s", optarg,
                             cli_option_name(options, c, name));
        }
    }
    if (optind < argc) {
        return cli_error("generate", CLI_USAGE, "unexpected argument '%s'", argv[optind]);
    }
    if (cfg.profile == INGEST_PROFILE_BUSY_DAY && cfg.busy_day_index >= cfg.days) {
        cfg.busy_day_index = cfg.days / 2;
    }
    int rc = ingest_workload_config_check(&cfg);
    if (rc != 0) {
        return cli_error("generate", CLI_USAGE, "invalid workload: %s", ds_strerror(rc));
    }
    rc = ingest_workload_write(&cfg, stdout, NULL);
    if (rc != 0) {
        return cli_error("generate", CLI_FAIL, "cannot generate: %s", ds_strerror(rc));
    }
    return fflush(stdout) == 0 ? CLI_OK : cli_error("generate", CLI_FAIL, "write failed");
}
