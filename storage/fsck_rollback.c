/*
 * What fsck --repair rolls back (fsck_rollback.h): the complete blocks past committed ends and
 * in orphan segments, counted from their headers, and in the orders model the orders whose
 * rows they held, reverted or lost against the store the recovery leaves.
 *
 * A range is read whole (at most a segment) and walked block by block: a block whose header
 * passes its CRC counts its header's event_count (in the orders model a payload that fails
 * its CRC or its decoding also makes a range of unknown events: whose rows it held is
 * unknown); a range that does not parse is passed over to the next offset where a block
 * header passes its CRC (the walk of store_read.c does the same inside committed data), and
 * counts as a range of unknown events, since a whole block may have been damaged there.
 * Nothing after the last valid block counts: a writer's crash leaves its last block cut, and
 * that block was never part of a commit.
 *
 * An order counts once however many of its rows were rolled back: the store holds its current
 * version or nothing, and each rolled-back insert of it was a version the store had applied
 * after the prefix's commit. The newest rolled-back row (the greatest version; without
 * versions the last in walk order) is what the record calls "had": a restore that reads the
 * rolled-back offsets again compares with it. The lookup happens after recovery on a reader,
 * the view every count has; the record is written then too, so a crash between the recovery
 * and the record loses the list of orders (the rolled-back bytes stay in quarantine/), never
 * data.
 *
 * Rejected: counting the rolled-back events from the quarantine records that store_read.c's
 * range scan makes (CRC-valid blocks only): a range whose blocks are separated by damage would
 * then report an exact number that is too small.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage/data_model.h"
#include "storage/fsck_orders.h"
#include "storage/fsck_rollback.h"
#include "storage/quarantine.h"
#include "storage/storage.h"

/* A past-end range longer than this is not a segment's tail: refused rather than read. */
#define ROLLBACK_RANGE_BYTES_MAX (1ull << 32)

/* One inserted row that was rolled back, as the record needs it. */
struct rollback_row {
    struct ds_id id;
    bool has_version;
    int64_t version;
    int64_t ts_ms;
    int32_t day;
    uint32_t shard;
    uint8_t status_len;
    char status[DS_STATUS_BYTES_MAX];
    uint64_t seq; /* walk order */
};

struct fsck_rollback {
    struct rollback_row *rows; /* after settle's sort: one per order, the newest */
    size_t count;
    size_t capacity;
    int32_t day; /* of the range being decoded */
    uint32_t shard;
};

static int row_take(const struct ds_event *e, const struct ds_source *source, void *user)
{
    (void)source;
    struct fsck_rollback *rb = user;
    if (e->retract) {
        return 0; /* its insert is in the same commit, so rolled back too */
    }
    if (rb->count == rb->capacity) {
        size_t capacity = rb->capacity == 0 ? 256 : rb->capacity * 2;
        struct rollback_row *v = realloc(rb->rows, capacity * sizeof(*v));
        if (v == NULL) {
            return -ENOMEM;
        }
        rb->rows = v;
        rb->capacity = capacity;
    }
    struct rollback_row *r = &rb->rows[rb->count];
    *r = (struct rollback_row){.id = e->order_id,
                               .has_version = e->has_version,
                               .version = e->has_version ? e->version : 0,
                               .ts_ms = e->ts_ms,
                               .day = rb->day,
                               .shard = rb->shard,
                               .status_len = e->status_len,
                               .seq = rb->count};
    memcpy(r->status, e->status, e->status_len);
    rb->count++;
    return 0;
}

/* The offset after at where a block header passes its CRC, or len. */
static size_t resync(const uint8_t *buf, size_t len, size_t at)
{
    for (size_t i = at + 1; i + sizeof(struct block_header) <= len; i++) {
        uint32_t magic;
        memcpy(&magic, buf + i, sizeof(magic));
        if (magic == BLOCK_MAGIC && block_header_check(buf + i, len - i) == 0) {
            return i;
        }
    }
    return len;
}

struct range_tally {
    uint64_t blocks;
    uint64_t events;
    uint64_t unknown;
};

/* Walks the blocks of buf[0, len); rb (may be NULL) gets the inserted rows. Each block is
 * parsed and decoded from an aligned copy in *scratch (grown as needed): the header's fields
 * are read in place. */
static int range_walk(const uint8_t *buf, size_t len, int64_t day_start_ms,
                      struct block_codec *codec, struct fsck_rollback *rb, struct range_tally *t,
                      uint8_t **scratch, size_t *scratch_capacity)
{
    size_t at = 0;
    while (at + sizeof(struct block_header) <= len) {
        struct block_header h;
        memcpy(&h, buf + at, sizeof(h));
        bool header_ok = block_header_check(buf + at, len - at) == 0;
        size_t total = (size_t)h.header_bytes + h.payload_bytes;
        if (header_ok && total > len - at) {
            break; /* cut by the end of the file: a torn write */
        }
        struct block_view view;
        if (header_ok && total > *scratch_capacity) {
            uint8_t *grown = realloc(*scratch, total);
            if (grown == NULL) {
                return -ENOMEM;
            }
            *scratch = grown;
            *scratch_capacity = total;
        }
        if (header_ok) {
            memcpy(*scratch, buf + at, total);
        }
        if (!header_ok || block_view_parse(*scratch, h.header_bytes, &view) != 0) {
            size_t next = resync(buf, len, at);
            t->unknown += next < len ? 1 : 0;
            at = next;
            continue;
        }
        const uint8_t *payload = *scratch + h.header_bytes;
        bool payload_ok = ds_crc32c(0, payload, h.payload_bytes) == h.payload_crc;
        int rc = 0;
        if (payload_ok && rb != NULL) {
            size_t before = rb->count;
            rc = block_decode(codec, &view, payload, day_start_ms, row_take, rb);
            if (rc == -DS_ECORRUPT || rc == -DS_EZSTD) {
                rb->count = before; /* its rows are not to be trusted */
                payload_ok = false;
                rc = 0;
            }
        }
        if (rc != 0) {
            return rc;
        }
        /* A damaged payload under an intact header: the header says how many events, so the
         * events model knows its loss; the orders model cannot say whose they were. */
        t->blocks++;
        t->events += h.event_count;
        t->unknown += !payload_ok && rb != NULL ? 1 : 0;
        at += total;
    }
    return 0;
}

static int range_read(struct storage *st, const struct damage *d, uint8_t **out)
{
    if (d->length > ROLLBACK_RANGE_BYTES_MAX) {
        return -DS_ELIMIT;
    }
    char dir[DS_PATH_MAX];
    char path[DS_PATH_MAX];
    store_part_dir(st, d->day, d->shard, dir);
    if (snprintf(path, sizeof(path), "%s/%08u.seg", dir, d->segment_id) >= (int)sizeof(path)) {
        return -ENAMETOOLONG;
    }
    uint8_t *buf = malloc(d->length > 0 ? d->length : 1);
    if (buf == NULL) {
        return -ENOMEM;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc = fd >= 0 ? 0 : -errno;
    size_t done = 0;
    while (rc == 0 && done < d->length) {
        ssize_t n = pread(fd, buf + done, d->length - done, (off_t)(d->offset + done));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        rc = n < 0 ? -errno : (n == 0 ? -EIO : 0);
        done += n > 0 ? (size_t)n : 0;
    }
    if (fd >= 0) {
        close(fd);
    }
    if (rc != 0) {
        ds_log_error("%s: cannot read the range past the committed end at %llu: %s", path,
                     (unsigned long long)d->offset, ds_strerror(rc));
        free(buf);
        return rc;
    }
    *out = buf;
    return 0;
}

int fsck_rollback_collect(struct storage *st, const struct damage_list *damage,
                          struct storage_fsck_report *report, struct fsck_rollback **out)
{
    *out = NULL;
    struct data_model_state model;
    char why[DS_PATH_MAX + 64];
    int rc = data_model_read(st->dir, &model, why, sizeof(why));
    if (rc != 0) {
        ds_log_error("%s", why);
        return rc;
    }
    struct fsck_rollback *rb = NULL;
    if (model.recorded == STORAGE_MODEL_ORDERS) {
        rb = calloc(1, sizeof(*rb));
        if (rb == NULL) {
            return -ENOMEM;
        }
    }
    struct range_tally t = {0};
    uint64_t ranges = 0;
    uint8_t *scratch = NULL;
    size_t scratch_capacity = 0;
    for (uint32_t i = 0; rc == 0 && i < damage->count; i++) {
        const struct damage *d = &damage->v[i];
        if (!d->past_end) {
            continue;
        }
        uint8_t *buf = NULL;
        rc = range_read(st, d, &buf);
        if (rc == 0 && rb != NULL) {
            rb->day = d->day;
            rb->shard = d->shard;
        }
        if (rc == 0) {
            rc = range_walk(buf, d->length, (int64_t)d->day * DS_DAY_MS, &st->codec, rb, &t,
                            &scratch, &scratch_capacity);
            ranges++;
        }
        free(buf);
    }
    free(scratch);
    if (rc != 0) {
        fsck_rollback_destroy(rb);
        return rc;
    }
    report->blocks_rolled_back += t.blocks;
    report->events_rolled_back += t.events;
    report->events_unknown_ranges += t.unknown;
    report->rolled_back_ranges += ranges;
    if (rb != NULL && rb->count == 0) {
        fsck_rollback_destroy(rb);
        rb = NULL;
    }
    *out = rb;
    return 0;
}

/* ---- settle -------------------------------------------------------------------------------- */

static int id_compare(const struct ds_id *a, const struct ds_id *b)
{
    if (a->is_string != b->is_string) {
        return a->is_string ? 1 : -1;
    }
    if (!a->is_string) {
        return a->value < b->value ? -1 : (a->value > b->value ? 1 : 0);
    }
    int c = memcmp(a->text, b->text, a->len < b->len ? a->len : b->len);
    return c != 0 ? c : (int)a->len - (int)b->len;
}

static int row_compare(const void *x, const void *y)
{
    const struct rollback_row *a = x;
    const struct rollback_row *b = y;
    int c = id_compare(&a->id, &b->id);
    return c != 0 ? c : (a->seq < b->seq ? -1 : (a->seq > b->seq ? 1 : 0));
}

/* Sorts the rows by order and keeps the newest of each order. */
static void rows_reduce(struct fsck_rollback *rb)
{
    qsort(rb->rows, rb->count, sizeof(*rb->rows), row_compare);
    size_t kept = 0;
    for (size_t i = 0; i < rb->count; i++) {
        const struct rollback_row *r = &rb->rows[i];
        struct rollback_row *best = kept > 0 ? &rb->rows[kept - 1] : NULL;
        if (best == NULL || !ds_id_equal(&best->id, &r->id)) {
            rb->rows[kept++] = *r;
        } else if (!(best->has_version && r->has_version && best->version > r->version)) {
            *best = *r; /* a later row, or a greater version */
        }
    }
    rb->count = kept;
}

static void record_line(FILE *f, const struct rollback_row *r, const struct storage_order *now)
{
    fputs("{\"order\":", f);
    fsck_json_id(f, &r->id);
    fprintf(f, ",\"outcome\":\"%s\",\"rolled_back\":true", now != NULL ? "reverted" : "lost");
    fsck_json_version(f, "had", r->day, r->shard, r->has_version, r->version, r->ts_ms, r->status,
                      r->status_len);
    fputc('}', f);
    if (now == NULL) {
        fputs(",\"now\":null}\n", f);
        return;
    }
    fsck_json_version(f, "now", now->day, now->shard, now->has_version, now->version, now->ts_ms,
                      now->status, now->status_len);
    fputs("}}\n", f);
}

/* Whether the store's version is the rolled-back row itself (nothing was rolled back then). */
static bool same_version(const struct rollback_row *r, const struct storage_order *now)
{
    return r->has_version == now->has_version && r->version == now->version &&
           r->ts_ms == now->ts_ms && r->day == now->day && r->shard == now->shard &&
           r->status_len == now->status_len && memcmp(r->status, now->status, r->status_len) == 0;
}

/* Looks each order up and writes the record to f; tallies into reverted and lost. */
static int orders_settle(struct fsck_rollback *rb, struct storage *reader, FILE *f,
                         uint64_t *reverted, uint64_t *lost)
{
    uint8_t *scratch = malloc(STORAGE_ORDER_SCRATCH_BYTES);
    if (scratch == NULL) {
        return -ENOMEM;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < rb->count; i++) {
        const struct rollback_row *r = &rb->rows[i];
        struct storage_order now;
        rc = storage_order_get(reader, &r->id, &now, scratch, STORAGE_ORDER_SCRATCH_BYTES);
        if (rc == -ENOENT) {
            rc = 0;
            (*lost)++;
            record_line(f, r, NULL);
        } else if (rc == 0 && !same_version(r, &now)) {
            (*reverted)++;
            record_line(f, r, &now);
        }
    }
    free(scratch);
    return rc;
}

int fsck_rollback_settle(struct fsck_rollback *rb, const char *dir, FILE *out,
                         struct storage_fsck_report *report)
{
    if (rb == NULL) {
        return 0;
    }
    rows_reduce(rb);
    int rc = quarantine_prepare(dir);
    char path[DS_PATH_MAX];
    char tmp[DS_PATH_MAX + 8];
    int n = snprintf(path, sizeof(path), "%s/quarantine/%lld.rollback.orders.jsonl", dir,
                     (long long)ds_clock_realtime_ms());
    if (rc == 0 && (n < 0 || n >= DS_PATH_MAX - 4)) {
        rc = -ENAMETOOLONG;
    }
    if (rc != 0) {
        return rc;
    }
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    struct storage *reader = NULL;
    rc = storage_open_reader(dir, &reader);
    FILE *f = rc == 0 ? fopen(tmp, "we") : NULL;
    if (rc == 0 && f == NULL) {
        rc = -errno;
    }
    uint64_t reverted = 0;
    uint64_t lost = 0;
    rc = rc == 0 ? orders_settle(rb, reader, f, &reverted, &lost) : rc;
    storage_close(reader);
    if (f != NULL) {
        if (rc == 0 && (fflush(f) != 0 || fsync(fileno(f)) != 0)) {
            rc = -errno;
        }
        if (fclose(f) != 0 && rc == 0) {
            rc = -errno;
        }
        if (rc == 0 && reverted + lost == 0) {
            (void)unlink(tmp); /* nothing to name */
            return 0;
        }
        rc = rc == 0 && rename(tmp, path) != 0 ? -errno : rc;
        char qdir[DS_PATH_MAX];
        snprintf(qdir, sizeof(qdir), "%s/quarantine", dir);
        rc = rc == 0 ? ds_fsync_dir(qdir) : rc;
        if (rc != 0) {
            (void)unlink(tmp);
        }
    }
    if (rc != 0) {
        ds_log_error("%s: cannot settle the rolled-back orders: %s", dir, ds_strerror(rc));
        return rc;
    }
    report->orders_reverted += reverted;
    report->orders_lost += lost;
    if (out != NULL) {
        fprintf(out,
                "%s: the rolled-back commits held %llu orders now reverted to an older version "
                "and %llu now lost; listed in %s\n",
                dir, (unsigned long long)reverted, (unsigned long long)lost, path);
    }
    return 0;
}

void fsck_rollback_destroy(struct fsck_rollback *rb)
{
    if (rb == NULL) {
        return;
    }
    free(rb->rows);
    free(rb);
}
