/*
 * The file pipeline behind `dayshard ingest`: JSON lines in, durable partitions out.
 *
 * Two threads, one per core of the target machine:
 *   decode thread (the caller): read 4 MiB chunks, split lines, decode, route (day, shard map,
 *     shard), dead-letter bad lines, fill batches of INGEST_BATCH_EVENTS routed events;
 *   writer thread: append each batch's events to storage and group-commit every
 *     commit_interval_ms or commit_events, and once more at the end.
 * Batches cycle through two bounded SPSC rings (full: decode -> writer, free: writer ->
 * decode), so memory between the threads is fixed and a slow disk pushes back on reading.
 *
 * The shard map is synced by the decode thread as soon as a new day appears, before any event
 * of that day is handed on; so no committed block ever belongs to a day the durable map lacks.
 *
 * Rejected: decoding on several threads. On two cores the writer (compression, I/O) needs one;
 * measured, decode alone runs at several million lines per second, above what one writer takes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ingest/ingest.h"
#include "shard/shard.h"
#include "storage/storage.h"

#define READ_BUFFER_BYTES (4u * 1024u * 1024u)
#define WAIT_NS 50000L

struct routed_event {
    struct ds_event event;
    int32_t day;
    uint32_t shard;
    int64_t line;
};

struct batch {
    uint32_t count;
    bool last;
    struct routed_event items[INGEST_BATCH_EVENTS];
};

struct pipeline {
    const struct ingest_file_config *cfg;
    struct ingest_stats *stats;
    struct ds_ring full;
    struct ds_ring free;
    struct batch *batches;
    struct batch *current;
    atomic_int writer_error;
    uint64_t writer_accepted;
    uint64_t writer_commits;
    FILE *deadletter;
    int decode_error;
};

void ingest_file_config_defaults(struct ingest_file_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->source_name = "-";
    cfg->commit_interval_ms = 200;
    cfg->commit_events = 1u << 20;
}

static void pause_briefly(void)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = WAIT_NS};
    nanosleep(&ts, NULL);
}

/* ---- writer thread ------------------------------------------------------------------------- */

static int writer_commit(struct pipeline *pl, uint64_t *since_commit, uint64_t *last_commit_ns)
{
    int rc = storage_commit(pl->cfg->storage);
    if (rc == 0) {
        pl->writer_accepted += *since_commit;
        pl->writer_commits++;
        *since_commit = 0;
    }
    *last_commit_ns = ds_clock_ns();
    return rc;
}

static int writer_append(struct pipeline *pl, const struct batch *b)
{
    for (uint32_t i = 0; i < b->count; i++) {
        const struct routed_event *r = &b->items[i];
        struct ds_source source = {.partition = DS_SOURCE_FILE, .offset = r->line};
        int rc = storage_append(pl->cfg->storage, r->day, r->shard, &r->event, &source);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

static void *writer_main(void *arg)
{
    struct pipeline *pl = arg;
    pthread_setname_np(pthread_self(), "ds-writer");
    uint64_t interval_ns = (uint64_t)pl->cfg->commit_interval_ms * 1000000u;
    uint64_t since_commit = 0;
    uint64_t last_commit_ns = ds_clock_ns();
    int rc = 0;
    for (;;) {
        struct batch *b = ds_ring_pop(&pl->full);
        if (b == NULL) {
            bool due = ds_clock_ns() - last_commit_ns >= interval_ns && since_commit > 0;
            if (rc == 0 && due) {
                rc = writer_commit(pl, &since_commit, &last_commit_ns);
            }
            pause_briefly();
            continue;
        }
        bool last = b->last;
        if (rc == 0) {
            rc = writer_append(pl, b);
            since_commit += b->count;
        }
        b->count = 0;
        b->last = false;
        int pushed = ds_ring_push(&pl->free, b);
        ASSERT(pushed == 0);
        bool due =
            since_commit >= pl->cfg->commit_events || ds_clock_ns() - last_commit_ns >= interval_ns;
        if (rc == 0 && (last || due)) {
            rc = writer_commit(pl, &since_commit, &last_commit_ns);
        }
        if (rc != 0) {
            atomic_store(&pl->writer_error, rc);
        }
        if (last) {
            break;
        }
    }
    return NULL;
}

/* ---- decode thread ------------------------------------------------------------------------- */

static int hand_over(struct pipeline *pl, bool last)
{
    struct batch *b = pl->current;
    b->last = last;
    while (ds_ring_push(&pl->full, b) != 0) {
        pause_briefly();
    }
    pl->current = NULL;
    if (last) {
        return 0;
    }
    while ((pl->current = ds_ring_pop(&pl->free)) == NULL) {
        pause_briefly();
    }
    return atomic_load(&pl->writer_error);
}

static bool utf8_valid(const uint8_t *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        uint8_t c = s[i];
        size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > len || (n == 2 && c < 0xC2) || (n == 4 && c > 0xF4)) {
            return false;
        }
        for (size_t k = 1; k < n; k++) {
            if ((s[i + k] & 0xC0) != 0x80) {
                return false;
            }
        }
        uint32_t cp = n == 1 ? c : (uint32_t)(c & (0x7F >> n));
        for (size_t k = 1; k < n; k++) {
            cp = (cp << 6) | (s[i + k] & 0x3Fu);
        }
        if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))) {
            return false;
        }
        i += n;
    }
    return true;
}

/* Writes text as a JSON string (quotes included); text must be valid UTF-8. */
static void json_string_out(FILE *out, const char *text, size_t len)
{
    fputc('"', out);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '"' || c == '\\') {
            fputc('\\', out);
            fputc(c, out);
        } else if (c < 0x20) {
            fprintf(out, "\\u%04x", c);
        } else {
            fputc(c, out);
        }
    }
    fputc('"', out);
}

/* The raw line as "raw" (a JSON string) when it is UTF-8, else as "raw_hex". */
static void deadletter_raw(FILE *out, const char *raw, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    if (utf8_valid((const uint8_t *)raw, len)) {
        fputs(",\"raw\":", out);
        json_string_out(out, raw, len);
        return;
    }
    fputs(",\"raw_hex\":\"", out);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)raw[i];
        fputc(hex[c >> 4], out);
        fputc(hex[c & 15], out);
    }
    fputc('"', out);
}

static void deadletter(struct pipeline *pl, enum ingest_reason reason, size_t byte_offset,
                       int64_t line, const char *raw, size_t len, bool truncated)
{
    FILE *out = pl->deadletter;
    fprintf(out, "{\"reason\":\"%s\",\"source\":", ingest_reason_name(reason));
    json_string_out(out, pl->cfg->source_name, strlen(pl->cfg->source_name));
    fprintf(out, ",\"line\":%lld,\"byte_offset\":%zu", (long long)line, byte_offset);
    deadletter_raw(out, raw, len);
    fprintf(out, "%s}\n", truncated ? ",\"truncated\":true" : "");
    pl->stats->rejected++;
    pl->stats->rejected_by_reason[reason]++;
}

static int route(struct pipeline *pl, const struct ds_event *event, int64_t line)
{
    int32_t day = ds_day_from_ms(event->ts_ms);
    int shards = shard_map_ensure(pl->cfg->map, day);
    if (shards < 0) {
        ds_log_error("line %lld: shard map: %s", (long long)line, ds_strerror(shards));
        return shards;
    }
    if (shard_map_dirty(pl->cfg->map)) {
        int rc = shard_map_sync(pl->cfg->map);
        if (rc != 0) {
            ds_log_error("shard map sync failed: %s", ds_strerror(rc));
            return rc;
        }
    }
    struct routed_event *r = &pl->current->items[pl->current->count++];
    r->event = *event;
    r->day = day;
    r->shard = shard_of_id(&event->order_id, (uint32_t)shards);
    r->line = line;
    return pl->current->count == INGEST_BATCH_EVENTS ? hand_over(pl, false) : 0;
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
    if (blank(line, len)) {
        pl->stats->blank++;
        return 0;
    }
    struct ds_event event;
    struct ingest_error error;
    if (ingest_decode(line, len, &event, &error) != 0) {
        deadletter(pl, error.reason, error.byte_offset, number, line, len, false);
        return 0;
    }
    return route(pl, &event, number);
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
        if (used > INGEST_EVENT_BYTES_MAX && !skipping) {
            deadletter(pl, INGEST_TOO_LARGE, INGEST_EVENT_BYTES_MAX, number + 1, buf,
                       INGEST_EVENT_BYTES_MAX, true);
            skipping = true;
        }
        if (skipping) {
            used = 0; /* drop the rest of the over-long line as it arrives */
        }
    }
    return rc;
}

static int finish_deadletters(struct pipeline *pl)
{
    if (fflush(pl->deadletter) != 0 || fdatasync(fileno(pl->deadletter)) != 0) {
        int rc = -errno;
        ds_log_error("%s: cannot sync dead letters: %s", pl->cfg->deadletter_path, ds_strerror(rc));
        return rc;
    }
    return 0;
}

static int pipeline_init(struct pipeline *pl)
{
    int rc = ds_ring_init(&pl->full, INGEST_BATCHES_MAX * 2);
    if (rc == 0) {
        rc = ds_ring_init(&pl->free, INGEST_BATCHES_MAX * 2);
    }
    pl->batches = calloc(INGEST_BATCHES_MAX, sizeof(*pl->batches));
    if (rc != 0 || pl->batches == NULL) {
        return rc != 0 ? rc : -ENOMEM;
    }
    for (uint32_t i = 1; i < INGEST_BATCHES_MAX; i++) {
        rc = ds_ring_push(&pl->free, &pl->batches[i]);
        ASSERT(rc == 0);
    }
    pl->current = &pl->batches[0];
    pl->deadletter = fopen(pl->cfg->deadletter_path, "a");
    if (pl->deadletter == NULL) {
        rc = -errno;
        ds_log_error("%s: cannot open: %s", pl->cfg->deadletter_path, ds_strerror(rc));
    }
    return rc;
}

static void pipeline_deinit(struct pipeline *pl)
{
    if (pl->deadletter != NULL) {
        fclose(pl->deadletter);
    }
    free(pl->batches);
    ds_ring_deinit(&pl->full);
    ds_ring_deinit(&pl->free);
}

int ingest_file_run(const struct ingest_file_config *cfg, int fd, struct ingest_stats *stats)
{
    ASSERT(cfg->storage != NULL && cfg->map != NULL && cfg->deadletter_path != NULL);
    ASSERT(cfg->commit_interval_ms >= 1 && cfg->commit_events >= 1);
    memset(stats, 0, sizeof(*stats));
    struct pipeline pl = {.cfg = cfg, .stats = stats};
    char *buf = malloc(READ_BUFFER_BYTES);
    int rc = buf != NULL ? pipeline_init(&pl) : -ENOMEM;
    pthread_t writer;
    bool started = false;
    if (rc == 0) {
        rc = -pthread_create(&writer, NULL, writer_main, &pl);
        started = rc == 0;
    }
    if (rc == 0) {
        rc = read_lines(&pl, fd, buf);
    }
    if (started) {
        if (pl.current == NULL) {
            while ((pl.current = ds_ring_pop(&pl.free)) == NULL) {
                pause_briefly();
            }
        }
        int handed = hand_over(&pl, true);
        ASSERT(handed == 0);
        pthread_join(writer, NULL);
        int writer_rc = atomic_load(&pl.writer_error);
        rc = rc != 0 ? rc : writer_rc;
    }
    if (rc == 0) {
        rc = finish_deadletters(&pl);
    }
    stats->accepted = pl.writer_accepted;
    stats->commits = pl.writer_commits;
    pipeline_deinit(&pl);
    free(buf);
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
