/*
 * cli_gsi_rebuild (cli.h): the rebuild of the by-customer index DIR/gsi from the base segments,
 * behind `dayshard gsi rebuild` (cli/cmd_gsi.c) and `dayshard fsck --repair` (through
 * cli/fsck_gsi.c), in a file of its own so that both call down into it.
 *
 * Steps: open DIR as its writer (storage_open takes DIR/LOCK, so a running node makes this
 * refuse, and no node can start until the rebuild is over); move the old DIR/gsi aside to
 * DIR/gsi.old-<pid>; run the node's own builder (query_gsi_start) from an empty index until it
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "query/query.h"
#include "storage/storage.h"

/* How long one wait for the builder lasts before a progress line. */
#define GSI_PROGRESS_MS 2000u
/* Directory levels of DIR/gsi whose files are counted: the store keeps FORMAT, lock, log and
 * table at the top, so the bound only caps the walk (no recursion without a cap). */
#define GSI_DIR_DEPTH_MAX 3

struct rebuild {
    const char *command; /* for messages: "gsi rebuild", "fsck" */
    const char *data;
    uint32_t slots_log2; /* 0: the default */
    struct storage *st;  /* the writer handle: holds DIR/LOCK for the whole rebuild */
    uint64_t commit_seq;
    uint64_t events;
    uint64_t partitions;
    char gsi_dir[DS_PATH_MAX];
    char old_dir[DS_PATH_MAX]; /* "" when there was no DIR/gsi to move aside */
};

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

/* Opens DIR as its writer (the lock) and adds up what the base data holds. 0 or an exit code
 * (reported). */
static int rebuild_lock(struct rebuild *r)
{
    char manifest[DS_PATH_MAX];
    snprintf(manifest, sizeof(manifest), "%s/MANIFEST", r->data);
    if (access(manifest, F_OK) != 0) {
        int err = errno;
        return cli_error(r->command, CLI_FAIL, "%s: %s", r->data,
                         err == ENOENT ? "no data here (no MANIFEST)" : strerror(err));
    }
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = r->data;
    int rc = storage_open(&cfg, &r->st);
    if (rc == -DS_ELOCKED) {
        return cli_error(r->command, CLI_FAIL,
                         "%s: a node is running on it (DIR/LOCK is held); stop it first", r->data);
    }
    if (rc != 0) {
        return cli_error(r->command, CLI_FAIL, "%s: %s", r->data, ds_strerror(rc));
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
 * from nothing and the old files survive a crash. 0 or an exit code (reported). */
static int move_aside(struct rebuild *r)
{
    query_gsi_dir(r->data, r->gsi_dir);
    r->old_dir[0] = '\0';
    struct stat sb;
    if (lstat(r->gsi_dir, &sb) != 0) {
        return errno == ENOENT
                   ? 0
                   : cli_error(r->command, CLI_FAIL, "%s: %s", r->gsi_dir, strerror(errno));
    }
    char old_dir[DS_PATH_MAX];
    int n = snprintf(old_dir, sizeof(old_dir), "%s.old-%ld", r->gsi_dir, (long)getpid());
    if (n <= 0 || (size_t)n >= sizeof(old_dir)) {
        return cli_error(r->command, CLI_FAIL, "%s: path too long", r->data);
    }
    if (rename(r->gsi_dir, old_dir) != 0) {
        return cli_error(r->command, CLI_FAIL, "cannot move %s aside: %s", r->gsi_dir,
                         strerror(errno));
    }
    memcpy(r->old_dir, old_dir, sizeof(old_dir));
    int fd = open(r->data, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        int err = errno;
        if (fd >= 0) {
            close(fd);
        }
        return cli_error(r->command, CLI_FAIL, "cannot sync %s: %s", r->data, strerror(err));
    }
    close(fd);
    return 0;
}

/* Runs the builder until it holds every commit up to r->commit_seq. 0 or an exit code. */
static int run_builder(struct rebuild *r, uint64_t start_ns)
{
    struct query_gsi_config cfg;
    query_gsi_config_defaults(&cfg);
    cfg.data_dir = r->data;
    cfg.table_slots_log2 = r->slots_log2;
    const char *slow = getenv("DS_TEST_GSI_SLOW_MS"); /* test hook, as in `run`: a slow builder */
    cfg.test_slow_ms = slow != NULL ? (uint32_t)strtoul(slow, NULL, 10) : 0;
    struct query_gsi *g = NULL;
    int rc = query_gsi_start(&cfg, &g);
    if (rc != 0) {
        return cli_error(r->command, CLI_FAIL, "cannot start the builder on %s: %s", r->gsi_dir,
                         ds_strerror(rc));
    }
    for (;;) {
        rc = query_gsi_wait(g, r->commit_seq, GSI_PROGRESS_MS);
        if (rc != -ETIMEDOUT) {
            break;
        }
        double seconds = (double)(ds_clock_ns() - start_ns) / 1e9;
        fprintf(stderr, "dayshard %s: %.0f s, %.1f MiB of index so far\n", r->command, seconds,
                (double)dir_bytes(r->gsi_dir, GSI_DIR_DEPTH_MAX) / (1024.0 * 1024.0));
    }
    query_gsi_stop(g);
    if (rc != 0) {
        return cli_error(r->command, CLI_FAIL, "the builder failed: %s", ds_strerror(rc));
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
            fprintf(stderr, "dayshard %s: note: %s/%s is left from an interrupted rebuild\n",
                    r->command, r->data, e->d_name);
        }
    }
    closedir(d);
}

/* The rebuild proper (cli.h: cli_gsi_rebuild), once the arguments are known. */
static int rebuild_run(struct rebuild *r)
{
    uint64_t start_ns = ds_clock_ns();
    int rc = rebuild_lock(r);
    if (rc != 0) {
        return rc;
    }
    int vrc = storage_partition_visit(r->st, count_partition, r);
    if (vrc != 0) {
        rc = cli_error(r->command, CLI_FAIL, "%s: %s", r->data, ds_strerror(vrc));
    }
    rc = rc == 0 ? move_aside(r) : rc;
    if (rc == 0) {
        fprintf(stderr, "dayshard %s: indexing %llu events of %s (up to commit %llu)%s%s\n",
                r->command, (unsigned long long)r->events, r->data,
                (unsigned long long)r->commit_seq, r->old_dir[0] != '\0' ? "; old index in " : "",
                r->old_dir);
        rc = run_builder(r, start_ns);
    }
    int removed = rc == 0 && r->old_dir[0] != '\0' ? cli_remove_tree(r->old_dir) : 0;
    if (removed != 0) {
        /* The new index is complete: a leftover only costs space. */
        fprintf(stderr, "dayshard %s: warning: cannot remove %s: %s\n", r->command, r->old_dir,
                ds_strerror(removed));
    }
    if (rc != 0 && r->old_dir[0] != '\0') {
        fprintf(stderr, "dayshard %s: the old index stays in %s\n", r->command, r->old_dir);
    }
    note_leftovers(r);
    storage_close(r->st); /* releases DIR/LOCK */
    return rc;
}

int cli_gsi_rebuild(const char *command, const char *data_dir, uint32_t slots_log2,
                    struct cli_gsi_rebuilt *out)
{
    ASSERT(command != NULL && data_dir != NULL && out != NULL);
    ASSERT(slots_log2 == 0 ||
           (slots_log2 >= GSI_SLOTS_LOG2_MIN && slots_log2 <= GSI_SLOTS_LOG2_MAX));
    uint64_t start_ns = ds_clock_ns();
    struct rebuild r = {.command = command, .data = data_dir, .slots_log2 = slots_log2};
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
    out->index_bytes = dir_bytes(r.gsi_dir, GSI_DIR_DEPTH_MAX);
    return CLI_OK;
}
