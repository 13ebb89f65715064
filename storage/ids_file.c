/*
 * Sealed files of the orders-by-id store (ids_file.h).
 *
 * Layout, little-endian:
 *   blocks   each a zstd frame of whole records of the log's codec (each with its CRC),
 *            ascending order id; a block ends before the record that would take it past
 *            IDS_FILE_BLOCK_BYTES (raw)
 *   index    per block: u64 offset, u32 stored bytes, the block's first order id (u8 0 and a u64
 * for an integer id, u8 1, a length byte and the bytes for a string id) filter   bloom_words u64s:
 * a blocked bloom filter (one 512-bit line per id, 6 bits in it) footer   IDS_FILE_FOOTER_BYTES: 0
 * u32 CRC32C of footer bytes 4..80, 4 u32 version, 8 i32 day, 12 u32 blocks, 16 u64 records, 24 u64
 * index offset, 32 u64 index bytes, 40 u64 bloom words, 48 u32 CRC32C of index and filter, 52 u32
 * flags (1: integer ids present), 56 i64 smallest integer id, 64 i64 largest, 72 u64 magic Opening
 * reads the footer and then index and filter in one read, checked by their CRCs; the records are
 * checked (their own CRCs) when a lookup or a scan decodes them.
 *
 * Sorted by order id rather than by hash: integer ids rise with time, so the file's integer id
 * range alone turns away most lookups of new orders before the filter, and a block holds orders
 * of neighbouring ids and times (what per-column delta coding of ids and timestamps needs). A
 * hash order would make the index a u64 array but lose both.
 * Rejected: a per-file hash table (a lookup without a block search, but no ordered merge of a
 * day's file with the recent records, and every probe a random read).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/ids.h"
#include "storage/ids_file.h"
#include "storage/ids_record.h"

#define IDS_FILE_VERSION 2u
#define IDS_FILE_FOOTER_BYTES 80u
#define IDS_FILE_MAGIC 0x31595344534449ull /* "IDSDSY1" */
#define IDS_FILE_FLAG_INTEGERS 1u
#define IDS_FILE_BLOOM_LINE_WORDS 8u
#define IDS_FILE_BLOOM_PROBES 6u
/* The largest block: a block closes before a record that would overflow it, so it is either at
 * most IDS_FILE_BLOCK_BYTES or one record. */
#define IDS_FILE_BLOCK_MAX (IDS_FILE_BLOCK_BYTES + IDS_RECORD_BYTES_MAX)
/* A block as stored: a zstd frame of at most IDS_FILE_BLOCK_MAX bytes. */
#define IDS_FILE_STORED_MAX ZSTD_COMPRESSBOUND(IDS_FILE_BLOCK_MAX)
/* An index entry: offset, bytes, kind, and a u64 or a length byte and the id's bytes. */
#define IDS_FILE_INDEX_ENTRY_MAX (8u + 4u + 1u + 1u + DS_ID_BYTES_MAX)

struct ids_file {
    int fd;
    int32_t day;
    uint32_t blocks_count;
    uint64_t records;
    uint64_t bytes;
    bool has_integers;
    int64_t integer_min;
    int64_t integer_max;
    uint64_t *offsets;    /* blocks_count + 1: the last is the index's offset */
    struct ds_id *firsts; /* the first id of each block */
    uint64_t *bloom;      /* bloom_words */
    uint64_t bloom_words;
    char path[DS_PATH_MAX];
};

struct ids_file_writer {
    int fd;
    int32_t day;
    uint64_t offset;
    uint64_t records;
    uint32_t blocks_count;
    bool has_integers;
    int64_t integer_min;
    int64_t integer_max;
    struct ds_id last;
    uint8_t *index;
    size_t index_bytes;
    size_t index_capacity;
    size_t entry_at; /* where the open block's index entry starts */
    uint64_t *bloom;
    uint64_t bloom_words;
    size_t block_used;
    ZSTD_CCtx *cctx;
    uint8_t block[IDS_FILE_BLOCK_MAX];
    uint8_t stored[IDS_FILE_STORED_MAX];
    char path[DS_PATH_MAX];
};

/* ---- the filter ---------------------------------------------------------------------------- */

static uint64_t bloom_words_for(uint64_t records)
{
    uint64_t bits = records * IDS_FILE_BLOOM_BITS_PER_RECORD;
    uint64_t lines = (bits + 511) / 512;
    return (lines > 0 ? lines : 1) * IDS_FILE_BLOOM_LINE_WORDS;
}

/* The line of hash and the bits it sets in it. */
static uint64_t bloom_line(uint64_t hash, uint64_t words, uint64_t mask[IDS_FILE_BLOOM_LINE_WORDS])
{
    uint64_t lines = words / IDS_FILE_BLOOM_LINE_WORDS;
    uint64_t h = ds_mix64(hash ^ 0x6a09e667f3bcc909ull);
    memset(mask, 0, IDS_FILE_BLOOM_LINE_WORDS * sizeof(uint64_t));
    for (unsigned k = 0; k < IDS_FILE_BLOOM_PROBES; k++, h >>= 9) {
        unsigned bit = (unsigned)(h & 511u);
        mask[bit >> 6] |= 1ull << (bit & 63u);
    }
    return ((hash >> 32) * lines) >> 32;
}

static void bloom_add(uint64_t *bloom, uint64_t words, uint64_t hash)
{
    uint64_t mask[IDS_FILE_BLOOM_LINE_WORDS];
    uint64_t *line = bloom + bloom_line(hash, words, mask) * IDS_FILE_BLOOM_LINE_WORDS;
    for (unsigned i = 0; i < IDS_FILE_BLOOM_LINE_WORDS; i++) {
        line[i] |= mask[i];
    }
}

static bool bloom_may_hold(const uint64_t *bloom, uint64_t words, uint64_t hash)
{
    uint64_t mask[IDS_FILE_BLOOM_LINE_WORDS];
    const uint64_t *line = bloom + bloom_line(hash, words, mask) * IDS_FILE_BLOOM_LINE_WORDS;
    for (unsigned i = 0; i < IDS_FILE_BLOOM_LINE_WORDS; i++) {
        if ((line[i] & mask[i]) != mask[i]) {
            return false;
        }
    }
    return true;
}

/* ---- plain file I/O (sealed files are written and read off the commit path) ---------------- */

/* Reads exactly len bytes at offset: a short read is -DS_ECORRUPT (the file is shorter than
 * its index says). */
static int read_all(int fd, void *buf, size_t len, uint64_t offset)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = pread(fd, p, len, (off_t)offset);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return -errno;
        }
        if (n == 0) {
            return -DS_ECORRUPT;
        }
        p += n;
        len -= (size_t)n;
        offset += (uint64_t)n;
    }
    return 0;
}

/* ---- opening ------------------------------------------------------------------------------- */

static bool index_parse(struct ids_file *f, const uint8_t *p, const uint8_t *end,
                        uint64_t index_offset)
{
    for (uint32_t b = 0; b < f->blocks_count; b++) {
        if (end - p < 14) {
            return false;
        }
        uint64_t at = ds_get_le64(p); /* f->offsets[b]: where the block before ended */
        uint32_t bytes = ds_get_le32(p + 8);
        struct ds_id *id = &f->firsts[b];
        memset(id, 0, sizeof(*id));
        uint8_t kind = p[12];
        p += 13;
        if (kind == 0) {
            if (end - p < 8) {
                return false;
            }
            id->value = (int64_t)ds_get_le64(p);
            p += 8;
        } else if (kind == 1 && p[0] >= 1 && p[0] <= DS_ID_BYTES_MAX && end - p > p[0]) {
            id->is_string = true;
            id->len = p[0];
            memcpy(id->text, p + 1, id->len);
            p += 1u + id->len;
        } else {
            return false;
        }
        /* Blocks follow each other from offset 0 and their first ids rise. */
        bool ordered = at == f->offsets[b] && (b == 0 || ids_id_compare(&f->firsts[b - 1], id) < 0);
        if (!ordered || bytes == 0 || bytes > IDS_FILE_STORED_MAX || at + bytes > index_offset) {
            return false;
        }
        f->offsets[b + 1] = f->offsets[b] + bytes;
    }
    return p == end && (f->blocks_count == 0 || f->offsets[f->blocks_count] == index_offset);
}

/* Checks the footer at buf against the file's size; fills the fields it gives. */
static bool footer_parse(struct ids_file *f, const uint8_t *buf, uint64_t size, uint64_t *index_at,
                         uint64_t *index_bytes, uint32_t *crc)
{
    if (ds_get_le64(buf + 72) != IDS_FILE_MAGIC ||
        ds_get_le32(buf) != ds_crc32c(0, buf + 4, IDS_FILE_FOOTER_BYTES - 4) ||
        ds_get_le32(buf + 4) != IDS_FILE_VERSION) {
        return false;
    }
    f->blocks_count = ds_get_le32(buf + 12);
    f->records = ds_get_le64(buf + 16);
    *index_at = ds_get_le64(buf + 24);
    *index_bytes = ds_get_le64(buf + 32);
    f->bloom_words = ds_get_le64(buf + 40);
    *crc = ds_get_le32(buf + 48);
    f->has_integers = (ds_get_le32(buf + 52) & IDS_FILE_FLAG_INTEGERS) != 0;
    f->integer_min = (int64_t)ds_get_le64(buf + 56);
    f->integer_max = (int64_t)ds_get_le64(buf + 64);
    uint64_t tail = size - IDS_FILE_FOOTER_BYTES;
    return (int32_t)ds_get_le32(buf + 8) == f->day && f->bloom_words % 8 == 0 &&
           f->bloom_words > 0 && f->bloom_words <= tail / 8 && *index_at <= tail &&
           *index_bytes <= tail - *index_at &&
           *index_at + *index_bytes + f->bloom_words * 8 == tail &&
           f->blocks_count <= *index_bytes / 14 && f->records >= f->blocks_count &&
           (f->blocks_count == 0) == (f->records == 0);
}

static int file_load(struct ids_file *f)
{
    struct stat st;
    if (fstat(f->fd, &st) != 0) {
        return -errno;
    }
    uint64_t size = (uint64_t)st.st_size;
    uint8_t footer[IDS_FILE_FOOTER_BYTES];
    uint64_t index_at = 0, index_bytes = 0;
    uint32_t crc = 0;
    if (size < IDS_FILE_FOOTER_BYTES) {
        return -DS_ECORRUPT;
    }
    int rc = read_all(f->fd, footer, sizeof(footer), size - IDS_FILE_FOOTER_BYTES);
    if (rc != 0) {
        return rc;
    }
    if (!footer_parse(f, footer, size, &index_at, &index_bytes, &crc)) {
        return -DS_ECORRUPT;
    }
    f->bytes = size;
    size_t tail = (size_t)(size - IDS_FILE_FOOTER_BYTES - index_at);
    uint8_t *buf = malloc(tail);
    f->offsets = malloc(((size_t)f->blocks_count + 1) * sizeof(*f->offsets));
    f->firsts = malloc(((size_t)f->blocks_count + 1) * sizeof(*f->firsts));
    f->bloom = malloc((size_t)f->bloom_words * 8);
    if (buf == NULL || f->offsets == NULL || f->firsts == NULL || f->bloom == NULL) {
        free(buf);
        return -ENOMEM;
    }
    f->offsets[0] = 0;
    rc = read_all(f->fd, buf, tail, index_at);
    if (rc == 0 && ds_crc32c(0, buf, tail) != crc) {
        rc = -DS_ECORRUPT;
    }
    if (rc == 0 && !index_parse(f, buf, buf + index_bytes, index_at)) {
        rc = -DS_ECORRUPT;
    }
    for (uint64_t i = 0; rc == 0 && i < f->bloom_words; i++) {
        f->bloom[i] = ds_get_le64(buf + index_bytes + i * 8);
    }
    free(buf);
    return rc;
}

int ids_file_open(const char *path, int32_t day, struct ids_file **out)
{
    ASSERT(path != NULL);
    ASSERT(out != NULL);
    struct ids_file *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        return -ENOMEM;
    }
    f->day = day;
    snprintf(f->path, sizeof(f->path), "%s", path);
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc = f->fd < 0 ? -errno : file_load(f);
    if (rc != 0) {
        if (rc != -ENOENT) {
            ds_log_error("%s: cannot open the sealed file: %s", path, ds_strerror(rc));
        }
        ids_file_close(f);
        return rc;
    }
    *out = f;
    return 0;
}

void ids_file_close(struct ids_file *f)
{
    if (f == NULL) {
        return;
    }
    if (f->fd >= 0) {
        close(f->fd);
    }
    free(f->offsets);
    free(f->firsts);
    free(f->bloom);
    free(f);
}

uint64_t ids_file_records(const struct ids_file *f)
{
    return f->records;
}

uint64_t ids_file_bytes(const struct ids_file *f)
{
    return f->bytes;
}

uint64_t ids_file_memory_bytes(const struct ids_file *f)
{
    return sizeof(*f) +
           ((uint64_t)f->blocks_count + 1) * (sizeof(uint64_t) + sizeof(struct ds_id)) +
           f->bloom_words * 8;
}

/* ---- reading ------------------------------------------------------------------------------- */

/* Reads and decompresses block b into buf (IDS_FILE_BLOCK_MAX bytes); returns its raw bytes or
 * a negated code. */
static int64_t block_read(struct ids_file *f, uint32_t b, uint8_t *buf, ZSTD_DCtx *dctx)
{
    uint8_t stored[IDS_FILE_STORED_MAX];
    size_t bytes = (size_t)(f->offsets[b + 1] - f->offsets[b]);
    int rc = read_all(f->fd, stored, bytes, f->offsets[b]);
    if (rc == 0) {
        size_t raw = ZSTD_decompressDCtx(dctx, buf, IDS_FILE_BLOCK_MAX, stored, bytes);
        if (!ZSTD_isError(raw) && raw > 0) {
            return (int64_t)raw;
        }
        rc = -DS_ECORRUPT;
    }
    ds_log_error("%s: block at offset %llu: %s", f->path, (unsigned long long)f->offsets[b],
                 ds_strerror(rc));
    return rc;
}

/* The block whose range may hold id: the last whose first id is not above it, or -1. */
static int64_t block_of(const struct ids_file *f, const struct ds_id *id)
{
    int64_t lo = 0, hi = (int64_t)f->blocks_count - 1, found = -1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (ids_id_compare(&f->firsts[mid], id) <= 0) {
            found = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return found;
}

int ids_file_find(struct ids_file *f, const struct ds_id *id, uint64_t hash, uint8_t *block,
                  ZSTD_DCtx *dctx, uint8_t *dst, struct storage_order *out)
{
    if (!id->is_string &&
        (!f->has_integers || id->value < f->integer_min || id->value > f->integer_max)) {
        return -ENOENT;
    }
    if (!bloom_may_hold(f->bloom, f->bloom_words, hash)) {
        return -ENOENT;
    }
    int64_t b = block_of(f, id);
    if (b < 0) {
        return -ENOENT;
    }
    int64_t got = block_read(f, (uint32_t)b, block, dctx);
    if (got < 0) {
        return (int)got;
    }
    size_t bytes = (size_t)got;
    for (size_t at = 0; at < bytes;) {
        size_t padded = ids_record_padded(block + at, bytes - at);
        struct ds_id rid;
        if (padded == 0 || padded > bytes - at || !ids_record_id(block + at, padded, &rid)) {
            ds_log_error("%s: bad record at %zu of block %lld", f->path, at, (long long)b);
            return -DS_ECORRUPT;
        }
        int cmp = ids_id_compare(&rid, id);
        if (cmp > 0) {
            return -ENOENT;
        }
        if (cmp == 0) {
            bool tombstone = false;
            memcpy(dst, block + at, padded);
            int rc = ids_record_decode(dst, padded, out, &tombstone);
            if (rc != 0 || tombstone || out->day != f->day) {
                ds_log_error("%s: bad record at %zu of block %lld", f->path, at, (long long)b);
                return -DS_ECORRUPT;
            }
            return 0;
        }
        at += padded;
    }
    return -ENOENT;
}

void ids_file_iter_start(struct ids_file *f, struct ids_file_iter *it)
{
    it->f = f;
    it->dctx = ZSTD_createDCtx(); /* NULL: next answers -ENOMEM */
    it->block = 0;
    it->used = 0;
    it->bytes = 0;
}

int ids_file_iter_next(struct ids_file_iter *it, const uint8_t **rec, size_t *bytes)
{
    if (it->used == it->bytes) {
        if (it->block == it->f->blocks_count) {
            return 0;
        }
        if (it->dctx == NULL) {
            return -ENOMEM;
        }
        int64_t got = block_read(it->f, it->block, it->buf, it->dctx);
        if (got < 0) {
            return (int)got;
        }
        it->block++;
        it->used = 0;
        it->bytes = (size_t)got;
    }
    size_t padded = ids_record_padded(it->buf + it->used, it->bytes - it->used);
    if (padded == 0 || padded > it->bytes - it->used) {
        ds_log_error("%s: bad record in block %u", it->f->path, it->block - 1);
        return -DS_ECORRUPT;
    }
    *rec = it->buf + it->used;
    *bytes = padded;
    it->used += padded;
    return 1;
}

void ids_file_iter_end(struct ids_file_iter *it)
{
    ZSTD_freeDCtx(it->dctx);
    it->dctx = NULL;
}

/* ---- writing ------------------------------------------------------------------------------- */

int ids_file_writer_open(const char *path, int32_t day, uint64_t records_max,
                         struct ids_file_writer **out)
{
    struct ids_file_writer *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        return -ENOMEM;
    }
    w->day = day;
    snprintf(w->path, sizeof(w->path), "%s", path);
    w->bloom_words = bloom_words_for(records_max);
    w->bloom = calloc((size_t)w->bloom_words, 8);
    w->cctx = ZSTD_createCCtx();
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = w->fd < 0 ? -errno : w->bloom == NULL || w->cctx == NULL ? -ENOMEM : 0;
    if (rc != 0) {
        ds_log_error("%s: cannot create: %s", path, ds_strerror(rc));
        ids_file_writer_abort(w);
        return rc;
    }
    *out = w;
    return 0;
}

static int index_reserve(struct ids_file_writer *w, size_t more)
{
    if (w->index_bytes + more <= w->index_capacity) {
        return 0;
    }
    size_t capacity = w->index_capacity == 0 ? 4096 : w->index_capacity * 2;
    while (capacity < w->index_bytes + more) {
        capacity *= 2;
    }
    uint8_t *index = realloc(w->index, capacity);
    if (index == NULL) {
        return -ENOMEM;
    }
    w->index = index;
    w->index_capacity = capacity;
    return 0;
}

static int block_flush(struct ids_file_writer *w)
{
    if (w->block_used == 0) {
        return 0;
    }
    size_t stored = ZSTD_compressCCtx(w->cctx, w->stored, sizeof(w->stored), w->block,
                                      w->block_used, IDS_FILE_ZSTD_LEVEL);
    if (ZSTD_isError(stored)) {
        return -EIO;
    }
    int rc = ds_write_full(w->fd, w->stored, stored);
    if (rc != 0) {
        return rc;
    }
    ds_put_le32(w->index + w->entry_at + 8, (uint32_t)stored);
    w->offset += stored;
    w->block_used = 0;
    return 0;
}

/* Opens a block whose first record has id. */
static int block_start(struct ids_file_writer *w, const struct ds_id *id)
{
    int rc = index_reserve(w, IDS_FILE_INDEX_ENTRY_MAX);
    if (rc != 0) {
        return rc;
    }
    uint8_t *p = w->index + w->index_bytes;
    w->entry_at = w->index_bytes;
    ds_put_le64(p, w->offset);
    ds_put_le32(p + 8, 0);
    p[12] = id->is_string ? 1 : 0;
    p += 13;
    if (!id->is_string) {
        ds_put_le64(p, (uint64_t)id->value);
        p += 8;
    } else {
        p[0] = id->len;
        memcpy(p + 1, id->text, id->len);
        p += 1u + id->len;
    }
    w->index_bytes = (size_t)(p - w->index);
    w->blocks_count++;
    return 0;
}

int ids_file_writer_add(struct ids_file_writer *w, const uint8_t *rec, size_t bytes)
{
    struct ds_id id;
    ASSERT(bytes <= IDS_RECORD_BYTES_MAX);
    ASSERT(ids_record_id(rec, bytes, &id));
    ASSERT(w->records == 0 || ids_id_compare(&w->last, &id) < 0);
    int rc = 0;
    if (w->block_used > 0 && w->block_used + bytes > IDS_FILE_BLOCK_BYTES) {
        rc = block_flush(w);
    }
    if (rc == 0 && w->block_used == 0) {
        rc = block_start(w, &id);
    }
    if (rc != 0) {
        return rc;
    }
    memcpy(w->block + w->block_used, rec, bytes);
    w->block_used += bytes;
    bloom_add(w->bloom, w->bloom_words, ids_id_hash(&id));
    if (!id.is_string) {
        w->integer_min = !w->has_integers || id.value < w->integer_min ? id.value : w->integer_min;
        w->integer_max = !w->has_integers || id.value > w->integer_max ? id.value : w->integer_max;
        w->has_integers = true;
    }
    w->last = id;
    w->records++;
    return 0;
}

uint64_t ids_file_writer_records(const struct ids_file_writer *w)
{
    return w->records;
}

static int writer_tail(struct ids_file_writer *w)
{
    int rc = block_flush(w);
    rc = rc == 0 ? index_reserve(w, (size_t)w->bloom_words * 8) : rc;
    if (rc != 0) {
        return rc;
    }
    uint64_t index_at = w->offset;
    size_t index_bytes = w->index_bytes;
    for (uint64_t i = 0; i < w->bloom_words; i++) {
        ds_put_le64(w->index + index_bytes + i * 8, w->bloom[i]);
    }
    size_t tail = index_bytes + (size_t)w->bloom_words * 8;
    uint8_t footer[IDS_FILE_FOOTER_BYTES] = {0};
    ds_put_le32(footer + 4, IDS_FILE_VERSION);
    ds_put_le32(footer + 8, (uint32_t)w->day);
    ds_put_le32(footer + 12, w->blocks_count);
    ds_put_le64(footer + 16, w->records);
    ds_put_le64(footer + 24, index_at);
    ds_put_le64(footer + 32, index_bytes);
    ds_put_le64(footer + 40, w->bloom_words);
    ds_put_le32(footer + 48, ds_crc32c(0, w->index, tail));
    ds_put_le32(footer + 52, w->has_integers ? IDS_FILE_FLAG_INTEGERS : 0u);
    ds_put_le64(footer + 56, (uint64_t)w->integer_min);
    ds_put_le64(footer + 64, (uint64_t)w->integer_max);
    ds_put_le64(footer + 72, IDS_FILE_MAGIC);
    ds_put_le32(footer, ds_crc32c(0, footer + 4, IDS_FILE_FOOTER_BYTES - 4));
    rc = ds_write_full(w->fd, w->index, tail);
    rc = rc == 0 ? ds_write_full(w->fd, footer, sizeof(footer)) : rc;
    if (rc == 0 && fsync(w->fd) != 0) {
        rc = -errno;
    }
    return rc;
}

int ids_file_writer_finish(struct ids_file_writer *w)
{
    int rc = writer_tail(w);
    if (rc != 0) {
        ds_log_error("%s: cannot write: %s", w->path, ds_strerror(rc));
        ids_file_writer_abort(w);
        return rc;
    }
    close(w->fd);
    ZSTD_freeCCtx(w->cctx);
    free(w->index);
    free(w->bloom);
    free(w);
    return 0;
}

void ids_file_writer_abort(struct ids_file_writer *w)
{
    if (w == NULL) {
        return;
    }
    if (w->fd >= 0) {
        close(w->fd);
        (void)unlink(w->path);
    }
    ZSTD_freeCCtx(w->cctx);
    free(w->index);
    free(w->bloom);
    free(w);
}
