/*
 * dayshard: one binary, one subcommand per file (cmd_<name>.c), dispatched from a const table.
 * Rejected: a binary per command (several installs to keep in step, no shared `help`).
 */
#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/config.h"

static const struct cli_command commands[] = {
    {"run", "a node: consume a Kafka topic into durable day partitions, exactly once",
     cmd_run_usage, cmd_run},
    {"broker", "an embedded Kafka-protocol broker for development and tests", cmd_broker_usage,
     cmd_broker},
    {"produce", "send JSON order events (a file, stdin or generated) to a Kafka topic",
     cmd_produce_usage, cmd_produce},
    {"ingest", "load JSON order events from a file or stdin, durably", cmd_ingest_usage,
     cmd_ingest},
    {"serve", "the HTTP query service over a data directory, read-only", cmd_serve_usage,
     cmd_serve},
    {"router", "one HTTP API over several nodes, with replica failover", cmd_router_usage,
     cmd_router},
    {"count", "count orders of a day or a range, optionally by shard, hour or day", cmd_count_usage,
     cmd_count},
    {"orders", "a customer's latest orders, newest first (the by-customer index)", cmd_orders_usage,
     cmd_orders},
    {"order", "one order as it is now, with its items and versions seen (the orders model)",
     cmd_order_usage, cmd_order},
    {"loadtest", "drive a skewed load through the real pipeline; report heat, throttling, lag",
     cmd_loadtest_usage, cmd_loadtest},
    {"soak", "prove a node with retention holds every resource steady over months of stream",
     cmd_soak_usage, cmd_soak},
    {"top", "live view of write heat: hottest partitions, days, Kafka partitions, customers",
     cmd_top_usage, cmd_top},
    {"fsck", "verify a data directory and its index; --repair quarantines damage", cmd_fsck_usage,
     cmd_fsck},
    {"compact", "rewrite an orders directory without its superseded versions", cmd_compact_usage,
     cmd_compact},
    {"gsi",
     "the by-customer index: `gsi check` verifies, `gsi rebuild` rebuilds, `gsi compact` "
     "seals it",
     cmd_gsi_usage, cmd_gsi},
    {"generate", "print synthetic order events as JSON lines", cmd_generate_usage, cmd_generate},
    {"demo", "generate a busy month, ingest it, and show what write sharding does", cmd_demo_usage,
     cmd_demo},
};

static void print_help(FILE *out)
{
    fprintf(out, "dayshard - write-sharded time-series ingestion for order events\n\n"
                 "usage: dayshard <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < DS_ARRAY_LEN(commands); i++) {
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    }
    fprintf(out, "  %-10s %s\n", "config", "check a settings file: `dayshard config check FILE`");
    fprintf(out, "  %-10s %s\n", "help", "this text, or `dayshard help <command>`");
    fprintf(out,
            "\nEvery command takes --help, --config FILE (settings; DAYSHARD_<OPTION> variables\n"
            "override them: `dayshard help config`) and --log-format text|json.\n"
            "Exit status: 0 success, 1 failure, 2 usage error.\n"
            "Environment: DS_LOG=error|warn|info|debug sets the log level (default warn).\n");
}

static int run_command(const struct cli_command *command, int argc, char **argv)
{
    struct config_run run;
    int rc = config_args(commands, DS_ARRAY_LEN(commands), command, argc, argv, &run);
    if (rc != CLI_OK) {
        return rc;
    }
    rc = command->run(run.argc, run.argv);
    if (rc == CLI_USAGE) {
        config_run_explain(&run, command->name);
    }
    config_run_deinit(&run);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_help(stderr);
        return CLI_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "help") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        /* `help --help` is help too: --help works everywhere. */
        if (argc >= 3 && strcmp(argv[2], "--help") != 0 && strcmp(argv[2], "-h") != 0) {
            for (size_t i = 0; i < DS_ARRAY_LEN(commands); i++) {
                if (strcmp(argv[2], commands[i].name) == 0) {
                    return cli_help(commands[i].usage);
                }
            }
            if (strcmp(argv[2], "help") == 0) {
                print_help(stdout);
                return CLI_OK;
            }
            if (strcmp(argv[2], "config") == 0) {
                return cli_help(cmd_config_usage);
            }
            fprintf(stderr, "dayshard: unknown command '%s'\n", argv[2]);
            return CLI_USAGE;
        }
        print_help(stdout);
        return CLI_OK;
    }
    if (strcmp(name, "--version") == 0) {
        printf("dayshard 0.1.0\n");
        return CLI_OK;
    }
    if (strcmp(name, "config") == 0) {
        return cmd_config(argc - 1, argv + 1, commands, DS_ARRAY_LEN(commands));
    }
    for (size_t i = 0; i < DS_ARRAY_LEN(commands); i++) {
        if (strcmp(name, commands[i].name) == 0) {
            return run_command(&commands[i], argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "dayshard: unknown command '%s'; see 'dayshard help'\n", name);
    return CLI_USAGE;
}
