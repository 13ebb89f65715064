/*
 * `dayshard order ID (--data DIR | --server URL) [--json] [--consistent] [--timeout-ms N]`: one
 * order's current version with its items and the number of versions seen (the order lookup), in
 * a data directory of the orders model. --data reads DIR's orders-by-id store through a
 * read-only handle (beside a running node too: it sees the last commit); --server asks GET
 * /v1/orders/{id}. --json prints the API's document (as_of and consistency are the service's
 * additions); the default is a few readable lines made from that same document, so both
 * sources print alike.
 *
 * Exit status: 0 found; 1 no such order (the message names it) or a failure; 2 a usage error,
 * and also a directory of the events model (HTTP 409): it keeps no orders, so the question
 * cannot be asked there, and a script can tell that from "not found". The id follows the API's
 * rule: a positive decimal integer is an integer id, "..." (with the quotes) the string
 * between them, anything else a string id.
 *
 * Rejected: printing the text form straight from struct storage_order for --data (two renderers
 * of one record would drift; the JSON document is the contract, so the text is made from it).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/http_client.h"
#include "query/query.h"
#include "storage/storage.h"

const char cmd_order_usage[] =
    "usage: dayshard order ID (--data DIR | --server URL) [options]\n"
    "\n"
    "Prints one order as it is now: its current version (customer, time, day and shard,\n"
    "status, amount, version), its line items and how many versions were seen. Needs a data\n"
    "directory of the orders model. ID is an integer id (108), or a string id (A-17; \"42\"\n"
    "with the quotes for the string 42).\n"
    "\n"
    "options:\n"
    "  --data DIR           read DIR's order store directly (read-only; it sees every commit)\n"
    "  --server URL         ask a query service (dayshard serve, or run --http)\n"
    "  --json               print the API's JSON document (GET /v1/orders/ID)\n"
    "  --consistent         with --server: include every event acknowledged when asked (a\n"
    "                       node waits until it stored them; `serve` answers with everything\n"
    "                       durable); --data always reads the last commit\n"
    "  --timeout-ms N       with --consistent: wait at most N ms (1..60000, default 2000)\n"
    "  --http-token TOKEN   bearer token for --server (or DAYSHARD_HTTP_TOKEN)\n"
    "  --help               this text\n"
    "\n"
    "exit status: 0 found, 1 no such order (or a failure), 2 usage error or a directory of\n"
    "the events model (it keeps no orders)\n";

/* The events model's refusal, the same words over both sources. */
#define ORDER_EVENTS_MODEL                                                                         \
    "the order lookup needs the orders model: %s counts events (it was created with --model "      \
    "events)"

struct order_args {
    const char *id;
    const char *server;
    const char *data;
    const char *token;
    bool json;
    bool consistent;
    uint64_t timeout_ms; /* 0: the default */
};

static int order_option(int c, const char *value, void *user)
{
    struct order_args *a = user;
    switch (c) {
    case 'S': a->server = value; return 0;
    case 'd': a->data = value; return 0;
    case 'T': a->token = value; return 0;
    case 'j': a->json = true; return 0;
    case 'K': a->consistent = true; return 0;
    case 'W': return cli_parse_u64(value, 1, QUERY_CONSISTENT_TIMEOUT_MS_MAX, &a->timeout_ms);
    default: return -1;
    }
}

static int parse_args(int argc, char **argv, struct order_args *a)
{
    static const struct option options[] = {{"server", required_argument, NULL, 'S'},
                                            {"data", required_argument, NULL, 'd'},
                                            {"http-token", required_argument, NULL, 'T'},
                                            {"json", no_argument, NULL, 'j'},
                                            {"consistent", no_argument, NULL, 'K'},
                                            {"timeout-ms", required_argument, NULL, 'W'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    memset(a, 0, sizeof(*a));
    a->token = getenv("DAYSHARD_HTTP_TOKEN");
    int next = 0;
    int rc = cli_options_parse("order", argc, argv, "", options, order_option, a, &next);
    if (rc != 0) {
        return rc;
    }
    if (next >= argc) {
        return cli_error("order", CLI_USAGE, "the order ID is required");
    }
    if (next + 1 < argc) {
        return cli_error("order", CLI_USAGE, "unexpected argument '%s'", argv[next + 1]);
    }
    a->id = argv[next];
    struct ds_id id;
    if (query_customer_id_parse(a->id, strlen(a->id), &id) != 0) {
        return cli_error("order", CLI_USAGE, "bad order ID '%.80s': 1..%d bytes, no NUL", a->id,
                         DS_ID_BYTES_MAX);
    }
    if ((a->data == NULL) == (a->server == NULL)) {
        return cli_error("order", CLI_USAGE, "give exactly one of --data DIR or --server URL");
    }
    if (a->timeout_ms != 0 && !a->consistent) {
        return cli_error("order", CLI_USAGE, "--timeout-ms bounds --consistent: give both");
    }
    return 0;
}

/* --data: the API's document (without as_of) into *body. Returns CLI_OK or an exit code
 * (reported). */
static int order_local(const struct order_args *a, char **body, size_t *len)
{
    struct ds_id id;
    int rc = query_customer_id_parse(a->id, strlen(a->id), &id);
    ASSERT(rc == 0); /* parse_args checked it */
    struct storage *st = NULL;
    rc = storage_open_reader(a->data, &st);
    if (rc != 0) {
        return cli_error("order", CLI_FAIL, "%s: %s", a->data, ds_strerror(rc));
    }
    struct storage_order order;
    void *scratch = malloc(STORAGE_ORDER_SCRATCH_BYTES);
    rc = scratch == NULL ? -ENOMEM
         : storage_model(st) != STORAGE_MODEL_ORDERS
             ? -DS_EUSAGE
             : storage_order_get(st, &id, &order, scratch, STORAGE_ORDER_SCRATCH_BYTES);
    int64_t n = rc;
    if (rc == 0) {
        size_t cap = query_order_json_bound(&order);
        *body = malloc(cap);
        n = *body != NULL ? query_order_json(&order, *body, cap) : -ENOMEM;
        *len = n > 0 ? (size_t)n : 0;
    }
    free(scratch);
    storage_close(st);
    if (n >= 0) {
        return CLI_OK;
    }
    free(*body);
    *body = NULL;
    if (n == -ENOENT) {
        return cli_error("order", CLI_FAIL, "no order %s in %s", a->id, a->data);
    }
    if (n == -DS_EUSAGE) {
        return cli_error("order", CLI_USAGE, ORDER_EVENTS_MODEL, a->data);
    }
    return cli_error("order", CLI_FAIL, "%s: order %s: %s", a->data, a->id, ds_strerror((int)n));
}

/* --server: GET /v1/orders/ID. Returns CLI_OK with *ans holding the document, or an exit code
 * (reported). */
static int order_remote(const struct order_args *a, struct cli_http_answer *ans)
{
    char escaped[3 * (DS_ID_BYTES_MAX + 2) + 1];
    cli_url_escape(a->id, escaped, sizeof(escaped));
    char path[sizeof(escaped) + 96];
    char timeout[32] = "";
    if (a->timeout_ms != 0) {
        snprintf(timeout, sizeof(timeout), "&timeout_ms=%u", (unsigned)a->timeout_ms);
    }
    snprintf(path, sizeof(path), "/v1/orders/%s%s%s", escaped,
             a->consistent ? "?consistent=true" : "", timeout);
    int rc = cli_http_get(a->server, path, a->token, ans);
    if (rc != 0) {
        return cli_error("order", CLI_FAIL, "%s: %s", a->server, ans->error);
    }
    if (ans->status == 200) {
        return CLI_OK;
    }
    if (ans->status == 404 && strstr(ans->body != NULL ? ans->body : "", "\"order_id\"") != NULL) {
        return cli_error("order", CLI_FAIL, "no order %s at %s", a->id, a->server);
    }
    if (ans->status == 409) {
        return cli_error("order", CLI_USAGE, ORDER_EVENTS_MODEL, a->server);
    }
    return cli_error("order", CLI_FAIL, "%s answered %ld: %s", a->server, ans->status, ans->error);
}

/* The text of a JSON value for people: strings bare, the rest as JSON. Owned by the caller. */
static char *value_text(json_t *v)
{
    if (json_is_string(v)) {
        return strdup(json_string_value(v));
    }
    return v != NULL ? json_dumps(v, JSON_ENCODE_ANY) : strdup("?");
}

/* Prints the API's order document as readable lines; returns 0 or -DS_ECORRUPT. */
static int print_text(const char *body, size_t len)
{
    json_error_t err;
    json_t *doc = json_loadb(body, len, 0, &err);
    if (!json_is_object(doc)) {
        json_decref(doc);
        return -DS_ECORRUPT;
    }
    static const char *const fields[] = {"order_id", "customer_id", "ts",     "day",
                                         "shard",    "status",      "amount", "version"};
    char *text[DS_ARRAY_LEN(fields)];
    for (size_t i = 0; i < DS_ARRAY_LEN(fields); i++) {
        text[i] = value_text(json_object_get(doc, fields[i]));
    }
    json_t *items = json_object_get(doc, "items");
    printf("order %s\n  customer  %s\n  ts        %s\n  day       %s (shard %s)\n"
           "  status    %s\n  amount    %s\n  version   %s\n  versions  %lld seen\n",
           text[0], text[1], text[2], text[3], text[4], text[5], text[6],
           strcmp(text[7], "null") == 0 ? "none" : text[7],
           (long long)json_integer_value(json_object_get(doc, "versions_seen")));
    for (size_t i = 0; i < DS_ARRAY_LEN(fields); i++) {
        free(text[i]);
    }
    if (!json_is_array(items)) {
        printf("  items     none\n");
    } else {
        printf("  items     %zu\n", json_array_size(items));
        size_t i;
        json_t *item;
        json_array_foreach(items, i, item)
        {
            printf("    %6lld x %s\n",
                   (long long)json_integer_value(json_object_get(item, "quantity")),
                   json_string_value(json_object_get(item, "product")) != NULL
                       ? json_string_value(json_object_get(item, "product"))
                       : "?");
        }
    }
    json_decref(doc);
    return 0;
}

int cmd_order(int argc, char **argv)
{
    struct order_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != 0) {
        return rc == -1 ? cli_help(cmd_order_usage) : rc;
    }
    char *body = NULL;
    size_t len = 0;
    struct cli_http_answer ans = {0};
    if (a.data != NULL) {
        rc = order_local(&a, &body, &len);
    } else {
        rc = order_remote(&a, &ans);
        body = ans.body;
        len = ans.body_len;
    }
    if (rc == CLI_OK && a.json) {
        fwrite(body, 1, len, stdout);
        fputc('\n', stdout);
    } else if (rc == CLI_OK && print_text(body, len) != 0) {
        rc = cli_error("order", CLI_FAIL, "%s answered a document that is not an order",
                       a.server != NULL ? a.server : a.data);
    }
    if (a.data != NULL) {
        free(body);
    } else {
        cli_http_answer_deinit(&ans);
    }
    return rc;
}
