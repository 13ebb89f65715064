/*
 * `dayshard fsck --data DIR [--repair [--brokers B --topic T]] [--json]`: verify every
 * committed block (checksums, decompression, aggregates), the manifest, what lies past
 * committed ends, and the by-customer index; --repair quarantines damaged committed blocks
 * (storage_fsck), cuts what no commit reached, with --brokers restores the quarantined ranges
 * from the topic (ingest_restore_run) and checks the result again, and rebuilds the index when
 * it is damaged or the base data changed.
 * Exit 0 clean, 1 damage found or left (or fsck could not run), 2 usage.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "http/http.h"
#include "ingest/ingest.h"
#include "query/query.h"
#include "storage/storage.h"

const char cmd_fsck_usage[] =
    "usage: dayshard fsck --data DIR [--repair [--brokers B --topic T]] [--json]\n"
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
    "    \"had\":{day,shard,ts_ms,version,status,versions_seen},\"now\":{...}|null};\n"
    "  - the by-customer index is rebuilt when damaged or when blocks were quarantined.\n"
    "--brokers B --topic T (a directory a node wrote from Kafka): the repair re-reads each\n"
    "quarantined range's offsets from T and appends what the range lost as a node would\n"
    "(orders model: the events of the orders it reverted or lost; events model: the events\n"
    "of its day and shard), then marks it restored: a second repair applies nothing twice.\n"
    "What T no longer holds is reported (ids in DIR/quarantine/<time>.unrestored.jsonl).\n"
    "\n"
    "Exit status: 0 clean (after repair), 1 damage found or left, or fsck could not run,\n"
    "2 usage error.\n"
    "\n"
    "options:\n"
    "  --data DIR   the data directory\n"
    "  --repair     quarantine damaged blocks, cut torn tails, remove uncommitted segments,\n"
    "               rebuild a damaged index\n"
    "  --brokers B  with --repair: restore the quarantined ranges from the topic on B\n"
    "  --topic T    the topic DIR was consumed from (default orders)\n"
    "  -X key=value a librdkafka property for --brokers (SASL, TLS, ...); repeatable\n"
    "  --json       print one JSON object: {\"ok\":bool,\"damaged_blocks\":N,\n"
    "               \"quarantined_blocks\":N,\"quarantined_events\":N,...,\n"
    "               \"events_rolled_back\":N,...,\"rolled_back_into\":\"quarantine/\",\n"
    "               \"orders\":N,\"retractions\":N,\"retractions_unmatched\":N,\n"
    "               \"orders_mismatched\":N,\"balance_unchecked\":N,\"orders_reverted\":N,\n"
    "               \"orders_lost\":N,\n"
    "               \"model\":\"events\",\"index\":{...},\"restore\":{\"complete\":bool,\n"
    "               \"events_lost\":N,\"orders_reverted\":N,\"orders_lost\":N,...}}\n"
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

static void print_restore_json(const struct ingest_restore_report *x);

static void print_json(const struct storage_fsck_report *r, bool ok, const char *model,
                       const struct index_verify_report *g, const struct ingest_restore_report *x)
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
    /* What a damaged MANIFEST's repair rolled back: count = truth - quarantined_events -
     * events_rolled_back; the bytes are in rolled_back_into (under the data directory), with
     * records "committed":false. */
    printf(",\"blocks_rolled_back\":%" PRIu64 ",\"events_rolled_back\":%" PRIu64
           ",\"rolled_back_ranges\":%" PRIu64 ",\"rolled_back_bytes\":%" PRIu64,
           r->blocks_rolled_back, r->events_rolled_back, r->rolled_back_ranges,
           r->rolled_back_bytes);
    if (r->rolled_back_ranges > 0) {
        printf(",\"rolled_back_into\":\"quarantine/\"");
    } else {
        printf(",\"rolled_back_into\":null");
    }
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
    if (x != NULL) {
        print_restore_json(x);
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
    if (r->rolled_back_ranges > 0) {
        printf("%s: repair rolled back %" PRIu64 " blocks, %" PRIu64
               " events past committed ends (%" PRIu64 " bytes copied to %s/quarantine/)\n",
               data, r->blocks_rolled_back, r->events_rolled_back, r->rolled_back_bytes, data);
    }
}

/* A restore's figures: complete when every range is restored and nothing stayed lost. */
static bool restore_complete(const struct ingest_restore_report *x)
{
    return x->ranges == x->ranges_restored + x->ranges_done_before && x->events_lost == 0 &&
           x->orders.reverted == 0 && x->orders.lost == 0;
}

static void print_restore_json(const struct ingest_restore_report *x)
{
    printf(",\"restore\":{\"complete\":%s,\"ranges\":%" PRIu64 ",\"ranges_restored\":%" PRIu64
           ",\"ranges_done_before\":%" PRIu64 ",\"ranges_unrestorable\":%" PRIu64
           ",\"events_read\":%" PRIu64 ",\"events_applied\":%" PRIu64
           ",\"offsets_missing\":%" PRIu64 ",\"events_lost\":%" PRIu64 ",\"orders\":%" PRIu64
           ",\"orders_restored\":%" PRIu64 ",\"orders_reverted\":%" PRIu64
           ",\"orders_lost\":%" PRIu64 ",\"unrestored_file\":",
           restore_complete(x) ? "true" : "false", x->ranges, x->ranges_restored,
           x->ranges_done_before, x->ranges_unrestorable, x->events_read, x->events_applied,
           x->offsets_missing, x->events_lost, x->orders.orders, x->orders.restored,
           x->orders.reverted, x->orders.lost);
    char file[6 * sizeof(x->orders.file) + 3];
    size_t len = strnlen(x->orders.file, sizeof(x->orders.file));
    if (len == 0 || http_json_string(x->orders.file, len, file, sizeof(file)) < 0) {
        snprintf(file, sizeof(file), "null");
    }
    printf("%s}", file);
}

static void print_restore_text(const char *data, const struct ingest_restore_report *x)
{
    printf("%s: restore from the topic: %" PRIu64 " of %" PRIu64 " ranges restored (%" PRIu64
           " before, %" PRIu64 " without Kafka offsets), %" PRIu64 " events applied, %" PRIu64
           " offsets missing\n",
           data, x->ranges_restored, x->ranges, x->ranges_done_before, x->ranges_unrestorable,
           x->events_applied, x->offsets_missing);
    if (x->orders.orders > 0) {
        printf("%s: orders: %" PRIu64 " restored, %" PRIu64 " still reverted, %" PRIu64
               " still lost%s%s\n",
               data, x->orders.restored, x->orders.reverted, x->orders.lost,
               x->orders.file[0] != '\0' ? ": see " : "", x->orders.file);
    }
    if (x->events_lost > 0) {
        printf("%s: %" PRIu64 " events of the quarantined ranges not restored\n", data,
               x->events_lost);
    }
}

struct fsck_args {
    const char *data;
    const char *brokers;
    const char *topic;
    bool json;
    struct storage_fsck_options opts;
    struct ingest_kafka_props props;
};

static int parse_args(int argc, char **argv, struct fsck_args *a)
{
    static const struct option options[] = {{"data", required_argument, NULL, 'd'},
                                            {"repair", no_argument, NULL, 'r'},
                                            {"json", no_argument, NULL, 'j'},
                                            {"brokers", required_argument, NULL, 'b'},
                                            {"topic", required_argument, NULL, 't'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "X:", options, NULL)) != -1) {
        switch (c) {
        case 'd': a->data = optarg; break;
        case 'r': a->opts.repair = true; break;
        case 'j': a->json = true; break;
        case 'b': a->brokers = optarg; break;
        case 't': a->topic = optarg; break;
        case 'X':
            if (ingest_kafka_props_add(&a->props, optarg) != 0) {
                return cli_error("fsck", CLI_USAGE, "-X %s: expected key=value", optarg);
            }
            break;
        case 'h': return -1;
        default:
            return cli_error("fsck", CLI_USAGE, "unknown or incomplete option '%s'",
                             argv[optind - 1]);
        }
    }
    if (a->data == NULL || optind < argc) {
        return cli_error("fsck", CLI_USAGE,
                         a->data == NULL ? "--data DIR is required" : "unexpected argument");
    }
    if ((a->brokers != NULL || a->topic != NULL) && !a->opts.repair) {
        return cli_error("fsck", CLI_USAGE, "--brokers and --topic restore: they need --repair");
    }
    return 0;
}

/* --brokers: restores the quarantined ranges, then checks the directory again (the restored
 * versions must balance); rc becomes that check's. Returns 0 or the restore's error. */
static int restore_and_check(const struct fsck_args *a, struct storage_fsck_report *r, int *rc,
                             struct ingest_restore_report *x)
{
    struct ingest_restore_config cfg;
    ingest_restore_config_defaults(&cfg);
    cfg.data_dir = a->data;
    cfg.brokers = a->brokers;
    cfg.topic = a->topic != NULL ? a->topic : "orders";
    cfg.props = &a->props;
    int restore_rc = ingest_restore_run(&cfg, x);
    if (restore_rc != 0) {
        (void)cli_error("fsck", CLI_FAIL, "%s: restore from %s failed: %s", a->data, cfg.topic,
                        ds_strerror(restore_rc));
        return restore_rc;
    }
    if (x->events_applied == 0) {
        return 0;
    }
    struct storage_fsck_options check = {.report_file = a->opts.report_file};
    struct storage_fsck_report again = {0};
    *rc = storage_fsck(a->data, &check, &again);
    /* The balance after the restore; what the repair quarantined stays as it reported. */
    r->orders = again.orders;
    r->retractions = again.retractions;
    r->retractions_unmatched = again.retractions_unmatched;
    r->orders_mismatched = again.orders_mismatched;
    r->balance_unchecked = again.balance_unchecked;
    r->blocks_ok = again.blocks_ok;
    r->events_ok = again.events_ok;
    return 0;
}

int cmd_fsck(int argc, char **argv)
{
    struct fsck_args *a = calloc(1, sizeof(*a)); /* the properties are large */
    if (a == NULL) {
        return cli_error("fsck", CLI_FAIL, "out of memory");
    }
    int rc = parse_args(argc, argv, a);
    if (rc != 0) {
        free(a);
        return rc == -1 ? cli_help(cmd_fsck_usage) : rc;
    }
    FILE *report = a->json ? stderr : stdout;
    a->opts.report_file = report;
    struct storage_fsck_report r = {0};
    rc = storage_fsck(a->data, &a->opts, &r);
    if (rc < 0) {
        if (a->json) {
            printf("{\"ok\":false,\"error\":\"%s\"}\n", ds_strerror(rc));
        }
        (void)cli_error("fsck", CLI_FAIL, "%s: %s", a->data, ds_strerror(rc));
        free(a);
        return CLI_FAIL;
    }
    struct ingest_restore_report x = {0};
    int restore_rc = rc == 0 && a->brokers != NULL ? restore_and_check(a, &r, &rc, &x) : 0;
    /* The index after the base data: a repair that quarantined blocks (or a restore that
     * appended) changed what the index must hold, and the rebuild needs the writer lock
     * storage_fsck has released. */
    struct index_verify_report g = {0};
    char command[] = "fsck";
    int gsi_rc = index_verify(a->data, a->opts.repair,
                              r.quarantined_blocks > 0 || r.events_unknown_ranges > 0 ||
                                  r.blocks_rolled_back > 0 || r.orders_reverted > 0 ||
                                  r.orders_lost > 0 || x.events_applied > 0,
                              report, cli_index_note, command, &g);
    if (gsi_rc < 0) {
        (void)cli_error("fsck", CLI_FAIL, "%s: index check failed: %s", a->data,
                        ds_strerror(gsi_rc));
    }
    const char *model = model_of(a->data);
    bool ok = rc == 0 && gsi_rc == 0 && model != NULL && restore_rc == 0;
    bool restored = a->brokers != NULL && restore_rc == 0 && rc >= 0;
    if (a->json) {
        print_json(&r, ok, model, gsi_rc >= 0 ? &g : NULL, restored ? &x : NULL);
    } else {
        print_text(a->data, &r, rc == 0 && model != NULL, model);
        if (restored) {
            print_restore_text(a->data, &x);
        }
    }
    free(a);
    return ok ? CLI_OK : CLI_FAIL;
}
