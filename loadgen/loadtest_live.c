/*
 * A run seen as the console shows it: the console's address printed (and opened with
 * --open-console) when the run's nodes are up, and at the end, while they still answer, their
 * heat history (GET /v1/heat/history?seconds=300) summed by second into the run's
 * "heat_history", which report.html draws with the console's own renderer.
 *
 * Invariants of the summed history: at most SHARD_HEAT_HISTORY_S columns (the newest, by t),
 * ascending t; a day's array is as long as the longest any node gave (shards a node did not
 * write in that second are 0), and a day with only zeros, or a second with no day, is left
 * out, so a quiet run costs nothing in report.json. It has the shape of the nodes' own
 * document (version, second, seconds, shard_capacity_eps, columns, growths), so one renderer
 * reads both.
 *
 * Rejected: rebuilding the map from the sampler's per-second /v1/heat?top=64 (only the 64
 * hottest keys a second, and no growths at the second they took effect), and keeping the
 * nodes' raw histories side by side (the renderer would sum them anyway, and a report's size
 * would grow with the node count).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "http/http.h"
#include "loadgen/loadtest.h"

extern char **environ;

/* ---- the console's address --------------------------------------------------------------- */

pid_t loadtest_console_announce(const char *url, const char *run_name, bool open)
{
    ASSERT(url != NULL);
    ASSERT(run_name != NULL);
    fprintf(stderr, "dayshard loadtest: watch live: %s/ (%s)\n", url, run_name);
    if (!open) {
        return -1;
    }
    char page[160];
    snprintf(page, sizeof(page), "%s/", url);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    /* A browser's chatter stays out of the load test's output. */
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    char *const argv[] = {"xdg-open", page, NULL};
    pid_t pid = -1;
    int rc = posix_spawnp(&pid, "xdg-open", &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
        fprintf(stderr,
                "dayshard loadtest: warning: --open-console: cannot run xdg-open (%s); open %s "
                "in a browser by hand\n",
                rc == ENOENT ? "not installed" : strerror(rc), page);
        return -1;
    }
    return pid;
}

void loadtest_console_reap(pid_t pid)
{
    if (pid > 0) {
        int status = 0;
        /* xdg-open hands the page to a browser and exits; one still running is left alone. */
        (void)waitpid(pid, &status, WNOHANG);
    }
}

/* ---- the heat history ------------------------------------------------------------------- */

/* Adds one node's columns into by_t ("t" -> {day: [counts]}). */
static void history_add_columns(json_t *by_t, const json_t *columns)
{
    size_t i = 0;
    const json_t *col = NULL;
    json_array_foreach(columns, i, col)
    {
        char key[32];
        snprintf(key, sizeof(key), "%" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(col, "t")));
        json_t *days = json_object_get(by_t, key);
        if (days == NULL) {
            days = json_object();
            json_object_set_new(by_t, key, days);
        }
        const char *day = NULL;
        json_t *counts = NULL;
        json_object_foreach(json_object_get(col, "days"), day, counts)
        {
            json_t *sum = json_object_get(days, day);
            if (sum == NULL) {
                sum = json_array();
                json_object_set_new(days, day, sum);
            }
            size_t k = 0;
            const json_t *v = NULL;
            json_array_foreach(counts, k, v)
            {
                if (k >= SHARD_COUNT_MAX) {
                    break; /* not a node's answer: a day has at most this many shards */
                }
                json_int_t add = json_integer_value(v);
                if (k < json_array_size(sum)) {
                    add += json_integer_value(json_array_get(sum, k));
                    json_array_set_new(sum, k, json_integer(add));
                } else {
                    json_array_append_new(sum, json_integer(add));
                }
            }
        }
    }
}

/* Adds one node's growths, once each (nodes of a group share the shard map's growths). */
static void history_add_growths(json_t *into, const json_t *growths)
{
    size_t i = 0;
    json_t *g = NULL;
    json_array_foreach(growths, i, g)
    {
        bool seen = false;
        size_t j = 0;
        const json_t *o = NULL;
        json_array_foreach(into, j, o)
        {
            seen = seen || (json_equal(json_object_get(o, "t"), json_object_get(g, "t")) &&
                            json_equal(json_object_get(o, "day"), json_object_get(g, "day")) &&
                            json_equal(json_object_get(o, "to"), json_object_get(g, "to")));
        }
        if (!seen && json_array_size(into) < SHARD_HEAT_HISTORY_GROWTHS_MAX) {
            json_array_append(into, g);
        }
    }
}

static bool history_day_has_events(const json_t *counts)
{
    size_t k = 0;
    const json_t *v = NULL;
    json_array_foreach(counts, k, v)
    {
        if (json_integer_value(v) != 0) {
            return true;
        }
    }
    return false;
}

static int history_t_compare(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The summed columns, the newest SHARD_HEAT_HISTORY_S seconds in ascending t, zeros left out. */
static json_t *history_columns(const json_t *by_t)
{
    size_t n = json_object_size(by_t);
    int64_t *ts = calloc(n > 0 ? n : 1, sizeof(*ts));
    json_t *columns = json_array();
    if (ts == NULL || columns == NULL) {
        free(ts);
        json_decref(columns);
        return NULL;
    }
    size_t i = 0;
    const char *key = NULL;
    const json_t *days = NULL;
    json_object_foreach((json_t *)by_t, key, days)
    {
        ts[i++] = strtoll(key, NULL, 10);
    }
    ASSERT(i == n);
    qsort(ts, n, sizeof(*ts), history_t_compare);
    for (i = n > SHARD_HEAT_HISTORY_S ? n - SHARD_HEAT_HISTORY_S : 0; i < n; i++) {
        char t[32];
        snprintf(t, sizeof(t), "%" PRId64, ts[i]);
        json_t *kept = json_object();
        const char *day = NULL;
        json_t *counts = NULL;
        json_object_foreach(json_object_get(by_t, t), day, counts)
        {
            if (history_day_has_events(counts)) {
                json_object_set(kept, day, counts);
            }
        }
        if (json_object_size(kept) == 0) {
            json_decref(kept);
            continue;
        }
        json_array_append_new(columns,
                              json_pack("{s:I, s:o}", "t", (json_int_t)ts[i], "days", kept));
    }
    ASSERT(json_array_size(columns) <= SHARD_HEAT_HISTORY_S);
    free(ts);
    return columns;
}

json_t *loadtest_heat_history_fetch(struct http_client_conn *const *conns, uint32_t count,
                                    uint32_t capacity_eps, char *why, size_t why_size)
{
    ASSERT(count >= 1 && count <= LOADGEN_LOADTEST_NODES_MAX);
    ASSERT(why != NULL && why_size > 0);
    json_t *by_t = json_object();
    json_t *growths = json_array();
    json_int_t second = -1;
    int rc = by_t != NULL && growths != NULL ? 0 : -ENOMEM;
    for (uint32_t k = 0; k < count && rc == 0; k++) {
        struct http_client_answer ans;
        rc = http_client_conn_get(conns[k], "/v1/heat/history?seconds=300", &ans);
        json_t *doc =
            rc == 0 && ans.status == 200 ? json_loadb(ans.body, ans.body_len, 0, NULL) : NULL;
        if (doc == NULL) {
            snprintf(why, why_size, "node %u answered /v1/heat/history with %ld %s", k, ans.status,
                     ans.error);
            rc = rc != 0 ? rc : -EIO;
        } else {
            history_add_columns(by_t, json_object_get(doc, "columns"));
            history_add_growths(growths, json_object_get(doc, "growths"));
            json_int_t s = json_integer_value(json_object_get(doc, "second"));
            second = s > second ? s : second;
        }
        json_decref(doc);
        http_client_answer_deinit(&ans);
    }
    json_t *columns = rc == 0 ? history_columns(by_t) : NULL;
    json_t *out = NULL;
    if (columns != NULL) {
        out = json_pack("{s:i, s:o, s:i, s:I, s:o, s:o}", "version", 1, "second",
                        second >= 0 ? json_integer(second) : json_null(), "seconds",
                        (int)SHARD_HEAT_HISTORY_S, "shard_capacity_eps", (json_int_t)capacity_eps,
                        "columns", columns, "growths", growths);
        growths = NULL; /* taken by out ("o"), on failure too */
    } else if (rc == 0) {
        snprintf(why, why_size, "out of memory");
    }
    json_decref(growths);
    json_decref(by_t);
    return out;
}
