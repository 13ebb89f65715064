/*
 * `dayshard fsck --data DIR [--repair] [--json]`: verify every committed block (checksums,
 * decompression, aggregates), the manifest, what lies past committed ends, and the
 * by-customer index; --repair quarantines damaged committed blocks (storage_fsck), cuts what
 * no commit reached, and rebuilds the index when it is damaged or the base data changed.
 * Exit 0 clean, 1 damage found or left (or fsck could not run), 2 usage.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "http/http.h"
#include "query/query.h"
#include "storage/storage.h"

const char cmd_fsck_usage[] =
    "usage: dayshard fsck --data DIR [--repair] [--json]\n"
    "\n"
    "Verifies every committed block of DIR (header and payload CRC32C, decompression, and that\n"
    "the events add up to the aggregates in the block header), the MANIFEST, the bytes past\n"
    "every committed end, and the by-customer index against the base data.\n"
    "\n"
    "--repair (takes the writer lock: stop the writer first) never deletes acknowledged data:\n"
    "  - each damaged committed block (a block whose header is unreadable: the range up to\n"
    "    the next intact block header) is copied to DIR/quarantine/ as <name>.bin with a\n"
    "    <name>.json record (partition, segment, offset, length, events or null, source\n"
    "    partition and offset range, reason), synced, then taken out of the store by one new\n"
    "    MANIFEST that skips it; counts drop by exactly the quarantined events;\n"
    "  - bytes past a committed end and segments no commit reached are cut; when they hold\n"
    "    CRC-valid blocks (possibly acknowledged by a damaged MANIFEST record) those are\n"
    "    copied to DIR/quarantine/ first, with their events;\n"
    "  - a MANIFEST damaged before its tail keeps its valid prefix (the damaged file is\n"
    "    copied to DIR/quarantine/); what later records covered is quarantined as above;\n"
    "  - orders model: the orders-by-id store and the partitions are made to agree again: an\n"
    "    order whose current version was quarantined falls back to the newest version still\n"
    "    in the data (reverted: the store's current version when its row is there, else the\n"
    "    highest version, else the latest row), an order with no version left leaves the\n"
    "    store (lost); the partitions holding their rows are rewritten so that the\n"
    "    retractions balance. Each reverted or lost order is one line of\n"
    "    DIR/quarantine/<time>.orders.jsonl: {\"order\":ID,\"outcome\":\"reverted\"|\"lost\",\n"
    "    \"had\":{day,shard,ts_ms,version,status},\"now\":{...}|null};\n"
    "  - the by-customer index is rebuilt when damaged or when blocks were quarantined.\n"
    "The source offsets in each record say which events to feed again.\n"
    "\n"
    "Exit status: 0 clean (after repair), 1 damage found or left, or fsck could not run,\n"
    "2 usage error.\n"
    "\n"
    "options:\n"
    "  --data DIR   the data directory\n"
    "  --repair     quarantine damaged blocks, cut torn tails, remove uncommitted segments,\n"
    "               rebuild a damaged index\n"
    "  --json       print one JSON object: {\"ok\":bool,\"damaged_blocks\":N,\n"
    "               \"quarantined_blocks\":N,\"quarantined_events\":N,...,\"orders\":N,\n"
    "               \"retractions\":N,\"retractions_unmatched\":N,\"orders_mismatched\":N,\n"
    "               \"balance_unchecked\":N,\"orders_reverted\":N,\"orders_lost\":N,\n"
    "               \"model\":\"events\",\"index\":{...}}\n"
    "  --help       this text\n"
    "In the orders model fsck also checks that the retractions balance: in each partition, in\n"
    "append order, every retraction cancels an earlier row with the same order id, customer,\n"
    "ts, status and amount, and the rows left are exactly the orders' current versions in the\n"
    "orders-by-id store; the first violations are named with partition and order id, and any\n"
    "is damage (exit 1); --repair restores it (above).\n"
    "\n"
    "The output names DIR's data model (events or orders, recorded in DIR/MODEL when DIR was\n"
    "created; a directory made before models were recorded holds events). A damaged MODEL\n"
    "stops fsck: restore it (\"events\" or \"orders\" and a newline).\n";

static void print_index_json(const struct index_verify_report *g)
{
    char reason[6 * sizeof(g->reason) + 3];
    size_t len = strnlen(g->reason, sizeof(g->reason));
    if (http_json_string(g->reason, len, reason, sizeof(reason)) < 0) {
        snprintf(reason, sizeof(reason), "\"\"");
    }
    printf(",\"index\":{\"present\":%s,\"damaged\":%s,\"rebuilt\":%s,\"entries\":%" PRIu64
           ",\"covered_seq\":%" PRIu64 ",\"reason\":%s}",
           g->present ? "true" : "false", g->damaged ? "true" : "false",
           g->rebuilt ? "true" : "false", g->entries, g->covered_seq, reason);
}

/* The data model DIR records, as every reader sees it: its name, or NULL when a reader cannot
 * open DIR (a damaged MODEL: storage logged why), which is damage fsck reports. */
static const char *model_of(const char *data)
{
    struct storage *st = NULL;
    int rc = storage_open_reader(data, &st);
    if (rc != 0) {
        (void)cli_error("fsck", CLI_FAIL, "%s: readers cannot open it: %s", data, ds_strerror(rc));
        return NULL;
    }
    const char *name = storage_model_name(storage_model(st));
    storage_close(st);
    return name;
}

static void print_json(const struct storage_fsck_report *r, bool ok, const char *model,
                       const struct index_verify_report *g)
{
    printf("{\"ok\":%s,\"status\":\"%s\",\"damaged_blocks\":%" PRIu64
           ",\"quarantined_blocks\":%" PRIu64 ",\"quarantined_events\":%" PRIu64
           ",\"quarantined_bytes\":%" PRIu64 ",\"events_unknown_ranges\":%" PRIu64
           ",\"quarantined_total\":%" PRIu64 ",\"manifest_damaged\":%s,\"partitions\":%" PRIu64
           ",\"segments\":%" PRIu64 ",\"blocks_ok\":%" PRIu64 ",\"events_ok\":%" PRIu64
           ",\"blocks_bad\":%" PRIu64 ",\"torn_bytes\":%" PRIu64 ",\"orphan_segments\":%" PRIu64
           ",\"repaired\":%" PRIu64,
           ok ? "true" : "false", ok ? "clean" : "damaged", r->blocks_bad, r->quarantined_blocks,
           r->quarantined_events, r->quarantined_bytes, r->events_unknown_ranges,
           r->quarantined_total, r->manifest_damaged ? "true" : "false", r->partitions, r->segments,
           r->blocks_ok, r->events_ok, r->blocks_bad, r->torn_bytes, r->orphan_segments,
           r->repaired);
    printf(",\"orders\":%" PRIu64 ",\"retractions\":%" PRIu64 ",\"retractions_unmatched\":%" PRIu64
           ",\"orders_mismatched\":%" PRIu64 ",\"balance_unchecked\":%" PRIu64
           ",\"orders_reverted\":%" PRIu64 ",\"orders_lost\":%" PRIu64,
           r->orders, r->retractions, r->retractions_unmatched, r->orders_mismatched,
           r->balance_unchecked, r->orders_reverted, r->orders_lost);
    if (model != NULL) {
        printf(",\"model\":\"%s\"", model);
    } else {
        printf(",\"model\":null");
    }
    if (g != NULL) {
        print_index_json(g);
    }
    printf("}\n");
}

static void print_text(const char *data, const struct storage_fsck_report *r, bool ok,
                       const char *model)
{
    printf("%s: %s: %" PRIu64 " partitions, %" PRIu64 " segments, %" PRIu64 " blocks (%" PRIu64
           " events) ok, %" PRIu64 " damaged blocks, %" PRIu64 " torn bytes, %" PRIu64
           " orphan segments, model %s%s%s\n",
           data, ok ? "clean" : "damaged", r->partitions, r->segments, r->blocks_ok, r->events_ok,
           r->blocks_bad, r->torn_bytes, r->orphan_segments, model != NULL ? model : "unknown",
           r->manifest_damaged ? ", MANIFEST damaged" : "",
           r->repaired > 0 ? " (after repair)" : "");
    if (model != NULL && strcmp(model, "orders") == 0) {
        printf("%s: %" PRIu64 " orders, %" PRIu64 " retractions: %" PRIu64
               " cancel no earlier row, %" PRIu64 " rows and orders do not match",
               data, r->orders, r->retractions, r->retractions_unmatched, r->orders_mismatched);
        if (r->balance_unchecked > 0) {
            printf(" (balance not checked in %" PRIu64 " places: see above)", r->balance_unchecked);
        }
        printf("\n");
    }
    if (r->orders_reverted > 0 || r->orders_lost > 0) {
        printf("%s: repair reverted %" PRIu64
               " orders to the newest version present and lost %" PRIu64
               ": see %s/quarantine/*.orders.jsonl\n",
               data, r->orders_reverted, r->orders_lost, data);
    }
    if (r->quarantined_blocks > 0 || r->events_unknown_ranges > 0) {
        printf("%s: repair quarantined %" PRIu64 " blocks, %" PRIu64 " events (%" PRIu64
               " ranges of unknown events), %" PRIu64 " bytes: see %s/quarantine/\n",
               data, r->quarantined_blocks, r->quarantined_events, r->events_unknown_ranges,
               r->quarantined_bytes, data);
    }
}

int cmd_fsck(int argc, char **argv)
{
    static const struct option options[] = {{"data", required_argument, NULL, 'd'},
                                            {"repair", no_argument, NULL, 'r'},
                                            {"json", no_argument, NULL, 'j'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    const char *data = NULL;
    bool json = false;
    struct storage_fsck_options opts = {.report_file = stdout};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (c) {
        case 'd': data = optarg; break;
        case 'r': opts.repair = true; break;
        case 'j': json = true; break;
        case 'h': return cli_help(cmd_fsck_usage);
        default:
            return cli_error("fsck", CLI_USAGE, "unknown or incomplete option '%s'",
                             argv[optind - 1]);
        }
    }
    if (data == NULL || optind < argc) {
        return cli_error("fsck", CLI_USAGE,
                         data == NULL ? "--data DIR is required" : "unexpected argument");
    }
    FILE *report = json ? stderr : stdout;
    opts.report_file = report;
    struct storage_fsck_report r = {0};
    int rc = storage_fsck(data, &opts, &r);
    if (rc < 0) {
        if (json) {
            printf("{\"ok\":false,\"error\":\"%s\"}\n", ds_strerror(rc));
        }
        return cli_error("fsck", CLI_FAIL, "%s: %s", data, ds_strerror(rc));
    }
    /* The index after the base data: a repair that quarantined blocks changed what the index
     * must hold, and the rebuild needs the writer lock storage_fsck has released. */
    struct index_verify_report g = {0};
    char command[] = "fsck";
    int gsi_rc = index_verify(data, opts.repair,
                              r.quarantined_blocks > 0 || r.events_unknown_ranges > 0 ||
                                  r.orders_reverted > 0 || r.orders_lost > 0,
                              report, cli_index_note, command, &g);
    if (gsi_rc < 0) {
        (void)cli_error("fsck", CLI_FAIL, "%s: index check failed: %s", data, ds_strerror(gsi_rc));
    }
    const char *model = model_of(data);
    bool ok = rc == 0 && gsi_rc == 0 && model != NULL;
    if (json) {
        print_json(&r, ok, model, gsi_rc >= 0 ? &g : NULL);
    } else {
        print_text(data, &r, rc == 0 && model != NULL, model);
    }
    return ok ? CLI_OK : CLI_FAIL;
}
