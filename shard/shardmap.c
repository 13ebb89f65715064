/*
 * The per-day shard map: S(day) for every day ever seen, persisted as DIR/shardmap.
 *
 * In memory: a fixed-capacity open-addressing table (linear probing, Fibonacci hashing of the
 * day number, load factor at most 1/2, no deletions) for O(1) lookups on the routing path, plus
 * the known days kept sorted in a second fixed array so that visiting and saving in ascending
 * order need neither a sort nor an allocation. Days almost always arrive in ascending order, so
 * keeping the array sorted is an append; an out-of-order day costs one memmove of at most
 * 256 KiB, and only the first time that day is seen. Everything is allocated once at open.
 *
 * On disk: a versioned, checksummed text file, replaced atomically (ds_write_file_atomic):
 *
 *     dayshard-shardmap 1
 *     2026-01-01 4
 *     2026-01-21 16
 *     crc32c 1a2b3c4d
 *
 * one "YYYY-MM-DD S" line per day in strictly ascending day order, 1 <= S <= SHARD_COUNT_MAX,
 * and a last line holding the CRC32C (lowercase hex) of every byte before it. Anything else is
 * -DS_ECORRUPT; a header naming another version is -DS_EFORMAT (checked before the CRC, since
 * a later version may checksum differently).
 *
 * Invariants: every count in memory is in 1..SHARD_COUNT_MAX; a day's count never decreases
 * (grow refuses, reload keeps the larger of memory and file); dirty means memory differs from
 * the file as last written or read; a failed sync or reload leaves the map unchanged.
 *
 * Rejected: a binary file (smaller, but an operator cannot read or diff it, and the map holds
 * at most a few thousand lines in practice); keeping the map in the storage manifest (the
 * routing layer must not depend on storage, which sits above it).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shard/shard.h"

#define SHARDMAP_FILE_NAME "shardmap"
#define SHARDMAP_MAGIC "dayshard-shardmap "
#define SHARDMAP_MAGIC_BYTES (sizeof(SHARDMAP_MAGIC) - 1)
#define SHARDMAP_VERSION 1u
/* A version number in the header has at most this many digits. */
#define SHARDMAP_VERSION_DIGITS_MAX 9u
#define SHARDMAP_CRC_PREFIX "crc32c "
#define SHARDMAP_CRC_PREFIX_BYTES (sizeof(SHARDMAP_CRC_PREFIX) - 1)
/* "crc32c " + 8 hex digits + "\n". */
#define SHARDMAP_CRC_LINE_BYTES (SHARDMAP_CRC_PREFIX_BYTES + 8u + 1u)
/* "YYYY-MM-DD" + " " + up to 4 digits + "\n". */
#define SHARDMAP_DATE_BYTES 10u
#define SHARDMAP_COUNT_DIGITS_MAX 4u
#define SHARDMAP_LINE_BYTES_MAX (SHARDMAP_DATE_BYTES + 1u + SHARDMAP_COUNT_DIGITS_MAX + 1u)
/* "dayshard-shardmap 1\n". */
#define SHARDMAP_HEADER_BYTES (SHARDMAP_MAGIC_BYTES + 2u)
/* The largest file this version writes: every line at its longest. Reading allows no more. */
#define SHARDMAP_FILE_BYTES_MAX                                                                    \
    (SHARDMAP_HEADER_BYTES + (size_t)SHARD_MAP_DAYS_MAX * SHARDMAP_LINE_BYTES_MAX +                \
     SHARDMAP_CRC_LINE_BYTES)
/* Table slots: twice the days keeps linear probes short (load factor <= 1/2). */
#define SHARDMAP_SLOT_BITS 17u
#define SHARDMAP_SLOT_COUNT (1u << SHARDMAP_SLOT_BITS)

_Static_assert(SHARDMAP_SLOT_COUNT >= 2u * SHARD_MAP_DAYS_MAX, "load factor must stay <= 1/2");
_Static_assert(SHARD_COUNT_MAX <= 9999u, "counts must fit SHARDMAP_COUNT_DIGITS_MAX digits");
_Static_assert(SHARDMAP_VERSION <= 9u, "SHARDMAP_HEADER_BYTES assumes a one-digit version");
_Static_assert(SHARD_COUNT_MAX <= (unsigned)INT32_MAX, "shard_map_ensure returns the count");

/* One table slot; shard_count 0 marks an empty slot (real counts are >= 1). */
struct shardmap_slot {
    int32_t day;
    uint32_t shard_count;
};

struct shard_map {
    char path[DS_PATH_MAX];
    uint32_t base_shards;
    unsigned flags;
    bool dirty;
    bool memory_only; /* opened without a directory: no file is read or written */
    size_t day_count;
    struct shardmap_slot *slots; /* SHARDMAP_SLOT_COUNT */
    int32_t *days_sorted;        /* SHARD_MAP_DAYS_MAX, the first day_count ascending */
    char *text;                  /* SHARDMAP_FILE_BYTES_MAX for sync; NULL when read-only */
};

/* ---- the in-memory table ------------------------------------------------------------------- */

static size_t shardmap_slot_index(const struct shard_map *map, int32_t day)
{
    uint32_t hash = ((uint32_t)day * 2654435769u) >> (32u - SHARDMAP_SLOT_BITS);
    size_t index = hash;
    for (size_t probes = 0; probes < SHARDMAP_SLOT_COUNT; probes++) {
        const struct shardmap_slot *slot = &map->slots[index];
        if (slot->shard_count == 0 || slot->day == day) {
            return index;
        }
        index = (index + 1) & (SHARDMAP_SLOT_COUNT - 1);
    }
    /* The load factor bound guarantees an empty slot. */
    ASSERT(false);
    return 0;
}

/* Adds a day not yet in the map; the caller has checked the capacity. */
static void shardmap_insert(struct shard_map *map, size_t index, int32_t day, uint32_t count)
{
    ASSERT(map->slots[index].shard_count == 0);
    ASSERT(map->day_count < SHARD_MAP_DAYS_MAX);
    map->slots[index].day = day;
    map->slots[index].shard_count = count;
    /* Find the insertion point from the end: new days are nearly always the latest. */
    size_t position = map->day_count;
    while (position > 0 && map->days_sorted[position - 1] > day) {
        position--;
    }
    memmove(&map->days_sorted[position + 1], &map->days_sorted[position],
            (map->day_count - position) * sizeof(map->days_sorted[0]));
    map->days_sorted[position] = day;
    map->day_count++;
}

uint32_t shard_map_get(const struct shard_map *map, int32_t day)
{
    ASSERT(map != NULL);
    ASSERT(day >= 0 && day <= DS_DAY_MAX);
    return map->slots[shardmap_slot_index(map, day)].shard_count;
}

int shard_map_ensure(struct shard_map *map, int32_t day)
{
    ASSERT(map != NULL);
    ASSERT(day >= 0 && day <= DS_DAY_MAX);
    size_t index = shardmap_slot_index(map, day);
    uint32_t count = map->slots[index].shard_count;
    if (count != 0) {
        return (int)count;
    }
    if (map->day_count >= SHARD_MAP_DAYS_MAX) {
        return -DS_ELIMIT;
    }
    shardmap_insert(map, index, day, map->base_shards);
    map->dirty = true;
    return (int)map->base_shards;
}

int shard_map_grow(struct shard_map *map, int32_t day, uint32_t shard_count)
{
    ASSERT(map != NULL);
    ASSERT(day >= 0 && day <= DS_DAY_MAX);
    if (shard_count == 0) {
        return -EINVAL;
    }
    if (shard_count > SHARD_COUNT_MAX) {
        return -DS_ELIMIT;
    }
    size_t index = shardmap_slot_index(map, day);
    uint32_t current = map->slots[index].shard_count;
    if (shard_count < current) {
        return -EINVAL;
    }
    if (shard_count == current) {
        return 0;
    }
    if (current == 0) {
        if (map->day_count >= SHARD_MAP_DAYS_MAX) {
            return -DS_ELIMIT;
        }
        shardmap_insert(map, index, day, shard_count);
    } else {
        map->slots[index].shard_count = shard_count;
    }
    map->dirty = true;
    return 0;
}

bool shard_map_dirty(const struct shard_map *map)
{
    ASSERT(map != NULL);
    return map->dirty;
}

size_t shard_map_day_count(const struct shard_map *map)
{
    ASSERT(map != NULL);
    return map->day_count;
}

int32_t shard_map_last_day(const struct shard_map *map)
{
    ASSERT(map != NULL);
    return map->day_count > 0 ? map->days_sorted[map->day_count - 1] : -1;
}

int32_t shard_map_previous_day(const struct shard_map *map, int32_t day)
{
    ASSERT(map != NULL);
    /* Binary search for the first known day >= day; the one before it is the answer. */
    size_t lo = 0;
    size_t hi = map->day_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (map->days_sorted[mid] < day) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    ASSERT(lo <= map->day_count);
    return lo > 0 ? map->days_sorted[lo - 1] : -1;
}

int shard_map_visit(const struct shard_map *map, shard_map_visit_fn fn, void *user)
{
    ASSERT(map != NULL);
    ASSERT(fn != NULL);
    size_t day_count = map->day_count;
    for (size_t i = 0; i < day_count; i++) {
        int32_t day = map->days_sorted[i];
        int rc = fn(day, shard_map_get(map, day), user);
        /* The callback must not change the map it is visiting. */
        ASSERT(map->day_count == day_count);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

/* ---- the file ------------------------------------------------------------------------------ */

/* Parses 1..digits_max decimal digits without a leading zero; false on anything else. */
static bool shardmap_decimal_parse(const char *text, size_t len, size_t digits_max, uint32_t *value)
{
    if (len == 0 || len > digits_max || (len > 1 && text[0] == '0')) {
        return false;
    }
    uint32_t v = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c < '0' || c > '9') {
            return false;
        }
        v = v * 10u + (uint32_t)(c - '0');
    }
    *value = v;
    return true;
}

/* Checks the header line; on success *body_begin is the offset of the first day line. */
static int shardmap_header_check(const struct shard_map *map, const char *data, size_t len,
                                 size_t *body_begin)
{
    if (len < SHARDMAP_MAGIC_BYTES || memcmp(data, SHARDMAP_MAGIC, SHARDMAP_MAGIC_BYTES) != 0) {
        ds_log_error("shard map %s: not a shard map", map->path);
        return -DS_ECORRUPT;
    }
    const char *version_text = data + SHARDMAP_MAGIC_BYTES;
    const char *newline = memchr(version_text, '\n', len - SHARDMAP_MAGIC_BYTES);
    uint32_t version = 0;
    if (newline == NULL || !shardmap_decimal_parse(version_text, (size_t)(newline - version_text),
                                                   SHARDMAP_VERSION_DIGITS_MAX, &version)) {
        ds_log_error("shard map %s: bad header line", map->path);
        return -DS_ECORRUPT;
    }
    if (version != SHARDMAP_VERSION) {
        ds_log_error("shard map %s: unknown version %u", map->path, version);
        return -DS_EFORMAT;
    }
    *body_begin = (size_t)(newline - data) + 1;
    return 0;
}

/* Checks the last line against the CRC32C of everything before it; on success *body_end is the
 * offset of that line. */
static int shardmap_crc_check(const struct shard_map *map, const char *data, size_t len,
                              size_t body_begin, size_t *body_end)
{
    if (len < body_begin + SHARDMAP_CRC_LINE_BYTES) {
        ds_log_error("shard map %s: no checksum line (truncated?)", map->path);
        return -DS_ECORRUPT;
    }
    size_t crc_at = len - SHARDMAP_CRC_LINE_BYTES;
    const char *line = data + crc_at;
    if (memcmp(line, SHARDMAP_CRC_PREFIX, SHARDMAP_CRC_PREFIX_BYTES) != 0 ||
        line[SHARDMAP_CRC_LINE_BYTES - 1] != '\n') {
        ds_log_error("shard map %s: no checksum line (truncated?)", map->path);
        return -DS_ECORRUPT;
    }
    uint32_t stored = 0;
    for (size_t i = SHARDMAP_CRC_PREFIX_BYTES; i < SHARDMAP_CRC_LINE_BYTES - 1; i++) {
        unsigned char c = (unsigned char)line[i];
        uint32_t nibble = 0;
        if (c >= '0' && c <= '9') {
            nibble = (uint32_t)(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            nibble = (uint32_t)(c - 'a' + 10);
        } else {
            ds_log_error("shard map %s: bad checksum line", map->path);
            return -DS_ECORRUPT;
        }
        stored = stored << 4 | nibble;
    }
    if (ds_crc32c(0, data, crc_at) != stored) {
        ds_log_error("shard map %s: checksum mismatch", map->path);
        return -DS_ECORRUPT;
    }
    *body_end = crc_at;
    return 0;
}

/* Parses the day line at *at (before end) and advances *at past it. */
static bool shardmap_line_parse(const char *data, size_t end, size_t *at, int32_t *day,
                                uint32_t *shard_count)
{
    const char *line = data + *at;
    size_t room = end - *at;
    if (room < SHARDMAP_DATE_BYTES + 3u || line[SHARDMAP_DATE_BYTES] != ' ') {
        return false;
    }
    if (ds_date_parse(line, SHARDMAP_DATE_BYTES, day) != 0) {
        return false;
    }
    const char *digits = line + SHARDMAP_DATE_BYTES + 1;
    const char *newline = memchr(digits, '\n', room - SHARDMAP_DATE_BYTES - 1);
    if (newline == NULL ||
        !shardmap_decimal_parse(digits, (size_t)(newline - digits), SHARDMAP_COUNT_DIGITS_MAX,
                                shard_count) ||
        *shard_count == 0 || *shard_count > SHARD_COUNT_MAX) {
        return false;
    }
    *at = (size_t)(newline - data) + 1;
    return true;
}

/* Validates every day line of [begin, end) and counts the days the map does not have yet. */
static int shardmap_body_check(const struct shard_map *map, const char *data, size_t begin,
                               size_t end, size_t *new_days)
{
    size_t fresh = 0;
    size_t line_number = 2;
    int32_t previous = -1;
    for (size_t at = begin; at < end; line_number++) {
        int32_t day = 0;
        uint32_t count = 0;
        if (!shardmap_line_parse(data, end, &at, &day, &count) || day <= previous) {
            ds_log_error("shard map %s: bad line %zu", map->path, line_number);
            return -DS_ECORRUPT;
        }
        previous = day;
        if (map->slots[shardmap_slot_index(map, day)].shard_count == 0) {
            fresh++;
        }
    }
    *new_days = fresh;
    return 0;
}

/* Merges the checked day lines of [begin, end) into the map, keeping the larger count of each
 * day; returns whether memory now holds anything the file does not. */
static bool shardmap_body_merge(struct shard_map *map, const char *data, size_t begin, size_t end)
{
    size_t old_days = map->day_count;
    size_t old_days_covered = 0;
    for (size_t at = begin; at < end;) {
        int32_t day = 0;
        uint32_t count = 0;
        bool ok = shardmap_line_parse(data, end, &at, &day, &count);
        ASSERT(ok);
        size_t index = shardmap_slot_index(map, day);
        uint32_t current = map->slots[index].shard_count;
        if (current == 0) {
            shardmap_insert(map, index, day, count);
            continue;
        }
        if (count >= current) {
            map->slots[index].shard_count = count;
            old_days_covered++;
        }
    }
    return old_days_covered < old_days;
}

/* Reads the file and merges it into the map; the map is unchanged on failure. A missing file
 * merges nothing (*found tells). */
static int shardmap_load(struct shard_map *map, bool *found)
{
    char *data = NULL;
    size_t len = 0;
    int rc = ds_read_file(map->path, SHARDMAP_FILE_BYTES_MAX, &data, &len);
    *found = rc != -ENOENT;
    if (rc == -ENOENT) {
        map->dirty = map->day_count > 0;
        return 0;
    }
    if (rc != 0) {
        ds_log_error("shard map %s: cannot read: %s", map->path, ds_strerror(rc));
        return rc;
    }
    size_t body_begin = 0;
    size_t body_end = 0;
    size_t new_days = 0;
    rc = shardmap_header_check(map, data, len, &body_begin);
    if (rc == 0) {
        rc = shardmap_crc_check(map, data, len, body_begin, &body_end);
    }
    if (rc == 0) {
        rc = shardmap_body_check(map, data, body_begin, body_end, &new_days);
    }
    if (rc == 0 && new_days > SHARD_MAP_DAYS_MAX - map->day_count) {
        ds_log_error("shard map %s: more than %u days", map->path, SHARD_MAP_DAYS_MAX);
        rc = -DS_ELIMIT;
    }
    if (rc != 0) {
        free(data);
        return rc;
    }
    map->dirty = shardmap_body_merge(map, data, body_begin, body_end);
    free(data);
    return 0;
}

/* Writes the whole map as text into map->text; returns its length. */
static size_t shardmap_format(const struct shard_map *map)
{
    char *text = map->text;
    size_t len = (size_t)snprintf(text, SHARDMAP_HEADER_BYTES + 1, "%s%u\n", SHARDMAP_MAGIC,
                                  SHARDMAP_VERSION);
    ASSERT(len == SHARDMAP_HEADER_BYTES);
    for (size_t i = 0; i < map->day_count; i++) {
        int32_t day = map->days_sorted[i];
        ds_date_format(day, text + len);
        len += SHARDMAP_DATE_BYTES;
        int n =
            snprintf(text + len, SHARDMAP_COUNT_DIGITS_MAX + 3, " %u\n", shard_map_get(map, day));
        ASSERT(n >= 3 && (size_t)n <= SHARDMAP_COUNT_DIGITS_MAX + 2);
        len += (size_t)n;
    }
    uint32_t crc = ds_crc32c(0, text, len);
    int n = snprintf(text + len, SHARDMAP_CRC_LINE_BYTES + 1, "%s%08x\n", SHARDMAP_CRC_PREFIX, crc);
    ASSERT(n == (int)SHARDMAP_CRC_LINE_BYTES);
    len += (size_t)n;
    ASSERT(len <= SHARDMAP_FILE_BYTES_MAX);
    return len;
}

int shard_map_sync(struct shard_map *map)
{
    ASSERT(map != NULL);
    if (!map->dirty) {
        return 0;
    }
    if (map->flags & SHARD_MAP_READ_ONLY) {
        return -EROFS;
    }
    if (map->memory_only) {
        map->dirty = false;
        return 0;
    }
    ASSERT(map->text != NULL);
    size_t len = shardmap_format(map);
    int rc = ds_write_file_atomic(map->path, map->text, len);
    if (rc != 0) {
        ds_log_error("shard map %s: cannot write: %s", map->path, ds_strerror(rc));
        return rc;
    }
    map->dirty = false;
    return 0;
}

int shard_map_reload(struct shard_map *map)
{
    ASSERT(map != NULL);
    if (map->memory_only) {
        return 0;
    }
    bool found = false;
    return shardmap_load(map, &found);
}

int shard_map_grow_sync(struct shard_map *map, int32_t day, uint32_t shard_count)
{
    ASSERT(map != NULL);
    ASSERT(day >= 0 && day <= DS_DAY_MAX);
    if (map->flags & SHARD_MAP_READ_ONLY) {
        return -EROFS;
    }
    /* Whatever is pending goes first, so that a failed growth can restore a synced state. */
    int rc = shard_map_sync(map);
    if (rc != 0) {
        return rc;
    }
    size_t index = shardmap_slot_index(map, day);
    uint32_t previous = map->slots[index].shard_count;
    if (previous == 0) {
        return -ENOENT;
    }
    rc = shard_map_grow(map, day, shard_count);
    if (rc != 0) {
        return rc;
    }
    rc = shard_map_sync(map);
    if (rc != 0) {
        /* The file still says `previous`: memory must too, or events would use shards that a
         * restart forgets (a count that fans out over fewer shards than hold data). */
        map->slots[index].shard_count = previous;
        map->dirty = false;
        return rc;
    }
    ASSERT(shard_map_get(map, day) == shard_count);
    return 0;
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

void shard_map_close(struct shard_map *map)
{
    if (map == NULL) {
        return;
    }
    free(map->text);
    free(map->days_sorted);
    free(map->slots);
    free(map);
}

static int shardmap_alloc(const char *dir, uint32_t base_shards, unsigned flags,
                          struct shard_map **out)
{
    struct shard_map *map = calloc(1, sizeof(*map));
    if (map == NULL) {
        return -ENOMEM;
    }
    map->base_shards = base_shards;
    map->flags = flags;
    map->memory_only = dir == NULL;
    int n = snprintf(map->path, sizeof(map->path), "%s/%s", dir != NULL ? dir : "(memory)",
                     SHARDMAP_FILE_NAME);
    if (n < 0 || (size_t)n >= sizeof(map->path)) {
        free(map);
        return -ENAMETOOLONG;
    }
    bool writes_file = !(flags & SHARD_MAP_READ_ONLY) && !map->memory_only;
    map->slots = calloc(SHARDMAP_SLOT_COUNT, sizeof(map->slots[0]));
    map->days_sorted = calloc(SHARD_MAP_DAYS_MAX, sizeof(map->days_sorted[0]));
    if (writes_file) {
        map->text = malloc(SHARDMAP_FILE_BYTES_MAX + 1);
    }
    if (map->slots == NULL || map->days_sorted == NULL || (writes_file && map->text == NULL)) {
        shard_map_close(map);
        return -ENOMEM;
    }
    *out = map;
    return 0;
}

int shard_map_open(const char *dir, uint32_t base_shards, unsigned flags, struct shard_map **out)
{
    ASSERT(out != NULL);
    if (base_shards == 0 || base_shards > SHARD_COUNT_MAX ||
        (flags & ~(unsigned)SHARD_MAP_READ_ONLY) != 0) {
        return -EINVAL;
    }
    struct shard_map *map = NULL;
    int rc = shardmap_alloc(dir, base_shards, flags, &map);
    if (rc != 0) {
        return rc;
    }
    if (map->memory_only) {
        *out = map;
        return 0;
    }
    bool found = false;
    rc = shardmap_load(map, &found);
    if (rc != 0) {
        goto fail;
    }
    if (!found && !(flags & SHARD_MAP_READ_ONLY)) {
        /* Create the file now, so that a writer learns at once that it cannot write here and
         * readers find a map from the start. */
        rc = ds_mkdir_p(dir);
        if (rc != 0) {
            ds_log_error("shard map %s: cannot create %s: %s", map->path, dir, ds_strerror(rc));
            goto fail;
        }
        map->dirty = true;
        rc = shard_map_sync(map);
        if (rc != 0) {
            goto fail;
        }
    }
    *out = map;
    return 0;
fail:
    shard_map_close(map);
    return rc;
}
