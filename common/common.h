/*
 * common: the small helpers every subsystem shares and that depend on nothing else.
 *
 * - assertions that stay on in release builds (ASSERT) and costly ones for debug (DEBUG_ASSERT);
 * - error codes: negated errno values plus project codes from DS_ERR_BASE up, named by
 *   ds_strerror();
 * - CRC32C (Castagnoli), hardware-accelerated where the CPU has SSE4.2;
 * - a monotonic/real clock, civil-date helpers (days since the epoch <-> YYYY-MM-DD);
 * - one-line logging to stderr;
 * - a bounded single-producer/single-consumer ring of pointers for handing work between threads.
 *
 * Every function here is thread-safe unless it takes an object, in which case the object's
 * comment says who may call it.
 */
#ifndef DS_COMMON_H
#define DS_COMMON_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

/* ---- attributes ---------------------------------------------------------------------------- */

#define DS_MUST_USE __attribute__((warn_unused_result))
#define DS_NORETURN __attribute__((noreturn))
#define DS_PRINTF(fmt_index, args_index) __attribute__((format(printf, fmt_index, args_index)))
#define DS_LIKELY(c) __builtin_expect(!!(c), 1)
#define DS_UNLIKELY(c) __builtin_expect(!!(c), 0)
#define DS_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- assertions ---------------------------------------------------------------------------- */

DS_NORETURN void ds_assert_fail(const char *expr, const char *file, int line);

/* Stays on in release builds: a broken invariant must stop the process before it writes. */
#define ASSERT(c)                                                                                  \
    do {                                                                                           \
        if (DS_UNLIKELY(!(c))) {                                                                   \
            ds_assert_fail(#c, __FILE__, __LINE__);                                                \
        }                                                                                          \
    } while (0)

#ifdef NDEBUG
#define DEBUG_ASSERT(c) ((void)0)
#else
#define DEBUG_ASSERT(c) ASSERT(c)
#endif

/* ---- errors -------------------------------------------------------------------------------- */

/* Project error codes, clear of the kernel's errno range; functions return them negated. */
enum ds_err {
    DS_ERR_BASE = 4096,
    DS_ECORRUPT = 4096, /* a stored structure failed its checksum or a sanity check */
    DS_EZSTD = 4097,    /* zstd refused to compress or decompress */
    DS_EKAFKA = 4098,   /* librdkafka reported an error */
    DS_EFORMAT = 4099,  /* a file has an unknown format version */
    DS_ELIMIT = 4100,   /* a configured hard limit would be exceeded */
    DS_EUSAGE = 4101,   /* a caller-visible argument is invalid (bad flag, bad date) */
    DS_ELOCKED = 4102,  /* another writer holds the data directory */
    DS_ENOSTORE = 4103, /* a reader was pointed at a directory that holds no dayshard store */
    DS_ERR_END = 4104,
};

/* Names a negative error code (errno or project); never returns NULL. */
const char *ds_strerror(int err);

/* ---- limits shared by every subsystem -------------------------------------------------------- */

/* A path inside a data directory: data dirs are chosen by operators, 4 KiB is the Linux PATH_MAX.
 */
#define DS_PATH_MAX 4096

/* ---- CRC32C -------------------------------------------------------------------------------- */

/* Extends crc (0 to start) over len bytes of data; the result is the finished CRC32C. */
uint32_t ds_crc32c(uint32_t crc, const void *data, size_t len);
/* The portable table-driven implementation, exposed so tests can use it as the oracle. */
uint32_t ds_crc32c_sw(uint32_t crc, const void *data, size_t len);

/* ---- time and dates ------------------------------------------------------------------------ */

/* Nanoseconds from CLOCK_MONOTONIC. */
uint64_t ds_clock_ns(void);
/* Milliseconds since the Unix epoch from CLOCK_REALTIME. */
int64_t ds_clock_realtime_ms(void);
/* A bounded wait's test: true when the wait is over (the caller's context says why). */
typedef bool (*ds_wait_fn)(void *user);
/* Calls done(user) until it returns true or ds_clock_ns() has reached deadline_ns, sleeping
 * step_ns between two calls (never while done runs, so it may take locks). done runs at least
 * once. Returns true when done said so, false when the deadline came first. */
bool ds_wait_until(ds_wait_fn done, void *user, uint64_t deadline_ns, uint64_t step_ns);

/* Little-endian fixed-width fields of the formats that are written byte by byte (the index
 * builder's cursor, the orders-by-id log, the manifest's magic, 8-byte words of CRC32C and the
 * JSON scanner). On a little-endian host a field is the host's own bytes, so it is copied with
 * memcpy: one load or store at any optimisation level, and cheap in the compiler's inlining
 * estimate (the JSON scanner's hot loops stay inlined, which they do not with the shifts
 * written out). Other hosts assemble the bytes. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define DS_HOST_LITTLE_ENDIAN 1
#else
#define DS_HOST_LITTLE_ENDIAN 0
#endif

static inline void ds_put_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void ds_put_le32(uint8_t *p, uint32_t v)
{
#if DS_HOST_LITTLE_ENDIAN
    memcpy(p, &v, sizeof(v));
#else
    for (unsigned i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
#endif
}

static inline void ds_put_le64(uint8_t *p, uint64_t v)
{
#if DS_HOST_LITTLE_ENDIAN
    memcpy(p, &v, sizeof(v));
#else
    for (unsigned i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
#endif
}

static inline uint16_t ds_get_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (unsigned)p[1] << 8);
}

static inline uint32_t ds_get_le32(const uint8_t *p)
{
    uint32_t v = 0;
#if DS_HOST_LITTLE_ENDIAN
    memcpy(&v, p, sizeof(v));
#else
    for (unsigned i = 0; i < 4; i++) {
        v |= (uint32_t)p[i] << (8 * i);
    }
#endif
    return v;
}

static inline uint64_t ds_get_le64(const uint8_t *p)
{
    uint64_t v = 0;
#if DS_HOST_LITTLE_ENDIAN
    memcpy(&v, p, sizeof(v));
#else
    for (unsigned i = 0; i < 8; i++) {
        v |= (uint64_t)p[i] << (8 * i);
    }
#endif
    return v;
}

/* splitmix64's finaliser, for hashing: every input bit moves about half the output bits. */
static inline uint64_t ds_mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Days since 1970-01-01 of a proleptic Gregorian date; the date must be valid. */
int32_t ds_days_from_civil(int32_t year, uint32_t month, uint32_t day);
/* The inverse of ds_days_from_civil. */
void ds_civil_from_days(int32_t days, int32_t *year, uint32_t *month, uint32_t *day);
/* True when year-month-day is a real calendar date (leap years included). */
bool ds_date_valid(int32_t year, uint32_t month, uint32_t day);
/* Parses exactly "YYYY-MM-DD" (len bytes, no terminator needed) into days since the epoch.
 * Returns 0, or -DS_EUSAGE when the text is not a valid date. */
DS_MUST_USE int ds_date_parse(const char *text, size_t len, int32_t *days_out);
/* Writes "YYYY-MM-DD" and a NUL into dst (at least DS_DATE_TEXT_SIZE bytes). */
#define DS_DATE_TEXT_SIZE 11
void ds_date_format(int32_t days, char *dst);
/* Milliseconds in a UTC day (no leap seconds in epoch time). */
#define DS_DAY_MS 86400000LL
/* Floor division of epoch milliseconds into days since the epoch. */
int32_t ds_day_from_ms(int64_t ts_ms);
/* Writes "YYYY-MM-DDTHH:MM:SS.mmmZ" (UTC) and a NUL into dst (DS_TS_TEXT_SIZE bytes); ts_ms
 * must lie in DS_TS_MS_MIN..DS_TS_MS_MAX. */
#define DS_TS_TEXT_SIZE 25
void ds_ts_format(int64_t ts_ms, char *dst);

/* ---- fixed-point amounts ------------------------------------------------------------------- */

/* Amounts are kept as exact integers of 1/10000 (four decimal places). Sums use 128 bits so no
 * number of events can overflow them. */
#define DS_AMOUNT_SCALE 10000
__extension__ typedef __int128 ds_i128;
/* Formats a sum of amount units as "-123.4500" with exactly four decimals; dst needs
 * DS_AMOUNT_TEXT_SIZE bytes. Returns the length written (without the NUL). */
#define DS_AMOUNT_TEXT_SIZE 48
size_t ds_amount_format(ds_i128 units, char *dst);

/* ---- varints ------------------------------------------------------------------------------ */

/* LEB128 varints: 7 bits a byte, the low group first, the top bit set on every byte but the
 * last; signed values go through zigzag first (0, -1, 1, -2 ... become 0, 1, 2, 3 ...) so small
 * magnitudes stay short. Blocks, the orders-by-id log and canonical items use this one codec,
 * so one rule decides what a stored varint is:
 *   - truncated input (it ends on a byte with the continuation bit) is bad;
 *   - a value past 64 bits is bad: a 10th byte other than 0 or 1 (any bit but bit 0 set,
 *     the continuation bit included).
 * Longer-than-needed encodings of a value that fits (0x80 0x00 for 0) are accepted: the rule
 * is about what a decoder can represent, and every writer's encoding (always the shortest)
 * passes it. Defined here, inline, because block decoding reads several varints per event and
 * a call per varint would show in it. */
#define DS_VARINT_BYTES_MAX 10u

static inline uint64_t ds_zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t ds_unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1u);
}

/* Writes v at dst, which has room for ds_varint_bytes(v) bytes (DS_VARINT_BYTES_MAX always
 * suffices); returns the bytes written (1..10, always the shortest encoding). */
static inline size_t ds_varint_put(uint8_t *dst, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80u) {
        dst[n++] = (uint8_t)(v | 0x80u);
        v >>= 7;
    }
    dst[n++] = (uint8_t)v;
    return n;
}

/* The bytes ds_varint_put writes for v (1..10). */
static inline size_t ds_varint_bytes(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80u) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Reads one varint from src[0..len): returns the bytes it took (1..10) and sets *v, or returns
 * 0 for bad input (the rule above), leaving *v untouched. The (src, len, *at) style of a caller
 * is src + *at, len - *at, then *at += the result. */
static inline size_t ds_varint_get(const uint8_t *src, size_t len, uint64_t *v)
{
    size_t limit = len < DS_VARINT_BYTES_MAX ? len : DS_VARINT_BYTES_MAX;
    uint64_t result = 0;
    for (size_t i = 0; i < limit; i++) {
        uint8_t byte = src[i];
        if (i == DS_VARINT_BYTES_MAX - 1u && byte > 1u) {
            return 0;
        }
        result |= (uint64_t)(byte & 0x7Fu) << (7u * i);
        if ((byte & 0x80u) == 0) {
            *v = result;
            return i + 1u;
        }
    }
    return 0;
}

/* The cursor form of ds_varint_get: reads from [*p, end) and moves *p past the varint. False
 * for bad input, with *p and *v untouched. */
static inline bool ds_varint_next(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    size_t n = ds_varint_get(*p, (size_t)(end - *p), v);
    *p += n;
    return n != 0;
}

/* ---- logging ------------------------------------------------------------------------------- */

enum ds_log_level { DS_LOG_ERROR = 0, DS_LOG_WARN = 1, DS_LOG_INFO = 2, DS_LOG_DEBUG = 3 };
/* The threshold is read from the environment on every call (DS_LOG=error|warn|info|debug);
 * messages above it are dropped. One line per call, written with a single write(2):
 * "dayshard: LEVEL: message", or with DS_LOG_FORMAT=json one JSON object
 * {"ts":"2026-12-02T09:00:00.123Z","level":"warn","msg":"..."} (UTC, milliseconds; the message
 * escaped, invalid UTF-8 as U+FFFD). Set both before any thread starts. */
void ds_log(enum ds_log_level level, const char *fmt, ...) DS_PRINTF(2, 3);
#define ds_log_error(...) ds_log(DS_LOG_ERROR, __VA_ARGS__)
#define ds_log_warn(...) ds_log(DS_LOG_WARN, __VA_ARGS__)
#define ds_log_info(...) ds_log(DS_LOG_INFO, __VA_ARGS__)
#define ds_log_debug(...) ds_log(DS_LOG_DEBUG, __VA_ARGS__)

/* ---- the order event, the vocabulary every layer passes ----------------------------------- */

/* docs/EVENTS.md: ids are integers 1..2^63-1 or strings of 1..64 bytes; status 0..32 bytes. */
#define DS_ID_BYTES_MAX 64
#define DS_STATUS_BYTES_MAX 32

/* An order or customer id in the type it arrived in; the type is kept to the query output. */
struct ds_id {
    bool is_string;
    uint8_t len;                /* bytes in text when is_string, else 0 */
    int64_t value;              /* the integer id when !is_string, else 0 */
    char text[DS_ID_BYTES_MAX]; /* string bytes (not NUL-terminated) when is_string */
};

/* Whether two ids are the same id: the same kind, and the same integer or the same bytes (5 and
 * "5" are two ids). */
static inline bool ds_id_equal(const struct ds_id *a, const struct ds_id *b)
{
    if (a->is_string != b->is_string) {
        return false;
    }
    if (!a->is_string) {
        return a->value == b->value;
    }
    return a->len == b->len && memcmp(a->text, b->text, a->len) == 0;
}

/* docs/EVENTS.md: an event's optional line items. At most 100 of them, at most 8 KiB of
 * JSON text for the whole `items` value; a product is 1..64 bytes of UTF-8 (like an id), a
 * quantity 1..2^31-1 (see ingest/decode.c for why). */
#define DS_ITEMS_COUNT_MAX 100u
#define DS_ITEMS_JSON_BYTES_MAX 8192u
#define DS_ITEM_PRODUCT_BYTES_MAX 64u
#define DS_ITEM_QUANTITY_MAX 2147483647u
/* The canonical encoding of an `items` value, as events carry it and blocks store it:
 *   varint count (0..100), then per item: u8 product length (1..64), the product bytes, varint
 *   quantity (1..2^31-1, at most 5 bytes); varints are LEB128 (7 bits a byte, low first).
 * One byte for the count plus 100 items of 1 + 64 + 5 bytes. */
#define DS_ITEMS_BYTES_MAX (1u + DS_ITEMS_COUNT_MAX * (1u + DS_ITEM_PRODUCT_BYTES_MAX + 5u))

/* One decoded order event. Every field is always set: defaults are applied by the decoder. */
struct ds_event {
    struct ds_id order_id;
    struct ds_id customer_id;
    int64_t ts_ms;        /* UTC epoch milliseconds */
    int64_t amount_units; /* amount in 1/DS_AMOUNT_SCALE units, exact */
    uint8_t status_len;
    char status[DS_STATUS_BYTES_MAX];
    bool has_version;
    /* A retraction row (the orders model): it cancels the stored version with these same fields, so
     * counts and sums subtract it. Set only by the writer of the orders model (false from the
     * decoder); block reads set it for retraction rows. */
    bool retract;
    int64_t version; /* 0..2^63-1 when has_version, else 0 */
    /* The canonical items (encoding above), or NULL with items_bytes 0 when the event has no
     * `items` field ([] is the one byte 0). Borrowed: it points into memory of whoever filled
     * the event (the decoder's struct ingest_decoder, a block codec's scratch) and stays valid
     * until that owner fills the next event. Copy it to keep it. */
    uint16_t items_bytes;
    const uint8_t *items;
};

/* Where an event came from, so storage can record source positions: a Kafka partition and
 * offset, or for file ingest partition DS_SOURCE_FILE and the line number. */
#define DS_SOURCE_FILE (-1)
/* Not a source of events: the committed length of the dead-letter file, kept in the same
 * table so that it commits atomically with the data (see storage_deadletter_commit). */
#define DS_SOURCE_DEADLETTER (-2)
struct ds_source {
    int32_t partition;
    int64_t offset;
};

/* Valid epoch-millisecond range of an event: 1970-01-01T00:00:00Z .. 9999-12-31T23:59:59.999Z.
 * Earlier or later timestamps are rejected as bad events; days therefore fit in 0..2932896. */
#define DS_TS_MS_MIN 0LL
#define DS_TS_MS_MAX 253402300799999LL
#define DS_DAY_MAX 2932896

/* ---- bounded SPSC ring --------------------------------------------------------------------- */

/* A single-producer single-consumer ring of pointers with a capacity fixed at init (a power of
 * two). One thread pushes, one thread pops; neither blocks: a full ring returns -EAGAIN and the
 * producer must push back. Waiting is the caller's business (see ds_ring_wait_*). */
struct ds_ring {
    /* private */
    _Alignas(64) atomic_size_t head; /* next slot to pop, written by the consumer */
    _Alignas(64) atomic_size_t tail; /* next slot to push, written by the producer */
    size_t mask;
    void **slots;
};

/* Capacity must be a power of two between 2 and DS_RING_CAPACITY_MAX. */
#define DS_RING_CAPACITY_MAX (1u << 20)
DS_MUST_USE int ds_ring_init(struct ds_ring *ring, size_t capacity);
void ds_ring_deinit(struct ds_ring *ring);
/* Returns 0, or -EAGAIN when full. */
DS_MUST_USE int ds_ring_push(struct ds_ring *ring, void *item);
/* Returns the oldest item, or NULL when empty. */
void *ds_ring_pop(struct ds_ring *ring);
size_t ds_ring_count(const struct ds_ring *ring);

/* ---- small helpers ------------------------------------------------------------------------- */

/* Reads a whole small file (at most size_max bytes) into a malloc'd buffer the caller frees.
 * Returns 0, -ENOENT, -EFBIG, or another negated errno. */
DS_MUST_USE int ds_read_file(const char *path, size_t size_max, char **data_out, size_t *len_out);
/* Writes a file atomically: temp file, fdatasync, rename over path, fsync of the directory. */
DS_MUST_USE int ds_write_file_atomic(const char *path, const void *data, size_t len);
/* fsync of a directory, so a rename or a creation inside it is durable. */
DS_MUST_USE int ds_fsync_dir(const char *dir);
/* mkdir -p for one path; existing directories are fine. */
DS_MUST_USE int ds_mkdir_p(const char *path);
/* rm -r of path: depth first, links removed, never followed; a path already gone is fine.
 * Returns 0 or the negated errno of the first entry that could not be removed. */
DS_MUST_USE int ds_remove_tree(const char *path);
/* pread until len bytes or the end of the file (EINTR retried); returns the bytes read or a
 * negated errno. */
DS_MUST_USE ssize_t ds_pread_full(int fd, void *dst, size_t len, uint64_t offset);
/* pwrite every byte (EINTR retried); returns 0 or a negated errno (-EIO when no progress). */
DS_MUST_USE int ds_pwrite_full(int fd, const void *src, size_t len, uint64_t offset);
/* Writes all len bytes at the file's position (retrying short writes and EINTR); 0 or -errno. */
DS_MUST_USE int ds_write_full(int fd, const void *src, size_t len);

#endif /* DS_COMMON_H */
