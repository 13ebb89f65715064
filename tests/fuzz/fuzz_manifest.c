/*
 * libFuzzer harness for the manifest replay of storage/manifest.c: the manifest file is outside
 * input after a crash (a torn tail) or a bad disk (damage anywhere).
 *
 * Input: a mode byte, then the rest.
 *   mode % 2 == 0 (raw): the rest is a whole manifest file.
 *   otherwise (structured): the rest describes up to RECORDS_MAX records (see records_take),
 *     encoded with manifest_encode after the file magic. The unmutated file must replay to
 *     exactly those records with valid_end at its end. Then the trailing bytes flip bytes of it
 *     and, when bit 1 of the mode byte is set, every record's CRC is recomputed over what its
 *     (perhaps mutated) header claims, so the fuzzer gets past the CRCs to the counts and the
 *     sequence check; bit 2 cuts the file at a fuzzer-chosen length (a torn tail).
 * Every file is replayed from a buffer of its exact length, so ASan sees a read past the end.
 *
 * Properties, any broken one aborts: manifest_replay returns 0, -DS_ECORRUPT or -DS_EFORMAT;
 * on 0, valid_end <= len and (for a non-empty file) >= the magic; every record passed to the
 * callback has a known kind, counts within STORAGE_PARTITIONS_MAX and STORAGE_SOURCES_MAX, its
 * entries inside [buf, buf + valid_end), and a sequence number above the previous record's;
 * records tile the file from the magic to valid_end. A file only cut (no byte flipped) replays
 * to the records wholly before the cut (or is refused if the cut record's own bytes hold a
 * valid record, which is indistinguishable from damage before a valid one). Where the format
 * has quarantine records (MANIFEST_QUARANTINE, fsck --repair), their skip entries are checked
 * the same way, and manifest_replay_prefix (repair's replay) must agree with manifest_replay
 * where that one accepts the file, and replay a prefix, saying it is damaged, where it refuses
 * (another version is refused by both, unless records of this format follow the magic).
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "storage/format.h"
#include "tests/fuzz/fuzz_input.h"

#define MODE_STRUCTURED 0x01u
#define MODE_FIX_CRC 0x02u
#define MODE_CUT 0x04u
#define RECORDS_MAX 8u
#define PARTS_MAX 16u
#define SOURCES_MAX 8u
#define MUTATIONS_MAX 32u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct record {
    uint32_t kind;
    uint64_t seq;
    uint32_t part_count;
    uint32_t source_count;
    struct manifest_part parts[PARTS_MAX];
    struct manifest_source sources[SOURCES_MAX];
    size_t end; /* one past its last byte in the file */
};

struct replay {
    const uint8_t *buf;
    size_t len;
    const struct record *expect; /* compared when not NULL */
    uint32_t count;              /* records seen */
    uint64_t last_seq;
    size_t at; /* where the next record must start */
};

static void check(bool ok)
{
    if (!ok) {
        abort();
    }
}

/* The bytes of the entries the callback got, checked to start right after the header at r->at
 * and to end inside the buffer; returns where the record ends. */
static size_t record_check(const struct manifest_replay_fn_args *rec, const struct replay *r)
{
    const uint8_t *start = r->buf + r->at + sizeof(struct manifest_record_header);
    const uint8_t *parts = (const uint8_t *)rec->parts;
    const uint8_t *sources = (const uint8_t *)rec->sources;
    size_t parts_bytes = (size_t)rec->part_count * sizeof(struct manifest_part);
    size_t sources_bytes = (size_t)rec->source_count * sizeof(struct manifest_source);
#ifdef MANIFEST_QUARANTINE
    if (rec->kind == MANIFEST_QUARANTINE) {
        const uint8_t *skips = (const uint8_t *)rec->skips;
        size_t skips_bytes = (size_t)rec->skip_count * sizeof(struct manifest_skip);
        check(rec->skip_count <= STORAGE_QUARANTINE_MAX);
        check(rec->part_count == 0 && rec->source_count == 0 && skips == start);
        check(skips + skips_bytes <= r->buf + r->len);
        return (size_t)(skips + skips_bytes - r->buf);
    }
    check(rec->skip_count == 0);
#endif
#ifdef MANIFEST_BASE
    check(rec->kind == MANIFEST_DELTA || rec->kind == MANIFEST_SNAPSHOT ||
          (rec->kind == MANIFEST_BASE && rec->source_count == 0));
    check(rec->part_count <= STORAGE_PARTITIONS_MAX && rec->source_count <= MANIFEST_SOURCES_MAX);
#else
    check(rec->kind == MANIFEST_DELTA || rec->kind == MANIFEST_SNAPSHOT);
    check(rec->part_count <= STORAGE_PARTITIONS_MAX && rec->source_count <= STORAGE_SOURCES_MAX);
#endif
    check(parts == start && sources == parts + parts_bytes);
    check(sources + sources_bytes <= r->buf + r->len);
    if (r->expect != NULL) {
        const struct record *e = &r->expect[r->count];
        check(rec->kind == e->kind && rec->seq == e->seq && rec->part_count == e->part_count &&
              rec->source_count == e->source_count);
        check(parts_bytes == 0 || memcmp(parts, e->parts, parts_bytes) == 0);
        check(sources_bytes == 0 || memcmp(sources, e->sources, sources_bytes) == 0);
    }
    return (size_t)(sources + sources_bytes - r->buf);
}

static int on_record(const struct manifest_replay_fn_args *rec, void *user)
{
    struct replay *r = user;
    check(r->count == 0 || rec->seq > r->last_seq);
    r->at = record_check(rec, r);
    r->last_seq = rec->seq;
    r->count++;
    return 0;
}

/* Replays buf[0..len) from an exact-length copy; returns the replay's answer. */
static int replay_run(const uint8_t *data, size_t len, const struct record *expect,
                      struct replay *r, uint64_t *valid_end)
{
    uint8_t *buf = malloc(len > 0 ? len : 1);
    check(buf != NULL);
    memcpy(buf, data, len);
    *r = (struct replay){.buf = buf, .len = len, .expect = expect, .at = sizeof(uint64_t)};
    *valid_end = UINT64_MAX;
    int rc = manifest_replay(buf, len, on_record, r, valid_end);
    check(rc == 0 || rc == -DS_ECORRUPT || rc == -DS_EFORMAT);
    if (rc == 0) {
        check(*valid_end <= len);
        check(len == 0 ? *valid_end == 0 : *valid_end >= sizeof(uint64_t));
        check(r->count == 0 ? *valid_end <= sizeof(uint64_t) : r->at == *valid_end);
    }
#ifdef MANIFEST_QUARANTINE
    /* Repair's replay of the valid prefix: the same answer where the strict replay has one,
     * the prefix where it refuses the file (but for another format version). */
    struct replay p = {.buf = buf, .len = len, .at = sizeof(uint64_t)};
    uint64_t prefix_end = UINT64_MAX;
    bool damaged = false;
    int prefix_rc = manifest_replay_prefix(buf, len, on_record, &p, &prefix_end, &damaged);
    if (rc == 0) {
        check(prefix_rc == 0 && !damaged && prefix_end == *valid_end && p.count == r->count);
    } else if (rc == -DS_EFORMAT) {
        /* Another version byte: refused, unless records of this format follow (a damaged
         * magic, which repair rewrites). */
        check(prefix_rc == rc || (prefix_rc == 0 && damaged));
    } else if (len < sizeof(uint64_t)) {
        /* A stub shorter than the magic: refused, or an empty prefix that is damaged. */
        check(prefix_rc == rc || (prefix_rc == 0 && damaged && prefix_end == 0));
    } else {
        check(prefix_rc == 0 && damaged && prefix_end <= len);
        check(p.count == 0 ? prefix_end == sizeof(uint64_t) : p.at == prefix_end);
    }
#endif
    r->buf = NULL;
    free(buf);
    return rc;
}

/* ---- structured mode ---------------------------------------------------------------------- */

/* A record: u8 kind and counts (bit 0 snapshot, bits 1..4 parts, bits 5..7 sources), u8 seq
 * step (0 repeats the previous number: the replay must refuse that), then 13 bytes per part
 * and 9 per source. */
static void record_take(struct fuzz_input *r, uint64_t *seq, struct record *rec)
{
    memset(rec, 0, sizeof(*rec));
    uint8_t head = fuzz_take_u8(r);
    rec->kind = head & 1u ? MANIFEST_SNAPSHOT : MANIFEST_DELTA;
    rec->part_count = (head >> 1) & 15u;
    rec->source_count = (head >> 5) & 7u;
    *seq += fuzz_take_u8(r);
    rec->seq = *seq;
    for (uint32_t i = 0; i < rec->part_count; i++) {
        rec->parts[i].day = (int32_t)fuzz_take_le(r, 4);
        rec->parts[i].shard = fuzz_take_u8(r);
        rec->parts[i].segment_id = (uint32_t)fuzz_take_le(r, 2);
        rec->parts[i].end = fuzz_take_le(r, 6);
    }
    for (uint32_t i = 0; i < rec->source_count; i++) {
        rec->sources[i].partition = (int32_t)(uint32_t)(fuzz_take_le(r, 4) - 8u);
        rec->sources[i].next_offset = (int64_t)fuzz_take_le(r, 5);
    }
}

static void structured_run(uint8_t mode, const uint8_t *data, size_t size)
{
    struct fuzz_input r = {data, data + size};
    static struct record records[RECORDS_MAX]; /* ~4 KB: off the stack */
    uint32_t count = fuzz_take_u8(&r) % (RECORDS_MAX + 1u);
    size_t capacity =
        sizeof(uint64_t) + RECORDS_MAX * manifest_record_bound(PARTS_MAX, SOURCES_MAX);
    uint8_t *file = malloc(capacity);
    check(file != NULL);
    uint64_t magic = MANIFEST_FILE_MAGIC;
    memcpy(file, &magic, sizeof(magic));
    size_t len = sizeof(magic);
    uint64_t seq = fuzz_take_le(&r, 1) << 56; /* near the top of the range too */
    bool seq_increasing = true;
    for (uint32_t i = 0; i < count; i++) {
        uint64_t before = seq;
        record_take(&r, &seq, &records[i]);
        seq_increasing = seq_increasing && (i == 0 || seq > before);
        int64_t n = manifest_encode(records[i].kind, records[i].seq, records[i].parts,
                                    records[i].part_count, records[i].sources,
                                    records[i].source_count, file + len, capacity - len);
        check(n == (int64_t)manifest_record_bound(records[i].part_count, records[i].source_count));
        len += (size_t)n;
        records[i].end = len;
    }

    struct replay replay;
    uint64_t valid_end = 0;
    int rc = replay_run(file, len, seq_increasing ? records : NULL, &replay, &valid_end);
    check(seq_increasing ? rc == 0 && valid_end == len && replay.count == count
                         : rc == -DS_ECORRUPT);

    if (mode & MODE_CUT) {
        size_t cut = (size_t)fuzz_take_le(&r, 2) % (len + 1u);
        rc = replay_run(file, cut, seq_increasing ? records : NULL, &replay, &valid_end);
        if (seq_increasing && cut >= sizeof(magic) && rc == 0) {
            size_t whole = sizeof(magic);
            for (uint32_t i = 0; i < count && records[i].end <= cut; i++) {
                whole = records[i].end;
            }
            check(valid_end == whole);
        }
    }

    uint32_t flips = 0;
    while (r.p + 3 <= r.end && flips < MUTATIONS_MAX && len > 0) {
        size_t at = fuzz_take_u8(&r);
        at |= (size_t)fuzz_take_u8(&r) << 8;
        file[at % len] ^= fuzz_take_u8(&r);
        flips++;
    }
    if (mode & MODE_FIX_CRC) {
        /* Walk the records as their headers claim and recompute each CRC that fits. */
        size_t at = sizeof(magic);
        while (at + sizeof(struct manifest_record_header) <= len) {
            struct manifest_record_header h;
            memcpy(&h, file + at, sizeof(h));
            size_t body = h.body_bytes;
            if (body > len - at - sizeof(h)) {
                break;
            }
            uint32_t crc = ds_crc32c(0, file + at + offsetof(struct manifest_record_header, kind),
                                     sizeof(h) - offsetof(struct manifest_record_header, kind));
            h.body_crc = ds_crc32c(crc, file + at + sizeof(h), body);
            memcpy(file + at, &h, sizeof(h));
            at += sizeof(h) + body;
        }
    }
    (void)replay_run(file, len, NULL, &replay, &valid_end);
    free(file);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    if (data[0] & MODE_STRUCTURED) {
        structured_run(data[0], data + 1, size - 1);
    } else {
        struct replay replay;
        uint64_t valid_end = 0;
        (void)replay_run(data + 1, size - 1, NULL, &replay, &valid_end);
    }
    return 0;
}
