/*
 * index_apply (index.h): a batch of entries and the builder's cursor, atomically. The batch is
 * sorted by (slot, customer, tail key) with a radix sort on the slot, split into per-customer
 * runs appended to the log, each slot's new head published with a release store once the runs
 * are written, then the cursor record. Rejected: one record per entry (a query would read a
 * record per order) and publishing heads as runs are written (a query could see part of a
 * customer's apply).
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

/* ---- apply --------------------------------------------------------------------------------- */

static bool index_entry_valid(const struct index_entry *e)
{
    return index_key_id_valid(&e->customer_id) && index_key_id_valid(&e->order_id) &&
           e->ts_ms >= DS_TS_MS_MIN && e->ts_ms <= DS_TS_MS_MAX &&
           e->day == ds_day_from_ms(e->ts_ms) && e->status_len <= DS_STATUS_BYTES_MAX;
}

/* The batch being sorted: qsort's comparator needs the entries and tails. */
static _Thread_local const struct index *index_sorting;
static _Thread_local const struct index_entry *index_sorting_entries;

static int index_tail_compare(const struct index *g, const struct index_item *x,
                              const struct index_item *y)
{
    if (x->ts_key != y->ts_key) {
        return x->ts_key < y->ts_key ? -1 : 1;
    }
    if (!x->order_is_string && !y->order_is_string) {
        /* 0xFE ~id: the larger id first */
        return (x->order_value < y->order_value) - (x->order_value > y->order_value);
    }
    if (x->order_is_string != y->order_is_string) {
        return x->order_is_string ? -1 : 1; /* 0xFD (string) before 0xFE (integer) */
    }
    size_t n = x->tail_bytes < y->tail_bytes ? x->tail_bytes : y->tail_bytes;
    int c = memcmp(g->tails + (size_t)x->index * INDEX_TAIL_BYTES_MAX + 8,
                   g->tails + (size_t)y->index * INDEX_TAIL_BYTES_MAX + 8, n - 8u);
    return c != 0 ? c : (x->tail_bytes > y->tail_bytes) - (x->tail_bytes < y->tail_bytes);
}

static int index_item_compare(const void *a, const void *b)
{
    const struct index_item *x = a;
    const struct index_item *y = b;
    if (x->slot != y->slot) {
        return x->slot < y->slot ? -1 : 1;
    }
    if (x->tag != y->tag) {
        return x->tag < y->tag ? -1 : 1;
    }
    int c = 0;
    if (x->customer_is_string != y->customer_is_string) {
        c = x->customer_is_string ? 1 : -1;
    } else if (!x->customer_is_string) {
        c = (x->customer_value > y->customer_value) - (x->customer_value < y->customer_value);
    } else {
        c = index_customer_compare(&index_sorting_entries[x->index].customer_id,
                                   &index_sorting_entries[y->index].customer_id);
    }
    c = c != 0 ? c : index_tail_compare(index_sorting, x, y);
    /* Equal keys: the caller's last copy first; the others are skipped. */
    return c != 0 ? c : (x->index < y->index) - (x->index > y->index);
}

/* Sorts g->items[0..n) by index_item_compare: a stable radix sort on the slot (passes of
 * INDEX_RADIX_BITS), then each slot's group is checked and, only when out of order (customers
 * sharing a slot, equal ts, late events), sorted with qsort. The items were laid out newest
 * first per customer for events that arrive in time order, so most groups are already in
 * order: perf had qsort over the whole batch at a third of an apply's CPU. */
static void index_items_sort(struct index *g, size_t n)
{
    struct index_item *from = g->items;
    struct index_item *to = g->items_spare;
    size_t counts[1u << INDEX_RADIX_BITS];
    for (uint32_t shift = 0; shift < g->slots_log2; shift += INDEX_RADIX_BITS) {
        memset(counts, 0, sizeof(counts));
        for (size_t i = 0; i < n; i++) {
            counts[(from[i].slot >> shift) & ((1u << INDEX_RADIX_BITS) - 1)]++;
        }
        size_t sum = 0;
        for (size_t d = 0; d < DS_ARRAY_LEN(counts); d++) {
            size_t c = counts[d];
            counts[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) {
            to[counts[(from[i].slot >> shift) & ((1u << INDEX_RADIX_BITS) - 1)]++] = from[i];
        }
        struct index_item *swap = from;
        from = to;
        to = swap;
    }
    if (from != g->items) {
        memcpy(g->items, from, n * sizeof(*g->items));
    }
    for (size_t first = 0; first < n;) {
        size_t end = first + 1;
        bool sorted = true;
        for (; end < n && g->items[end].slot == g->items[first].slot; end++) {
            sorted = sorted && index_item_compare(&g->items[end - 1], &g->items[end]) < 0;
        }
        if (!sorted) {
            qsort(&g->items[first], end - first, sizeof(*g->items), index_item_compare);
        }
        first = end;
    }
}

/* Validates, hashes, claims slots and sorts the batch into g->items. */
static int index_batch_sort(struct index *g, const struct index_entry *entries, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct index_entry *e = &entries[i];
        if (!index_entry_valid(e)) {
            ds_log_error("gsi: entry %zu of the batch is invalid (ids, ts or day)", i);
            return -DS_EUSAGE; /* before any slot is claimed: the pass below claims */
        }
        /* Backwards: a customer's entries mostly arrive oldest first, and sort newest first. */
        struct index_item *it = &g->items[n - 1 - i];
        it->order_is_string = e->order_id.is_string;
        it->order_value = e->order_id.is_string ? 0 : e->order_id.value;
        it->tail_bytes = e->order_id.is_string
                             ? (uint8_t)index_key_tail_encode(e->ts_ms, &e->order_id,
                                                              g->tails + i * INDEX_TAIL_BYTES_MAX)
                             : INDEX_TAIL_INT_BYTES;
        it->ts_key = ~(uint64_t)e->ts_ms;
        it->tag = index_key_tag(&e->customer_id);
        it->customer_is_string = e->customer_id.is_string;
        it->customer_value = e->customer_id.is_string ? 0 : e->customer_id.value;
        it->index = (uint32_t)i;
        __builtin_prefetch(&g->slots[it->tag & g->mask]);
    }
    /* The slots, in a second pass, so the prefetches above had time to land. */
    for (size_t i = 0; i < n; i++) {
        struct index_item *it = &g->items[n - 1 - i];
        bool empty = false;
        it->slot = index_slot_find(g, it->tag, &empty);
        if (empty) {
            __atomic_store_n(&g->slots[it->slot].tag, it->tag, __ATOMIC_RELEASE);
        }
    }
    index_sorting = g;
    index_sorting_entries = entries;
    index_items_sort(g, n);
    return 0;
}

/* Writes the buffered records at the end of the log. */
static int index_flush(struct index *g)
{
    if (g->buffered == 0) {
        return 0;
    }
    uint64_t at = g->log_end - g->buffered;
    int rc = ds_pwrite_full(g->log_fd, g->buffer, g->buffered, at);
    if (rc != 0) {
        ds_log_error("%s/log: cannot write %zu bytes at %" PRIu64 ": %s", g->dir, g->buffered, at,
                     ds_strerror(rc));
        return rc;
    }
    g->buffered = 0;
    return 0;
}

/* Room for one record of at most bytes at the end of the buffer; returns where it goes. */
static int index_reserve(struct index *g, size_t bytes, uint8_t **dst)
{
    ASSERT(bytes <= INDEX_IO_BUFFER_BYTES);
    if (INDEX_IO_BUFFER_BYTES - g->buffered < bytes) {
        int rc = index_flush(g);
        if (rc != 0) {
            return rc;
        }
    }
    *dst = g->buffer + g->buffered;
    return 0;
}

static void index_commit_record(struct index *g, uint8_t *r, size_t len)
{
    ASSERT(len <= INDEX_RECORD_BYTES_MAX);
    ds_put_le32(r + 4, (uint32_t)len);
    ds_put_le32(r, ds_crc32c(0, r + 4, len - 4u));
    g->buffered += len;
    g->log_end += len;
}

/* Appends one run of count deduplicated items (g->run[first..first+count), newest first) of one
 * customer to the chain whose head and max ts *head and *max_ts hold, updating them. */
static int index_run_append(struct index *g, const struct index_entry *entries, size_t first,
                            size_t count, uint32_t slot, uint64_t skip, uint64_t *head,
                            int64_t *max_ts)
{
    uint8_t *r = NULL;
    int rc = index_reserve(g, INDEX_RUN_BYTES_MAX, &r);
    if (rc != 0) {
        return rc;
    }
    const struct index_item *newest = &g->items[g->run[first]];
    int64_t newest_ts = (int64_t)~newest->ts_key;
    int64_t oldest_ts = (int64_t)~g->items[g->run[first + count - 1]].ts_key;
    int64_t chain_max = newest_ts > *max_ts || *head == 0 ? newest_ts : *max_ts;
    memset(r, 0, INDEX_RUN_HEADER_BYTES);
    r[8] = INDEX_RECORD_RUN;
    r[9] = newest->customer_is_string ? 1 : 0;
    size_t id_bytes = 8;
    if (newest->customer_is_string) {
        id_bytes =
            index_customer_bytes(&entries[newest->index].customer_id, r + INDEX_RUN_HEADER_BYTES);
    } else {
        ds_put_le64(r + INDEX_RUN_HEADER_BYTES, (uint64_t)newest->customer_value);
    }
    r[10] = (uint8_t)id_bytes;
    ds_put_le32(r + 12, (uint32_t)count);
    ds_put_le64(r + 16, *head);
    ds_put_le64(r + 24, (uint64_t)chain_max);
    ds_put_le64(r + 32, (uint64_t)oldest_ts);
    ds_put_le32(r + 40, slot);
    ds_put_le64(r + 48, __atomic_load_n(&g->slots[slot].tag, __ATOMIC_RELAXED));
    ds_put_le64(r + 56, *head != 0 ? (uint64_t)*max_ts : 0);
    ds_put_le64(r + 64, skip);
    size_t len = INDEX_RUN_HEADER_BYTES + id_bytes;
    for (size_t i = first; i < first + count; i++) {
        const struct index_item *it = &g->items[g->run[i]];
        r[len++] = it->tail_bytes;
        if (it->order_is_string) {
            memcpy(r + len, g->tails + (size_t)it->index * INDEX_TAIL_BYTES_MAX, it->tail_bytes);
        } else {
            struct ds_id order = {.value = it->order_value}; /* from the item: no entry read */
            (void)index_key_tail_encode((int64_t)~it->ts_key, &order, r + len);
        }
        len += it->tail_bytes;
        size_t value = index_key_value_encode(&entries[it->index], r + len + 1);
        r[len++] = (uint8_t)value;
        len += value;
    }
    *head = g->log_end;
    *max_ts = chain_max;
    index_commit_record(g, r, len);
    return 0;
}

static bool index_item_same_customer(const struct index_entry *entries, const struct index_item *x,
                                     const struct index_item *y)
{
    if (x->slot != y->slot || x->tag != y->tag || x->customer_is_string != y->customer_is_string) {
        return false;
    }
    return !x->customer_is_string
               ? x->customer_value == y->customer_value
               : ds_id_equal(&entries[x->index].customer_id, &entries[y->index].customer_id);
}

/* Appends the runs of the sorted batch, one slot at a time, and lists the slots' new heads. */
static int index_runs_append(struct index *g, const struct index_entry *entries, size_t n)
{
    g->publish_count = 0;
    size_t i = 0;
    for (size_t k = 0; k < n && k < INDEX_PREFETCH_AHEAD; k++) {
        __builtin_prefetch(&g->slots[g->items[k].slot]);
    }
    while (i < n) {
        if (i + INDEX_PREFETCH_AHEAD < n) {
            __builtin_prefetch(&g->slots[g->items[i + INDEX_PREFETCH_AHEAD].slot]);
        }
        uint32_t slot = g->items[i].slot;
        const struct index_slot *s = &g->slots[slot];
        uint64_t head = __atomic_load_n(&s->head, __ATOMIC_RELAXED);
        int64_t max_ts = s->max_ts;
        while (i < n && g->items[i].slot == slot) {
            /* One customer: its distinct keys in g->run, newest first. */
            size_t count = 0;
            size_t j = i;
            for (; j < n && index_item_same_customer(entries, &g->items[i], &g->items[j]); j++) {
                if (j + INDEX_PREFETCH_AHEAD < n) {
                    /* the entry's status and amount (two cache lines), read when its run is
                     * written */
                    const struct index_entry *ahead =
                        &entries[g->items[j + INDEX_PREFETCH_AHEAD].index];
                    __builtin_prefetch(&ahead->status_len);
                    __builtin_prefetch(&ahead->amount_units);
                }
                if (count == 0 ||
                    index_tail_compare(g, &g->items[g->run[count - 1]], &g->items[j]) != 0) {
                    g->run[count++] = (uint32_t)j;
                }
            }
            /* Oldest runs first, so the chain's head is the newest: [0, HEAD), then runs of
             * RUN_ENTRIES_MAX. */
            size_t last = count;
            uint64_t skip = head;
            while (last > 0) {
                size_t first = last <= INDEX_RUN_HEAD_ENTRIES
                                   ? 0
                                   : INDEX_RUN_HEAD_ENTRIES + (last - 1 - INDEX_RUN_HEAD_ENTRIES) /
                                                                  INDEX_RUN_ENTRIES_MAX *
                                                                  INDEX_RUN_ENTRIES_MAX;
                int rc =
                    index_run_append(g, entries, first, last - first, slot, skip, &head, &max_ts);
                if (rc != 0) {
                    return rc;
                }
                last = first;
            }
            i = j;
        }
        g->publish[g->publish_count++] =
            (struct index_publish){.slot = slot, .head = head, .max_ts = max_ts};
    }
    return 0;
}

/* ---- the cursor's delta records ------------------------------------------------------------ */

void index_delta_splice(const uint8_t *old, size_t old_len, const uint8_t *next, size_t new_len,
                        uint8_t *spliced, struct index_delta_writer *w)
{
    size_t del = old_len > new_len ? old_len - new_len : 0;
    size_t ins = new_len > old_len ? new_len - old_len : 0;
    size_t best_at = old_len < new_len ? old_len : new_len;
    if (del > 0 || ins > 0) {
        /* cost(at): bytes that differ before the splice point, aligned, plus those after it,
         * aligned across the splice; one pass computes cost(0), a second sweeps at upwards. */
        size_t span = del > 0 ? new_len : old_len;
        size_t cost = 0;
        for (size_t i = 0; i < span; i++) {
            cost += del > 0 ? next[i] != old[i + del] : next[i + ins] != old[i];
        }
        size_t best = cost;
        best_at = 0;
        for (size_t i = 0; i < span; i++) {
            bool before = next[i] != old[i];
            bool after = del > 0 ? next[i] != old[i + del] : next[i + ins] != old[i];
            cost = cost + before - after;
            if (cost < best) {
                best = cost;
                best_at = i + 1;
            }
        }
    }
    memcpy(spliced, old, best_at);
    memset(spliced + best_at, 0, ins);
    memcpy(spliced + best_at + ins, old + best_at + del, old_len - best_at - del);
    *w = (struct index_delta_writer){.base = spliced,
                                     .next = next,
                                     .len = new_len,
                                     .at = best_at,
                                     .del = del,
                                     .ins = ins,
                                     .first = true};
}

/* The first byte at or after from where a and b differ (n when none), eight at a time. */
static size_t index_delta_differ(const uint8_t *a, const uint8_t *b, size_t n, size_t from)
{
    size_t i = from;
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        uint64_t y;
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        if (x != y) {
            break;
        }
    }
    while (i < n && a[i] == b[i]) {
        i++;
    }
    return i;
}

/* The next patch from w->pos on into w->patch_start/end; false when there is none. */
static bool index_delta_patch_find(struct index_delta_writer *w)
{
    if (w->base == NULL) {
        w->patch_start = w->pos;
        w->patch_end = w->len;
        w->pos = w->len;
        return w->patch_start < w->len;
    }
    size_t start = index_delta_differ(w->base, w->next, w->len, w->pos);
    if (start == w->len) {
        w->pos = w->len;
        return false;
    }
    size_t end = start + 1;
    for (;;) { /* joins changes closer than INDEX_DELTA_JOIN_GAP_BYTES */
        size_t j = end;
        while (j < w->len && j < end + INDEX_DELTA_JOIN_GAP_BYTES && w->base[j] == w->next[j]) {
            j++;
        }
        if (j < w->len && j < end + INDEX_DELTA_JOIN_GAP_BYTES) {
            end = j + 1;
            continue;
        }
        break;
    }
    w->patch_start = start;
    w->patch_end = end;
    w->pos = end;
    return true;
}

size_t index_delta_writer_next(struct index_delta_writer *w, uint8_t *dst)
{
    if (w->done) {
        return 0;
    }
    memset(dst, 0, INDEX_DELTA_HEADER_BYTES);
    dst[8] = INDEX_RECORD_CURSOR_DELTA;
    ds_put_le32(dst + 12, (uint32_t)w->len);
    ds_put_le64(dst + 16, w->apply);
    ds_put_le32(dst + 24, w->reset && w->first ? 0 : w->base_crc);
    size_t at = INDEX_DELTA_HEADER_BYTES;
    at += ds_varint_put(dst + at, w->first ? w->at : 0);
    at += ds_varint_put(dst + at, w->first ? w->del : 0);
    at += ds_varint_put(dst + at, w->first ? w->ins : 0);
    size_t last_end = 0;
    for (;;) {
        if (w->patch_start == w->patch_end && !index_delta_patch_find(w)) {
            w->done = true;
            break;
        }
        size_t room = INDEX_DELTA_RECORD_BYTES_MAX - at;
        if (room < 2u * DS_VARINT_BYTES_MAX + 1u) {
            break; /* the rest in the next piece */
        }
        size_t take = w->patch_end - w->patch_start;
        take = take < room - 2u * DS_VARINT_BYTES_MAX ? take : room - 2u * DS_VARINT_BYTES_MAX;
        at += ds_varint_put(dst + at, w->patch_start - last_end);
        at += ds_varint_put(dst + at, take);
        memcpy(dst + at, w->next + w->patch_start, take);
        at += take;
        w->patch_start += take;
        last_end = w->patch_start;
    }
    dst[9] = (uint8_t)((w->reset && w->first ? INDEX_DELTA_RESET : 0) |
                       (w->done ? 0 : INDEX_DELTA_MORE));
    ds_put_le32(dst + 4, (uint32_t)at);
    ds_put_le32(dst, ds_crc32c(0, dst + 4, at - 4u));
    DEBUG_ASSERT(index_delta_record_valid(dst, (uint32_t)at));
    w->base_crc = ds_get_le32(dst);
    w->first = false;
    return at;
}

/* Appends the change from the last cursor to cursor[0..cursor_len) as delta records (one, or
 * pieces when it is large) and makes it the handle's cursor. */
static int index_cursor_append(struct index *g, const void *cursor, size_t cursor_len)
{
    if (index_bytes_grow(&g->cursor_spare, &g->cursor_spare_cap, cursor_len) != 0) {
        return -ENOMEM;
    }
    struct index_delta_writer w;
    index_delta_splice(g->cursor, g->cursor_len, cursor, cursor_len, g->cursor_spare, &w);
    w.apply = g->applies + 1;
    w.base_crc = g->cursor_crc;
    uint64_t at = 0;
    for (;;) {
        uint8_t *r = NULL;
        int rc = index_reserve(g, INDEX_DELTA_RECORD_BYTES_MAX, &r);
        if (rc != 0) {
            return rc;
        }
        size_t len = index_delta_writer_next(&w, r);
        if (len == 0) {
            break;
        }
        at = g->log_end;
        g->buffered += len;
        g->log_end += len;
    }
    int rc = index_flush(g);
    if (rc != 0) {
        return rc;
    }
    if (cursor_len > 0) {
        memcpy(g->cursor_spare, cursor, cursor_len);
    }
    pthread_mutex_lock(&g->cursor_lock);
    uint8_t *old = g->cursor;
    size_t old_cap = g->cursor_cap;
    g->cursor = g->cursor_spare;
    g->cursor_cap = g->cursor_spare_cap;
    g->cursor_spare = old;
    g->cursor_spare_cap = old_cap;
    g->cursor_len = cursor_len;
    g->applies++;
    g->cursor_at = at;
    g->cursor_crc = w.base_crc;
    g->cursor_link_crc = w.base_crc;
    pthread_mutex_unlock(&g->cursor_lock);
    return 0;
}

/* index_apply under table_lock. */
static int index_apply_locked(struct index *g, const struct index_entry *entries, size_t n,
                              const void *cursor, size_t cursor_len)
{
    ASSERT(g != NULL);
    ASSERT(g->writer);
    ASSERT(n == 0 || entries != NULL);
    ASSERT(cursor_len == 0 || cursor != NULL);
    if (g->failed) {
        ds_log_error("%s: an earlier apply failed; reopen the index", g->dir);
        return -EIO;
    }
    if (n > g->batch_entries_max || cursor_len > INDEX_CURSOR_BYTES_MAX) {
        ds_log_error("gsi: a batch of %zu entries and a cursor of %zu bytes exceed %" PRIu32
                     " and %u (the cursor's limit: ARCHITECTURE.md)",
                     n, cursor_len, g->batch_entries_max, INDEX_CURSOR_BYTES_MAX);
        return -DS_ELIMIT;
    }
    int rc = index_batch_sort(g, entries, n);
    if (rc != 0) {
        return rc; /* nothing claimed yet */
    }
    rc = index_runs_append(g, entries, n);
    rc = rc == 0 ? index_flush(g) : rc;
    if (rc == 0) {
        for (size_t i = 0; i < g->publish_count; i++) {
            struct index_slot *s = &g->slots[g->publish[i].slot];
            s->max_ts = g->publish[i].max_ts;
            __atomic_store_n(&s->head, g->publish[i].head, __ATOMIC_RELEASE);
        }
        rc = index_cursor_append(g, cursor, cursor_len);
    }
    if (rc != 0) {
        g->failed = true; /* slots claimed, records half written: reopening cuts and rebuilds */
        return rc;        /* the cause (-ENOSPC on a full disk), logged with the file */
    }
    return 0;
}

int index_apply(struct index *g, const struct index_entry *entries, size_t n, const void *cursor,
                size_t cursor_len)
{
    ASSERT(g != NULL);
    ASSERT(g->writer && g->checkpointer != NULL);
    index_checkpoint_table_lock(g); /* a checkpoint's table is the table of one cursor record */
    int rc = index_apply_locked(g, entries, n, cursor, cursor_len);
    index_checkpoint_table_unlock(g);
    if (rc == 0) {
        index_checkpoint_after_apply(g);
    }
    return rc;
}
