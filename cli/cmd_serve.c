/*
 * `dayshard serve --data DIR [--http HOST:PORT] [--http-token T] [--max-range-days N]
 * [--threads N]`: the HTTP query service alone, read-only over a data directory that a node or
 * `ingest` writes (docs/HTTP_API.md, docs/CONFIGURATION.md). The bound address is the first line of
 * standard output (so a test can ask for port 0); SIGINT or SIGTERM stops it with exit 0.
 *
 * SIGINT and SIGTERM are blocked before the service starts, so its threads inherit the mask,
 * and the main thread waits for them with sigwaitinfo: no handler, no global flag.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "query/query.h"

const char cmd_serve_usage[] =
    "usage: dayshard serve --data DIR [options]\n"
    "\n"
    "Serves the HTTP query API (GET /v1/count, /v1/partitions, /v1/customers/{id}/orders,\n"
    "/v1/orders/{id}, /metrics, /healthz, /readyz, and the console at /, which shows the day\n"
    "counts; /v1/heat and its history and stream answer 501: heat is a node's, not the data's)\n"
    "over a data directory, read-only: a node or `dayshard ingest` may be writing it, and\n"
    "every request sees the last durable commit. Prints the bound address (HOST:PORT) as the\n"
    "first line of standard output, then serves until SIGINT or SIGTERM and exits 0.\n"
    "consistent=true (count, orders, order; timeout_ms 1..60000, default 2000): serve knows no "
    "broker,\n"
    "so it guarantees what was durable when the request arrived (\"consistency\":\"durable\");\n"
    "ask a node's --http for every event the topic acknowledged (\"acknowledged\").\n"
    "\n"
    "options:\n"
    "  --data DIR            the data directory (read-only), required\n"
    "  --http HOST:PORT      where to listen (default 127.0.0.1:8080; port 0 picks a free one)\n"
    "  --http-token TOKEN    require 'Authorization: Bearer TOKEN' (or the console's cookie,\n"
    "                        set by opening /?token=TOKEN) on every path but /healthz and\n"
    "                        /readyz; use it for any bind that is not loopback\n"
    "  --max-range-days N    longest /v1/count range in days (default 366, at most 3660)\n"
    "  --threads N           worker threads, each with its own storage reader (default 2)\n"
    "  --help                this text\n"
    "\n"
    "exit status: 0 stopped by a signal, 1 could not start (data dir unreadable, address in\n"
    "use), 2 usage error\n";

struct serve_args {
    struct query_http_config cfg;
};

static int parse_value(int c, const char *value, void *user)
{
    struct serve_args *a = user;
    uint64_t n = 0;
    switch (c) {
    case 'd': a->cfg.data_dir = value; return 0;
    case 'H': a->cfg.listen = value; return 0;
    case 'T': a->cfg.token = value; return value[0] != '\0' && strlen(value) <= 256 ? 0 : -1;
    case 'r':
        if (cli_parse_u64(value, 1, QUERY_RANGE_DAYS_MAX, &n) != 0) {
            return -1;
        }
        a->cfg.range_days_max = (uint32_t)n;
        return 0;
    case 't':
        if (cli_parse_u64(value, 1, QUERY_HTTP_THREADS_MAX, &n) != 0) {
            return -1;
        }
        a->cfg.threads = (uint32_t)n;
        return 0;
    }
    return -1;
}

static int parse_args(int argc, char **argv, struct serve_args *a)
{
    static const struct option options[] = {{"data", required_argument, NULL, 'd'},
                                            {"http", required_argument, NULL, 'H'},
                                            {"http-token", required_argument, NULL, 'T'},
                                            {"max-range-days", required_argument, NULL, 'r'},
                                            {"threads", required_argument, NULL, 't'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    memset(a, 0, sizeof(*a));
    int next = 0;
    int rc = cli_options_parse("serve", argc, argv, "", options, parse_value, a, &next);
    if (rc != 0) {
        return rc;
    }
    if (next < argc) {
        return cli_error("serve", CLI_USAGE, "unexpected argument '%s'", argv[next]);
    }
    if (a->cfg.data_dir == NULL) {
        return cli_error("serve", CLI_USAGE, "--data DIR is required");
    }
    return 0;
}

int cmd_serve(int argc, char **argv)
{
    struct serve_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != 0) {
        return rc == -1 ? cli_help(cmd_serve_usage) : rc;
    }
    sigset_t stop;
    cli_stop_signals_block(&stop);
    struct query_http *h = NULL;
    rc = query_http_start(&a.cfg, &h);
    if (rc != 0) {
        return cli_listen_error("serve", "", a.cfg.listen, rc);
    }
    printf("%s\n", query_http_address(h));
    fflush(stdout);
    ds_log_info("serve: listening on %s over %s", query_http_address(h), a.cfg.data_dir);
    cli_stop_signals_wait(&stop);
    query_http_stop(h);
    return CLI_OK;
}
