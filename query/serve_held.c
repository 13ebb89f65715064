/*
 * The resource figures of /metrics read on the scrape (serve_stats.c renders the rest): bytes
 * and files on disk per store, from a walk of the data directory; the filesystem's space; the
 * process's resident memory and descriptors (/proc/self); the shard counts of the days held
 * (the reader's shard map from the retention floor up); the by-customer index's seals; and
 * readiness as a gauge, by the rule /readyz answers with.
 *
 * Everything here runs on the HTTP worker that answers the scrape and touches nothing of the
 * writer. The walk stats each file once (about a millisecond per thousand files; a node with
 * retention holds a few thousand), and Prometheus scrapes every 15 s or so.
 *
 * Rejected: bytes the writer knows (committed segment ends, the orders-by-id store's files)
 * summed into atomics at each commit. They miss what waits to be removed (segments a compaction
 * or retention replaced wait 30 s, a seal's old files), the dead letters and the index, which
 * is what fills a disk by surprise; the walk counts the blocks df counts.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "query/serve_private.h"

/* Directory levels below the data directory a walk enters: DIR/parts/DAY/SHARD/segment is the
 * deepest file a store writes; a deeper tree is not ours and is not counted. */
#define HELD_WALK_DEPTH_MAX 4u

enum held_store {
    STORE_PARTS = 0,
    STORE_RETIRED,
    STORE_IDS,
    STORE_GSI,
    STORE_DEADLETTERS,
    STORE_OTHER,
    STORES
};

/* retired: the days of DIR/parts below the retention floor, removed 30 s after their drop (a
 * reader may still hold them). Apart from parts, since in compressed stream time (a backlog, a
 * soak) 30 s of feed are many days, which parts would count as growth. */
static const char *const store_names[STORES] = {"parts", "retired",     "ids",
                                                "gsi",   "deadletters", "other"};

struct held_disk {
    uint64_t bytes[STORES];
    uint64_t files[STORES];
};

static enum held_store store_of(const char *top)
{
    if (strcmp(top, "parts") == 0) {
        return STORE_PARTS;
    }
    if (strcmp(top, "ids") == 0) {
        return STORE_IDS;
    }
    if (strcmp(top, "gsi") == 0) {
        return STORE_GSI;
    }
    return strncmp(top, "deadletter", 10) == 0 ? STORE_DEADLETTERS : STORE_OTHER;
}

/* Adds the allocated bytes (directories' too) and the files under dir_fd (taken: closed here)
 * to store. A file
 * removed between readdir and fstatat is skipped: the walk is a snapshot of a live directory. */
static void walk(int dir_fd, uint32_t depth, enum held_store store, int32_t floor,
                 struct held_disk *out)
{
    DIR *d = fdopendir(dir_fd);
    if (d == NULL) {
        close(dir_fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        struct stat sb;
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            continue;
        }
        enum held_store s = depth == 0 ? store_of(e->d_name) : store;
        int32_t day = 0;
        if (depth == 1 && s == STORE_PARTS &&
            ds_date_parse(e->d_name, strlen(e->d_name), &day) == 0 && day < floor) {
            s = STORE_RETIRED;
        }
        if (S_ISDIR(sb.st_mode)) {
            out->bytes[s] += (uint64_t)sb.st_blocks * 512u; /* a day's or shard's directory */
        }
        if (S_ISDIR(sb.st_mode) && depth + 1 < HELD_WALK_DEPTH_MAX) {
            int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (fd >= 0) {
                walk(fd, depth + 1, s, floor, out);
            }
        } else if (S_ISREG(sb.st_mode)) {
            out->bytes[s] += (uint64_t)sb.st_blocks * 512u;
            out->files[s]++;
        }
    }
    closedir(d);
}

static void put_disk(const char *dir, int32_t floor, struct http_text *b)
{
    struct held_disk disk = {0};
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        walk(fd, 0, STORE_OTHER, floor, &disk);
    }
    http_text_put(
        b, "# HELP dayshard_disk_bytes Bytes allocated on disk under the data "
           "directory, by store (retired: days below the retention floor, removed 30 s after their "
           "drop; other: MANIFEST, shard map, locks).\n"
           "# TYPE dayshard_disk_bytes gauge\n");
    for (uint32_t s = 0; s < STORES; s++) {
        http_text_put(b, "dayshard_disk_bytes{store=\"%s\"} %" PRIu64 "\n", store_names[s],
                      disk.bytes[s]);
    }
    http_text_put(b, "# HELP dayshard_disk_files Files under the data directory, by store.\n"
                     "# TYPE dayshard_disk_files gauge\n");
    for (uint32_t s = 0; s < STORES; s++) {
        http_text_put(b, "dayshard_disk_files{store=\"%s\"} %" PRIu64 "\n", store_names[s],
                      disk.files[s]);
    }
    struct statvfs vfs;
    if (statvfs(dir, &vfs) == 0) {
        http_text_put(b,
                      "# HELP dayshard_filesystem_avail_bytes Bytes the data directory's "
                      "filesystem has free for this process.\n"
                      "# TYPE dayshard_filesystem_avail_bytes gauge\n"
                      "dayshard_filesystem_avail_bytes %" PRIu64 "\n"
                      "# HELP dayshard_filesystem_size_bytes Size of the data directory's "
                      "filesystem.\n"
                      "# TYPE dayshard_filesystem_size_bytes gauge\n"
                      "dayshard_filesystem_size_bytes %" PRIu64 "\n",
                      (uint64_t)vfs.f_bavail * vfs.f_frsize, (uint64_t)vfs.f_blocks * vfs.f_frsize);
    }
}

/* Resident memory from /proc/self/statm (its second field, in pages); -1 when unreadable. */
static int64_t resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    if (f == NULL) {
        return -1;
    }
    unsigned long long size_pages = 0;
    unsigned long long resident_pages = 0;
    int n = fscanf(f, "%llu %llu", &size_pages, &resident_pages);
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return n == 2 && page > 0 ? (int64_t)(resident_pages * (unsigned long long)page) : -1;
}

/* Open descriptors: the entries of /proc/self/fd but the one reading it; -1 when unreadable. */
static int64_t open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) {
        return -1;
    }
    int64_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        n += e->d_name[0] != '.';
    }
    closedir(d);
    return n - 1;
}

static void put_process(struct http_text *b)
{
    int64_t rss = resident_bytes();
    if (rss >= 0) {
        http_text_put(b,
                      "# HELP dayshard_process_resident_bytes Resident memory of the process.\n"
                      "# TYPE dayshard_process_resident_bytes gauge\n"
                      "dayshard_process_resident_bytes %" PRId64 "\n",
                      rss);
    }
    int64_t fds = open_fds();
    if (fds >= 0) {
        http_text_put(b,
                      "# HELP dayshard_process_open_fds Open file descriptors of the process.\n"
                      "# TYPE dayshard_process_open_fds gauge\n"
                      "dayshard_process_open_fds %" PRId64 "\n",
                      fds);
    }
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
        http_text_put(b,
                      "# HELP dayshard_process_fds_max The process's limit of open file "
                      "descriptors (RLIMIT_NOFILE).\n"
                      "# TYPE dayshard_process_fds_max gauge\n"
                      "dayshard_process_fds_max %" PRIu64 "\n",
                      (uint64_t)limit.rlim_cur);
    }
}

struct held_shards {
    int32_t floor;
    uint64_t days;
    uint64_t shards_total;
    uint32_t shards_max;
};

static int count_held_day(int32_t day, uint32_t shard_count, void *user)
{
    struct held_shards *h = user;
    if (day >= h->floor) {
        h->days++;
        h->shards_total += shard_count;
        h->shards_max = shard_count > h->shards_max ? shard_count : h->shards_max;
    }
    return 0;
}

static void put_shards(struct serve_reader *r, struct http_text *b)
{
    struct held_shards held = {.floor = storage_retention_floor(r->st)};
    (void)shard_map_visit(r->map, count_held_day, &held);
    http_text_put(b,
                  "# HELP dayshard_days_held Days of the shard map at or above the retention "
                  "floor.\n"
                  "# TYPE dayshard_days_held gauge\n"
                  "dayshard_days_held %" PRIu64 "\n"
                  "# HELP dayshard_day_shards_max Most shards of one held day.\n"
                  "# TYPE dayshard_day_shards_max gauge\n"
                  "dayshard_day_shards_max %" PRIu32 "\n"
                  "# HELP dayshard_shards_total Shards of all held days together (the "
                  "partitions a count may fan out to).\n"
                  "# TYPE dayshard_shards_total gauge\n"
                  "dayshard_shards_total %" PRIu64 "\n",
                  held.days, held.shards_max, held.shards_total);
}

static void put_gsi_seals(struct query_http *h, struct http_text *b)
{
    if (h->gsi == NULL) {
        return;
    }
    struct index_builder_seals s;
    index_builder_seals(h->gsi, &s);
    http_text_put(
        b,
        "# HELP dayshard_gsi_seals_total Seals of the by-customer index installed since start.\n"
        "# TYPE dayshard_gsi_seals_total counter\n"
        "dayshard_gsi_seals_total %" PRIu64 "\n"
        "# HELP dayshard_gsi_seal_failures_total Seals of the by-customer index that failed "
        "(logged; the old log stays, the next try waits for more log).\n"
        "# TYPE dayshard_gsi_seal_failures_total counter\n"
        "dayshard_gsi_seal_failures_total %" PRIu64 "\n"
        "# HELP dayshard_gsi_sealing 1 while a seal of the by-customer index runs.\n"
        "# TYPE dayshard_gsi_sealing gauge\n"
        "dayshard_gsi_sealing %d\n"
        "# HELP dayshard_gsi_seal_stall_seconds_max Longest time a seal's finish held up the "
        "index's applies.\n"
        "# TYPE dayshard_gsi_seal_stall_seconds_max gauge\n"
        "dayshard_gsi_seal_stall_seconds_max %" PRIu64 ".%09" PRIu64 "\n"
        "# HELP dayshard_gsi_log_bytes The by-customer index's log: its sealed part and the "
        "part appended since (live; a seal folds it in).\n"
        "# TYPE dayshard_gsi_log_bytes gauge\n"
        "dayshard_gsi_log_bytes{part=\"sealed\"} %" PRIu64 "\n"
        "dayshard_gsi_log_bytes{part=\"live\"} %" PRIu64 "\n",
        s.seals, s.failures, s.sealing ? 1 : 0, s.finish_ns_max / 1000000000u,
        s.finish_ns_max % 1000000000u, s.sealed_bytes, s.live_bytes);
}

void serve_held_put(struct query_http *h, struct serve_reader *r, struct http_text *b)
{
    if (h->metrics != NULL) {
        int64_t lag = 0;
        char why[160];
        http_text_put(
            b,
            "# HELP dayshard_ready 1 while /readyz answers 200: the node joined its "
            "group, its consumer lag is within --ready-max-lag and its consumer and writer "
            "make progress.\n"
            "# TYPE dayshard_ready gauge\n"
            "dayshard_ready %d\n",
            serve_ready(h, &lag, why, sizeof(why)) == NULL ? 1 : 0);
    }
    put_disk(h->data_dir, storage_retention_floor(r->st), b);
    put_process(b);
    put_shards(r, b);
    put_gsi_seals(h, b);
}
