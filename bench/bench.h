/*
 * Helpers shared by the benchmarks (header-only: each benchmark is one executable): medians,
 * process CPU time, a generated input file, and removing a benchmark's scratch directory.
 */
#ifndef DS_BENCH_H
#define DS_BENCH_H

#include <ftw.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ingest/ingest.h"
#include "loadgen/loadgen.h"
#include "query/query.h"
#include "shard/shard.h"
#include "storage/storage.h"

static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Bytes of dir/name, 0 when it is missing. */
static inline uint64_t bench_file_bytes(const char *dir, const char *name)
{
    char path[DS_PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static inline int bench_compare_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline int bench_compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Sorts v and returns its median; n >= 1. */
static inline double bench_median(double *v, int n)
{
    ASSERT(n >= 1);
    qsort(v, (size_t)n, sizeof(*v), bench_compare_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* User + system CPU seconds of the whole process so far (every thread, live or joined). */
static inline double bench_cpu_seconds(void)
{
    struct rusage usage;
    int rc = getrusage(RUSAGE_SELF, &usage);
    ASSERT(rc == 0);
    return (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec / 1e6 +
           (double)usage.ru_stime.tv_sec + (double)usage.ru_stime.tv_usec / 1e6;
}

static inline int bench_remove_entry(const char *path, const struct stat *sb, int flag,
                                     struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes a scratch directory and everything under it. */
static inline void bench_remove_tree(const char *dir)
{
    nftw(dir, bench_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The default busy-day workload of `events` events (fixed seed). */
static inline struct loadgen_workload_config bench_busy_day_config(uint64_t events)
{
    struct loadgen_workload_config cfg;
    loadgen_workload_defaults(&cfg);
    cfg.profile = LOADGEN_PROFILE_BUSY_DAY;
    cfg.events = events;
    return cfg;
}

/* A generator of that workload, event by event; aborts on failure. */
static inline struct loadgen_workload *bench_busy_day_workload(uint64_t events)
{
    struct loadgen_workload_config cfg = bench_busy_day_config(events);
    struct loadgen_workload *w = NULL;
    ASSERT(loadgen_workload_create(&cfg, &w) == 0);
    return w;
}

/* Writes that workload as JSON lines to path; returns the bytes written. Aborts on failure: a
 * benchmark without its input is meaningless. */
static inline uint64_t bench_generate_busy_day(const char *path, uint64_t events)
{
    struct loadgen_workload_config cfg = bench_busy_day_config(events);
    FILE *out = fopen(path, "w");
    ASSERT(out != NULL);
    uint64_t bytes = 0;
    int rc = loadgen_workload_write(&cfg, out, &bytes);
    ASSERT(rc == 0);
    rc = fclose(out);
    ASSERT(rc == 0);
    return bytes;
}

/* Latency percentiles of n samples in nanoseconds (sorts them); n >= 1. */
struct bench_latency {
    double p50_us, p99_us, max_us;
    uint64_t count;
};

static inline struct bench_latency bench_latency_of(uint64_t *ns, uint64_t n)
{
    ASSERT(n >= 1);
    qsort(ns, n, sizeof(*ns), bench_compare_u64);
    return (struct bench_latency){.p50_us = (double)ns[n / 2] / 1e3,
                                  .p99_us = (double)ns[n * 99 / 100] / 1e3,
                                  .max_us = (double)ns[n - 1] / 1e3,
                                  .count = n};
}

/* A TCP connection (TCP_NODELAY) to "HOST:PORT"; aborts on failure. */
static inline int bench_http_connect(const char *address)
{
    char host[256];
    const char *colon = strrchr(address, ':');
    ASSERT(colon != NULL && (size_t)(colon - address) < sizeof(host));
    memcpy(host, address, (size_t)(colon - address));
    host[colon - address] = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    ASSERT(getaddrinfo(host, colon + 1, &hints, &ai) == 0);
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    ASSERT(fd >= 0);
    ASSERT(connect(fd, ai->ai_addr, ai->ai_addrlen) == 0);
    int one = 1;
    ASSERT(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0);
    freeaddrinfo(ai);
    return fd;
}

/* One GET on a keep-alive connection; returns the body's start in buf (NUL-terminated) and
 * the HTTP status in *status, whatever it is. Exits when the connection closes. */
static inline const char *bench_http_request(int fd, const char *path, char *buf, size_t cap,
                                             int *status)
{
    char request[512];
    int n = snprintf(request, sizeof(request), "GET %s HTTP/1.1\r\nHost: bench\r\n\r\n", path);
    ASSERT(n > 0 && (size_t)n < sizeof(request));
    ASSERT(send(fd, request, (size_t)n, 0) == n);
    size_t len = 0;
    for (;;) { /* until the headers and Content-Length bytes of body arrived */
        ssize_t r = recv(fd, buf + len, cap - len - 1, 0);
        if (r <= 0) {
            fprintf(stderr, "connection closed after %zu bytes: %.300s\n", len, buf);
            exit(1);
        }
        len += (size_t)r;
        buf[len] = '\0';
        const char *end = strstr(buf, "\r\n\r\n");
        const char *cl = strcasestr(buf, "Content-Length:");
        if (end != NULL && cl != NULL &&
            len >= (size_t)(end + 4 - buf) + strtoull(cl + 15, NULL, 10)) {
            *status = strncmp(buf, "HTTP/1.1 ", 9) == 0 ? atoi(buf + 9) : 0;
            return end + 4;
        }
    }
}

/* One GET on a keep-alive connection; returns the body's start in buf (NUL-terminated).
 * Exits with the answer on stderr unless it is a 200. */
static inline const char *bench_http_get(int fd, const char *path, char *buf, size_t cap)
{
    int status = 0;
    const char *body = bench_http_request(fd, path, buf, cap, &status);
    if (status != 200) {
        fprintf(stderr, "GET %s: %.300s\n", path, buf);
        exit(1);
    }
    return body;
}

/* ---- the machine's floor for a request over loopback ---------------------------------------
 * A bare TCP round trip between two threads of this process, the server waiting in epoll_wait
 * as libmicrohttpd's workers do and echoing each message: what no HTTP service on this machine
 * can beat, measured in the same run so that a service's figure reads as a ratio to it. On a
 * virtual machine most of it is waking a halted vCPU: a guest whose cpuidle-haltpoll driver
 * does not poll (guest_halt_poll_ns = 0) pays the hypervisor's wake-up on each side of every
 * round trip (bench_wakeup_note says which applies). */

struct bench_echo {
    int listen_fd;
};

static inline void *bench_echo_main(void *arg)
{
    struct bench_echo *e = arg;
    int fd = accept(e->listen_fd, NULL, NULL);
    ASSERT(fd >= 0);
    int one = 1;
    ASSERT(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0);
    int ep = epoll_create1(0);
    ASSERT(ep >= 0);
    struct epoll_event ev = {.events = EPOLLIN};
    ASSERT(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
    char buf[512];
    for (;;) {
        struct epoll_event got;
        if (epoll_wait(ep, &got, 1, -1) < 1) {
            continue;
        }
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n <= 0) {
            break;
        }
        ASSERT(send(fd, buf, (size_t)n, 0) == n);
    }
    close(ep);
    close(fd);
    return NULL;
}

/* Round trips of a request-sized message (46 bytes, a GET of this size) over one loopback
 * connection, iterations of them. */
static inline struct bench_latency bench_loopback_floor(uint64_t iterations)
{
    struct bench_echo e = {.listen_fd = socket(AF_INET, SOCK_STREAM, 0)};
    ASSERT(e.listen_fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    ASSERT(bind(e.listen_fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    ASSERT(listen(e.listen_fd, 1) == 0);
    ASSERT(getsockname(e.listen_fd, (struct sockaddr *)&sa, &len) == 0);
    pthread_t thread;
    ASSERT(pthread_create(&thread, NULL, bench_echo_main, &e) == 0);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT(fd >= 0);
    ASSERT(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    int one = 1;
    ASSERT(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0);
    uint64_t *ns = malloc(iterations * sizeof(*ns));
    ASSERT(ns != NULL);
    char msg[46];
    memset(msg, 'x', sizeof(msg));
    for (uint64_t i = 0; i < iterations; i++) {
        uint64_t t0 = ds_clock_ns();
        ASSERT(send(fd, msg, sizeof(msg), 0) == (ssize_t)sizeof(msg));
        size_t got = 0;
        while (got < sizeof(msg)) {
            ssize_t r = recv(fd, msg + got, sizeof(msg) - got, 0);
            ASSERT(r > 0);
            got += (size_t)r;
        }
        ns[i] = ds_clock_ns() - t0;
    }
    close(fd);
    ASSERT(pthread_join(thread, NULL) == 0);
    close(e.listen_fd);
    struct bench_latency l = bench_latency_of(ns, iterations);
    free(ns);
    return l;
}

/* One line on what wakes this machine's idle CPUs, when it is a guest with cpuidle-haltpoll. */
static inline void bench_wakeup_note(void)
{
    FILE *f = fopen("/sys/module/haltpoll/parameters/guest_halt_poll_ns", "r");
    if (f == NULL) {
        return;
    }
    unsigned long long poll_ns = 0;
    if (fscanf(f, "%llu", &poll_ns) == 1) {
        printf("cpuidle-haltpoll guest_halt_poll_ns = %llu%s\n", poll_ns,
               poll_ns == 0 ? " (an idle vCPU halts at once: each wake-up goes through the "
                              "hypervisor; see docs/ARCHITECTURE.md, request latency)"
                            : "");
    }
    fclose(f);
}

/* Peak RSS (VmHWM) of this process in MiB. */
static inline double bench_peak_rss_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    ASSERT(f != NULL);
    char line[256];
    double kib = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "VmHWM:", 6) == 0) {
            kib = strtod(line + 6, NULL);
        }
    }
    fclose(f);
    return kib / 1024.0;
}

/* Resets VmHWM to the current RSS (Linux >= 4.0); without it the figure is the process peak. */
static inline void bench_peak_rss_reset(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f != NULL) {
        fputs("5", f);
        fclose(f);
    }
}

/* The storage and shard map of dir (created when writable), for a benchmark's own appends or
 * reads; aborts on failure. */
static inline void bench_open_data(const char *dir, uint32_t shards, bool read_only,
                                   struct storage **st, struct shard_map **map)
{
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = dir;
    cfg.read_only = read_only;
    if (!read_only) {
        cfg.model = STORAGE_MODEL_EVENTS; /* the workload's events, each one counted */
    }
    ASSERT(storage_open(&cfg, st) == 0);
    ASSERT(shard_map_open(dir, shards, read_only ? SHARD_MAP_READ_ONLY : 0, map) == 0);
}

/* Routes event as every source does (ingest_route) and appends it; aborts on failure. */
static inline void bench_append(struct storage *st, struct shard_map *map,
                                const struct ds_event *event)
{
    int32_t day = 0;
    uint32_t shard = 0;
    ASSERT(ingest_route(map, event, &day, &shard) == 0);
    ASSERT(storage_append(st, day, shard, event, NULL) == 0);
}

/* Events of the default workload's days durable in dir, as a reader sees them (0 until the
 * directory exists); opens the reader into *st / *map on first use. */
static inline uint64_t bench_durable_events(struct storage **st, struct shard_map **map,
                                            const char *dir)
{
    if (*st == NULL) {
        struct storage_config cfg;
        storage_config_defaults(&cfg);
        cfg.dir = dir;
        cfg.read_only = true;
        if (storage_open(&cfg, st) != 0 ||
            shard_map_open(dir, SHARD_COUNT_DEFAULT, SHARD_MAP_READ_ONLY, map) != 0) {
            return 0;
        }
    }
    ASSERT(storage_refresh(*st) == 0 && shard_map_reload(*map) == 0);
    struct loadgen_workload_config w;
    loadgen_workload_defaults(&w);
    struct query_count_request req = {.day_first = w.first_day,
                                      .day_last = w.first_day + (int32_t)w.days - 1};
    struct query_count_result res;
    ASSERT(query_count(*st, *map, &req, &res) == 0);
    uint64_t count = res.count;
    query_count_result_deinit(&res);
    return count;
}

#endif /* DS_BENCH_H */
