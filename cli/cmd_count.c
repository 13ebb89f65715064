/*
 * `dayshard count --day D [--to D2] [--status S] [--by shard|hour|day] [--json] --data DIR`:
 * a count from the shell over a data directory, read-only, safe beside a live writer (it sees
 * the last committed state). --server arrives with the query service.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
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
    "  --server URL   ask a running query service instead (not available yet: see issue 4)\n"
    "  --help         this text\n";

struct count_args {
    const char *data;
    const char *server;
    bool json;
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
    }
    return -DS_EUSAGE;
}

static int parse_args(int argc, char **argv, struct count_args *a)
{
    static const struct option options[] = {{"day", required_argument, NULL, 'D'},
                                            {"to", required_argument, NULL, 't'},
                                            {"status", required_argument, NULL, 's'},
                                            {"by", required_argument, NULL, 'b'},
                                            {"json", no_argument, NULL, 'j'},
                                            {"data", required_argument, NULL, 'd'},
                                            {"server", required_argument, NULL, 'S'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    memset(a, 0, sizeof(*a));
    a->req.day_first = -1;
    bool have_to = false;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
        char name[CLI_OPTION_NAME_SIZE];
        if (c == 'h') {
            return -1;
        }
        if (c == 'j') {
            a->json = true;
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
    return 0;
}

static int print_result(const struct count_args *a, const struct query_count_result *res)
{
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

int cmd_count(int argc, char **argv)
{
    struct count_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != 0) {
        return rc == -1 ? cli_help(cmd_count_usage) : rc;
    }
    if (a.server != NULL) {
        return cli_error("count", CLI_FAIL,
                         "--server is not available yet (the query service "
                         "arrives with issue 4); use --data DIR");
    }
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = a.data;
    cfg.read_only = true;
    cfg.partitions_max = STORAGE_PARTITIONS_MAX; /* whatever the writer was configured with */
    struct storage *st = NULL;
    struct shard_map *map = NULL;
    rc = storage_open(&cfg, &st);
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
