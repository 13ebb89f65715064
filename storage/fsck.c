/*
 * fsck: verify a data directory against its manifest, and with repair cut what no commit
 * reached.
 *
 * Checking is read-only and works beside a live writer: it opens the directory as a reader and
 * decodes every committed block. Damage has two kinds: bytes no commit reached (a torn tail,
 * an orphan segment: harmless, cut by any writer's recovery and by --repair) and committed
 * blocks that fail a check (acknowledged data damaged: reported, never "repaired" by deleting
 * it, since that would silently drop acknowledged events).
 *
 * Rejected: scanning segments without the manifest and keeping every block whose CRC checks.
 * A block whose commit never completed can have valid CRCs; keeping it would duplicate events
 * that the source replays after the crash.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "storage/store_read.h"

struct orphan_walk {
    uint64_t orphans;
    FILE *out;
};

/* The same names recovery treats as segments (store_walk_tree): anything else it leaves alone,
 * so counting it here would make --repair unable to ever come clean. */
static int orphan_entry(struct storage *st, const char *dir, const char *name, int32_t day,
                        uint32_t shard, uint32_t segment_id, void *user)
{
    struct orphan_walk *ow = user;
    const struct part *p = store_part_find(st, day, shard);
    if (p == NULL || segment_id > p->segment_id) {
        ow->orphans++;
        if (ow->out != NULL) {
            fprintf(ow->out, "%s/%s: segment no commit reached\n", dir, name);
        }
    }
    return 0;
}

/* Counts segment files on disk that the manifest does not cover; a directory that cannot be
 * read counts as one problem. */
static uint64_t count_orphans(struct storage *st, FILE *out)
{
    struct orphan_walk ow = {.orphans = 0, .out = out};
    struct store_walk walk = {.segment = orphan_entry, .part_done = NULL, .user = &ow};
    int rc = store_walk_tree(st, &walk);
    if (rc != 0) {
        if (out != NULL) {
            fprintf(out, "%s/parts: cannot be read completely: %s\n", st->dir, ds_strerror(rc));
        }
        ow.orphans++;
    }
    return ow.orphans;
}

static int verify(const char *dir, FILE *out, struct storage_fsck_report *report)
{
    struct storage *st = NULL;
    int rc = storage_open_reader(dir, &st);
    if (rc != 0) {
        if (out != NULL) {
            fprintf(out, "%s: cannot open: %s\n", dir, ds_strerror(rc));
        }
        return rc;
    }
    memset(report, 0, sizeof(*report));
    for (uint32_t i = 0; i < st->part_count && rc == 0; i++) {
        if (st->parts[i]->segment_id != 0) {
            report->partitions++;
            rc = store_read_verify_partition(st, st->parts[i], report, out);
        }
    }
    if (rc == 0) {
        report->orphan_segments = count_orphans(st, out);
        report->torn_bytes += st->manifest_torn_bytes;
        if (st->manifest_torn_bytes > 0 && out != NULL) {
            fprintf(out, "%s/MANIFEST: %llu bytes of a torn record at the end\n", dir,
                    (unsigned long long)st->manifest_torn_bytes);
        }
    }
    storage_close(st);
    return rc;
}

int storage_fsck(const char *dir, const struct storage_fsck_options *options,
                 struct storage_fsck_report *report)
{
    FILE *out = options->report_file;
    int rc = verify(dir, out, report);
    if (rc != 0) {
        return rc;
    }
    if (options->repair && (report->torn_bytes > 0 || report->orphan_segments > 0)) {
        /* A writer's recovery cuts exactly what no commit reached. */
        struct storage_config cfg;
        storage_config_defaults(&cfg);
        cfg.dir = dir;
        cfg.io_mode = STORAGE_IO_SYNC;
        cfg.partitions_max = STORAGE_PARTITIONS_MAX;
        struct storage *st = NULL;
        rc = storage_open(&cfg, &st);
        storage_close(st);
        if (rc != 0) {
            if (out != NULL) {
                fprintf(out, "%s: repair failed: %s\n", dir, ds_strerror(rc));
            }
            return rc;
        }
        uint64_t repaired = report->orphan_segments + (report->torn_bytes > 0 ? 1 : 0);
        rc = verify(dir, out, report);
        report->repaired = repaired;
        if (rc != 0) {
            return rc;
        }
    }
    bool clean = report->blocks_bad == 0 && report->torn_bytes == 0 && report->orphan_segments == 0;
    return clean ? 0 : 1;
}
