/*
 * Reading (index.h: index_cursor, index_query, index_bytes_on_disk): a page of a customer's
 * orders walks the customer's chain from its head, newest runs first, keeping the best limit + 1
 * distinct tail keys, and stops when the next run's chain_max_ts is older than the worst entry
 * kept; sealed sections are read as run images and a directory record lets a token deep in a
 * heavy customer jump to its section.
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

/* ---- reading ------------------------------------------------------------------------------- */

int index_cursor(struct index *g, void *buf, size_t cap, size_t *len)
{
    ASSERT(g != NULL);
    ASSERT(len != NULL);
    pthread_mutex_lock(&g->cursor_lock);
    *len = g->cursor_len;
    int rc = g->cursor_len > cap ? -ENOSPC : 0;
    if (rc == 0 && g->cursor_len > 0) {
        memcpy(buf, g->cursor, g->cursor_len);
    }
    pthread_mutex_unlock(&g->cursor_lock);
    return rc;
}

/* One kept entry of a query: its tail key and value, as stored. */
struct index_candidate {
    uint8_t key_bytes;
    uint8_t value_bytes;
    uint8_t key[INDEX_TAIL_BYTES_MAX];
    uint8_t value[INDEX_VALUE_BYTES_MAX];
};

/* The best `keep` distinct keys seen so far, ascending, as pointers into a pool of keep + 1. */
struct index_best {
    struct index_candidate *pool;
    struct index_candidate **order;
    uint32_t count;
    uint32_t keep;
};

/* Offers one entry; returns false when it and everything after it in its run is too old. */
static bool index_best_offer(struct index_best *b, const uint8_t *key, size_t key_bytes,
                             const uint8_t *value, size_t value_bytes)
{
    uint32_t lo = 0;
    uint32_t hi = b->count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const struct index_candidate *c = b->order[mid];
        int cmp = index_key_compare(c->key, c->key_bytes, key, key_bytes);
        if (cmp == 0) {
            return true; /* an older copy of an entry already kept */
        }
        if (cmp < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo == b->keep) {
        return false;
    }
    struct index_candidate *slot =
        b->count < b->keep ? &b->pool[b->count] : b->order[b->keep - 1]; /* evict the oldest */
    if (b->count < b->keep) {
        b->count++;
    }
    memmove(&b->order[lo + 1], &b->order[lo], (size_t)(b->count - 1 - lo) * sizeof(*b->order));
    b->order[lo] = slot;
    slot->key_bytes = (uint8_t)key_bytes;
    slot->value_bytes = (uint8_t)value_bytes;
    memcpy(slot->key, key, key_bytes);
    memcpy(slot->value, value, value_bytes);
    return true;
}

/* The ts of the oldest kept entry when the set is full; INT64_MIN otherwise. */
static int64_t index_best_floor_ts(const struct index_best *b)
{
    if (b->count < b->keep) {
        return INT64_MIN;
    }
    return (int64_t)~index_key_be64_get(b->order[b->count - 1]->key);
}

/* The image of slot's section in the sealed record at offset, whose first got bytes are in buf
 * (INDEX_QUERY_READ_BYTES), into this thread's image buffer: the rest of the record is read,
 * opened (CRC, zstd), and its sections read until slot's. */
static int index_sealed_read(const struct index *g, uint64_t offset, uint32_t slot,
                             const uint8_t *buf, size_t got, const uint8_t **r, uint64_t *directory)
{
    struct index_seal_ctx *ctx = index_seal_ctx();
    if (ctx == NULL) {
        return -ENOMEM;
    }
    uint32_t len = ds_get_le32(buf + 4);
    if (len <= INDEX_SEAL_HEADER_BYTES || len > INDEX_SEAL_RECORD_BYTES_MAX) {
        return -DS_ECORRUPT;
    }
    const uint8_t *record = buf;
    if (len > got) {
        size_t more = 0;
        int rc = index_pread_all(g->log_fd, ctx->record, len, offset, &more);
        if (rc != 0 || more != len) {
            return rc != 0 ? rc : -DS_ECORRUPT;
        }
        record = ctx->record;
    }
    int64_t raw_len = index_seal_record_open(record, len, ctx->dctx, ctx->raw);
    struct index_seal_reader reader;
    int rc = raw_len < 0 ? (int)raw_len
                         : index_seal_reader_init(&reader, ctx->raw, (size_t)raw_len, g->mask);
    while (rc == 0) {
        uint32_t at_slot = 0;
        int64_t n = index_seal_reader_next(&reader, slot, true, ctx->image, &at_slot);
        if (n < 0 || at_slot > slot) {
            return -DS_ECORRUPT; /* no section of the slot whose chain led here */
        }
        if (n > 0) {
            if (!index_run_header_valid(g, ctx->image, (uint32_t)n, offset) ||
                reader.directory >= offset) {
                return -DS_ECORRUPT;
            }
            *r = ctx->image;
            *directory = reader.directory;
            return 0;
        }
    }
    return rc;
}

/* Reads the whole run at offset into buf (INDEX_QUERY_READ_BYTES) or, when it is longer, into
 * *big (allocated on demand, INDEX_RUN_BYTES_MAX), and checks it (header and CRC), so a damaged
 * run is an error, never a wrong answer; for a sealed record, slot's section as a run (in this
 * thread's image buffer, valid until the next read). Points *r at it; returns 0 or a negative
 * code. */
int index_run_read(const struct index *g, uint64_t offset, uint32_t slot, uint8_t *buf,
                   uint8_t **big, const uint8_t **r, uint64_t *directory)
{
    *directory = 0;
    size_t got = 0;
    int rc = index_pread_all(g->log_fd, buf, INDEX_QUERY_READ_BYTES, offset, &got);
    if (rc != 0) {
        ds_log_error("%s/log: cannot read at %" PRIu64 ": %s", g->dir, offset, ds_strerror(rc));
        return rc;
    }
    if (got > INDEX_SEAL_HEADER_BYTES && buf[8] == INDEX_RECORD_SEALED) {
        return index_sealed_read(g, offset, slot, buf, got, r, directory);
    }
    uint32_t len = got >= INDEX_RECORD_PREFIX_BYTES ? ds_get_le32(buf + 4) : 0;
    if (got < INDEX_RUN_HEADER_BYTES || buf[8] != INDEX_RECORD_RUN || len > INDEX_RUN_BYTES_MAX ||
        !index_run_header_valid(g, buf, len, offset)) {
        return -DS_ECORRUPT;
    }
    const uint8_t *run = buf;
    if (len > got) {
        if (*big == NULL && (*big = malloc(INDEX_RUN_BYTES_MAX)) == NULL) {
            return -ENOMEM;
        }
        rc = index_pread_all(g->log_fd, *big, len, offset, &got);
        if (rc != 0 || got != len) {
            return rc != 0 ? rc : -DS_ECORRUPT;
        }
        run = *big;
    }
    if (ds_get_le32(run) != ds_crc32c(0, run + 4, len - 4u)) {
        return -DS_ECORRUPT;
    }
    *r = run;
    return 0;
}

/* Offers the run's entries older than the token (all of them without one) to best. Returns 0
 * or -DS_ECORRUPT. */
static int index_run_offer(const uint8_t *r, const uint8_t *token, size_t token_bytes,
                           struct index_best *best)
{
    uint32_t len = ds_get_le32(r + 4);
    size_t at = INDEX_RUN_HEADER_BYTES + r[10];
    uint32_t count = ds_get_le32(r + 12);
    for (uint32_t i = 0; i < count; i++) {
        if (at + 1 > len || at + 1 + r[at] + 1 > len) {
            return -DS_ECORRUPT;
        }
        size_t key_bytes = r[at];
        const uint8_t *key = r + at + 1;
        size_t value_bytes = r[at + 1 + key_bytes];
        const uint8_t *value = key + key_bytes + 1;
        if (at + 2 + key_bytes + value_bytes > len || key_bytes < 9 ||
            key_bytes > INDEX_TAIL_BYTES_MAX || value_bytes > INDEX_VALUE_BYTES_MAX) {
            return -DS_ECORRUPT;
        }
        at += 2 + key_bytes + value_bytes;
        if (token != NULL && index_key_compare(key, key_bytes, token, token_bytes) <= 0) {
            continue; /* on an earlier page */
        }
        if (!index_best_offer(best, key, key_bytes, value, value_bytes)) {
            return 0;
        }
    }
    return 0;
}

static bool index_run_customer_is(const uint8_t *r, const struct ds_id *customer)
{
    uint8_t id[DS_ID_BYTES_MAX];
    size_t id_bytes = index_customer_bytes(customer, id);
    return r[9] == (customer->is_string ? 1 : 0) && r[10] == id_bytes &&
           memcmp(r + INDEX_RUN_HEADER_BYTES, id, id_bytes) == 0;
}

/* The offset of the first section in the directory record at offset (slot's) whose oldest ts is
 * at or before token_ts; the last one listed when none is (the walk goes on from there). */
static int index_directory_find(const struct index *g, uint64_t offset, uint32_t slot,
                                int64_t token_ts, uint64_t *to)
{
    uint8_t head[INDEX_DIRECTORY_HEADER_BYTES];
    size_t got = 0;
    int rc = index_pread_all(g->log_fd, head, sizeof(head), offset, &got);
    if (rc != 0 || got != sizeof(head)) {
        return rc != 0 ? rc : -DS_ECORRUPT;
    }
    uint32_t len = ds_get_le32(head + 4);
    if (head[8] != INDEX_RECORD_DIRECTORY || len > INDEX_RECORD_BYTES_MAX ||
        ds_get_le32(head + 16) != slot) {
        return -DS_ECORRUPT;
    }
    uint8_t *d = malloc(len);
    if (d == NULL) {
        return -ENOMEM;
    }
    rc = index_pread_all(g->log_fd, d, len, offset, &got);
    int64_t checked = rc == 0 && got == len ? index_record_check(g, d, len, offset) : -DS_ECORRUPT;
    if (rc == 0 && checked != (int64_t)len) {
        rc = -DS_ECORRUPT;
    }
    if (rc == 0) {
        uint32_t lo = 0;
        uint32_t count = ds_get_le32(d + 12);
        uint32_t hi = count;
        const uint8_t *e = d + INDEX_DIRECTORY_HEADER_BYTES;
        while (lo < hi) { /* oldest ts descends along the list */
            uint32_t mid = lo + (hi - lo) / 2;
            if ((int64_t)ds_get_le64(e + (size_t)mid * 16u + 8) <= token_ts) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        *to = ds_get_le64(e + (size_t)(lo < count ? lo : count - 1) * 16u);
    }
    free(d);
    return rc;
}

/* Walks the customer's chain into best. */
static int index_walk(const struct index *g, const struct ds_id *customer, const uint8_t *token,
                      size_t token_bytes, struct index_best *best)
{
    uint64_t tag = index_key_tag(customer);
    bool empty = false;
    uint32_t slot = index_slot_find(g, tag, &empty);
    if (empty) {
        return 0;
    }
    uint64_t offset = __atomic_load_n(&g->slots[slot].head, __ATOMIC_ACQUIRE);
    int64_t token_ts = token != NULL ? (int64_t)~index_key_be64_get(token) : INT64_MAX;
    uint8_t buf[INDEX_QUERY_READ_BYTES];
    uint8_t *big = NULL;
    int rc = 0;
    while (offset != 0 && rc == 0) {
        const uint8_t *r = NULL;
        uint64_t directory = 0;
        rc = index_run_read(g, offset, slot, buf, &big, &r, &directory);
        if (rc != 0) {
            break;
        }
        int64_t chain_max = (int64_t)ds_get_le64(r + 24);
        if (chain_max < index_best_floor_ts(best)) {
            break; /* everything left on the chain is older than the worst entry kept */
        }
        /* A run whose entries are all newer than the token is on earlier pages. */
        bool mine = index_run_customer_is(r, customer);
        if (mine && directory != 0 && (int64_t)ds_get_le64(r + 32) > token_ts) {
            /* A page deep in a heavy customer: its sealed sections below this one, newest
             * first, are on earlier pages down to the first whose oldest entry is not newer
             * than the token; jump there instead of reading each. */
            uint64_t to = 0;
            rc = index_directory_find(g, directory, slot, token_ts, &to);
            if (rc != 0) {
                break;
            }
            if (to != 0) {
                offset = to;
                continue;
            }
        }
        if (mine && (int64_t)ds_get_le64(r + 32) <= token_ts) {
            rc = index_run_offer(r, token, token_bytes, best);
        }
        offset = ds_get_le64(r + 16);
        int64_t floor_ts = index_best_floor_ts(best);
        if (mine && (int64_t)ds_get_le64(r + 32) < floor_ts) {
            /* This customer's older runs of the same apply are older than this one's oldest
             * entry, so older than the worst kept: jump past them. */
            offset = ds_get_le64(r + 64);
        } else if (offset != 0 && (int64_t)ds_get_le64(r + 56) < floor_ts) {
            break; /* the previous run's chain_max_ts: nothing older can enter */
        }
    }
    free(big);
    if (rc == -DS_ECORRUPT) {
        ds_log_error("%s/log: a damaged run on a customer's chain; " INDEX_REPAIR_HINT, g->dir);
    }
    return rc;
}

static int index_candidate_decode(const struct ds_id *customer, const struct index_candidate *c,
                                  struct index_entry *e)
{
    memset(e, 0, sizeof(*e));
    e->customer_id = *customer;
    int rc = index_key_tail_decode(c->key, c->key_bytes, &e->ts_ms, &e->order_id);
    rc = rc == 0 ? index_key_value_decode(c->value, c->value_bytes, e) : rc;
    if (rc != 0) {
        ds_log_error("gsi: a stored entry of %u key bytes does not decode", c->key_bytes);
        return rc;
    }
    e->day = ds_day_from_ms(e->ts_ms);
    return 0;
}

int index_query(struct index *g, const struct ds_id *customer, uint32_t limit,
                const char *page_token, struct index_page *out)
{
    ASSERT(g != NULL);
    ASSERT(out != NULL && out->entries != NULL);
    if (!index_key_id_valid(customer) || limit < 1 || limit > INDEX_PAGE_LIMIT_MAX) {
        return -DS_EUSAGE;
    }
    uint8_t token[INDEX_TAIL_BYTES_MAX];
    int token_bytes = 0;
    if (page_token != NULL && page_token[0] != '\0') {
        token_bytes = index_key_token_decode(page_token, token);
        if (token_bytes < 0) {
            return token_bytes;
        }
    }
    struct index_best best = {.keep = limit + 1};
    best.pool = malloc((size_t)best.keep * sizeof(*best.pool));
    best.order = malloc((size_t)best.keep * sizeof(*best.order));
    int rc = best.pool != NULL && best.order != NULL ? 0 : -ENOMEM;
    if (rc == 0) {
        pthread_rwlock_rdlock(&g->swap_lock);
        rc = index_walk(g, customer, token_bytes > 0 ? token : NULL, (size_t)token_bytes, &best);
        pthread_rwlock_unlock(&g->swap_lock);
    }
    out->count = 0;
    out->has_next = false;
    out->next_token[0] = '\0';
    for (uint32_t i = 0; rc == 0 && i < best.count && i < limit; i++) {
        rc = index_candidate_decode(customer, best.order[i], &out->entries[i]);
        out->count = rc == 0 ? i + 1 : out->count;
    }
    if (rc == 0 && best.count > limit) {
        const struct index_candidate *last = best.order[limit - 1];
        out->has_next = true;
        index_key_hex_encode(last->key, last->key_bytes, out->next_token);
    }
    free(best.pool);
    free(best.order);
    return rc;
}

uint64_t index_bytes_on_disk(struct index *g)
{
    ASSERT(g != NULL);
    uint64_t bytes = 0;
    struct stat st;
    pthread_rwlock_rdlock(&g->swap_lock);
    if (fstat(g->log_fd, &st) == 0) {
        bytes += (uint64_t)st.st_size;
    }
    pthread_rwlock_unlock(&g->swap_lock);
    char path[DS_PATH_MAX];
    index_path(g, "table", path);
    if (stat(path, &st) == 0) {
        bytes += (uint64_t)st.st_size;
    }
    return bytes;
}
