/*
 * `dayshard produce`: JSON order events to a Kafka topic, from a file, stdin or the built-in
 * generator (the same events as `dayshard generate` with the same options), keyed by order_id
 * or, with --key, by customer, day or storage partition key (for hot-partition load tests).
 * Exit 0 when every sent event was acknowledged, 1 when any was not (failed, or still
 * outstanding at the flush timeout) or the producer failed, 2 on a usage error.
 * SIGINT/SIGTERM stop sending; what was sent is still flushed and reported (a second signal
 * abandons that wait: what is still outstanding then counts as not acknowledged).
 * Rejected: a separate `loadtest`-style generator binary (the generator options here and in
 * `generate` give the same stream, so a file can reproduce a run exactly).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "ingest/ingest.h"
#include "loadgen/loadgen.h"
#include "shard/shard.h"

const char cmd_produce_usage[] =
    "usage: dayshard produce --brokers B --topic T [options] [FILE|-]\n"
    "\n"
    "Sends JSON order events to a Kafka topic, keyed by order_id (see --key), with an\n"
    "idempotent, lz4-compressed producer, and waits for every delivery report. Events come from\n"
    "FILE or standard input ('-'), one per line, sent verbatim (bad events too, unkeyed; blank\n"
    "lines are skipped), or, without FILE, from the generator of `dayshard generate`.\n"
    "\n"
    "options:\n"
    "  --brokers B            bootstrap servers, HOST:PORT[,HOST:PORT...]\n"
    "  --topic T              topic to send to\n"
    "  --rate R               lines per second from FILE, new orders per second from the\n"
    "                         generator (updates and repeats go out beside them); default 0:\n"
    "                         as fast as possible. Open loop: each event is due at its place\n"
    "                         in the schedule; a producer that falls behind sends at once\n"
    "                         until it catches up (a slow pipeline shows as lag), and warns\n"
    "                         if it fell more than 1 s behind\n"
    "  --key MODE             what messages are keyed by, which picks their Kafka partition:\n"
    "                           order      the order_id (default): orders spread evenly\n"
    "                           customer   the customer_id: a customer's orders in one partition\n"
    "                           day        YYYY-MM-DD of the event: a day in one partition (the\n"
    "                                      classic hot partition)\n"
    "                           partition  DAY#YYYY-MM-DD#k, the storage key (k = shard of the\n"
    "                                      order among the day's S shards): a day salted over S,\n"
    "                                      S from the shard map topic T.shardmap that nodes\n"
    "                                      publish their growths to (followed while sending)\n"
    "  --shards N             S for --key partition of a day the map topic does not name,\n"
    "                         1..1024 (default 4)\n"
    "  -X key=value           a librdkafka property, overriding dayshard's (repeatable)\n"
    "  --flush-timeout-ms N   wait at most N ms at the end for delivery reports (default 60000)\n"
    "  --json                 print the summary as JSON: {\"sent\":N,\"acked\":N,...}\n"
    "  --help                 this text\n"
    "\n"
    "generator options (only without FILE; defaults as in `dayshard generate`):\n"
    "  --events N             how many (default 1000000)\n"
    "  --profile P            uniform (default), busy-day, hot-customer or flash-sale (busy day\n"
    "                         2026-01-21 at 50x its share of --rate for 60 s, a third of the\n"
    "                         way in; needs --rate; see `dayshard generate --help`)\n"
    "  --seed S               random seed (default 42)\n"
    "  --first-day D          first day, YYYY-MM-DD (default 2026-01-01)\n"
    "  --days N               days covered (default 28)\n"
    "  --customers N          distinct customers, Zipf-distributed (default 1000000)\n"
    "  --busy-fraction F      share of events on the busy day 2026-01-21 (busy-day; default 0.3)\n"
    "  --updates F            share of events that are a new version of an earlier order, some\n"
    "                         with \"version\" (default 0; see `dayshard generate --help`)\n"
    "  --duplicates F         share of events that repeat a recent one, a producer's retry\n"
    "                         (default 0)\n"
    "  --items F              share of new orders with an \"items\" array (default 0)\n"
    "\n"
    "On a terminal a progress line is shown on stderr. Exit status: 0 when every event sent was\n"
    "acknowledged, 1 otherwise (with the reason), 2 on a usage error. SIGINT or SIGTERM stops\n"
    "sending; what was sent is still awaited and reported. A second signal stops the wait.\n";

/* Set by the signal handler, read by the producer loop: the one signal flag of the command. */
static volatile sig_atomic_t produce_stop_requested;

_Static_assert(sizeof(sig_atomic_t) == sizeof(int), "the flag is passed as a volatile int");

struct produce_args {
    struct loadgen_produce_config cfg;
    const char *input; /* NULL: generate */
    const char *first_generator_option;
    bool json;
    uint64_t flush_timeout_ms;
};

/* The first signal stops sending, a second one also stops waiting for delivery reports. */
static void on_signal(int signo)
{
    (void)signo;
    if (produce_stop_requested < 2) {
        produce_stop_requested = produce_stop_requested + 1;
    }
}

/* Options that are not generator options. Returns 0 or -DS_EUSAGE. */
static int parse_option(int c, const char *value, struct produce_args *a,
                        struct ingest_kafka_props *props)
{
    switch (c) {
    case 'B': a->cfg.brokers = value; return 0;
    case 'T': a->cfg.topic = value; return 0;
    case 'r': return cli_parse_u64(value, 0, 100000000, &a->cfg.rate);
    case 'X': return ingest_kafka_props_add(props, value);
    case 'F': return cli_parse_u64(value, 1, 3600000, &a->flush_timeout_ms);
    case 'j': a->json = true; return 0;
    case 'k': return loadgen_produce_key_parse(value, &a->cfg.key);
    case 'S': {
        uint64_t n = 0;
        int rc = cli_parse_u64(value, 1, SHARD_COUNT_MAX, &n);
        a->cfg.base_shards = (uint32_t)n;
        return rc;
    }
    }
    return -DS_EUSAGE;
}

/* Returns 0, -1 for --help, or an exit code (a usage error). */
static int parse_args(int argc, char **argv, struct produce_args *a,
                      struct ingest_kafka_props *props)
{
    static const struct option options[] = {{"brokers", required_argument, NULL, 'B'},
                                            {"topic", required_argument, NULL, 'T'},
                                            {"rate", required_argument, NULL, 'r'},
                                            {"json", no_argument, NULL, 'j'},
                                            {"flush-timeout-ms", required_argument, NULL, 'F'},
                                            {"events", required_argument, NULL, 'n'},
                                            {"profile", required_argument, NULL, 'p'},
                                            {"seed", required_argument, NULL, 's'},
                                            {"first-day", required_argument, NULL, 'f'},
                                            {"days", required_argument, NULL, 'D'},
                                            {"customers", required_argument, NULL, 'c'},
                                            {"busy-fraction", required_argument, NULL, 'b'},
                                            {"updates", required_argument, NULL, 'U'},
                                            {"duplicates", required_argument, NULL, 'P'},
                                            {"items", required_argument, NULL, 'I'},
                                            {"key", required_argument, NULL, 'k'},
                                            {"shards", required_argument, NULL, 'S'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    static const char generator_options[] = "npsfDcbUPI";
    int c;
    int index = -1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "X:", options, &index)) != -1) {
        /* Named from the table: argv[optind - 1] is the value when it is a separate word. */
        const char *name = c == 'X' ? "-X" : index >= 0 ? options[index].name : "?";
        index = -1;
        if (c == 'h') {
            return -1;
        }
        if (c == '?' || c == ':') {
            return cli_error("produce", CLI_USAGE, "unknown or incomplete option '%s'",
                             argv[optind - 1]);
        }
        int rc = 0;
        if (strchr(generator_options, c) != NULL) {
            a->first_generator_option = name;
            rc = cli_parse_workload_option(c, optarg, &a->cfg.workload);
        } else {
            rc = parse_option(c, optarg, a, props);
        }
        if (rc != 0 && c == 'k') {
            return cli_error("produce", CLI_USAGE,
                             "unknown --key '%s': expected order, customer, day or partition",
                             optarg);
        }
        if (rc != 0) {
            return cli_error("produce", CLI_USAGE, "bad value '%s' for %s%s", optarg,
                             c == 'X' ? "" : "--", name);
        }
    }
    if (optind < argc) {
        a->input = argv[optind++];
    }
    if (optind < argc) {
        return cli_error("produce", CLI_USAGE, "unexpected argument '%s'", argv[optind]);
    }
    return 0;
}

/* Checks what the options say together. Returns 0 or an exit code. */
static int check_args(struct produce_args *a)
{
    if (a->cfg.brokers == NULL || a->cfg.brokers[0] == '\0') {
        return cli_error("produce", CLI_USAGE, "--brokers B is required");
    }
    if (a->cfg.topic == NULL || a->cfg.topic[0] == '\0') {
        return cli_error("produce", CLI_USAGE, "--topic T is required");
    }
    if (a->input != NULL && a->first_generator_option != NULL) {
        return cli_error("produce", CLI_USAGE, "--%s is a generator option: not with an input file",
                         a->first_generator_option);
    }
    struct loadgen_workload_config *w = &a->cfg.workload;
    if ((w->profile == LOADGEN_PROFILE_BUSY_DAY || w->profile == LOADGEN_PROFILE_FLASH_SALE) &&
        w->busy_day_index >= w->days) {
        w->busy_day_index = w->days / 2;
    }
    if (a->input == NULL) {
        /* The generator's schedule is the pacing: the same stream as `generate --rate R`. */
        w->rate_eps = (double)a->cfg.rate;
    }
    int rc = loadgen_workload_config_check(w);
    if (rc != 0) {
        return cli_error("produce", CLI_USAGE, "invalid workload: %s", ds_strerror(rc));
    }
    return 0;
}

static void print_summary(const struct loadgen_produce_stats *s, bool json)
{
    double per_second = s->seconds > 0.0 ? (double)s->acked / s->seconds : 0.0;
    if (json) {
        printf("{\"sent\":%llu,\"acked\":%llu,\"failed\":%llu,\"skipped\":%llu,\"seconds\":%.3f,"
               "\"events_per_second\":%.0f,\"behind_max_s\":%.3f}\n",
               (unsigned long long)s->sent, (unsigned long long)s->acked,
               (unsigned long long)s->failed, (unsigned long long)s->skipped, s->seconds,
               per_second, s->behind_max_s);
    } else {
        printf("sent %llu, acked %llu, failed %llu, skipped %llu, %.0f events/s\n",
               (unsigned long long)s->sent, (unsigned long long)s->acked,
               (unsigned long long)s->failed, (unsigned long long)s->skipped, per_second);
    }
    fflush(stdout);
}

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT); /* the handler's read-modify-write must not nest */
    sigaddset(&sa.sa_mask, SIGTERM);
    /* No SA_RESTART: a read or poll waiting for input returns EINTR and sees the flag. */
    int rc = sigaction(SIGINT, &sa, NULL);
    ASSERT(rc == 0);
    rc = sigaction(SIGTERM, &sa, NULL);
    ASSERT(rc == 0);
}

/* Runs the producer over the parsed arguments; returns the exit code. */
static int execute(struct produce_args *a, int fd)
{
    a->cfg.input_fd = fd;
    a->cfg.flush_timeout_ms = (uint32_t)a->flush_timeout_ms;
    a->cfg.progress_file = isatty(STDERR_FILENO) ? stderr : NULL;
    install_signals();
    struct ingest_shardmap_follower *follower = NULL;
    if (a->cfg.key == LOADGEN_PRODUCE_KEY_PARTITION) {
        uint32_t base = a->cfg.base_shards != 0 ? a->cfg.base_shards : SHARD_COUNT_DEFAULT;
        int rc = ingest_shardmap_follower_open(a->cfg.brokers, a->cfg.topic, a->cfg.props, base,
                                               &follower);
        if (rc != 0) {
            return cli_error("produce", rc == -DS_EUSAGE ? CLI_USAGE : CLI_FAIL,
                             "cannot follow the shard map topic %s.shardmap: %s", a->cfg.topic,
                             ds_strerror(rc));
        }
        a->cfg.shards_of_day = ingest_shardmap_follower_shards;
        a->cfg.shards_user = follower;
    }
    struct loadgen_produce_stats stats;
    int rc = loadgen_produce_run(&a->cfg, &stats, &produce_stop_requested);
    ingest_shardmap_follower_close(follower);
    if (rc == -DS_EUSAGE) {
        return cli_error("produce", CLI_USAGE, "the Kafka settings were refused (see above)");
    }
    print_summary(&stats, a->json);
    if (rc == 0) {
        return CLI_OK;
    }
    if (stats.acked < stats.sent) {
        return cli_error("produce", CLI_FAIL, "%llu of %llu events sent were not acknowledged",
                         (unsigned long long)(stats.sent - stats.acked),
                         (unsigned long long)stats.sent);
    }
    return cli_error("produce", CLI_FAIL, "%s", ds_strerror(rc));
}

int cmd_produce(int argc, char **argv)
{
    struct ingest_kafka_props props = {.count = 0};
    struct produce_args a = {.flush_timeout_ms = 60000};
    loadgen_workload_defaults(&a.cfg.workload);
    a.cfg.props = &props;
    int rc = parse_args(argc, argv, &a, &props);
    if (rc != 0) {
        return rc == -1 ? cli_help(cmd_produce_usage) : rc;
    }
    rc = check_args(&a);
    if (rc != 0) {
        return rc;
    }
    int fd = -1;
    if (a.input != NULL && strcmp(a.input, "-") == 0) {
        fd = STDIN_FILENO;
    } else if (a.input != NULL) {
        fd = open(a.input, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            return cli_error("produce", CLI_FAIL, "cannot open %s: %s", a.input, strerror(errno));
        }
    }
    rc = execute(&a, fd);
    if (fd > STDIN_FILENO) {
        close(fd);
    }
    return rc;
}
