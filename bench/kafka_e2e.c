/*
 * Benchmark: end to end through the embedded broker (targets: >= 500,000 events/s
 * sustained and >= 0.5 of the file ingest rate measured in the same run; end to end with the
 * index on >= 0.5 of file ingest, a node alone catching up a backlog >= 0.8).
 *
 * One run: start the embedded broker (12 partitions) and a node; once the node holds its
 * partitions, a producer sends the busy-day events of a generated file as fast as it can while
 * the node consumes; the clock stops when a reader of the data directory sees every event
 * durable. That is done twice: with the by-customer index (GSI) on, the node wired like
 * `dayshard run` (a builder follows the data directory, each durable commit notifies it, the
 * node pauses while it asks; the clock stops once every event is durable and indexed: the
 * issue's end-to-end figure), and with the index off. The parts, in the same run: the producer
 * alone (sending everything to a fresh broker before any node starts), then a node catching up
 * that backlog alone (index off). Consumer lag (messages behind the high watermarks) is sampled
 * from the node every 100 ms. Baseline in the same run: `dayshard ingest` of the same file
 * (ingest_file_run) into a fresh directory. Reported: medians over RUNS, the ratios, lag
 * p50/max, and the CPU per event of each group of threads (from /proc/self/task/N/schedstat:
 * the node's consumer thread, the writer, the index builder, librdkafka's threads, the
 * producer's thread, the threads that ended within the run (the producer's thread and its
 * librdkafka threads in the streaming modes), io_uring's workers, the rest, and how long live
 * threads waited for a core: the machine's load during the run).
 *
 * Usage: bench_kafka_e2e [events=1000000] [runs=3]
 * Environment: DS_BENCH_TRACE=1 prints the durable count and the lag every 20 ms (stderr);
 * DS_BENCH_PRODUCE_X / DS_BENCH_NODE_X=key=value pass one librdkafka property to the producer /
 * the node; DS_BENCH_MODEL=orders|events (events by default) is the data model of every data
 * directory, the node's and the file ingest's alike; DS_BENCH_NODE_CAPACITY=R sets the node's
 * --shard-capacity (0: fixed shard counts, as the file ingest keeps); DS_BENCH_NODE_COMMIT_MS=N
 * sets the node's commit interval; DS_BENCH_MODES=gsi,stream,backlog,file runs only the modes named
 * (for profiling); DS_BENCH_MARKS=1 prints "mark <mode> <start> <end>" (CLOCK_MONOTONIC seconds)
 * for each measured span on stderr, for `perf record -k CLOCK_MONOTONIC` and `perf report --time`.
 * The mock broker keeps ~5 MiB per partition: a node that fell far behind would lose events and the
 * run would time out (reported), so keep events modest.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "index/index.h"
#include "ingest/ingest.h"
#include "loadgen/loadgen.h"
#include "query/query.h"
#include "shard/shard.h"
#include "storage/storage.h"

#define RUNS_MAX 9
#define LAG_SAMPLES_MAX 100000
/* Threads one CPU snapshot holds (a node, a producer and the broker run a few dozen). */
#define THREADS_MAX 256
/* The bench thread looks at the node's progress this often, and samples the lag every
 * LAG_EVERY_TICKS looks (20 ms). */
#define LOOP_MS 5
#define LAG_EVERY_TICKS 4u

/* Groups of threads whose CPU is reported apart. */
enum cpu_group {
    CPU_CONSUMER, /* the node's consumer thread: poll, decode, route, stage */
    CPU_WRITER,   /* ds-writer: appends, commits, Kafka offset commits */
    CPU_GSI,      /* ds-gsi: the index builder */
    CPU_RDKAFKA,  /* live librdkafka threads (node handles, the mock broker; the producer's too
                     while it runs) */
    CPU_PRODUCER, /* the producer's thread (reads the file, rd_kafka_produce) */
    CPU_ENDED,    /* threads that ended within the span: in the streaming modes the producer's
                     thread and its librdkafka threads */
    CPU_IO,       /* io_uring's workers (iou-wrk-N): the writer's segment writes and syncs */
    CPU_OTHER,    /* the bench's own thread (it watches progress) and the rest */
    CPU_WAITED,   /* not a group: the time live threads were runnable but had no core */
    CPU_GROUPS
};
static const char *const cpu_group_names[CPU_GROUPS] = {
    "consumer",           "writer", "gsi", "rdkafka", "producer", "ended", "io", "other",
    "(waited for a core)"};

struct cpu_snapshot {
    uint32_t count;
    pid_t tid[THREADS_MAX];
    uint64_t ns[THREADS_MAX];
    uint64_t wait_ns[THREADS_MAX]; /* runnable, waiting for a core */
    enum cpu_group group[THREADS_MAX];
    double process_seconds;
};

struct e2e {
    struct ingest_node_config node;
    struct ingest_node_stats node_stats;
    struct ingest_kafka_props props;
    struct ingest_kafka_props produce_props;
    int node_rc;
    volatile int stop;
    struct loadgen_produce_config produce;
    struct loadgen_produce_stats produce_stats;
    int produce_rc;
    atomic_bool produce_done;
    struct index_builder *gsi; /* NULL with the index off */
    uint64_t events;           /* the run's events */
    /* Set by the node's writer after each durable commit (observe_commit). */
    atomic_uint_least64_t durable_events;
    atomic_uint_least64_t all_durable_ns;  /* when the commit that made the last event durable
                                              returned (0 before) */
    atomic_uint_least64_t all_durable_seq; /* that commit's sequence number */
};

/* The data model of every data directory of the run (DS_BENCH_MODEL, events by default): the
 * node and the file ingest it is compared with must do the same work per event (the orders
 * model's writer also keeps each order's latest version). */
static enum storage_model bench_model(void)
{
    const char *name = getenv("DS_BENCH_MODEL");
    enum storage_model model = STORAGE_MODEL_EVENTS;
    ASSERT(name == NULL || storage_model_parse(name, &model) == 0);
    return model;
}

static bool mode_enabled(const char *name)
{
    const char *modes = getenv("DS_BENCH_MODES");
    if (modes == NULL) {
        return true;
    }
    size_t len = strlen(name);
    for (const char *p = strstr(modes, name); p != NULL; p = strstr(p + 1, name)) {
        if ((p == modes || p[-1] == ',') && (p[len] == ',' || p[len] == '\0')) {
            return true;
        }
    }
    return false;
}

static enum cpu_group cpu_group_of(const char *comm)
{
    if (strncmp(comm, "ds-consumer", 11) == 0) {
        return CPU_CONSUMER;
    }
    if (strncmp(comm, "ds-writer", 9) == 0) {
        return CPU_WRITER;
    }
    if (strncmp(comm, "ds-gsi", 6) == 0) {
        return CPU_GSI;
    }
    if (strncmp(comm, "rdk:", 4) == 0) {
        return CPU_RDKAFKA;
    }
    if (strncmp(comm, "ds-producer", 11) == 0) {
        return CPU_PRODUCER;
    }
    if (strncmp(comm, "iou-", 4) == 0) {
        return CPU_IO;
    }
    return CPU_OTHER;
}

/* On-CPU time of every thread of this process (schedstat: nanoseconds, not clock ticks). */
static void cpu_snapshot_take(struct cpu_snapshot *s)
{
    s->count = 0;
    s->process_seconds = bench_cpu_seconds();
    DIR *d = opendir("/proc/self/task");
    ASSERT(d != NULL);
    for (struct dirent *e = readdir(d); e != NULL && s->count < THREADS_MAX; e = readdir(d)) {
        if (e->d_name[0] == '.') {
            continue;
        }
        char path[300];
        char comm[64] = "";
        unsigned long long ns = 0;
        unsigned long long wait_ns = 0;
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL) {
            continue; /* ended meanwhile */
        }
        bool named = fgets(comm, sizeof(comm), f) != NULL;
        fclose(f);
        snprintf(path, sizeof(path), "/proc/self/task/%s/schedstat", e->d_name);
        f = fopen(path, "r");
        if (f == NULL) {
            continue;
        }
        bool timed = fscanf(f, "%llu %llu", &ns, &wait_ns) == 2;
        fclose(f);
        if (named && timed) {
            s->tid[s->count] = (pid_t)atoi(e->d_name);
            s->ns[s->count] = ns;
            s->wait_ns[s->count] = wait_ns;
            s->group[s->count] = cpu_group_of(comm);
            s->count++;
        }
    }
    closedir(d);
}

/* CPU seconds per group between two snapshots; a thread's time counts from its first
 * snapshot (0 when it started in between); what the process spent beyond the live threads is
 * CPU_ENDED. */
static void cpu_snapshot_diff(const struct cpu_snapshot *a, const struct cpu_snapshot *b,
                              double *seconds)
{
    double live = 0;
    for (uint32_t g = 0; g < CPU_GROUPS; g++) {
        seconds[g] = 0;
    }
    for (uint32_t i = 0; i < b->count; i++) {
        uint64_t before = 0;
        uint64_t waited_before = 0;
        for (uint32_t j = 0; j < a->count; j++) {
            before = a->tid[j] == b->tid[i] ? a->ns[j] : before;
            waited_before = a->tid[j] == b->tid[i] ? a->wait_ns[j] : waited_before;
        }
        double d = (double)(b->ns[i] - before) / 1e9;
        seconds[b->group[i]] += d;
        seconds[CPU_WAITED] += (double)(b->wait_ns[i] - waited_before) / 1e9;
        live += d;
    }
    double total = b->process_seconds - a->process_seconds;
    seconds[CPU_ENDED] = total > live ? total - live : 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The node's observers, as in cli/cmd_run.c: each durable commit wakes the index builder, and
 * the node pauses while the builder asks. */
static void observe_commit(const struct ingest_node_progress *progress, void *user)
{
    struct e2e *e = user;
    if (e->gsi != NULL) {
        index_builder_notify(e->gsi, progress->commit_seq, progress->events_durable);
    }
    /* all_durable_* first: the bench thread reads them once durable_events reaches events. */
    if (progress->events_durable >= e->events && atomic_load(&e->all_durable_ns) == 0) {
        atomic_store(&e->all_durable_seq, progress->commit_seq);
        atomic_store(&e->all_durable_ns, ds_clock_ns());
    }
    atomic_store(&e->durable_events, progress->events_durable);
}

static int observe_pause(void *user)
{
    struct e2e *e = user;
    if (e->gsi == NULL) {
        return 0;
    }
    int rc = index_builder_error(e->gsi);
    return rc != 0 ? rc : index_builder_should_pause(e->gsi) ? 1 : 0;
}

static void *node_main(void *arg)
{
    struct e2e *e = arg;
    pthread_setname_np(pthread_self(), "ds-consumer");
    e->node_rc = ingest_node_run(&e->node, &e->node_stats, &e->stop);
    return NULL;
}

static void *producer_main(void *arg)
{
    struct e2e *e = arg;
    pthread_setname_np(pthread_self(), "ds-producer");
    e->produce_rc = loadgen_produce_run(&e->produce, &e->produce_stats, NULL);
    atomic_store(&e->produce_done, true);
    return NULL;
}

/* What one run measures. */
enum e2e_mode {
    E2E_STREAM_GSI, /* the producer sends while the node consumes, index on */
    E2E_STREAM,     /* the same with the index off */
    E2E_BACKLOG,    /* the producer sends everything first, then the node catches up alone */
    E2E_MODES
};
static const char *const mode_names[E2E_MODES] = {"gsi", "stream", "backlog"};

/* Creates the data directory (storage and shard map) the way the node opens it, so that the
 * builder's reader can open it before the node starts (cli/cmd_run.c prepare_data_dir). */
static void open_data(const char *dir, struct storage **st, struct shard_map **map)
{
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = dir;
    cfg.model = bench_model();
    ASSERT(storage_open(&cfg, st) == 0);
    ASSERT(shard_map_open(dir, SHARD_COUNT_DEFAULT, 0, map) == 0);
}

static void prepare_data_dir(const char *dir)
{
    struct storage *st = NULL;
    struct shard_map *map = NULL;
    open_data(dir, &st, &map);
    shard_map_close(map);
    storage_close(st);
}

static void print_mark(const char *what, uint64_t start_ns, uint64_t end_ns)
{
    if (getenv("DS_BENCH_MARKS") != NULL) {
        fprintf(stderr, "mark %s %.6f %.6f\n", what, (double)start_ns / 1e9, (double)end_ns / 1e9);
    }
}

/* One run; returns events/s from the node's assignment to the last event durable (and, with
 * the index on, indexed; 0 when events went missing), sets *cpu_us_per_event (CPU of the whole
 * process over that time, per event) and cpu_groups[] (the same per group of threads, us per
 * event) and, for a backlog run, *produce_rate (the producer alone, to its last delivery
 * report); appends lag samples of streaming runs. */
static double e2e_run(const char *dir, const char *input, uint64_t events, int run,
                      enum e2e_mode mode, double *cpu_us_per_event, double *cpu_groups,
                      double *produce_rate, double *lags, int *lag_count)
{
    struct loadgen_broker_config bcfg;
    loadgen_broker_config_defaults(&bcfg);
    struct loadgen_broker *broker = NULL;
    ASSERT(loadgen_broker_start(&bcfg, &broker) == 0);
    struct e2e *e = calloc(1, sizeof(*e));
    ASSERT(e != NULL);
    e->events = events;
    char data[256];
    snprintf(data, sizeof(data), "%s/kafka%d-%d", dir, run, (int)mode);
    ASSERT(ingest_kafka_props_add(&e->props, "session.timeout.ms=6000") == 0);
    const char *nx = getenv("DS_BENCH_NODE_X");
    if (nx != NULL) {
        ASSERT(ingest_kafka_props_add(&e->props, nx) == 0);
    }
    ingest_node_config_defaults(&e->node);
    e->node.brokers = loadgen_broker_bootstrap(broker);
    e->node.data_dir = data;
    e->node.model = (int)bench_model();
    e->node.props = &e->props;
    e->node.status_interval_ms = 100;
    const char *capacity = getenv("DS_BENCH_NODE_CAPACITY");
    if (capacity != NULL) {
        e->node.shard_capacity_eps = (uint32_t)atoi(capacity); /* 0: fixed counts */
    }
    const char *commit_ms = getenv("DS_BENCH_NODE_COMMIT_MS");
    if (commit_ms != NULL) {
        e->node.commit_interval_ms = (uint32_t)atoi(commit_ms);
        ASSERT(e->node.commit_interval_ms >= 1);
    }
    e->node.on_commit = observe_commit;
    e->node.should_pause = observe_pause;
    e->node.observer_user = e;
    if (mode == E2E_STREAM_GSI) {
        prepare_data_dir(data);
        struct index_builder_config gcfg;
        index_builder_config_defaults(&gcfg);
        gcfg.data_dir = data;
        ASSERT(index_builder_start(&gcfg, &e->gsi) == 0);
    }
    /* DS_BENCH_PRODUCE_X=key=value passes one librdkafka property to the producer (for
     * example compression.codec=none, to see what lz4 costs). */
    const char *extra = getenv("DS_BENCH_PRODUCE_X");
    if (extra != NULL) {
        ASSERT(ingest_kafka_props_add(&e->produce_props, extra) == 0);
        e->produce.props = &e->produce_props;
    }
    e->produce.brokers = e->node.brokers;
    e->produce.topic = "orders";
    e->produce.input_fd = open(input, O_RDONLY);
    ASSERT(e->produce.input_fd >= 0);
    pthread_t node;
    pthread_t producer;
    if (mode == E2E_BACKLOG) {
        ASSERT(pthread_create(&producer, NULL, producer_main, e) == 0);
        pthread_join(producer, NULL);
        ASSERT(e->produce_rc == 0 && e->produce_stats.seconds > 0);
        *produce_rate = (double)e->produce_stats.acked / e->produce_stats.seconds;
    }
    ASSERT(pthread_create(&node, NULL, node_main, e) == 0);
    while (__atomic_load_n(&e->node_stats.rebalances, __ATOMIC_RELAXED) == 0) {
        sleep_ms(10); /* the group's first join takes the broker's ~3 s rebalance delay */
    }
    struct cpu_snapshot *cpu = calloc(2, sizeof(*cpu));
    ASSERT(cpu != NULL);
    uint64_t t0 = ds_clock_ns();
    cpu_snapshot_take(&cpu[0]);
    if (mode != E2E_BACKLOG) {
        ASSERT(pthread_create(&producer, NULL, producer_main, e) == 0);
    }
    struct storage *st = NULL;
    struct shard_map *map = NULL;
    uint64_t last_change = t0;
    uint64_t seen = 0;
    bool trace = getenv("DS_BENCH_TRACE") != NULL; /* the durable count and lag every 20 ms */
    /* Progress comes from the node's commit hook (an atomic), not from a reader polling
     * query_count: that reader cost 0.05-0.1 us/event of the cores the pipeline runs on (the
     * file ingest has none). A reader confirms the count once at the end. */
    for (uint32_t tick = 1; seen < events && ds_clock_ns() - last_change < 30ull * 1000000000u;
         tick++) {
        sleep_ms(LOOP_MS);
        uint64_t now = atomic_load(&e->durable_events);
        last_change = now != seen ? ds_clock_ns() : last_change;
        seen = now;
        if (tick % LAG_EVERY_TICKS != 0) {
            continue;
        }
        int64_t lag = __atomic_load_n(&e->node_stats.lag, __ATOMIC_RELAXED);
        if (trace) {
            fprintf(stderr, "trace run %d: %6.0f ms durable %8llu lag %lld\n", run,
                    (double)(ds_clock_ns() - t0) / 1e6, (unsigned long long)seen, (long long)lag);
        }
        if (mode != E2E_BACKLOG && lag >= 0 && *lag_count < LAG_SAMPLES_MAX) {
            lags[(*lag_count)++] = (double)lag;
        }
    }
    int wait_rc = 0;
    if (e->gsi != NULL && seen == events) {
        wait_rc = index_builder_wait(e->gsi, atomic_load(&e->all_durable_seq), 60000);
    }
    uint64_t t_end =
        e->gsi != NULL || seen != events ? ds_clock_ns() : atomic_load(&e->all_durable_ns);
    cpu_snapshot_take(&cpu[1]);
    /* What a reader of the data directory sees: every event. */
    uint64_t confirm_deadline = ds_clock_ns() + 10ull * 1000000000u;
    uint64_t read = bench_durable_events(&st, &map, data);
    while (seen == events && read != events && ds_clock_ns() < confirm_deadline) {
        sleep_ms(LOOP_MS);
        read = bench_durable_events(&st, &map, data);
    }
    seen = read;
    double seconds = (double)(t_end - t0) / 1e9;
    print_mark(mode_names[mode], t0, t_end);
    *cpu_us_per_event = (cpu[1].process_seconds - cpu[0].process_seconds) * 1e6 / (double)events;
    double group_seconds[CPU_GROUPS];
    cpu_snapshot_diff(&cpu[0], &cpu[1], group_seconds);
    for (uint32_t g = 0; g < CPU_GROUPS; g++) {
        cpu_groups[g] = group_seconds[g] * 1e6 / (double)events;
    }
    free(cpu);
    if (mode != E2E_BACKLOG) {
        pthread_join(producer, NULL);
    }
    __atomic_store_n(&e->stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(node, NULL);
    if (getenv("DS_BENCH_TRACE") != NULL) {
        fprintf(stderr, "trace run %d (%s): %llu commits, %llu shard growths\n", run,
                mode_names[mode], (unsigned long long)e->node_stats.commits,
                (unsigned long long)e->node_stats.growths);
    }
    index_builder_stop(e->gsi);
    close(e->produce.input_fd);
    shard_map_close(map);
    storage_close(st);
    loadgen_broker_stop(broker);
    if (seen != events || wait_rc != 0) {
        printf("  run %d (%s): only %llu of %llu events became durable (index wait %s, producer "
               "rc %d, acked %llu)\n",
               run, mode_names[mode], (unsigned long long)seen, (unsigned long long)events,
               ds_strerror(wait_rc), e->produce_rc, (unsigned long long)e->produce_stats.acked);
        free(e);
        return 0;
    }
    free(e);
    return (double)events / seconds;
}

/* File ingest of the same events; returns events/s and sets *cpu_us_per_event (the process's
 * CPU over the run: the decode thread and the writer). */
static double file_run(const char *dir, const char *input, int run, double *cpu_us_per_event)
{
    char data[256];
    char dead[300];
    snprintf(data, sizeof(data), "%s/file%d", dir, run);
    snprintf(dead, sizeof(dead), "%s/deadletter.jsonl", data);
    struct storage *st = NULL;
    struct shard_map *map = NULL;
    open_data(data, &st, &map);
    struct ingest_file_config icfg;
    ingest_file_config_defaults(&icfg);
    icfg.storage = st;
    icfg.map = map;
    icfg.deadletter_path = dead;
    int fd = open(input, O_RDONLY);
    ASSERT(fd >= 0);
    struct ingest_stats stats;
    uint64_t t0 = ds_clock_ns();
    double cpu0 = bench_cpu_seconds();
    ASSERT(ingest_file_run(&icfg, fd, &stats) == 0);
    double seconds = (double)(ds_clock_ns() - t0) / 1e9;
    *cpu_us_per_event = (bench_cpu_seconds() - cpu0) * 1e6 / (double)stats.accepted;
    close(fd);
    shard_map_close(map);
    storage_close(st);
    return (double)stats.accepted / seconds;
}

static void print_groups(const char *what, const double *groups)
{
    printf("    %s CPU us/event:", what);
    for (uint32_t g = 0; g < CPU_GROUPS; g++) {
        printf(" %s %.3f", cpu_group_names[g], groups[g]);
    }
    printf("\n");
}

/* Median over runs of each group's CPU per event. */
static void median_groups(double (*groups)[CPU_GROUPS], int runs, double *out)
{
    for (uint32_t g = 0; g < CPU_GROUPS; g++) {
        double v[RUNS_MAX];
        for (int r = 0; r < runs; r++) {
            v[r] = groups[r][g];
        }
        out[g] = bench_median(v, runs);
    }
}

int main(int argc, char **argv)
{
    uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000ull;
    int runs = argc > 2 ? atoi(argv[2]) : 3;
    runs = runs < 1 ? 1 : (runs > RUNS_MAX ? RUNS_MAX : runs);
    char dir[] = "/tmp/dayshard-bench-XXXXXX";
    ASSERT(mkdtemp(dir) != NULL);
    char input[256];
    snprintf(input, sizeof(input), "%s/events.jsonl", dir);
    bench_generate_busy_day(input, events);
    printf("bench_kafka_e2e: %llu busy-day events, %d runs, embedded broker with 12 partitions\n",
           (unsigned long long)events, runs);
    bool on[E2E_MODES];
    for (int m = 0; m < E2E_MODES; m++) {
        on[m] = mode_enabled(mode_names[m]);
    }
    bool file_on = mode_enabled("file");
    double rate[E2E_MODES][RUNS_MAX] = {{0}};
    double cpu[E2E_MODES][RUNS_MAX] = {{0}};
    double groups[E2E_MODES][RUNS_MAX][CPU_GROUPS] = {{{0}}};
    double produce[RUNS_MAX] = {0};
    double file[RUNS_MAX] = {0};
    double file_cpu[RUNS_MAX] = {0};
    double *lags = calloc(LAG_SAMPLES_MAX, sizeof(*lags));
    ASSERT(lags != NULL);
    int lag_count = 0;
    for (int r = 0; r < runs; r++) {
        for (int m = 0; m < E2E_MODES; m++) {
            if (on[m]) {
                rate[m][r] = e2e_run(dir, input, events, r, (enum e2e_mode)m, &cpu[m][r],
                                     groups[m][r], &produce[r], lags, &lag_count);
            }
        }
        if (file_on) {
            uint64_t t0 = ds_clock_ns();
            file[r] = file_run(dir, input, r, &file_cpu[r]);
            print_mark("file", t0, ds_clock_ns());
        }
        /* Ratios are 0 without the file ingest (DS_BENCH_MODES without file). */
        double f = file[r] > 0 ? file[r] : INFINITY;
        printf("  run %d: end to end index on %.0f events/s (%.2f us CPU/event), index off %.0f "
               "(%.2f); file ingest %.0f events/s (%.2f); ratios on %.2f off %.2f; producer alone "
               "%.0f, node catching up alone %.0f (%.2f us CPU/event), ratio %.2f\n",
               r + 1, rate[E2E_STREAM_GSI][r], cpu[E2E_STREAM_GSI][r], rate[E2E_STREAM][r],
               cpu[E2E_STREAM][r], file[r], file_cpu[r], rate[E2E_STREAM_GSI][r] / f,
               rate[E2E_STREAM][r] / f, produce[r], rate[E2E_BACKLOG][r], cpu[E2E_BACKLOG][r],
               rate[E2E_BACKLOG][r] / f);
        for (int m = 0; m < E2E_MODES; m++) {
            if (on[m]) {
                print_groups(mode_names[m], groups[m][r]);
            }
        }
    }
    double f = file_on ? bench_median(file, runs) : INFINITY;
    double k[E2E_MODES];
    double c[E2E_MODES];
    double g[E2E_MODES][CPU_GROUPS];
    for (int m = 0; m < E2E_MODES; m++) {
        k[m] = bench_median(rate[m], runs);
        c[m] = bench_median(cpu[m], runs);
        median_groups(groups[m], runs, g[m]);
    }
    double p = bench_median(produce, runs);
    double fc = bench_median(file_cpu, runs);
    printf("median file ingest of the same events, same runs: %.0f events/s, %.2f us CPU/event\n",
           f, fc);
    printf("median end to end with the index on (produce -> broker -> node -> durable and "
           "indexed): %.0f events/s, %.2f us CPU/event; ratio to file ingest %.2f   "
           "[target >= 0.5]\n",
           k[E2E_STREAM_GSI], c[E2E_STREAM_GSI], k[E2E_STREAM_GSI] / f);
    printf("median end to end with the index off: %.0f events/s, %.2f us CPU/event; ratio %.2f\n",
           k[E2E_STREAM], c[E2E_STREAM], k[E2E_STREAM] / f);
    printf("median of the parts, same runs: producer alone %.0f events/s; node catching up a "
           "backlog alone %.0f events/s (%.2f us CPU/event), ratio to file ingest %.2f   "
           "[target >= 0.8]\n",
           p, k[E2E_BACKLOG], c[E2E_BACKLOG], k[E2E_BACKLOG] / f);
    for (int m = 0; m < E2E_MODES; m++) {
        if (on[m]) {
            print_groups(mode_names[m], g[m]);
        }
    }
    if (lag_count > 0) {
        double max = 0;
        for (int i = 0; i < lag_count; i++) {
            max = lags[i] > max ? lags[i] : max;
        }
        printf("consumer lag over the streaming runs (%d samples): median %.0f, max %.0f "
               "messages\n",
               lag_count, bench_median(lags, lag_count), max);
    }
    free(lags);
    bench_remove_tree(dir);
    return 0;
}
