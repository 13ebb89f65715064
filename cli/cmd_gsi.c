/*
 * `dayshard gsi rebuild --data DIR [--json]`: rebuilds the by-customer index DIR/gsi from the
 * base segments, after its files were lost or damaged (index_rebuild, which `fsck --repair`
 * reaches through index_verify too). `dayshard gsi check --data DIR [--json]` verifies the index
 * without changing it (index_verify). `dayshard gsi compact --data DIR [--json]` seals the
 * index's log (index_compact). This file parses arguments and prints; the index's lines reach
 * the terminal through cli_index_note, so rebuild and fsck print them alike.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "http/http.h"
#include "index/index.h"
#include "query/query.h"

#define GSI_CMD "gsi rebuild"
#define GSI_CHECK_CMD "gsi check"
#define GSI_COMPACT_CMD "gsi compact"

const char cmd_gsi_usage[] =
    "usage: dayshard gsi rebuild --data DIR [--slots-log2 K] [--json]\n"
    "       dayshard gsi check --data DIR [--json]\n"
    "       dayshard gsi compact --data DIR [--json]\n"
    "\n"
    "Maintenance of the by-customer index DIR/gsi (the view behind\n"
    "/v1/customers/{id}/orders and `dayshard orders`).\n"
    "\n"
    "rebuild: builds the index again from the base segments of DIR, after its files were lost\n"
    "or damaged. It needs the writer lock of DIR (stop the node first; it refuses while one\n"
    "runs, and no node can start until it is done) and opens DIR like a node would, cutting\n"
    "uncommitted tails. The old index is moved to DIR/gsi.old-PID first and removed once the\n"
    "new one is complete, so an interrupted rebuild leaves it there for inspection; run the\n"
    "rebuild again to finish. Progress goes to stderr, a summary to stdout.\n"
    "`gsi compact` afterwards makes it about a fifth of the size.\n"
    "Exit status: 0 rebuilt, 1 failure (a node is running, no data, an error), 2 usage error.\n"
    "\n"
    "check: verifies the index without changing it (beside a running node too): every file of\n"
    "DIR/gsi (checksums, record links, the table checkpoint against the log), then its entries\n"
    "against the base segments up to the commit its cursor covers. A torn tail a crash left is\n"
    "not damage (the builder replays it). `dayshard fsck` runs the same check; `dayshard fsck\n"
    "--repair` or `gsi rebuild` repairs. Exit status: 0 clean (or no index), 1 damage, 2 usage.\n"
    "\n"
    "compact: rewrites the index's log so that each customer's orders sit in a few sealed,\n"
    "compressed records (about a quarter of the bytes; deep pages read less). Answers do not\n"
    "change. It needs the index's writer lock (stop the node first); `serve` processes notice\n"
    "the new log and reopen it. A crash leaves the old log or the new one whole.\n"
    "Exit status: 0 compacted, 1 failure (a node is running, no index, an error), 2 usage.\n"
    "\n"
    "options:\n"
    "  --data DIR       the data directory (where `dayshard run --data DIR` keeps its data)\n"
    "  --slots-log2 K   the new index's initial customer table: 2^K slots of 24 bytes, K in\n"
    "                   5..30 (default 21: 48 MiB, a million customers at a quarter load);\n"
    "                   seals (online, and `gsi compact`) double it while more than half is\n"
    "                   used\n"
    "  --json           print the summary as JSON\n"
    "  --help           this text\n";

static void print_summary(const struct index_rebuilt *r, bool json)
{
    if (json) {
        printf("{\"status\":\"rebuilt\",\"index\":");
        char quoted[2 * DS_PATH_MAX];
        int64_t n = http_json_string(r->gsi_dir, strlen(r->gsi_dir), quoted, sizeof(quoted));
        printf("%s", n > 0 ? quoted : "null");
        printf(",\"events\":%llu,\"partitions\":%llu,\"commit_seq\":%llu,\"seconds\":%.3f,"
               "\"index_bytes\":%llu}\n",
               (unsigned long long)r->events, (unsigned long long)r->partitions,
               (unsigned long long)r->commit_seq, r->seconds, (unsigned long long)r->index_bytes);
        return;
    }
    printf("%s: rebuilt from %llu events in %llu partitions (up to commit %llu) in %.1f s; "
           "%llu bytes on disk\n",
           r->gsi_dir, (unsigned long long)r->events, (unsigned long long)r->partitions,
           (unsigned long long)r->commit_seq, r->seconds, (unsigned long long)r->index_bytes);
}

/* Both subcommands' options; --slots-log2 only for rebuild. */
struct gsi_args {
    const char *command; /* for messages: "gsi rebuild" or "gsi check" */
    bool rebuild;
    const char *data;
    bool json;
    uint32_t slots_log2; /* 0: the default */
};

static int gsi_option(int c, const char *value, void *user)
{
    struct gsi_args *a = user;
    uint64_t k = 0;
    switch (c) {
    case 'd': a->data = value; return 0;
    case 'j': a->json = true; return 0;
    case 's':
        if (!a->rebuild ||
            cli_parse_u64(value, INDEX_TABLE_SLOTS_LOG2_MIN, INDEX_TABLE_SLOTS_LOG2_MAX, &k) != 0) {
            return -1;
        }
        a->slots_log2 = (uint32_t)k;
        return 0;
    default: return -1;
    }
}

/* Returns 0, -1 after --help was printed, or a CLI exit code (reported). */
static int gsi_args_parse(struct gsi_args *a, int argc, char **argv)
{
    static const struct option options[] = {{"data", required_argument, NULL, 'd'},
                                            {"slots-log2", required_argument, NULL, 's'},
                                            {"json", no_argument, NULL, 'j'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    int next = 0;
    int rc = cli_options_parse(a->command, argc, argv, "", options, gsi_option, a, &next);
    if (rc == -1) {
        (void)cli_help(cmd_gsi_usage);
        return -1;
    }
    if (rc != 0) {
        return rc;
    }
    if (a->data == NULL || next < argc) {
        return cli_error(a->command, CLI_USAGE,
                         a->data == NULL ? "--data DIR is required" : "unexpected argument");
    }
    if (a->data[0] == '\0' || strlen(a->data) > DS_PATH_MAX - 64) {
        return cli_error(a->command, CLI_USAGE, "bad value for --data");
    }
    return 0;
}

/* Compacts DATA/gsi; *stats says what it did. Returns 0 or a CLI exit code (reported). */
static int gsi_compact_dir(const char *command, const char *data, struct index_compact_stats *stats)
{
    char dir[DS_PATH_MAX];
    char log[DS_PATH_MAX + 8];
    index_dir(data, dir);
    snprintf(log, sizeof(log), "%s/log", dir);
    if (access(log, F_OK) != 0) {
        int err = errno;
        return cli_error(command, CLI_FAIL, "%s: %s", dir,
                         err == ENOENT ? "no index here (`dayshard gsi rebuild` builds one)"
                                       : strerror(err));
    }
    struct index_config cfg;
    index_config_defaults(&cfg);
    cfg.dir = dir;
    struct index *g = NULL;
    int rc = index_open(&cfg, &g);
    rc = rc == 0 ? index_compact(g, stats) : rc;
    index_close(g);
    if (rc != 0) {
        return cli_error(command, CLI_FAIL, "%s: %s%s", dir, ds_strerror(rc),
                         rc == -DS_ELOCKED ? " (stop the node first)" : "");
    }
    return 0;
}

static int cmd_gsi_compact(int argc, char **argv)
{
    struct gsi_args a = {.command = GSI_COMPACT_CMD};
    int rc = gsi_args_parse(&a, argc, argv);
    if (rc != 0) {
        return rc < 0 ? CLI_OK : rc;
    }
    struct index_compact_stats stats = {0};
    rc = gsi_compact_dir(GSI_COMPACT_CMD, a.data, &stats);
    if (rc != 0) {
        return rc;
    }
    if (a.json) {
        printf("{\"status\":\"compacted\",\"log_bytes_before\":%llu,\"log_bytes_after\":%llu,"
               "\"seconds\":%.3f}\n",
               (unsigned long long)stats.bytes_before, (unsigned long long)stats.bytes_after,
               stats.seconds);
    } else {
        printf("%s/gsi: compacted the log from %llu to %llu bytes in %.1f s\n", a.data,
               (unsigned long long)stats.bytes_before, (unsigned long long)stats.bytes_after,
               stats.seconds);
    }
    return CLI_OK;
}

static int cmd_gsi_rebuild(int argc, char **argv)
{
    struct gsi_args a = {.command = GSI_CMD, .rebuild = true};
    int rc = gsi_args_parse(&a, argc, argv);
    if (rc != 0) {
        return rc < 0 ? CLI_OK : rc;
    }
    struct index_rebuilt rebuilt;
    char command[] = GSI_CMD;
    if (index_rebuild(a.data, a.slots_log2, cli_index_note, command, &rebuilt) != 0) {
        return CLI_FAIL; /* cli_index_note printed why */
    }
    print_summary(&rebuilt, a.json);
    return CLI_OK;
}

static int cmd_gsi_check(int argc, char **argv)
{
    struct gsi_args a = {.command = GSI_CHECK_CMD};
    int rc = gsi_args_parse(&a, argc, argv);
    if (rc != 0) {
        return rc < 0 ? CLI_OK : rc;
    }
    const char *data = a.data;
    bool json = a.json;
    char manifest[DS_PATH_MAX];
    snprintf(manifest, sizeof(manifest), "%s/MANIFEST", data);
    if (access(manifest, F_OK) != 0) {
        int err = errno;
        return cli_error(GSI_CHECK_CMD, CLI_FAIL, "%s: %s", data,
                         err == ENOENT ? "no data here (no MANIFEST)" : strerror(err));
    }
    struct index_verify_report report;
    rc = index_verify(data, false, false, json ? NULL : stdout, NULL, NULL, &report);
    if (rc < 0) {
        return cli_error(GSI_CHECK_CMD, CLI_FAIL, "%s: %s", data, ds_strerror(rc));
    }
    if (json) {
        char dir[DS_PATH_MAX];
        char quoted[2 * DS_PATH_MAX];
        index_dir(data, dir);
        int64_t n = http_json_string(dir, strlen(dir), quoted, sizeof(quoted));
        printf("{\"index\":%s,\"present\":%s,\"damaged\":%s,\"reason\":", n > 0 ? quoted : "null",
               report.present ? "true" : "false", report.damaged ? "true" : "false");
        n = http_json_string(report.reason, strlen(report.reason), quoted, sizeof(quoted));
        printf("%s,\"entries\":%llu,\"covered_seq\":%llu}\n",
               report.damaged && n > 0 ? quoted : "null", (unsigned long long)report.entries,
               (unsigned long long)report.covered_seq);
    }
    if (rc != 0) {
        return cli_error(GSI_CHECK_CMD, CLI_FAIL, "%s", report.reason);
    }
    return CLI_OK;
}

void cli_index_note(enum index_note_kind kind, const char *text, void *user)
{
    const char *command = user;
    if (kind == INDEX_NOTE_ERROR) {
        (void)cli_error(command, CLI_FAIL, "%s", text);
    } else {
        fprintf(stderr, "dayshard %s: %s\n", command, text);
    }
}

int cmd_gsi(int argc, char **argv)
{
    if (argc < 2) {
        return cli_error("gsi", CLI_USAGE, "a subcommand is required: check, compact, rebuild");
    }
    const char *sub = argv[1];
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0) {
        return cli_help(cmd_gsi_usage);
    }
    if (strcmp(sub, "rebuild") == 0) {
        return cmd_gsi_rebuild(argc - 1, argv + 1);
    }
    if (strcmp(sub, "check") == 0) {
        return cmd_gsi_check(argc - 1, argv + 1);
    }
    if (strcmp(sub, "compact") == 0) {
        return cmd_gsi_compact(argc - 1, argv + 1);
    }
    return cli_error("gsi", CLI_USAGE, "unknown subcommand '%s' (known: check, compact, rebuild)",
                     sub);
}
