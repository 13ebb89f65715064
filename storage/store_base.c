/*
 * The bottom layer of the engine (store.h): the state's creation and teardown, paths, the
 * directory walker, the partition table, a reader's per-day totals (their table, stale lists
 * and sums; the read side brings them current), and manifest replay into the table, which
 * lists each partition it moves as stale in its day's totals. Everything above
 * (the read side, the write side, the facade) builds on these; nothing here calls up.
 *
 * Layout of a data directory:
 *   LOCK                           flock(2)ed by the one writer
 *   MANIFEST                       the commit log (manifest.c)
 *   quarantine/                    what fsck --repair took out: raw bytes + a JSON record each
 *   parts/YYYY-MM-DD/<k>/<id>.seg  segments of partition DAY#YYYY-MM-DD#k, ids from 1 up
 *
 * Invariants: the table holds at most partitions_max partitions and is at most half full (its
 * capacity is a power of two at least twice that), so a probe always ends at an empty slot;
 * parts[] lists them in insertion order; the arena exists exactly for a writer and is
 * STORE_ARENA_BYTES long, the one size both its allocation and every bound on it use. A
 * reader's day table is likewise at most half full (grown by doubling), and a day's stale list
 * has room for every partition of the day, so listing one never allocates.
 *
 * Rejected: keeping the table and replay in the facade (storage.c), as before. The write side
 * needed them for appends and recovery, and the facade needed the write side to open: the
 * three files called each other in a circle and two of them defined the arena's size.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "storage/ids.h"
#include "storage/store.h"

/* ---- creation and teardown ----------------------------------------------------------------- */

static size_t table_capacity_for(uint32_t partitions_max)
{
    size_t capacity = 1;
    while (capacity < (size_t)partitions_max * 2) {
        capacity *= 2;
    }
    return capacity;
}

int store_create(const struct storage_config *cfg, struct storage **out)
{
    ASSERT(cfg != NULL);
    ASSERT(out != NULL);
    struct storage *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        return -ENOMEM;
    }
    st->cfg = *cfg;
    snprintf(st->dir, sizeof(st->dir), "%s", cfg->dir);
    st->cfg.dir = st->dir;
    st->read_only = cfg->read_only;
    st->lock_fd = -1;
    st->manifest_fd = -1;
    st->manifest_pin_fd = -1;
    st->stream_day = -1;
    st->table_capacity = table_capacity_for(cfg->partitions_max);
    st->table = calloc(st->table_capacity, sizeof(*st->table));
    st->parts = calloc(cfg->partitions_max, sizeof(*st->parts));
    st->touched = calloc(cfg->partitions_max, sizeof(*st->touched));
    st->holding = calloc(cfg->partitions_max, sizeof(*st->holding));
    st->sources = calloc(MANIFEST_SOURCES_MAX, sizeof(*st->sources));
    st->arena = st->read_only ? NULL : malloc(STORE_ARENA_BYTES);
    int rc = (st->table && st->parts && st->touched && st->holding && st->sources &&
              (st->read_only || st->arena))
                 ? 0
                 : -ENOMEM;
    if (rc == 0) {
        rc = block_codec_init(&st->codec, cfg->zstd_level);
    }
    if (rc != 0) {
        store_destroy(st);
        return rc;
    }
    *out = st;
    return 0;
}

static void part_free(struct storage *st, struct part *p)
{
    if (p->fd >= 0) {
        st->io->ops->close(st->io, p->fd);
    }
    if (p->ob != NULL) {
        open_block_free(p->ob);
        free(p->ob);
    }
    store_summary_free(p->summary);
    free(p->skips);
    free(p);
}

void store_destroy(struct storage *st)
{
    if (st == NULL) {
        return;
    }
    ids_close(st->ids); /* before the backend it reads through */
    store_destroy(st->compact_reader);
    free(st->retired);
    free(st->dropped);
    free(st->order_scratch);
    for (uint32_t i = 0; i < st->part_count; i++) {
        part_free(st, st->parts[i]);
    }
    for (uint32_t i = 0; i < st->spare_count; i++) {
        open_block_free(st->spare[i]);
        free(st->spare[i]);
    }
    if (st->manifest_fd >= 0) {
        st->io->ops->close(st->io, st->manifest_fd);
    }
    if (st->manifest_pin_fd >= 0) {
        close(st->manifest_pin_fd);
    }
    if (st->owned_io != NULL) {
        st->owned_io->ops->destroy(st->owned_io);
    }
    if (st->lock_fd >= 0) {
        close(st->lock_fd);
    }
    block_codec_deinit(&st->codec);
    for (size_t i = 0; i < st->day_capacity; i++) {
        if (st->days[i] != NULL) {
            free(st->days[i]->stale);
            free(st->days[i]);
        }
    }
    free(st->days);
    free(st->arena);
    free(st->table);
    free(st->parts);
    free(st->touched);
    free(st->holding);
    free(st->sources);
    free(st);
}

/* ---- paths --------------------------------------------------------------------------------- */

void store_path(const struct storage *st, const char *name, char *dst)
{
    int n = snprintf(dst, DS_PATH_MAX, "%s/%s", st->dir, name);
    ASSERT(n > 0 && n < DS_PATH_MAX);
}

void store_part_dir(const struct storage *st, int32_t day, uint32_t shard, char *dst)
{
    char date[DS_DATE_TEXT_SIZE];
    ds_date_format(day, date);
    int n = snprintf(dst, DS_PATH_MAX, "%s/parts/%s/%u", st->dir, date, shard);
    ASSERT(n > 0 && n < DS_PATH_MAX);
}

void store_segment_path(const struct storage *st, const struct part *p, uint32_t segment_id,
                        char *dst)
{
    char date[DS_DATE_TEXT_SIZE];
    ds_date_format(p->day, date);
    int n =
        snprintf(dst, DS_PATH_MAX, "%s/parts/%s/%u/%08u.seg", st->dir, date, p->shard, segment_id);
    ASSERT(n > 0 && n < DS_PATH_MAX);
}

bool store_parse_segment_name(const char *name, uint32_t *id)
{
    uint32_t value = 0;
    for (int i = 0; i < 8; i++) {
        if (name[i] < '0' || name[i] > '9') {
            return false;
        }
        value = value * 10 + (uint32_t)(name[i] - '0');
    }
    if (strcmp(name + 8, ".seg") != 0 || value == 0) {
        return false;
    }
    *id = value;
    return true;
}

bool store_parse_shard_name(const char *name, uint32_t *shard)
{
    uint32_t value = 0;
    size_t len = strlen(name);
    if (len == 0 || len > 5 || (len > 1 && name[0] == '0')) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (name[i] < '0' || name[i] > '9') {
            return false;
        }
        value = value * 10 + (uint32_t)(name[i] - '0');
    }
    if (value >= 65536) {
        return false;
    }
    *shard = value;
    return true;
}

static int walk_part(struct storage *st, const struct store_walk *walk, const char *dir,
                     int32_t day, uint32_t shard)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        return -errno;
    }
    int rc = 0;
    for (struct dirent *e = readdir(d); e != NULL && rc == 0; e = readdir(d)) {
        uint32_t id = 0;
        if (store_parse_segment_name(e->d_name, &id)) {
            rc = walk->segment(st, dir, e->d_name, day, shard, id, walk->user);
        }
    }
    closedir(d);
    return rc == 0 && walk->part_done != NULL ? walk->part_done(st, dir, day, shard, walk->user)
                                              : rc;
}

static int walk_day(struct storage *st, const struct store_walk *walk, const char *dir, int32_t day)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        return -errno;
    }
    int rc = 0;
    for (struct dirent *e = readdir(d); e != NULL && rc == 0; e = readdir(d)) {
        uint32_t shard = 0;
        if (!store_parse_shard_name(e->d_name, &shard)) {
            continue;
        }
        char path[DS_PATH_MAX];
        rc = snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < (int)sizeof(path)
                 ? walk_part(st, walk, path, day, shard)
                 : -ENAMETOOLONG;
    }
    closedir(d);
    return rc;
}

int store_walk_tree(struct storage *st, const struct store_walk *walk)
{
    ASSERT(walk != NULL && walk->segment != NULL);
    char parts[DS_PATH_MAX];
    store_path(st, "parts", parts);
    DIR *d = opendir(parts);
    if (d == NULL) {
        return errno == ENOENT ? 0 : -errno;
    }
    int rc = 0;
    for (struct dirent *e = readdir(d); e != NULL && rc == 0; e = readdir(d)) {
        int32_t day = 0;
        if (ds_date_parse(e->d_name, strlen(e->d_name), &day) != 0) {
            continue;
        }
        char path[DS_PATH_MAX];
        rc = snprintf(path, sizeof(path), "%s/%s", parts, e->d_name) < (int)sizeof(path)
                 ? walk_day(st, walk, path, day)
                 : -ENAMETOOLONG;
    }
    closedir(d);
    return rc;
}

/* ---- the partition table ------------------------------------------------------------------- */

static uint64_t part_hash(int32_t day, uint32_t shard)
{
    uint64_t key = ((uint64_t)(uint32_t)day << 32) | shard;
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return key;
}

struct part *store_part_find(const struct storage *st, int32_t day, uint32_t shard)
{
    size_t mask = st->table_capacity - 1;
    for (size_t i = part_hash(day, shard) & mask;; i = (i + 1) & mask) {
        struct part *p = st->table[i];
        if (p == NULL) {
            return NULL;
        }
        if (p->day == day && p->shard == shard) {
            return p;
        }
    }
}

/* ---- a reader's per-day totals ------------------------------------------------------------ */

static uint64_t day_hash(int32_t day)
{
    uint64_t key = (uint32_t)day;
    key *= 0x9e3779b97f4a7c15ull;
    return key ^ (key >> 29);
}

struct day_totals *store_day_find(const struct storage *st, int32_t day)
{
    if (st->days == NULL) {
        return NULL;
    }
    size_t mask = st->day_capacity - 1;
    for (size_t i = day_hash(day) & mask;; i = (i + 1) & mask) {
        struct day_totals *d = st->days[i];
        if (d == NULL || d->day == day) {
            return d;
        }
    }
}

static void day_insert(struct day_totals **days, size_t capacity, struct day_totals *d)
{
    size_t mask = capacity - 1;
    size_t i = day_hash(d->day) & mask;
    while (days[i] != NULL) {
        i = (i + 1) & mask;
    }
    days[i] = d;
}

/* The table at most half full after one more day. */
static int day_table_reserve(struct storage *st)
{
    if ((size_t)(st->day_count + 1) * 2 <= st->day_capacity) {
        return 0;
    }
    size_t capacity = st->day_capacity == 0 ? 64 : st->day_capacity * 2;
    struct day_totals **days = calloc(capacity, sizeof(*days));
    if (days == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < st->day_capacity; i++) {
        if (st->days[i] != NULL) {
            day_insert(days, capacity, st->days[i]);
        }
    }
    free(st->days);
    st->days = days;
    st->day_capacity = capacity;
    return 0;
}

/* A reader's totals of day, created empty, with room in its stale list for one more of the
 * day's partitions (so that listing one never allocates). */
static int day_attach(struct storage *st, int32_t day, struct day_totals **out)
{
    struct day_totals *d = store_day_find(st, day);
    if (d == NULL) {
        int rc = day_table_reserve(st);
        d = rc == 0 ? calloc(1, sizeof(*d)) : NULL;
        if (d == NULL) {
            return -ENOMEM;
        }
        d->day = day;
        day_insert(st->days, st->day_capacity, d);
        st->day_count++;
    }
    if (d->part_count + 1 > d->stale_capacity) {
        uint32_t capacity = d->stale_capacity == 0 ? 8 : d->stale_capacity * 2;
        struct part **grown = realloc(d->stale, capacity * sizeof(*grown));
        if (grown == NULL) {
            return -ENOMEM;
        }
        d->stale = grown;
        d->stale_capacity = capacity;
    }
    *out = d;
    return 0;
}

void store_day_touch(struct part *p)
{
    struct day_totals *d = p->day_totals;
    if (d == NULL || p->segment_id == 0) {
        return;
    }
    if (p->shard >= d->shard_end) {
        d->shard_end = p->shard + 1;
    }
    if (!p->stale && store_summary_behind(p)) {
        ASSERT(d->stale_count < d->part_count); /* each listed once; day_attach made room */
        d->stale[d->stale_count++] = p;
        p->stale = true;
    }
}

static void hours_add(struct storage_hour_total *dst, const struct storage_hour_total *src,
                      int64_t sign)
{
    for (int h = 0; h < 24; h++) {
        /* Wrapping arithmetic: what is added is taken out again exactly. */
        dst[h].count = (int64_t)((uint64_t)dst[h].count + (uint64_t)(sign * src[h].count));
        dst[h].amount_units += sign * src[h].amount_units;
    }
}

void store_day_fold(struct part *p)
{
    struct day_totals *d = p->day_totals;
    if (d == NULL) {
        return;
    }
    ASSERT(!p->folded);
    ASSERT(p->summary != NULL);
    const struct summary *s = p->summary;
    d->count += s->count;
    d->rows += s->rows;
    d->blocks += s->blocks;
    d->bytes += s->bytes;
    d->damaged_blocks += s->damaged_blocks;
    d->amount_units += s->amount_units;
    hours_add(d->hours, s->all, 1);
    p->folded = true;
}

void store_day_unfold(struct part *p)
{
    struct day_totals *d = p->day_totals;
    if (d == NULL || !p->folded) {
        return;
    }
    ASSERT(p->summary != NULL);
    const struct summary *s = p->summary;
    d->count -= s->count;
    d->rows -= s->rows;
    d->blocks -= s->blocks;
    d->bytes -= s->bytes;
    d->damaged_blocks -= s->damaged_blocks;
    d->amount_units -= s->amount_units;
    hours_add(d->hours, s->all, -1);
    p->folded = false;
}

void store_parts_forget_below(struct storage *st, int32_t floor)
{
    if (floor <= st->forgotten_below) {
        return;
    }
    st->forgotten_below = floor;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < st->holding_count; i++) {
        struct part *p = st->holding[i];
        if (p->day >= floor) {
            st->holding[kept++] = p;
        }
    }
    st->holding_count = kept;
    kept = 0;
    for (uint32_t i = 0; i < st->part_count; i++) {
        struct part *p = st->parts[i];
        if (p->day >= floor) {
            st->parts[kept++] = p;
            continue;
        }
        ASSERT(!p->touched && (p->ob == NULL || p->ob->count == 0));
        ASSERT(st->skip_total >= p->skip_count);
        st->skip_total -= p->skip_count; /* its ranges went with the day */
        part_free(st, p);
    }
    if (kept == st->part_count) {
        return;
    }
    st->part_count = kept;
    /* Open addressing without tombstones: the table is rebuilt from the partitions kept. */
    memset(st->table, 0, st->table_capacity * sizeof(*st->table));
    size_t mask = st->table_capacity - 1;
    for (uint32_t i = 0; i < st->part_count; i++) {
        struct part *p = st->parts[i];
        size_t at = part_hash(p->day, p->shard) & mask;
        while (st->table[at] != NULL) {
            at = (at + 1) & mask;
        }
        st->table[at] = p;
    }
    if (st->days == NULL) {
        return;
    }
    /* A reader: the dropped days' totals go (their stale lists named the partitions freed);
     * the table is rebuilt from the days of the partitions kept, each of which has its own. */
    for (size_t i = 0; i < st->day_capacity; i++) {
        if (st->days[i] != NULL && st->days[i]->day < floor) {
            free(st->days[i]->stale);
            free(st->days[i]);
        }
    }
    memset(st->days, 0, st->day_capacity * sizeof(*st->days));
    st->day_count = 0;
    for (uint32_t i = 0; i < st->part_count; i++) {
        struct day_totals *d = st->parts[i]->day_totals;
        if (d != NULL && store_day_find(st, d->day) == NULL) {
            day_insert(st->days, st->day_capacity, d);
            st->day_count++;
        }
    }
}

void store_summary_clear(struct summary *s)
{
    struct storage_hour_total(*hours)[24] = s->hours;
    uint16_t capacity = s->rows_capacity;
    memset(hours, 0, capacity * sizeof(*hours));
    memset(s, 0, sizeof(*s));
    s->hours = hours;
    s->rows_capacity = capacity;
}

void store_summary_free(struct summary *s)
{
    if (s != NULL) {
        free(s->hours);
        free(s);
    }
}

/* Drops p's summary (rebuilt on next use): out of its day's sums first, and listed as stale. */
static void part_summary_drop(struct part *p)
{
    store_day_unfold(p);
    store_summary_free(p->summary);
    p->summary = NULL;
    store_day_touch(p);
}

int store_part_get(struct storage *st, int32_t day, uint32_t shard, struct part **out)
{
    struct part *p = store_part_find(st, day, shard);
    if (p != NULL) {
        *out = p;
        return 0;
    }
    if (st->part_count >= st->cfg.partitions_max || day < 0 || day > DS_DAY_MAX) {
        ds_log_error("partition table full (%u partitions)", st->part_count);
        return -DS_ELIMIT;
    }
    struct day_totals *d = NULL;
    if (st->read_only) {
        int rc = day_attach(st, day, &d);
        if (rc != 0) {
            return rc;
        }
    }
    p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return -ENOMEM;
    }
    if (d != NULL) {
        p->day_totals = d;
        d->part_count++;
    }
    p->day = day;
    p->shard = shard;
    p->fd = -1;
    p->day_start_ms = (int64_t)day * DS_DAY_MS;
    size_t mask = st->table_capacity - 1;
    size_t i = part_hash(day, shard) & mask;
    while (st->table[i] != NULL) {
        i = (i + 1) & mask;
    }
    st->table[i] = p;
    st->parts[st->part_count++] = p;
    *out = p;
    return 0;
}

int store_lock(struct storage *st)
{
    ASSERT(st->lock_fd < 0);
    char path[DS_PATH_MAX];
    store_path(st, "LOCK", path);
    st->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (st->lock_fd < 0) {
        int err = -errno;
        ds_log_error("%s: cannot open: %s", path, ds_strerror(err));
        return err;
    }
    if (flock(st->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno == EWOULDBLOCK ? -DS_ELOCKED : -errno;
        ds_log_error("%s: %s", st->dir, ds_strerror(err));
        return err;
    }
    return 0;
}

/* ---- quarantined ranges -------------------------------------------------------------------- */

/* Index of the first skip of p at or after (segment_id, offset). */
static uint32_t skip_lower_bound(const struct part *p, uint32_t segment_id, uint64_t offset)
{
    uint32_t lo = 0;
    uint32_t hi = p->skip_count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const struct manifest_skip *k = &p->skips[mid];
        if (k->segment_id < segment_id || (k->segment_id == segment_id && k->offset < offset)) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

const struct manifest_skip *store_skip_from(const struct part *p, uint32_t segment_id,
                                            uint64_t offset)
{
    if (p->skip_count == 0) {
        return NULL;
    }
    uint32_t i = skip_lower_bound(p, segment_id, offset);
    return i < p->skip_count && p->skips[i].segment_id == segment_id ? &p->skips[i] : NULL;
}

void store_part_rebase(struct storage *st, struct part *p, uint32_t base_segment_id)
{
    if (base_segment_id == store_part_first(p)) {
        return;
    }
    ASSERT(base_segment_id > store_part_first(p));
    p->base_segment_id = base_segment_id;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < p->skip_count; i++) {
        if (p->skips[i].segment_id >= base_segment_id) {
            p->skips[kept++] = p->skips[i];
        }
    }
    st->skip_total -= p->skip_count - kept; /* ranges in replaced segments are gone with them */
    p->skip_count = kept;
    part_summary_drop(p);
}

static bool skips_overlap(const struct manifest_skip *a, const struct manifest_skip *b)
{
    return a->segment_id == b->segment_id && a->offset < b->offset + b->length &&
           b->offset < a->offset + a->length;
}

int store_skip_add(struct storage *st, const struct manifest_skip *skip)
{
    if (skip->segment_id == 0 || skip->length == 0 ||
        skip->offset < sizeof(struct segment_header)) {
        return -DS_ECORRUPT;
    }
    struct part *p = NULL;
    int rc = store_part_get(st, skip->day, skip->shard, &p);
    if (rc != 0) {
        return rc;
    }
    uint32_t i = skip_lower_bound(p, skip->segment_id, skip->offset);
    if (i < p->skip_count && memcmp(&p->skips[i], skip, sizeof(*skip)) == 0) {
        return 0;
    }
    if ((i < p->skip_count && skips_overlap(&p->skips[i], skip)) ||
        (i > 0 && skips_overlap(&p->skips[i - 1], skip))) {
        ds_log_error("partition %d/%u: quarantined ranges overlap in segment %u", p->day, p->shard,
                     skip->segment_id);
        return -DS_ECORRUPT;
    }
    if (st->skip_total >= STORAGE_QUARANTINE_MAX) {
        ds_log_error("%s: more than %u quarantined ranges", st->dir, STORAGE_QUARANTINE_MAX);
        return -DS_ELIMIT;
    }
    if (p->skip_count == p->skip_capacity) {
        uint32_t capacity = p->skip_capacity == 0 ? 4 : p->skip_capacity * 2;
        struct manifest_skip *grown = realloc(p->skips, capacity * sizeof(*grown));
        if (grown == NULL) {
            return -ENOMEM;
        }
        p->skips = grown;
        p->skip_capacity = capacity;
    }
    memmove(&p->skips[i + 1], &p->skips[i], (p->skip_count - i) * sizeof(*skip));
    p->skips[i] = *skip;
    p->skip_count++;
    st->skip_total++;
    part_summary_drop(p); /* it may count the range: rebuilt on next use */
    return 0;
}

/* ---- lengths in the source table ---------------------------------------------------------- */

void store_length_set(struct storage *st, int32_t slot, uint64_t bytes)
{
    ASSERT(slot == DS_SOURCE_DEADLETTER || slot == STORE_SOURCE_IDS || slot == STORE_SOURCE_FLOOR);
    ASSERT(bytes <= INT64_MAX);
    struct source_state *s = &st->sources[store_source_index(slot)];
    if (!s->known) {
        s->committed_next = 0;
    }
    s->known = true;
    s->dirty = s->dirty || s->next != (int64_t)bytes;
    s->next = (int64_t)bytes;
}

uint64_t store_length_committed(const struct storage *st, int32_t slot)
{
    ASSERT(slot == DS_SOURCE_DEADLETTER || slot == STORE_SOURCE_IDS || slot == STORE_SOURCE_FLOOR);
    const struct source_state *s = &st->sources[store_source_index(slot)];
    return s->known && s->committed_next > 0 ? (uint64_t)s->committed_next : 0;
}

/* ---- manifest replay into the table -------------------------------------------------------- */

static struct source_state *source_slot(struct storage *st, int32_t partition)
{
    if (!store_source_valid(partition)) {
        return NULL;
    }
    return &st->sources[store_source_index(partition)];
}

static int apply_record(const struct manifest_replay_fn_args *record, void *user)
{
    struct storage *st = user;
    for (uint32_t i = 0; i < record->skip_count; i++) {
        int rc = store_skip_add(st, &record->skips[i]);
        if (rc != 0) {
            return rc;
        }
    }
    for (uint32_t i = 0; i < record->part_count; i++) {
        const struct manifest_part *mp = &record->parts[i];
        struct part *p = NULL;
        if (mp->shard >= 1u << 16 || mp->segment_id == 0) {
            return -DS_ECORRUPT;
        }
        int rc = store_part_get(st, mp->day, mp->shard, &p);
        if (rc != 0) {
            return rc;
        }
        if (record->kind == MANIFEST_BASE) {
            /* A compaction's rewrite starts at mp->segment_id: it must exist already (the
             * commit naming it precedes or is this record's snapshot). */
            if (mp->segment_id > p->segment_id || mp->segment_id < store_part_first(p)) {
                return -DS_ECORRUPT;
            }
            store_part_rebase(st, p, mp->segment_id);
            continue;
        }
        p->segment_id = mp->segment_id;
        p->committed_end = mp->end;
        store_day_touch(p);
    }
    for (uint32_t i = 0; i < record->source_count; i++) {
        struct source_state *s = source_slot(st, record->sources[i].partition);
        if (s == NULL) {
            return -DS_ECORRUPT;
        }
        s->known = true;
        s->committed_next = record->sources[i].next_offset;
        s->next = s->committed_next;
    }
    st->seq = record->seq;
    return 0;
}

int store_manifest_load(struct storage *st, uint64_t *valid_end, uint64_t *file_size)
{
    char path[DS_PATH_MAX];
    store_path(st, "MANIFEST", path);
    char *data = NULL;
    size_t len = 0;
    int rc = ds_read_file(path, MANIFEST_BYTES_MAX, &data, &len);
    if (rc == -ENOENT) {
        *valid_end = 0;
        *file_size = 0;
        return 0;
    }
    if (rc != 0) {
        ds_log_error("%s: cannot read: %s", path, ds_strerror(rc));
        return rc;
    }
    st->manifest_damaged = false;
    rc = st->manifest_prefix
             ? manifest_replay_prefix((const uint8_t *)data, len, apply_record, st, valid_end,
                                      &st->manifest_damaged)
             : manifest_replay((const uint8_t *)data, len, apply_record, st, valid_end);
    free(data);
    st->manifest_torn_bytes = rc == 0 && !st->manifest_damaged ? len - *valid_end : 0;
    if (rc != 0) {
        ds_log_error("%s: cannot replay: %s", path, ds_strerror(rc));
    }
    *file_size = len;
    return rc;
}
