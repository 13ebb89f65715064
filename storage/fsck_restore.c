/*
 * The storage side of the restore from the topic (storage.h, "restore from the topic"): the
 * quarantined ranges and their markers, and in the orders model the orders a restore brings
 * back. The Kafka reading lives in ingest/kafka_restore.c, above this folder; events reach the
 * store through storage_append like a node's.
 *
 * Invariants: a range's marker says DONE only after the commit holding its last restored event;
 * a STARTED marker names the commit sequence before the restore's first append, so in the
 * events model (where appending twice counts twice) a restore that died after that commit is
 * recognised by a higher sequence and not applied again. In the orders model a restore touches
 * only the orders its repair reverted or lost and appends their versions by the model's rules,
 * so running it again changes nothing once they are back; an order back at the version it had
 * gets the versions_seen it had then (its orders.jsonl line keeps it), not one more per version
 * appended again.
 *
 * Rejected: re-applying every event of a range in the orders model. An event without a version
 * is applied whenever its content differs from the current one, so replaying an old event of an
 * order whose current version survived the damage would revert that order.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage/fsck_orders.h"
#include "storage/fsck_restore.h"
#include "storage/ids.h"
#include "storage/store.h"

#define RECORD_FILE_BYTES_MAX 4096u
#define MARKER_BYTES_MAX 512u

/* A path into dst (DS_PATH_MAX bytes); a longer one is a broken invariant: every name here is
 * short and dir was opened by the same path. */
DS_PRINTF(2, 3) static void path_format(char *dst, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(dst, DS_PATH_MAX, fmt, args);
    va_end(args);
    ASSERT(n > 0 && n < DS_PATH_MAX);
}

/* ---- reading our own JSON ---------------------------------------------------------------- */

/* Where the value of "key" begins in text[0, len) (a flat object this folder wrote), or NULL. */
static const char *json_value(const char *text, size_t len, const char *key)
{
    char pattern[64];
    int n = snprintf(pattern, sizeof(pattern), "\"%s\":", key);
    ASSERT(n > 0 && n < (int)sizeof(pattern));
    const char *at = memmem(text, len, pattern, (size_t)n);
    return at != NULL ? at + n : NULL;
}

/* An integer (or null: *is_null) at p, before end. Returns 0 or -DS_ECORRUPT. */
static int json_i64(const char *p, const char *end, int64_t *out, bool *is_null)
{
    if (p == NULL) {
        return -DS_ECORRUPT;
    }
    if (end - p >= 4 && memcmp(p, "null", 4) == 0) {
        *is_null = true;
        *out = 0;
        return 0;
    }
    bool negative = p < end && *p == '-';
    p += negative ? 1 : 0;
    if (p >= end || *p < '0' || *p > '9') {
        return -DS_ECORRUPT;
    }
    uint64_t v = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        if (v > (uint64_t)INT64_MAX / 10) {
            return -DS_ECORRUPT;
        }
        v = v * 10 + (uint64_t)(*p - '0');
        p++;
    }
    if (v > (uint64_t)INT64_MAX) {
        return -DS_ECORRUPT;
    }
    *is_null = false;
    *out = negative ? -(int64_t)v : (int64_t)v;
    return 0;
}

static int field_i64(const char *text, size_t len, const char *key, int64_t *out, bool *is_null)
{
    return json_i64(json_value(text, len, key), text + len, out, is_null);
}

/* A JSON string at p (escapes \" \\ \uXXXX below 0x100, as this folder writes them) into dst
 * (not NUL-terminated); returns its length or -DS_ECORRUPT. */
static int json_string(const char *p, const char *end, char *dst, size_t capacity)
{
    if (p == NULL || p >= end || *p != '"') {
        return -DS_ECORRUPT;
    }
    size_t n = 0;
    for (p++; p < end && *p != '"'; p++) {
        char c = *p;
        if (c == '\\') {
            if (p + 1 >= end) {
                return -DS_ECORRUPT;
            }
            p++;
            c = *p;
            if (c == 'u') {
                unsigned v = 0;
                if (end - p < 5 || sscanf(p + 1, "%4x", &v) != 1 || v > 0xff) {
                    return -DS_ECORRUPT;
                }
                c = (char)v;
                p += 4;
            } else if (c != '"' && c != '\\' && c != '/') {
                return -DS_ECORRUPT;
            }
        }
        if (n >= capacity) {
            return -DS_ECORRUPT;
        }
        dst[n++] = c;
    }
    return p < end ? (int)n : -DS_ECORRUPT;
}

static int json_date(const char *p, const char *end, int32_t *day)
{
    char text[DS_DATE_TEXT_SIZE];
    int n = json_string(p, end, text, sizeof(text));
    return n > 0 && ds_date_parse(text, (size_t)n, day) == 0 ? 0 : -DS_ECORRUPT;
}

/* ---- records and markers ----------------------------------------------------------------- */

static int parse_source(const char *text, size_t len, struct storage_restore_range *out)
{
    int64_t partition = 0;
    int64_t lo = 0;
    int64_t hi = 0;
    bool null_p = false;
    bool null_lo = false;
    bool null_hi = false;
    if (field_i64(text, len, "source_partition", &partition, &null_p) != 0 ||
        field_i64(text, len, "source_offset_min", &lo, &null_lo) != 0 ||
        field_i64(text, len, "source_offset_max", &hi, &null_hi) != 0) {
        return -DS_ECORRUPT;
    }
    if (null_p || null_lo || null_hi) {
        out->source_partition = STORAGE_RESTORE_SOURCE_UNKNOWN;
        out->source_offset_min = 0;
        out->source_offset_max = -1;
        return 0;
    }
    if (partition < DS_SOURCE_FILE - 1 || partition > INT32_MAX || lo < 0 || hi < lo) {
        return -DS_ECORRUPT;
    }
    out->source_partition = (int32_t)partition;
    out->source_offset_min = lo;
    out->source_offset_max = hi;
    return 0;
}

int fsck_restore_parse_record(const char *text, size_t len, struct storage_restore_range *out)
{
    const char *end = text + len;
    struct storage_restore_range r = {.state = STORAGE_RESTORE_PENDING};
    int64_t shard = 0;
    int64_t events = 0;
    bool is_null = false;
    const char *committed = json_value(text, len, "committed");
    if (json_date(json_value(text, len, "day"), end, &r.day) != 0 ||
        field_i64(text, len, "shard", &shard, &is_null) != 0 || is_null || shard < 0 ||
        shard > UINT32_MAX || committed == NULL ||
        field_i64(text, len, "events", &events, &is_null) != 0 || events < 0 ||
        parse_source(text, len, &r) != 0) {
        return -DS_ECORRUPT;
    }
    r.shard = (uint32_t)shard;
    r.events_known = !is_null;
    r.events = (uint64_t)events;
    r.committed = end - committed >= 4 && memcmp(committed, "true", 4) == 0;
    memcpy(r.name, out->name, sizeof(r.name));
    *out = r;
    return 0;
}

int fsck_restore_parse_marker(const char *text, size_t len, struct storage_restore_range *out)
{
    const char *end = text + len;
    char state[16];
    int n = json_string(json_value(text, len, "state"), end, state, sizeof(state));
    int64_t seq = 0;
    bool is_null = false;
    if (n == 7 && memcmp(state, "started", 7) == 0 &&
        field_i64(text, len, "commit_seq", &seq, &is_null) == 0 && !is_null && seq >= 0) {
        out->state = STORAGE_RESTORE_STARTED;
        out->started_seq = (uint64_t)seq;
        return 0;
    }
    if (n == 4 && memcmp(state, "done", 4) == 0) {
        out->state = STORAGE_RESTORE_DONE;
        return 0;
    }
    return -DS_ECORRUPT;
}

static int json_id(const char *p, const char *end, struct ds_id *id)
{
    *id = (struct ds_id){0};
    if (p != NULL && p < end && *p == '"') {
        int n = json_string(p, end, id->text, sizeof(id->text));
        if (n <= 0) {
            return -DS_ECORRUPT;
        }
        id->is_string = true;
        id->len = (uint8_t)n;
        return 0;
    }
    bool is_null = false;
    return json_i64(p, end, &id->value, &is_null) == 0 && !is_null ? 0 : -DS_ECORRUPT;
}

int fsck_restore_parse_order(const char *line, size_t len, struct restore_order_line *out)
{
    const char *end = line + len;
    struct restore_order_line o = {0};
    const char *had = json_value(line, len, "had");
    if (json_id(json_value(line, len, "order"), end, &o.id) != 0 || had == NULL) {
        return -DS_ECORRUPT;
    }
    /* The fields of "had" only: "now" repeats the names. */
    const char *had_end = memchr(had, '}', (size_t)(end - had));
    if (had_end == NULL) {
        return -DS_ECORRUPT;
    }
    size_t had_len = (size_t)(had_end - had);
    bool no_version = false;
    bool is_null = false;
    int n = json_string(json_value(had, had_len, "status"), had_end, o.status, sizeof(o.status));
    if (json_date(json_value(had, had_len, "day"), had_end, &o.day) != 0 ||
        field_i64(had, had_len, "ts_ms", &o.ts_ms, &is_null) != 0 || is_null ||
        field_i64(had, had_len, "version", &o.version, &no_version) != 0 || n < 0) {
        return -DS_ECORRUPT;
    }
    /* Optional: a line without it gives 0 (unknown), and the restore leaves the order's count
     * as the store has it. */
    int64_t seen = 0;
    if (json_value(had, had_len, "versions_seen") != NULL &&
        (field_i64(had, had_len, "versions_seen", &seen, &is_null) != 0 || is_null || seen < 0 ||
         seen > UINT32_MAX)) {
        return -DS_ECORRUPT;
    }
    o.versions_seen = (uint32_t)seen;
    o.has_version = !no_version;
    o.status_len = (uint8_t)n;
    *out = o;
    return 0;
}

/* ---- the ranges -------------------------------------------------------------------------- */

static bool has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s);
    size_t m = strlen(suffix);
    return n > m && strcmp(s + n - m, suffix) == 0;
}

static int range_compare(const void *a, const void *b)
{
    const struct storage_restore_range *x = a;
    const struct storage_restore_range *y = b;
    return strcmp(x->name, y->name);
}

/* Reads record <name>.json and marker <name>.restore (if any) of DIR/quarantine into r. */
static int range_read(const char *qdir, const char *file, struct storage_restore_range *r)
{
    size_t stem = strlen(file) - strlen(".json");
    if (stem >= sizeof(r->name)) {
        return -DS_ECORRUPT;
    }
    memset(r, 0, sizeof(*r));
    memcpy(r->name, file, stem);
    char path[DS_PATH_MAX];
    path_format(path, "%s/%s", qdir, file);
    char *text = NULL;
    size_t len = 0;
    int rc = ds_read_file(path, RECORD_FILE_BYTES_MAX, &text, &len);
    if (rc == 0) {
        rc = fsck_restore_parse_record(text, len, r);
        free(text);
    }
    if (rc != 0) {
        ds_log_error("%s: cannot read the quarantine record: %s", path, ds_strerror(rc));
        return rc;
    }
    path_format(path, "%s/%s.restore", qdir, r->name);
    rc = ds_read_file(path, MARKER_BYTES_MAX, &text, &len);
    if (rc == -ENOENT) {
        return 0;
    }
    if (rc == 0) {
        rc = fsck_restore_parse_marker(text, len, r);
        free(text);
    }
    if (rc != 0) {
        ds_log_error("%s: cannot read the restore marker: %s", path, ds_strerror(rc));
    }
    return rc;
}

int storage_restore_ranges(const char *dir, struct storage_restore_range *out, uint32_t capacity,
                           uint32_t *count)
{
    char qdir[DS_PATH_MAX];
    path_format(qdir, "%s/quarantine", dir);
    DIR *d = opendir(qdir);
    if (d == NULL) {
        if (errno == ENOENT) {
            *count = 0;
            return 0;
        }
        return -errno;
    }
    uint32_t n = 0;
    int rc = 0;
    for (struct dirent *e = readdir(d); e != NULL && rc == 0; e = readdir(d)) {
        if (!has_suffix(e->d_name, ".json")) {
            continue; /* the .bin copies, markers, .jsonl files, a damaged MANIFEST's copy */
        }
        rc = n < capacity ? range_read(qdir, e->d_name, &out[n]) : -DS_ELIMIT;
        n += rc == 0 ? 1 : 0;
    }
    closedir(d);
    if (rc != 0) {
        return rc;
    }
    qsort(out, n, sizeof(*out), range_compare);
    *count = n;
    return 0;
}

int storage_restore_mark(const char *dir, const struct storage_restore_range *range,
                         enum storage_restore_state state, uint64_t started_seq,
                         const struct storage_restore_tally *tally)
{
    ASSERT(state == STORAGE_RESTORE_STARTED || state == STORAGE_RESTORE_DONE);
    char text[MARKER_BYTES_MAX];
    int n = 0;
    if (state == STORAGE_RESTORE_STARTED) {
        n = snprintf(text, sizeof(text), "{\"state\":\"started\",\"commit_seq\":%" PRIu64 "}\n",
                     started_seq);
    } else {
        ASSERT(tally != NULL);
        n = snprintf(text, sizeof(text),
                     "{\"state\":\"done\",\"events_read\":%" PRIu64 ",\"events_applied\":%" PRIu64
                     ",\"offsets_missing\":%" PRIu64 ",\"events_lost\":%" PRIu64 "}\n",
                     tally->events_read, tally->events_applied, tally->offsets_missing,
                     tally->events_lost);
    }
    ASSERT(n > 0 && n < (int)sizeof(text));
    char path[DS_PATH_MAX];
    path_format(path, "%s/quarantine/%s.restore", dir, range->name);
    int rc = ds_write_file_atomic(path, text, (size_t)n);
    if (rc != 0) {
        ds_log_error("%s: cannot write: %s", path, ds_strerror(rc));
    }
    return rc;
}

/* ---- the orders to bring back ------------------------------------------------------------ */

/* orders.jsonl files read at most: one per repair. */
#define RESTORE_ORDER_FILES_MAX 256u

struct storage_restore_orders {
    void *scratch;                /* STORAGE_ORDER_SCRATCH_BYTES, for lookups */
    struct restore_order_line *v; /* sorted by id, one per order */
    uint64_t count;
    uint64_t capacity;
    uint32_t file_count;
    char files[RESTORE_ORDER_FILES_MAX][STORAGE_RESTORE_NAME_BYTES];
};

static int id_compare(const struct ds_id *a, const struct ds_id *b)
{
    if (a->is_string != b->is_string) {
        return a->is_string ? 1 : -1;
    }
    if (!a->is_string) {
        return a->value < b->value ? -1 : a->value > b->value;
    }
    int c = memcmp(a->text, b->text, a->len < b->len ? a->len : b->len);
    return c != 0 ? c : (int)a->len - (int)b->len;
}

static int order_line_compare(const void *a, const void *b)
{
    const struct restore_order_line *x = a;
    const struct restore_order_line *y = b;
    return id_compare(&x->id, &y->id);
}

/* The fields of a version a line of orders.jsonl keeps (the amount is not among them). */
static bool same_version(const struct restore_order_line *had, bool has_version, int64_t version,
                         int64_t ts_ms, const char *status, uint8_t status_len)
{
    return has_version == had->has_version && version == had->version && ts_ms == had->ts_ms &&
           ds_day_from_ms(ts_ms) == had->day && status_len == had->status_len &&
           memcmp(status, had->status, status_len) == 0;
}

/* Whether the order holds the version it had or a later one, by number: a version number names
 * one content (an equal number with other content is stale), so this needs no other field. */
static bool numbered_back(const struct restore_order_line *had, const struct storage_order *now)
{
    return had->has_version && now->has_version && now->version >= had->version;
}

/* RESTORE_BACK (its version before the repair, as far as the line tells, and read back from
 * the topic; or a newer one), RESTORE_REVERTED, RESTORE_LOST, or a negated errno. */
enum { RESTORE_BACK, RESTORE_REVERTED, RESTORE_LOST };
static int order_outcome(struct storage *st, const struct restore_order_line *had, bool found,
                         void *scratch)
{
    struct storage_order now;
    int rc = storage_order_get(st, &had->id, &now, scratch, STORAGE_ORDER_SCRATCH_BYTES);
    if (rc == -ENOENT) {
        return RESTORE_LOST;
    }
    if (rc != 0) {
        return rc;
    }
    if (numbered_back(had, &now) ||
        (found &&
         same_version(had, now.has_version, now.version, now.ts_ms, now.status, now.status_len))) {
        return RESTORE_BACK;
    }
    return RESTORE_REVERTED;
}

static int orders_push(struct storage_restore_orders *o, const struct restore_order_line *line)
{
    if (o->count == o->capacity) {
        uint64_t capacity = o->capacity == 0 ? 1024 : o->capacity * 2;
        void *v = realloc(o->v, capacity * sizeof(*o->v));
        if (v == NULL) {
            return -ENOMEM;
        }
        o->v = v;
        o->capacity = capacity;
    }
    o->v[o->count++] = *line;
    return 0;
}

/* Adds the orders of one orders.jsonl that are not back. */
static int orders_read_file(struct storage *st, struct storage_restore_orders *o, const char *path,
                            void *scratch)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        return -errno;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len = 0;
    int rc = 0;
    while (rc == 0 && (len = getline(&line, &cap, f)) > 0) {
        struct restore_order_line had;
        rc = fsck_restore_parse_order(line, (size_t)len, &had);
        if (rc != 0) {
            ds_log_error("%s: an unreadable line: %.*s", path, (int)(len > 200 ? 200 : len), line);
            break;
        }
        struct storage_order now;
        rc = storage_order_get(st, &had.id, &now, scratch, STORAGE_ORDER_SCRATCH_BYTES);
        had.settled = rc == 0 && numbered_back(&had, &now);
        rc = rc == -ENOENT ? 0 : rc;
        rc = rc == 0 ? orders_push(o, &had) : rc;
    }
    free(line);
    fclose(f);
    return rc;
}

static int orders_read_dir(struct storage *st, struct storage_restore_orders *o, void *scratch)
{
    char qdir[DS_PATH_MAX];
    path_format(qdir, "%s/quarantine", st->dir);
    DIR *d = opendir(qdir);
    if (d == NULL) {
        return errno == ENOENT ? 0 : -errno;
    }
    int rc = 0;
    for (struct dirent *e = readdir(d); e != NULL && rc == 0; e = readdir(d)) {
        if (!has_suffix(e->d_name, ".orders.jsonl") ||
            strlen(e->d_name) >= STORAGE_RESTORE_NAME_BYTES) {
            continue;
        }
        char path[DS_PATH_MAX];
        path_format(path, "%s/%s.restored", qdir, e->d_name);
        if (access(path, F_OK) == 0) {
            continue;
        }
        if (o->file_count == RESTORE_ORDER_FILES_MAX) {
            rc = -DS_ELIMIT;
            break;
        }
        memcpy(o->files[o->file_count++], e->d_name, strlen(e->d_name) + 1); /* length checked */
        path_format(path, "%s/%s", qdir, e->d_name);
        rc = orders_read_file(st, o, path, scratch);
        if (rc != 0) {
            ds_log_error("%s: %s", path, ds_strerror(rc));
        }
    }
    closedir(d);
    return rc;
}

int storage_restore_orders_load(struct storage *st, struct storage_restore_orders **out)
{
    struct storage_restore_orders *o = calloc(1, sizeof(*o));
    void *scratch = malloc(STORAGE_ORDER_SCRATCH_BYTES);
    int rc = o != NULL && scratch != NULL ? 0 : -ENOMEM;
    if (o != NULL) {
        o->scratch = scratch;
    } else {
        free(scratch);
    }
    if (rc == 0 && storage_model(st) == STORAGE_MODEL_ORDERS) {
        rc = orders_read_dir(st, o, scratch);
    }
    if (rc != 0) {
        storage_restore_orders_destroy(o);
        return rc;
    }
    if (o->count > 0) {
        qsort(o->v, o->count, sizeof(*o->v), order_line_compare);
    }
    /* An order two repairs lost is wanted once: keep the first line of each id. */
    uint64_t kept = 0;
    for (uint64_t i = 0; i < o->count; i++) {
        if (kept == 0 || id_compare(&o->v[kept - 1].id, &o->v[i].id) != 0) {
            o->v[kept++] = o->v[i];
        }
    }
    o->count = kept;
    *out = o;
    return 0;
}

static struct restore_order_line *orders_find(struct storage_restore_orders *o,
                                              const struct ds_id *id)
{
    struct restore_order_line key = {.id = *id};
    return o->count > 0 ? bsearch(&key, o->v, o->count, sizeof(*o->v), order_line_compare) : NULL;
}

bool storage_restore_orders_want(struct storage_restore_orders *o, const struct ds_event *event)
{
    struct restore_order_line *had = orders_find(o, &event->order_id);
    if (had == NULL || had->settled) {
        return false;
    }
    had->found = had->found || same_version(had, event->has_version, event->version, event->ts_ms,
                                            event->status, event->status_len);
    return true;
}

/* Whether the order's current version is event, whole: the fields the model's rules compare,
 * and the version. */
static bool holds_event(const struct storage_order *now, const struct ds_event *e)
{
    return ds_id_equal(&now->customer_id, &e->customer_id) && now->ts_ms == e->ts_ms &&
           now->amount_units == e->amount_units && now->status_len == e->status_len &&
           memcmp(now->status, e->status, e->status_len) == 0 &&
           now->has_version == e->has_version && now->version == e->version &&
           now->items_bytes == e->items_bytes && (now->items == NULL) == (e->items == NULL) &&
           (e->items_bytes == 0 || memcmp(now->items, e->items, e->items_bytes) == 0);
}

int storage_restore_orders_last(struct storage_restore_orders *o, struct storage *st,
                                const struct ds_event *event)
{
    struct restore_order_line *had = orders_find(o, &event->order_id);
    if (had == NULL || had->settled || had->last_checked) {
        return 0;
    }
    had->last_checked = true;
    struct storage_order now;
    int rc = storage_order_get(st, &event->order_id, &now, o->scratch, STORAGE_ORDER_SCRATCH_BYTES);
    if (rc == -ENOENT) {
        return 0;
    }
    if (rc == 0 && holds_event(&now, event)) {
        had->settled = true;
        had->found = true;
    }
    return rc;
}

uint64_t storage_restore_orders_count(const struct storage_restore_orders *o)
{
    uint64_t n = 0;
    for (uint64_t i = 0; i < o->count; i++) {
        n += o->v[i].settled ? 0 : 1;
    }
    return n;
}

/* Writes the orders not back to out->file (synced, renamed into place). */
static int write_unrestored(struct storage *st, const struct storage_restore_orders *o,
                            const int8_t *outcome, int64_t now_ms,
                            struct storage_restore_orders_report *out)
{
    char path[DS_PATH_MAX];
    char tmp[DS_PATH_MAX + 8];
    path_format(path, "%s/quarantine/%lld.unrestored.jsonl", st->dir, (long long)now_ms);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "we");
    if (f == NULL) {
        return -errno;
    }
    for (uint64_t i = 0; i < o->count; i++) {
        if (outcome[i] != RESTORE_BACK) {
            fputs("{\"order\":", f);
            fsck_json_id(f, &o->v[i].id);
            fprintf(f, ",\"outcome\":\"%s\"}\n",
                    outcome[i] == RESTORE_REVERTED ? "reverted" : "lost");
        }
    }
    int rc = fflush(f) == 0 && fdatasync(fileno(f)) == 0 ? 0 : -errno;
    if (fclose(f) != 0 && rc == 0) {
        rc = -errno;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = -errno;
    }
    if (rc != 0) {
        (void)unlink(tmp);
        return rc;
    }
    snprintf(out->file, sizeof(out->file), "%s", path);
    return 0;
}

static int mark_files_restored(struct storage *st, const struct storage_restore_orders *o)
{
    for (uint32_t i = 0; i < o->file_count; i++) {
        char path[DS_PATH_MAX];
        path_format(path, "%s/quarantine/%s.restored", st->dir, o->files[i]);
        int rc = ds_write_file_atomic(path, "restored\n", 9);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

/* Gives each order back at exactly the version it had before the repair the count of versions
 * it had then. The restore appended again versions the store had counted once already: a
 * reverted order kept its count through the repair, and a lost order's count starts again at
 * the range's first version while the versions before it left the data with compaction.
 * Committed before the orders.jsonl files are marked restored, so a restore that dies in
 * between sets them when run again. */
static int seen_put_back(struct storage *st, const struct storage_restore_orders *o,
                         const int8_t *outcome, void *scratch)
{
    bool changed = false;
    for (uint64_t i = 0; i < o->count; i++) {
        const struct restore_order_line *had = &o->v[i];
        if (outcome[i] != RESTORE_BACK || had->versions_seen == 0) {
            continue;
        }
        struct storage_order now;
        int rc = storage_order_get(st, &had->id, &now, scratch, STORAGE_ORDER_SCRATCH_BYTES);
        if (rc != 0) {
            return rc; /* a RESTORE_BACK order exists */
        }
        if (now.versions_seen == had->versions_seen ||
            !same_version(had, now.has_version, now.version, now.ts_ms, now.status,
                          now.status_len)) {
            continue; /* a newer version since: its count is the store's */
        }
        now.versions_seen = had->versions_seen;
        ASSERT(st->ids != NULL); /* loaded by the lookup */
        rc = ids_put(st->ids, &now);
        if (rc == -EAGAIN) {
            rc = storage_commit(st);
            rc = rc == 0 ? ids_put(st->ids, &now) : rc;
        }
        if (rc != 0) {
            return rc;
        }
        changed = true;
    }
    return changed ? storage_commit(st) : 0;
}

int storage_restore_orders_finish(struct storage *st, struct storage_restore_orders *o,
                                  bool all_done, int64_t now_ms,
                                  struct storage_restore_orders_report *out)
{
    struct storage_restore_orders_report r = {.orders = o->count};
    int8_t *outcome = calloc(o->count + 1, 1);
    void *scratch = malloc(STORAGE_ORDER_SCRATCH_BYTES);
    int rc = outcome != NULL && scratch != NULL ? 0 : -ENOMEM;
    for (uint64_t i = 0; rc == 0 && i < o->count; i++) {
        int v = order_outcome(st, &o->v[i], o->v[i].found, scratch);
        rc = v < 0 ? v : 0;
        outcome[i] = (int8_t)(v < 0 ? 0 : v);
        r.restored += v == RESTORE_BACK ? 1 : 0;
        r.reverted += v == RESTORE_REVERTED ? 1 : 0;
        r.lost += v == RESTORE_LOST ? 1 : 0;
    }
    rc = rc == 0 ? seen_put_back(st, o, outcome, scratch) : rc;
    free(scratch);
    if (rc == 0 && r.reverted + r.lost > 0) {
        rc = write_unrestored(st, o, outcome, now_ms, &r);
    }
    free(outcome);
    if (rc == 0 && all_done) {
        rc = mark_files_restored(st, o);
    }
    if (rc != 0) {
        ds_log_error("%s/quarantine: cannot record the restored orders: %s", st->dir,
                     ds_strerror(rc));
        return rc;
    }
    *out = r;
    return 0;
}

void storage_restore_orders_destroy(struct storage_restore_orders *o)
{
    if (o != NULL) {
        free(o->scratch);
        free(o->v);
        free(o);
    }
}
