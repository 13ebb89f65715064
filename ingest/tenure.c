/*
 * Tenure history, release point, node id and latest runs (tenure.h).
 *
 * The history rides in the consumer group's offset metadata, which any client of the group can
 * write, so its parser is strict: one spelling per history (fixed-width ids, decimal offsets
 * without sign or leading zeros), and anything else is no history with a reason, never a guess.
 * A guessed history could name a wrong release point, and a release is data given up.
 *
 * The release point works on the entries newer than the node's own latest one: those are the
 * holders that started after the node's run, and the oldest of them started reading where the
 * node's stored events begin to be held twice. A node absent from the history (its entry
 * dropped after TENURE_ENTRIES_MAX handovers, or never there) takes the oldest entry kept.
 *
 * NODE_ID and TENURES are small files replaced whole by temp file + fdatasync + rename +
 * directory fsync (ds_write_file_atomic), so a crash leaves the old or the new file. TENURES
 * ends with a CRC-32C line: a torn or edited file is refused by name instead of read as fewer
 * runs (a run missing from the claims would hide an overlap from the router). Rejected: a
 * binary TENURES (the file is read by people during an incident; text costs nothing here).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "ingest/tenure.h"

#define TENURE_RUNS_HEADER "dayshard tenures 1\n"
#define TENURE_RUNS_HEADER_PREFIX "dayshard tenures "
#define TENURE_CRC_LINE_BYTES (sizeof("crc32c 00000000\n") - 1u)
/* The longest TENURES text: the header, a line of up to 4 + 1 + 19 + 1 bytes per partition,
 * the CRC line. */
#define TENURE_RUNS_BYTES_MAX                                                                      \
    (sizeof(TENURE_RUNS_HEADER) - 1u + TENURE_PARTITIONS_MAX * 25u + TENURE_CRC_LINE_BYTES + 1u)
#define TENURE_NODE_ID_BYTES 17u /* 16 hex digits and a newline */

_Static_assert(TENURE_PARTITIONS_MAX <= 9999u, "a partition is at most 4 digits in TENURES");
_Static_assert(TENURE_TEXT_BYTES_MAX == 602u, "the history's bound as the header states it");

/* ---- small strict parsers ------------------------------------------------------------------ */

/* A decimal offset: digits only, no leading zero but "0", at most INT64_MAX. Returns the bytes
 * used (0: none, or not an offset). */
static size_t offset_parse(const char *s, size_t len, int64_t *out)
{
    size_t n = 0;
    uint64_t v = 0;
    while (n < len && s[n] >= '0' && s[n] <= '9') {
        if (n > 0 && v == 0) {
            return 0; /* a leading zero */
        }
        uint64_t digit = (uint64_t)(s[n] - '0');
        if (v > ((uint64_t)INT64_MAX - digit) / 10u) {
            return 0;
        }
        v = v * 10u + digit;
        n++;
    }
    *out = (int64_t)v;
    return n;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Exactly 16 lowercase hex digits of a nonzero value. */
static bool node_hex_parse(const char *s, size_t len, uint64_t *out)
{
    if (len < 16) {
        return false;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < 16; i++) {
        int d = hex_digit(s[i]);
        if (d < 0) {
            return false;
        }
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return v != 0;
}

/* ---- the history --------------------------------------------------------------------------- */

/* One entry at s[0..len): returns the bytes it used, or 0 with *reason. */
static size_t entry_parse(const char *s, size_t len, struct tenure_entry *e, const char **reason)
{
    if (!node_hex_parse(s, len, &e->node)) {
        *reason = "a node id is not 16 lowercase hex digits of a nonzero id";
        return 0;
    }
    if (len < 17 || s[16] != '@') {
        *reason = "a node id is not followed by '@'";
        return 0;
    }
    size_t n = offset_parse(s + 17, len - 17, &e->start);
    if (n == 0) {
        *reason = "a start offset is not a decimal offset";
        return 0;
    }
    return 17 + n;
}

static int history_parse(const char *text, size_t len, struct tenure_history *h,
                         const char **reason)
{
    size_t prefix = sizeof(TENURE_PREFIX) - 1u;
    if (len < prefix || memcmp(text, TENURE_PREFIX, prefix) != 0) {
        *reason = "not a tenure history (another client's metadata?)";
        return -EINVAL;
    }
    size_t at = prefix;
    while (at < len) {
        if (h->count == TENURE_ENTRIES_MAX) {
            *reason = "more entries than a history keeps";
            return -EINVAL;
        }
        if (h->count > 0) {
            if (text[at] != ',') {
                *reason = "an entry is not followed by ',' or the end";
                return -EINVAL;
            }
            at++;
        }
        size_t n = entry_parse(text + at, len - at, &h->entries[h->count], reason);
        if (n == 0) {
            return -EINVAL;
        }
        ASSERT(n <= len - at);
        at += n;
        h->count++;
    }
    return 0;
}

int tenure_parse(const char *text, size_t len, struct tenure_history *h, const char **reason)
{
    ASSERT(h != NULL);
    ASSERT(reason != NULL);
    *h = (struct tenure_history){0};
    *reason = NULL;
    if (len == 0) {
        return 0;
    }
    ASSERT(text != NULL);
    int rc = history_parse(text, len, h, reason);
    if (rc != 0) {
        ASSERT(*reason != NULL);
        *h = (struct tenure_history){0};
    }
    return rc;
}

int64_t tenure_format(const struct tenure_history *h, char *dst, size_t cap)
{
    ASSERT(h->count <= TENURE_ENTRIES_MAX);
    ASSERT(cap > 0);
    size_t len = 0;
    int n = snprintf(dst, cap, "%s", TENURE_PREFIX);
    for (uint32_t i = 0; n >= 0 && (size_t)n < cap - len && i < h->count; i++) {
        len += (size_t)n;
        const struct tenure_entry *e = &h->entries[i];
        ASSERT(e->node != 0);
        ASSERT(e->start >= 0);
        n = snprintf(dst + len, cap - len, "%s%016" PRIx64 "@%" PRId64, i > 0 ? "," : "", e->node,
                     e->start);
    }
    if (n < 0 || (size_t)n >= cap - len) {
        dst[0] = '\0';
        return -ENOSPC;
    }
    len += (size_t)n;
    ASSERT(len < TENURE_TEXT_BYTES_MAX);
    return (int64_t)len;
}

void tenure_prepend(struct tenure_history *h, uint64_t node, int64_t start)
{
    ASSERT(node != 0);
    ASSERT(start >= 0);
    ASSERT(h->count <= TENURE_ENTRIES_MAX);
    uint32_t kept = h->count < TENURE_ENTRIES_MAX ? h->count : TENURE_ENTRIES_MAX - 1u;
    memmove(&h->entries[1], &h->entries[0], kept * sizeof(h->entries[0]));
    h->entries[0] = (struct tenure_entry){.node = node, .start = start};
    h->count = kept + 1u;
}

bool tenure_release_point(const struct tenure_history *h, uint64_t node, int64_t next, int64_t *lo)
{
    ASSERT(h->count <= TENURE_ENTRIES_MAX);
    ASSERT(node != 0);
    uint32_t own = h->count; /* the index of the node's latest entry; count: none */
    for (uint32_t i = 0; i < h->count && own == h->count; i++) {
        own = h->entries[i].node == node ? i : own;
    }
    if (own == 0) {
        return false; /* no history, or the node is its newest holder */
    }
    const struct tenure_entry *t = &h->entries[own - 1u];
    if (next <= t->start) {
        return false;
    }
    *lo = t->start;
    return true;
}

/* ---- NODE_ID ------------------------------------------------------------------------------- */

int tenure_node_id_parse(const char *text, size_t len, uint64_t *id)
{
    uint64_t v = 0;
    if (len != TENURE_NODE_ID_BYTES || !node_hex_parse(text, len, &v) || text[16] != '\n') {
        return -DS_ECORRUPT;
    }
    *id = v;
    return 0;
}

static int node_id_create(const char *path, uint64_t *id)
{
    uint64_t v = 0;
    while (v == 0) {
        ssize_t n = getrandom(&v, sizeof(v), 0);
        if (n < 0 && errno != EINTR) {
            int err = -errno;
            ds_log_error("%s: getrandom for a new node id: %s", path, ds_strerror(err));
            return err;
        }
        v = n == (ssize_t)sizeof(v) ? v : 0;
    }
    char text[TENURE_NODE_ID_BYTES + 1];
    snprintf(text, sizeof(text), "%016" PRIx64 "\n", v);
    int rc = ds_write_file_atomic(path, text, TENURE_NODE_ID_BYTES);
    if (rc != 0) {
        ds_log_error("%s: cannot write the new node id: %s", path, ds_strerror(rc));
        return rc;
    }
    *id = v;
    return 0;
}

int tenure_node_id_load(const char *dir, uint64_t *id)
{
    char path[DS_PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/NODE_ID", dir) >= (int)sizeof(path)) {
        return -ENAMETOOLONG;
    }
    char *text = NULL;
    size_t len = 0;
    int rc = ds_read_file(path, 64, &text, &len);
    if (rc == -ENOENT) {
        return node_id_create(path, id);
    }
    if (rc == 0) {
        rc = tenure_node_id_parse(text, len, id);
        free(text);
    } else if (rc == -EFBIG) {
        rc = -DS_ECORRUPT;
    }
    if (rc == -DS_ECORRUPT) {
        ds_log_error("%s: damaged: not 16 lowercase hex digits of a nonzero node id and a "
                     "newline (restore the file, or remove it to give this node a new id)",
                     path);
    } else if (rc != 0) {
        ds_log_error("%s: cannot read the node id: %s", path, ds_strerror(rc));
    }
    return rc;
}

/* ---- TENURES ------------------------------------------------------------------------------- */

static bool runs_bit(const uint64_t *bits, uint32_t p)
{
    return (bits[p / 64] >> (p % 64)) & 1u;
}

void tenure_runs_set(struct tenure_runs *runs, uint32_t partition, int64_t from)
{
    ASSERT(partition < TENURE_PARTITIONS_MAX);
    ASSERT(from >= 0);
    runs->known[partition / 64] |= 1ull << (partition % 64);
    runs->from[partition] = from;
}

void tenure_runs_lower(struct tenure_runs *runs, uint32_t partition, int64_t lo)
{
    ASSERT(partition < TENURE_PARTITIONS_MAX);
    ASSERT(lo >= 0);
    if (runs_bit(runs->known, partition) && lo < runs->from[partition]) {
        runs->from[partition] = lo;
    }
}

bool tenure_runs_get(const struct tenure_runs *runs, uint32_t partition, int64_t *from)
{
    ASSERT(partition < TENURE_PARTITIONS_MAX);
    if (!runs_bit(runs->known, partition)) {
        return false;
    }
    *from = runs->from[partition];
    return true;
}

int64_t tenure_runs_format(const struct tenure_runs *runs, char *dst, size_t cap)
{
    ASSERT(cap > 0);
    size_t len = 0;
    int n = snprintf(dst, cap, "%s", TENURE_RUNS_HEADER);
    for (uint32_t p = 0; n >= 0 && (size_t)n < cap - len && p < TENURE_PARTITIONS_MAX; p++) {
        len += (size_t)n;
        n = 0;
        if (runs_bit(runs->known, p)) {
            ASSERT(runs->from[p] >= 0);
            n = snprintf(dst + len, cap - len, "%u %" PRId64 "\n", p, runs->from[p]);
        }
    }
    if (n >= 0 && (size_t)n < cap - len) {
        len += (size_t)n;
        uint32_t crc = ds_crc32c(0, dst, len);
        n = snprintf(dst + len, cap - len, "crc32c %08" PRIx32 "\n", crc);
    }
    if (n < 0 || (size_t)n >= cap - len) {
        dst[0] = '\0';
        return -ENOSPC;
    }
    len += (size_t)n;
    ASSERT(len < TENURE_RUNS_BYTES_MAX);
    return (int64_t)len;
}

/* The run lines of text[0..len) (after the header, before the CRC line). */
static int runs_lines_parse(const char *text, size_t len, struct tenure_runs *runs)
{
    size_t at = 0;
    int64_t last = -1;
    while (at < len) {
        int64_t p = 0;
        int64_t from = 0;
        size_t n = offset_parse(text + at, len - at, &p);
        if (n == 0 || p <= last || p >= (int64_t)TENURE_PARTITIONS_MAX || at + n >= len ||
            text[at + n] != ' ') {
            return -DS_ECORRUPT;
        }
        at += n + 1;
        n = offset_parse(text + at, len - at, &from);
        if (n == 0 || at + n >= len || text[at + n] != '\n') {
            return -DS_ECORRUPT;
        }
        at += n + 1;
        tenure_runs_set(runs, (uint32_t)p, from);
        last = p;
    }
    return 0;
}

int tenure_runs_parse(const char *text, size_t len, struct tenure_runs *runs)
{
    /* The version line whole: a cut inside it is damage, another version is not. */
    size_t prefix = sizeof(TENURE_RUNS_HEADER_PREFIX) - 1u;
    size_t header = sizeof(TENURE_RUNS_HEADER) - 1u;
    const char *eol = memchr(text, '\n', len);
    if (eol == NULL || (size_t)(eol - text) < prefix ||
        memcmp(text, TENURE_RUNS_HEADER_PREFIX, prefix) != 0) {
        return -DS_ECORRUPT;
    }
    if ((size_t)(eol - text) + 1u != header || memcmp(text, TENURE_RUNS_HEADER, header) != 0) {
        return -DS_EFORMAT;
    }
    if (len < header + TENURE_CRC_LINE_BYTES) {
        return -DS_ECORRUPT;
    }
    size_t body = len - TENURE_CRC_LINE_BYTES;
    const char *line = text + body;
    uint32_t crc = 0;
    for (size_t i = 0; i < 8; i++) {
        int d = hex_digit(line[7 + i]);
        if (d < 0) {
            return -DS_ECORRUPT;
        }
        crc = crc << 4 | (uint32_t)d;
    }
    if (memcmp(line, "crc32c ", 7) != 0 || line[15] != '\n' || crc != ds_crc32c(0, text, body)) {
        return -DS_ECORRUPT;
    }
    struct tenure_runs *parsed = calloc(1, sizeof(*parsed));
    if (parsed == NULL) {
        return -ENOMEM;
    }
    int rc = runs_lines_parse(text + header, body - header, parsed);
    if (rc == 0) {
        *runs = *parsed;
    }
    free(parsed);
    return rc;
}

int tenure_runs_load(const char *dir, struct tenure_runs *runs)
{
    char path[DS_PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/TENURES", dir) >= (int)sizeof(path)) {
        return -ENAMETOOLONG;
    }
    char *text = NULL;
    size_t len = 0;
    int rc = ds_read_file(path, TENURE_RUNS_BYTES_MAX, &text, &len);
    if (rc == -ENOENT) {
        memset(runs, 0, sizeof(*runs));
        return 0;
    }
    if (rc == 0) {
        rc = tenure_runs_parse(text, len, runs);
        free(text);
    } else if (rc == -EFBIG) {
        rc = -DS_ECORRUPT;
    }
    if (rc == -DS_ECORRUPT) {
        ds_log_error("%s: damaged (its checksum or a line is wrong): the node cannot say which "
                     "runs of its partitions it holds; restore the file or repair the directory",
                     path);
    } else if (rc == -DS_EFORMAT) {
        ds_log_error("%s: a version this build does not read", path);
    } else if (rc != 0) {
        ds_log_error("%s: cannot read: %s", path, ds_strerror(rc));
    }
    return rc;
}

int tenure_runs_save(const char *dir, const struct tenure_runs *runs)
{
    char path[DS_PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/TENURES", dir) >= (int)sizeof(path)) {
        return -ENAMETOOLONG;
    }
    char *text = malloc(TENURE_RUNS_BYTES_MAX);
    if (text == NULL) {
        return -ENOMEM;
    }
    int64_t len = tenure_runs_format(runs, text, TENURE_RUNS_BYTES_MAX);
    ASSERT(len > 0);
    int rc = ds_write_file_atomic(path, text, (size_t)len);
    free(text);
    if (rc != 0) {
        ds_log_error("%s: cannot write: %s", path, ds_strerror(rc));
    }
    return rc;
}
