/*
 * index_check and index_check_entries (index.h): read every file of an index directory without
 * the writer's lock and without changing anything, through the same record checker the store
 * uses (records.c), and compare DIR/table with the table the log builds. A failed record is
 * damage when an intact record follows it or DIR/table covers it, else a torn tail a crash left.
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

/* ---- checking ------------------------------------------------------------------------------ */

/* One check (index_check): a reader's handle for the log (dir, log_fd, mask, scan buffer, and
 * slots: the table the log's records build as the scan goes), the checkpoint found in
 * DIR/table, and the caller's report. */
struct index_checker {
    struct index *g;
    struct index_check_report *out;
    int table_fd;       /* -1: no DIR/table */
    bool table_valid;   /* its header and body passed; compared when the scan reaches table_end */
    bool table_reached; /* a cursor record ended at table_end and the tables were compared */
    uint8_t *table;     /* its body: table_count entries of INDEX_CHECKPOINT_ENTRY_BYTES */
    uint32_t table_count;
    uint32_t table_cursor_len; /* the cursor it holds after the slots */
    /* The cursor of the last complete apply while the scan is in the pieces of a larger one
     * (which a cut may end): copied when such pieces begin, rare. */
    bool in_pieces;
    uint8_t *committed;
    size_t committed_cap;
    uint64_t table_end;
    uint64_t table_cursor_at;
    uint32_t table_cursor_crc;
    uint64_t apply_number; /* of the last cursor record */
    uint64_t pending_runs; /* of the apply the scan is in */
    uint64_t pending_entries;
    /* the previous run, for skip pointers: a customer's runs of one apply are adjacent */
    uint64_t last_run_end;
    uint32_t last_run_slot;
    uint64_t last_run_skip;
    struct ds_id last_run_customer;
    bool last_sealed; /* the previous run checked was a sealed section */
    bool saw_sealed;  /* the log starts with a compaction's sealed records */
};

static void index_check_damage(struct index_checker *c, const char *fmt, ...) DS_PRINTF(2, 3);

/* Records the first damage found (the later ones follow from it, or wait for the next check). */
static void index_check_damage(struct index_checker *c, const char *fmt, ...)
{
    if (c->out->damaged) {
        return;
    }
    c->out->damaged = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->out->reason, sizeof(c->out->reason), fmt, ap);
    va_end(ap);
}

/* Decodes every entry of a run whose header passed index_record_check into e (the customer set),
 * checking that each decodes into a valid entry and that the tail keys strictly ascend (newest
 * first, no copies within a run); fn (may be NULL) sees each. *newest_ts and *oldest_ts are
 * the first and the last entry's ts. Returns 0, fn's non-zero value or -DS_ECORRUPT. */
static int index_run_entries(const uint8_t *r, uint32_t len, struct index_entry *e,
                             index_entry_fn fn, void *user, int64_t *newest_ts, int64_t *oldest_ts)
{
    size_t at = INDEX_RUN_HEADER_BYTES + r[10];
    uint32_t count = ds_get_le32(r + 12);
    const uint8_t *last_key = NULL;
    size_t last_key_bytes = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (at + 2 > len || at + 2 + r[at] > len) {
            return -DS_ECORRUPT;
        }
        size_t key_bytes = r[at];
        const uint8_t *key = r + at + 1;
        size_t value_bytes = r[at + 1 + key_bytes];
        const uint8_t *value = key + key_bytes + 1;
        if (at + 2 + key_bytes + value_bytes > len || key_bytes > INDEX_TAIL_BYTES_MAX ||
            value_bytes > INDEX_VALUE_BYTES_MAX) {
            return -DS_ECORRUPT;
        }
        at += 2 + key_bytes + value_bytes;
        if (index_key_tail_decode(key, key_bytes, &e->ts_ms, &e->order_id) != 0 ||
            index_key_value_decode(value, value_bytes, e) != 0 ||
            !index_key_id_valid(&e->order_id) || e->ts_ms < DS_TS_MS_MIN ||
            e->ts_ms > DS_TS_MS_MAX ||
            (last_key != NULL &&
             index_key_compare(last_key, last_key_bytes, key, key_bytes) >= 0)) {
            return -DS_ECORRUPT;
        }
        last_key = key;
        last_key_bytes = key_bytes;
        e->day = ds_day_from_ms(e->ts_ms);
        *newest_ts = i == 0 ? e->ts_ms : *newest_ts;
        *oldest_ts = e->ts_ms;
        int rc = fn != NULL ? fn(e, user) : 0;
        if (rc != 0) {
            return rc;
        }
    }
    return at == len ? 0 : -DS_ECORRUPT;
}

/* A run against the table built so far: its slot is its customer's (or, when the probe window
 * was full, its customer's home), its slot's tag never changes, it links to the chain's
 * previous run, and its ts fields agree with its entries and that run. Then it becomes the
 * chain's head. Returns 0, or 1 to stop at damage (recorded). */
static int index_check_run(struct index_checker *c, const uint8_t *r, uint32_t len, uint64_t at,
                           bool sealed)
{
    struct index *g = c->g;
    struct index_entry e;
    memset(&e, 0, sizeof(e));
    int64_t newest = 0;
    int64_t oldest = 0;
    if (index_run_customer(r, &e.customer_id) != 0 ||
        index_run_entries(r, len, &e, NULL, NULL, &newest, &oldest) != 0 ||
        ds_get_le32(r + 44) != 0) {
        index_check_damage(c, "%s/log: the run at offset %" PRIu64 " does not decode", g->dir, at);
        return 1;
    }
    uint32_t slot = ds_get_le32(r + 40);
    uint64_t tag = ds_get_le64(r + 48);
    uint64_t own = index_key_tag(&e.customer_id);
    uint64_t home = own & g->mask;
    struct index_slot *s = &g->slots[slot];
    uint64_t prev = ds_get_le64(r + 16);
    int64_t chain_max = newest > s->max_ts || s->head == 0 ? newest : s->max_ts;
    /* A customer's runs of one apply are adjacent records; its sealed sections of one
     * compaction are adjacent sections (each the first of its record but the first one). */
    bool adjacent = sealed ? c->last_sealed : at == c->last_run_end && !c->last_sealed;
    bool continues =
        adjacent && slot == c->last_run_slot && ds_id_equal(&e.customer_id, &c->last_run_customer);
    uint64_t skip = continues ? c->last_run_skip : prev;
    const char *wrong = NULL;
    if (tag == own ? ((slot - home) & g->mask) >= INDEX_PROBE_MAX : slot != home) {
        wrong = "is in a slot its customer cannot have";
    } else if (s->tag != 0 && s->tag != tag) {
        wrong = "names another owner for its slot than earlier runs";
    } else if (prev != s->head) {
        wrong = "does not link to its chain's previous run";
    } else if ((int64_t)ds_get_le64(r + 56) != (prev != 0 ? s->max_ts : 0) ||
               (int64_t)ds_get_le64(r + 24) != chain_max ||
               (int64_t)ds_get_le64(r + 32) != oldest) {
        wrong = "has ts fields that disagree with its entries or its chain";
    } else if (ds_get_le64(r + 64) != skip) {
        wrong = "has a wrong skip pointer";
    }
    if (wrong != NULL) {
        index_check_damage(c, "%s/log: the run at offset %" PRIu64 " %s", g->dir, at, wrong);
        return 1;
    }
    s->tag = tag;
    s->head = at;
    s->max_ts = chain_max;
    c->last_run_end = at + len;
    c->last_sealed = sealed;
    c->last_run_slot = slot;
    c->last_run_skip = skip;
    c->last_run_customer = e.customer_id;
    c->pending_runs++;
    c->pending_entries += ds_get_le32(r + 12);
    return 0;
}

/* The table built from the log up to the checkpoint's cursor record against the checkpoint. */
static void index_check_table_compare(struct index_checker *c)
{
    struct index *g = c->g;
    uint64_t used = 0;
    for (uint64_t i = 0; i <= g->mask; i++) {
        used += g->slots[i].head != 0;
    }
    if (used != c->table_count) {
        index_check_damage(
            c, "%s/table: holds %" PRIu32 " chains, the log's records up to it build %" PRIu64,
            g->dir, c->table_count, used);
        return;
    }
    for (uint32_t k = 0; k < c->table_count; k++) {
        const uint8_t *t = c->table + (size_t)k * INDEX_CHECKPOINT_ENTRY_BYTES;
        uint32_t index = ds_get_le32(t);
        if (memcmp(t + 4, &g->slots[index], INDEX_SLOT_BYTES) != 0) {
            index_check_damage(c, "%s/table: slot %" PRIu32 " differs from the log's records",
                               g->dir, index);
            return;
        }
    }
}

/* A cursor record (whole, or a delta on the one before: the handle's cursor follows them) ends
 * an apply unless it is a piece with more to come: the apply numbers run 1, 2, ...; where the
 * checkpoint ends, the tables and the cursors are compared. Returns 0, or 1 at damage. */
static int index_check_cursor(struct index_checker *c, const struct index_record *record)
{
    const uint8_t *r = record->bytes;
    uint64_t number = ds_get_le64(r + 16);
    /* A compacted log's first cursor record keeps the number of the apply it stands for. */
    bool first_after_seal = c->apply_number == 0 && c->saw_sealed && number >= 1;
    c->last_sealed = false;
    bool commits = index_record_commits(record->type, r);
    int rc = number == c->apply_number + 1 || first_after_seal ? 0 : -DS_ECORRUPT;
    if (rc == 0 && !commits && !c->in_pieces) {
        rc = index_bytes_grow(&c->committed, &c->committed_cap, c->g->cursor_len);
        if (rc == 0) {
            memcpy(c->committed, c->g->cursor, c->g->cursor_len);
            c->in_pieces = true;
        }
    }
    rc = rc == 0 ? index_cursor_record_apply(c->g, record) : rc;
    if (rc != 0) {
        index_check_damage(c,
                           "%s/log: the cursor record at offset %" PRIu64
                           " has apply number %" PRIu64 " after %" PRIu64
                           ", or does not follow the cursor record before it (%s)",
                           c->g->dir, record->offset, number, c->apply_number, ds_strerror(rc));
        return 1;
    }
    if (!commits) {
        return 0;
    }
    c->in_pieces = false;
    c->apply_number = number;
    struct index_check_report *out = c->out;
    out->cursor_len = c->g->cursor_len;
    out->applies++;
    out->runs += c->pending_runs;
    out->entries += c->pending_entries;
    out->committed_bytes = record->offset + record->len;
    c->pending_runs = 0;
    c->pending_entries = 0;
    if (c->table_valid && out->committed_bytes == c->table_end) {
        c->table_reached = true;
        if (record->offset != c->table_cursor_at || record->crc != c->table_cursor_crc) {
            index_check_damage(c,
                               "%s/table: names another cursor record than the log's at %" PRIu64,
                               c->g->dir, record->offset);
            return 1;
        }
        /* A delta record's table holds the cursor; a whole record's holds none. */
        const uint8_t *held = c->table + (size_t)c->table_count * INDEX_CHECKPOINT_ENTRY_BYTES;
        bool whole = record->type == INDEX_RECORD_CURSOR;
        if ((whole && c->table_cursor_len != 0) ||
            (!whole && (c->table_cursor_len != c->g->cursor_len ||
                        memcmp(held, c->g->cursor, c->table_cursor_len) != 0))) {
            index_check_damage(c, "%s/table: its cursor differs from the log's at %" PRIu64,
                               c->g->dir, record->offset);
            return 1;
        }
        index_check_table_compare(c);
    }
    return c->out->damaged ? 1 : 0;
}

static int index_check_section(struct index *g, const uint8_t *image, uint32_t len, uint64_t offset,
                               void *user)
{
    (void)g;
    return index_check_run(user, image, len, offset, true);
}

static int index_check_record(struct index *g, const struct index_record *record, void *user)
{
    struct index_checker *c = user;
    if (record->type == INDEX_RECORD_CURSOR || record->type == INDEX_RECORD_CURSOR_DELTA) {
        return index_check_cursor(c, record);
    }
    if (record->type == INDEX_RECORD_DIRECTORY) {
        if (c->apply_number != 0) {
            index_check_damage(c, "%s/log: a directory record at offset %" PRIu64 " after an apply",
                               g->dir, record->offset);
            return 1;
        }
        return 0; /* read by queries, which check it; the customer's head section follows */
    }
    if (record->type == INDEX_RECORD_SEALED) {
        if (c->apply_number != 0) {
            index_check_damage(c, "%s/log: a sealed record at offset %" PRIu64 " after an apply",
                               g->dir, record->offset);
            return 1;
        }
        c->saw_sealed = true;
        int rc = index_sealed_sections(g, record->bytes, record->len, record->offset, true,
                                       index_check_section, c);
        if (rc < 0) {
            index_check_damage(c, "%s/log: the sealed record at offset %" PRIu64 " does not decode",
                               g->dir, record->offset);
            return 1;
        }
        return rc;
    }
    return index_check_run(c, record->bytes, record->len, record->offset, false);
}

/* DIR/FORMAT: missing (fine only while there is no log either: *missing), or ours. */
static void index_check_format(struct index_checker *c, bool *missing)
{
    char path[DS_PATH_MAX];
    index_path(c->g, "FORMAT", path);
    char *text = NULL;
    size_t len = 0;
    int rc = ds_read_file(path, INDEX_FORMAT_BYTES_MAX, &text, &len);
    *missing = rc == -ENOENT;
    if (rc == 0 && len == strlen(INDEX_FORMAT_TEXT) && memcmp(text, INDEX_FORMAT_TEXT, len) == 0) {
        free(text);
        return;
    }
    free(text);
    if (rc != -ENOENT) {
        index_check_damage(c, "%s: %s", path,
                           rc == 0 || rc == -EFBIG ? "not \"dayshard-gsi 2\"" : ds_strerror(rc));
    }
}

/* DIR/log's header: its size, magic, CRC, table size and zero padding. Returns true when the
 * records can be read (false: damage recorded, or no header yet, which is fine without a
 * checkpoint: a writer creating the log). */
static bool index_check_log_header(struct index_checker *c)
{
    struct index *g = c->g;
    uint8_t h[INDEX_LOG_HEADER_BYTES];
    size_t got = 0;
    int rc = index_pread_all(g->log_fd, h, sizeof(h), 0, &got);
    if (rc != 0) {
        index_check_damage(c, "%s/log: cannot read: %s", g->dir, ds_strerror(rc));
        return false;
    }
    if (got < sizeof(h)) {
        if (c->table_fd >= 0) {
            index_check_damage(c, "%s/log: %zu bytes, shorter than its header, but %s/table exists",
                               g->dir, got, g->dir);
        }
        return false;
    }
    uint32_t log2 = ds_get_le32(h + 24);
    bool padding_zero = true;
    for (size_t i = 32; i < sizeof(h); i++) {
        padding_zero = padding_zero && h[i] == 0;
    }
    if (memcmp(h, INDEX_LOG_MAGIC, sizeof(INDEX_LOG_MAGIC) - 1) != 0 ||
        ds_get_le32(h + 28) != ds_crc32c(0, h, 28) || log2 < INDEX_TABLE_SLOTS_LOG2_MIN ||
        log2 > INDEX_TABLE_SLOTS_LOG2_MAX || !padding_zero) {
        index_check_damage(c, "%s/log: a bad header", g->dir);
        return false;
    }
    g->slots_log2 = log2;
    g->mask = (1ull << log2) - 1;
    c->out->slots_log2 = log2;
    return true;
}

/* DIR/table on its own: size, header, body CRC, slots sorted and in bounds, and what it covers
 * within the log's size. Sets table_valid when all pass. */
static void index_check_table(struct index_checker *c)
{
    struct index *g = c->g;
    struct stat st;
    uint8_t h[INDEX_TABLE_HEADER_BYTES];
    size_t got = 0;
    int rc = fstat(c->table_fd, &st) == 0 ? 0 : -errno;
    rc = rc == 0 ? index_pread_all(c->table_fd, h, sizeof(h), 0, &got) : rc;
    if (rc != 0) {
        index_check_damage(c, "%s/table: cannot read: %s", g->dir, ds_strerror(rc));
        return;
    }
    uint32_t count = ds_get_le32(h + 56);
    c->table_cursor_len = ds_get_le32(h + 28);
    uint64_t slots_bytes = (uint64_t)count * INDEX_CHECKPOINT_ENTRY_BYTES;
    uint64_t body_bytes = slots_bytes + c->table_cursor_len;
    if (got < sizeof(h) || memcmp(h, INDEX_TABLE_MAGIC, sizeof(INDEX_TABLE_MAGIC) - 1) != 0 ||
        ds_get_le32(h + 60) != ds_crc32c(0, h, 60) || ds_get_le32(h + 24) != g->slots_log2 ||
        count > g->mask + 1 || c->table_cursor_len > INDEX_CURSOR_BYTES_MAX ||
        (uint64_t)st.st_size != INDEX_TABLE_HEADER_BYTES + body_bytes) {
        index_check_damage(c, "%s/table: a bad header (or %lld bytes where it says %" PRIu64 ")",
                           g->dir, (long long)st.st_size, INDEX_TABLE_HEADER_BYTES + body_bytes);
        return;
    }
    c->table_end = ds_get_le64(h + 32);
    c->table_cursor_at = ds_get_le64(h + 40);
    c->table_cursor_crc = ds_get_le32(h + 48);
    c->table_count = count;
    c->out->table_covers_bytes = c->table_end;
    if (c->table_end > c->out->log_bytes || c->table_cursor_at < INDEX_LOG_HEADER_BYTES ||
        c->table_cursor_at >= c->table_end) {
        index_check_damage(c, "%s/table: covers %" PRIu64 " bytes of %s/log, which has %" PRIu64,
                           g->dir, c->table_end, g->dir, c->out->log_bytes);
        return;
    }
    c->table = malloc(body_bytes > 0 ? (size_t)body_bytes : 1);
    if (c->table == NULL) {
        index_check_damage(c, "%s/table: no memory to read %" PRIu64 " bytes", g->dir, body_bytes);
        return;
    }
    rc = index_pread_all(c->table_fd, c->table, (size_t)body_bytes, INDEX_TABLE_HEADER_BYTES, &got);
    bool ok = rc == 0 && got == body_bytes &&
              ds_crc32c(0, c->table, (size_t)body_bytes) == ds_get_le32(h + 52);
    for (uint32_t k = 0; ok && k < count; k++) {
        const uint8_t *t = c->table + (size_t)k * INDEX_CHECKPOINT_ENTRY_BYTES;
        uint32_t index = ds_get_le32(t);
        uint64_t head = ds_get_le64(t + 12);
        ok = index <= g->mask &&
             (k == 0 || index > ds_get_le32(t - INDEX_CHECKPOINT_ENTRY_BYTES)) &&
             ds_get_le64(t + 4) != 0 && head >= INDEX_LOG_HEADER_BYTES && head < c->table_end;
    }
    if (!ok) {
        index_check_damage(c, "%s/table: the slots fail their checksum or bounds", g->dir);
        return;
    }
    c->table_valid = true;
}

/* The records of the log, then what a stop before the end means. */
static void index_check_records(struct index_checker *c)
{
    struct index *g = c->g;
    struct index_check_report *out = c->out;
    uint64_t stop = 0;
    int rc = index_scan(g, g->scan, INDEX_LOG_HEADER_BYTES, out->log_bytes, index_check_record, c,
                        &stop);
    if (rc < 0) {
        index_check_damage(c, "%s/log: cannot read: %s", g->dir, ds_strerror(rc));
    }
    if (out->damaged) {
        return;
    }
    if (stop < out->log_bytes && c->table_valid && stop < c->table_end) {
        index_check_damage(c,
                           "%s/log: the record at offset %" PRIu64
                           " is damaged, inside what %s/table covers (%" PRIu64 " bytes)",
                           g->dir, stop, g->dir, c->table_end);
        return;
    }
    uint64_t intact = 0;
    rc = stop < out->log_bytes ? index_intact_after(g, stop, out->log_bytes, &intact) : 0;
    if (rc != 0 || intact != 0) {
        index_check_damage(c,
                           "%s/log: the record at offset %" PRIu64
                           " is damaged and intact records follow it (at %" PRIu64 ")%s%s",
                           g->dir, stop, intact, rc != 0 ? "; reading: " : "",
                           rc != 0 ? ds_strerror(rc) : "");
        return;
    }
    if (c->table_valid && !c->table_reached) {
        index_check_damage(c, "%s/table: covers %s/log up to %" PRIu64 ", where no apply ends",
                           g->dir, g->dir, c->table_end);
        return;
    }
    out->tail_bytes =
        out->log_bytes - (out->committed_bytes > 0 ? out->committed_bytes : INDEX_LOG_HEADER_BYTES);
    for (uint64_t i = 0; i <= g->mask; i++) {
        out->slots_used += g->slots[i].head != 0;
    }
}

/* The files in order: FORMAT, DIR/table opened before the log's size is taken (a checkpoint
 * written meanwhile covers no more than that size), the log's header, the table, the records. */
static int index_check_files(struct index_checker *c)
{
    struct index *g = c->g;
    bool format_missing = false;
    index_check_format(c, &format_missing);
    char path[DS_PATH_MAX];
    index_path(g, "table", path);
    c->table_fd = open(path, O_RDONLY | O_CLOEXEC);
    c->out->table_present = c->table_fd >= 0;
    index_path(g, "log", path);
    g->log_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (g->log_fd < 0) {
        int err = -errno;
        if (err != -ENOENT) {
            index_check_damage(c, "%s: cannot open: %s", path, ds_strerror(err));
        } else if (c->table_fd >= 0) {
            index_check_damage(c, "%s: missing, but %s/table exists", path, g->dir);
        }
        return 0;
    }
    if (format_missing) {
        index_check_damage(c, "%s/FORMAT: missing", g->dir);
    }
    uint64_t size = 0;
    int rc = index_log_size(g, &size);
    if (rc != 0) {
        index_check_damage(c, "%s: cannot stat: %s", path, ds_strerror(rc));
        return 0;
    }
    c->out->log_bytes = size;
    if (!index_check_log_header(c)) {
        return 0;
    }
    g->slots = calloc((size_t)1 << g->slots_log2, sizeof(*g->slots));
    if (g->slots == NULL) {
        return -ENOMEM;
    }
    if (c->table_fd >= 0) {
        index_check_table(c);
    }
    if (!c->out->damaged) {
        index_check_records(c);
    }
    return 0;
}

/* A handle for reading dir's log without a writer's buffers; the caller opens the files. */
static int index_check_handle(const char *dir, struct index **out)
{
    struct index_config cfg;
    index_config_defaults(&cfg);
    cfg.dir = dir;
    int rc = index_create(&cfg, false, out);
    if (rc != 0) {
        index_close(*out);
        *out = NULL;
    }
    return rc;
}

int index_check(const char *dir, uint8_t **cursor, struct index_check_report *out)
{
    ASSERT(dir != NULL);
    ASSERT(out != NULL);
    memset(out, 0, sizeof(*out));
    if (cursor != NULL) {
        *cursor = NULL;
    }
    struct stat st;
    if (stat(dir, &st) != 0) {
        int err = -errno;
        if (err == -ENOENT) {
            return 0;
        }
        out->present = true;
        out->damaged = true;
        snprintf(out->reason, sizeof(out->reason), "%s: %s", dir, ds_strerror(err));
        return 0;
    }
    out->present = true;
    struct index *g = NULL;
    int rc = index_check_handle(dir, &g);
    if (rc != 0) {
        return rc;
    }
    struct index_checker c = {.g = g, .out = out, .table_fd = -1};
    rc = index_check_files(&c);
    if (rc == 0 && cursor != NULL && out->cursor_len > 0) {
        /* The last complete apply's: the handle's cursor may hold a piece of a cut one since. */
        *cursor = malloc(out->cursor_len);
        rc = *cursor == NULL ? -ENOMEM : 0;
        if (rc == 0) {
            memcpy(*cursor, c.in_pieces ? c.committed : g->cursor, out->cursor_len);
        }
    }
    free(c.committed);
    if (c.table_fd >= 0) {
        close(c.table_fd);
    }
    free(c.table);
    index_close(g);
    ASSERT(out->damaged == (out->reason[0] != '\0'));
    return rc;
}

/* index_check_entries: each run's entries to the caller's function. */
struct index_entries_visit {
    index_entry_fn fn;
    void *user;
};

static int index_entries_run(struct index *g, const uint8_t *r, uint32_t len, uint64_t offset,
                             void *user)
{
    (void)g;
    (void)offset;
    struct index_entries_visit *v = user;
    struct index_entry e;
    memset(&e, 0, sizeof(e));
    int64_t newest = 0;
    int64_t oldest = 0;
    int rc = index_run_customer(r, &e.customer_id);
    return rc == 0 ? index_run_entries(r, len, &e, v->fn, v->user, &newest, &oldest) : rc;
}

static int index_entries_record(struct index *g, const struct index_record *record, void *user)
{
    if (record->type == INDEX_RECORD_SEALED) {
        return index_sealed_sections(g, record->bytes, record->len, record->offset, true,
                                     index_entries_run, user);
    }
    if (record->type != INDEX_RECORD_RUN) {
        return 0;
    }
    return index_entries_run(g, record->bytes, record->len, record->offset, user);
}

int index_check_entries(const char *dir, uint64_t until, index_entry_fn fn, void *user)
{
    ASSERT(dir != NULL);
    ASSERT(fn != NULL);
    struct index *g = NULL;
    int rc = index_check_handle(dir, &g);
    if (rc != 0) {
        return rc;
    }
    char path[DS_PATH_MAX];
    index_path(g, "log", path);
    g->log_fd = open(path, O_RDONLY | O_CLOEXEC);
    uint8_t h[INDEX_LOG_HEADER_BYTES];
    size_t got = 0;
    rc = g->log_fd >= 0 ? index_pread_all(g->log_fd, h, sizeof(h), 0, &got) : -errno;
    if (rc == 0 && got == sizeof(h)) {
        uint32_t log2 = ds_get_le32(h + 24);
        g->mask = log2 >= INDEX_TABLE_SLOTS_LOG2_MIN && log2 <= INDEX_TABLE_SLOTS_LOG2_MAX
                      ? (1ull << log2) - 1
                      : 0;
    }
    rc = rc == 0 && (got != sizeof(h) || g->mask == 0) ? -DS_ECORRUPT : rc;
    struct index_entries_visit visit = {.fn = fn, .user = user};
    uint64_t stop = 0;
    if (rc == 0 && until > INDEX_LOG_HEADER_BYTES) {
        rc = index_scan(g, g->scan, INDEX_LOG_HEADER_BYTES, until, index_entries_record, &visit,
                        &stop);
        rc = rc == 0 && stop != until ? -DS_ECORRUPT : rc;
    }
    index_close(g);
    return rc;
}
