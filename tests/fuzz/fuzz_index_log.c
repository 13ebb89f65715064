/*
 * libFuzzer harness for the log replay of index/store.c, the by-customer index store: the
 * bytes of DIR/log are outside input after a crash or a bad disk.
 *
 * Input: a flags byte, then the log. A fresh store is created and closed first (so FORMAT, the
 * log header and the table are the store's own); then DIR/log is replaced by the input's log,
 * after the store's own 64-byte header when FLAG_HEADER is set (so the fuzzer need not guess
 * it), FORMAT removed unless FLAG_FORMAT, DIR/table removed unless FLAG_TABLE (the one close
 * wrote covers a shorter log than the input's).
 *
 * Properties, any broken one aborts: index_open_reader and index_open return 0 or a documented
 * error (the reader's include -DS_ECORRUPT); on an open handle index_cursor and index_query return
 * 0 or a documented error, pages hold at most limit entries of the queried customer, valid,
 * strictly newest first across the pages of a walk, with a token of the documented shape that
 * the next query accepts; a walk ends within its page bound (a token that does not advance
 * would loop). The writer then takes an apply whose entry sorts before every other of its
 * customer: the first page shows it, and after close and reopen the cursor is that apply's (the
 * open cut the damaged tail cleanly).
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "index/index_private.h"
#include "tests/support/tempdir.h"

#define FLAG_FORMAT 0x01u
#define FLAG_TABLE 0x02u
#define FLAG_HEADER 0x04u
#define LOG_HEADER_BYTES 64u
/* Pages a walk may take: the input is at most a few MB of log, and the walks use limits of
 * 1, 7 and 1000 on a handful of customers; a longer walk means a token that does not advance. */
#define WALK_PAGES_MAX 4096u
#define LIMIT_COUNT 3u
#define CUSTOMER_COUNT 5u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct harness {
    char dir[64];
    char index_dir[128];
    struct index_config cfg;
    struct index_entry entries[INDEX_PAGE_LIMIT_MAX];
    uint8_t cursor[256]; /* a longer one is -ENOSPC, with its length */
};

static void check(bool ok)
{
    if (!ok) {
        abort();
    }
}

static void path_of(const struct harness *h, const char *name, char *dst, size_t cap)
{
    snprintf(dst, cap, "%s/%s", h->index_dir, name);
}

static void file_put(const char *path, const uint8_t *a, size_t a_len, const uint8_t *b,
                     size_t b_len)
{
    FILE *file = fopen(path, "wb");
    check(file != NULL);
    check(fwrite(a, 1, a_len, file) == a_len);
    check(b_len == 0 || fwrite(b, 1, b_len, file) == b_len);
    check(fclose(file) == 0);
}

/* A fresh store, closed, with its DIR/log replaced as the header comment says. */
static void layout_make(struct harness *h, uint8_t flags, const uint8_t *log, size_t log_len)
{
    struct index *g = NULL;
    check(index_open(&h->cfg, &g) == 0);
    index_close(g);
    char path[192];
    path_of(h, "log", path, sizeof(path));
    uint8_t header[LOG_HEADER_BYTES] = {0};
    size_t header_len = 0;
    FILE *file = fopen(path, "rb");
    if (file != NULL) {
        header_len = fread(header, 1, sizeof(header), file);
        fclose(file);
    }
    if ((flags & FLAG_HEADER) == 0) {
        header_len = 0;
    }
    file_put(path, header, header_len, log, log_len);
    if ((flags & FLAG_FORMAT) == 0) {
        path_of(h, "FORMAT", path, sizeof(path));
        check(unlink(path) == 0 || errno == ENOENT);
    }
    if ((flags & FLAG_TABLE) == 0) {
        path_of(h, "table", path, sizeof(path));
        check(unlink(path) == 0 || errno == ENOENT);
    }
}

static bool id_equal(const struct ds_id *a, const struct ds_id *b)
{
    return a->is_string == b->is_string && a->len == b->len && a->value == b->value &&
           memcmp(a->text, b->text, a->len) == 0;
}

static bool entry_valid(const struct index_entry *e, const struct ds_id *customer)
{
    return id_equal(&e->customer_id, customer) && index_key_id_valid(&e->order_id) &&
           e->ts_ms >= DS_TS_MS_MIN && e->ts_ms <= DS_TS_MS_MAX &&
           e->day == ds_day_from_ms(e->ts_ms) && e->status_len <= DS_STATUS_BYTES_MAX;
}

static bool query_rc_documented(int rc)
{
    return rc == 0 || rc == -DS_ECORRUPT || rc == -EIO;
}

/* Walks every page of customer at limit, checking the properties of the header comment. */
static void walk(struct harness *h, struct index *g, const struct ds_id *customer, uint32_t limit)
{
    char token[INDEX_TOKEN_CHARS_MAX + 1] = "";
    uint8_t last[INDEX_TAIL_BYTES_MAX];
    size_t last_len = 0;
    for (uint32_t pages = 0; pages < WALK_PAGES_MAX; pages++) {
        struct index_page page = {.entries = h->entries};
        int rc = index_query(g, customer, limit, token, &page);
        check(query_rc_documented(rc));
        if (rc != 0) {
            return;
        }
        check(page.count <= limit);
        for (uint32_t i = 0; i < page.count; i++) {
            check(entry_valid(&page.entries[i], customer));
            uint8_t tail[INDEX_TAIL_BYTES_MAX];
            size_t len =
                index_key_tail_encode(page.entries[i].ts_ms, &page.entries[i].order_id, tail);
            int order = memcmp(last, tail, len < last_len ? len : last_len);
            check(last_len == 0 || order < 0 || (order == 0 && last_len < len));
            memcpy(last, tail, len);
            last_len = len;
        }
        size_t token_len = strnlen(page.next_token, sizeof(page.next_token));
        check(token_len <= INDEX_TOKEN_CHARS_MAX);
        if (!page.has_next) {
            check(token_len == 0);
            return;
        }
        check(token_len > 0 && page.count == limit);
        memcpy(token, page.next_token, token_len + 1);
    }
    abort(); /* the walk did not end */
}

static void customers_make(struct ds_id *c)
{
    memset(c, 0, CUSTOMER_COUNT * sizeof(*c));
    c[0].value = 1;
    c[1].value = 42;
    c[2].is_string = true;
    c[2].len = 2;
    memcpy(c[2].text, "42", 2);
    c[3].is_string = true;
    c[3].len = 2;
    memcpy(c[3].text, "\0\xff", 2);
    c[4].value = INT64_MAX;
}

/* The cursor and a walk of each customer at each limit. */
static void handle_check(struct harness *h, struct index *g)
{
    size_t len = 0;
    int rc = index_cursor(g, h->cursor, sizeof(h->cursor), &len);
    check(rc == 0 || rc == -ENOSPC || rc == -DS_ECORRUPT || rc == -EIO);
    check((rc != 0 || len <= sizeof(h->cursor)) && (rc != -ENOSPC || len > sizeof(h->cursor)));
    check(len <= INDEX_CURSOR_BYTES_MAX);
    static const uint32_t limits[LIMIT_COUNT] = {1, 7, INDEX_PAGE_LIMIT_MAX};
    struct ds_id customers[CUSTOMER_COUNT];
    customers_make(customers);
    for (size_t c = 0; c < CUSTOMER_COUNT; c++) {
        for (size_t l = 0; l < LIMIT_COUNT; l++) {
            walk(h, g, &customers[c], limits[l]);
        }
    }
}

static bool open_rc_documented(int rc)
{
    return rc == 0 || rc == -DS_EFORMAT || rc == -ENOMEM || rc == -EIO;
}

/* Customer 42's newest possible entry: the last timestamp, a string order id of 64 0xff. */
static void newest_entry(struct index_entry *e)
{
    memset(e, 0, sizeof(*e));
    e->customer_id.value = 42;
    e->ts_ms = DS_TS_MS_MAX;
    e->day = ds_day_from_ms(e->ts_ms);
    e->order_id.is_string = true;
    e->order_id.len = DS_ID_BYTES_MAX;
    memset(e->order_id.text, 0xff, DS_ID_BYTES_MAX);
    e->status_len = 4;
    memcpy(e->status, "fuzz", 4);
    e->amount_units = -7;
}

/* On the writer: an apply after the cut shows at once and its cursor survives a reopen. */
static void writer_check(struct harness *h, struct index *g)
{
    struct index_entry e;
    newest_entry(&e);
    int rc = index_apply(g, &e, 1, "fuzz-cursor", 11);
    check(rc == 0 || rc == -EIO);
    if (rc != 0) {
        index_close(g);
        return;
    }
    struct index_page page = {.entries = h->entries};
    rc = index_query(g, &e.customer_id, 1, NULL, &page);
    check(query_rc_documented(rc));
    check(rc != 0 || (page.count == 1 && page.entries[0].amount_units == -7 &&
                      id_equal(&page.entries[0].order_id, &e.order_id)));
    index_close(g);
    g = NULL;
    check(index_open(&h->cfg, &g) == 0);
    size_t len = 0;
    check(index_cursor(g, h->cursor, sizeof(h->cursor), &len) == 0);
    check(len == 11 && memcmp(h->cursor, "fuzz-cursor", 11) == 0);
    index_close(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    struct harness *h = calloc(1, sizeof(*h));
    check(h != NULL);
    check(test_tempdir_make(h->dir, sizeof(h->dir)) == 0);
    snprintf(h->index_dir, sizeof(h->index_dir), "%s/gsi", h->dir);
    index_config_defaults(&h->cfg);
    h->cfg.dir = h->index_dir;
    h->cfg.table_slots_log2 = INDEX_TABLE_SLOTS_LOG2_MIN; /* long chains, and quick to load */
    h->cfg.batch_entries_max = 16;
    h->cfg.checkpoint_bytes = INDEX_CHECKPOINT_BYTES_MIN;
    layout_make(h, data[0], data + 1, size - 1);
    struct index *g = NULL;
    /* A reader also refuses damage followed by intact records (-DS_ECORRUPT), where the writer
     * cuts the log there and its builder replays. */
    int rc = index_open_reader(&h->cfg, &g);
    check(open_rc_documented(rc) || rc == -ENOENT || rc == -DS_ECORRUPT);
    if (rc == 0) {
        handle_check(h, g);
        rc = index_refresh(g);
        check(rc == 0 || rc == -EIO || rc == -DS_ECORRUPT);
        index_close(g);
        g = NULL;
    }
    rc = index_open(&h->cfg, &g);
    check(open_rc_documented(rc));
    if (rc == 0) {
        handle_check(h, g);
        writer_check(h, g);
    }
    test_tempdir_remove(h->dir);
    free(h);
    return 0;
}
