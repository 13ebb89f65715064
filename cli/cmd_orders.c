/*
 * `dayshard orders --customer C [--limit N] (--server URL | --data DIR) [--json]`: a customer's
 * latest orders, newest first (DESIGN.md section 6). The by-customer index (GSI) does not exist
 * yet: --server asks the service, which answers 501 with the reason, and --data says so
 * directly. Both exit 1 with that reason. TODO(issue 5): read the GSI.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/http_client.h"

const char cmd_orders_usage[] =
    "usage: dayshard orders --customer C [--limit N] (--server URL | --data DIR) [options]\n"
    "\n"
    "Lists a customer's latest orders, newest first, from the by-customer index (GSI).\n"
    "The index is not built yet (it arrives with its own issue): this command reports that\n"
    "and exits 1.\n"
    "\n"
    "options:\n"
    "  --customer C         the customer id (integer or string), required\n"
    "  --limit N            orders to list (1..1000, default 20)\n"
    "  --server URL         ask a running query service (e.g. http://127.0.0.1:8080)\n"
    "  --data DIR           read a data directory directly\n"
    "  --http-token TOKEN   bearer token for --server (or DAYSHARD_HTTP_TOKEN)\n"
    "  --json               print the service's JSON document\n"
    "  --help               this text\n";

struct orders_args {
    const char *customer;
    const char *server;
    const char *data;
    const char *token;
    uint64_t limit;
    bool json;
};

static int parse_args(int argc, char **argv, struct orders_args *a)
{
    static const struct option options[] = {{"customer", required_argument, NULL, 'c'},
                                            {"limit", required_argument, NULL, 'l'},
                                            {"server", required_argument, NULL, 'S'},
                                            {"data", required_argument, NULL, 'd'},
                                            {"http-token", required_argument, NULL, 'T'},
                                            {"json", no_argument, NULL, 'j'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    memset(a, 0, sizeof(*a));
    a->limit = 20;
    a->token = getenv("DAYSHARD_HTTP_TOKEN");
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (c) {
        case 'h': return -1;
        case 'c': a->customer = optarg; break;
        case 'S': a->server = optarg; break;
        case 'd': a->data = optarg; break;
        case 'T': a->token = optarg; break;
        case 'j': a->json = true; break;
        case 'l':
            if (cli_parse_u64(optarg, 1, 1000, &a->limit) != 0) {
                return cli_error("orders", CLI_USAGE, "bad value '%s' for --limit", optarg);
            }
            break;
        default:
            return cli_error("orders", CLI_USAGE, "unknown or incomplete option '%s'",
                             argv[optind - 1]);
        }
    }
    if (optind < argc) {
        return cli_error("orders", CLI_USAGE, "unexpected argument '%s'", argv[optind]);
    }
    if (a->customer == NULL || a->customer[0] == '\0' || strlen(a->customer) > DS_ID_BYTES_MAX) {
        return cli_error("orders", CLI_USAGE, "--customer C (1..64 bytes) is required");
    }
    if ((a->data == NULL) == (a->server == NULL)) {
        return cli_error("orders", CLI_USAGE, "give exactly one of --data DIR or --server URL");
    }
    return 0;
}

int cmd_orders(int argc, char **argv)
{
    struct orders_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != 0) {
        return rc == -1 ? cli_help(cmd_orders_usage) : rc;
    }
    if (a.data != NULL) {
        return cli_error("orders", CLI_FAIL,
                         "the by-customer index (GSI) is not built yet; no orders can be listed");
    }
    char path[512];
    char escaped[3 * DS_ID_BYTES_MAX + 1];
    cli_url_escape(a.customer, escaped, sizeof(escaped));
    snprintf(path, sizeof(path), "/v1/customers/%s/orders?limit=%u", escaped, (unsigned)a.limit);
    struct cli_http_answer ans;
    rc = cli_http_get(a.server, path, a.token, &ans);
    if (rc != 0) {
        return cli_error("orders", CLI_FAIL, "%s: %s", a.server, ans.error);
    }
    int exit_code = CLI_OK;
    if (a.json || ans.status == 200) {
        fwrite(ans.body, 1, ans.body_len, stdout);
        fputc('\n', stdout);
    }
    if (ans.status != 200) {
        exit_code =
            cli_error("orders", CLI_FAIL, "%s answered %ld: %s", a.server, ans.status, ans.error);
    }
    cli_http_answer_deinit(&ans);
    return exit_code;
}
