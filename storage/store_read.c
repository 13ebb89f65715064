/*
 * The read side of the engine: walking block headers up to a partition's committed end,
 * per-partition summaries built from them, totals for counts, and full event scans.
 *
 * Reads use the synchronous ops of st->io (open, size, read, close) on their own descriptors,
 * never queued ones, so the same code serves the writer's in-process queries (through the
 * writer's backend, the fake included) and a read-only process next to a live writer (through
 * a sync backend of its own). Only committed ranges are read, and a committed range never
 * changes, so a reader needs no lock.
 *
 * Layering (store_read.h): this side calls only the bottom layer (store.h) and the codecs,
 * never the write side; the facade calls it.
 *
 * Rejected: persisting summaries in a separate file. Rebuilding one partition's summary reads
 * one header per block (a few hundred bytes per thousands of events), cheaper than keeping a
 * second structure crash-consistent with the segments.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/store_read.h"

#define FIRST_READ_BYTES 512u

/* The range of a segment that is committed: [64, end). */
static int segment_open_read(struct storage *st, const struct part *p, uint32_t segment_id,
                             int *fd_out, uint64_t *end_out)
{
    char path[DS_PATH_MAX];
    store_segment_path(st, p, segment_id, path);
    int fd = st->io->ops->open(st->io, path, O_RDONLY, 0);
    if (fd < 0) {
        ds_log_error("%s: cannot open: %s", path, ds_strerror(fd));
        return fd;
    }
    uint64_t size = 0;
    struct segment_header h;
    int rc = st->io->ops->size(st->io, fd, &size);
    if (rc == 0 && st->io->ops->read(st->io, fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
        rc = -DS_ECORRUPT;
    }
    if (rc == 0 &&
        (h.magic != SEGMENT_MAGIC || h.version != SEGMENT_VERSION || h.day != p->day ||
         h.shard != p->shard || h.segment_id != segment_id ||
         h.header_crc != ds_crc32c(0, &h, offsetof(struct segment_header, header_crc)))) {
        rc = -DS_ECORRUPT;
    }
    uint64_t end = segment_id == p->segment_id ? p->committed_end : size;
    if (rc == 0 && size < end) {
        rc = -DS_ECORRUPT;
    }
    if (rc != 0) {
        ds_log_error("%s: bad segment: %s", path, ds_strerror(rc));
        st->io->ops->close(st->io, fd);
        return rc;
    }
    *fd_out = fd;
    *end_out = end;
    return 0;
}

/* Reads the header of the block at offset into buf (BLOCK_HEADER_BYTES_MAX bytes). */
static int read_block_header(struct storage_io *io, int fd, uint64_t offset, uint64_t end,
                             uint8_t *buf, struct block_view *view)
{
    size_t want = FIRST_READ_BYTES;
    if (end - offset < want) {
        want = (size_t)(end - offset);
    }
    ssize_t n = io->ops->read(io, fd, buf, want, offset);
    if (n < 0) {
        return (int)n;
    }
    int rc = block_header_check(buf, (size_t)n);
    if (rc != 0) {
        return rc;
    }
    const struct block_header *h = (const struct block_header *)(const void *)buf;
    if (h->header_bytes > (size_t)n) {
        if (offset + h->header_bytes > end) {
            return -DS_ECORRUPT;
        }
        n = io->ops->read(io, fd, buf + n, h->header_bytes - (size_t)n, offset + (uint64_t)n);
        if (n < 0) {
            return (int)n;
        }
    }
    rc = block_view_parse(buf, h->header_bytes, view);
    if (rc == 0 && offset + h->header_bytes + h->payload_bytes > end) {
        rc = -DS_ECORRUPT;
    }
    return rc;
}

typedef int (*header_fn)(const struct block_view *view, uint64_t block_bytes, void *user);

/* Visits block headers of p from (*segment_id, *offset) to the committed end, advancing both;
 * (0, 0) means from the start. */
static int visit_headers(struct storage *st, const struct part *p, uint32_t *segment_id,
                         uint64_t *offset, header_fn fn, void *user)
{
    if (p->segment_id == 0) {
        return 0;
    }
    if (*segment_id == 0) {
        *segment_id = 1;
        *offset = sizeof(struct segment_header);
    }
    if (*segment_id == p->segment_id && *offset >= p->committed_end) {
        return 0; /* nothing committed since the last visit: no file to open */
    }
    uint8_t *buf = malloc(BLOCK_HEADER_BYTES_MAX);
    if (buf == NULL) {
        return -ENOMEM;
    }
    int rc = 0;
    while (rc == 0 && *segment_id <= p->segment_id) {
        int fd = -1;
        uint64_t end = 0;
        rc = segment_open_read(st, p, *segment_id, &fd, &end);
        while (rc == 0 && *offset < end) {
            struct block_view view;
            rc = read_block_header(st->io, fd, *offset, end, buf, &view);
            if (rc == 0) {
                uint64_t bytes = (uint64_t)view.header->header_bytes + view.header->payload_bytes;
                rc = fn(&view, bytes, user);
                *offset += rc == 0 ? bytes : 0;
            }
        }
        if (fd >= 0) {
            st->io->ops->close(st->io, fd);
        }
        if (rc == 0 && *segment_id == p->segment_id) {
            break;
        }
        if (rc == 0) {
            (*segment_id)++;
            *offset = sizeof(struct segment_header);
        }
    }
    free(buf);
    return rc;
}

/* ---- summaries ----------------------------------------------------------------------------- */

static int summary_row(struct summary *s, const char *status, uint8_t len)
{
    for (uint16_t i = 0; i < s->status_count; i++) {
        if (s->status_len[i] == len && memcmp(s->status[i], status, len) == 0) {
            return i;
        }
    }
    if (s->status_count == STORAGE_SUMMARY_STATUS_MAX) {
        s->overflow = true;
        return STORAGE_SUMMARY_STATUS_MAX;
    }
    uint16_t row = s->status_count++;
    s->status_len[row] = len;
    memcpy(s->status[row], status, len);
    return row;
}

static int summary_fold(const struct block_view *view, uint64_t block_bytes, void *user)
{
    struct summary *s = user;
    const struct block_header *h = view->header;
    int rows[STORAGE_BLOCK_STATUS_MAX];
    for (uint16_t i = 0; i < h->status_count; i++) {
        rows[i] = summary_row(s, view->status[i], view->status_len[i]);
    }
    for (uint16_t i = 0; i < h->cell_count; i++) {
        const struct block_cell *cell = &view->cells[i];
        struct storage_hour_total *t = &s->hours[rows[cell->status_index]][cell->hour];
        ds_i128 amount = block_cell_amount(cell);
        t->count += cell->count;
        t->amount_units += amount;
        s->all[cell->hour].count += cell->count;
        s->all[cell->hour].amount_units += amount;
        s->amount_units += amount;
    }
    if (s->count == 0 || h->ts_min_ms < s->ts_min_ms) {
        s->ts_min_ms = h->ts_min_ms;
    }
    if (s->count == 0 || h->ts_max_ms > s->ts_max_ms) {
        s->ts_max_ms = h->ts_max_ms;
    }
    s->count += h->event_count;
    s->blocks++;
    s->bytes += block_bytes;
    return 0;
}

int store_read_summary_extend(struct storage *st, struct part *p)
{
    if (p->summary == NULL) {
        p->summary = calloc(1, sizeof(*p->summary));
        if (p->summary == NULL) {
            return -ENOMEM;
        }
    }
    struct summary *s = p->summary;
    int rc = visit_headers(st, p, &s->segment_id, &s->end, summary_fold, s);
    if (rc != 0) {
        ds_log_error("partition %d/%u: cannot read block headers: %s", p->day, p->shard,
                     ds_strerror(rc));
        free(p->summary);
        p->summary = NULL;
    }
    return rc;
}

/* ---- totals -------------------------------------------------------------------------------- */

static void add_row(struct storage_partition_total *out, const struct storage_hour_total *row)
{
    for (int h = 0; h < 24; h++) {
        out->hours[h].count += row[h].count;
        out->hours[h].amount_units += row[h].amount_units;
        out->count += row[h].count;
        out->amount_units += row[h].amount_units;
    }
}

struct status_filter {
    const char *status;
    size_t len;
    struct storage_partition_total *out;
};

static int filter_fold(const struct block_view *view, uint64_t block_bytes, void *user)
{
    (void)block_bytes;
    struct status_filter *f = user;
    for (uint16_t i = 0; i < view->header->cell_count; i++) {
        const struct block_cell *cell = &view->cells[i];
        uint8_t idx = cell->status_index;
        if (view->status_len[idx] == f->len && memcmp(view->status[idx], f->status, f->len) == 0) {
            f->out->hours[cell->hour].count += cell->count;
            f->out->hours[cell->hour].amount_units += block_cell_amount(cell);
            f->out->count += cell->count;
            f->out->amount_units += block_cell_amount(cell);
        }
    }
    return 0;
}

int store_read_totals(struct storage *st, struct part *p, const char *status, size_t status_len,
                      struct storage_partition_total *out)
{
    ASSERT(p->segment_id != 0);
    ASSERT(out->count == 0);
    int rc = store_read_summary_extend(st, p);
    if (rc != 0) {
        return rc;
    }
    const struct summary *s = p->summary;
    out->blocks = s->blocks;
    out->bytes = s->bytes;
    out->ts_min_ms = s->ts_min_ms;
    out->ts_max_ms = s->ts_max_ms;
    if (status == NULL) {
        memcpy(out->hours, s->all, sizeof(out->hours));
        out->count = s->count;
        out->amount_units = s->amount_units;
        return 0;
    }
    for (uint16_t i = 0; i < s->status_count; i++) {
        if (s->status_len[i] == status_len && memcmp(s->status[i], status, status_len) == 0) {
            add_row(out, s->hours[i]);
            return 0;
        }
    }
    if (!s->overflow || status_len > DS_STATUS_BYTES_MAX) {
        return 0;
    }
    /* A rare status beyond the named ones: sum it from the block headers. */
    struct status_filter f = {.status = status, .len = status_len, .out = out};
    uint32_t segment_id = 0;
    uint64_t offset = 0;
    return visit_headers(st, p, &segment_id, &offset, filter_fold, &f);
}

/* ---- scans --------------------------------------------------------------------------------- */

struct scan_state {
    struct storage *st;
    const struct part *p;
    int fd;
    uint64_t offset;
    uint8_t *block;
    size_t block_capacity;
    storage_event_fn fn;
    void *user;
};

static int scan_event(const struct ds_event *event, void *user)
{
    struct scan_state *scan = user;
    return scan->fn(event, scan->user);
}

static int scan_block(struct scan_state *scan, uint64_t end)
{
    struct block_view view;
    struct storage_io *io = scan->st->io;
    int rc = read_block_header(io, scan->fd, scan->offset, end, scan->block, &view);
    if (rc != 0) {
        return rc;
    }
    size_t header_bytes = view.header->header_bytes;
    size_t total = header_bytes + view.header->payload_bytes;
    if (total > scan->block_capacity) {
        uint8_t *grown = malloc(total);
        if (grown == NULL) {
            return -ENOMEM;
        }
        memcpy(grown, scan->block, header_bytes);
        free(scan->block);
        scan->block = grown;
        scan->block_capacity = total;
        rc = block_view_parse(scan->block, header_bytes, &view);
        ASSERT(rc == 0);
    }
    ssize_t n = io->ops->read(io, scan->fd, scan->block + header_bytes, view.header->payload_bytes,
                              scan->offset + header_bytes);
    if (n != (ssize_t)view.header->payload_bytes) {
        return n < 0 ? (int)n : -DS_ECORRUPT;
    }
    rc = block_decode(&scan->st->codec, &view, scan->block + header_bytes, scan->p->day_start_ms,
                      scan_event, scan);
    scan->offset += total;
    return rc;
}

int store_read_scan_from(struct storage *st, const struct part *p, struct storage_position *pos,
                         storage_event_fn fn, void *user)
{
    ASSERT(p->segment_id != 0);
    if (pos->segment_id == 0) {
        *pos = (struct storage_position){.segment_id = 1, .offset = sizeof(struct segment_header)};
    }
    if (pos->segment_id > p->segment_id ||
        (pos->segment_id == p->segment_id && pos->offset > p->committed_end) ||
        pos->offset < sizeof(struct segment_header)) {
        return -ERANGE;
    }
    if (pos->segment_id == p->segment_id && pos->offset == p->committed_end) {
        return 0; /* nothing new: no file to open */
    }
    struct scan_state scan = {.st = st, .p = p, .fn = fn, .user = user};
    scan.block_capacity = BLOCK_HEADER_BYTES_MAX;
    scan.block = malloc(scan.block_capacity);
    if (scan.block == NULL) {
        return -ENOMEM;
    }
    int rc = 0;
    for (uint32_t id = pos->segment_id; rc == 0 && id <= p->segment_id; id++) {
        uint64_t end = 0;
        scan.fd = -1;
        rc = segment_open_read(st, p, id, &scan.fd, &end);
        scan.offset = id == pos->segment_id ? pos->offset : sizeof(struct segment_header);
        if (rc == 0 && scan.offset > end) {
            rc = -ERANGE;
        }
        while (rc == 0 && scan.offset < end) {
            rc = scan_block(&scan, end);
            if (rc == 0) {
                *pos = (struct storage_position){.segment_id = id, .offset = scan.offset};
            }
        }
        if (scan.fd >= 0) {
            st->io->ops->close(st->io, scan.fd);
        }
        if (rc == 0 && id < p->segment_id) {
            *pos = (struct storage_position){.segment_id = id + 1,
                                             .offset = sizeof(struct segment_header)};
        }
    }
    free(scan.block);
    return rc;
}

/* ---- visiting ------------------------------------------------------------------------------ */

static int part_order(const void *a, const void *b)
{
    const struct part *pa = *(const struct part *const *)a;
    const struct part *pb = *(const struct part *const *)b;
    if (pa->day != pb->day) {
        return pa->day < pb->day ? -1 : 1;
    }
    return pa->shard < pb->shard ? -1 : (pa->shard > pb->shard ? 1 : 0);
}

int store_read_visit(struct storage *st, storage_partition_fn fn, void *user)
{
    struct part **sorted = malloc(((size_t)st->part_count + 1) * sizeof(*sorted));
    if (sorted == NULL) {
        return -ENOMEM;
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < st->part_count; i++) {
        if (st->parts[i]->segment_id != 0) {
            sorted[n++] = st->parts[i];
        }
    }
    qsort(sorted, n, sizeof(*sorted), part_order);
    int rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        rc = fn(sorted[i]->day, sorted[i]->shard, user);
    }
    free(sorted);
    return rc;
}

/* ---- verification (fsck) ------------------------------------------------------------------- */

struct verify_state {
    uint64_t events;
};

static int verify_count(const struct ds_event *event, void *user)
{
    (void)event;
    struct verify_state *v = user;
    v->events++;
    return 0;
}

/* Verifies every committed block of p: headers, payload CRC, decompression, and the events
 * re-aggregating to the header. Counts into report; prints one line per problem. A bad block
 * ends the check of its segment (the next block boundary is unknown). */
int store_read_verify_partition(struct storage *st, const struct part *p,
                                struct storage_fsck_report *report, FILE *out)
{
    struct scan_state scan = {.st = st, .p = p, .fn = verify_count};
    struct verify_state v = {0};
    scan.user = &v;
    scan.block_capacity = BLOCK_HEADER_BYTES_MAX;
    scan.block = malloc(scan.block_capacity);
    if (scan.block == NULL) {
        return -ENOMEM;
    }
    char path[DS_PATH_MAX];
    for (uint32_t id = 1; id <= p->segment_id; id++) {
        uint64_t end = 0;
        store_segment_path(st, p, id, path);
        report->segments++;
        int rc = segment_open_read(st, p, id, &scan.fd, &end);
        if (rc != 0) {
            report->blocks_bad++;
            if (out != NULL) {
                fprintf(out, "%s: bad or missing segment: %s\n", path, ds_strerror(rc));
            }
            continue;
        }
        scan.offset = sizeof(struct segment_header);
        while (scan.offset < end) {
            uint64_t at = scan.offset;
            uint64_t before = v.events;
            rc = scan_block(&scan, end);
            if (rc != 0) {
                report->blocks_bad++;
                if (out != NULL) {
                    fprintf(out, "%s: block at byte %llu: %s\n", path, (unsigned long long)at,
                            ds_strerror(rc));
                }
                break;
            }
            report->blocks_ok++;
            report->events_ok += v.events - before;
            report->bytes_ok += scan.offset - at;
        }
        uint64_t size = 0;
        if (id == p->segment_id && st->io->ops->size(st->io, scan.fd, &size) == 0 && size > end) {
            report->torn_bytes += size - end;
            if (out != NULL) {
                fprintf(out, "%s: %llu bytes past the committed end %llu (torn or uncommitted)\n",
                        path, (unsigned long long)(size - end), (unsigned long long)end);
            }
        }
        st->io->ops->close(st->io, scan.fd);
    }
    free(scan.block);
    return 0;
}
