/*
 * index_private.h: what the files of index/ share and nobody else sees (the unit tests and the
 * fuzz harnesses reach it as tests may): the byte encodings of keys and values (key.c), the sealed
 * records of a compacted log (seal.c), and the store's file formats, limits, in-memory structures
 * and the functions its files call in one another. store.c's opening comment describes the
 * store as a whole; each file's opening comment what it implements.
 *
 * One private header rather than one per file: the store's files share one struct index and one
 * set of record formats, and a reader of any of them needs the whole picture.
 */
#ifndef DS_INDEX_INDEX_PRIVATE_H
#define DS_INDEX_INDEX_PRIVATE_H

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <zstd.h>

#include "common/common.h"
#include "index/index.h"

/* ---- keys and values (key.c) ----------------------------------------------------------------- */

/*
 * key: the byte encodings of the by-customer index (the store's files; the unit tests and the
 * fuzz harness reach them as tests may). They are the encodings of the RocksDB store the log
 * replaced, so page order and page tokens stayed the same across that change.
 *
 * A tail key is an entry's position within its customer, compared bytewise (memcmp, a shorter
 * key that is a prefix of a longer one first; no tail key is a prefix of another):
 *
 *   ts        u64 ~ts_ms, big-endian                          (newest first)
 *   order id  integer: 0xFE, u64 ~id, big-endian
 *             string:  0xFD, ~E(bytes), where E escapes 0x00 as 0x00 0xFF and ends 0x00 0x00
 *
 * so among equal ts, string order ids come before integer ones, each descending. A value is u8
 * status length, the status bytes, the amount as a zigzag varint. A page token is the lowercase
 * hex of the tail key of the last entry of a page.
 */

#define INDEX_TAG_ORDER_STRING 0xFDu /* ~0x02 */
#define INDEX_TAG_ORDER_INT 0xFEu    /* ~0x01 */
#define INDEX_ORDER_BYTES_MAX (1u + 2u * DS_ID_BYTES_MAX + 2u)
#define INDEX_TAIL_BYTES_MAX (8u + INDEX_ORDER_BYTES_MAX)
/* The tail key of an integer order id: ~ts, 0xFE, ~id. */
#define INDEX_TAIL_INT_BYTES 17u
#define INDEX_VALUE_BYTES_MAX (1u + DS_STATUS_BYTES_MAX + 10u)

_Static_assert(INDEX_TOKEN_CHARS_MAX == 2u * INDEX_TAIL_BYTES_MAX, "a token is hex of a tail key");

void index_key_be64_put(uint8_t *dst, uint64_t v);
uint64_t index_key_be64_get(const uint8_t *src);
/* An id the index accepts: an integer >= 1 or a string of 1..DS_ID_BYTES_MAX bytes. */
bool index_key_id_valid(const struct ds_id *id);
/* The customer's tag in the slot table: a hash of kind and id, never 0 (0 marks an empty slot). */
uint64_t index_key_tag(const struct ds_id *customer);
/* Writes the tail key of (ts_ms, order) into dst (INDEX_TAIL_BYTES_MAX); returns its length. */
size_t index_key_tail_encode(int64_t ts_ms, const struct ds_id *order, uint8_t *dst);
/* Decodes a tail key of exactly len bytes. Returns 0 or -DS_ECORRUPT. */
DS_MUST_USE int index_key_tail_decode(const uint8_t *src, size_t len, int64_t *ts_ms,
                                      struct ds_id *order);
/* Writes e's status and amount into dst (INDEX_VALUE_BYTES_MAX); returns its length. */
size_t index_key_value_encode(const struct index_entry *e, uint8_t *dst);
/* Decodes a value of exactly len bytes into e's status and amount. Returns 0 or -DS_ECORRUPT. */
DS_MUST_USE int index_key_value_decode(const uint8_t *src, size_t len, struct index_entry *e);
/* Lowercase hex of src into dst (2 * len + 1 bytes, NUL-terminated). */
void index_key_hex_encode(const uint8_t *src, size_t len, char *dst);
/* Decodes a page token into its tail key (dst: INDEX_TAIL_BYTES_MAX); returns the byte count or
 * -DS_EUSAGE (not hex, or not a well-formed tail key). */
DS_MUST_USE int index_key_token_decode(const char *token, uint8_t *dst);

/* ---- sealed records (seal.c) ---------------------------------------------------------------- */

/*
 * seal: the sealed records of the by-customer index's log (compact.c writes them; read.c,
 * records.c and check.c read them on queries, scans and checks; the unit tests and the fuzz
 * harness reach them as tests may).
 *
 * A sealed record packs sections, one per slot at most, in ascending slot order. A section is
 * one customer's entries (at most INDEX_SEAL_SECTION_ENTRIES, newest first) with the fields of a
 * run header (slot, tag, prev, chain_max_ts, prev chain_max_ts, skip), encoded as varints and
 * deltas instead of fixed fields, so a customer with a few orders costs a dozen bytes of header
 * instead of 80; the payload is zstd-compressed when that is smaller. Readers turn one section
 * back into the bytes of a run record (an "image", the layout store.c's header comment gives), so
 * the query walk, the table scan and the checker read both kinds through one path.
 *
 * The record (little-endian):
 *
 *   [0]  u32 crc   CRC32C of the record's bytes after this field
 *   [4]  u32 len   the record's bytes, header included
 *   [8]  u8 type   INDEX_SEAL_RECORD_TYPE (3)
 *   [9]  u8 codec  0: the payload is raw; 1: it is one zstd frame of the raw payload
 *   [10] u16 zero
 *   [12] u32 raw payload bytes (1..INDEX_SEAL_RAW_MAX)
 *   [16] payload
 *
 * The raw payload (varint: LEB128; zz: zigzag varint; all deltas wrap in 64 bits):
 *
 *   varint status count (0..INDEX_SEAL_STATUSES_MAX), each: u8 length (0..32), the bytes
 *   varint section count (>= 1), then each section:
 *     varint slot (the first: the slot; later ones: the increase over the previous, >= 1)
 *     u8 flags: 1 the customer id is a string; 2 the slot's tag is not the customer's own (a
 *       full probe window: the customer shares its home slot's chain), u64 tag follows;
 *       4 the section links to older runs (the link fields follow; without it prev, skip and
 *       the previous chain_max_ts are 0 and chain_max_ts is the newest ts); 8 the customer's
 *       newest section of a compaction that gave it several: a directory record's offset
 *       follows the link fields
 *     [u64 tag]
 *     customer: an integer as a varint (>= 1); a string as u8 length (1..64) and the bytes
 *     varint entry count (1..INDEX_SEAL_SECTION_ENTRIES)
 *     zz newest ts: the change from the previous section's newest ts (the first: from 0)
 *     [varint prev offset, varint chain_max_ts - newest ts, varint chain_max_ts - previous
 *      chain_max_ts, varint prev - skip]
 *     [varint directory offset]
 *     varint entry bytes, then each entry (tail key order: ts descending, then order id):
 *       varint head: ts delta << 5 | status code << 2 | amount < 0 << 1 | order id is a string;
 *         ts delta is the previous entry's ts minus this one's (the first entry's: 0, its ts
 *         is the newest ts); status code 0..6 is the index into the record's statuses, 7 says
 *         the index (>= 7) follows the order id as a varint
 *       order id: an integer as zz of the change from the section's previous integer id
 *         (from 0); a string as u8 length (1..64) and the bytes
 *       [varint status index]
 *       varint |amount| (not 0 when negative)
 */

#define INDEX_SEAL_RECORD_TYPE 3u
/* A directory record (store.c): a customer's sealed sections below its newest, so a page deep in
 * a heavy customer jumps to the section that holds it. */
#define INDEX_SEAL_DIRECTORY_TYPE 4u
#define INDEX_SEAL_HEADER_BYTES 16u
#define INDEX_SEAL_CODEC_RAW 0u
#define INDEX_SEAL_CODEC_ZSTD 1u
/* A section holds at most this many entries, so a page deep in a heavy customer decodes a
 * bounded amount past the entries it returns. */
#define INDEX_SEAL_SECTION_ENTRIES 128u
/* A record is closed once its raw payload passes this: a light customer's query decodes one. */
#define INDEX_SEAL_RAW_TARGET 4096u
#define INDEX_SEAL_STATUSES_MAX 256u
/* Largest entry: ts varint, string order id, status index, amount. */
#define INDEX_SEAL_ENTRY_BYTES_MAX                                                                 \
    (10u + 1u + DS_ID_BYTES_MAX + 2u + 10u) /* head, id, index, amount */
#define INDEX_SEAL_SECTION_HEADER_BYTES_MAX (5u + 1u + 8u + 1u + DS_ID_BYTES_MAX + 8u + 10u * 6u)
#define INDEX_SEAL_RAW_MAX                                                                         \
    (INDEX_SEAL_RAW_TARGET + INDEX_SEAL_SECTION_HEADER_BYTES_MAX +                                 \
     INDEX_SEAL_SECTION_ENTRIES * INDEX_SEAL_ENTRY_BYTES_MAX + 2u + INDEX_SEAL_STATUSES_MAX * 33u)
#define INDEX_SEAL_RECORD_BYTES_MAX (INDEX_SEAL_HEADER_BYTES + INDEX_SEAL_RAW_MAX + 1024u)

/* The run record an image reproduces (store.c's header comment). */
#define INDEX_IMAGE_HEADER_BYTES 72u
#define INDEX_IMAGE_ENTRY_BYTES_MAX (1u + INDEX_TAIL_BYTES_MAX + 1u + INDEX_VALUE_BYTES_MAX)
#define INDEX_IMAGE_BYTES_MAX                                                                      \
    (INDEX_IMAGE_HEADER_BYTES + DS_ID_BYTES_MAX +                                                  \
     INDEX_SEAL_SECTION_ENTRIES * INDEX_IMAGE_ENTRY_BYTES_MAX)

/* A section's header fields, as a run header holds them. */
struct index_seal_section {
    uint32_t slot;
    uint64_t tag;
    struct ds_id customer;
    uint64_t prev;
    int64_t chain_max_ts;
    int64_t prev_chain_max_ts;
    uint64_t skip;
    uint64_t directory; /* the directory record's offset, 0: none */
};

/* Builds one record's raw payload, a section at a time. */
struct index_seal_writer {
    uint8_t *body; /* INDEX_SEAL_RAW_MAX: the sections */
    size_t body_bytes;
    uint32_t sections;
    uint32_t last_slot;
    int64_t last_newest_ts;
    uint32_t status_count;
    uint8_t status_len[INDEX_SEAL_STATUSES_MAX];
    char status[INDEX_SEAL_STATUSES_MAX][DS_STATUS_BYTES_MAX];
};

/* Starts an empty record (body: INDEX_SEAL_RAW_MAX bytes, borrowed). */
void index_seal_writer_reset(struct index_seal_writer *w, uint8_t *body);
/* Whether a section of count entries for slot may join the record: its slot is above the
 * record's last one, the record is below INDEX_SEAL_RAW_TARGET and has room for count more
 * statuses. */
bool index_seal_writer_fits(const struct index_seal_writer *w, uint32_t slot, uint32_t count);
/* Adds a section: its header fields and count entries (1..INDEX_SEAL_SECTION_ENTRIES) as a run
 * holds them (keys[i], key_bytes[i]; values[i], value_bytes[i]: tail keys ascending, valid
 * encodings). Returns 0 or -DS_EUSAGE (not fits, or an entry that does not decode). */
DS_MUST_USE int index_seal_writer_add(struct index_seal_writer *w,
                                      const struct index_seal_section *s, uint32_t count,
                                      const uint8_t *const *keys, const uint8_t *key_bytes,
                                      const uint8_t *const *values, const uint8_t *value_bytes);
/* Writes the record (header, payload compressed with cctx, a ZSTD_CCtx *, when smaller) into
 * dst (INDEX_SEAL_RECORD_BYTES_MAX); returns its length. scratch: INDEX_SEAL_RAW_MAX bytes. */
size_t index_seal_writer_finish(const struct index_seal_writer *w, void *cctx, uint8_t *scratch,
                                uint8_t *dst);

/* Checks a sealed record's header and CRC (len: its whole length) and puts its raw payload in
 * raw (INDEX_SEAL_RAW_MAX; dctx: a ZSTD_DCtx *). Returns the raw length or -DS_ECORRUPT. */
DS_MUST_USE int64_t index_seal_record_open(const uint8_t *record, size_t len, void *dctx,
                                           uint8_t *raw);

/* Reads the sections of a raw payload in order. */
struct index_seal_reader {
    const uint8_t *raw;
    size_t len;
    size_t at;
    uint32_t sections_left;
    uint32_t last_slot;
    int64_t last_newest_ts;
    uint64_t mask;      /* the table's slot mask: a larger slot is damage */
    bool started;       /* a section was read: the next slot is a delta */
    uint64_t directory; /* the last section's directory offset (0: none) */
    uint32_t status_count;
    const uint8_t *status[INDEX_SEAL_STATUSES_MAX]; /* each: u8 length, the bytes */
};

/* Starts reading raw[0..len). Returns 0 or -DS_ECORRUPT. */
DS_MUST_USE int index_seal_reader_init(struct index_seal_reader *r, const uint8_t *raw, size_t len,
                                       uint64_t mask);
/* The next section as a run image in image (INDEX_IMAGE_BYTES_MAX): every field a run header
 * has, the entries as a run holds them (checked: valid ids, ts in range, keys ascending), the
 * record's CRC field 0. Without entries, the header and the customer id only (the image's
 * length and oldest ts stop there and are 0): what building the table needs. Only the slot is
 * read (and the entries skipped) when want_slot is given and differs (UINT32_MAX: every
 * section). Returns the image length, 0 when the section was skipped (its slot in *slot),
 * -ENOENT after the last one, or -DS_ECORRUPT. */
DS_MUST_USE int64_t index_seal_reader_next(struct index_seal_reader *r, uint32_t want_slot,
                                           bool entries, uint8_t *image, uint32_t *slot);

/* ---- the store: formats, limits, structures ---------------------------------------------------
 */

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
#define INDEX_DIRECTORY_ENTRIES_MAX                                                                \
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
#define INDEX_RUN_BYTES_MAX                                                                        \
    (INDEX_RUN_HEADER_BYTES + DS_ID_BYTES_MAX + INDEX_RUN_ENTRIES_MAX * INDEX_ENTRY_BYTES_MAX)
/* A type-2 record holds a whole cursor of at most this. Logs with them are read; new applies
 * write delta records (INDEX_RECORD_CURSOR_DELTA) instead. */
#define INDEX_CURSOR_FULL_BYTES_MAX (256u * 1024u)
#define INDEX_CURSOR_RECORD_BYTES_MAX (INDEX_CURSOR_HEADER_BYTES + INDEX_CURSOR_FULL_BYTES_MAX)
#define INDEX_RECORD_BYTES_MAX                                                                     \
    (INDEX_RUN_BYTES_MAX > INDEX_CURSOR_RECORD_BYTES_MAX ? INDEX_RUN_BYTES_MAX                     \
                                                         : INDEX_CURSOR_RECORD_BYTES_MAX)
/* A seal moves the applies made since its snapshot a batch at a time (this many bytes of
 * records unless index_config says otherwise): the batch's runs are placed and chained in the
 * order of their slots, so that a walk maps each page of the table being built once, writable,
 * and releases it behind itself; the records are then written in log order. Moving each run in
 * log order wrote a page anywhere in the table per run, a fault and a page_mkwrite of its file
 * each: bench_index_seal (1M events at 150,000/s) copied 3.5 MB/s, less than the log grew, so
 * one seal chased the applies to the end and the log reached 55 MB. */
#define INDEX_SEAL_MOVE_BATCH_BYTES (8u << 20)
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
    uint64_t log_end;         /* writer: bytes of log written or buffered; reader: scanned */
    uint64_t applies;         /* the number of the last cursor record */
    uint64_t cursor_at;       /* offset of the last cursor record; 0: none */
    uint32_t cursor_crc;      /* its crc field */
    pthread_mutex_t cursor_lock;
    /* Queries hold it shared while they read the log and the table; index_compact holds it
     * exclusively while it swaps the compacted log and its table in. */
    pthread_rwlock_t swap_lock;
    uint8_t *cursor; /* cursor_cap bytes (grown): the last cursor, cursor_len of them */
    uint8_t *scan; /* INDEX_IO_BUFFER_BYTES: reads of the log and the checkpoint (open, refresh) */
    size_t cursor_len;
    /* writer */
    uint32_t batch_entries_max;
    uint64_t checkpoint_bytes;
    size_t seal_batch_bytes; /* a seal's batch of moved records (index_config) */
    uint64_t checkpoint_end; /* log_end of the last checkpoint */
    uint64_t sealed_end;     /* where the last compaction's records end (0: never compacted) */
    uint8_t *buffer;         /* INDEX_IO_BUFFER_BYTES of records not yet written */
    size_t buffered;
    struct index_item *items;
    struct index_item *items_spare; /* the radix sort's other half */
    uint8_t *tails;                 /* batch_entries_max * INDEX_TAIL_BYTES_MAX */
    uint32_t *run;                  /* the deduplicated items of one customer */
    struct index_publish *publish;
    size_t publish_count;
    struct index_checkpointer *checkpointer; /* writer: checkpoints (see that section) */
    /* the cursor's delta records (see that section) */
    size_t cursor_cap;
    uint8_t *cursor_spare; /* writer: the next cursor is built here, then swapped in */
    size_t cursor_spare_cap;
    uint32_t cursor_link_crc;     /* crc field of the last cursor record applied, a piece too */
    uint64_t cursor_preloaded_at; /* a delta record whose result DIR/table held (0: none) */
};

/* DIR/table: a 64-byte header (magic, [24] u32 slots_log2, [28] u32 cursor bytes, [32] u64 the
 * log end it covers, [40] u64 offset and [48] u32 crc field of the cursor record that ends
 * there, [52] u32 CRC32C of the body, [56] u32 count, [60] u32 CRC32C of the 60 bytes before),
 * then the body: the count used slots, each u32 index and the slot's 24 bytes, then the cursor
 * that record leaves (0 bytes when it is a whole-cursor record, which holds it itself).
 * Sparse, so a small index has a small checkpoint whatever the table size. */
#define INDEX_CHECKPOINT_ENTRY_BYTES (4u + INDEX_SLOT_BYTES)

/* What a scan learned about one record. */
struct index_record {
    uint64_t offset;
    uint32_t len;
    uint32_t crc;
    uint8_t type;
    const uint8_t *bytes; /* the whole record, valid during the callback */
};

typedef int (*index_section_fn)(struct index *g, const uint8_t *image, uint32_t len,
                                uint64_t offset, void *user);
typedef int (*index_record_fn)(struct index *g, const struct index_record *record, void *user);

/* What reading a sealed record needs: the record, its raw payload, a section's image and a
 * zstd context; one per thread (queries run on many), made on first use, freed at its exit. */
struct index_seal_ctx {
    ZSTD_DCtx *dctx;
    uint8_t *record; /* INDEX_SEAL_RECORD_BYTES_MAX */
    uint8_t *raw;    /* INDEX_SEAL_RAW_MAX */
    uint8_t *image;  /* INDEX_IMAGE_BYTES_MAX */
};

/* Small and on the hot paths of applies, queries and compaction: inline in every file. */

/* Orders customer ids: integers before strings, integers by value, strings bytewise. */
static inline int index_customer_compare(const struct ds_id *a, const struct ds_id *b)
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

/* Orders tail keys bytewise, a key before the longer keys it is a prefix of. */
static inline int index_key_compare(const uint8_t *a, size_t a_bytes, const uint8_t *b,
                                    size_t b_bytes)
{
    size_t n = a_bytes < b_bytes ? a_bytes : b_bytes;
    int c = memcmp(a, b, n);
    return c != 0 ? c : (a_bytes > b_bytes) - (a_bytes < b_bytes);
}

static inline uint64_t index_slot_tag_load(const struct index_slot *s)
{
    return __atomic_load_n(&s->tag, __ATOMIC_ACQUIRE);
}

/* The slot whose chain holds tag's runs: its own, or the home slot when the window is full.
 * *empty is set when the customer has no slot yet and one is free (the slot returned). */
static inline uint32_t index_slot_find(const struct index *g, uint64_t tag, bool *empty)
{
    uint64_t home = tag & g->mask;
    for (uint32_t i = 0; i < INDEX_PROBE_MAX; i++) {
        uint32_t slot = (uint32_t)((home + i) & g->mask);
        uint64_t t = index_slot_tag_load(&g->slots[slot]);
        if (t == tag || t == 0) {
            *empty = t == 0;
            return slot;
        }
    }
    *empty = false;
    return (uint32_t)home;
}

/* little helpers and the sealed-record buffers of a thread (store.c) */
size_t index_customer_bytes(const struct ds_id *customer, uint8_t *dst);
int index_pread_all(int fd, void *dst, size_t len, uint64_t offset, size_t *got);
void index_path(const struct index *g, const char *name, char *dst);
struct index_seal_ctx *index_seal_ctx(void);

/* FORMAT, the log header, the lock (files.c) */
int index_format_check(const char *dir, bool create);
void index_log_header_make(uint32_t slots_log2, uint8_t *dst);
int index_log_open(struct index *g, const struct index_config *cfg);
int index_lock(struct index *g);

/* reading and checking records, scans (records.c) */
bool index_run_header_valid(const struct index *g, const uint8_t *r, uint32_t len, uint64_t offset);
int index_sealed_sections(struct index *g, const uint8_t *r, uint32_t len, uint64_t offset,
                          bool entries, index_section_fn fn, void *user);
int64_t index_record_check(const struct index *g, const uint8_t *r, size_t avail, uint64_t offset);
int index_scan(struct index *g, uint8_t *buf, uint64_t from, uint64_t until, index_record_fn fn,
               void *user, uint64_t *end);
int index_intact_after(struct index *g, uint64_t from, uint64_t until, uint64_t *found);
int index_log_size(struct index *g, uint64_t *size);
int index_catch_up_to(struct index *g, uint64_t until, uint64_t *end);
int index_catch_up(struct index *g, uint64_t *size, uint64_t *end);
int index_run_customer(const uint8_t *r, struct ds_id *customer);

/* checkpoints of the slot table (checkpoint.c) */
int index_checkpoint_load(struct index *g);
int index_checkpoint_write(struct index *g);
void index_checkpoint_after_apply(struct index *g);
int index_checkpointer_start(struct index *g, const struct index_config *cfg);
void index_checkpointer_stop(struct index *g);
void index_checkpointer_compacted(struct index *g);
void index_checkpointer_free(struct index_checkpointer *c);
void index_checkpoint_table_lock(struct index *g);
void index_checkpoint_table_unlock(struct index *g);

/* handles (open.c) */
int index_create(const struct index_config *cfg, bool writer, struct index **out);

/* reading runs (read.c) */
int index_run_read(const struct index *g, uint64_t offset, uint32_t slot, uint8_t *buf,
                   uint8_t **big, const uint8_t **r, uint64_t *directory);

/* ---- the cursor's records (records.c, apply.c) ----------------------------------------------
 *
 * A cursor delta record (type 5) ends an apply with the change to the cursor, not the cursor:
 *
 *   [9]  u8 flags   INDEX_DELTA_RESET: applied to the empty cursor (a compacted log's first);
 *                   INDEX_DELTA_MORE: a piece, the next record continues the apply's change
 *   [10] u16 zero   [12] u32 the cursor's bytes after it   [16] u64 apply number
 *   [24] u32 base: the crc field of the cursor record it applies to (0 with RESET)
 *   [28] u32 zero
 *   [32] varint at, varint delete, varint insert: the old cursor's bytes [at, at + delete) give
 *        way to insert zero bytes, then patches until the record's end, each varint gap (from the
 *        previous patch's end, the first from 0), varint length (>= 1), the bytes
 *
 * Only a record without MORE ends an apply. A reader rebuilds the cursor from the last full one
 * (an old type-2 record, the RESET record of a compacted log, or the copy DIR/table holds)
 * plus the delta records after it, each checked against its base. */
#define INDEX_RECORD_CURSOR_DELTA 5u
#define INDEX_DELTA_RESET 1u
#define INDEX_DELTA_MORE 2u
#define INDEX_DELTA_HEADER_BYTES 32u
/* A piece's size: a change larger than this (a compaction's whole cursor, a node catching up on
 * thousands of partitions) is split, so every record fits the scan buffer. */
#define INDEX_DELTA_RECORD_BYTES_MAX (64u * 1024u)
/* Equal bytes between two changes that still join one patch: a patch's gap and length varints
 * cost about as much. */
#define INDEX_DELTA_JOIN_GAP_BYTES 3u
static_assert(INDEX_DELTA_RECORD_BYTES_MAX <= INDEX_RECORD_BYTES_MAX, "a piece is a record");
static_assert(INDEX_DELTA_HEADER_BYTES + 3u * 10u + 2u * 10u + 1u < INDEX_DELTA_RECORD_BYTES_MAX,
              "a piece holds a patch");

/* Writes the records of one cursor change, a piece at a time. */
struct index_delta_writer {
    const uint8_t *base; /* the old cursor after the splice (NULL with reset: all new) */
    const uint8_t *next; /* the new cursor */
    size_t len;          /* both lengths */
    uint64_t at, del, ins;
    uint64_t apply;
    uint32_t base_crc; /* the crc field of the record the next piece follows */
    bool reset;
    bool first;
    bool done;
    size_t pos;                    /* where the search for the next patch resumes */
    size_t patch_start, patch_end; /* the patch being written (empty: none) */
};

/* Grows *buf (capacity *cap) to hold want bytes, keeping its contents. 0 or -ENOMEM. */
int index_bytes_grow(uint8_t **buf, size_t *cap, size_t want);
/* Chooses the splice that turns old into a cursor of new_len bytes with the fewest bytes left
 * to patch, and builds old after it into spliced (new_len bytes). */
void index_delta_splice(const uint8_t *old, size_t old_len, const uint8_t *next, size_t new_len,
                        uint8_t *spliced, struct index_delta_writer *w);
/* The next record into dst (INDEX_DELTA_RECORD_BYTES_MAX), crc and len set; 0 when done. */
size_t index_delta_writer_next(struct index_delta_writer *w, uint8_t *dst);
/* Checks a delta record's fields (len: its length). */
bool index_delta_record_valid(const uint8_t *r, uint32_t len);
/* Applies a cursor record (type 2 or 5) to g->cursor under cursor_lock; a record that does not
 * follow the one before (its base) is -DS_ECORRUPT. 0, -DS_ECORRUPT or -ENOMEM. */
int index_cursor_record_apply(struct index *g, const struct index_record *record);
/* Whether a record ends an apply. */
static inline bool index_record_commits(uint8_t type, const uint8_t *r)
{
    return type == INDEX_RECORD_CURSOR ||
           (type == INDEX_RECORD_CURSOR_DELTA && (r[9] & INDEX_DELTA_MORE) == 0);
}

#endif /* DS_INDEX_INDEX_PRIVATE_H */
