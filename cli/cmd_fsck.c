/*
 * `dayshard fsck --data DIR [--repair]`: verify every committed block (checksums, decompression,
 * aggregates) and report bytes no commit reached; --repair cuts those. Exit 1 while damage
 * remains.
 */
#include <getopt.h>
#include <stdio.h>

#include "cli/cli.h"
#include "storage/storage.h"

const char cmd_fsck_usage[] =
    "usage: dayshard fsck --data DIR [--repair] [--json]\n"
    "\n"
    "Verifies every committed block of DIR: header and payload CRC32C, decompression, and that\n"
    "the events add up to the aggregates in the block header. Reports torn tails and segments\n"
    "that no commit reached. With --repair (which needs the writer lock: stop the writer\n"
    "first), cuts those; damaged committed blocks are reported, never deleted.\n"
    "Exit status: 0 clean, 1 damage remains, 2 usage error.\n"
    "\n"
    "options:\n"
    "  --data DIR   the data directory\n"
    "  --repair     cut torn tails and remove uncommitted segments\n"
    "  --json       print the report as JSON\n"
    "  --help       this text\n";

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
    if (json) {
        opts.report_file = stderr;
    }
    struct storage_fsck_report r = {0};
    int rc = storage_fsck(data, &opts, &r);
    if (rc < 0) {
        return cli_error("fsck", CLI_FAIL, "%s: %s", data, ds_strerror(rc));
    }
    const char *verdict = rc == 0 ? "clean" : "damaged";
    if (json) {
        printf("{\"status\":\"%s\",\"partitions\":%llu,\"segments\":%llu,\"blocks_ok\":%llu,"
               "\"events_ok\":%llu,\"blocks_bad\":%llu,\"torn_bytes\":%llu,"
               "\"orphan_segments\":%llu,\"repaired\":%llu}\n",
               verdict, (unsigned long long)r.partitions, (unsigned long long)r.segments,
               (unsigned long long)r.blocks_ok, (unsigned long long)r.events_ok,
               (unsigned long long)r.blocks_bad, (unsigned long long)r.torn_bytes,
               (unsigned long long)r.orphan_segments, (unsigned long long)r.repaired);
    } else {
        printf("%s: %s: %llu partitions, %llu segments, %llu blocks (%llu events) ok, "
               "%llu bad blocks, %llu torn bytes, %llu orphan segments%s\n",
               data, verdict, (unsigned long long)r.partitions, (unsigned long long)r.segments,
               (unsigned long long)r.blocks_ok, (unsigned long long)r.events_ok,
               (unsigned long long)r.blocks_bad, (unsigned long long)r.torn_bytes,
               (unsigned long long)r.orphan_segments, r.repaired > 0 ? " (after repair)" : "");
    }
    return rc == 0 ? CLI_OK : CLI_FAIL;
}
