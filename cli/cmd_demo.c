/*
 * `dayshard demo`: the main job of the README. Starts the embedded Kafka broker, a node
 * consuming the "orders" topic, and a producer streaming a generated busy month of orders (one
 * day takes 30% of them); prints the counts as they grow, then the daily counts, the busy day's
 * spread over its shards (what write sharding does to a hot day), the bytes per event on disk,
 * and an fsck of everything written; stops everything cleanly. With --no-kafka it ingests a
 * generated file instead, through the same decode/route/append path.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "ingest/ingest.h"
#include "loadgen/loadgen.h"
#include "query/query.h"
#include "shard/shard.h"
#include "storage/storage.h"

const char cmd_demo_usage[] =
    "usage: dayshard demo [options]\n"
    "\n"
    "Starts the embedded Kafka broker and a node, streams a generated busy month of orders\n"
    "(28 days from 2026-01-01; 2026-01-21 takes 30%) through the topic into durable day\n"
    "partitions, prints the counts as they grow, the daily counts, the busy day's spread over\n"
    "its shards, the bytes per event on disk, and verifies every block.\n"
    "\n"
    "options:\n"
    "  --events N   events to generate (default 1000000)\n"
    "  --rate R     producer rate in events/s (default 200000; 0 = as fast as it goes)\n"
    "  --no-kafka   ingest a generated file instead of streaming through the broker\n"
    "  --shards N   shards a new day starts with (default 4)\n"
    "  --shard-capacity R  adaptive sharding as `dayshard run` does it: a day written faster\n"
    "               than R events/s per shard grows (default 1000; 0 keeps every day at\n"
    "               --shards)\n"
    "  --data DIR   keep the data here (default: a temporary directory, removed at the end)\n"
    "  --seed S     generator seed (default 42)\n"
    "  --model M    what a new data directory counts, recorded in it: orders (the default:\n"
    "               one per order_id, its latest version) or events (every event counts);\n"
    "               an existing --data DIR keeps its own\n"
    "  --help       this text\n";

/* Shard lines the busy day shows before summing up the rest; growth lines shown. */
#define DEMO_SHARD_LINES 12u
#define DEMO_GROWTH_LINES 6u

struct demo {
    bool no_kafka;
    uint64_t rate;
    uint64_t events;
    uint64_t shards;
    uint64_t shard_capacity;
    uint64_t seed;
    enum storage_model model;
    const char *data;
    char tmp[64];
    char input[DS_PATH_MAX];
};

static int generate_file(const struct demo *d, struct loadgen_workload_config *cfg, uint64_t *bytes)
{
    FILE *out = fopen(d->input, "w");
    if (out == NULL) {
        return -errno;
    }
    *bytes = 0;
    int rc = loadgen_workload_write(cfg, out, bytes);
    if (fclose(out) != 0 && rc == 0) {
        rc = -errno;
    }
    return rc;
}

static void bar(uint64_t value, uint64_t max, int width)
{
    int n = max == 0 ? 0 : (int)((value * (uint64_t)width + max / 2) / max);
    for (int i = 0; i < n; i++) {
        fputs("#", stdout);
    }
}

static int show_days(struct storage *st, struct shard_map *map, int32_t first, int32_t last)
{
    struct query_count_request req = {.day_first = first, .day_last = last, .by = QUERY_GROUP_DAY};
    struct query_count_result res;
    int rc = query_count(st, map, &req, &res);
    if (rc != 0) {
        return rc;
    }
    uint64_t max = 0;
    for (size_t i = 0; i < res.group_count; i++) {
        max = res.groups[i].count > max ? res.groups[i].count : max;
    }
    char amount[DS_AMOUNT_TEXT_SIZE];
    ds_amount_format(res.amount_units, amount);
    printf("\norders per day (dayshard count --day 2026-01-01 --to 2026-01-28 --by day):\n");
    for (size_t i = 0; i < res.group_count; i++) {
        char date[DS_DATE_TEXT_SIZE];
        ds_date_format(res.groups[i].day, date);
        printf("  %s %9llu ", date, (unsigned long long)res.groups[i].count);
        bar(res.groups[i].count, max, 40);
        printf("\n");
    }
    printf("  total      %9llu orders, amount %s, %u partitions read (model %s: %s)\n",
           (unsigned long long)res.count, amount, res.partitions,
           storage_model_name(storage_model(st)),
           storage_model(st) == STORAGE_MODEL_EVENTS ? "every event counts" : "one per order_id");
    query_count_result_deinit(&res);
    return 0;
}

static int show_busy_day(struct storage *st, struct shard_map *map, int32_t day, uint64_t total)
{
    struct query_count_request req = {.day_first = day, .day_last = day, .by = QUERY_GROUP_SHARD};
    struct query_count_result res;
    int rc = query_count(st, map, &req, &res);
    if (rc != 0) {
        return rc;
    }
    uint64_t hottest = 0;
    uint64_t coldest = UINT64_MAX;
    printf("\nthe busy day over its %zu shards (dayshard count --day 2026-01-21 --by shard):\n",
           res.group_count);
    for (size_t i = 0; i < res.group_count; i++) {
        uint64_t n = res.groups[i].count;
        hottest = n > hottest ? n : hottest;
        coldest = n < coldest ? n : coldest;
        /* Many shards: the first few and the last, the rest summed up below. */
        if (res.group_count > DEMO_SHARD_LINES && i >= DEMO_SHARD_LINES - 2 &&
            i + 1 < res.group_count) {
            if (i == DEMO_SHARD_LINES - 2) {
                printf("  ... %zu more shards\n", res.group_count - DEMO_SHARD_LINES + 1);
            }
            continue;
        }
        char key[SHARD_KEY_TEXT_SIZE];
        shard_key_format(day, res.groups[i].shard, key);
        printf("  %-18s %9llu  %5.1f%% of the day ", key, (unsigned long long)n,
               res.count ? 100.0 * (double)n / (double)res.count : 0.0);
        bar(n, res.count, 40);
        printf("\n");
    }
    if (res.group_count > 1 && res.count > 0) {
        printf("  each shard holds %.1f%% to %.1f%% of the day\n",
               100.0 * (double)coldest / (double)res.count,
               100.0 * (double)hottest / (double)res.count);
    }
    if (total > 0 && res.count > 0) {
        printf(
            "write sharding: unsharded, partition DAY#2026-01-21 would take %.1f%% of all writes;"
            "\n  with %zu shards the hottest partition takes %.1f%%.\n",
            100.0 * (double)res.count / (double)total, res.group_count,
            100.0 * (double)hottest / (double)total);
    }
    query_count_result_deinit(&res);
    return 0;
}

/* The growths of adaptive sharding, from DIR/shardmap.log (the first few). */
static void show_growths(const struct demo *d)
{
    char path[DS_PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/shardmap.log", d->data);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        printf("\nadaptive sharding: no day grew (capacity %llu events/s per shard%s)\n",
               (unsigned long long)d->shard_capacity, d->shard_capacity == 0 ? ": off" : "");
        return;
    }
    printf("\nadaptive sharding (a day written faster than %llu events/s per shard grows; "
           "DIR/shardmap.log):\n",
           (unsigned long long)d->shard_capacity);
    char line[512];
    unsigned lines = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (lines++ < DEMO_GROWTH_LINES) {
            printf("  %s", line);
        }
    }
    if (lines > DEMO_GROWTH_LINES) {
        printf("  ... %u growths in all\n", lines);
    }
    fclose(f);
}

static int ingest_input(const struct demo *d, struct storage *st, struct shard_map *map,
                        struct ingest_stats *stats)
{
    char deadletters[DS_PATH_MAX];
    snprintf(deadletters, sizeof(deadletters), "%s/deadletter.jsonl", d->data);
    struct ingest_file_config icfg;
    ingest_file_config_defaults(&icfg);
    icfg.storage = st;
    icfg.map = map;
    icfg.deadletter_path = deadletters;
    icfg.source_name = d->input;
    int fd = open(d->input, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    int rc = ingest_file_run(&icfg, fd, stats);
    close(fd);
    return rc;
}

/* The daily counts, the busy day's shards, and an fsck with bytes per event; raw_bytes of
 * JSON per event is shown when known (0: not). */
static int show_results(const struct demo *d, uint64_t accepted, uint64_t raw_bytes)
{
    struct loadgen_workload_config wcfg;
    loadgen_workload_defaults(&wcfg);
    struct storage *st = NULL;
    struct shard_map *map = NULL;
    int rc = storage_open_reader(d->data, &st);
    rc = rc == 0 ? shard_map_open(d->data, (uint32_t)d->shards, SHARD_MAP_READ_ONLY, &map) : rc;
    rc = rc == 0 ? show_days(st, map, wcfg.first_day, wcfg.first_day + (int32_t)wcfg.days - 1) : rc;
    if (rc == 0) {
        rc = show_busy_day(st, map, wcfg.first_day + (int32_t)wcfg.busy_day_index, accepted);
    }
    if (rc == 0 && !d->no_kafka) {
        show_growths(d);
    }
    shard_map_close(map);
    storage_close(st);
    if (rc != 0) {
        return cli_error("demo", CLI_FAIL, "%s", ds_strerror(rc));
    }
    struct storage_fsck_options fopts = {0};
    struct storage_fsck_report report;
    rc = storage_fsck(d->data, &fopts, &report);
    printf("\nfsck: %s, %llu blocks, %llu events verified; %.2f bytes per event on disk",
           rc == 0 ? "clean" : "DAMAGED", (unsigned long long)report.blocks_ok,
           (unsigned long long)report.events_ok,
           report.events_ok ? (double)report.bytes_ok / (double)report.events_ok : 0.0);
    if (raw_bytes > 0 && accepted > 0) {
        printf(" (raw JSON: %.1f)", (double)raw_bytes / (double)accepted);
    }
    /* The store is a descriptor, logs and sealed day files: all of DIR/ids counts. */
    char ids_dir[DS_PATH_MAX + 16];
    snprintf(ids_dir, sizeof(ids_dir), "%s/ids", d->data);
    uint64_t ids_bytes = 0;
    DIR *dir = report.events_ok > 0 ? opendir(ids_dir) : NULL;
    for (struct dirent *e = dir != NULL ? readdir(dir) : NULL; e != NULL; e = readdir(dir)) {
        struct stat sb;
        if (e->d_name[0] != '.' && fstatat(dirfd(dir), e->d_name, &sb, 0) == 0 &&
            S_ISREG(sb.st_mode)) {
            ids_bytes += (uint64_t)sb.st_size;
        }
    }
    if (dir != NULL) {
        closedir(dir);
        printf("\n  plus %.2f bytes per event for the orders-by-id store (DIR/ids)",
               (double)ids_bytes / (double)report.events_ok);
    }
    printf("\n");
    return rc == 0 ? CLI_OK : cli_error("demo", CLI_FAIL, "fsck found damage");
}

static int run_demo(struct demo *d)
{
    struct loadgen_workload_config wcfg;
    loadgen_workload_defaults(&wcfg);
    wcfg.profile = LOADGEN_PROFILE_BUSY_DAY;
    wcfg.events = d->events;
    wcfg.seed = d->seed;
    snprintf(d->input, sizeof(d->input), "%s/events.jsonl", d->data);
    printf("dayshard demo: %llu order events over 28 days from 2026-01-01, 30%% of them on "
           "2026-01-21, %llu shards per day\ndata directory: %s\n",
           (unsigned long long)d->events, (unsigned long long)d->shards, d->data);
    uint64_t raw_bytes = 0;
    uint64_t t0 = ds_clock_ns();
    int rc = generate_file(d, &wcfg, &raw_bytes);
    if (rc != 0) {
        return cli_error("demo", CLI_FAIL, "cannot write %s: %s", d->input, ds_strerror(rc));
    }
    printf("generated %.1f MB of JSON lines in %.2f s\n", (double)raw_bytes / 1e6,
           (double)(ds_clock_ns() - t0) / 1e9);
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = d->data;
    cfg.model = d->model;
    struct storage *st = NULL;
    struct shard_map *map = NULL;
    rc = storage_open(&cfg, &st);
    rc = rc == 0 ? shard_map_open(d->data, (uint32_t)d->shards, 0, &map) : rc;
    struct ingest_stats stats = {0};
    t0 = ds_clock_ns();
    rc = rc == 0 ? ingest_input(d, st, map, &stats) : rc;
    double seconds = (double)(ds_clock_ns() - t0) / 1e9;
    if (rc == 0) {
        printf("ingested %llu events durably in %.2f s: %.0f events/s (I/O: %s, %llu commits)\n",
               (unsigned long long)stats.accepted, seconds, (double)stats.accepted / seconds,
               storage_io_backend(st), (unsigned long long)stats.commits);
    }
    shard_map_close(map);
    storage_close(st);
    if (rc != 0) {
        return cli_error("demo", CLI_FAIL, "%s", ds_strerror(rc));
    }
    return show_results(d, stats.accepted, raw_bytes);
}

/* ---- the Kafka demo ------------------------------------------------------------------------ */

struct kafka_demo {
    struct demo *d;
    struct loadgen_workload_config workload;
    struct ingest_kafka_props props;
    struct ingest_node_config node;
    struct ingest_node_stats node_stats;
    int node_rc;
    volatile int stop_node;
    struct loadgen_produce_config produce;
    struct loadgen_produce_stats produce_stats;
    int produce_rc;
    atomic_bool produce_done;
};

static void *node_main(void *arg)
{
    struct kafka_demo *k = arg;
    k->node_rc = ingest_node_run(&k->node, &k->node_stats, &k->stop_node);
    return NULL;
}

static void *producer_main(void *arg)
{
    struct kafka_demo *k = arg;
    k->produce_rc = loadgen_produce_run(&k->produce, &k->produce_stats, NULL);
    atomic_store(&k->produce_done, true);
    return NULL;
}

/* Durable events so far (all days) and on the busy day, read as any reader would. */
static int durable_counts(struct storage *st, struct shard_map *map, const struct kafka_demo *k,
                          uint64_t *total, uint64_t *busy)
{
    int rc = storage_refresh(st);
    rc = rc == 0 ? shard_map_reload(map) : rc;
    int32_t first = k->workload.first_day;
    int32_t busy_day = first + (int32_t)k->workload.busy_day_index;
    struct query_count_request all = {.day_first = first,
                                      .day_last = first + (int32_t)k->workload.days - 1};
    struct query_count_request one = {.day_first = busy_day, .day_last = busy_day};
    struct query_count_result res;
    rc = rc == 0 ? query_count(st, map, &all, &res) : rc;
    if (rc == 0) {
        *total = res.count;
        query_count_result_deinit(&res);
        rc = query_count(st, map, &one, &res);
    }
    if (rc == 0) {
        *busy = res.count;
        query_count_result_deinit(&res);
    }
    return rc;
}

/* Prints a line a second until every acknowledged event is durable (or something failed). */
static int watch(struct kafka_demo *k, uint64_t t0)
{
    struct storage *st = NULL;
    struct shard_map *map = NULL;
    int rc = storage_open_reader(k->d->data, &st);
    rc = rc == 0 ? shard_map_open(k->d->data, SHARD_COUNT_DEFAULT, SHARD_MAP_READ_ONLY, &map) : rc;
    uint64_t total = 0;
    uint64_t busy = 0;
    uint64_t last_progress_ns = ds_clock_ns();
    uint64_t last_total = 0;
    while (rc == 0) {
        struct timespec tick = {.tv_sec = 1};
        nanosleep(&tick, NULL);
        rc = durable_counts(st, map, k, &total, &busy);
        bool produced = atomic_load(&k->produce_done);
        printf("  %5.1f s  durable %9llu  busy day 2026-01-21 %8llu  producer %s\n",
               (double)(ds_clock_ns() - t0) / 1e9, (unsigned long long)total,
               (unsigned long long)busy, produced ? "done" : "sending");
        fflush(stdout);
        if (total != last_total) {
            last_total = total;
            last_progress_ns = ds_clock_ns();
        }
        if (produced && (k->produce_rc != 0 || total >= k->produce_stats.acked)) {
            break;
        }
        if (ds_clock_ns() - last_progress_ns > 60ull * 1000000000u) {
            rc = -ETIMEDOUT;
        }
    }
    shard_map_close(map);
    storage_close(st);
    return rc;
}

static void kafka_demo_configure(struct kafka_demo *k, const char *bootstrap)
{
    loadgen_workload_defaults(&k->workload);
    k->workload.profile = LOADGEN_PROFILE_BUSY_DAY;
    k->workload.events = k->d->events;
    k->workload.seed = k->d->seed;
    /* A restarted node rejoins the embedded broker's group within seconds, not 45. */
    int rc = ingest_kafka_props_add(&k->props, "session.timeout.ms=6000");
    ASSERT(rc == 0);
    ingest_node_config_defaults(&k->node);
    k->node.brokers = bootstrap;
    k->node.group = "dayshard-demo";
    k->node.data_dir = k->d->data;
    k->node.model = (int)k->d->model;
    k->node.base_shards = (uint32_t)k->d->shards;
    k->node.shard_capacity_eps = (uint32_t)k->d->shard_capacity;
    k->node.max_shards = SHARD_MAX_SHARDS_DEFAULT > k->node.base_shards ? SHARD_MAX_SHARDS_DEFAULT
                                                                        : k->node.base_shards;
    k->node.props = &k->props;
    k->produce.brokers = bootstrap;
    k->produce.topic = "orders";
    k->produce.input_fd = -1;
    k->produce.workload = k->workload;
    k->produce.rate = k->d->rate;
}

/* Creates the (empty) store in dir as a writer would, with its model, and closes it. */
static int store_create_empty(const char *dir, enum storage_model model)
{
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = dir;
    cfg.model = model;
    struct storage *st = NULL;
    int rc = storage_open(&cfg, &st);
    storage_close(st);
    return rc;
}

static int run_kafka_demo(struct demo *d)
{
    struct kafka_demo *k = calloc(1, sizeof(*k));
    if (k == NULL) {
        return cli_error("demo", CLI_FAIL, "out of memory");
    }
    k->d = d;
    struct loadgen_broker_config bcfg;
    loadgen_broker_config_defaults(&bcfg);
    struct loadgen_broker *broker = NULL;
    int rc = loadgen_broker_start(&bcfg, &broker);
    if (rc != 0) {
        free(k);
        return cli_error("demo", CLI_FAIL, "cannot start the embedded broker: %s", ds_strerror(rc));
    }
    kafka_demo_configure(k, loadgen_broker_bootstrap(broker));
    printf("dayshard demo: embedded Kafka broker at %s, topic orders (%u partitions)\n"
           "a node consumes it into %s (%llu shards per day); a producer streams %llu orders\n"
           "over 28 days from 2026-01-01, 30%% of them on 2026-01-21\n\n",
           loadgen_broker_bootstrap(broker), bcfg.partitions, d->data,
           (unsigned long long)d->shards, (unsigned long long)d->events);
    uint64_t t0 = ds_clock_ns();
    pthread_t node;
    pthread_t producer;
    /* The watcher reads the store from the start: it must exist before the node opens it
     * (a reader refuses a directory that holds none). */
    rc = store_create_empty(d->data, d->model);
    rc = rc == 0 ? -pthread_create(&node, NULL, node_main, k) : rc;
    if (rc == 0) {
        rc = -pthread_create(&producer, NULL, producer_main, k);
        if (rc == 0) {
            rc = watch(k, t0);
            pthread_join(producer, NULL);
        }
        __atomic_store_n(&k->stop_node, 1, __ATOMIC_SEQ_CST);
        pthread_join(node, NULL);
    }
    double seconds = (double)(ds_clock_ns() - t0) / 1e9;
    loadgen_broker_stop(broker);
    rc = rc != 0 ? rc : (k->produce_rc != 0 ? k->produce_rc : k->node_rc);
    if (rc == 0) {
        printf("\n%llu events produced and acknowledged, %llu durable in %.1f s end to end "
               "(%.0f events/s), %llu dead letters\n",
               (unsigned long long)k->produce_stats.acked,
               (unsigned long long)k->node_stats.accepted, seconds,
               (double)k->node_stats.accepted / seconds,
               (unsigned long long)k->node_stats.rejected);
        rc = k->node_stats.accepted == k->produce_stats.acked ? 0 : -DS_ECORRUPT;
    }
    uint64_t accepted = k->node_stats.accepted;
    free(k);
    if (rc != 0) {
        return cli_error("demo", CLI_FAIL, "%s", ds_strerror(rc));
    }
    return show_results(d, accepted, 0);
}

int cmd_demo(int argc, char **argv)
{
    static const struct option options[] = {{"events", required_argument, NULL, 'n'},
                                            {"shards", required_argument, NULL, 's'},
                                            {"data", required_argument, NULL, 'd'},
                                            {"seed", required_argument, NULL, 'S'},
                                            {"no-kafka", no_argument, NULL, 'K'},
                                            {"rate", required_argument, NULL, 'r'},
                                            {"shard-capacity", required_argument, NULL, 'C'},
                                            {"model", required_argument, NULL, 'm'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    struct demo d = {.events = 1000000,
                     .shards = SHARD_COUNT_DEFAULT,
                     .shard_capacity = SHARD_CAPACITY_DEFAULT,
                     .seed = 42,
                     .rate = 200000};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
        char name[CLI_OPTION_NAME_SIZE];
        int rc = 0;
        switch (c) {
        case 'n': rc = cli_parse_u64(optarg, 1, 100000000, &d.events); break;
        case 's': rc = cli_parse_u64(optarg, 1, SHARD_COUNT_MAX, &d.shards); break;
        case 'd': d.data = optarg; break;
        case 'S': rc = cli_parse_u64(optarg, 0, UINT64_MAX, &d.seed); break;
        case 'K': d.no_kafka = true; break;
        case 'r': rc = cli_parse_u64(optarg, 0, 100000000, &d.rate); break;
        case 'C': rc = cli_parse_u64(optarg, 0, SHARD_CAPACITY_MAX, &d.shard_capacity); break;
        case 'm': rc = storage_model_parse(optarg, &d.model); break;
        case 'h': return cli_help(cmd_demo_usage);
        default:
            return cli_error("demo", CLI_USAGE, "unknown or incomplete option '%s'",
                             argv[optind - 1]);
        }
        if (rc != 0) {
            return cli_error("demo", CLI_USAGE, "bad value '%s' for %s%s", optarg,
                             cli_option_name(options, c, name),
                             c == 'm' ? " (events or orders)" : "");
        }
    }
    bool temporary = d.data == NULL;
    if (temporary) {
        snprintf(d.tmp, sizeof(d.tmp), "/tmp/dayshard-demo-XXXXXX");
        if (mkdtemp(d.tmp) == NULL) {
            return cli_error("demo", CLI_FAIL, "cannot create a temporary directory: %s",
                             strerror(errno));
        }
        d.data = d.tmp;
    } else if (ds_mkdir_p(d.data) != 0) {
        return cli_error("demo", CLI_FAIL, "cannot create %s", d.data);
    }
    char why[STORAGE_MODEL_WHY_SIZE];
    enum storage_model model = STORAGE_MODEL_RECORDED;
    int rc = storage_model_check(d.data, d.model, &model, why, sizeof(why));
    if (rc != 0) {
        rc = cli_error("demo", rc == -DS_EUSAGE ? CLI_USAGE : CLI_FAIL, "%s", why);
    } else {
        rc = d.no_kafka ? run_demo(&d) : run_kafka_demo(&d);
    }
    if (temporary) {
        int removed = ds_remove_tree(d.tmp);
        if (removed != 0) {
            fprintf(stderr, "dayshard demo: warning: cannot remove %s: %s\n", d.tmp,
                    ds_strerror(removed));
        }
    } else {
        unlink(d.input);
    }
    return rc;
}
