/*
 * Benchmark of the producer (loadgen_produce_run) with the generator as its source, against
 * librdkafka's mock cluster in the same process (one broker, a 12-partition topic), fixed
 * seed, with dayshard's default producer settings (idempotent, lz4, linger.ms 5). Reports
 * events/s (median, min and max of the runs, from the first send to the last delivery report)
 * and the process CPU time per event, which is steadier than wall time on a shared machine.
 *
 * Usage: bench_produce [events] [runs] [-X key=value ...]
 * (CI can run it with a tiny event count as a smoke test).
 *
 * The mock broker's threads run in this process, so it shares the CPU with the producer as
 * `dayshard broker` would on the same machine. Rejected: a broker in another process (the
 * bench would have to start and stop it); each run uses its own topic so that the mock's
 * per-partition retention trimming of earlier runs does not weigh on later ones.
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench/bench.h"
#include "ingest/ingest.h"
#include "loadgen/loadgen.h"

#define BENCH_RUNS_MAX 15u
#define BENCH_RUNS_DEFAULT 5u
#define BENCH_EVENTS_DEFAULT 2000000ull
#define BENCH_PARTITIONS 12

struct bench_run_result {
    double events_per_second;
    double cpu_us_per_event;
};

/* One run into a fresh topic of the mock cluster. */
static struct bench_run_result bench_run(rd_kafka_mock_cluster_t *mock, unsigned run,
                                         const struct loadgen_produce_config *base)
{
    char topic[32];
    snprintf(topic, sizeof(topic), "bench-%u", run);
    rd_kafka_resp_err_t err = rd_kafka_mock_topic_create(mock, topic, BENCH_PARTITIONS, 1);
    ASSERT(err == RD_KAFKA_RESP_ERR_NO_ERROR);
    struct loadgen_produce_config cfg = *base;
    cfg.topic = topic;
    struct loadgen_produce_stats stats;
    double cpu_start = bench_cpu_seconds();
    int rc = loadgen_produce_run(&cfg, &stats, NULL);
    double cpu = bench_cpu_seconds() - cpu_start;
    ASSERT(rc == 0);
    ASSERT(stats.acked == cfg.workload.events);
    return (struct bench_run_result){
        .events_per_second = (double)stats.acked / stats.seconds,
        .cpu_us_per_event = cpu * 1e6 / (double)stats.acked,
    };
}

static int bench_parse(int argc, char **argv, struct loadgen_produce_config *cfg,
                       struct ingest_kafka_props *props, unsigned *runs)
{
    int positional = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-X") == 0 && i + 1 < argc) {
            if (ingest_kafka_props_add(props, argv[++i]) != 0) {
                return -DS_EUSAGE;
            }
        } else if (positional == 0) {
            cfg->workload.events = strtoull(argv[i], NULL, 10);
            positional++;
        } else if (positional == 1) {
            *runs = (unsigned)strtoul(argv[i], NULL, 10);
            positional++;
        } else {
            return -DS_EUSAGE;
        }
    }
    if (cfg->workload.events == 0 || *runs == 0 || *runs > BENCH_RUNS_MAX) {
        return -DS_EUSAGE;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct ingest_kafka_props *props = calloc(1, sizeof(*props));
    ASSERT(props != NULL);
    struct loadgen_produce_config cfg = {.input_fd = -1, .props = props};
    loadgen_workload_defaults(&cfg.workload);
    cfg.workload.events = BENCH_EVENTS_DEFAULT;
    unsigned runs = BENCH_RUNS_DEFAULT;
    if (bench_parse(argc, argv, &cfg, props, &runs) != 0) {
        fprintf(stderr, "usage: bench_produce [events >= 1] [runs 1..%u] [-X key=value ...]\n",
                BENCH_RUNS_MAX);
        free(props);
        return 2;
    }
    /* The mock cluster needs a client handle to live in; this one never connects. */
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_res_t res = rd_kafka_conf_set(conf, "log_level", "0", err, sizeof(err));
    ASSERT(res == RD_KAFKA_CONF_OK);
    rd_kafka_t *host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    ASSERT(host != NULL);
    rd_kafka_mock_cluster_t *mock = rd_kafka_mock_cluster_new(host, 1);
    ASSERT(mock != NULL);
    cfg.brokers = rd_kafka_mock_cluster_bootstraps(mock);
    double rate[BENCH_RUNS_MAX];
    double cpu[BENCH_RUNS_MAX];
    for (unsigned run = 0; run < runs; run++) {
        struct bench_run_result r = bench_run(mock, run, &cfg);
        rate[run] = r.events_per_second;
        cpu[run] = r.cpu_us_per_event;
    }
    rd_kafka_mock_cluster_destroy(mock);
    rd_kafka_destroy(host);
    free(props);
    qsort(rate, runs, sizeof(rate[0]), bench_compare_double);
    qsort(cpu, runs, sizeof(cpu[0]), bench_compare_double);
    printf("bench_produce: %llu events x %u runs, seed %llu, %d partitions, in-process mock "
           "broker\n",
           (unsigned long long)cfg.workload.events, runs, (unsigned long long)cfg.workload.seed,
           BENCH_PARTITIONS);
    printf("events/s: median %.0f, min %.0f, max %.0f; CPU us/event: median %.2f, min %.2f, "
           "max %.2f\n",
           rate[runs / 2], rate[0], rate[runs - 1], cpu[runs / 2], cpu[0], cpu[runs - 1]);
    return 0;
}
