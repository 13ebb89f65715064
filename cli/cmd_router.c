/*
 * `dayshard router --node URL[,URL...] [--replica URL,URL...] [--http HOST:PORT]`: one HTTP API
 * over several nodes (router_start; router/router.c has the rules). The bound address is
 * the first line of standard output (so a test can ask for port 0); SIGINT or SIGTERM stops it
 * with exit 0. Signals are handled as in `serve`: blocked before the threads start, awaited
 * with sigwaitinfo.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "query/query.h"
#include "router/router.h"

const char cmd_router_usage[] =
    "usage: dayshard router --node URL[,URL...] [--replica URL[,URL...]] [options]\n"
    "\n"
    "Serves the HTTP API of a node (GET /v1/count, /v1/customers/{id}/orders, /v1/orders/{id},\n"
    "/v1/partitions, /v1/heat, /v1/heat/history, /v1/heat/stream, the console at /, /healthz,\n"
    "/readyz, /metrics) over several `dayshard run --http` nodes, asking every member of a\n"
    "group in parallel and merging their answers (counts summed, orders merged newest first\n"
    "with one cursor, heat merged by second). --node lists group 1 (one consumer\n"
    "group: together its members hold every partition of the topic); --replica lists group 2,\n"
    "another consumer group over the same topic. The router answers from a complete group and\n"
    "fails over to the other when a member is down, behind (its /readyz is 503) or does not\n"
    "answer; with neither complete it answers 503 naming the missing nodes, unless the request\n"
    "says partial=true (then the answer says \"partial\":true and what is missing).\n"
    "Prints the bound address (HOST:PORT) as the first line of standard output, then serves\n"
    "until SIGINT or SIGTERM and exits 0.\n"
    "\n"
    "options:\n"
    "  --node URL[,URL...]     group 1's nodes, e.g. http://10.0.0.1:8080 (required; repeatable)\n"
    "  --replica URL[,URL...]  group 2's nodes (repeatable)\n"
    "  --http HOST:PORT        where to listen (default 127.0.0.1:8080; port 0 picks a free one)\n"
    "  --timeout-ms N          per call to a node, 1..60000 (default 2000); consistent=true\n"
    "                          requests add their own timeout_ms. A call that times out marks\n"
    "                          its node down and every call still waiting on it fails over\n"
    "  --connect-timeout-ms N  connecting to a node, 1..60000 (default 250)\n"
    "  --probe-ms N            between two /readyz probes of every node, 1..60000 (default 500);\n"
    "                          a node whose call failed is asked a real count before /readyz\n"
    "  --partitions N          the topic's partitions: a group whose answers' as_of does not\n"
    "                          cover 0..N-1 is incomplete (default: the largest set seen)\n"
    "  --threads N             worker threads, each with its own connections (default 4)\n"
    "  --http-token TOKEN      require 'Authorization: Bearer TOKEN' from clients, or the\n"
    "                          console's cookie (open /?token=TOKEN), on every path but\n"
    "                          /healthz and /readyz; use it off loopback\n"
    "  --node-token TOKEN      the bearer token of the nodes (their --http-token), sent on every\n"
    "                          call; without it a client's Authorization header is passed on\n"
    "  --help                  this text\n"
    "\n"
    "exit status: 0 stopped by a signal, 1 could not start (address in use), 2 usage error\n";

/* Node URLs of one group: every --node (or --replica) value, split at commas. */
struct router_urls {
    uint32_t count;
    const char *urls[ROUTER_NODES_MAX];
    char text[ROUTER_NODES_MAX][ROUTER_NODE_URL_BYTES_MAX];
};

struct router_args {
    struct router_config cfg;
    struct router_urls nodes;
    struct router_urls replicas;
};

/* Splits value at commas into list; -1 for an empty item, a URL too long or too many. */
static int urls_add(struct router_urls *list, const char *value)
{
    const char *p = value;
    for (;;) { /* one item a turn: bounded by the value's length */
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        if (len == 0 || len >= ROUTER_NODE_URL_BYTES_MAX || list->count == ROUTER_NODES_MAX) {
            return -1;
        }
        memcpy(list->text[list->count], p, len);
        list->text[list->count][len] = '\0';
        list->urls[list->count] = list->text[list->count];
        list->count++;
        if (comma == NULL) {
            return 0;
        }
        p = comma + 1;
    }
}

static int parse_value(int c, const char *value, void *user)
{
    struct router_args *a = user;
    uint64_t n = 0;
    switch (c) {
    case 'n': return urls_add(&a->nodes, value);
    case 'R': return urls_add(&a->replicas, value);
    case 'H': a->cfg.listen = value; return 0;
    case 'k': a->cfg.token = value; return 0;
    case 'K': a->cfg.node_token = value; return 0;
    case 'p':
        if (cli_parse_u64(value, 1, QUERY_METRICS_LAG_PARTITIONS_MAX, &n) != 0) {
            return -1;
        }
        a->cfg.partitions = (uint32_t)n;
        return 0;
    case 't':
        if (cli_parse_u64(value, 1, QUERY_HTTP_THREADS_MAX, &n) != 0) {
            return -1;
        }
        a->cfg.threads = (uint32_t)n;
        return 0;
    }
    if (cli_parse_u64(value, 1, c == 'P' ? ROUTER_PROBE_MS_MAX : ROUTER_TIMEOUT_MS_MAX, &n) != 0) {
        return -1;
    }
    uint32_t *knob = c == 'T'   ? &a->cfg.timeout_ms
                     : c == 'C' ? &a->cfg.connect_timeout_ms
                                : &a->cfg.probe_interval_ms;
    *knob = (uint32_t)n;
    return 0;
}

static int parse_args(int argc, char **argv, struct router_args *a)
{
    static const struct option options[] = {{"node", required_argument, NULL, 'n'},
                                            {"replica", required_argument, NULL, 'R'},
                                            {"http", required_argument, NULL, 'H'},
                                            {"timeout-ms", required_argument, NULL, 'T'},
                                            {"connect-timeout-ms", required_argument, NULL, 'C'},
                                            {"probe-ms", required_argument, NULL, 'P'},
                                            {"partitions", required_argument, NULL, 'p'},
                                            {"threads", required_argument, NULL, 't'},
                                            {"http-token", required_argument, NULL, 'k'},
                                            {"node-token", required_argument, NULL, 'K'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    memset(a, 0, sizeof(*a));
    int next = 0;
    int rc = cli_options_parse("router", argc, argv, "", options, parse_value, a, &next);
    if (rc != 0) {
        return rc;
    }
    if (next < argc) {
        return cli_error("router", CLI_USAGE, "unexpected argument '%s'", argv[next]);
    }
    if (a->nodes.count == 0) {
        return cli_error("router", CLI_USAGE, "--node URL[,URL...] is required");
    }
    a->cfg.nodes = a->nodes.urls;
    a->cfg.node_count = a->nodes.count;
    a->cfg.replicas = a->replicas.urls;
    a->cfg.replica_count = a->replicas.count;
    if ((a->cfg.token != NULL && (a->cfg.token[0] == '\0' || strlen(a->cfg.token) > 256)) ||
        (a->cfg.node_token != NULL &&
         (a->cfg.node_token[0] == '\0' || strlen(a->cfg.node_token) > 256))) {
        return cli_error("router", CLI_USAGE, "a token is 1..256 bytes");
    }
    if (router_config_check(&a->cfg) != 0) {
        return cli_error("router", CLI_USAGE,
                         "a node URL must be http://HOST:PORT[/PREFIX] (printable, no quote, "
                         "backslash, '?' or '#', under %u bytes)",
                         ROUTER_NODE_URL_BYTES_MAX);
    }
    return 0;
}

int cmd_router(int argc, char **argv)
{
    struct router_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != 0) {
        return rc == -1 ? cli_help(cmd_router_usage) : rc;
    }
    sigset_t stop;
    cli_stop_signals_block(&stop);
    struct router *r = NULL;
    rc = router_start(&a.cfg, &r);
    if (rc != 0) {
        return cli_listen_error("router", "", a.cfg.listen, rc);
    }
    printf("%s\n", router_address(r));
    fflush(stdout);
    ds_log_info("router: listening on %s over %u nodes and %u replicas", router_address(r),
                a.cfg.node_count, a.cfg.replica_count);
    cli_stop_signals_wait(&stop);
    router_stop(r);
    return CLI_OK;
}
