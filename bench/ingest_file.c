/*
 * Benchmark: `dayshard ingest` end to end, durable, from a JSON-lines file (targets:
 * >= 1M events/s, <= 12 bytes/event on disk, peak RSS <= 256 MiB for 10M events).
 *
 * Generates the busy-day workload (fixed seed) into a file once, then ingests it RUNS times into
 * fresh data directories through ingest_file_run, each run in a forked child so that its peak
 * RSS (wait4's ru_maxrss) is the ingest's alone. Baselines measured in the same run, on the
 * same file: decode-only (read + ingest_decode of every line, nothing stored) and zstd -1 of the
 * raw file (what a general-purpose compressor keeps per event).
 *
 * Usage: bench_ingest_file [events=10000000] [runs=3] [io=auto|uring|sync]
 * Prints medians and ratios; CI runs it with a tiny event count as a smoke test.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include "bench/bench.h"
#include "ingest/ingest.h"
#include "shard/shard.h"
#include "storage/storage.h"

#define RUNS_MAX 15

/* Child: one ingest into data; writes "seconds accepted bytes_on_disk" to the pipe. */
static void ingest_child(const char *input, const char *data, enum storage_io_mode io, int pipe_fd)
{
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = data;
    cfg.io_mode = io;
    struct storage *st = NULL;
    struct shard_map *map = NULL;
    int rc = storage_open(&cfg, &st);
    rc = rc == 0 ? shard_map_open(data, SHARD_COUNT_DEFAULT, 0, &map) : rc;
    ASSERT(rc == 0);
    char dead[4096];
    snprintf(dead, sizeof(dead), "%s/deadletter.jsonl", data);
    struct ingest_file_config icfg;
    ingest_file_config_defaults(&icfg);
    icfg.storage = st;
    icfg.map = map;
    icfg.deadletter_path = dead;
    int fd = open(input, O_RDONLY);
    ASSERT(fd >= 0);
    struct ingest_stats stats;
    uint64_t t0 = ds_clock_ns();
    rc = ingest_file_run(&icfg, fd, &stats);
    double seconds = (double)(ds_clock_ns() - t0) / 1e9;
    ASSERT(rc == 0);
    close(fd);
    shard_map_close(map);
    storage_close(st);
    struct storage_fsck_options fopts = {0};
    struct storage_fsck_report report;
    rc = storage_fsck(data, &fopts, &report);
    ASSERT(rc == 0);
    ASSERT(report.events_ok == stats.accepted);
    char text[256];
    int n = snprintf(text, sizeof(text), "%.6f %llu %llu\n", seconds,
                     (unsigned long long)stats.accepted, (unsigned long long)report.bytes_ok);
    ASSERT(write(pipe_fd, text, (size_t)n) == n);
    _exit(0);
}

static double decode_only(const char *input, uint64_t *events)
{
    char *data = NULL;
    size_t len = 0;
    int rc = ds_read_file(input, 1ull << 34, &data, &len);
    ASSERT(rc == 0);
    uint64_t t0 = ds_clock_ns();
    uint64_t n = 0;
    uint64_t checksum = 0;
    for (size_t at = 0; at < len;) {
        char *nl = memchr(data + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - data) : len;
        struct ds_event event;
        struct ingest_error error;
        if (ingest_decode(data + at, end - at, &event, &error) == 0) {
            checksum += (uint64_t)event.ts_ms;
            n++;
        }
        at = end + 1;
    }
    double seconds = (double)(ds_clock_ns() - t0) / 1e9;
    ASSERT(checksum != 0 || n == 0);
    free(data);
    *events = n;
    return seconds;
}

static uint64_t zstd1_bytes(const char *input)
{
    char *data = NULL;
    size_t len = 0;
    int rc = ds_read_file(input, 1ull << 34, &data, &len);
    ASSERT(rc == 0);
    size_t cap = ZSTD_compressBound(len);
    void *out = malloc(cap);
    ASSERT(out != NULL);
    size_t z = ZSTD_compress(out, cap, data, len, 1);
    ASSERT(!ZSTD_isError(z));
    free(out);
    free(data);
    return z;
}

int main(int argc, char **argv)
{
    uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000ull;
    int runs = argc > 2 ? atoi(argv[2]) : 3;
    enum storage_io_mode io = STORAGE_IO_AUTO;
    if (argc > 3 && storage_io_mode_parse(argv[3], &io) != 0) {
        fprintf(stderr, "usage: bench_ingest_file [events] [runs] [auto|uring|sync]\n");
        return 2;
    }
    runs = runs < 1 ? 1 : (runs > RUNS_MAX ? RUNS_MAX : runs);
    char dir[] = "/tmp/dayshard-bench-XXXXXX";
    ASSERT(mkdtemp(dir) != NULL);
    char input[256];
    snprintf(input, sizeof(input), "%s/events.jsonl", dir);
    uint64_t raw_bytes = bench_generate_busy_day(input, events);
    printf("bench_ingest_file: %llu busy-day events, %.1f MB of JSON (%.1f B/event), %d runs\n",
           (unsigned long long)events, (double)raw_bytes / 1e6, (double)raw_bytes / (double)events,
           runs);

    double rates[RUNS_MAX], bytes_per_event[RUNS_MAX], rss_mib[RUNS_MAX], decode_rates[RUNS_MAX];
    for (int r = 0; r < runs; r++) {
        uint64_t decoded = 0;
        double seconds = decode_only(input, &decoded);
        decode_rates[r] = (double)decoded / seconds;

        char data[300];
        snprintf(data, sizeof(data), "%s/data%d", dir, r);
        int fds[2];
        ASSERT(pipe(fds) == 0);
        pid_t pid = fork();
        ASSERT(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            ingest_child(input, data, io, fds[1]);
        }
        close(fds[1]);
        char text[256] = {0};
        ssize_t n = read(fds[0], text, sizeof(text) - 1);
        close(fds[0]);
        int status = 0;
        struct rusage usage;
        ASSERT(wait4(pid, &status, 0, &usage) == pid);
        ASSERT(n > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
        double child_seconds = 0;
        unsigned long long accepted = 0, disk = 0;
        ASSERT(sscanf(text, "%lf %llu %llu", &child_seconds, &accepted, &disk) == 3);
        ASSERT(accepted == events);
        rates[r] = (double)accepted / child_seconds;
        bytes_per_event[r] = (double)disk / (double)accepted;
        rss_mib[r] = (double)usage.ru_maxrss / 1024.0;
        printf("  run %d: ingest %.0f events/s (%.2f s), %.2f B/event on disk, peak RSS %.1f MiB; "
               "decode-only %.0f events/s\n",
               r + 1, rates[r], child_seconds, bytes_per_event[r], rss_mib[r], decode_rates[r]);
        bench_remove_tree(data);
    }
    uint64_t z1 = zstd1_bytes(input);
    double ingest = bench_median(rates, runs);
    double decode = bench_median(decode_rates, runs);
    double bpe = bench_median(bytes_per_event, runs);
    double zbpe = (double)z1 / (double)events;
    printf("median ingest (durable): %.0f events/s   [target >= 1,000,000; aim 2,000,000]\n",
           ingest);
    printf("median decode-only baseline: %.0f events/s; ingest/decode ratio %.2f\n", decode,
           ingest / decode);
    printf("median bytes/event on disk: %.2f   [target <= 12]; zstd -1 of the raw JSON: %.2f "
           "(ratio %.2f)\n",
           bpe, zbpe, bpe / zbpe);
    printf("median peak RSS of the ingest process: %.1f MiB   [target <= 256]\n",
           bench_median(rss_mib, runs));
    bench_remove_tree(dir);
    return 0;
}
