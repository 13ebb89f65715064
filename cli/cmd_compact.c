/*
 * `dayshard compact --data DIR [--json]`: rewrites every partition of an orders-model directory
 * that holds superseded versions, so that it keeps only its current ones (storage_compact), and
 * reports the rows and bytes before and after. A running node does the same in the background
 * (a partition at a time, once it has enough dead rows); this is for a directory at rest and
 * for measuring what superseded versions cost. Exit 0 done, 1 failure, 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "storage/storage.h"

const char cmd_compact_usage[] =
    "usage: dayshard compact --data DIR [--json]\n"
    "\n"
    "Rewrites every partition of DIR (orders model) that holds superseded versions and their\n"
    "retractions, so that it keeps only the orders' current versions: counts, sums and orders\n"
    "stay exactly the same, the bytes of the superseded versions come back. Takes the writer\n"
    "lock (stop the node on DIR first); a running node compacts in the background by itself,\n"
    "a partition at a time once it has at least 16,384 dead rows and they make a quarter of\n"
    "its rows or more.\n"
    "The replaced segment files are removed as DIR is opened again.\n"
    "\n"
    "options:\n"
    "  --data DIR   the data directory (orders model)\n"
    "  --json       print {\"partitions\":N,\"compacted\":N,\"rows_before\":N,\"rows_after\":N,\n"
    "               \"bytes_before\":N,\"bytes_after\":N,\"seconds\":S}\n"
    "  --help       this text\n";

struct compact_args {
    const char *data;
    bool json;
};

static int compact_option(int c, const char *value, void *user)
{
    struct compact_args *a = user;
    switch (c) {
    case 'd': a->data = value; return 0;
    case 'j': a->json = true; return 0;
    default: return -1;
    }
}

/* The partitions of DIR, collected before any rewrite. */
struct part_list {
    int32_t *day;
    uint32_t *shard;
    size_t count, capacity;
};

static int collect_part(int32_t day, uint32_t shard, void *user)
{
    struct part_list *l = user;
    if (l->count == l->capacity) {
        size_t capacity = l->capacity == 0 ? 256 : l->capacity * 2;
        int32_t *days = realloc(l->day, capacity * sizeof(*days));
        if (days != NULL) {
            l->day = days;
        }
        uint32_t *shards = days != NULL ? realloc(l->shard, capacity * sizeof(*shards)) : NULL;
        if (shards == NULL) {
            return -ENOMEM;
        }
        l->shard = shards;
        l->capacity = capacity;
    }
    l->day[l->count] = day;
    l->shard[l->count++] = shard;
    return 0;
}

struct compact_totals {
    uint64_t compacted, rows_before, rows_after, bytes_before, bytes_after;
};

static int compact_all(struct storage *st, const struct part_list *l, struct compact_totals *t)
{
    for (size_t i = 0; i < l->count; i++) {
        struct storage_partition_total before;
        int rc = storage_partition_totals(st, l->day[i], l->shard[i], NULL, 0, &before);
        struct storage_compact_report r = {0};
        rc = rc == 0 ? storage_compact(st, l->day[i], l->shard[i], &r) : rc;
        if (rc < 0) {
            return rc;
        }
        t->compacted += rc == 1;
        t->rows_before += rc == 1 ? r.rows_before : before.rows;
        t->rows_after += rc == 1 ? r.rows_after : before.rows;
        t->bytes_before += rc == 1 ? r.bytes_before : before.bytes;
        t->bytes_after += rc == 1 ? r.bytes_after : before.bytes;
    }
    return 0;
}

int cmd_compact(int argc, char **argv)
{
    struct compact_args a = {0};
    static const struct option options[] = {{"data", required_argument, NULL, 'd'},
                                            {"json", no_argument, NULL, 'j'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    int next = 0;
    int rc = cli_options_parse("compact", argc, argv, "", options, compact_option, &a, &next);
    if (rc != 0) {
        return rc == -1 ? cli_help(cmd_compact_usage) : rc;
    }
    if (next < argc) {
        return cli_error("compact", CLI_USAGE, "unexpected argument '%s'", argv[next]);
    }
    if (a.data == NULL) {
        return cli_error("compact", CLI_USAGE, "--data DIR is required");
    }
    struct storage *st = NULL;
    rc = storage_open_reader(a.data, &st); /* refuses a missing or mistyped directory */
    storage_close(st);
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = a.data;
    rc = rc == 0 ? storage_open(&cfg, &st) : rc;
    if (rc != 0) {
        return cli_error("compact", CLI_FAIL, "%s: %s", a.data,
                         rc == -DS_ELOCKED ? "a node is running on it (DIR/LOCK is held); stop "
                                             "it first"
                                           : ds_strerror(rc));
    }
    if (storage_model(st) != STORAGE_MODEL_ORDERS) {
        storage_close(st);
        return cli_error("compact", CLI_USAGE,
                         "%s counts events: every row is current, there is nothing to compact",
                         a.data);
    }
    uint64_t start_ns = ds_clock_ns();
    struct part_list parts = {0};
    struct compact_totals t = {0};
    rc = storage_partition_visit(st, collect_part, &parts);
    rc = rc == 0 ? compact_all(st, &parts, &t) : rc;
    storage_close(st);
    if (rc == 0) {
        rc = storage_open(&cfg, &st); /* recovery removes the replaced segments */
        storage_close(st);
    }
    free(parts.day);
    free(parts.shard);
    if (rc != 0) {
        return cli_error("compact", CLI_FAIL, "%s: %s", a.data, ds_strerror(rc));
    }
    double seconds = (double)(ds_clock_ns() - start_ns) / 1e9;
    if (a.json) {
        printf("{\"partitions\":%zu,\"compacted\":%" PRIu64 ",\"rows_before\":%" PRIu64
               ",\"rows_after\":%" PRIu64 ",\"bytes_before\":%" PRIu64 ",\"bytes_after\":%" PRIu64
               ",\"seconds\":%.3f}\n",
               parts.count, t.compacted, t.rows_before, t.rows_after, t.bytes_before, t.bytes_after,
               seconds);
    } else {
        printf("compacted %" PRIu64 " of %zu partitions: %" PRIu64 " -> %" PRIu64 " rows, %" PRIu64
               " -> %" PRIu64 " bytes of blocks, %.2f s\n",
               t.compacted, parts.count, t.rows_before, t.rows_after, t.bytes_before, t.bytes_after,
               seconds);
    }
    return CLI_OK;
}
