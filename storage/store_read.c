/*
 * The read side of the engine: walking block headers up to a partition's committed end,
 * per-partition summaries built from them, totals for counts, a reader's day totals (the sums
 * of a day's summaries: each summary is taken out of them while it is extended and put back
 * after, and a day's stale partitions are extended on its next count), and full event scans.
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
 * Damage: one walker (walk_one) examines the block at an offset for every user. A block whose
 * header passes its CRC but whose payload does not is "damaged, events known" (the header's
 * aggregates stay in totals, CRC-verified); a header that fails is "damaged, events unknown",
 * and the walk resynchronises at the next offset where a block header passes its CRC (or at
 * the committed end). Summaries check each payload's CRC once per handle, so a count says how
 * many damaged blocks it touched (damaged_blocks) instead of failing or answering silently;
 * fsck decodes every block and collects the damage for --repair. Ranges a repair quarantined
 * (manifest skip entries) are passed over by every walk and scan.
 *
 * Rejected for damage in counts: a file in DIR where fsck records the damage it found, read
 * by readers. A count before any fsck would be silent; checking the payload CRCs while the
 * summary is built costs one sequential read of committed bytes per handle (measured: about
 * 0.3 ms per MB of blocks with a warm page cache, docs/PERFORMANCE.md "Counts"), incremental after
 * that.
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
#include <sys/stat.h>

#include "storage/store_read.h"

#define FIRST_READ_BYTES 512u
/* Bytes read per step while looking for the next valid block header after a damaged one. */
#define RESYNC_CHUNK_BYTES (256u * 1024u)

static int check_segment_header(const struct segment_header *h, int32_t day, uint32_t shard,
                                uint32_t segment_id)
{
    bool ok = h->magic == SEGMENT_MAGIC && h->version == SEGMENT_VERSION && h->day == day &&
              h->shard == shard && h->segment_id == segment_id &&
              h->header_crc == ds_crc32c(0, h, offsetof(struct segment_header, header_crc));
    return ok ? 0 : -DS_ECORRUPT;
}

/* Whether a reader's MANIFEST was replaced or grew since it loaded it: a segment it misses may
 * then have been removed on purpose (a day retention dropped, segments a compaction replaced),
 * which is no damage. Only handles that storage_refresh loaded know their MANIFEST's inode. */
static bool manifest_moved(const struct storage *st)
{
    if (!st->read_only || st->manifest_ino == 0) {
        return false;
    }
    char path[DS_PATH_MAX];
    store_path(st, "MANIFEST", path);
    struct stat sb;
    return stat(path, &sb) != 0 || sb.st_ino != st->manifest_ino ||
           (uint64_t)sb.st_size != st->manifest_size;
}

/* The range of a segment that is committed: [64, end). */
static int segment_open_read(struct storage *st, const struct part *p, uint32_t segment_id,
                             int *fd_out, uint64_t *end_out)
{
    char path[DS_PATH_MAX];
    store_segment_path(st, p, segment_id, path);
    int fd = st->io->ops->open(st->io, path, O_RDONLY, 0);
    if (fd == -ENOENT && manifest_moved(st)) {
        ds_log_warn("%s: removed since this reader's last refresh", path);
        return -ESTALE;
    }
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
    if (rc == 0) {
        rc = check_segment_header(&h, p->day, p->shard, segment_id);
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

/* A segment opened for a walk that tolerates damage: what is wrong with it, and the range
 * [64, walk_end) that can be walked. */
struct seg_open {
    int fd; /* -1 when the file is missing */
    uint64_t size;
    uint64_t end;      /* committed end */
    uint64_t walk_end; /* min(end, size) */
    bool header_bad;
};

/* Damage (a missing file, a bad header, a short file) is described in *so; what is not damage
 * (a file that cannot be opened or read: EACCES, EIO, EMFILE, ...) is returned, logged. A
 * segment missing from a reader whose MANIFEST moved since is -ESTALE: refresh and ask again
 * (never a count without it). */
static int segment_open_tolerant(struct storage *st, const struct part *p, uint32_t segment_id,
                                 struct seg_open *so)
{
    char path[DS_PATH_MAX];
    store_segment_path(st, p, segment_id, path);
    memset(so, 0, sizeof(*so));
    so->end = segment_id == p->segment_id ? p->committed_end : 0;
    so->fd = st->io->ops->open(st->io, path, O_RDONLY, 0);
    if (so->fd == -ENOENT) {
        so->fd = -1;
        if (manifest_moved(st)) {
            ds_log_warn("%s: removed since this reader's last refresh", path);
            return -ESTALE;
        }
        return 0;
    }
    int rc = so->fd < 0 ? so->fd : st->io->ops->size(st->io, so->fd, &so->size);
    struct segment_header h;
    ssize_t n = rc == 0 ? st->io->ops->read(st->io, so->fd, &h, sizeof(h), 0) : 0;
    rc = n < 0 ? (int)n : rc;
    if (rc != 0) {
        ds_log_error("%s: cannot read: %s", path, ds_strerror(rc));
        if (so->fd >= 0) {
            st->io->ops->close(st->io, so->fd);
        }
        so->fd = -1;
        return rc;
    }
    if (segment_id != p->segment_id) {
        so->end = so->size;
    }
    so->walk_end = so->size < so->end ? so->size : so->end;
    so->header_bad =
        n != (ssize_t)sizeof(h) || check_segment_header(&h, p->day, p->shard, segment_id) != 0;
    return 0;
}

/* Reads the header of the block at offset into buf (BLOCK_HEADER_BYTES_MAX bytes). *cut is set
 * when the header itself is intact but the block runs past end. */
static int read_block_header(struct storage_io *io, int fd, uint64_t offset, uint64_t end,
                             uint8_t *buf, struct block_view *view, bool *cut)
{
    *cut = false;
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
        *cut = true;
        rc = -DS_ECORRUPT;
    }
    return rc;
}

/* The next offset in (from, limit) where a whole block (header passing its CRC, block inside
 * limit) starts, else limit. buf is BLOCK_HEADER_BYTES_MAX scratch. */
static int resync(struct storage_io *io, int fd, uint64_t from, uint64_t limit, uint8_t *buf,
                  uint64_t *next)
{
    static const uint8_t magic[4] = {'D', 'S', 'B', 'K'};
    static_assert(BLOCK_MAGIC == 0x4B425344u, "the magic's bytes on disk");
    uint8_t *chunk = malloc(RESYNC_CHUNK_BYTES);
    if (chunk == NULL) {
        return -ENOMEM;
    }
    int rc = 0;
    *next = limit;
    for (uint64_t at = from + 1; at + sizeof(struct block_header) <= limit && rc == 0;) {
        size_t want = limit - at < RESYNC_CHUNK_BYTES ? (size_t)(limit - at) : RESYNC_CHUNK_BYTES;
        ssize_t n = io->ops->read(io, fd, chunk, want, at);
        if (n < (ssize_t)sizeof(magic)) {
            rc = n < 0 ? (int)n : 0;
            break;
        }
        size_t i = 0;
        for (; i + sizeof(magic) <= (size_t)n; i++) {
            if (memcmp(chunk + i, magic, sizeof(magic)) != 0) {
                continue;
            }
            struct block_view view;
            bool cut = false;
            if (read_block_header(io, fd, at + i, limit, buf, &view, &cut) == 0) {
                *next = at + i;
                free(chunk);
                return 0;
            }
        }
        at += i; /* the last 3 bytes are looked at again with the next chunk */
    }
    free(chunk);
    return rc;
}

/* ---- the walker: what one offset of a segment holds ---------------------------------------- */

enum walk_check {
    WALK_HEADERS = 0, /* headers only */
    WALK_PAYLOAD_CRC, /* and each payload's CRC */
    WALK_DECODE,      /* and decompression, events re-aggregated against the header */
};

struct walker {
    struct storage *st;
    int fd;
    enum walk_check check;
    int64_t day_start_ms;
    uint8_t *buf; /* header, then payload */
    size_t capacity;
};

/* One block, or one damaged range, of a walk. */
struct walked {
    uint64_t offset;
    uint64_t bytes;
    const struct block_view *view; /* NULL when the block header is unreadable */
    bool damaged;
    const char *reason; /* when damaged */
};

static int walker_init(struct walker *k, struct storage *st, enum walk_check check,
                       int64_t day_start_ms)
{
    *k = (struct walker){.st = st, .fd = -1, .check = check, .day_start_ms = day_start_ms};
    k->capacity = BLOCK_HEADER_BYTES_MAX;
    k->buf = malloc(k->capacity);
    return k->buf != NULL ? 0 : -ENOMEM;
}

static int count_nothing(const struct ds_event *event, const struct ds_source *source, void *user)
{
    (void)event;
    (void)source;
    (void)user;
    return 0;
}

/* Reads and checks the payload of the block in view (header in k->buf); NULL reason when it
 * passes. The view is parsed again when the buffer grows. */
static int walk_payload(struct walker *k, uint64_t offset, struct block_view *view,
                        const char **reason)
{
    size_t header_bytes = view->header->header_bytes;
    size_t total = header_bytes + view->header->payload_bytes;
    struct storage_io *io = k->st->io;
    if (total > k->capacity) {
        uint8_t *grown = realloc(k->buf, total);
        if (grown == NULL) {
            return -ENOMEM;
        }
        k->buf = grown;
        k->capacity = total;
        int rc = block_view_parse(k->buf, header_bytes, view);
        ASSERT(rc == 0);
    }
    uint32_t payload_bytes = view->header->payload_bytes;
    ssize_t n =
        io->ops->read(io, k->fd, k->buf + header_bytes, payload_bytes, offset + header_bytes);
    if (n < 0) {
        return (int)n;
    }
    *reason = NULL;
    if (n != (ssize_t)payload_bytes) {
        *reason = "payload cut short";
    } else if (ds_crc32c(0, k->buf + header_bytes, payload_bytes) != view->header->payload_crc) {
        *reason = "payload checksum mismatch";
    } else if (k->check == WALK_DECODE && block_decode(&k->st->codec, view, k->buf + header_bytes,
                                                       k->day_start_ms, count_nothing, NULL) != 0) {
        *reason = "payload does not decode to the header's aggregates";
    }
    return 0;
}

/* Examines [offset, limit): the block there, or the damaged range up to the next valid block
 * header (never past limit, which a caller sets at the next quarantined range). Returns 0 with
 * *w filled, or an I/O error. */
static int walk_one(struct walker *k, uint64_t offset, uint64_t limit, struct block_view *view,
                    struct walked *w)
{
    ASSERT(offset < limit);
    *w = (struct walked){.offset = offset};
    bool cut = false;
    int rc = read_block_header(k->st->io, k->fd, offset, limit, k->buf, view, &cut);
    if (rc == -DS_ECORRUPT && !cut) {
        uint64_t next = limit;
        rc = resync(k->st->io, k->fd, offset, limit, k->buf, &next);
        w->bytes = next - offset;
        w->damaged = true;
        w->reason = "block header unreadable";
        return rc;
    }
    if (rc == -DS_ECORRUPT) {
        w->bytes = limit - offset;
        w->view = view;
        w->damaged = true;
        w->reason = "block runs past the committed end";
        return 0;
    }
    if (rc != 0) {
        return rc;
    }
    w->view = view;
    w->bytes = (uint64_t)view->header->header_bytes + view->header->payload_bytes;
    if (k->check == WALK_HEADERS) {
        return 0;
    }
    rc = walk_payload(k, offset, view, &w->reason);
    w->damaged = rc == 0 && w->reason != NULL;
    return rc;
}

typedef int (*walk_fn)(const struct walked *w, void *user);

/* Walks [*offset, end) of an open segment, passing over p's quarantined ranges (p may be NULL:
 * none), calling fn for each block or damaged range and advancing *offset past those fn
 * accepted. */
static int walk_segment(struct walker *k, const struct part *p, uint32_t segment_id,
                        uint64_t *offset, uint64_t end, walk_fn fn, void *user)
{
    while (*offset < end) {
        const struct manifest_skip *skip =
            p != NULL ? store_skip_from(p, segment_id, *offset) : NULL;
        if (skip != NULL && skip->offset == *offset) {
            *offset += skip->length;
            continue;
        }
        uint64_t limit = skip != NULL && skip->offset < end ? skip->offset : end;
        struct block_view view;
        struct walked w;
        int rc = walk_one(k, *offset, limit, &view, &w);
        if (rc == 0) {
            rc = fn(&w, user);
        }
        if (rc != 0) {
            return rc;
        }
        *offset += w.bytes;
    }
    return 0;
}

/* ---- header visits (summaries, rare-status totals) ----------------------------------------- */

typedef int (*header_fn)(const struct block_view *view, uint64_t block_bytes, void *user);

struct header_visit {
    header_fn fn;
    void *user;
    uint64_t *damaged;    /* damaged blocks and ranges passed */
    uint64_t damaged_end; /* where the last damaged one ended, in the current segment */
};

static int header_visit_one(const struct walked *w, void *user)
{
    struct header_visit *hv = user;
    if (w->damaged) {
        (*hv->damaged)++;
        hv->damaged_end = w->offset + w->bytes;
    }
    /* A block whose header is intact keeps its (CRC-verified) aggregates in the totals. */
    return w->view != NULL ? hv->fn(w->view, w->bytes, hv->user) : 0;
}

/* Visits block headers of p from (*segment_id, *offset) to the committed end, advancing both;
 * (0, 0) means from the start. Damage is counted into *damaged, never fatal: a segment that
 * cannot be opened or whose header is bad counts once and is passed over. */
static int visit_headers(struct storage *st, const struct part *p, enum walk_check check,
                         uint32_t *segment_id, uint64_t *offset, header_fn fn, void *user,
                         uint64_t *damaged)
{
    if (p->segment_id == 0) {
        return 0;
    }
    if (*segment_id < store_part_first(p)) {
        *segment_id = store_part_first(p); /* the start, or a position a compaction replaced */
        *offset = sizeof(struct segment_header);
    }
    if (*segment_id == p->segment_id && *offset >= p->committed_end) {
        return 0; /* nothing committed since the last visit: no file to open */
    }
    struct walker k;
    int rc = walker_init(&k, st, check, p->day_start_ms);
    struct header_visit hv = {.fn = fn, .user = user, .damaged = damaged};
    while (rc == 0 && *segment_id <= p->segment_id) {
        struct seg_open so;
        rc = segment_open_tolerant(st, p, *segment_id, &so);
        k.fd = so.fd;
        if (rc != 0) {
            break;
        }
        if (so.fd < 0 || so.header_bad) {
            (*damaged)++;
            *offset = so.end > *offset ? so.end : *offset;
        } else {
            hv.damaged_end = 0;
            rc = walk_segment(&k, p, *segment_id, offset, so.walk_end, header_visit_one, &hv);
            if (rc == 0 && *offset < so.end) {
                /* The file is shorter than its committed end: one more damaged range, unless
                 * it is the tail of the block the walk just found cut short. */
                *damaged += hv.damaged_end == so.walk_end ? 0 : 1;
                *offset = so.end;
            }
        }
        if (so.fd >= 0) {
            st->io->ops->close(st->io, so.fd);
        }
        if (rc == 0 && *segment_id == p->segment_id) {
            break;
        }
        if (rc == 0) {
            (*segment_id)++;
            *offset = sizeof(struct segment_header);
        }
    }
    free(k.buf);
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
        return -1;
    }
    if (s->status_count == s->rows_capacity) {
        uint16_t capacity = s->rows_capacity == 0 ? 4u : (uint16_t)(s->rows_capacity * 2u);
        capacity = capacity > STORAGE_SUMMARY_STATUS_MAX ? STORAGE_SUMMARY_STATUS_MAX : capacity;
        struct storage_hour_total(*grown)[24] = realloc(s->hours, capacity * sizeof(*grown));
        if (grown == NULL) {
            return -ENOMEM;
        }
        memset(grown + s->rows_capacity, 0, (capacity - s->rows_capacity) * sizeof(*grown));
        s->hours = grown;
        s->rows_capacity = capacity;
    }
    uint16_t row = s->status_count++;
    s->status_len[row] = len;
    memcpy(s->status[row], status, len);
    return row;
}

/* Adds a block's signed cells to the summary, whose counts are net (inserts - retractions).
 * A retraction always follows the row it cancels in its partition's append order, so every
 * prefix of a consistent partition is non-negative in each (status, hour): a block taking one
 * below zero is -DS_ECORRUPT here, once, and totals hand out the counts without checks. */
static int summary_fold(const struct block_view *view, uint64_t block_bytes, void *user)
{
    struct summary *s = user;
    const struct block_header *h = view->header;
    int rows[STORAGE_BLOCK_STATUS_MAX];
    for (uint16_t i = 0; i < h->status_count; i++) {
        rows[i] = summary_row(s, view->status[i], view->status_len[i]);
        if (rows[i] == -ENOMEM) {
            return -ENOMEM;
        }
    }
    int64_t net = 0;
    bool negative = false;
    for (uint16_t i = 0; i < h->cell_count; i++) {
        const struct block_cell *cell = &view->cells[i];
        int row = rows[cell->status_index];
        ds_i128 amount = block_cell_amount(cell);
        if (row >= 0) {
            struct storage_hour_total *t = &s->hours[row][cell->hour];
            t->count += cell->count;
            t->amount_units += amount;
            negative = negative || t->count < 0;
        }
        s->all[cell->hour].count += cell->count;
        s->all[cell->hour].amount_units += amount;
        s->amount_units += amount;
        net += cell->count;
        negative = negative || s->all[cell->hour].count < 0;
    }
    if (negative) {
        /* store_read_summary_extend names the partition */
        ds_log_error("a block holds more retractions than rows they cancel");
        return -DS_ECORRUPT;
    }
    if (s->blocks == 0 || h->ts_min_ms < s->ts_min_ms) {
        s->ts_min_ms = h->ts_min_ms;
    }
    if (s->blocks == 0 || h->ts_max_ms > s->ts_max_ms) {
        s->ts_max_ms = h->ts_max_ms;
    }
    s->count = (uint64_t)((int64_t)s->count + net); /* >= 0: the sum of the hours in s->all */
    s->rows += h->event_count;
    s->blocks++;
    s->bytes += block_bytes;
    return 0;
}

int store_read_summary_extend(struct storage *st, struct part *p)
{
    if (p->summary != NULL && p->folded && !store_summary_behind(p)) {
        return 0; /* nothing committed since: the common case of a count, no file opened */
    }
    if (p->summary == NULL) {
        p->summary = calloc(1, sizeof(*p->summary));
        if (p->summary == NULL) {
            return -ENOMEM;
        }
    }
    /* A reader's day totals hold the summary's sums: out while it changes, in again after. */
    store_day_unfold(p);
    struct summary *s = p->summary;
    if (s->segment_id != 0 && s->segment_id < store_part_first(p)) {
        store_summary_clear(s); /* it covers segments a compaction replaced: start again */
    }
    int rc = visit_headers(st, p, WALK_PAYLOAD_CRC, &s->segment_id, &s->end, summary_fold, s,
                           &s->damaged_blocks);
    if (rc != 0) {
        ds_log_error("partition %d/%u: cannot read block headers: %s", p->day, p->shard,
                     ds_strerror(rc));
        store_summary_free(p->summary);
        p->summary = NULL;
        return rc;
    }
    store_day_fold(p);
    return 0;
}

/* ---- a reader's day totals ----------------------------------------------------------------- */

static int stale_by_shard(const void *a, const void *b)
{
    uint32_t sa = (*(const struct part *const *)a)->shard;
    uint32_t sb = (*(const struct part *const *)b)->shard;
    return sa < sb ? -1 : (sa > sb ? 1 : 0);
}

/* Extends the summaries of the day's stale partitions, by ascending shard (so that a failure
 * is the one the per-partition fan-out meets first), folding each into the day's sums. A
 * partition that fails stays listed (its summary dropped) and the error is returned. */
static int day_bring_current(struct storage *st, struct day_totals *d)
{
    if (d->stale_count > 1) {
        qsort(d->stale, d->stale_count, sizeof(*d->stale), stale_by_shard);
    }
    uint32_t done = 0;
    int rc = 0;
    while (done < d->stale_count && rc == 0) {
        struct part *p = d->stale[done];
        ASSERT(p->stale && p->day_totals == d);
        rc = store_read_summary_extend(st, p);
        if (rc == 0) {
            p->stale = false;
            done++;
        }
    }
    memmove(d->stale, d->stale + done, (d->stale_count - done) * sizeof(*d->stale));
    d->stale_count -= done;
    return rc;
}

int store_read_day_totals(struct storage *st, struct day_totals *d, struct storage_day_total *out)
{
    ASSERT(st->read_only);
    int rc = d->stale_count > 0 ? day_bring_current(st, d) : 0;
    if (rc != 0) {
        return rc;
    }
    ASSERT(d->stale_count == 0);
    out->count = d->count;
    out->amount_units = d->amount_units;
    out->blocks = d->blocks;
    out->bytes = d->bytes;
    out->rows = d->rows;
    out->damaged_blocks = d->damaged_blocks;
    out->shard_end = d->shard_end;
    memcpy(out->hours, d->hours, sizeof(out->hours));
    return 0;
}

/* ---- totals -------------------------------------------------------------------------------- */

/* Sets out->count to the net of out's signed hours (summed from block headers for a status
 * the summary does not name), the non-negative total storage.h promises: a negative hour means
 * retractions whose rows are not in the partition (or were quarantined). */
static int totals_net(const struct part *p, struct storage_partition_total *out)
{
    int64_t net = 0;
    uint64_t signs = 0;
    for (int h = 0; h < 24; h++) {
        net += out->hours[h].count;
        signs |= (uint64_t)out->hours[h].count;
    }
    if ((signs >> 63) != 0) {
        ds_log_error("partition %d/%u: more retractions than rows they cancel (net count %lld)",
                     p->day, p->shard, (long long)net);
        return -DS_ECORRUPT;
    }
    out->count = (uint64_t)net;
    return 0;
}

static void add_row(struct storage_partition_total *out, const struct storage_hour_total *row)
{
    for (int h = 0; h < 24; h++) {
        out->hours[h].count += row[h].count;
        out->hours[h].amount_units += row[h].amount_units;
        out->count += (uint64_t)row[h].count; /* >= 0: summary_fold */
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
    out->rows = s->rows;
    out->ts_min_ms = s->ts_min_ms;
    out->ts_max_ms = s->ts_max_ms;
    out->damaged_blocks = s->damaged_blocks;
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
    uint64_t damaged = 0; /* already in out->damaged_blocks, from the summary */
    rc = visit_headers(st, p, WALK_HEADERS, &segment_id, &offset, filter_fold, &f, &damaged);
    return rc != 0 ? rc : totals_net(p, out);
}

/* ---- scans --------------------------------------------------------------------------------- */

struct scan_state {
    struct storage *st;
    const struct part *p;
    int fd;
    uint64_t offset;
    uint8_t *block;
    size_t block_capacity;
    store_block_want_fn want;
    storage_source_event_fn fn;
    void *user;
};

static int scan_block(struct scan_state *scan, uint64_t end)
{
    struct block_view view;
    struct storage_io *io = scan->st->io;
    bool cut = false;
    int rc = read_block_header(io, scan->fd, scan->offset, end, scan->block, &view, &cut);
    if (rc != 0) {
        return rc;
    }
    size_t header_bytes = view.header->header_bytes;
    size_t total = header_bytes + view.header->payload_bytes;
    if (scan->want != NULL && !scan->want(view.header, scan->user)) {
        scan->offset += total;
        return 0;
    }
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
                      scan->fn, scan->user);
    scan->offset += total;
    return rc;
}

int store_read_scan_from(struct storage *st, const struct part *p, struct storage_position *pos,
                         store_block_want_fn want, storage_source_event_fn fn, void *user)
{
    ASSERT(p->segment_id != 0);
    if (pos->segment_id < store_part_first(p)) {
        /* The start, or a position in segments a compaction replaced: their live rows are in
         * the rewrite, from its start (a follower applies them again, idempotently). */
        *pos = (struct storage_position){.segment_id = store_part_first(p),
                                         .offset = sizeof(struct segment_header)};
    }
    if (pos->segment_id > p->segment_id ||
        (pos->segment_id == p->segment_id && pos->offset > p->committed_end) ||
        pos->offset < sizeof(struct segment_header)) {
        return -ERANGE;
    }
    if (pos->segment_id == p->segment_id && pos->offset == p->committed_end) {
        return 0; /* nothing new: no file to open */
    }
    struct scan_state scan = {.st = st, .p = p, .want = want, .fn = fn, .user = user};
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
            const struct manifest_skip *skip = store_skip_from(p, id, scan.offset);
            if (skip != NULL && skip->offset == scan.offset) {
                scan.offset += skip->length; /* quarantined by a repair */
            } else {
                rc = scan_block(&scan, skip != NULL && skip->offset < end ? skip->offset : end);
            }
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

struct verify_walk {
    const struct part *p;
    uint32_t segment_id;
    const char *path;
    struct storage_fsck_report *report;
    struct damage_list *damage;
    FILE *out;
};

static int damage_add(struct damage_list *list, const struct damage *d)
{
    if (list == NULL) {
        return 0;
    }
    if (list->count == list->capacity) {
        if (list->capacity >= STORAGE_QUARANTINE_MAX) {
            list->overflow = true;
            return 0;
        }
        uint32_t capacity = list->capacity == 0 ? 16 : list->capacity * 2;
        struct damage *grown = realloc(list->v, capacity * sizeof(*grown));
        if (grown == NULL) {
            return -ENOMEM;
        }
        list->v = grown;
        list->capacity = capacity;
    }
    list->v[list->count++] = *d;
    return 0;
}

/* A damage entry for a range of p's segment, with what the block header says when readable. */
static void damage_describe(struct damage *d, const struct part *p, uint32_t segment_id,
                            const struct walked *w)
{
    *d = (struct damage){.day = p->day,
                         .shard = p->shard,
                         .segment_id = segment_id,
                         .offset = w->offset,
                         .length = w->bytes,
                         .source_partition = BLOCK_SOURCE_NONE,
                         .reason = w->reason};
    if (w->view != NULL) {
        const struct block_header *h = w->view->header;
        d->events_known = true;
        d->events = h->event_count;
        d->blocks = 1;
        d->block_length = (uint64_t)h->header_bytes + h->payload_bytes;
        d->source_partition = h->source_partition;
        d->source_offset_min = h->source_offset_min;
        d->source_offset_max = h->source_offset_max;
    }
}

static int verify_one(const struct walked *w, void *user)
{
    struct verify_walk *vw = user;
    if (!w->damaged) {
        vw->report->blocks_ok++;
        vw->report->events_ok += w->view->header->event_count;
        vw->report->bytes_ok += w->bytes;
        return 0;
    }
    vw->report->blocks_bad++;
    if (vw->out != NULL) {
        fprintf(vw->out, "%s: block at byte %llu (%llu bytes): %s\n", vw->path,
                (unsigned long long)w->offset, (unsigned long long)w->bytes, w->reason);
    }
    struct damage d;
    damage_describe(&d, vw->p, vw->segment_id, w);
    return damage_add(vw->damage, &d);
}

/* The bytes of a segment between its size and its committed end are gone. A block cut short
 * at the size (the last damage entry, its header readable) takes the bytes it says it had; a
 * new range whose events are unknown covers the rest (whole blocks may have been there). */
static int verify_short(struct verify_walk *vw, uint64_t from, uint64_t end)
{
    vw->report->blocks_bad++;
    if (vw->out != NULL) {
        fprintf(vw->out,
                "%s: %llu committed bytes missing (the file ends at %llu, commit at %llu)\n",
                vw->path, (unsigned long long)(end - from), (unsigned long long)from,
                (unsigned long long)end);
    }
    struct damage_list *list = vw->damage;
    if (list != NULL && list->count > 0) {
        struct damage *last = &list->v[list->count - 1];
        if (last->day == vw->p->day && last->shard == vw->p->shard &&
            last->segment_id == vw->segment_id && !last->segment_header &&
            last->offset + last->length == from) {
            uint64_t block_end = last->events_known ? last->offset + last->block_length : end;
            last->length = (block_end < end ? block_end : end) - last->offset;
            last->reason = "committed bytes missing (file cut short)";
            from = last->offset + last->length;
            if (from >= end) {
                return 0;
            }
        }
    }
    struct walked w = {.offset = from,
                       .bytes = end - from,
                       .damaged = true,
                       .reason = "committed bytes missing (file cut short)"};
    struct damage d;
    damage_describe(&d, vw->p, vw->segment_id, &w);
    return damage_add(list, &d);
}

static int verify_segment(struct walker *k, struct verify_walk *vw, const struct seg_open *so)
{
    struct storage_fsck_report *report = vw->report;
    if (so->header_bad && so->fd >= 0) {
        report->blocks_bad++;
        if (vw->out != NULL) {
            fprintf(vw->out, "%s: segment header damaged\n", vw->path);
        }
        struct damage d = {.day = vw->p->day,
                           .shard = vw->p->shard,
                           .segment_id = vw->segment_id,
                           .offset = 0,
                           .length = sizeof(struct segment_header),
                           .source_partition = BLOCK_SOURCE_NONE,
                           .reason = "segment header damaged",
                           .segment_header = true};
        int rc = damage_add(vw->damage, &d);
        if (rc != 0) {
            return rc;
        }
    }
    if (so->fd < 0 && so->end == 0) {
        report->blocks_bad++; /* a complete segment is gone, its length unknown: not repaired */
        return 0;
    }
    uint64_t offset = sizeof(struct segment_header);
    int rc = 0;
    if (so->fd >= 0 && so->walk_end > offset) {
        k->fd = so->fd;
        rc = walk_segment(k, vw->p, vw->segment_id, &offset, so->walk_end, verify_one, vw);
    }
    if (rc == 0 && offset < so->end) {
        rc = verify_short(vw, offset, so->end);
    }
    return rc;
}

int store_read_verify_partition(struct storage *st, const struct part *p,
                                struct storage_fsck_report *report, FILE *out,
                                struct damage_list *damage)
{
    struct walker k;
    int rc = walker_init(&k, st, WALK_DECODE, p->day_start_ms);
    char path[DS_PATH_MAX];
    for (uint32_t id = store_part_first(p); rc == 0 && id <= p->segment_id; id++) {
        store_segment_path(st, p, id, path);
        report->segments++;
        struct seg_open so;
        rc = segment_open_tolerant(st, p, id, &so);
        if (rc != 0) {
            break;
        }
        if (so.fd < 0 && out != NULL) {
            fprintf(out, "%s: missing\n", path);
        }
        struct verify_walk vw = {
            .p = p, .segment_id = id, .path = path, .report = report, .damage = damage, .out = out};
        rc = verify_segment(&k, &vw, &so);
        if (rc == 0 && id == p->segment_id && so.size > so.end) {
            report->torn_bytes += so.size - so.end;
            if (out != NULL) {
                fprintf(out, "%s: %llu bytes past the committed end %llu (torn or uncommitted)\n",
                        path, (unsigned long long)(so.size - so.end), (unsigned long long)so.end);
            }
            rc = store_read_range_scan(st, path, p->day, p->shard, id, so.end, damage, out);
        }
        if (so.fd >= 0) {
            st->io->ops->close(st->io, so.fd);
        }
    }
    free(k.buf);
    return rc;
}

/* ---- ranges past the committed end --------------------------------------------------------- */

struct range_walk {
    struct damage *d;
};

static int range_one(const struct walked *w, void *user)
{
    struct damage *d = ((struct range_walk *)user)->d;
    if (w->damaged || w->view == NULL) {
        return 0;
    }
    const struct block_header *h = w->view->header;
    if (d->blocks == 0) {
        d->source_partition = h->source_partition;
        d->source_offset_min = h->source_offset_min;
        d->source_offset_max = h->source_offset_max;
    } else {
        if (d->source_partition != h->source_partition) {
            d->source_partition = BLOCK_SOURCE_MIXED;
        }
        d->source_offset_min = h->source_offset_min < d->source_offset_min ? h->source_offset_min
                                                                           : d->source_offset_min;
        d->source_offset_max = h->source_offset_max > d->source_offset_max ? h->source_offset_max
                                                                           : d->source_offset_max;
    }
    d->blocks++;
    d->events += h->event_count;
    return 0;
}

int store_read_range_scan(struct storage *st, const char *path, int32_t day, uint32_t shard,
                          uint32_t segment_id, uint64_t from, struct damage_list *damage, FILE *out)
{
    ASSERT(from >= sizeof(struct segment_header));
    int fd = st->io->ops->open(st->io, path, O_RDONLY, 0);
    if (fd < 0) {
        return fd;
    }
    uint64_t size = 0;
    int rc = st->io->ops->size(st->io, fd, &size);
    struct damage d = {.day = day,
                       .shard = shard,
                       .segment_id = segment_id,
                       .offset = from,
                       .length = size > from ? size - from : 0,
                       .events_known = true,
                       .source_partition = BLOCK_SOURCE_NONE,
                       .reason = "past the committed end",
                       .past_end = true};
    struct walker k;
    if (rc == 0) {
        rc = walker_init(&k, st, WALK_PAYLOAD_CRC, (int64_t)day * DS_DAY_MS);
    }
    if (rc == 0) {
        k.fd = fd;
        uint64_t offset = from;
        struct range_walk rw = {.d = &d};
        rc = walk_segment(&k, NULL, segment_id, &offset, size, range_one, &rw);
        free(k.buf);
    }
    st->io->ops->close(st->io, fd);
    if (rc == 0 && d.blocks > 0) {
        if (out != NULL) {
            fprintf(out, "%s: %llu CRC-valid blocks (%llu events) past the committed end at %llu\n",
                    path, (unsigned long long)d.blocks, (unsigned long long)d.events,
                    (unsigned long long)from);
        }
        rc = damage_add(damage, &d);
    }
    return rc;
}
