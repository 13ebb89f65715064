/*
 * index_rebuild (index.h): the rebuild of the by-customer index DIR/gsi from the base segments,
 * behind `dayshard gsi rebuild` (through cli/cmd_gsi.c) and `dayshard fsck --repair` (through
 * index_verify, verify.c), in a file of its own so that both call down into it. What the
 * person running the command reads goes through the caller's index_note_fn: the command line
 * decides how a line is printed (its "dayshard <command>:" prefix, JSON logs), this file only
 * what it says.
 *
 * Steps: open DIR as its writer (storage_open takes DIR/LOCK, so a running node makes this
 * refuse, and no node can start until the rebuild is over); move the old DIR/gsi aside to
 * DIR/gsi.old-<pid>; run the node's own builder (index_builder_start) from an empty index until it
 * holds every commit up to the writer's last one; stop it; only then remove the old files.
 *
 * Invariants: while the writer lock is held the base data cannot grow, so the commit sequence
 * read at the start is the whole of it and the wait ends. A crash or a failure mid-rebuild
 * leaves the old files in DIR/gsi.old-<pid> for inspection and a partial DIR/gsi, which a node
 * resumes from its cursor (the entries it holds are exact, only incomplete) and which the next
 * rebuild moves aside again.
 *
 * Rejected: deleting DIR/gsi in place (a crash would leave nothing to inspect), and repairing
 * the damaged log or table (damage of unknown extent; the base data is the truth and a fresh
 * build from it is exact), and checking the lock with a short flock (a node could then start
 * mid-rebuild and race the builder for DIR/gsi).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index/index.h"

/* How long one wait for the builder lasts before a progress line. */
#define REBUILD_PROGRESS_MS 2000u
/* Directory levels of DIR/gsi whose files are counted: the store keeps FORMAT, lock, log and
 * table at the top, so the bound only caps the walk (no recursion without a cap). */
#define REBUILD_DIR_DEPTH_MAX 3

struct rebuild {
    index_note_fn note; /* the caller's lines */
    void *user;
    const char *data;
    uint32_t slots_log2; /* 0: the default */
    struct storage *st;  /* the writer handle: holds DIR/LOCK for the whole rebuild */
    uint64_t commit_seq;
    uint64_t events;
    uint64_t partitions;
    char gsi_dir[DS_PATH_MAX];
    char old_dir[DS_PATH_MAX]; /* "" when there was no DIR/gsi to move aside */
};

static void rebuild_note(const struct rebuild *r, enum index_note_kind kind, const char *fmt, ...)
    DS_PRINTF(3, 4);

/* One line for the caller (index.h: index_note_fn). */
static void rebuild_note(const struct rebuild *r, enum index_note_kind kind, const char *fmt, ...)
{
    char text[512];
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof(text), fmt, args);
    va_end(args);
    r->note(kind, text, r->user);
}

static int rebuild_fail(const struct rebuild *r, int rc, const char *fmt, ...) DS_PRINTF(3, 4);

/* An ERROR line, then rc (negative) for the caller to return. */
static int rebuild_fail(const struct rebuild *r, int rc, const char *fmt, ...)
{
    ASSERT(rc < 0);
    char text[512];
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof(text), fmt, args);
    va_end(args);
    r->note(INDEX_NOTE_ERROR, text, r->user);
    return rc;
}

/* Bytes of the regular files under path, down to depth more directory levels. */
static uint64_t dir_bytes(const char *path, int depth)
{
    ASSERT(depth >= 0);
    DIR *d = opendir(path);
    if (d == NULL) {
        return 0;
    }
    uint64_t total = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        char child[DS_PATH_MAX];
        struct stat sb;
        int n = snprintf(child, sizeof(child), "%s/%s", path, e->d_name);
        if (n <= 0 || (size_t)n >= sizeof(child) || lstat(child, &sb) != 0) {
            continue;
        }
        if (S_ISREG(sb.st_mode)) {
            total += (uint64_t)sb.st_size;
        } else if (S_ISDIR(sb.st_mode) && depth > 0) {
            total += dir_bytes(child, depth - 1);
        }
    }
    closedir(d);
    return total;
}

/* Opens DIR as its writer (the lock) and reads the commit sequence the rebuild must reach.
 * Returns 0 or a negative code (noted). */
static int rebuild_lock(struct rebuild *r)
{
    char manifest[DS_PATH_MAX];
    snprintf(manifest, sizeof(manifest), "%s/MANIFEST", r->data);
    if (access(manifest, F_OK) != 0) {
        int err = errno;
        return rebuild_fail(r, -err, "%s: %s", r->data,
                            err == ENOENT ? "no data here (no MANIFEST)" : strerror(err));
    }
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = r->data;
    int rc = storage_open(&cfg, &r->st);
    if (rc == -DS_ELOCKED) {
        return rebuild_fail(r, rc, "%s: a node is running on it (DIR/LOCK is held); stop it first",
                            r->data);
    }
    if (rc != 0) {
        return rebuild_fail(r, rc, "%s: %s", r->data, ds_strerror(rc));
    }
    r->commit_seq = storage_commit_seq(r->st);
    return 0;
}

static int count_partition(int32_t day, uint32_t shard, void *user)
{
    struct rebuild *r = user;
    struct storage_partition_total total;
    int rc = storage_partition_totals(r->st, day, shard, NULL, 0, &total);
    if (rc == 0) {
        r->events += total.count;
        r->partitions++;
    }
    return rc;
}

/* Renames DIR/gsi to DIR/gsi.old-PID (when there is one) and syncs DIR, so the new build starts
 * from nothing and the old files survive a crash. Returns 0 or a negative code (noted). */
static int move_aside(struct rebuild *r)
{
    index_dir(r->data, r->gsi_dir);
    r->old_dir[0] = '\0';
    struct stat sb;
    if (lstat(r->gsi_dir, &sb) != 0) {
        int err = errno;
        return err == ENOENT ? 0 : rebuild_fail(r, -err, "%s: %s", r->gsi_dir, strerror(err));
    }
    char old_dir[DS_PATH_MAX];
    int n = snprintf(old_dir, sizeof(old_dir), "%s.old-%ld", r->gsi_dir, (long)getpid());
    if (n <= 0 || (size_t)n >= sizeof(old_dir)) {
        return rebuild_fail(r, -ENAMETOOLONG, "%s: path too long", r->data);
    }
    if (rename(r->gsi_dir, old_dir) != 0) {
        int err = errno;
        return rebuild_fail(r, -err, "cannot move %s aside: %s", r->gsi_dir, strerror(err));
    }
    memcpy(r->old_dir, old_dir, sizeof(old_dir));
    int fd = open(r->data, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        int err = errno;
        if (fd >= 0) {
            close(fd);
        }
        return rebuild_fail(r, -err, "cannot sync %s: %s", r->data, strerror(err));
    }
    close(fd);
    return 0;
}

/* Runs the builder until it holds every commit up to r->commit_seq. Returns 0 or a negative
 * code (noted). */
static int run_builder(struct rebuild *r, uint64_t start_ns)
{
    struct index_builder_config cfg;
    index_builder_config_defaults(&cfg);
    cfg.data_dir = r->data;
    cfg.table_slots_log2 = r->slots_log2;
    const char *slow = getenv("DS_TEST_GSI_SLOW_MS"); /* test hook, as in `run`: a slow builder */
    cfg.test_slow_ms = slow != NULL ? (uint32_t)strtoul(slow, NULL, 10) : 0;
    struct index_builder *g = NULL;
    int rc = index_builder_start(&cfg, &g);
    if (rc != 0) {
        return rebuild_fail(r, rc, "cannot start the builder on %s: %s", r->gsi_dir,
                            ds_strerror(rc));
    }
    for (;;) {
        rc = index_builder_wait(g, r->commit_seq, REBUILD_PROGRESS_MS);
        if (rc != -ETIMEDOUT) {
            break;
        }
        double seconds = (double)(ds_clock_ns() - start_ns) / 1e9;
        rebuild_note(r, INDEX_NOTE_INFO, "%.0f s, %.1f MiB of index so far", seconds,
                     (double)dir_bytes(r->gsi_dir, REBUILD_DIR_DEPTH_MAX) / (1024.0 * 1024.0));
    }
    index_builder_stop(g);
    if (rc != 0) {
        return rebuild_fail(r, rc, "the builder failed: %s", ds_strerror(rc));
    }
    return 0;
}

/* Names gsi.old-* directories an earlier, interrupted rebuild left (never removes them). */
static void note_leftovers(const struct rebuild *r)
{
    DIR *d = opendir(r->data);
    if (d == NULL) {
        return;
    }
    const char *own = strrchr(r->old_dir, '/');
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "gsi.old-", 8) == 0 &&
            (own == NULL || strcmp(own + 1, e->d_name) != 0)) {
            rebuild_note(r, INDEX_NOTE_INFO, "note: %s/%s is left from an interrupted rebuild",
                         r->data, e->d_name);
        }
    }
    closedir(d);
}

/* The rebuild proper (index_rebuild), once the arguments are known. */
static int rebuild_run(struct rebuild *r)
{
    uint64_t start_ns = ds_clock_ns();
    int rc = rebuild_lock(r);
    if (rc != 0) {
        return rc;
    }
    int vrc = storage_partition_visit(r->st, count_partition, r);
    if (vrc != 0) {
        rc = rebuild_fail(r, vrc, "%s: %s", r->data, ds_strerror(vrc));
    }
    rc = rc == 0 ? move_aside(r) : rc;
    if (rc == 0) {
        rebuild_note(r, INDEX_NOTE_INFO, "indexing %llu events of %s (up to commit %llu)%s%s",
                     (unsigned long long)r->events, r->data, (unsigned long long)r->commit_seq,
                     r->old_dir[0] != '\0' ? "; old index in " : "", r->old_dir);
        rc = run_builder(r, start_ns);
    }
    int removed = rc == 0 && r->old_dir[0] != '\0' ? ds_remove_tree(r->old_dir) : 0;
    if (removed != 0) {
        /* The new index is complete: a leftover only costs space. */
        rebuild_note(r, INDEX_NOTE_INFO, "warning: cannot remove %s: %s", r->old_dir,
                     ds_strerror(removed));
    }
    if (rc != 0 && r->old_dir[0] != '\0') {
        rebuild_note(r, INDEX_NOTE_INFO, "the old index stays in %s", r->old_dir);
    }
    note_leftovers(r);
    storage_close(r->st); /* releases DIR/LOCK */
    return rc;
}

int index_rebuild(const char *data_dir, uint32_t slots_log2, index_note_fn note, void *user,
                  struct index_rebuilt *out)
{
    ASSERT(note != NULL && data_dir != NULL && out != NULL);
    ASSERT(slots_log2 == 0 ||
           (slots_log2 >= INDEX_TABLE_SLOTS_LOG2_MIN && slots_log2 <= INDEX_TABLE_SLOTS_LOG2_MAX));
    uint64_t start_ns = ds_clock_ns();
    struct rebuild r = {.note = note, .user = user, .data = data_dir, .slots_log2 = slots_log2};
    int rc = rebuild_run(&r);
    if (rc != 0) {
        return rc;
    }
    memset(out, 0, sizeof(*out));
    memcpy(out->gsi_dir, r.gsi_dir, sizeof(out->gsi_dir));
    out->events = r.events;
    out->partitions = r.partitions;
    out->commit_seq = r.commit_seq;
    out->seconds = (double)(ds_clock_ns() - start_ns) / 1e9;
    out->index_bytes = dir_bytes(r.gsi_dir, REBUILD_DIR_DEPTH_MAX);
    return 0;
}
