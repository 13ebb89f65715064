/*
 * The log's records (index_private.h): checking a record where it lies (CRC, length, type, the
 * fields of a run header against the table), opening a sealed record into its sections' run
 * images, scanning a range of the log record by record, and bringing a handle's table up to the
 * last complete apply (open, refresh). One checker for every reader of the log, so the writer's
 * recovery, readers, compaction and index_check agree on what a damaged record is.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index/index_private.h"

/* ---- records ------------------------------------------------------------------------------- */

int index_bytes_grow(uint8_t **buf, size_t *cap, size_t want)
{
    if (want <= *cap && *buf != NULL) {
        return 0;
    }
    size_t grown = *cap < 256 ? 256 : *cap;
    while (grown < want) {
        grown *= 2;
    }
    uint8_t *p = realloc(*buf, grown);
    if (p == NULL) {
        return -ENOMEM;
    }
    *buf = p;
    *cap = grown;
    return 0;
}

/* The splice and the first patch of a delta record; *at is where the patches start. False when
 * a field is out of its bounds. */
static bool index_delta_head(const uint8_t *r, uint32_t len, uint64_t splice[3], size_t *at)
{
    const uint8_t *p = r + INDEX_DELTA_HEADER_BYTES;
    const uint8_t *end = r + len;
    for (int i = 0; i < 3; i++) {
        if (!ds_varint_next(&p, end, &splice[i]) || splice[i] > INDEX_CURSOR_BYTES_MAX) {
            return false;
        }
    }
    *at = (size_t)(p - r);
    return true;
}

bool index_delta_record_valid(const uint8_t *r, uint32_t len)
{
    uint64_t splice[3];
    size_t at = 0;
    uint32_t cursor_len = ds_get_le32(r + 12);
    if (len < INDEX_DELTA_HEADER_BYTES || len > INDEX_DELTA_RECORD_BYTES_MAX ||
        (r[9] & ~(INDEX_DELTA_RESET | INDEX_DELTA_MORE)) != 0 || ds_get_le16(r + 10) != 0 ||
        ds_get_le32(r + 28) != 0 || cursor_len > INDEX_CURSOR_BYTES_MAX ||
        !index_delta_head(r, len, splice, &at)) {
        return false;
    }
    bool reset = (r[9] & INDEX_DELTA_RESET) != 0;
    if (splice[1] + cursor_len < splice[2] || splice[0] + splice[2] > cursor_len ||
        (reset && (splice[0] != 0 || splice[1] != 0 || splice[2] != cursor_len ||
                   ds_get_le32(r + 24) != 0))) {
        return false;
    }
    const uint8_t *p = r + at;
    const uint8_t *end = r + len;
    uint64_t pos = 0;
    while (p < end) {
        uint64_t gap = 0;
        uint64_t bytes = 0;
        if (!ds_varint_next(&p, end, &gap) || !ds_varint_next(&p, end, &bytes) || bytes == 0 ||
            gap > cursor_len || bytes > (uint64_t)(end - p) || pos + gap + bytes > cursor_len) {
            return false;
        }
        pos += gap + bytes;
        p += bytes;
    }
    return true;
}

/* A delta record on g->cursor, under cursor_lock. */
static int index_cursor_delta_apply(struct index *g, const struct index_record *record)
{
    const uint8_t *r = record->bytes;
    uint32_t new_len = ds_get_le32(r + 12);
    bool reset = (r[9] & INDEX_DELTA_RESET) != 0;
    if (record->offset == g->cursor_preloaded_at) {
        /* DIR/table holds the cursor this record leaves: checked, not applied again. */
        return new_len == g->cursor_len ? 0 : -DS_ECORRUPT;
    }
    if (!reset && ds_get_le32(r + 24) != g->cursor_link_crc) {
        return -DS_ECORRUPT;
    }
    uint64_t splice[3];
    size_t at = 0;
    (void)index_delta_head(r, record->len, splice, &at); /* valid: index_record_check */
    uint64_t old_len = reset ? 0 : g->cursor_len;
    if (splice[0] + splice[1] > old_len || old_len - splice[1] + splice[2] != new_len) {
        return -DS_ECORRUPT;
    }
    size_t want = new_len > old_len ? new_len : (size_t)old_len;
    if (index_bytes_grow(&g->cursor, &g->cursor_cap, want) != 0) {
        return -ENOMEM;
    }
    uint8_t *c = g->cursor;
    size_t from = (size_t)(splice[0] + splice[1]);
    memmove(c + splice[0] + splice[2], c + from, (size_t)old_len - from);
    memset(c + splice[0], 0, (size_t)splice[2]);
    const uint8_t *p = r + at;
    const uint8_t *end = r + record->len;
    size_t pos = 0;
    while (p < end) {
        uint64_t gap = 0;
        uint64_t bytes = 0;
        (void)ds_varint_next(&p, end, &gap);
        (void)ds_varint_next(&p, end, &bytes);
        pos += (size_t)gap;
        memcpy(c + pos, p, (size_t)bytes);
        pos += (size_t)bytes;
        p += bytes;
    }
    g->cursor_len = new_len;
    return 0;
}

int index_cursor_record_apply(struct index *g, const struct index_record *record)
{
    const uint8_t *r = record->bytes;
    int rc = 0;
    pthread_mutex_lock(&g->cursor_lock);
    if (record->type == INDEX_RECORD_CURSOR) {
        size_t len = ds_get_le32(r + 12);
        rc = index_bytes_grow(&g->cursor, &g->cursor_cap, len) != 0 ? -ENOMEM : 0;
        if (rc == 0) {
            memcpy(g->cursor, r + INDEX_CURSOR_HEADER_BYTES, len);
            g->cursor_len = len;
        }
    } else {
        rc = index_cursor_delta_apply(g, record);
    }
    if (rc == 0) {
        g->cursor_link_crc = record->crc;
        if (index_record_commits(record->type, r)) {
            g->applies = ds_get_le64(r + 16);
            g->cursor_at = record->offset;
            g->cursor_crc = record->crc;
        }
    }
    pthread_mutex_unlock(&g->cursor_lock);
    return rc;
}

/* Checks a run's header fields against the table and its own offset. */
bool index_run_header_valid(const struct index *g, const uint8_t *r, uint32_t len, uint64_t offset)
{
    if (len < INDEX_RUN_HEADER_BYTES) {
        return false;
    }
    uint8_t kind = r[9];
    uint8_t id_bytes = r[10];
    uint32_t count = ds_get_le32(r + 12);
    uint64_t prev = ds_get_le64(r + 16);
    uint32_t slot = ds_get_le32(r + 40);
    uint64_t skip = ds_get_le64(r + 64);
    bool id_ok =
        kind == 0 ? id_bytes == 8 : kind == 1 && id_bytes >= 1 && id_bytes <= DS_ID_BYTES_MAX;
    return id_ok && len >= INDEX_RUN_HEADER_BYTES + id_bytes && count >= 1 &&
           count <= INDEX_RUN_ENTRIES_MAX &&
           (prev == 0 || (prev >= INDEX_LOG_HEADER_BYTES && prev < offset)) && skip <= prev &&
           slot <= g->mask && ds_get_le64(r + 48) != 0;
}

/* Opens the sealed record r (len bytes, at offset) and reads every section into its image
 * (with its entries, or the header only), each checked as a run header at offset (so its prev
 * lies before the record); fn (may be NULL) sees each. Returns 0, fn's non-zero value, -ENOMEM or
 * -DS_ECORRUPT. */
int index_sealed_sections(struct index *g, const uint8_t *r, uint32_t len, uint64_t offset,
                          bool entries, index_section_fn fn, void *user)
{
    struct index_seal_ctx *ctx = index_seal_ctx();
    if (ctx == NULL) {
        return -ENOMEM;
    }
    int64_t raw_len = index_seal_record_open(r, len, ctx->dctx, ctx->raw);
    struct index_seal_reader reader;
    int rc = raw_len < 0 ? (int)raw_len
                         : index_seal_reader_init(&reader, ctx->raw, (size_t)raw_len, g->mask);
    while (rc == 0) {
        uint32_t slot = 0;
        int64_t n = index_seal_reader_next(&reader, UINT32_MAX, entries, ctx->image, &slot);
        if (n == -ENOENT) {
            break;
        }
        if (n <= 0 || !index_run_header_valid(g, ctx->image, (uint32_t)n, offset)) {
            rc = -DS_ECORRUPT;
            break;
        }
        rc = fn != NULL ? fn(g, ctx->image, (uint32_t)n, offset, user) : 0;
    }
    return rc;
}

/* Validates one whole record at r (avail bytes readable). Returns its length, 0 when it does
 * not fit in avail (read more), or -DS_ECORRUPT. */
int64_t index_record_check(const struct index *g, const uint8_t *r, size_t avail, uint64_t offset)
{
    if (avail < INDEX_RECORD_PREFIX_BYTES) {
        return 0;
    }
    uint32_t len = ds_get_le32(r + 4);
    if (len < INDEX_CURSOR_HEADER_BYTES || len > INDEX_RECORD_BYTES_MAX) {
        return -DS_ECORRUPT;
    }
    if (avail < len) {
        return 0;
    }
    if (ds_get_le32(r) != ds_crc32c(0, r + 4, len - 4u)) {
        return -DS_ECORRUPT;
    }
    if (r[8] == INDEX_RECORD_CURSOR) {
        bool ok = ds_get_le32(r + 12) == len - INDEX_CURSOR_HEADER_BYTES &&
                  len - INDEX_CURSOR_HEADER_BYTES <= INDEX_CURSOR_FULL_BYTES_MAX;
        return ok ? (int64_t)len : -DS_ECORRUPT;
    }
    if (r[8] == INDEX_RECORD_CURSOR_DELTA) {
        return index_delta_record_valid(r, len) ? (int64_t)len : -DS_ECORRUPT;
    }
    if (r[8] == INDEX_RECORD_RUN && index_run_header_valid(g, r, len, offset)) {
        return len;
    }
    if (r[8] == INDEX_RECORD_DIRECTORY) {
        uint32_t count = ds_get_le32(r + 12);
        bool ok = count >= 1 && count <= INDEX_DIRECTORY_ENTRIES_MAX &&
                  len == INDEX_DIRECTORY_HEADER_BYTES + count * INDEX_DIRECTORY_ENTRY_BYTES &&
                  ds_get_le32(r + 16) <= g->mask && ds_get_le32(r + 20) == 0;
        for (uint32_t i = 0; ok && i < count; i++) {
            uint64_t at = ds_get_le64(r + INDEX_DIRECTORY_HEADER_BYTES + i * 16u);
            uint64_t newer =
                i == 0 ? offset : ds_get_le64(r + INDEX_DIRECTORY_HEADER_BYTES + (i - 1) * 16u);
            ok = at >= INDEX_LOG_HEADER_BYTES && at < newer; /* newest first, before it */
        }
        return ok ? (int64_t)len : -DS_ECORRUPT;
    }
    if (r[8] == INDEX_RECORD_SEALED) {
        /* Its CRC, payload and section headers, as a run's header is checked here; entries are
         * checked where they are read (queries, index_check), as a run's are. */
        int rc = index_sealed_sections((struct index *)g, r, len, offset, false, NULL, NULL);
        return rc == 0 ? (int64_t)len : (rc == -ENOMEM ? -ENOMEM : -DS_ECORRUPT);
    }
    return -DS_ECORRUPT;
}

/* Reads the log's records in [from, until) in order, each checked, into fn. Stops at the first
 * record that is damaged or runs past the end of the file. *end is where it stopped. */
int index_scan(struct index *g, uint8_t *buf, uint64_t from, uint64_t until, index_record_fn fn,
               void *user, uint64_t *end)
{
    uint64_t at = from;
    for (;;) {
        size_t want = INDEX_IO_BUFFER_BYTES;
        if (until - at < want) {
            want = (size_t)(until - at);
        }
        size_t got = 0;
        int rc = want > 0 ? index_pread_all(g->log_fd, buf, want, at, &got) : 0;
        if (rc != 0) {
            ds_log_error("%s/log: cannot read at %" PRIu64 ": %s", g->dir, at, ds_strerror(rc));
            return rc;
        }
        size_t pos = 0;
        for (;;) {
            int64_t len = index_record_check(g, buf + pos, got - pos, at + pos);
            if (len == -ENOMEM) {
                return -ENOMEM; /* not damage: the log must not be cut for it */
            }
            if (len <= 0) {
                if (len < 0 || got < want || pos == 0) {
                    *end = at + pos; /* damage, or the end of the file */
                    return 0;
                }
                break; /* the record continues past this read */
            }
            struct index_record record = {.offset = at + pos,
                                          .len = (uint32_t)len,
                                          .crc = ds_get_le32(buf + pos),
                                          .type = buf[pos + 8],
                                          .bytes = buf + pos};
            rc = fn(g, &record, user);
            if (rc != 0) {
                return rc;
            }
            pos += (size_t)len;
        }
        at += pos;
    }
}

/* Whether an intact record starts anywhere in (from, until): the record at from failed its
 * checks, and a damaged record followed by intact ones is damage, where a torn tail (a crash
 * in the middle of an append) has nothing intact after it. Every offset is a candidate; one
 * whose type and length fit is checked whole (CRC), so the cost is a pass over the bytes plus
 * a CRC for the rare candidate, and the search ends at the first intact record. *found is its
 * offset, 0 for none. */
int index_intact_after(struct index *g, uint64_t from, uint64_t until, uint64_t *found)
{
    uint8_t *buf = g->scan;
    uint64_t at = from + 1;
    *found = 0;
    while (at + INDEX_RECORD_PREFIX_BYTES <= until) {
        size_t want =
            until - at < INDEX_IO_BUFFER_BYTES ? (size_t)(until - at) : INDEX_IO_BUFFER_BYTES;
        size_t got = 0;
        int rc = index_pread_all(g->log_fd, buf, want, at, &got);
        if (rc != 0) {
            ds_log_error("%s/log: cannot read at %" PRIu64 ": %s", g->dir, at, ds_strerror(rc));
            return rc;
        }
        size_t pos = 0;
        bool window_short = false; /* a candidate runs past this read: read again from it */
        for (; pos + INDEX_RECORD_PREFIX_BYTES <= got; pos++) {
            const uint8_t *r = buf + pos;
            uint32_t len = ds_get_le32(r + 4);
            if ((r[8] != INDEX_RECORD_RUN && r[8] != INDEX_RECORD_CURSOR &&
                 r[8] != INDEX_RECORD_SEALED && r[8] != INDEX_RECORD_DIRECTORY &&
                 r[8] != INDEX_RECORD_CURSOR_DELTA) ||
                len < INDEX_CURSOR_HEADER_BYTES || len > INDEX_RECORD_BYTES_MAX ||
                at + pos + len > until) {
                continue;
            }
            if (pos + len > got) {
                window_short = true;
                break;
            }
            if (index_record_check(g, r, len, at + pos) > 0) {
                *found = at + pos;
                return 0;
            }
        }
        if ((window_short && pos == 0) || (!window_short && got < want)) {
            return 0; /* the file is shorter than it was: nothing more to read */
        }
        at += pos;
    }
    return 0;
}

/* First pass: where the last cursor record ends (everything after it is cut or ignored). */
struct index_scan_end {
    uint64_t cursor_at;
    uint64_t end;
};

static int index_scan_find_end(struct index *g, const struct index_record *record, void *user)
{
    (void)g;
    struct index_scan_end *s = user;
    if (index_record_commits(record->type, record->bytes)) {
        s->cursor_at = record->offset;
        s->end = record->offset + record->len;
    }
    return 0;
}

/* A run (or a sealed section's image) at offset becomes its slot's head. */
static int index_scan_run(struct index *g, const uint8_t *r, uint32_t len, uint64_t offset,
                          void *user)
{
    (void)len;
    (void)user;
    struct index_slot *s = &g->slots[ds_get_le32(r + 40)];
    __atomic_store_n(&s->tag, ds_get_le64(r + 48), __ATOMIC_RELAXED);
    s->max_ts = (int64_t)ds_get_le64(r + 24);
    __atomic_store_n(&s->head, offset, __ATOMIC_RELEASE);
    return 0;
}

/* Second pass: runs into the table, the last cursor into g->cursor. */
static int index_scan_apply(struct index *g, const struct index_record *record, void *user)
{
    (void)user;
    const uint8_t *r = record->bytes;
    if (record->type == INDEX_RECORD_RUN) {
        return index_scan_run(g, r, record->len, record->offset, NULL);
    }
    if (record->type == INDEX_RECORD_SEALED) {
        if (record->offset + record->len > g->sealed_end) {
            g->sealed_end = record->offset + record->len;
        }
        return index_sealed_sections(g, r, record->len, record->offset, false, index_scan_run,
                                     NULL);
    }
    if (record->type == INDEX_RECORD_DIRECTORY) {
        return 0; /* read by queries only */
    }
    int rc = index_cursor_record_apply(g, record);
    if (rc == -DS_ECORRUPT) {
        ds_log_error("%s/log: the cursor record at offset %" PRIu64 " does not follow the one "
                     "before it; " INDEX_REPAIR_HINT,
                     g->dir, record->offset);
    }
    return rc;
}

int index_log_size(struct index *g, uint64_t *size)
{
    struct stat st;
    if (fstat(g->log_fd, &st) != 0) {
        int err = -errno;
        ds_log_error("%s/log: cannot stat: %s", g->dir, ds_strerror(err));
        return err;
    }
    *size = (uint64_t)st.st_size;
    return 0;
}

/* Applies the records in [g->log_end, until) to the table, and returns in *end where the last
 * complete apply among them ends (g->log_end moves there). */
int index_catch_up_to(struct index *g, uint64_t until, uint64_t *end)
{
    if (until <= g->log_end) {
        *end = g->log_end; /* nothing new: a reader's refresh per request costs one fstat */
        return 0;
    }
    struct index_scan_end found = {.end = g->log_end};
    uint64_t stop = 0;
    int rc = index_scan(g, g->scan, g->log_end, until, index_scan_find_end, &found, &stop);
    if (rc == 0 && !g->writer && stop < until) {
        /* A writer cuts from the first damaged record on and its builder replays from the
         * cursor; a reader must not answer from the applies before the damage as if they
         * were all, when intact ones follow it. */
        uint64_t intact = 0;
        rc = index_intact_after(g, stop, until, &intact);
        if (rc == 0 && intact != 0) {
            ds_log_error("%s/log: the record at offset %" PRIu64 " is damaged and intact records "
                         "follow it (at %" PRIu64 "); " INDEX_REPAIR_HINT,
                         g->dir, stop, intact);
            return -DS_ECORRUPT;
        }
    }
    rc = rc == 0 && found.end > g->log_end
             ? index_scan(g, g->scan, g->log_end, found.end, index_scan_apply, NULL, &stop)
             : rc;
    if (rc == 0) {
        ASSERT(found.end >= g->log_end);
        g->log_end = found.end;
        *end = found.end;
    }
    return rc;
}

/* Brings the table to the end of the last complete apply in the log; *size is the log's size,
 * *end where that apply ends. */
int index_catch_up(struct index *g, uint64_t *size, uint64_t *end)
{
    int rc = index_log_size(g, size);
    return rc == 0 ? index_catch_up_to(g, *size, end) : rc;
}

/* The customer id a run stores. Returns 0 or -DS_ECORRUPT. */
int index_run_customer(const uint8_t *r, struct ds_id *customer)
{
    memset(customer, 0, sizeof(*customer));
    if (r[9] == 0) {
        customer->value = (int64_t)ds_get_le64(r + INDEX_RUN_HEADER_BYTES);
    } else {
        customer->is_string = true;
        customer->len = r[10];
        memcpy(customer->text, r + INDEX_RUN_HEADER_BYTES, r[10]);
    }
    return index_key_id_valid(customer) ? 0 : -DS_ECORRUPT;
}
