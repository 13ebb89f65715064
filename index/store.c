/*
 * store.c: the by-customer index store (index.h): an append-only log of per-customer runs and a
 * fixed table of slots, the design a prototype bench measured against RocksDB, the store it
 * replaced (ARCHITECTURE.md, "The by-customer index", has the figures; the bench is in history).
 *
 * Directory: DIR/FORMAT ("dayshard-gsi 2"), DIR/lock (flock(2)ed by the one writer), DIR/log,
 * DIR/table (the last checkpoint of the slot table; DIR/table.tmp while one is written).
 *
 * The log (all integers little-endian): a 64-byte header (magic, u32 slots_log2, u32 CRC32C of
 * the 28 bytes before it), then records, each
 *
 *   u32 crc       CRC32C of the record's bytes after this field
 *   u32 len       the record's bytes, header included
 *   u8  type      INDEX_RECORD_RUN, INDEX_RECORD_CURSOR, INDEX_RECORD_SEALED or INDEX_RECORD_DIRECTORY
 *
 * A run (one customer's entries of one apply, sorted by tail key, that is newest first; at most
 * INDEX_RUN_ENTRIES_MAX, a customer with more in one apply gets several runs):
 *
 *   [9]  u8 customer kind (0 integer, 1 string)   [10] u8 customer id bytes (8 for an integer)
 *   [12] u32 entry count                          [16] u64 prev: the chain's previous run, or 0
 *   [24] i64 chain_max_ts: the newest ts in this run and every run before it on its chain
 *   [32] i64 min_ts: the oldest ts in this run
 *   [40] u32 slot index                           [44] u32 zero
 *   [48] u64 slot tag (the tag of the slot's owner, which may be another customer)
 *   [56] i64 the chain_max_ts of the previous run (0 without one), so a walk stops before
 *        reading a run it does not need
 *   [64] u64 skip: the chain's head before this customer's runs of this apply (0: none), so
 *        a walk that needs nothing older than this run from this apply jumps past the rest
 *   [72] customer id bytes, then each entry: u8 tail key bytes, tail key (key.h), u8 value
 *        bytes, value (key.h)
 *
 * A cursor record ends every apply: [12] u32 cursor bytes, [16] u64 apply number, [24] the
 * cursor. Records of an apply that has no cursor record after them were never acknowledged: an
 * opening writer cuts them off (and everything from a damaged record on), and the builder
 * replays them from the cursor it finds.
 *
 * The slot table: 2^k slots of (tag, head, chain max ts). A customer's tag is a 64-bit hash of its
 * id (never 0, which marks an empty slot); its home slot is the tag's low k bits; it owns the
 * first slot from home, within INDEX_PROBE_MAX slots, that holds its tag or was empty when its
 * first run was written (slots are never emptied, so that answer never changes). When all of
 * them belong to others, its runs join the home slot's chain and carry their own id, which
 * queries compare: a full table costs query time, not correctness. Every run records the slot it
 * went to and that slot's tag, so a table rebuilt from the log is the writer's table exactly.
 *
 * Queries walk a chain from its head (the newest run), newest runs first, merging each run's
 * entries of the customer into the best limit + 1 distinct tail keys; equal keys (an entry
 * applied again) count once, the newest run's copy. The walk stops when the chain_max_ts of the
 * next run is older than the worst kept entry (nothing older on the chain can enter), so for
 * events that arrive roughly in time order a newest-10 query reads one or two runs.
 *
 * Concurrency: index_apply claims slots (tag stores), appends runs, then publishes each slot's new
 * head with a release store, then appends the cursor record; queries load heads with acquire and
 * read records with pread, so a query sees a customer's runs of an apply all or none. A reader
 * handle keeps a table of its own, brought up to the last complete apply by scanning the log.
 *
 * Compaction (index_compact, issue 16) rewrites the log as DIR/log.compact, renamed over DIR/log
 * once synced (DIR/table removed first): every chain's distinct entries as sealed records (type
 * 3, seal.h: one section per slot, varint and delta fields, zstd when it pays), then one cursor
 * record repeating the last apply's number. A customer with 4 or more sections gets a directory
 * record (type 4: [12] u32 count, [16] u32 slot, [20] u32 0, then count x (u64 section record
 * offset, i64 oldest ts), newest first) named by its newest section, so a walk with a token
 * jumps to the section holding it. Readers see a sealed section as the run image seal.c makes
 * of it. A compacted log is its own checkpoint until checkpoint_bytes more are appended.
 *
 * Checkpoints: the writer writes the table's used slots (CRC32C) to DIR/table atomically every
 * checkpoint_bytes of log and at close, after syncing the log (a thread of its own does it while
 * applies go on: "checkpoints" below). The header names the cursor
 * record it covers (offset, CRC), so a checkpoint of another log (the log cut shorter since, or
 * rebuilt) is never taken: opening then scans the whole log.
 */
#include "index/index.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "index/key.h"
#include "index/seal.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the index files are little-endian");

#define INDEX_FORMAT_TEXT "dayshard-gsi 2\n"
#define INDEX_FORMAT_BYTES_MAX 64u
#define INDEX_LOG_MAGIC "dayshard-gsi-log 1\n"
#define INDEX_TABLE_MAGIC "dayshard-gsi-table 1\n"
#define INDEX_MAGIC_BYTES 24u
#define INDEX_LOG_HEADER_BYTES 64u
#define INDEX_TABLE_HEADER_BYTES 64u
#define INDEX_RECORD_RUN 1u
#define INDEX_RECORD_CURSOR 2u
#define INDEX_RECORD_SEALED INDEX_SEAL_RECORD_TYPE
#define INDEX_RECORD_DIRECTORY INDEX_SEAL_DIRECTORY_TYPE
/* A directory record: [12] u32 count, [16] u32 slot, [20] u32 zero, then count entries of u64
 * offset and i64 oldest ts of a sealed section of the customer, newest first. */
#define INDEX_DIRECTORY_HEADER_BYTES 24u
#define INDEX_DIRECTORY_ENTRY_BYTES 16u
#define INDEX_DIRECTORY_ENTRIES_MAX                                                                  \
    ((INDEX_RECORD_BYTES_MAX - INDEX_DIRECTORY_HEADER_BYTES) / INDEX_DIRECTORY_ENTRY_BYTES)
/* A customer given at least this many sections by a compaction gets a directory (when they
 * fit one record: a customer with more, some 3M orders, pages without). */
#define INDEX_DIRECTORY_SECTIONS_MIN 4u
#define INDEX_RECORD_PREFIX_BYTES 12u /* crc, len, type, three bytes of the type's own */
#define INDEX_RUN_HEADER_BYTES 72u
#define INDEX_CURSOR_HEADER_BYTES 24u
/* Entries per run: a heavy customer's apply becomes runs of at most this many, so a record
 * (~190 KiB at most) fits the scan buffer and a query reads a bounded amount per run. The
 * newest run of an apply holds at most INDEX_RUN_HEAD_ENTRIES (~2 KiB), so a newest-N query
 * reads little more than it answers: with a backlog, each apply's runs of a heavy customer can
 * span a whole day, and a query then reads the newest run of every such apply. */
#define INDEX_RUN_ENTRIES_MAX 1024u
#define INDEX_RUN_HEAD_ENTRIES 64u
#define INDEX_ENTRY_BYTES_MAX (1u + INDEX_TAIL_BYTES_MAX + 1u + INDEX_VALUE_BYTES_MAX)
#define INDEX_RUN_BYTES_MAX                                                                          \
    (INDEX_RUN_HEADER_BYTES + DS_ID_BYTES_MAX + INDEX_RUN_ENTRIES_MAX * INDEX_ENTRY_BYTES_MAX)
#define INDEX_CURSOR_RECORD_BYTES_MAX (INDEX_CURSOR_HEADER_BYTES + INDEX_CURSOR_BYTES_MAX)
#define INDEX_RECORD_BYTES_MAX                                                                       \
    (INDEX_RUN_BYTES_MAX > INDEX_CURSOR_RECORD_BYTES_MAX ? INDEX_RUN_BYTES_MAX                           \
                                                     : INDEX_CURSOR_RECORD_BYTES_MAX)
/* The writer's buffer (one pwrite when full) and the scanner's read size. */
#define INDEX_IO_BUFFER_BYTES (1u << 20)
/* Items ahead of the one being encoded whose slot, tail and entry are prefetched: the batch
 * touches them in sorted order, that is at random (perf: these misses were most of an apply). */
#define INDEX_PREFETCH_AHEAD 16u
/* Digit of the radix sort on slot indexes: 2^11 counters (16 KiB) fit L1 and L2 comfortably,
 * and a table of up to 2^22 slots takes two passes. */
#define INDEX_RADIX_BITS 11u
/* Slots a lookup inspects: 32 x 24 bytes = 12 adjacent cache lines. */
#define INDEX_PROBE_MAX 32u
/* A query's first read of a run: the header and the newest ~100 entries. */
#define INDEX_QUERY_READ_BYTES 4096u
/* The advice every message about a damaged index ends with. */
#define INDEX_REPAIR_HINT "`dayshard fsck --repair` or `dayshard gsi rebuild` restores the index"

static_assert(INDEX_RECORD_BYTES_MAX * 2u <= INDEX_IO_BUFFER_BYTES, "a record fits the I/O buffer");
static_assert(INDEX_SEAL_RECORD_BYTES_MAX <= INDEX_RECORD_BYTES_MAX, "a sealed record is a record");
static_assert(INDEX_IMAGE_HEADER_BYTES == INDEX_RUN_HEADER_BYTES &&
                  INDEX_IMAGE_BYTES_MAX <= INDEX_RUN_BYTES_MAX &&
                  INDEX_SEAL_SECTION_ENTRIES <= INDEX_RUN_ENTRIES_MAX,
              "a sealed section's image is a run");
static_assert(INDEX_RECORD_BYTES_MAX <= UINT32_MAX, "record lengths are u32");
static_assert(INDEX_TAIL_BYTES_MAX <= UINT8_MAX && INDEX_VALUE_BYTES_MAX <= UINT8_MAX,
              "entry part lengths are u8");
static_assert(1u << INDEX_TABLE_SLOTS_LOG2_MIN >= INDEX_PROBE_MAX, "a table holds a probe window");
static_assert(sizeof(INDEX_LOG_MAGIC) <= INDEX_MAGIC_BYTES &&
                  sizeof(INDEX_TABLE_MAGIC) <= INDEX_MAGIC_BYTES,
              "magics fit");

struct index_slot {
    uint64_t tag;   /* the owner's tag; 0: empty */
    uint64_t head;  /* log offset of the chain's newest published run; 0: none yet */
    int64_t max_ts; /* the chain's newest ts (writer only: the next run's chain_max_ts) */
};
static_assert(sizeof(struct index_slot) == INDEX_SLOT_BYTES, "slots are 24 bytes on disk too");

/* One entry of the batch being applied, sorted by (slot, customer, tail key, newest index). */
struct index_item {
    uint32_t slot;
    uint32_t index; /* into the caller's entries and the tail buffer */
    uint64_t tag;
    uint64_t ts_key;        /* the tail key's first 8 bytes as a number (~ts) */
    int64_t customer_value; /* an integer customer id, so sorting rarely touches the entries */
    int64_t order_value;    /* an integer order id: its tail key is made from the item alone */
    bool customer_is_string;
    bool order_is_string; /* its tail key is in the tail buffer */
    uint8_t tail_bytes;
};

/* A new head for a slot, published after the apply's runs are written. */
struct index_publish {
    uint32_t slot;
    uint64_t head;
    int64_t max_ts;
};

struct index {
    bool writer;
    bool failed; /* writer: an apply failed half way; only reopening recovers */
    char dir[DS_PATH_MAX];
    int log_fd;
    int lock_fd;
    uint32_t slots_log2;
    uint64_t mask;
    struct index_slot *slots; /* 2^slots_log2 */
    uint64_t log_end;       /* writer: bytes of log written or buffered; reader: scanned */
    uint64_t applies;       /* the number of the last cursor record */
    uint64_t cursor_at;     /* offset of the last cursor record; 0: none */
    uint32_t cursor_crc;    /* its crc field */
    pthread_mutex_t cursor_lock;
    /* Queries hold it shared while they read the log and the table; index_compact holds it
     * exclusively while it swaps the compacted log and its table in. */
    pthread_rwlock_t swap_lock;
    uint8_t *cursor; /* INDEX_CURSOR_BYTES_MAX: the last cursor */
    uint8_t *scan;   /* INDEX_IO_BUFFER_BYTES: reads of the log and the checkpoint (open, refresh) */
    size_t cursor_len;
    /* writer */
    uint32_t batch_entries_max;
    uint64_t checkpoint_bytes;
    uint64_t checkpoint_end; /* log_end of the last checkpoint */
    uint64_t sealed_end;     /* where the last compaction's records end (0: never compacted) */
    uint8_t *buffer;         /* INDEX_IO_BUFFER_BYTES of records not yet written */
    size_t buffered;
    struct index_item *items;
    struct index_item *items_spare; /* the radix sort's other half */
    uint8_t *tails;               /* batch_entries_max * INDEX_TAIL_BYTES_MAX */
    uint32_t *run;                /* the deduplicated items of one customer */
    struct index_publish *publish;
    size_t publish_count;
    struct index_checkpointer *checkpointer; /* writer: checkpoints (see that section) */
};

/* ---- little helpers ------------------------------------------------------------------------ */

static uint32_t index_u32_get(const uint8_t *src)
{
    uint32_t v;
    memcpy(&v, src, sizeof(v));
    return v;
}

static uint64_t index_u64_get(const uint8_t *src)
{
    uint64_t v;
    memcpy(&v, src, sizeof(v));
    return v;
}

static void index_u32_put(uint8_t *dst, uint32_t v)
{
    memcpy(dst, &v, sizeof(v));
}

static void index_u64_put(uint8_t *dst, uint64_t v)
{
    memcpy(dst, &v, sizeof(v));
}

/* The customer's tag: a hash of kind and id, never 0 (key.c, which seal.c shares). */
static uint64_t index_tag(const struct ds_id *customer)
{
    return index_key_tag(customer);
}

/* The id bytes a run stores: 8 little-endian bytes for an integer, the string's bytes. */
static size_t index_customer_bytes(const struct ds_id *customer, uint8_t *dst)
{
    if (!customer->is_string) {
        index_u64_put(dst, (uint64_t)customer->value);
        return 8;
    }
    memcpy(dst, customer->text, customer->len);
    return customer->len;
}

/* pread of up to len bytes; *got is what the file had. */
static int index_pread_all(int fd, void *dst, size_t len, uint64_t offset, size_t *got)
{
    ssize_t n = ds_pread_full(fd, dst, len, offset);
    if (n < 0) {
        return (int)n;
    }
    *got = (size_t)n;
    return 0;
}

static void index_path(const struct index *g, const char *name, char *dst)
{
    int n = snprintf(dst, DS_PATH_MAX, "%s/%s", g->dir, name);
    ASSERT(n > 0 && n < DS_PATH_MAX);
}

/* ---- sealed records: a thread's buffers ---------------------------------------------------- */

/* What reading a sealed record needs: the record, its raw payload, a section's image and a
 * zstd context; one per thread (queries run on many), made on first use, freed at its exit. */
struct index_seal_ctx {
    ZSTD_DCtx *dctx;
    uint8_t *record; /* INDEX_SEAL_RECORD_BYTES_MAX */
    uint8_t *raw;    /* INDEX_SEAL_RAW_MAX */
    uint8_t *image;  /* INDEX_IMAGE_BYTES_MAX */
};

static pthread_key_t index_seal_key;
static pthread_once_t index_seal_once = PTHREAD_ONCE_INIT;

static void index_seal_ctx_free(void *p)
{
    struct index_seal_ctx *c = p;
    if (c != NULL) {
        ZSTD_freeDCtx(c->dctx);
        free(c->record);
        free(c->raw);
        free(c->image);
        free(c);
    }
}

static void index_seal_key_make(void)
{
    int rc = pthread_key_create(&index_seal_key, index_seal_ctx_free);
    ASSERT(rc == 0);
}

/* This thread's buffers; NULL without memory. */
static struct index_seal_ctx *index_seal_ctx(void)
{
    pthread_once(&index_seal_once, index_seal_key_make);
    struct index_seal_ctx *c = pthread_getspecific(index_seal_key);
    if (c != NULL) {
        return c;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    c->dctx = ZSTD_createDCtx();
    c->record = malloc(INDEX_SEAL_RECORD_BYTES_MAX);
    c->raw = malloc(INDEX_SEAL_RAW_MAX);
    c->image = malloc(INDEX_IMAGE_BYTES_MAX);
    if (c->dctx == NULL || c->record == NULL || c->raw == NULL || c->image == NULL ||
        pthread_setspecific(index_seal_key, c) != 0) {
        index_seal_ctx_free(c);
        return NULL;
    }
    return c;
}

/* ---- slots --------------------------------------------------------------------------------- */

static uint64_t index_slot_tag_load(const struct index_slot *s)
{
    return __atomic_load_n(&s->tag, __ATOMIC_ACQUIRE);
}

/* The slot whose chain holds tag's runs: its own, or the home slot when the window is full.
 * *empty is set when the customer has no slot yet and one is free (its index in *index). */
static uint32_t index_slot_find(const struct index *g, uint64_t tag, bool *empty)
{
    uint64_t home = tag & g->mask;
    for (uint32_t i = 0; i < INDEX_PROBE_MAX; i++) {
        uint32_t index = (uint32_t)((home + i) & g->mask);
        uint64_t t = index_slot_tag_load(&g->slots[index]);
        if (t == tag || t == 0) {
            *empty = t == 0;
            return index;
        }
    }
    *empty = false;
    return (uint32_t)home;
}

/* ---- configuration ------------------------------------------------------------------------- */

void index_config_defaults(struct index_config *cfg)
{
    ASSERT(cfg != NULL);
    memset(cfg, 0, sizeof(*cfg));
    cfg->table_slots_log2 = INDEX_TABLE_SLOTS_LOG2_DEFAULT;
    cfg->batch_entries_max = INDEX_BATCH_ENTRIES_DEFAULT;
    cfg->checkpoint_bytes = INDEX_CHECKPOINT_BYTES_DEFAULT;
}

int index_config_check(const struct index_config *cfg)
{
    ASSERT(cfg != NULL);
    if (cfg->dir == NULL || cfg->dir[0] == '\0' || strlen(cfg->dir) + 16 >= DS_PATH_MAX) {
        ds_log_error("gsi: the index directory is missing or too long");
        return -DS_EUSAGE;
    }
    if (cfg->table_slots_log2 < INDEX_TABLE_SLOTS_LOG2_MIN ||
        cfg->table_slots_log2 > INDEX_TABLE_SLOTS_LOG2_MAX) {
        ds_log_error("gsi: a table of 2^%" PRIu32 " slots is outside 2^%u..2^%u",
                     cfg->table_slots_log2, INDEX_TABLE_SLOTS_LOG2_MIN, INDEX_TABLE_SLOTS_LOG2_MAX);
        return -DS_EUSAGE;
    }
    if (cfg->batch_entries_max < 1 || cfg->batch_entries_max > INDEX_BATCH_ENTRIES_MAX) {
        ds_log_error("gsi: a batch of %" PRIu32 " entries is outside 1..%u", cfg->batch_entries_max,
                     INDEX_BATCH_ENTRIES_MAX);
        return -DS_EUSAGE;
    }
    if (cfg->checkpoint_bytes < INDEX_CHECKPOINT_BYTES_MIN ||
        cfg->checkpoint_bytes > INDEX_CHECKPOINT_BYTES_MAX) {
        ds_log_error("gsi: a checkpoint interval of %" PRIu64 " bytes is outside %llu..%llu",
                     cfg->checkpoint_bytes, INDEX_CHECKPOINT_BYTES_MIN, INDEX_CHECKPOINT_BYTES_MAX);
        return -DS_EUSAGE;
    }
    return 0;
}

uint64_t index_memory_bytes(const struct index_config *cfg)
{
    ASSERT(cfg != NULL);
    uint64_t per_entry = 2u * sizeof(struct index_item) + INDEX_TAIL_BYTES_MAX + sizeof(uint32_t) +
                         sizeof(struct index_publish);
    return ((uint64_t)INDEX_SLOT_BYTES << cfg->table_slots_log2) + INDEX_IO_BUFFER_BYTES * 2u +
           INDEX_CURSOR_BYTES_MAX + (uint64_t)cfg->batch_entries_max * per_entry;
}

/* ---- files --------------------------------------------------------------------------------- */

/* Checks DIR/FORMAT, writing it (and creating DIR) when create and the directory is new. */
static int index_format_check(const char *dir, bool create)
{
    char path[DS_PATH_MAX];
    snprintf(path, sizeof(path), "%s/FORMAT", dir);
    char *text = NULL;
    size_t len = 0;
    int rc = ds_read_file(path, INDEX_FORMAT_BYTES_MAX, &text, &len);
    if (rc == -ENOENT && create) {
        rc = ds_mkdir_p(dir);
        rc = rc == 0 ? ds_write_file_atomic(path, INDEX_FORMAT_TEXT, strlen(INDEX_FORMAT_TEXT)) : rc;
        if (rc != 0) {
            ds_log_error("%s: cannot create: %s", path, ds_strerror(rc));
        }
        return rc;
    }
    if (rc == -ENOENT) {
        return rc;
    }
    if (rc != 0 && rc != -EFBIG) {
        ds_log_error("%s: cannot read: %s", path, ds_strerror(rc));
        return rc;
    }
    bool ours =
        rc == 0 && len == strlen(INDEX_FORMAT_TEXT) && memcmp(text, INDEX_FORMAT_TEXT, len) == 0;
    free(text);
    if (!ours) {
        ds_log_error("%s: not an index of this version of dayshard (expected \"dayshard-gsi 2\"); "
                     "`dayshard gsi rebuild` makes a new one",
                     path);
        return -DS_EFORMAT;
    }
    return 0;
}

static void index_log_header_make(uint32_t slots_log2, uint8_t *dst)
{
    memset(dst, 0, INDEX_LOG_HEADER_BYTES);
    memcpy(dst, INDEX_LOG_MAGIC, sizeof(INDEX_LOG_MAGIC) - 1);
    index_u32_put(dst + 24, slots_log2);
    index_u32_put(dst + 28, ds_crc32c(0, dst, 28));
}

/* Opens DIR/log (creating it with a table of cfg's size when the writer finds none) and reads
 * the table size it was made with. */
static int index_log_open(struct index *g, const struct index_config *cfg)
{
    char path[DS_PATH_MAX];
    index_path(g, "log", path);
    int flags = g->writer ? O_RDWR | O_CREAT : O_RDONLY;
    g->log_fd = open(path, flags | O_CLOEXEC, 0644);
    if (g->log_fd < 0) {
        int err = -errno;
        if (err != -ENOENT) {
            ds_log_error("%s: cannot open: %s", path, ds_strerror(err));
        }
        return err;
    }
    uint8_t header[INDEX_LOG_HEADER_BYTES];
    size_t got = 0;
    int rc = index_pread_all(g->log_fd, header, sizeof(header), 0, &got);
    if (rc == 0 && got < sizeof(header) && g->writer) {
        /* New, or a crash cut the header before anything followed it. */
        index_log_header_make(cfg->table_slots_log2, header);
        rc = ftruncate(g->log_fd, 0) == 0 ? 0 : -errno;
        rc = rc == 0 ? ds_pwrite_full(g->log_fd, header, sizeof(header), 0) : rc;
        rc = rc == 0 && fsync(g->log_fd) != 0 ? -errno : rc;
        rc = rc == 0 ? ds_fsync_dir(g->dir) : rc;
        got = rc == 0 ? sizeof(header) : got;
    }
    if (rc != 0) {
        ds_log_error("%s: cannot read or write the header: %s", path, ds_strerror(rc));
        return rc;
    }
    if (got < sizeof(header)) {
        return -ENOENT; /* a reader before the writer finished creating it */
    }
    uint32_t log2 = index_u32_get(header + 24);
    if (memcmp(header, INDEX_LOG_MAGIC, sizeof(INDEX_LOG_MAGIC) - 1) != 0 ||
        index_u32_get(header + 28) != ds_crc32c(0, header, 28) || log2 < INDEX_TABLE_SLOTS_LOG2_MIN ||
        log2 > INDEX_TABLE_SLOTS_LOG2_MAX) {
        ds_log_error("%s: not an index log (bad header); " INDEX_REPAIR_HINT, path);
        return -DS_EFORMAT;
    }
    if (g->writer && log2 != cfg->table_slots_log2) {
        ds_log_info("%s: keeps the table of 2^%" PRIu32 " slots it was made with (2^%" PRIu32
                    " asked; `dayshard gsi rebuild` resizes)",
                    g->dir, log2, cfg->table_slots_log2);
    }
    g->slots_log2 = log2;
    g->mask = (1ull << log2) - 1;
    return 0;
}

static int index_lock(struct index *g)
{
    char path[DS_PATH_MAX];
    index_path(g, "lock", path);
    g->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (g->lock_fd < 0) {
        int err = -errno;
        ds_log_error("%s: cannot open: %s", path, ds_strerror(err));
        return err;
    }
    if (flock(g->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno == EWOULDBLOCK ? -DS_ELOCKED : -errno;
        ds_log_error("%s: %s", g->dir, ds_strerror(err));
        return err;
    }
    return 0;
}

/* ---- records ------------------------------------------------------------------------------- */

/* What a scan learned about one record. */
struct index_record {
    uint64_t offset;
    uint32_t len;
    uint32_t crc;
    uint8_t type;
    const uint8_t *bytes; /* the whole record, valid during the callback */
};

/* Checks a run's header fields against the table and its own offset. */
static bool index_run_header_valid(const struct index *g, const uint8_t *r, uint32_t len,
                                 uint64_t offset)
{
    if (len < INDEX_RUN_HEADER_BYTES) {
        return false;
    }
    uint8_t kind = r[9];
    uint8_t id_bytes = r[10];
    uint32_t count = index_u32_get(r + 12);
    uint64_t prev = index_u64_get(r + 16);
    uint32_t slot = index_u32_get(r + 40);
    uint64_t skip = index_u64_get(r + 64);
    bool id_ok =
        kind == 0 ? id_bytes == 8 : kind == 1 && id_bytes >= 1 && id_bytes <= DS_ID_BYTES_MAX;
    return id_ok && len >= INDEX_RUN_HEADER_BYTES + id_bytes && count >= 1 &&
           count <= INDEX_RUN_ENTRIES_MAX &&
           (prev == 0 || (prev >= INDEX_LOG_HEADER_BYTES && prev < offset)) && skip <= prev &&
           slot <= g->mask && index_u64_get(r + 48) != 0;
}

typedef int (*index_section_fn)(struct index *g, const uint8_t *image, uint32_t len, uint64_t offset,
                              void *user);

/* Opens the sealed record r (len bytes, at offset) and reads every section into its image
 * (with its entries, or the header only), each checked as a run header at offset (so its prev
 * lies before the record); fn (may be NULL) sees each. Returns 0, fn's non-zero value, -ENOMEM or
 * -DS_ECORRUPT. */
static int index_sealed_sections(struct index *g, const uint8_t *r, uint32_t len, uint64_t offset,
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
static int64_t index_record_check(const struct index *g, const uint8_t *r, size_t avail,
                                uint64_t offset)
{
    if (avail < INDEX_RECORD_PREFIX_BYTES) {
        return 0;
    }
    uint32_t len = index_u32_get(r + 4);
    if (len < INDEX_CURSOR_HEADER_BYTES || len > INDEX_RECORD_BYTES_MAX) {
        return -DS_ECORRUPT;
    }
    if (avail < len) {
        return 0;
    }
    if (index_u32_get(r) != ds_crc32c(0, r + 4, len - 4u)) {
        return -DS_ECORRUPT;
    }
    if (r[8] == INDEX_RECORD_CURSOR) {
        bool ok = index_u32_get(r + 12) == len - INDEX_CURSOR_HEADER_BYTES &&
                  len - INDEX_CURSOR_HEADER_BYTES <= INDEX_CURSOR_BYTES_MAX;
        return ok ? (int64_t)len : -DS_ECORRUPT;
    }
    if (r[8] == INDEX_RECORD_RUN && index_run_header_valid(g, r, len, offset)) {
        return len;
    }
    if (r[8] == INDEX_RECORD_DIRECTORY) {
        uint32_t count = index_u32_get(r + 12);
        bool ok = count >= 1 && count <= INDEX_DIRECTORY_ENTRIES_MAX &&
                  len == INDEX_DIRECTORY_HEADER_BYTES + count * INDEX_DIRECTORY_ENTRY_BYTES &&
                  index_u32_get(r + 16) <= g->mask && index_u32_get(r + 20) == 0;
        for (uint32_t i = 0; ok && i < count; i++) {
            uint64_t at = index_u64_get(r + INDEX_DIRECTORY_HEADER_BYTES + i * 16u);
            uint64_t newer =
                i == 0 ? offset : index_u64_get(r + INDEX_DIRECTORY_HEADER_BYTES + (i - 1) * 16u);
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

typedef int (*index_record_fn)(struct index *g, const struct index_record *record, void *user);

/* Reads the log's records in [from, until) in order, each checked, into fn. Stops at the first
 * record that is damaged or runs past the end of the file. *end is where it stopped. */
static int index_scan(struct index *g, uint8_t *buf, uint64_t from, uint64_t until, index_record_fn fn,
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
                                        .crc = index_u32_get(buf + pos),
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
static int index_intact_after(struct index *g, uint64_t from, uint64_t until, uint64_t *found)
{
    uint8_t *buf = g->scan;
    uint64_t at = from + 1;
    *found = 0;
    while (at + INDEX_RECORD_PREFIX_BYTES <= until) {
        size_t want = until - at < INDEX_IO_BUFFER_BYTES ? (size_t)(until - at) : INDEX_IO_BUFFER_BYTES;
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
            uint32_t len = index_u32_get(r + 4);
            if ((r[8] != INDEX_RECORD_RUN && r[8] != INDEX_RECORD_CURSOR && r[8] != INDEX_RECORD_SEALED &&
                 r[8] != INDEX_RECORD_DIRECTORY) ||
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
    if (record->type == INDEX_RECORD_CURSOR) {
        s->cursor_at = record->offset;
        s->end = record->offset + record->len;
    }
    return 0;
}

/* A run (or a sealed section's image) at offset becomes its slot's head. */
static int index_scan_run(struct index *g, const uint8_t *r, uint32_t len, uint64_t offset, void *user)
{
    (void)len;
    (void)user;
    struct index_slot *s = &g->slots[index_u32_get(r + 40)];
    __atomic_store_n(&s->tag, index_u64_get(r + 48), __ATOMIC_RELAXED);
    s->max_ts = (int64_t)index_u64_get(r + 24);
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
        return index_sealed_sections(g, r, record->len, record->offset, false, index_scan_run, NULL);
    }
    if (record->type == INDEX_RECORD_DIRECTORY) {
        return 0; /* read by queries only */
    }
    pthread_mutex_lock(&g->cursor_lock);
    g->cursor_len = index_u32_get(r + 12);
    memcpy(g->cursor, r + INDEX_CURSOR_HEADER_BYTES, g->cursor_len);
    g->applies = index_u64_get(r + 16);
    g->cursor_at = record->offset;
    g->cursor_crc = record->crc;
    pthread_mutex_unlock(&g->cursor_lock);
    return 0;
}

static int index_log_size(struct index *g, uint64_t *size)
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
static int index_catch_up_to(struct index *g, uint64_t until, uint64_t *end)
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
static int index_catch_up(struct index *g, uint64_t *size, uint64_t *end)
{
    int rc = index_log_size(g, size);
    return rc == 0 ? index_catch_up_to(g, *size, end) : rc;
}

/* ---- checkpoints --------------------------------------------------------------------------- */

/* DIR/table: a 64-byte header (magic, [24] u32 slots_log2, [32] u64 the log end it covers,
 * [40] u64 offset and [48] u32 crc field of the cursor record that ends there, [52] u32 CRC32C
 * of the body, [56] u32 count, [60] u32 CRC32C of the 60 bytes before), then the body: the
 * count used slots, each u32 index and the slot's 24 bytes. Sparse, so a small index has a
 * small checkpoint whatever the table size. */
#define INDEX_CHECKPOINT_ENTRY_BYTES (4u + INDEX_SLOT_BYTES)

static int index_checkpoint_body_read(struct index *g, int fd, uint32_t count, uint32_t crc)
{
    uint8_t *buf = g->scan;
    const size_t per_read = INDEX_IO_BUFFER_BYTES / INDEX_CHECKPOINT_ENTRY_BYTES;
    uint32_t sum = 0;
    uint64_t at = INDEX_TABLE_HEADER_BYTES;
    int rc = 0;
    for (uint32_t done = 0; rc == 0 && done < count;) {
        size_t n = count - done < per_read ? count - done : per_read;
        size_t got = 0;
        rc = index_pread_all(fd, buf, n * INDEX_CHECKPOINT_ENTRY_BYTES, at, &got);
        if (rc == 0 && got != n * INDEX_CHECKPOINT_ENTRY_BYTES) {
            rc = -DS_ECORRUPT;
        }
        for (size_t k = 0; rc == 0 && k < n; k++) {
            const uint8_t *e = buf + k * INDEX_CHECKPOINT_ENTRY_BYTES;
            uint32_t index = index_u32_get(e);
            struct index_slot slot;
            memcpy(&slot, e + 4, sizeof(slot));
            if (index > g->mask || slot.tag == 0 || slot.head >= g->log_end) {
                rc = -DS_ECORRUPT;
                break;
            }
            g->slots[index] = slot;
        }
        sum = ds_crc32c(sum, buf, got);
        at += got;
        done += (uint32_t)n;
    }
    return rc == 0 && sum != crc ? -DS_ECORRUPT : rc;
}

/* Loads DIR/table when it covers a cursor record of this log; otherwise leaves the table empty
 * (and the writer removes the stale file). */
static int index_checkpoint_load(struct index *g)
{
    char path[DS_PATH_MAX];
    index_path(g, "table", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    uint8_t h[INDEX_TABLE_HEADER_BYTES];
    size_t got = 0;
    int rc = index_pread_all(fd, h, sizeof(h), 0, &got);
    uint64_t end = index_u64_get(h + 32);
    uint64_t cursor_at = index_u64_get(h + 40);
    uint32_t count = index_u32_get(h + 56);
    uint64_t size = 0;
    uint8_t record[INDEX_RECORD_PREFIX_BYTES];
    size_t record_got = 0;
    bool ok = rc == 0 && got == sizeof(h) &&
              memcmp(h, INDEX_TABLE_MAGIC, sizeof(INDEX_TABLE_MAGIC) - 1) == 0 &&
              index_u32_get(h + 60) == ds_crc32c(0, h, 60) && index_u32_get(h + 24) == g->slots_log2 &&
              count <= g->mask + 1 && index_log_size(g, &size) == 0 && end <= size &&
              cursor_at >= INDEX_LOG_HEADER_BYTES && cursor_at < end &&
              index_pread_all(g->log_fd, record, sizeof(record), cursor_at, &record_got) == 0 &&
              record_got == sizeof(record) && index_u32_get(record) == index_u32_get(h + 48) &&
              record[8] == INDEX_RECORD_CURSOR && cursor_at + index_u32_get(record + 4) == end;
    bool touched = ok; /* the body read writes slots */
    if (ok) {
        g->log_end = end;
        ok = index_checkpoint_body_read(g, fd, count, index_u32_get(h + 52)) == 0;
    }
    close(fd);
    if (ok) {
        /* The cursor record it covers, read back through the scanner's checks. */
        g->log_end = cursor_at;
        uint64_t covered = 0;
        rc = index_catch_up_to(g, end, &covered);
        if (rc != 0) {
            return rc;
        }
        ok = covered == end && g->cursor_at == cursor_at;
    }
    if (!ok && !g->writer) {
        /* The writer syncs the log before it writes a checkpoint and never cuts the log below
         * one, so this is damage (of the table, or of the log it covers). A writer reads the
         * whole log instead (and its builder replays what the log lost). */
        ds_log_error("%s: not a checkpoint of %s/log (damaged, or the log lost what it "
                     "covers); " INDEX_REPAIR_HINT,
                     path, g->dir);
        return -DS_ECORRUPT;
    }
    if (!ok) {
        ds_log_warn("%s: not a checkpoint of this log; reading the whole log", path);
        if (touched) {
            memset(g->slots, 0, (size_t)INDEX_SLOT_BYTES << g->slots_log2);
        }
        g->log_end = INDEX_LOG_HEADER_BYTES;
        g->cursor_len = 0;
        g->cursor_at = 0;
        g->applies = 0;
        if (g->writer && unlink(path) != 0) {
            return -errno;
        }
    }
    return 0;
}

/* Writes the used slots after the header of DIR/table.tmp through buf (INDEX_IO_BUFFER_BYTES). */
static int index_checkpoint_body_write(const struct index *g, uint8_t *buf, int fd, uint32_t *count,
                                     uint32_t *crc)
{
    uint64_t at = INDEX_TABLE_HEADER_BYTES;
    size_t used = 0;
    uint32_t sum = 0;
    uint32_t n = 0;
    for (uint64_t i = 0; i <= g->mask; i++) {
        const struct index_slot *slot = &g->slots[i];
        if (slot->head == 0) {
            continue; /* empty, or claimed by an apply that failed */
        }
        index_u32_put(buf + used, (uint32_t)i);
        memcpy(buf + used + 4, slot, sizeof(*slot));
        used += INDEX_CHECKPOINT_ENTRY_BYTES;
        n++;
        if (used + INDEX_CHECKPOINT_ENTRY_BYTES > INDEX_IO_BUFFER_BYTES || i == g->mask) {
            int rc = ds_pwrite_full(fd, buf, used, at);
            if (rc != 0) {
                return rc;
            }
            sum = ds_crc32c(sum, buf, used);
            at += used;
            used = 0;
        }
    }
    if (used > 0) {
        int rc = ds_pwrite_full(fd, buf, used, at);
        if (rc != 0) {
            return rc;
        }
        sum = ds_crc32c(sum, buf, used);
    }
    *count = n;
    *crc = sum;
    return 0;
}

/* The writer's checkpoints. Before issue 16 the apply that passed the interval did the whole
 * checkpoint itself: an fdatasync of up to 512 MiB of log, then the table written and synced,
 * on the builder's thread (applies waited 230-430 ms every ~10M events in bench_gsi_e2e's lag
 * mode; kept as checkpoint_inline to compare). Now a thread of the writer's does it beside the
 * applies (they waited 0-42 ms, and the syncs took 17-60 ms instead of 150-285):
 *
 * - it writes the table (the used slots and the header) to DIR/table.tmp while holding
 *   table_lock, which index_apply holds for its whole run, so the table it writes is the table of
 *   exactly the last cursor record (log_end, cursor_at, cursor_crc are read under the same lock).
 *   The builder spends most of its time scanning base data between applies, so the ~50 ms of
 *   the write overlap that; an apply that comes meanwhile waits for the rest of it;
 * - it then syncs the log (so DIR/table never names a cursor record the disk may lose), the
 *   temp file, renames it into place and syncs the directory, without the lock;
 * - between checkpoints it starts the writeback of each INDEX_WRITEBACK_BYTES of new log, so a
 *   checkpoint's fdatasync finds little left to write and the disk sees a steady stream.
 *
 * One checkpoint is in flight at a time; the applying thread collects its outcome after a later
 * apply, and a failed one (logged) is retried after checkpoint_bytes / 8 more log. The crash
 * contract is the one before: a checkpoint is the table at a cursor record the log holds
 * durably. Rejected: writing the table on the applying thread and only the syncs on the thread
 * (measured: the write costs 50-60 ms of CPU for 600k customers, most of a 2^21-slot scan and
 * the page cache copy, and the apply waited for all of it: max lag 145-200 ms); a copy of the
 * table for the thread (up to 48 MiB more memory per checkpoint); a fuzzy checkpoint written in
 * chunks between applies and replayed from its start (a change of what DIR/table means for
 * readers and index_check). */
struct index_checkpointer {
    bool inline_sync;                  /* cfg->checkpoint_inline */
    uint64_t retry_end;                /* writer: no checkpoint before log_end reaches it */
    uint64_t writeback_requested;      /* writer: log_end of the last writeback request */
    struct index_checkpoint_stats stats; /* __atomic, relaxed */
    pthread_mutex_t table_lock;        /* held by index_apply, and by the thread writing the table */
    uint8_t *buffer;                   /* the thread's INDEX_IO_BUFFER_BYTES for the table's body */
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    /* under lock (busy is written by the writer only) */
    bool stop;
    bool busy;     /* a checkpoint asked for and not yet collected */
    bool finished; /* the thread is done with it: rc, end */
    int rc;
    uint64_t end;          /* the log prefix it covers */
    uint64_t writeback_to; /* start the log's writeback up to here */
};

/* Log written between two requests to start its writeback: enough for large writes, small
 * enough that a checkpoint's fdatasync finds at most this much dirty. */
#define INDEX_WRITEBACK_BYTES (8u << 20)

static void index_stat_max(uint64_t *max, uint64_t *last, uint64_t ns)
{
    __atomic_store_n(last, ns, __ATOMIC_RELAXED);
    if (ns > __atomic_load_n(max, __ATOMIC_RELAXED)) {
        __atomic_store_n(max, ns, __ATOMIC_RELAXED);
    }
}

/* Writes the table (used slots and header) to DIR/table.tmp through buf (INDEX_IO_BUFFER_BYTES),
 * at a cursor boundary: the writer's thread between applies, or the checkpoint thread under
 * table_lock. Returns the open temp file in *fd_out and the log end it covers in *end, or a
 * negated errno with nothing left open. */
static int index_checkpoint_begin(struct index *g, uint8_t *buf, int *fd_out, uint64_t *end)
{
    ASSERT(g->writer);
    ASSERT(g->buffered == 0);
    uint64_t t0 = ds_clock_ns();
    char tmp[DS_PATH_MAX];
    index_path(g, "table.tmp", tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = fd < 0 ? -errno : 0;
    uint32_t count = 0;
    uint32_t crc = 0;
    rc = rc == 0 ? index_checkpoint_body_write(g, buf, fd, &count, &crc) : rc;
    if (rc == 0) {
        uint8_t h[INDEX_TABLE_HEADER_BYTES] = {0};
        memcpy(h, INDEX_TABLE_MAGIC, sizeof(INDEX_TABLE_MAGIC) - 1);
        index_u32_put(h + 24, g->slots_log2);
        index_u64_put(h + 32, g->log_end);
        index_u64_put(h + 40, g->cursor_at);
        index_u32_put(h + 48, g->cursor_crc);
        index_u32_put(h + 52, crc);
        index_u32_put(h + 56, count);
        index_u32_put(h + 60, ds_crc32c(0, h, 60));
        rc = ds_pwrite_full(fd, h, sizeof(h), 0);
    }
    if (rc != 0) {
        ds_log_error("%s: cannot write the checkpoint: %s", tmp, ds_strerror(rc));
        if (fd >= 0) {
            close(fd);
        }
        (void)unlink(tmp);
        return rc;
    }
    struct index_checkpointer *c = g->checkpointer;
    index_stat_max(&c->stats.table_ns_max, &c->stats.table_ns_last, ds_clock_ns() - t0);
    *fd_out = fd;
    *end = g->log_end;
    return 0;
}

/* Makes a begun checkpoint durable and current: the log first (so DIR/table never names a
 * cursor record the disk may lose), then the temp file, the rename and the directory. Takes
 * fd (closed here). Any thread, without table_lock: it touches only the files. */
static int index_checkpoint_finish(struct index *g, int fd, uint64_t end)
{
    uint64_t t0 = ds_clock_ns();
    char path[DS_PATH_MAX];
    char tmp[DS_PATH_MAX];
    index_path(g, "table", path);
    index_path(g, "table.tmp", tmp);
    int rc = fdatasync(g->log_fd) == 0 ? 0 : -errno;
    rc = rc == 0 && fdatasync(fd) != 0 ? -errno : rc;
    if (close(fd) != 0 && rc == 0) {
        rc = -errno;
    }
    rc = rc == 0 && rename(tmp, path) != 0 ? -errno : rc;
    rc = rc == 0 ? ds_fsync_dir(g->dir) : rc;
    struct index_checkpointer *c = g->checkpointer;
    if (rc != 0) {
        ds_log_error("%s: cannot write the checkpoint: %s", path, ds_strerror(rc));
        (void)unlink(tmp);
        return rc;
    }
    uint64_t ns = ds_clock_ns() - t0;
    index_stat_max(&c->stats.sync_ns_max, &c->stats.sync_ns_last, ns);
    __atomic_store_n(&c->stats.log_bytes_last, end, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->stats.done, 1, __ATOMIC_RELAXED);
    ds_log_info("%s: checkpoint of %" PRIu64 " MiB of log: table written in %.1f ms, log and "
                "table synced in %.1f ms",
                path, end >> 20,
                (double)__atomic_load_n(&c->stats.table_ns_last, __ATOMIC_RELAXED) / 1e6,
                (double)ns / 1e6);
    return 0;
}

/* A whole checkpoint on the calling thread (at close, and after each apply with
 * checkpoint_inline). Writer thread only, between applies (it borrows the write buffer), with
 * no checkpoint of the thread in flight. */
static int index_checkpoint_write(struct index *g)
{
    ASSERT(g->writer);
    ASSERT(!g->checkpointer->busy);
    if (g->cursor_at == 0 || g->checkpoint_end == g->log_end) {
        return 0;
    }
    struct index_checkpointer *c = g->checkpointer;
    uint64_t t0 = ds_clock_ns();
    __atomic_add_fetch(&c->stats.started, 1, __ATOMIC_RELAXED);
    int fd = -1;
    uint64_t end = 0;
    int rc = index_checkpoint_begin(g, g->buffer, &fd, &end);
    rc = rc == 0 ? index_checkpoint_finish(g, fd, end) : rc;
    index_stat_max(&c->stats.apply_wait_ns_max, &c->stats.apply_wait_ns_last, ds_clock_ns() - t0);
    if (rc != 0) {
        __atomic_add_fetch(&c->stats.failed, 1, __ATOMIC_RELAXED);
        return rc;
    }
    g->checkpoint_end = end;
    return 0;
}

/* One checkpoint on the thread: the table under table_lock, then the syncs without it. */
static int index_checkpoint_take(struct index *g, uint64_t *end)
{
    struct index_checkpointer *c = g->checkpointer;
    int fd = -1;
    pthread_mutex_lock(&c->table_lock);
    /* After a failed apply the log may end inside one: no checkpoint until a reopen cuts it. */
    int rc = g->failed ? -EIO : index_checkpoint_begin(g, c->buffer, &fd, end);
    pthread_mutex_unlock(&c->table_lock);
    return rc == 0 ? index_checkpoint_finish(g, fd, *end) : rc;
}

/* The thread: takes each checkpoint asked for and starts the log's writeback as it grows.
 * Stops once asked and nothing is left to take. */
static void *index_checkpointer_main(void *arg)
{
    struct index *g = arg;
    struct index_checkpointer *c = g->checkpointer;
    pthread_setname_np(pthread_self(), "ds-gsi-ckpt");
    uint64_t written_back = 0; /* writeback started up to here */
    pthread_mutex_lock(&c->lock);
    for (;;) { /* runs until stopped; each turn does one step */
        while (!c->stop && !(c->busy && !c->finished) && c->writeback_to <= written_back) {
            pthread_cond_wait(&c->wake, &c->lock);
        }
        if (c->busy && !c->finished) {
            pthread_mutex_unlock(&c->lock);
            uint64_t end = 0;
            int rc = index_checkpoint_take(g, &end);
            pthread_mutex_lock(&c->lock);
            c->rc = rc;
            c->end = end;
            c->finished = true;
            written_back = rc == 0 && end > written_back ? end : written_back;
            pthread_cond_broadcast(&c->wake);
        } else if (c->writeback_to > written_back) {
            uint64_t to = c->writeback_to;
            pthread_mutex_unlock(&c->lock);
            /* Best effort: an error here shows again at the checkpoint's fdatasync. */
            (void)sync_file_range(g->log_fd, (off_t)written_back, (off_t)(to - written_back),
                                  SYNC_FILE_RANGE_WRITE);
            written_back = to;
            pthread_mutex_lock(&c->lock);
        } else {
            break; /* stopped with nothing in flight */
        }
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* The outcome of a checkpoint the thread finished (non-blocking; writer thread). */
static void index_checkpointer_collect(struct index *g)
{
    struct index_checkpointer *c = g->checkpointer;
    if (!c->busy) {
        return;
    }
    pthread_mutex_lock(&c->lock);
    bool finished = c->finished;
    int rc = c->rc;
    uint64_t end = c->end;
    if (finished) {
        c->busy = false;
        c->finished = false;
    }
    pthread_mutex_unlock(&c->lock);
    if (!finished) {
        return;
    }
    if (rc == 0) {
        g->checkpoint_end = end;
    } else {
        __atomic_add_fetch(&c->stats.failed, 1, __ATOMIC_RELAXED);
        c->retry_end = g->log_end + g->checkpoint_bytes / 8u; /* logged; retried later */
    }
}

/* Starts the thread from the applying thread, so that it runs at that thread's priority (a
 * thread inherits its creator's nice value): the builder runs at nice -5, and a checkpoint
 * thread at the default nice, starved on a busy machine while it held table_lock, made applies
 * wait up to 145-175 ms for a table write of 50-60 ms of CPU. Without a thread (pthread_create
 * failed, logged) checkpoints go inline. */
static void index_checkpointer_thread_start(struct index *g)
{
    struct index_checkpointer *c = g->checkpointer;
    ASSERT(!c->started && !c->inline_sync);
    int rc = -pthread_create(&c->thread, NULL, index_checkpointer_main, g);
    if (rc != 0) {
        ds_log_error("%s: no checkpoint thread (%s): checkpoints go inline", g->dir,
                     ds_strerror(rc));
        c->inline_sync = true;
        return;
    }
    c->started = true;
}

/* After an apply (writer thread, outside table_lock): collects a finished checkpoint, asks for
 * the next one when the log grew by checkpoint_bytes since the last, or for the writeback of
 * the log written since the last request. */
static void index_checkpoint_after_apply(struct index *g)
{
    struct index_checkpointer *c = g->checkpointer;
    if (!c->inline_sync) {
        index_checkpointer_collect(g); /* before due: it moves checkpoint_end */
    }
    bool due = g->log_end - g->checkpoint_end >= g->checkpoint_bytes &&
               g->log_end >= c->retry_end && g->cursor_at != 0;
    bool writeback = g->log_end - c->writeback_requested >= INDEX_WRITEBACK_BYTES;
    if (!c->inline_sync && !c->started && (due || writeback)) {
        index_checkpointer_thread_start(g); /* on failure, inline from now on */
    }
    if (c->inline_sync) {
        if (due && index_checkpoint_write(g) != 0) { /* logged; only costs opening time */
            c->retry_end = g->log_end + g->checkpoint_bytes / 8u;
        }
        return;
    }
    if ((!due || c->busy) && !writeback) {
        return;
    }
    pthread_mutex_lock(&c->lock);
    if (due && !c->busy) {
        __atomic_add_fetch(&c->stats.started, 1, __ATOMIC_RELAXED);
        c->busy = true;
    }
    c->writeback_to = g->log_end;
    c->writeback_requested = g->log_end;
    pthread_cond_broadcast(&c->wake);
    pthread_mutex_unlock(&c->lock);
}

static int index_checkpointer_start(struct index *g, const struct index_config *cfg)
{
    ASSERT(g->writer);
    ASSERT(g->checkpointer == NULL);
    struct index_checkpointer *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return -ENOMEM;
    }
    g->checkpointer = c;
    c->inline_sync = cfg->checkpoint_inline;
    c->writeback_requested = g->log_end;
    c->writeback_to = g->log_end;
    pthread_mutex_init(&c->table_lock, NULL);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->wake, NULL);
    if (c->inline_sync) {
        return 0;
    }
    c->buffer = malloc(INDEX_IO_BUFFER_BYTES);
    return c->buffer != NULL ? 0 : -ENOMEM;
}

/* Waits for a checkpoint in flight, stops the thread and collects the outcome. */
static void index_checkpointer_stop(struct index *g)
{
    struct index_checkpointer *c = g->checkpointer;
    if (c == NULL || !c->started) {
        return;
    }
    pthread_mutex_lock(&c->lock);
    c->stop = true;
    pthread_cond_broadcast(&c->wake);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->thread, NULL);
    c->started = false;
    c->stop = false; /* index_compact stops it mid-life: a thread started again must not exit */
    index_checkpointer_collect(g);
    ASSERT(!c->busy);
}

static void index_checkpointer_free(struct index_checkpointer *c)
{
    if (c == NULL) {
        return;
    }
    pthread_cond_destroy(&c->wake);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->table_lock);
    free(c->buffer);
    free(c);
}

/* index_apply's side of table_lock: the time an apply waited for a checkpoint's table write. */
static void index_checkpoint_table_lock(struct index *g)
{
    struct index_checkpointer *c = g->checkpointer;
    if (pthread_mutex_trylock(&c->table_lock) == 0) {
        return;
    }
    uint64_t t0 = ds_clock_ns();
    pthread_mutex_lock(&c->table_lock);
    index_stat_max(&c->stats.apply_wait_ns_max, &c->stats.apply_wait_ns_last, ds_clock_ns() - t0);
}

void index_checkpoint_stats_get(struct index *g, struct index_checkpoint_stats *out)
{
    ASSERT(g != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    const struct index_checkpointer *c = g->checkpointer;
    if (c == NULL) {
        return;
    }
    out->started = __atomic_load_n(&c->stats.started, __ATOMIC_RELAXED);
    out->done = __atomic_load_n(&c->stats.done, __ATOMIC_RELAXED);
    out->failed = __atomic_load_n(&c->stats.failed, __ATOMIC_RELAXED);
    out->table_ns_last = __atomic_load_n(&c->stats.table_ns_last, __ATOMIC_RELAXED);
    out->table_ns_max = __atomic_load_n(&c->stats.table_ns_max, __ATOMIC_RELAXED);
    out->sync_ns_last = __atomic_load_n(&c->stats.sync_ns_last, __ATOMIC_RELAXED);
    out->sync_ns_max = __atomic_load_n(&c->stats.sync_ns_max, __ATOMIC_RELAXED);
    out->apply_wait_ns_last = __atomic_load_n(&c->stats.apply_wait_ns_last, __ATOMIC_RELAXED);
    out->apply_wait_ns_max = __atomic_load_n(&c->stats.apply_wait_ns_max, __ATOMIC_RELAXED);
    out->log_bytes_last = __atomic_load_n(&c->stats.log_bytes_last, __ATOMIC_RELAXED);
}

/* ---- open and close ------------------------------------------------------------------------ */

static int index_create(const struct index_config *cfg, bool writer, struct index **out)
{
    int rc = index_config_check(cfg);
    if (rc != 0) {
        return rc;
    }
    struct index *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        return -ENOMEM;
    }
    g->writer = writer;
    g->log_fd = -1;
    g->lock_fd = -1;
    snprintf(g->dir, sizeof(g->dir), "%s", cfg->dir);
    pthread_mutex_init(&g->cursor_lock, NULL);
    pthread_rwlock_init(&g->swap_lock, NULL);
    g->cursor = malloc(INDEX_CURSOR_BYTES_MAX);
    g->scan = malloc(INDEX_IO_BUFFER_BYTES);
    g->batch_entries_max = cfg->batch_entries_max;
    g->checkpoint_bytes = cfg->checkpoint_bytes;
    *out = g;
    return g->cursor != NULL && g->scan != NULL ? 0 : -ENOMEM;
}

static int index_writer_buffers(struct index *g)
{
    size_t n = g->batch_entries_max;
    g->buffer = malloc(INDEX_IO_BUFFER_BYTES);
    g->items = malloc(n * sizeof(*g->items));
    g->items_spare = malloc(n * sizeof(*g->items_spare));
    g->tails = malloc(n * INDEX_TAIL_BYTES_MAX);
    g->run = malloc(n * sizeof(*g->run));
    g->publish = malloc(n * sizeof(*g->publish));
    bool ok = g->buffer && g->items && g->items_spare && g->tails && g->run && g->publish;
    return ok ? 0 : -ENOMEM;
}

/* Table, checkpoint, then the log beyond it. */
static int index_load(struct index *g, const struct index_config *cfg)
{
    int rc = index_log_open(g, cfg);
    if (rc != 0) {
        return rc;
    }
    g->slots = calloc((size_t)1 << g->slots_log2, sizeof(*g->slots));
    if (g->slots == NULL) {
        return -ENOMEM;
    }
    g->log_end = INDEX_LOG_HEADER_BYTES;
    rc = index_checkpoint_load(g);
    if (rc != 0) {
        return rc;
    }
    g->checkpoint_end = g->cursor_at != 0 ? g->log_end : 0;
    uint64_t size = 0;
    uint64_t end = 0;
    rc = index_catch_up(g, &size, &end);
    if (g->checkpoint_end == 0 && g->sealed_end != 0) {
        g->checkpoint_end = g->sealed_end; /* a compacted log is its own checkpoint */
    }
    if (rc != 0 || !g->writer || size == end) {
        return rc;
    }
    ds_log_warn("%s/log: cutting %" PRIu64 " bytes after the last complete apply (an apply a "
                "crash interrupted, or damage); the builder replays them",
                g->dir, size - end);
    if (ftruncate(g->log_fd, (off_t)end) != 0 || fsync(g->log_fd) != 0) {
        rc = -errno;
        ds_log_error("%s/log: cannot cut: %s", g->dir, ds_strerror(rc));
    }
    return rc;
}

int index_open(const struct index_config *cfg, struct index **out)
{
    ASSERT(out != NULL);
    struct index *g = NULL;
    int rc = index_create(cfg, true, &g);
    rc = rc == 0 ? index_format_check(cfg->dir, true) : rc;
    rc = rc == 0 ? index_lock(g) : rc;
    rc = rc == 0 ? index_writer_buffers(g) : rc;
    if (rc == 0) {
        /* A compaction a crash interrupted before its rename: the log it was made from stays. */
        char tmp[DS_PATH_MAX];
        index_path(g, "log.compact", tmp);
        rc = unlink(tmp) == 0 || errno == ENOENT ? 0 : -errno;
    }
    rc = rc == 0 ? index_load(g, cfg) : rc;
    rc = rc == 0 ? index_checkpointer_start(g, cfg) : rc;
    if (rc != 0) {
        index_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

int index_open_reader(const struct index_config *cfg, struct index **out)
{
    ASSERT(out != NULL);
    for (int attempt = 0;; attempt++) {
        struct index *g = NULL;
        int rc = index_create(cfg, false, &g);
        rc = rc == 0 ? index_format_check(cfg->dir, false) : rc;
        rc = rc == 0 ? index_load(g, cfg) : rc;
        /* A compaction replaced the log between opening it and reading DIR/table (which then
         * names the new log's records): open again. */
        bool raced = rc == -DS_ECORRUPT && g != NULL && g->log_fd >= 0 && index_replaced(g);
        if (rc != 0) {
            index_close(g);
            if (raced && attempt < 3) {
                continue;
            }
            return rc;
        }
        *out = g;
        return 0;
    }
}

int index_refresh(struct index *g)
{
    ASSERT(g != NULL);
    ASSERT(!g->writer);
    uint64_t size = 0;
    uint64_t end = 0;
    return index_catch_up(g, &size, &end);
}

bool index_replaced(struct index *g)
{
    ASSERT(g != NULL);
    char path[DS_PATH_MAX];
    index_path(g, "log", path);
    struct stat now;
    struct stat mine;
    if (stat(path, &now) != 0 || fstat(g->log_fd, &mine) != 0) {
        return false;
    }
    return now.st_dev != mine.st_dev || now.st_ino != mine.st_ino;
}

void index_close(struct index *g)
{
    if (g == NULL) {
        return;
    }
    index_checkpointer_stop(g);
    /* A compacted log with less than checkpoint_bytes appended is its own checkpoint: opening
     * reads its sealed records' section headers and the rest, and the table's 28 bytes per
     * customer stay off the disk. */
    bool sealed_enough = g->sealed_end != 0 && g->log_end - g->sealed_end < g->checkpoint_bytes;
    if (g->checkpointer != NULL && !g->failed && g->slots != NULL && g->log_fd >= 0 &&
        g->buffered == 0 && !sealed_enough) {
        (void)index_checkpoint_write(g); /* logged; the next open reads more log instead */
    }
    if (g->log_fd >= 0) {
        close(g->log_fd);
    }
    if (g->lock_fd >= 0) {
        close(g->lock_fd);
    }
    pthread_mutex_destroy(&g->cursor_lock);
    pthread_rwlock_destroy(&g->swap_lock);
    free(g->slots);
    free(g->cursor);
    free(g->scan);
    free(g->buffer);
    free(g->items);
    free(g->items_spare);
    free(g->tails);
    free(g->run);
    free(g->publish);
    index_checkpointer_free(g->checkpointer);
    free(g);
}

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

static int index_customer_compare(const struct ds_id *a, const struct ds_id *b)
{
    if (a->is_string != b->is_string) {
        return a->is_string ? 1 : -1;
    }
    if (!a->is_string) {
        return (a->value > b->value) - (a->value < b->value);
    }
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->text, b->text, n);
    return c != 0 ? c : (a->len > b->len) - (a->len < b->len);
}

static int index_tail_compare(const struct index *g, const struct index_item *x, const struct index_item *y)
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
        it->tag = index_tag(&e->customer_id);
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
    index_u32_put(r + 4, (uint32_t)len);
    index_u32_put(r, ds_crc32c(0, r + 4, len - 4u));
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
        index_u64_put(r + INDEX_RUN_HEADER_BYTES, (uint64_t)newest->customer_value);
    }
    r[10] = (uint8_t)id_bytes;
    index_u32_put(r + 12, (uint32_t)count);
    index_u64_put(r + 16, *head);
    index_u64_put(r + 24, (uint64_t)chain_max);
    index_u64_put(r + 32, (uint64_t)oldest_ts);
    index_u32_put(r + 40, slot);
    index_u64_put(r + 48, __atomic_load_n(&g->slots[slot].tag, __ATOMIC_RELAXED));
    index_u64_put(r + 56, *head != 0 ? (uint64_t)*max_ts : 0);
    index_u64_put(r + 64, skip);
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

static int index_cursor_append(struct index *g, const void *cursor, size_t cursor_len)
{
    uint8_t *r = NULL;
    int rc = index_reserve(g, INDEX_CURSOR_HEADER_BYTES + cursor_len, &r);
    if (rc != 0) {
        return rc;
    }
    memset(r, 0, INDEX_CURSOR_HEADER_BYTES);
    r[8] = INDEX_RECORD_CURSOR;
    index_u32_put(r + 12, (uint32_t)cursor_len);
    index_u64_put(r + 16, g->applies + 1);
    if (cursor_len > 0) {
        memcpy(r + INDEX_CURSOR_HEADER_BYTES, cursor, cursor_len);
    }
    uint64_t at = g->log_end;
    index_commit_record(g, r, INDEX_CURSOR_HEADER_BYTES + cursor_len);
    uint32_t crc = index_u32_get(r);
    rc = index_flush(g);
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&g->cursor_lock);
    if (cursor_len > 0) {
        memcpy(g->cursor, cursor, cursor_len);
    }
    g->cursor_len = cursor_len;
    g->applies++;
    g->cursor_at = at;
    g->cursor_crc = crc;
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
                     " and %u",
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
    pthread_mutex_unlock(&g->checkpointer->table_lock);
    if (rc == 0) {
        index_checkpoint_after_apply(g);
    }
    return rc;
}

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

static int index_key_compare(const uint8_t *a, size_t a_bytes, const uint8_t *b, size_t b_bytes)
{
    size_t n = a_bytes < b_bytes ? a_bytes : b_bytes;
    int c = memcmp(a, b, n);
    return c != 0 ? c : (a_bytes > b_bytes) - (a_bytes < b_bytes);
}

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
static int index_sealed_read(const struct index *g, uint64_t offset, uint32_t slot, const uint8_t *buf,
                           size_t got, const uint8_t **r, uint64_t *directory)
{
    struct index_seal_ctx *ctx = index_seal_ctx();
    if (ctx == NULL) {
        return -ENOMEM;
    }
    uint32_t len = index_u32_get(buf + 4);
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
static int index_run_read(const struct index *g, uint64_t offset, uint32_t slot, uint8_t *buf,
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
    uint32_t len = got >= INDEX_RECORD_PREFIX_BYTES ? index_u32_get(buf + 4) : 0;
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
    if (index_u32_get(run) != ds_crc32c(0, run + 4, len - 4u)) {
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
    uint32_t len = index_u32_get(r + 4);
    size_t at = INDEX_RUN_HEADER_BYTES + r[10];
    uint32_t count = index_u32_get(r + 12);
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
static int index_directory_find(const struct index *g, uint64_t offset, uint32_t slot, int64_t token_ts,
                              uint64_t *to)
{
    uint8_t head[INDEX_DIRECTORY_HEADER_BYTES];
    size_t got = 0;
    int rc = index_pread_all(g->log_fd, head, sizeof(head), offset, &got);
    if (rc != 0 || got != sizeof(head)) {
        return rc != 0 ? rc : -DS_ECORRUPT;
    }
    uint32_t len = index_u32_get(head + 4);
    if (head[8] != INDEX_RECORD_DIRECTORY || len > INDEX_RECORD_BYTES_MAX ||
        index_u32_get(head + 16) != slot) {
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
        uint32_t count = index_u32_get(d + 12);
        uint32_t hi = count;
        const uint8_t *e = d + INDEX_DIRECTORY_HEADER_BYTES;
        while (lo < hi) { /* oldest ts descends along the list */
            uint32_t mid = lo + (hi - lo) / 2;
            if ((int64_t)index_u64_get(e + (size_t)mid * 16u + 8) <= token_ts) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        *to = index_u64_get(e + (size_t)(lo < count ? lo : count - 1) * 16u);
    }
    free(d);
    return rc;
}

/* Walks the customer's chain into best. */
static int index_walk(const struct index *g, const struct ds_id *customer, const uint8_t *token,
                    size_t token_bytes, struct index_best *best)
{
    uint64_t tag = index_tag(customer);
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
        int64_t chain_max = (int64_t)index_u64_get(r + 24);
        if (chain_max < index_best_floor_ts(best)) {
            break; /* everything left on the chain is older than the worst entry kept */
        }
        /* A run whose entries are all newer than the token is on earlier pages. */
        bool mine = index_run_customer_is(r, customer);
        if (mine && directory != 0 && (int64_t)index_u64_get(r + 32) > token_ts) {
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
        if (mine && (int64_t)index_u64_get(r + 32) <= token_ts) {
            rc = index_run_offer(r, token, token_bytes, best);
        }
        offset = index_u64_get(r + 16);
        int64_t floor_ts = index_best_floor_ts(best);
        if (mine && (int64_t)index_u64_get(r + 32) < floor_ts) {
            /* This customer's older runs of the same apply are older than this one's oldest
             * entry, so older than the worst kept: jump past them. */
            offset = index_u64_get(r + 64);
        } else if (offset != 0 && (int64_t)index_u64_get(r + 56) < floor_ts) {
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

int index_query(struct index *g, const struct ds_id *customer, uint32_t limit, const char *page_token,
              struct index_page *out)
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

static int index_run_customer(const uint8_t *r, struct ds_id *customer);

/* ---- compaction ---------------------------------------------------------------------------- */

/* One entry of a slot's chain being compacted: its bytes in the arena (tail key, then value). */
struct index_compact_entry {
    uint32_t customer; /* index into the slot's customers */
    uint32_t seq;      /* the order the walk met it: lower is a newer copy */
    uint64_t at;       /* arena offset */
    uint8_t key_bytes;
    uint8_t value_bytes;
};

/* A compaction in progress: the new log being written and one slot's entries. */
struct index_compactor {
    struct index *g;
    int fd;
    uint64_t end; /* bytes of the new log written or buffered */
    uint8_t *out; /* INDEX_IO_BUFFER_BYTES of the new log not yet written */
    size_t out_bytes;
    struct index_slot *slots; /* the new log's table */
    ZSTD_CCtx *cctx;
    struct index_seal_writer writer;
    uint8_t *body;      /* INDEX_SEAL_RAW_MAX */
    uint8_t *scratch;   /* INDEX_SEAL_RAW_MAX */
    uint8_t *record;    /* INDEX_SEAL_RECORD_BYTES_MAX */
    uint64_t record_at; /* where the record being built goes */
    struct index_compact_entry *entries;
    size_t entry_count;
    size_t entry_cap;
    uint8_t *arena;
    size_t arena_bytes;
    size_t arena_cap;
    struct ds_id *customers;
    size_t customer_count;
    size_t customer_cap;
    uint8_t *directory; /* INDEX_RECORD_BYTES_MAX: the customer's sections, oldest first */
    size_t directory_count;
    const uint8_t *keys[INDEX_SEAL_SECTION_ENTRIES];
    const uint8_t *values[INDEX_SEAL_SECTION_ENTRIES];
    uint8_t key_bytes[INDEX_SEAL_SECTION_ENTRIES];
    uint8_t value_bytes[INDEX_SEAL_SECTION_ENTRIES];
};

static int index_compact_write(struct index_compactor *k, const void *src, size_t len)
{
    if (INDEX_IO_BUFFER_BYTES - k->out_bytes < len) {
        int rc = ds_pwrite_full(k->fd, k->out, k->out_bytes, k->end - k->out_bytes);
        if (rc != 0) {
            return rc;
        }
        k->out_bytes = 0;
    }
    memcpy(k->out + k->out_bytes, src, len);
    k->out_bytes += len;
    k->end += len;
    return 0;
}

static int index_compact_record_flush(struct index_compactor *k)
{
    if (k->writer.sections == 0) {
        return 0;
    }
    ASSERT(k->record_at == k->end);
    size_t len = index_seal_writer_finish(&k->writer, k->cctx, k->scratch, k->record);
    index_seal_writer_reset(&k->writer, k->body);
    return index_compact_write(k, k->record, len);
}

static _Thread_local const struct index_compactor *index_compacting;

static int index_compact_entry_compare(const void *a, const void *b)
{
    const struct index_compact_entry *x = a;
    const struct index_compact_entry *y = b;
    const struct index_compactor *k = index_compacting;
    int c = x->customer == y->customer
                ? 0
                : index_customer_compare(&k->customers[x->customer], &k->customers[y->customer]);
    c = c != 0 ? c
               : index_key_compare(k->arena + x->at, x->key_bytes, k->arena + y->at, y->key_bytes);
    return c != 0 ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

static int index_compact_grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap) {
        return 0;
    }
    size_t n = *cap < 1024 ? 1024 : *cap;
    while (n < need) {
        n *= 2;
    }
    void *q = realloc(*p, n * size);
    if (q == NULL) {
        return -ENOMEM;
    }
    *p = q;
    *cap = n;
    return 0;
}

/* Collects every entry on slot's chain in the old log (the customer of each run found or
 * added to k->customers). */
static int index_compact_collect(struct index_compactor *k, uint32_t slot)
{
    struct index *g = k->g;
    k->entry_count = 0;
    k->arena_bytes = 0;
    k->customer_count = 0;
    uint8_t buf[INDEX_QUERY_READ_BYTES];
    uint8_t *big = NULL;
    uint64_t offset = g->slots[slot].head;
    uint32_t seq = 0;
    int rc = 0;
    while (offset != 0 && rc == 0) {
        const uint8_t *r = NULL;
        uint64_t directory = 0;
        rc = index_run_read(g, offset, slot, buf, &big, &r, &directory);
        struct ds_id customer;
        rc = rc == 0 ? index_run_customer(r, &customer) : rc;
        if (rc != 0) {
            break;
        }
        uint32_t who = 0;
        while (who < k->customer_count && !ds_id_equal(&k->customers[who], &customer)) {
            who++;
        }
        if (who == k->customer_count) {
            rc = index_compact_grow((void **)&k->customers, &k->customer_cap, who + 1,
                                  sizeof(*k->customers));
            if (rc != 0) {
                break;
            }
            k->customers[k->customer_count++] = customer;
        }
        uint32_t len = index_u32_get(r + 4);
        uint32_t count = index_u32_get(r + 12);
        size_t at = INDEX_RUN_HEADER_BYTES + r[10];
        rc = index_compact_grow((void **)&k->entries, &k->entry_cap, k->entry_count + count,
                              sizeof(*k->entries));
        rc = rc == 0 ? index_compact_grow((void **)&k->arena, &k->arena_cap, k->arena_bytes + len, 1)
                     : rc;
        for (uint32_t i = 0; rc == 0 && i < count; i++) {
            if (at + 2 > len || at + 2 + r[at] > len || at + 2 + r[at] + r[at + 1 + r[at]] > len) {
                rc = -DS_ECORRUPT;
                break;
            }
            uint8_t key_bytes = r[at];
            uint8_t value_bytes = r[at + 1 + key_bytes];
            struct index_compact_entry *e = &k->entries[k->entry_count++];
            e->customer = who;
            e->seq = seq++;
            e->at = k->arena_bytes;
            e->key_bytes = key_bytes;
            e->value_bytes = value_bytes;
            memcpy(k->arena + k->arena_bytes, r + at + 1, key_bytes);
            memcpy(k->arena + k->arena_bytes + key_bytes, r + at + 2 + key_bytes, value_bytes);
            k->arena_bytes += (uint64_t)key_bytes + value_bytes;
            at += 2u + key_bytes + value_bytes;
        }
        offset = index_u64_get(r + 16);
    }
    free(big);
    return rc;
}

/* Writes the directory of the customer's sections written so far (k->directory, oldest first
 * as written; at most INDEX_DIRECTORY_ENTRIES_MAX, the oldest ones) as a record, newest first:
 * a walk that stops early in it still follows the chain on. *at is its offset. */
static int index_compact_directory(struct index_compactor *k, uint32_t slot, uint64_t *at)
{
    uint8_t *d = k->directory;
    size_t n = k->directory_count;
    uint8_t *e = d + INDEX_DIRECTORY_HEADER_BYTES;
    for (size_t i = 0; i < n / 2; i++) {
        uint8_t swap[INDEX_DIRECTORY_ENTRY_BYTES];
        memcpy(swap, e + i * INDEX_DIRECTORY_ENTRY_BYTES, sizeof(swap));
        memcpy(e + i * INDEX_DIRECTORY_ENTRY_BYTES, e + (n - 1 - i) * INDEX_DIRECTORY_ENTRY_BYTES,
               sizeof(swap));
        memcpy(e + (n - 1 - i) * INDEX_DIRECTORY_ENTRY_BYTES, swap, sizeof(swap));
    }
    size_t len = INDEX_DIRECTORY_HEADER_BYTES + n * INDEX_DIRECTORY_ENTRY_BYTES;
    memset(d, 0, INDEX_DIRECTORY_HEADER_BYTES);
    d[8] = INDEX_RECORD_DIRECTORY;
    index_u32_put(d + 4, (uint32_t)len);
    index_u32_put(d + 12, (uint32_t)n);
    index_u32_put(d + 16, slot);
    index_u32_put(d, ds_crc32c(0, d + 4, len - 4u));
    *at = k->end;
    return index_compact_write(k, d, len);
}

/* Writes one customer's distinct entries k->entries[first..end) (ascending tail keys) as
 * sections on slot's new chain: the newest INDEX_RUN_HEAD_ENTRIES in the head section (a
 * newest-N query decodes little), the rest in sections of INDEX_SEAL_SECTION_ENTRIES, oldest
 * first, so the chain's head is the newest. */
static int index_compact_customer(struct index_compactor *k, uint32_t slot, const uint32_t *order,
                                size_t count)
{
    struct index_slot *s = &k->slots[slot];
    uint64_t skip = s->head;
    size_t last = count;
    k->directory_count = 0;
    size_t sections = count <= INDEX_RUN_HEAD_ENTRIES
                          ? 1
                          : 1 + (count - INDEX_RUN_HEAD_ENTRIES + INDEX_SEAL_SECTION_ENTRIES - 1) /
                                    INDEX_SEAL_SECTION_ENTRIES;
    while (last > 0) {
        size_t first = last <= INDEX_RUN_HEAD_ENTRIES
                           ? 0
                           : INDEX_RUN_HEAD_ENTRIES + (last - 1 - INDEX_RUN_HEAD_ENTRIES) /
                                                        INDEX_SEAL_SECTION_ENTRIES *
                                                        INDEX_SEAL_SECTION_ENTRIES;
        size_t n = last - first;
        for (size_t i = 0; i < n; i++) {
            const struct index_compact_entry *e = &k->entries[order[first + i]];
            k->keys[i] = k->arena + e->at;
            k->key_bytes[i] = e->key_bytes;
            k->values[i] = k->arena + e->at + e->key_bytes;
            k->value_bytes[i] = e->value_bytes;
        }
        int64_t newest = (int64_t)~index_key_be64_get(k->keys[0]);
        struct index_seal_section sec = {
            .slot = slot,
            .tag = k->g->slots[slot].tag,
            .customer = k->customers[k->entries[order[first]].customer],
            .prev = s->head,
            .chain_max_ts = s->head != 0 && s->max_ts > newest ? s->max_ts : newest,
            .prev_chain_max_ts = s->head != 0 ? s->max_ts : 0,
            .skip = skip,
        };
        if (first == 0 && sections >= INDEX_DIRECTORY_SECTIONS_MIN &&
            sections - 1 <= INDEX_DIRECTORY_ENTRIES_MAX) {
            /* The head section: the others, newest first, in a directory record before it. */
            int rc = index_compact_record_flush(k);
            rc = rc == 0 ? index_compact_directory(k, slot, &sec.directory) : rc;
            if (rc != 0) {
                return rc;
            }
        }
        if (!index_seal_writer_fits(&k->writer, slot, (uint32_t)n)) {
            int rc = index_compact_record_flush(k);
            if (rc != 0) {
                return rc;
            }
        }
        if (k->writer.sections == 0) {
            k->record_at = k->end;
        }
        int rc = index_seal_writer_add(&k->writer, &sec, (uint32_t)n, k->keys, k->key_bytes,
                                     k->values, k->value_bytes);
        if (rc != 0) {
            ds_log_error("%s: a chain's entries do not seal", k->g->dir);
            return -DS_ECORRUPT;
        }
        s->tag = sec.tag;
        s->head = k->record_at;
        s->max_ts = sec.chain_max_ts;
        if (first != 0 && k->directory_count < INDEX_DIRECTORY_ENTRIES_MAX) {
            uint8_t *d = k->directory + INDEX_DIRECTORY_HEADER_BYTES +
                         k->directory_count * INDEX_DIRECTORY_ENTRY_BYTES;
            index_u64_put(d, k->record_at);
            index_u64_put(d + 8, ~index_key_be64_get(k->keys[n - 1])); /* the oldest ts */
            k->directory_count++;
        }
        last = first;
    }
    return 0;
}

/* One slot's chain: collected, sorted by (customer, key, newest copy first), each customer's
 * distinct keys sealed. */
static int index_compact_slot(struct index_compactor *k, uint32_t slot)
{
    int rc = index_compact_collect(k, slot);
    if (rc != 0 || k->entry_count == 0) {
        return rc;
    }
    index_compacting = k;
    qsort(k->entries, k->entry_count, sizeof(*k->entries), index_compact_entry_compare);
    /* The distinct entries' indexes, reusing the arena's tail would alias: a separate array. */
    uint32_t *order = malloc(k->entry_count * sizeof(*order));
    if (order == NULL) {
        return -ENOMEM;
    }
    size_t first = 0;
    size_t n = 0;
    for (size_t i = 0; i < k->entry_count && rc == 0; i++) {
        const struct index_compact_entry *e = &k->entries[i];
        const struct index_compact_entry *p = n > first ? &k->entries[order[n - 1]] : NULL;
        if (p != NULL && p->customer != e->customer) {
            rc = index_compact_customer(k, slot, order + first, n - first);
            first = n;
            p = NULL;
        }
        if (p == NULL ||
            index_key_compare(k->arena + p->at, p->key_bytes, k->arena + e->at, e->key_bytes) != 0) {
            order[n++] = (uint32_t)i; /* the newest copy of a key sorts first */
        }
    }
    rc = rc == 0 && n > first ? index_compact_customer(k, slot, order + first, n - first) : rc;
    free(order);
    return rc;
}

/* The new log: header, every chain sealed, then a cursor record that stands for the last
 * apply (same number, same cursor). Written and synced; *cursor_at and *crc name its cursor
 * record. */
static int index_compact_write_log(struct index_compactor *k, uint64_t *cursor_at, uint32_t *crc)
{
    struct index *g = k->g;
    uint8_t header[INDEX_LOG_HEADER_BYTES];
    index_log_header_make(g->slots_log2, header);
    int rc = index_compact_write(k, header, sizeof(header));
    for (uint64_t i = 0; rc == 0 && i <= g->mask; i++) {
        if (g->slots[i].head != 0) {
            rc = index_compact_slot(k, (uint32_t)i);
        }
    }
    rc = rc == 0 ? index_compact_record_flush(k) : rc;
    if (rc == 0) {
        uint8_t *r = k->record;
        memset(r, 0, INDEX_CURSOR_HEADER_BYTES);
        r[8] = INDEX_RECORD_CURSOR;
        pthread_mutex_lock(&g->cursor_lock);
        size_t len = INDEX_CURSOR_HEADER_BYTES + g->cursor_len;
        index_u32_put(r + 12, (uint32_t)g->cursor_len);
        index_u64_put(r + 16, g->applies);
        memcpy(r + INDEX_CURSOR_HEADER_BYTES, g->cursor, g->cursor_len);
        pthread_mutex_unlock(&g->cursor_lock);
        index_u32_put(r + 4, (uint32_t)len);
        index_u32_put(r, ds_crc32c(0, r + 4, len - 4u));
        *cursor_at = k->end;
        *crc = index_u32_get(r);
        rc = index_compact_write(k, r, len);
    }
    rc = rc == 0 && k->out_bytes > 0
             ? ds_pwrite_full(k->fd, k->out, k->out_bytes, k->end - k->out_bytes)
             : rc;
    rc = rc == 0 && fsync(k->fd) != 0 ? -errno : rc;
    return rc;
}

/* Swaps the new log and its table in: DIR/table goes first (it names the old log's records;
 * without it an opening handle reads the whole log), then the rename, then the handle. */
static int index_compact_swap(struct index_compactor *k, const char *tmp, uint64_t cursor_at,
                            uint32_t crc)
{
    struct index *g = k->g;
    char path[DS_PATH_MAX];
    index_path(g, "table", path);
    int rc = unlink(path) == 0 || errno == ENOENT ? 0 : -errno;
    rc = rc == 0 ? ds_fsync_dir(g->dir) : rc;
    index_path(g, "log", path);
    rc = rc == 0 && rename(tmp, path) != 0 ? -errno : rc;
    rc = rc == 0 ? ds_fsync_dir(g->dir) : rc;
    if (rc != 0) {
        return rc;
    }
    pthread_rwlock_wrlock(&g->swap_lock);
    struct index_slot *old = g->slots;
    int old_fd = g->log_fd;
    g->slots = k->slots;
    g->log_fd = k->fd;
    g->log_end = k->end;
    pthread_mutex_lock(&g->cursor_lock);
    g->cursor_at = cursor_at;
    g->cursor_crc = crc;
    pthread_mutex_unlock(&g->cursor_lock);
    g->checkpoint_end = k->end; /* the sealed log is its own checkpoint (see index_close) */
    g->sealed_end = cursor_at;
    pthread_rwlock_unlock(&g->swap_lock);
    k->slots = old;
    k->fd = old_fd;
    return 0;
}

int index_compact(struct index *g, struct index_compact_stats *stats)
{
    ASSERT(g != NULL);
    ASSERT(g->writer);
    ASSERT(g->buffered == 0);
    if (g->failed) {
        ds_log_error("%s: an earlier apply failed; reopen the index", g->dir);
        return -EIO;
    }
    /* No checkpoint of the old log may land after the swap (it would name a record of a log
     * that is gone: ignored at open, but a wasted table), and the thread's writeback offsets
     * are the old log's: stop it (it waits for one in flight); the next apply that needs it
     * starts it again. */
    index_checkpointer_stop(g);
    uint64_t started_ns = ds_clock_ns();
    uint64_t before = g->log_end;
    char tmp[DS_PATH_MAX];
    index_path(g, "log.compact", tmp);
    struct index_compactor k = {.g = g, .fd = -1};
    k.out = malloc(INDEX_IO_BUFFER_BYTES);
    k.slots = calloc((size_t)1 << g->slots_log2, sizeof(*k.slots));
    k.cctx = ZSTD_createCCtx();
    k.body = malloc(INDEX_SEAL_RAW_MAX);
    k.scratch = malloc(INDEX_SEAL_RAW_MAX);
    k.directory = malloc(INDEX_RECORD_BYTES_MAX);
    k.record = malloc(INDEX_SEAL_RECORD_BYTES_MAX > INDEX_CURSOR_RECORD_BYTES_MAX
                          ? INDEX_SEAL_RECORD_BYTES_MAX
                          : INDEX_CURSOR_RECORD_BYTES_MAX);
    int rc =
        k.out && k.slots && k.cctx && k.body && k.scratch && k.record && k.directory ? 0 : -ENOMEM;
    if (rc == 0) {
        index_seal_writer_reset(&k.writer, k.body);
        k.fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        rc = k.fd < 0 ? -errno : 0;
    }
    uint64_t cursor_at = 0;
    uint32_t crc = 0;
    rc = rc == 0 ? index_compact_write_log(&k, &cursor_at, &crc) : rc;
    rc = rc == 0 ? index_compact_swap(&k, tmp, cursor_at, crc) : rc;
    if (rc != 0) {
        ds_log_error("%s: cannot compact the log: %s (the old log stays)", g->dir, ds_strerror(rc));
        (void)unlink(tmp);
    }
    if (k.fd >= 0) {
        close(k.fd); /* the new log's fd when it failed; the old log's after a swap */
    }
    free(k.out);
    free(k.slots);
    ZSTD_freeCCtx(k.cctx);
    free(k.body);
    free(k.scratch);
    free(k.record);
    free(k.directory);
    free(k.entries);
    free(k.arena);
    free(k.customers);
    if (rc == 0) {
        struct index_checkpointer *c = g->checkpointer;
        c->writeback_requested = g->log_end;
        c->writeback_to = g->log_end;
        c->retry_end = 0;
        if (stats != NULL) {
            stats->bytes_before = before;
            stats->bytes_after = g->log_end;
            stats->seconds = (double)(ds_clock_ns() - started_ns) / 1e9;
        }
        ds_log_info("%s: compacted the log from %" PRIu64 " to %" PRIu64 " bytes", g->dir, before,
                    g->log_end);
    }
    return rc;
}

/* ---- checking ------------------------------------------------------------------------------ */

/* One check (index_check): a reader's handle for the log (dir, log_fd, mask, scan buffer, and
 * slots: the table the log's records build as the scan goes), the checkpoint found in
 * DIR/table, and the caller's report. */
struct index_checker {
    struct index *g;
    struct index_check_report *out;
    uint8_t *cursor; /* the caller's buffer for the last cursor */
    size_t cursor_cap;
    int table_fd;       /* -1: no DIR/table */
    bool table_valid;   /* its header and body passed; compared when the scan reaches table_end */
    bool table_reached; /* a cursor record ended at table_end and the tables were compared */
    uint8_t *table;     /* its body: table_count entries of INDEX_CHECKPOINT_ENTRY_BYTES */
    uint32_t table_count;
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

/* The customer id a run stores. Returns 0 or -DS_ECORRUPT. */
static int index_run_customer(const uint8_t *r, struct ds_id *customer)
{
    memset(customer, 0, sizeof(*customer));
    if (r[9] == 0) {
        customer->value = (int64_t)index_u64_get(r + INDEX_RUN_HEADER_BYTES);
    } else {
        customer->is_string = true;
        customer->len = r[10];
        memcpy(customer->text, r + INDEX_RUN_HEADER_BYTES, r[10]);
    }
    return index_key_id_valid(customer) ? 0 : -DS_ECORRUPT;
}

/* Decodes every entry of a run whose header passed index_record_check into e (the customer set),
 * checking that each decodes into a valid entry and that the tail keys strictly ascend (newest
 * first, no copies within a run); fn (may be NULL) sees each. *newest_ts and *oldest_ts are
 * the first and the last entry's ts. Returns 0, fn's non-zero value or -DS_ECORRUPT. */
static int index_run_entries(const uint8_t *r, uint32_t len, struct index_entry *e, index_entry_fn fn,
                           void *user, int64_t *newest_ts, int64_t *oldest_ts)
{
    size_t at = INDEX_RUN_HEADER_BYTES + r[10];
    uint32_t count = index_u32_get(r + 12);
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
            index_key_value_decode(value, value_bytes, e) != 0 || !index_key_id_valid(&e->order_id) ||
            e->ts_ms < DS_TS_MS_MIN || e->ts_ms > DS_TS_MS_MAX ||
            (last_key != NULL && index_key_compare(last_key, last_key_bytes, key, key_bytes) >= 0)) {
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
        index_u32_get(r + 44) != 0) {
        index_check_damage(c, "%s/log: the run at offset %" PRIu64 " does not decode", g->dir, at);
        return 1;
    }
    uint32_t slot = index_u32_get(r + 40);
    uint64_t tag = index_u64_get(r + 48);
    uint64_t own = index_tag(&e.customer_id);
    uint64_t home = own & g->mask;
    struct index_slot *s = &g->slots[slot];
    uint64_t prev = index_u64_get(r + 16);
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
    } else if ((int64_t)index_u64_get(r + 56) != (prev != 0 ? s->max_ts : 0) ||
               (int64_t)index_u64_get(r + 24) != chain_max ||
               (int64_t)index_u64_get(r + 32) != oldest) {
        wrong = "has ts fields that disagree with its entries or its chain";
    } else if (index_u64_get(r + 64) != skip) {
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
    c->pending_entries += index_u32_get(r + 12);
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
        uint32_t index = index_u32_get(t);
        if (memcmp(t + 4, &g->slots[index], INDEX_SLOT_BYTES) != 0) {
            index_check_damage(c, "%s/table: slot %" PRIu32 " differs from the log's records", g->dir,
                             index);
            return;
        }
    }
}

/* A cursor record ends an apply: the apply numbers run 1, 2, ...; the cursor fits the caller's
 * buffer; where the checkpoint ends, the tables are compared. Returns 0, or 1 at damage. */
static int index_check_cursor(struct index_checker *c, const struct index_record *record)
{
    const uint8_t *r = record->bytes;
    uint64_t number = index_u64_get(r + 16);
    uint32_t cursor_len = index_u32_get(r + 12);
    /* A compacted log's first cursor record keeps the number of the apply it stands for. */
    bool first_after_seal = c->apply_number == 0 && c->saw_sealed && number >= 1;
    c->last_sealed = false;
    if ((number != c->apply_number + 1 && !first_after_seal) || cursor_len > c->cursor_cap) {
        index_check_damage(c,
                         "%s/log: the cursor record at offset %" PRIu64 " has apply number %" PRIu64
                         " after %" PRIu64 " (or a cursor of %" PRIu32 " bytes)",
                         c->g->dir, record->offset, number, c->apply_number, cursor_len);
        return 1;
    }
    c->apply_number = number;
    if (cursor_len > 0) {
        memcpy(c->cursor, r + INDEX_CURSOR_HEADER_BYTES, cursor_len);
    }
    struct index_check_report *out = c->out;
    out->cursor_len = cursor_len;
    out->applies++;
    out->runs += c->pending_runs;
    out->entries += c->pending_entries;
    out->committed_bytes = record->offset + record->len;
    c->pending_runs = 0;
    c->pending_entries = 0;
    if (c->table_valid && out->committed_bytes == c->table_end) {
        c->table_reached = true;
        if (record->offset != c->table_cursor_at || record->crc != c->table_cursor_crc) {
            index_check_damage(c, "%s/table: names another cursor record than the log's at %" PRIu64,
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
    if (record->type == INDEX_RECORD_CURSOR) {
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
    uint32_t log2 = index_u32_get(h + 24);
    bool padding_zero = true;
    for (size_t i = 32; i < sizeof(h); i++) {
        padding_zero = padding_zero && h[i] == 0;
    }
    if (memcmp(h, INDEX_LOG_MAGIC, sizeof(INDEX_LOG_MAGIC) - 1) != 0 ||
        index_u32_get(h + 28) != ds_crc32c(0, h, 28) || log2 < INDEX_TABLE_SLOTS_LOG2_MIN ||
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
    uint32_t count = index_u32_get(h + 56);
    uint64_t body_bytes = (uint64_t)count * INDEX_CHECKPOINT_ENTRY_BYTES;
    if (got < sizeof(h) || memcmp(h, INDEX_TABLE_MAGIC, sizeof(INDEX_TABLE_MAGIC) - 1) != 0 ||
        index_u32_get(h + 60) != ds_crc32c(0, h, 60) || index_u32_get(h + 24) != g->slots_log2 ||
        count > g->mask + 1 || (uint64_t)st.st_size != INDEX_TABLE_HEADER_BYTES + body_bytes) {
        index_check_damage(c, "%s/table: a bad header (or %lld bytes where it says %" PRIu64 ")",
                         g->dir, (long long)st.st_size, INDEX_TABLE_HEADER_BYTES + body_bytes);
        return;
    }
    c->table_end = index_u64_get(h + 32);
    c->table_cursor_at = index_u64_get(h + 40);
    c->table_cursor_crc = index_u32_get(h + 48);
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
              ds_crc32c(0, c->table, (size_t)body_bytes) == index_u32_get(h + 52);
    for (uint32_t k = 0; ok && k < count; k++) {
        const uint8_t *t = c->table + (size_t)k * INDEX_CHECKPOINT_ENTRY_BYTES;
        uint32_t index = index_u32_get(t);
        uint64_t head = index_u64_get(t + 12);
        ok = index <= g->mask && (k == 0 || index > index_u32_get(t - INDEX_CHECKPOINT_ENTRY_BYTES)) &&
             index_u64_get(t + 4) != 0 && head >= INDEX_LOG_HEADER_BYTES && head < c->table_end;
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
    int rc = index_scan(g, g->scan, INDEX_LOG_HEADER_BYTES, out->log_bytes, index_check_record, c, &stop);
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

int index_check(const char *dir, void *cursor, size_t cursor_cap, struct index_check_report *out)
{
    ASSERT(dir != NULL);
    ASSERT(out != NULL);
    ASSERT(cursor != NULL || cursor_cap == 0);
    memset(out, 0, sizeof(*out));
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
    struct index_checker c = {
        .g = g, .out = out, .cursor = cursor, .cursor_cap = cursor_cap, .table_fd = -1};
    rc = index_check_files(&c);
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
        uint32_t log2 = index_u32_get(h + 24);
        g->mask = log2 >= INDEX_TABLE_SLOTS_LOG2_MIN && log2 <= INDEX_TABLE_SLOTS_LOG2_MAX
                      ? (1ull << log2) - 1
                      : 0;
    }
    rc = rc == 0 && (got != sizeof(h) || g->mask == 0) ? -DS_ECORRUPT : rc;
    struct index_entries_visit visit = {.fn = fn, .user = user};
    uint64_t stop = 0;
    if (rc == 0 && until > INDEX_LOG_HEADER_BYTES) {
        rc = index_scan(g, g->scan, INDEX_LOG_HEADER_BYTES, until, index_entries_record, &visit, &stop);
        rc = rc == 0 && stop != until ? -DS_ECORRUPT : rc;
    }
    index_close(g);
    return rc;
}
