/*
 * `dayshard generate`: synthetic order events as JSON lines on stdout, from the same generator
 * the demo, the benchmarks and `dayshard produce` use. Deterministic for a seed (and, for
 * flash-sale, the rate: its window is placed in seconds of the schedule). --updates,
 * --duplicates and --items make it an order stream: new versions of earlier orders, producer
 * retries, line items; with all three 0 the output is the plain event stream, byte for byte.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "loadgen/loadgen.h"

const char cmd_generate_usage[] =
    "usage: dayshard generate [options] > events.jsonl\n"
    "\n"
    "Prints synthetic order events, one JSON object per line, in time order (flash-sale: in the\n"
    "order they are meant to be sent, see below); updates and duplicates (--updates,\n"
    "--duplicates) follow the orders they repeat, with those orders' ts.\n"
    "\n"
    "options:\n"
    "  --events N        how many lines in all (default 1000000)\n"
    "  --profile P       uniform (default), busy-day, hot-customer or flash-sale\n"
    "  --seed S          random seed (default 42); the same seed gives the same events\n"
    "  --first-day D     first day, YYYY-MM-DD (default 2026-01-01)\n"
    "  --days N          days covered (default 28)\n"
    "  --customers N     distinct customers, Zipf-distributed (default 1000000)\n"
    "  --busy-fraction F share of events on the busy day 2026-01-21 (busy-day; default 0.3)\n"
    "  --rate R          events per second the stream is meant to be sent at (flash-sale\n"
    "                    needs it; `dayshard produce --rate R` with the same options sends\n"
    "                    these events on that schedule)\n"
    "  --updates F       share of lines, 0..1, that are a new version of an order sent\n"
    "                    earlier: a status step (pending -> paid -> shipped, or cancelled),\n"
    "                    a changed amount, rarely a moved day or customer; half of the orders\n"
    "                    then carry an increasing \"version\", and about 1 in 20 of their\n"
    "                    updates arrives stale, after a higher version (default 0)\n"
    "  --duplicates F    share of lines that repeat a recent line byte for byte, a producer's\n"
    "                    retry (default 0); --updates + --duplicates is at most 0.9\n"
    "  --items F         share of new orders with an \"items\" array of 0..5\n"
    "                    {\"product\", \"quantity\"} (default 0)\n"
    "  --help            this text\n"
    "\n"
    "profiles:\n"
    "  uniform           events spread evenly over the days, in time order\n"
    "  busy-day          one day (2026-01-21) takes --busy-fraction of all events\n"
    "  hot-customer      customer 1 places 1% of all orders\n"
    "  flash-sale        uniform, plus a flash sale: for 60 s of the schedule, starting a third\n"
    "                    of the way in, the busy day 2026-01-21 runs at 50 times its share of\n"
    "                    the rate (R / days), 49 shares on top of the uniform stream, which\n"
    "                    goes on as before; needs --rate R and at least 90 s of events\n"
    "                    (90 R + 60 x 49 R / days)\n";

int cmd_generate(int argc, char **argv)
{
    static const struct option options[] = {{"events", required_argument, NULL, 'n'},
                                            {"profile", required_argument, NULL, 'p'},
                                            {"seed", required_argument, NULL, 's'},
                                            {"first-day", required_argument, NULL, 'f'},
                                            {"days", required_argument, NULL, 'D'},
                                            {"customers", required_argument, NULL, 'c'},
                                            {"busy-fraction", required_argument, NULL, 'b'},
                                            {"rate", required_argument, NULL, 'r'},
                                            {"updates", required_argument, NULL, 'U'},
                                            {"duplicates", required_argument, NULL, 'P'},
                                            {"items", required_argument, NULL, 'I'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    struct loadgen_workload_config cfg;
    loadgen_workload_defaults(&cfg);
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
    if ((cfg.profile == LOADGEN_PROFILE_BUSY_DAY || cfg.profile == LOADGEN_PROFILE_FLASH_SALE) &&
        cfg.busy_day_index >= cfg.days) {
        cfg.busy_day_index = cfg.days / 2;
    }
    int rc = loadgen_workload_config_check(&cfg);
    if (rc != 0) {
        return cli_error("generate", CLI_USAGE, "invalid workload: %s", ds_strerror(rc));
    }
    rc = loadgen_workload_write(&cfg, stdout, NULL);
    if (rc != 0) {
        return cli_error("generate", CLI_FAIL, "cannot generate: %s", ds_strerror(rc));
    }
    return fflush(stdout) == 0 ? CLI_OK : cli_error("generate", CLI_FAIL, "write failed");
}
