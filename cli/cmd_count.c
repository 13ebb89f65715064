/*
 * `dayshard count --day D [--to D2] [--status S] [--by shard|hour|day] [--json] --data DIR`:
 * a count from the shell over a data directory, read-only, safe beside a live writer (it sees
 * the last committed state), or `--server URL` from a running query service. Both print the
 * same table (the service's JSON is read back into a struct query_count_result for
 * query_count_table) or, with --json, the service's document.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <inttypes.h>
#include <jansson.h>

#include "cli/cli.h"
#include "http/http.h"
#include "query/query.h"
#include "shard/shard.h"
#include "storage/storage.h"

const char cmd_count_usage[] =
    "usage: dayshard count --day YYYY-MM-DD [options] --data DIR\n"
    "\n"
    "Counts the orders of a day (or of the days --day..--to), with their exact amount sum,\n"
    "fanning out over every shard each day has ever had. Reads block summaries only.\n"
    "\n"
    "options:\n"
    "  --day D        first day (UTC), required\n"
    "  --to D2        last day, inclusive (default: D); at most 366 days\n"
    "  --status S     count only orders with this status\n"
    "  --by G         group by shard, hour or day\n"
    "  --json         print the JSON document of the HTTP API (/v1/count)\n"
    "  --data DIR     the data directory to read (read-only; a live writer may be using it)\n"
    "  --server URL   ask a running query service instead (e.g. http://127.0.0.1:8080)\n"
    "  --http-token T bearer token for --server (or DAYSHARD_HTTP_TOKEN)\n"
    "  --consistent   with --server: include every event acknowledged when asked; a node\n"
    "                 (run --http) waits until it stored every event its topic had\n"
    "                 acknowledged on its partitions, `serve` answers what was durable\n"
    "  --timeout-ms N with --consistent: wait at most N ms (1..60000, default 2000), then\n"
    "                 fail naming the partitions still missing\n"
    "  --help         this text\n";

struct count_args {
    const char *data;
    const char *server;
    const char *token;
    bool json;
    bool consistent;
    uint64_t timeout_ms; /* 0: the service's default */
    struct query_count_request req;
};

static int parse_value(int c, const char *value, struct count_args *a, bool *have_to)
{
    switch (c) {
    case 'D': return cli_parse_day(value, &a->req.day_first);
    case 't': *have_to = true; return cli_parse_day(value, &a->req.day_last);
    case 's':
        if (strlen(value) > DS_STATUS_BYTES_MAX) {
            return -DS_EUSAGE;
        }
        a->req.has_status = true;
        a->req.status_len = (uint8_t)strlen(value);
        memcpy(a->req.status, value, a->req.status_len);
        return 0;
    case 'b': return query_group_parse(value, &a->req.by);
    case 'd': a->data = value; return 0;
    case 'S': a->server = value; return 0;
    case 'T': a->token = value; return 0;
    case 'W': return cli_parse_u64(value, 1, QUERY_CONSISTENT_TIMEOUT_MS_MAX, &a->timeout_ms);
    }
    return -DS_EUSAGE;
}

static int parse_args(int argc, char **argv, struct count_args *a)
{
    static const struct option options[] = {
        {"day", required_argument, NULL, 'D'},    {"to", required_argument, NULL, 't'},
        {"status", required_argument, NULL, 's'}, {"by", required_argument, NULL, 'b'},
        {"json", no_argument, NULL, 'j'},         {"data", required_argument, NULL, 'd'},
        {"server", required_argument, NULL, 'S'}, {"http-token", required_argument, NULL, 'T'},
        {"consistent", no_argument, NULL, 'K'},   {"timeout-ms", required_argument, NULL, 'W'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    memset(a, 0, sizeof(*a));
    a->req.day_first = -1;
    a->token = getenv("DAYSHARD_HTTP_TOKEN");
    bool have_to = false;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
        char name[CLI_OPTION_NAME_SIZE];
        if (c == 'h') {
            return -1;
        }
        if (c == 'j' || c == 'K') {
            a->json = a->json || c == 'j';
            a->consistent = a->consistent || c == 'K';
            continue;
        }
        if (c == '?' || c == ':') {
            return cli_error("count", CLI_USAGE, "unknown or incomplete option '%s'",
                             argv[optind - 1]);
        }
        if (parse_value(c, optarg, a, &have_to) != 0) {
            return cli_error("count", CLI_USAGE, "bad value '%s' for %s", optarg,
                             cli_option_name(options, c, name));
        }
    }
    if (optind < argc) {
        return cli_error("count", CLI_USAGE, "unexpected argument '%s'", argv[optind]);
    }
    if (a->req.day_first < 0) {
        return cli_error("count", CLI_USAGE, "--day YYYY-MM-DD is required");
    }
    if (!have_to) {
        a->req.day_last = a->req.day_first;
    }
    if (a->req.day_last < a->req.day_first) {
        return cli_error("count", CLI_USAGE, "--to is before --day");
    }
    if ((a->data == NULL) == (a->server == NULL)) {
        return cli_error("count", CLI_USAGE, "give exactly one of --data DIR or --server URL");
    }
    if ((a->consistent || a->timeout_ms != 0) && a->server == NULL) {
        return cli_error("count", CLI_USAGE,
                         "--consistent and --timeout-ms need --server (--data reads every commit)");
    }
    if (a->timeout_ms != 0 && !a->consistent) {
        return cli_error("count", CLI_USAGE, "--timeout-ms bounds --consistent: give both");
    }
    return 0;
}

/* A count that touched damaged blocks says so on stderr (the JSON document carries
 * damaged_blocks itself): never a silent number. */
static void warn_damaged(const char *where, uint64_t damaged_blocks)
{
    if (damaged_blocks > 0) {
        fprintf(stderr,
                "dayshard count: warning: %s: the count touches %" PRIu64
                " damaged block%s whose records cannot be read; run `dayshard fsck --data DIR "
                "--repair` to quarantine them\n",
                where, damaged_blocks, damaged_blocks == 1 ? "" : "s");
    }
}

static int print_result(const struct count_args *a, const struct query_count_result *res)
{
    warn_damaged(a->data, res->damaged_blocks);
    if (!a->json) {
        query_count_table(&a->req, res, stdout);
        return CLI_OK;
    }
    size_t cap = query_count_json_bound(res);
    char *json = malloc(cap);
    if (json == NULL) {
        return cli_error("count", CLI_FAIL, "out of memory");
    }
    int64_t n = query_count_json(&a->req, res, json, cap);
    ASSERT(n > 0);
    fwrite(json, 1, (size_t)n, stdout);
    fputc('\n', stdout);
    free(json);
    return CLI_OK;
}

/* "-123.4500" (exactly four decimals, as the service writes it) into amount units. */
static int parse_amount(const char *text, ds_i128 *out)
{
    bool negative = text[0] == '-';
    const char *p = text + (negative ? 1 : 0);
    ds_i128 units = 0;
    int decimals = -1;
    for (; *p != '\0'; p++) {
        if (*p == '.' && decimals < 0) {
            decimals = 0;
            continue;
        }
        if (*p < '0' || *p > '9' || units > ((ds_i128)1 << 120)) {
            return -DS_EUSAGE;
        }
        units = units * 10 + (*p - '0');
        decimals += decimals >= 0 ? 1 : 0;
    }
    if (decimals != 4) {
        return -DS_EUSAGE;
    }
    *out = negative ? -units : units;
    return 0;
}

static int parse_group(json_t *g, enum query_group by, struct query_group_row *row)
{
    const char *key = json_string_value(json_object_get(g, "key"));
    const char *day = by == QUERY_GROUP_SHARD ? json_string_value(json_object_get(g, "day")) : key;
    const char *amount = json_string_value(json_object_get(g, "amount_sum"));
    json_t *count = json_object_get(g, "count");
    if (day == NULL || strlen(day) < 10 || amount == NULL || !json_is_integer(count) ||
        ds_date_parse(day, 10, &row->day) != 0 || parse_amount(amount, &row->amount_units) != 0) {
        return -DS_ECORRUPT;
    }
    row->count = (uint64_t)json_integer_value(count);
    if (by == QUERY_GROUP_SHARD) {
        json_t *shard = json_object_get(g, "key");
        row->shard = (uint32_t)json_integer_value(shard);
        return json_is_integer(shard) ? 0 : -DS_ECORRUPT;
    }
    if (by == QUERY_GROUP_HOUR) {
        unsigned hour = 0;
        if (strlen(key) < 13 || sscanf(key + 11, "%2u", &hour) != 1 || hour > 23) {
            return -DS_ECORRUPT;
        }
        row->hour = hour;
    }
    return 0;
}

/* Reads the service's count document back into res (groups allocated; the caller deinits). */
static int parse_count_document(const char *body, size_t len, enum query_group by,
                                struct query_count_result *res)
{
    memset(res, 0, sizeof(*res));
    json_error_t err;
    json_t *doc = json_loadb(body, len, 0, &err);
    json_t *count = json_object_get(doc, "count");
    json_t *groups = json_object_get(doc, "groups");
    const char *amount = json_string_value(json_object_get(doc, "amount_sum"));
    int rc = json_is_integer(count) && amount != NULL ? parse_amount(amount, &res->amount_units)
                                                      : -DS_ECORRUPT;
    res->count = (uint64_t)json_integer_value(count);
    res->partitions = (uint32_t)json_integer_value(json_object_get(doc, "partitions"));
    res->damaged_blocks = (uint64_t)json_integer_value(json_object_get(doc, "damaged_blocks"));
    const char *model = json_string_value(json_object_get(doc, "model"));
    if (model != NULL && storage_model_parse(model, &res->model) != 0) {
        rc = -DS_ECORRUPT; /* a model this client does not know: its counts mean something else */
    }
    size_t n = json_array_size(groups);
    if (rc == 0 && n > 0) {
        res->groups = calloc(n, sizeof(*res->groups));
        rc = res->groups != NULL ? 0 : -ENOMEM;
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = parse_group(json_array_get(groups, i), by, &res->groups[i]);
        res->group_count = i + 1;
    }
    json_decref(doc);
    return rc;
}

static int count_server(const struct count_args *a)
{
    char path[512];
    char first[DS_DATE_TEXT_SIZE];
    char last[DS_DATE_TEXT_SIZE];
    char status[3 * DS_STATUS_BYTES_MAX + 1] = "";
    static const char *const by_names[] = {"", "&by=shard", "&by=hour", "&by=day"};
    ds_date_format(a->req.day_first, first);
    ds_date_format(a->req.day_last, last);
    if (a->req.has_status) {
        char raw[DS_STATUS_BYTES_MAX + 1];
        memcpy(raw, a->req.status, a->req.status_len);
        raw[a->req.status_len] = '\0';
        http_client_url_escape(raw, status, sizeof(status));
    }
    char consistent[48] = "";
    if (a->consistent) {
        snprintf(consistent, sizeof(consistent), "&consistent=true");
    }
    if (a->timeout_ms != 0) {
        snprintf(consistent, sizeof(consistent), "&consistent=true&timeout_ms=%u",
                 (unsigned)a->timeout_ms);
    }
    snprintf(path, sizeof(path), "/v1/count?day=%s&to=%s%s%s%s%s", first, last,
             a->req.has_status ? "&status=" : "", status, by_names[a->req.by], consistent);
    struct http_client_answer ans;
    int rc = http_client_get(a->server, path, a->token, &ans);
    int exit_code = CLI_OK;
    struct query_count_result res = {0};
    if (rc != 0 || ans.status != 200) {
        exit_code = cli_error("count", CLI_FAIL, "%s: %s%s", a->server,
                              rc != 0 ? "" : "the service refused: ", ans.error);
    } else if (a->json) {
        fwrite(ans.body, 1, ans.body_len, stdout);
        fputc('\n', stdout);
    } else if (parse_count_document(ans.body, ans.body_len, a->req.by, &res) != 0) {
        exit_code = cli_error("count", CLI_FAIL, "%s: not a count document", a->server);
    } else {
        warn_damaged(a->server, res.damaged_blocks);
        query_count_table(&a->req, &res, stdout);
    }
    query_count_result_deinit(&res);
    http_client_answer_deinit(&ans);
    return exit_code;
}

int cmd_count(int argc, char **argv)
{
    struct count_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != 0) {
        return rc == -1 ? cli_help(cmd_count_usage) : rc;
    }
    if (a.server != NULL) {
        return count_server(&a);
    }
    /* A range too long is a usage error before any directory is read. */
    if ((int64_t)a.req.day_last - a.req.day_first + 1 > QUERY_RANGE_DAYS_DEFAULT) {
        return cli_error("count", CLI_USAGE, "range longer than %u days", QUERY_RANGE_DAYS_DEFAULT);
    }
    struct storage *st = NULL;
    struct shard_map *map = NULL;
    rc = storage_open_reader(a.data, &st);
    if (rc == 0) {
        rc = shard_map_open(a.data, SHARD_COUNT_DEFAULT, SHARD_MAP_READ_ONLY, &map);
    }
    struct query_count_result res = {0};
    if (rc == 0) {
        rc = query_count(st, map, &a.req, &res);
    }
    int exit_code =
        rc == 0 ? print_result(&a, &res)
                : cli_error("count", rc == -DS_ELIMIT ? CLI_USAGE : CLI_FAIL, "%s: %s", a.data,
                            rc == -DS_ELIMIT ? "range longer than 366 days" : ds_strerror(rc));
    query_count_result_deinit(&res);
    shard_map_close(map);
    storage_close(st);
    return exit_code;
}
