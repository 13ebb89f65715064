/*
 * DIR/quarantine/: the copies fsck --repair makes before it takes anything out of a store
 * (quarantine.h has the record format). Repair never deletes acknowledged bytes: every copy
 * and its record are written to a temporary name, synced, renamed into place and the directory
 * synced, all before the MANIFEST that skips the range is written.
 *
 * Names are "<date>.<shard>.<segment>.<offset>" (e.g. 2026-01-21.2.00000001.4096): a second
 * repair of the same range (it cannot happen once skipped, but a repair interrupted before its
 * MANIFEST was written runs again) writes the same names over with the same bytes.
 *
 * Rejected: moving the bytes by punching them out of the segment only (fallocate) or renaming
 * segment files: a damaged block sits between intact ones, and the only record of what was
 * there would be gone. Plain system calls, not struct storage_io: this runs once per repair,
 * outside the commit path the fault-injecting backend exists for.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage/quarantine.h"

#define COPY_CHUNK_BYTES (1024u * 1024u)
#define RECORD_BYTES_MAX 2048u

static void quarantine_path(const char *dir, const char *name, char *dst)
{
    int n = snprintf(dst, DS_PATH_MAX, "%s/quarantine/%s", dir, name);
    ASSERT(n > 0 && n < DS_PATH_MAX);
}

int quarantine_prepare(const char *dir)
{
    char path[DS_PATH_MAX];
    quarantine_path(dir, "", path);
    int rc = ds_mkdir_p(path);
    if (rc == 0) {
        rc = ds_fsync_dir(dir);
    }
    if (rc != 0) {
        ds_log_error("%s: cannot create: %s", path, ds_strerror(rc));
    }
    return rc;
}

/* Copies [offset, offset + length) of src (what it holds of it) to dst_path via a synced
 * temporary file. */
static int copy_range(int src, uint64_t offset, uint64_t length, const char *dst_path,
                      uint64_t *copied)
{
    char tmp[DS_PATH_MAX];
    int n = snprintf(tmp, sizeof(tmp), "%s.tmp", dst_path);
    ASSERT(n > 0 && n < (int)sizeof(tmp));
    int dst = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (dst < 0) {
        return -errno;
    }
    uint8_t *chunk = malloc(COPY_CHUNK_BYTES);
    int rc = chunk != NULL ? 0 : -ENOMEM;
    uint64_t done = 0;
    while (rc == 0 && done < length) {
        size_t want = length - done < COPY_CHUNK_BYTES ? (size_t)(length - done) : COPY_CHUNK_BYTES;
        ssize_t got = ds_pread_full(src, chunk, want, offset + done);
        if (got <= 0) {
            rc = got < 0 ? (int)got : 0;
            break; /* the file ends here: the rest of the range is gone */
        }
        if (write(dst, chunk, (size_t)got) != got) {
            rc = -EIO;
        }
        done += (uint64_t)got;
    }
    free(chunk);
    if (rc == 0 && fdatasync(dst) != 0) {
        rc = -errno;
    }
    close(dst);
    if (rc == 0 && rename(tmp, dst_path) != 0) {
        rc = -errno;
    }
    if (rc != 0) {
        (void)unlink(tmp);
        return rc;
    }
    *copied = done;
    return 0;
}

static void put_source(char *dst, size_t capacity, const struct damage *d)
{
    if (d->source_partition == BLOCK_SOURCE_NONE || d->blocks == 0) {
        snprintf(dst, capacity,
                 "\"source_partition\":null,\"source_offset_min\":null,\"source_offset_max\":null");
        return;
    }
    snprintf(dst, capacity,
             "\"source_partition\":%" PRId32 ",\"source_offset_min\":%" PRId64
             ",\"source_offset_max\":%" PRId64,
             d->source_partition, d->source_offset_min, d->source_offset_max);
}

static int write_record(const char *dir, const char *name, const struct damage *d,
                        uint64_t bytes_saved, int64_t now_ms)
{
    char date[DS_DATE_TEXT_SIZE];
    char ts[DS_TS_TEXT_SIZE];
    char events[32] = "null";
    char source[160];
    ds_date_format(d->day, date);
    ds_ts_format(now_ms, ts);
    if (d->events_known) {
        snprintf(events, sizeof(events), "%" PRIu64, d->events);
    }
    put_source(source, sizeof(source), d);
    char record[RECORD_BYTES_MAX];
    int n = snprintf(record, sizeof(record),
                     "{\"partition\":\"DAY#%s#%u\",\"day\":\"%s\",\"shard\":%u,\"segment\":%u,"
                     "\"segment_file\":\"parts/%s/%u/%08u.seg\",\"offset\":%" PRIu64
                     ",\"length\":%" PRIu64 ",\"bytes_file\":\"%s.bin\",\"bytes_saved\":%" PRIu64
                     ",\"committed\":%s,\"blocks\":%" PRIu64 ",\"events\":%s,%s,"
                     "\"reason\":\"%s\",\"time\":\"%s\"}\n",
                     date, d->shard, date, d->shard, d->segment_id, date, d->shard, d->segment_id,
                     d->offset, d->length, name, bytes_saved, d->past_end ? "false" : "true",
                     d->blocks, events, source, d->reason, ts);
    ASSERT(n > 0 && n < (int)sizeof(record));
    char path[DS_PATH_MAX];
    char json_name[DS_PATH_MAX];
    snprintf(json_name, sizeof(json_name), "%s.json", name);
    quarantine_path(dir, json_name, path);
    return ds_write_file_atomic(path, record, (size_t)n);
}

int quarantine_save(const char *dir, const struct damage *d, const char *src_path, int64_t now_ms,
                    uint64_t *bytes_saved)
{
    ASSERT(d->length > 0);
    char date[DS_DATE_TEXT_SIZE];
    ds_date_format(d->day, date);
    char name[96];
    snprintf(name, sizeof(name), "%s.%u.%08u.%" PRIu64, date, d->shard, d->segment_id, d->offset);
    char bin_name[128];
    snprintf(bin_name, sizeof(bin_name), "%s.bin", name);
    char path[DS_PATH_MAX];
    quarantine_path(dir, bin_name, path);
    uint64_t copied = 0;
    int rc = 0;
    int src = open(src_path, O_RDONLY | O_CLOEXEC);
    if (src >= 0) {
        rc = copy_range(src, d->offset, d->length, path, &copied);
        close(src);
    } else if (errno != ENOENT) {
        rc = -errno;
    }
    if (rc == 0) {
        rc = write_record(dir, name, d, copied, now_ms);
    }
    if (rc == 0) {
        quarantine_path(dir, "", path);
        rc = ds_fsync_dir(path);
    }
    if (rc != 0) {
        ds_log_error("%s: cannot quarantine %s bytes %" PRIu64 "..%" PRIu64 ": %s", dir, src_path,
                     d->offset, d->offset + d->length, ds_strerror(rc));
        return rc;
    }
    *bytes_saved = copied;
    return 0;
}

int quarantine_save_file(const char *dir, const char *src_path, const char *name)
{
    char path[DS_PATH_MAX];
    quarantine_path(dir, name, path);
    int src = open(src_path, O_RDONLY | O_CLOEXEC);
    if (src < 0) {
        return -errno;
    }
    uint64_t copied = 0;
    int rc = copy_range(src, 0, UINT64_MAX / 2, path, &copied);
    close(src);
    if (rc == 0) {
        quarantine_path(dir, "", path);
        rc = ds_fsync_dir(path);
    }
    if (rc != 0) {
        ds_log_error("%s: cannot copy %s into quarantine/: %s", dir, src_path, ds_strerror(rc));
    }
    return rc;
}
