/*
 * `dayshard orders --customer C [--limit N] [--cursor T] [--consistent] (--server URL | --data
 * DIR) [--json]`: a customer's latest orders, newest first, from the by-customer index (GSI)
 * (docs/HTTP_API.md, docs/CONFIGURATION.md). --server asks a node's query service; --data reads
 * DIR/gsi directly through a read-only view (beside a running node too). A table by default, the
 * API's JSON document with --json; the next page's token is printed for --cursor.
 *
 * In the orders model each order is listed once, with its current version (the index keeps
 * superseded entries; query_orders_get skips them using the store).
 *
 * The customer id follows the API's rule: a positive decimal integer is an integer id, "..."
 * (with the quotes) is the string between them, anything else is a string id.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>

#include "cli/cli.h"
#include "http/http.h"
#include "query/query.h"
#include "storage/storage.h"

const char cmd_orders_usage[] =
    "usage: dayshard orders --customer C [--limit N] (--server URL | --data DIR) [options]\n"
    "\n"
    "Lists a customer's latest orders, newest first, from the by-customer index that a node\n"
    "builds (DIR/gsi). C is an integer id (42), or a string id (cust-7; \"42\" with the quotes\n"
    "for the string 42).\n"
    "\n"
    "options:\n"
    "  --customer C         the customer id, required\n"
    "  --limit N            orders per page (1..1000, default 20)\n"
    "  --cursor T           the page after the one that printed 'next: T'\n"
    "  --consistent         include every event acknowledged when asked: a node (run\n"
    "                       --http) waits until it stored and indexed every event its topic\n"
    "                       had acknowledged on its partitions; `serve` and --data wait until\n"
    "                       the index holds everything durable\n"
    "  --timeout-ms N       with --consistent: wait at most N ms (1..60000, default 2000)\n"
    "  --server URL         ask a node's query service (dayshard run --http)\n"
    "  --data DIR           read DIR's index directly (read-only)\n"
    "  --http-token TOKEN   bearer token for --server (or DAYSHARD_HTTP_TOKEN)\n"
    "  --json               print the API's JSON document\n"
    "  --help               this text\n";

struct orders_args {
    const char *customer;
    const char *cursor;
    bool consistent;
    const char *server;
    const char *data;
    const char *token;
    uint64_t timeout_ms; /* 0: the default */
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
                                            {"cursor", required_argument, NULL, 'k'},
                                            {"consistent", no_argument, NULL, 'K'},
                                            {"timeout-ms", required_argument, NULL, 'W'},
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
        case 'k': a->cursor = optarg; break;
        case 'K': a->consistent = true; break;
        case 'W':
            if (cli_parse_u64(optarg, 1, QUERY_CONSISTENT_TIMEOUT_MS_MAX, &a->timeout_ms) != 0) {
                return cli_error("orders", CLI_USAGE, "bad value '%s' for --timeout-ms", optarg);
            }
            break;
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
    if (a->customer == NULL || a->customer[0] == '\0' ||
        strlen(a->customer) > DS_ID_BYTES_MAX + 2) {
        return cli_error("orders", CLI_USAGE, "--customer C (1..64 bytes) is required");
    }
    if (a->cursor != NULL && strlen(a->cursor) > QUERY_ORDERS_TOKEN_CHARS_MAX) {
        return cli_error("orders", CLI_USAGE, "bad value for --cursor: too long");
    }
    if ((a->data == NULL) == (a->server == NULL)) {
        return cli_error("orders", CLI_USAGE, "give exactly one of --data DIR or --server URL");
    }
    if (a->timeout_ms != 0 && !a->consistent) {
        return cli_error("orders", CLI_USAGE, "--timeout-ms bounds --consistent: give both");
    }
    return 0;
}

/* Prints the API's orders document as a table; returns 0 or -DS_ECORRUPT. */
static int print_table(const char *body, size_t len)
{
    json_error_t err;
    json_t *doc = json_loadb(body, len, 0, &err);
    json_t *orders = json_object_get(doc, "orders");
    if (!json_is_array(orders)) {
        json_decref(doc);
        return -DS_ECORRUPT;
    }
    printf("%-24s %-24s %-12s %14s\n", "order_id", "ts", "status", "amount");
    size_t i;
    json_t *o;
    json_array_foreach(orders, i, o)
    {
        char *id = json_dumps(json_object_get(o, "order_id"), JSON_ENCODE_ANY);
        const char *ts = json_string_value(json_object_get(o, "ts"));
        const char *status = json_string_value(json_object_get(o, "status"));
        const char *amount = json_string_value(json_object_get(o, "amount"));
        printf("%-24s %-24s %-12s %14s\n", id != NULL ? id : "?", ts != NULL ? ts : "?",
               status != NULL ? status : "?", amount != NULL ? amount : "?");
        free(id);
    }
    const char *next = json_string_value(json_object_get(doc, "next"));
    json_t *lag = json_object_get(doc, "gsi_lag_ms");
    printf("%zu orders%s%s; index lag %lld ms\n", json_array_size(orders),
           next != NULL ? "; next: " : " (last page)", next != NULL ? next : "",
           (long long)json_integer_value(lag));
    json_decref(doc);
    return 0;
}

/* --consistent: waits (bounded) until the index holds every commit durable now. Returns 0 or
 * a CLI exit code (reported). */
static int orders_wait(const struct orders_args *a, struct index_reader *r)
{
    struct storage *st = NULL;
    int rc = storage_open_reader(a->data, &st);
    uint64_t want = rc == 0 ? storage_commit_seq(st) : 0;
    storage_close(st);
    if (rc != 0) {
        return cli_error("orders", CLI_FAIL, "%s: %s", a->data, ds_strerror(rc));
    }
    uint64_t indexed = 0;
    uint32_t timeout_ms =
        a->timeout_ms != 0 ? (uint32_t)a->timeout_ms : QUERY_CONSISTENT_TIMEOUT_MS_DEFAULT;
    rc = index_reader_wait(r, want, timeout_ms, NULL, &indexed);
    if (rc == -ETIMEDOUT) {
        return cli_error("orders", CLI_FAIL,
                         "the index did not catch up within %u ms (it holds commit %llu of %llu)",
                         timeout_ms, (unsigned long long)indexed, (unsigned long long)want);
    }
    if (rc != 0) {
        return cli_error("orders", CLI_FAIL, "%s: the index: %s", a->data, ds_strerror(rc));
    }
    return 0;
}

/* --data: the API's document from DIR's index. */
static int orders_local(const struct orders_args *a, char **body, size_t *len)
{
    struct ds_id customer;
    if (query_customer_id_parse(a->customer, strlen(a->customer), &customer) != 0) {
        return cli_error("orders", CLI_USAGE, "bad --customer '%s'", a->customer);
    }
    struct index_reader *r = NULL;
    int rc = index_reader_open(a->data, &r);
    if (rc == -ENOENT) {
        return cli_error("orders", CLI_FAIL,
                         "%s has no by-customer index (a node builds it unless --no-gsi; "
                         "`dayshard gsi rebuild --data DIR` makes one)",
                         a->data);
    }
    if (rc != 0) {
        return cli_error("orders", CLI_FAIL, "%s: %s", a->data, ds_strerror(rc));
    }
    if (a->consistent) {
        rc = orders_wait(a, r);
        if (rc != 0) {
            index_reader_close(r);
            return rc;
        }
    }
    /* The orders model lists only current versions: the store, opened after the index view
     * so that it is at least as recent, says which entries are. */
    struct storage *st = NULL;
    rc = storage_open_reader(a->data, &st);
    if (rc != 0) {
        index_reader_close(r);
        return cli_error("orders", CLI_FAIL, "%s: %s", a->data, ds_strerror(rc));
    }
    struct query_orders_page page = {.orders = calloc(a->limit, sizeof(struct query_order))};
    rc = page.orders == NULL ? -ENOMEM
                             : query_orders_get(index_reader_store(r), st, &customer,
                                                (uint32_t)a->limit, a->cursor, &page);
    storage_close(st);
    index_reader_close(r);
    if (rc == 0) {
        size_t cap = query_orders_json_bound(page.count);
        *body = malloc(cap);
        int64_t n = *body != NULL ? query_orders_json(&customer, &page, 0, *body, cap) : -ENOMEM;
        rc = n > 0 ? 0 : (int)n;
        *len = n > 0 ? (size_t)n : 0;
    }
    free(page.orders);
    if (rc != 0) {
        free(*body);
        *body = NULL;
        return cli_error("orders", rc == -DS_EUSAGE ? CLI_USAGE : CLI_FAIL, "%s",
                         rc == -DS_EUSAGE ? "bad --cursor: not one a page printed"
                                          : ds_strerror(rc));
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
        char *body = NULL;
        size_t len = 0;
        rc = orders_local(&a, &body, &len);
        if (rc == 0) {
            if (a.json) {
                fwrite(body, 1, len, stdout);
                fputc('\n', stdout);
            } else {
                rc = print_table(body, len) == 0 ? CLI_OK
                                                 : cli_error("orders", CLI_FAIL, "bad document");
            }
        }
        free(body);
        return rc;
    }
    char path[2048];
    char escaped[3 * (DS_ID_BYTES_MAX + 2) + 1];
    char cursor[3 * QUERY_ORDERS_TOKEN_CHARS_MAX + 1] = "";
    http_client_url_escape(a.customer, escaped, sizeof(escaped));
    if (a.cursor != NULL) {
        http_client_url_escape(a.cursor, cursor, sizeof(cursor));
    }
    char timeout[32] = "";
    if (a.timeout_ms != 0) {
        snprintf(timeout, sizeof(timeout), "&timeout_ms=%u", (unsigned)a.timeout_ms);
    }
    snprintf(path, sizeof(path), "/v1/customers/%s/orders?limit=%u%s%s%s%s", escaped,
             (unsigned)a.limit, a.cursor != NULL ? "&cursor=" : "", cursor,
             a.consistent ? "&consistent=true" : "", timeout);
    struct http_client_answer ans;
    rc = http_client_get(a.server, path, a.token, &ans);
    if (rc != 0) {
        http_client_answer_deinit(&ans);
        return cli_error("orders", CLI_FAIL, "%s: %s", a.server, ans.error);
    }
    int exit_code = CLI_OK;
    if (ans.status == 200 && !a.json) {
        if (print_table(ans.body, ans.body_len) != 0) {
            exit_code =
                cli_error("orders", CLI_FAIL, "%s answered a document without orders", a.server);
        }
    } else if (a.json || ans.status == 200) {
        fwrite(ans.body, 1, ans.body_len, stdout);
        fputc('\n', stdout);
    }
    if (ans.status != 200) {
        exit_code =
            cli_error("orders", CLI_FAIL, "%s answered %ld: %s", a.server, ans.status, ans.error);
    }
    http_client_answer_deinit(&ans);
    return exit_code;
}
