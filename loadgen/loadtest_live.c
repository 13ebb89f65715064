/*
 * A run seen as the console shows it: the console's address printed (and opened with
 * --open-console) when the run's nodes are up, and at the end, while they still answer, their
 * heat history (GET /v1/heat/history?seconds=300) merged into the run's "heat_history", which
 * report.html draws with the console's own renderer.
 *
 * The merge is the router's (http_heat_history_merge): columns summed by t up to the oldest
 * node's newest second, growths unioned, so the report's map and a router's console agree. It
 * has the shape of the nodes' own document, so one renderer reads both; the run's
 * --shard-capacity is its shard_capacity_eps.
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

_Static_assert(LOADGEN_LOADTEST_NODES_MAX <= HTTP_HEAT_MERGE_MEMBERS_MAX,
               "a merge takes every node");
_Static_assert(SHARD_HEAT_HISTORY_S == HTTP_HEAT_HISTORY_SECONDS_MAX, "one history length");

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

json_t *loadtest_heat_history_fetch(struct http_client_conn *const *conns, uint32_t count,
                                    uint32_t capacity_eps, char *why, size_t why_size)
{
    ASSERT(count >= 1 && count <= LOADGEN_LOADTEST_NODES_MAX);
    ASSERT(why != NULL && why_size > 0);
    struct http_client_answer answers[LOADGEN_LOADTEST_NODES_MAX] = {0};
    const char *bodies[LOADGEN_LOADTEST_NODES_MAX] = {0};
    int rc = 0;
    uint32_t got = 0;
    for (; got < count && rc == 0; got++) {
        struct http_client_answer *ans = &answers[got];
        rc = http_client_conn_get(conns[got], "/v1/heat/history?seconds=300", ans);
        if (rc != 0 || ans->status != 200 || ans->body == NULL) {
            snprintf(why, why_size, "node %u answered /v1/heat/history with %ld %s", got,
                     ans->status, ans->error);
            rc = rc != 0 ? rc : -EIO;
        }
        bodies[got] = ans->body;
    }
    char *text = NULL;
    size_t len = 0;
    if (rc == 0) {
        rc = http_heat_history_merge(HTTP_HEAT_HISTORY_SECONDS_MAX, bodies, count, &text, &len, why,
                                     why_size);
    }
    json_t *out = rc == 0 ? json_loadb(text, len, 0, NULL) : NULL;
    if (rc == 0 && out == NULL) {
        snprintf(why, why_size, "out of memory");
    }
    if (out != NULL && capacity_eps > 0) {
        json_object_set_new(out, "shard_capacity_eps", json_integer((json_int_t)capacity_eps));
    }
    free(text);
    for (uint32_t k = 0; k < got; k++) {
        http_client_answer_deinit(&answers[k]);
    }
    return out;
}
