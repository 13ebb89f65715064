/*
 * The soak's count check (soak.h): the node's /v1/count of each of the last N stream days,
 * all orders and status=paid, against a reference made from the same stream (the generator
 * config and seed, regenerated) by `dayshard ingest` into OUT/ref with the same model and
 * retention, counted by `dayshard count --json` the same way (by=day over the N days).
 *
 * Why the last N days are exact on both sides: updates keep their order's day, so every line
 * of those days arrives while the stream day is at most their own + N - 1 (never too late);
 * an order's lines share a Kafka partition (keyed by order), so the node sees them in the
 * reference's order. Earlier days may differ (which events are too late depends on how a node
 * interleaves its partitions) and are not compared. Both are spawned from this binary
 * (cfg->self) so the reference is the product's own path, not a model of it.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "http/http.h"
#include "loadgen/soak.h"

extern char **environ;

/* Spawns argv with stdin from in_fd (or /dev/null when < 0) and stdout and stderr into files;
 * returns the pid or a negated errno. */
static int soak_spawn(const char *const *argv, int in_fd, const char *out_path,
                      const char *err_path, pid_t *pid)
{
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (in_fd >= 0) {
        posix_spawn_file_actions_adddup2(&actions, in_fd, 0);
    } else {
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    }
    posix_spawn_file_actions_addopen(&actions, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    int rc = -posix_spawn(pid, argv[0], &actions, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    return rc;
}

static int soak_wait_exit(pid_t pid)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) { /* until reaped */
        if (errno != EINTR) {
            return -errno;
        }
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* `dayshard ingest` of the regenerated stream into dir. Returns 0 or a negative code. */
static int soak_reference_ingest(const struct loadgen_soak_config *cfg,
                                 const struct loadgen_workload_config *w, const char *dir,
                                 const char *log)
{
    char retention[16];
    snprintf(retention, sizeof(retention), "%u", cfg->retention_days);
    const char *argv[] = {cfg->self,  "ingest",           "--data",  dir, "--model",
                          cfg->model, "--retention-days", retention, "-", NULL};
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
        return -errno;
    }
    pid_t pid = 0;
    int rc = soak_spawn(argv, pipe_fds[0], log, log, &pid);
    close(pipe_fds[0]);
    FILE *in = fdopen(pipe_fds[1], "w");
    if (rc != 0 || in == NULL) {
        if (in == NULL) {
            close(pipe_fds[1]);
        }
        if (rc == 0) {
            soak_wait_exit(pid);
        }
        return rc != 0 ? rc : -ENOMEM;
    }
    int write_rc = loadgen_workload_write(w, in, NULL);
    int close_rc = fclose(in) == 0 ? 0 : -errno;
    int exit_code = soak_wait_exit(pid);
    if (exit_code != 0) {
        return soak_error(-EIO, "the reference `dayshard ingest` failed (exit %d): see %s",
                          exit_code, log);
    }
    return write_rc != 0 ? write_rc : close_rc;
}

/* Folds a /v1/count?by=day document into counts[day - first] (orders or paid). */
static int soak_fold_counts(json_t *doc, int32_t first, uint32_t n, struct soak_count_day *days,
                            bool reference, bool paid)
{
    json_t *groups = json_object_get(doc, "groups");
    if (!json_is_array(groups)) {
        return -DS_ECORRUPT;
    }
    size_t i;
    json_t *g;
    json_array_foreach(groups, i, g)
    {
        const char *key = json_string_value(json_object_get(g, "key"));
        int32_t day = 0;
        if (key == NULL || ds_date_parse(key, strlen(key), &day) != 0 || day < first ||
            day >= first + (int32_t)n) {
            continue;
        }
        int64_t count = (int64_t)json_integer_value(json_object_get(g, "count"));
        struct soak_count_day *d = &days[day - first];
        *(reference ? (paid ? &d->paid_ref : &d->orders_ref) : (paid ? &d->paid : &d->orders)) =
            count;
    }
    return 0;
}

/* The node's by-day counts of [first, first + n), all and paid. */
static int soak_node_counts(const char *url, int32_t first, uint32_t n, struct soak_count_day *days)
{
    char from[DS_DATE_TEXT_SIZE], to[DS_DATE_TEXT_SIZE], path[160];
    ds_date_format(first, from);
    ds_date_format(first + (int32_t)n - 1, to);
    for (int paid = 0; paid <= 1; paid++) {
        snprintf(path, sizeof(path), "/v1/count?day=%s&to=%s&by=day%s", from, to,
                 paid ? "&status=paid" : "");
        struct http_client_answer ans;
        int rc = http_client_get(url, path, NULL, &ans);
        json_t *doc =
            rc == 0 && ans.status == 200 ? json_loadb(ans.body, ans.body_len, 0, NULL) : NULL;
        rc = doc != NULL ? soak_fold_counts(doc, first, n, days, false, paid == 1) : -EIO;
        if (rc != 0) {
            soak_error(rc, "the node's count %s: %s", path,
                       ans.error[0] != '\0' ? ans.error : "bad answer");
        }
        json_decref(doc);
        http_client_answer_deinit(&ans);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

/* The reference's by-day counts, from `dayshard count --json`. */
static int soak_reference_counts(const struct loadgen_soak_config *cfg, const char *dir,
                                 int32_t first, uint32_t n, struct soak_count_day *days)
{
    char from[DS_DATE_TEXT_SIZE], to[DS_DATE_TEXT_SIZE], out[DS_PATH_MAX], log[DS_PATH_MAX];
    ds_date_format(first, from);
    ds_date_format(first + (int32_t)n - 1, to);
    snprintf(out, sizeof(out), "%s/ref-count.json", cfg->out_dir);
    snprintf(log, sizeof(log), "%s/ref.log", cfg->out_dir);
    for (int paid = 0; paid <= 1; paid++) {
        const char *argv[] = {cfg->self, "count",  "--day",  from, "--to", to,   "--by",
                              "day",     "--json", "--data", dir,  NULL,   NULL, NULL};
        if (paid) {
            argv[11] = "--status";
            argv[12] = "paid";
        }
        pid_t pid = 0;
        int rc = soak_spawn(argv, -1, out, log, &pid);
        int exit_code = rc == 0 ? soak_wait_exit(pid) : rc;
        json_t *doc = exit_code == 0 ? json_load_file(out, 0, NULL) : NULL;
        rc = doc != NULL ? soak_fold_counts(doc, first, n, days, true, paid == 1) : -EIO;
        json_decref(doc);
        unlink(out);
        if (rc != 0) {
            return soak_error(rc, "the reference count failed (exit %d): see %s", exit_code, log);
        }
    }
    return 0;
}

int soak_count_check(const struct loadgen_soak_config *cfg, struct soak_outcome *out,
                     const char *node_url)
{
    uint32_t n = cfg->retention_days;
    ASSERT(n >= 1 && n <= LOADGEN_SOAK_RETENTION_DAYS_MAX);
    int32_t first = cfg->first_day + (int32_t)(cfg->days - n);
    out->count_day_count = n;
    for (uint32_t i = 0; i < n; i++) {
        out->count_days[i] = (struct soak_count_day){.day = first + (int32_t)i};
    }
    int rc = soak_node_counts(node_url, first, n, out->count_days);
    if (rc != 0) {
        return rc;
    }
    char dir[DS_PATH_MAX], log[DS_PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/ref", cfg->out_dir);
    snprintf(log, sizeof(log), "%s/ref.log", cfg->out_dir);
    rc = ds_remove_tree(dir);
    if (rc != 0 && rc != -ENOENT) {
        return soak_error(rc, "%s: %s", dir, ds_strerror(rc));
    }
    unlink(log);
    fprintf(stderr,
            "soak: counting the last %u days against `dayshard ingest` of the same "
            "stream into %s\n",
            n, dir);
    struct loadgen_workload_config w;
    soak_workload(cfg, &w);
    w.rate_eps = 0.0;
    rc = soak_reference_ingest(cfg, &w, dir, log);
    rc = rc == 0 ? soak_reference_counts(cfg, dir, first, n, out->count_days) : rc;
    if (rc != 0) {
        return rc;
    }
    out->counts_checked = true;
    return 0;
}
