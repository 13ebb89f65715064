/*
 * `dayshard ingest --data DIR [--shards N] [--json] [FILE|-]`: JSON lines through the same
 * decode/route/append path as the Kafka consumer, without Kafka. Accepted events are durable
 * when it exits 0; rejected lines are in DIR/deadletter.NNNNNNNN.jsonl with reason and line
 * number.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "ingest/ingest.h"
#include "shard/shard.h"
#include "storage/storage.h"

const char cmd_ingest_usage[] =
    "usage: dayshard ingest --data DIR [options] [FILE|-]\n"
    "\n"
    "Loads JSON order events, one per line, from FILE or standard input (default), into the\n"
    "data directory DIR. Every accepted event is durable (fdatasync) when the command exits 0.\n"
    "Rejected lines go to DIR/deadletter.NNNNNNNN.jsonl (numbered files in write order) with\n"
    "their reason, line number and raw text.\n"
    "\n"
    "options:\n"
    "  --data DIR              data directory (created if missing)\n"
    "  --model M               what a new DIR counts, recorded in DIR/MODEL: orders (the\n"
    "                          default: one per order_id, its latest version) or events\n"
    "                          (every event counts); an existing DIR keeps its\n"
    "                          own (a different M is a usage error; directories made before\n"
    "                          models were recorded hold events)\n"
    "  --shards N              shard count given to days seen for the first time (default 4,\n"
    "                          1..1024); days already known keep theirs (shard counts only grow)\n"
    "  --json                  print the summary as JSON: {\"accepted\":N,\"rejected\":M,...}\n"
    "  --io MODE               auto (default: io_uring, or plain syscalls if refused), uring, "
    "sync\n"
    "  --commit-interval-ms N  group commit at least every N ms (default 200)\n"
    "  --zstd-level N          block compression level 1..19 (default 1)\n"
    "  --resume                skip the lines of this input that DIR already holds (the line\n"
    "                          numbers its last commit recorded): re-run the same input after a\n"
    "                          failed run (a full disk: exit 1, nothing after the last commit\n"
    "                          kept) and every line is stored exactly once\n"
    "  --retention-days N      keep the newest N days of stream time (the greatest event day\n"
    "                          committed, as in Kafka Streams): older days are dropped whole\n"
    "                          with their index entries, later events of them are dead\n"
    "                          letters (too_late); N in 1..36500, 0 (the default) keeps all\n"
    "  --deadletter-file-bytes N  rotate dead letters at N bytes (default 64 MiB)\n"
    "  --no-compact            orders model: keep superseded versions (no compaction while\n"
    "                          loading), to measure what they cost; `dayshard compact` removes\n"
    "                          them later\n"
    "  --help                  this text\n";

struct ingest_args {
    const char *data;
    const char *input;
    uint64_t shards;
    bool json;
    enum storage_io_mode io_mode;
    uint64_t commit_interval_ms;
    uint64_t zstd_level;
    bool resume;
    bool no_compact;
    enum storage_model model;
    uint64_t retention_days;
    uint64_t deadletter_file_bytes;
};

static int parse_args(int argc, char **argv, struct ingest_args *a)
{
    static const struct option options[] = {{"data", required_argument, NULL, 'd'},
                                            {"shards", required_argument, NULL, 's'},
                                            {"json", no_argument, NULL, 'j'},
                                            {"io", required_argument, NULL, 'i'},
                                            {"commit-interval-ms", required_argument, NULL, 'c'},
                                            {"zstd-level", required_argument, NULL, 'z'},
                                            {"resume", no_argument, NULL, 'r'},
                                            {"model", required_argument, NULL, 'm'},
                                            {"no-compact", no_argument, NULL, 'C'},
                                            {"retention-days", required_argument, NULL, 'R'},
                                            {"deadletter-file-bytes", required_argument, NULL, 'D'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    *a = (struct ingest_args){.shards = SHARD_COUNT_DEFAULT,
                              .commit_interval_ms = 200,
                              .zstd_level = 1,
                              .input = "-",
                              .deadletter_file_bytes = INGEST_DEADLETTER_FILE_BYTES_DEFAULT};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
        char name[CLI_OPTION_NAME_SIZE];
        int rc = 0;
        switch (c) {
        case 'd': a->data = optarg; break;
        case 's': rc = cli_parse_u64(optarg, 1, SHARD_COUNT_MAX, &a->shards); break;
        case 'j': a->json = true; break;
        case 'r': a->resume = true; break;
        case 'C': a->no_compact = true; break;
        case 'i': rc = storage_io_mode_parse(optarg, &a->io_mode); break;
        case 'c': rc = cli_parse_u64(optarg, 1, 60000, &a->commit_interval_ms); break;
        case 'z': rc = cli_parse_u64(optarg, 1, 19, &a->zstd_level); break;
        case 'm': rc = storage_model_parse(optarg, &a->model); break;
        case 'R':
            rc = cli_parse_u64(optarg, 0, STORAGE_RETENTION_DAYS_MAX, &a->retention_days);
            break;
        case 'D':
            rc = cli_parse_u64(optarg, 1, INGEST_DEADLETTER_FILE_BYTES_MAX,
                               &a->deadletter_file_bytes);
            break;
        case 'h': return -1;
        default:
            return cli_error("ingest", CLI_USAGE, "unknown or incomplete option '%s'",
                             argv[optind - 1]);
        }
        if (rc != 0) {
            return cli_error("ingest", CLI_USAGE, "bad value '%s' for %s%s", optarg,
                             cli_option_name(options, c, name),
                             c == 'm'   ? " (events or orders)"
                             : c == 'R' ? " (days, 0..36500; 0 keeps every day)"
                                        : "");
        }
    }
    if (a->data == NULL) {
        return cli_error("ingest", CLI_USAGE, "--data DIR is required");
    }
    if (optind < argc) {
        a->input = argv[optind++];
    }
    if (optind < argc) {
        return cli_error("ingest", CLI_USAGE, "unexpected argument '%s'", argv[optind]);
    }
    char why[STORAGE_MODEL_WHY_SIZE];
    enum storage_model model = STORAGE_MODEL_RECORDED;
    int rc = storage_model_check(a->data, a->model, &model, why, sizeof(why));
    if (rc != 0) {
        return cli_error("ingest", rc == -DS_EUSAGE ? CLI_USAGE : CLI_FAIL, "%s", why);
    }
    return 0;
}

static void print_summary(const struct ingest_stats *stats, const struct storage *st, FILE *out)
{
    fprintf(out,
            "accepted %llu, rejected %llu, blank %llu, lines %llu, commits %llu (I/O %s, model "
            "%s)\n",
            (unsigned long long)stats->accepted, (unsigned long long)stats->rejected,
            (unsigned long long)stats->blank, (unsigned long long)stats->lines,
            (unsigned long long)stats->commits, storage_io_backend(st),
            storage_model_name(storage_model(st)));
    if (storage_model(st) == STORAGE_MODEL_ORDERS) {
        struct storage_order_stats o;
        storage_order_stats(st, &o);
        fprintf(out,
                "orders %llu: %llu new, %llu replaced by a newer version, %llu stale and %llu "
                "unchanged events ignored\n",
                (unsigned long long)o.orders, (unsigned long long)o.created,
                (unsigned long long)o.applied, (unsigned long long)o.stale,
                (unsigned long long)o.unchanged);
    }
    for (int r = 1; r < INGEST_REASON_COUNT; r++) {
        if (stats->rejected_by_reason[r] > 0) {
            fprintf(out, "  rejected %-20s %llu\n", ingest_reason_name((enum ingest_reason)r),
                    (unsigned long long)stats->rejected_by_reason[r]);
        }
    }
}

static int run(const struct ingest_args *a, int fd)
{
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = a->data;
    cfg.io_mode = a->io_mode;
    cfg.zstd_level = (int)a->zstd_level;
    cfg.compact_dead_rows_min = a->no_compact ? 0 : cfg.compact_dead_rows_min;
    cfg.model = a->model;
    cfg.retention_days = (uint32_t)a->retention_days;
    struct storage *st = NULL;
    int rc = storage_open(&cfg, &st);
    if (rc != 0) {
        return cli_error("ingest", CLI_FAIL, "cannot open data directory %s: %s", a->data,
                         ds_strerror(rc));
    }
    struct shard_map *map = NULL;
    rc = shard_map_open(a->data, (uint32_t)a->shards, 0, &map);
    if (rc != 0) {
        storage_close(st);
        return cli_error("ingest", CLI_FAIL, "cannot open the shard map of %s: %s", a->data,
                         ds_strerror(rc));
    }
    char deadletters[DS_PATH_MAX];
    snprintf(deadletters, sizeof(deadletters), "%s/deadletter.jsonl", a->data);
    struct ingest_file_config icfg;
    ingest_file_config_defaults(&icfg);
    icfg.storage = st;
    icfg.map = map;
    icfg.deadletter_path = deadletters;
    icfg.deadletter_file_bytes = a->deadletter_file_bytes;
    icfg.source_name = a->input;
    icfg.commit_interval_ms = (uint32_t)a->commit_interval_ms;
    icfg.resume = a->resume;
    int64_t first_line = storage_source_next(st, DS_SOURCE_FILE);
    if (a->resume && first_line > 1) {
        fprintf(stderr, "dayshard ingest: resuming at line %lld (the lines before it are in %s)\n",
                (long long)first_line, a->data);
    }
    struct ingest_stats stats;
    rc = ingest_file_run(&icfg, fd, &stats);
    if (rc == 0) {
        if (a->json) {
            ingest_stats_json(&stats, stdout);
        } else {
            print_summary(&stats, st, stdout);
        }
    }
    shard_map_close(map);
    storage_close(st);
    if (rc != 0) {
        /* A failed commit (a full disk) leaves blocks past the committed ends. Opening the
         * directory again runs recovery, which cuts them now: the space they took is free and
         * fsck reads the directory clean. Truncation needs no free space; if this open fails
         * too, the next writer's recovery does the same. */
        if (storage_open(&cfg, &st) == 0) {
            storage_close(st);
        }
        return cli_error("ingest", CLI_FAIL,
                         "%s: %s (durable before the failure: %llu events; after fixing the cause, "
                         "run the same input again with --resume to store the rest exactly once)",
                         a->data, ds_strerror(rc), (unsigned long long)stats.accepted);
    }
    return CLI_OK;
}

int cmd_ingest(int argc, char **argv)
{
    struct ingest_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != 0) {
        return rc == -1 ? cli_help(cmd_ingest_usage) : rc;
    }
    int fd = STDIN_FILENO;
    if (strcmp(a.input, "-") != 0) {
        fd = open(a.input, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            return cli_error("ingest", CLI_FAIL, "cannot open %s: %s", a.input, strerror(errno));
        }
    }
    rc = run(&a, fd);
    if (fd != STDIN_FILENO) {
        close(fd);
    }
    return rc;
}
