/*
 * The file pipeline behind `dayshard ingest`: JSON lines in, durable partitions out.
 *
 * The calling thread reads 4 MiB chunks, splits lines, decodes, routes (day, shard map, shard)
 * and fills batches; the writer stage (stage.c) appends, dead-letters and group-commits on its
 * own thread. Line numbers are the source offsets of the pseudo-partition DS_SOURCE_FILE.
 *
 * The shard map is synced by this thread as soon as a new day appears, before any event of
 * that day is handed on; so no committed block ever belongs to a day the durable map lacks.
 *
 * Rejected: decoding on several threads. On two cores the writer (compression, I/O) needs one;
 * measured (docs/ARCHITECTURE.md), one decode thread feeds the writer at ~2.5M events/s.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ingest/stage.h"

#define READ_BUFFER_BYTES (4u * 1024u * 1024u)

struct pipeline {
    const struct ingest_file_config *cfg;
    struct ingest_stats *stats;
    struct stage stage;
    int64_t first_line;            /* lines numbered below it are durable already (cfg->resume) */
    struct ingest_decoder decoder; /* the reader thread's: the items of the event being added */
};

void ingest_file_config_defaults(struct ingest_file_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->source_name = "-";
    cfg->commit_interval_ms = 200;
    cfg->commit_events = 1u << 20;
    cfg->deadletter_file_bytes = INGEST_DEADLETTER_FILE_BYTES_DEFAULT;
}

/* Day, S(day) (syncing the map when the day is new) and shard of an event. */
int ingest_route(struct shard_map *map, const struct ds_event *event, int32_t *day, uint32_t *shard)
{
    *day = ds_day_from_ms(event->ts_ms);
    int shards = shard_map_ensure(map, *day);
    if (shards < 0) {
        ds_log_error("shard map: %s", ds_strerror(shards));
        return shards;
    }
    if (shard_map_dirty(map)) {
        int rc = shard_map_sync(map); /* logs its failure, with the map's path */
        if (rc != 0) {
            return rc;
        }
    }
    *shard = shard_of_id(&event->order_id, (uint32_t)shards);
    return 0;
}

static bool blank(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') {
            return false;
        }
    }
    return true;
}

static int process_line(struct pipeline *pl, const char *line, size_t len, int64_t number)
{
    pl->stats->lines++;
    if (number < pl->first_line) {
        return 0; /* durable from an earlier run (resume) */
    }
    if (blank(line, len)) {
        pl->stats->blank++;
        return 0;
    }
    struct ds_source source = {.partition = DS_SOURCE_FILE, .offset = number};
    struct ds_event event;
    struct ingest_error error;
    if (ingest_decoder_decode(&pl->decoder, line, len, &event, &error) != 0) {
        return stage_add_reject(&pl->stage, &error, &source, line, len);
    }
    int32_t day = 0;
    uint32_t shard = 0;
    int rc = ingest_route(pl->cfg->map, &event, &day, &shard);
    return rc == 0 ? stage_add_event(&pl->stage, &event, day, shard, &source) : rc;
}

/* Reads fd to the end, calling process_line per line. A line longer than the event limit is
 * dead-lettered (its first INGEST_EVENT_BYTES_MAX bytes kept) without buffering the rest. */
static int read_lines(struct pipeline *pl, int fd, char *buf)
{
    size_t used = 0;
    int64_t number = 0;
    bool skipping = false;
    int rc = 0;
    for (bool eof = false; !eof && rc == 0;) {
        ssize_t n = read(fd, buf + used, READ_BUFFER_BYTES - used);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            rc = -errno;
            ds_log_error("%s: read: %s", pl->cfg->source_name, ds_strerror(rc));
            break;
        }
        eof = n == 0;
        pl->stats->bytes_read += (uint64_t)n;
        used += (size_t)n;
        size_t start = 0;
        for (;;) {
            char *nl = memchr(buf + start, '\n', used - start);
            if (nl == NULL && !(eof && start < used)) {
                break;
            }
            size_t end = nl != NULL ? (size_t)(nl - buf) : used;
            number++;
            if (skipping) {
                skipping = false;
                pl->stats->lines++;
            } else {
                rc = process_line(pl, buf + start, end - start, number);
            }
            start = nl != NULL ? end + 1 : used;
            if (rc != 0) {
                break;
            }
        }
        memmove(buf, buf + start, used - start);
        used -= start;
        if (rc == 0 && used > INGEST_EVENT_BYTES_MAX && !skipping && number + 1 < pl->first_line) {
            skipping = true; /* an over-long line an earlier run dead-lettered already */
        } else if (rc == 0 && used > INGEST_EVENT_BYTES_MAX && !skipping) {
            struct ds_source source = {.partition = DS_SOURCE_FILE, .offset = number + 1};
            struct ingest_error error = {.reason = INGEST_TOO_LARGE,
                                         .byte_offset = INGEST_EVENT_BYTES_MAX};
            /* One byte past the limit tells the stage the raw text is cut short. */
            rc = stage_add_reject(&pl->stage, &error, &source, buf, INGEST_EVENT_BYTES_MAX + 1);
            skipping = true;
        }
        if (skipping) {
            used = 0; /* drop the rest of the over-long line as it arrives */
        }
    }
    return rc;
}

int ingest_file_run(const struct ingest_file_config *cfg, int fd, struct ingest_stats *stats)
{
    ASSERT(cfg->storage != NULL && cfg->map != NULL && cfg->deadletter_path != NULL);
    memset(stats, 0, sizeof(*stats));
    struct pipeline *pl = calloc(1, sizeof(*pl));
    char *buf = malloc(READ_BUFFER_BYTES);
    if (pl == NULL || buf == NULL) {
        free(pl);
        free(buf);
        return -ENOMEM;
    }
    pl->cfg = cfg;
    pl->stats = stats;
    pl->first_line = cfg->resume ? storage_source_next(cfg->storage, DS_SOURCE_FILE) : -1;
    struct stage_config scfg = {.storage = cfg->storage,
                                .deadletter_path = cfg->deadletter_path,
                                .deadletter_file_bytes = cfg->deadletter_file_bytes,
                                .source_name = cfg->source_name,
                                .commit_interval_ms = cfg->commit_interval_ms,
                                .commit_events = cfg->commit_events};
    int rc = stage_start(&pl->stage, &scfg);
    if (rc == 0) {
        rc = read_lines(pl, fd, buf);
        int finished = stage_finish(&pl->stage);
        rc = rc != 0 ? rc : finished;
        stats->accepted = atomic_load(&pl->stage.accepted);
        stats->rejected = atomic_load(&pl->stage.rejected);
        stats->commits = atomic_load(&pl->stage.commits);
        for (int r = 0; r < INGEST_REASON_COUNT; r++) {
            stats->rejected_by_reason[r] = atomic_load(&pl->stage.rejected_by_reason[r]);
        }
    }
    free(buf);
    free(pl);
    return rc;
}

void ingest_stats_json(const struct ingest_stats *stats, FILE *out)
{
    fprintf(out, "{\"accepted\":%llu,\"rejected\":%llu,\"rejected_by_reason\":{",
            (unsigned long long)stats->accepted, (unsigned long long)stats->rejected);
    bool first = true;
    for (int r = 1; r < INGEST_REASON_COUNT; r++) {
        if (stats->rejected_by_reason[r] > 0) {
            fprintf(out, "%s\"%s\":%llu", first ? "" : ",",
                    ingest_reason_name((enum ingest_reason)r),
                    (unsigned long long)stats->rejected_by_reason[r]);
            first = false;
        }
    }
    fprintf(out, "},\"lines\":%llu,\"blank\":%llu,\"commits\":%llu}\n",
            (unsigned long long)stats->lines, (unsigned long long)stats->blank,
            (unsigned long long)stats->commits);
}
