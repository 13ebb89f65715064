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
    {"count", "count orders of a day or a range, optionally by shard, hour or day", cmd_count_usage,
     cmd_count},
    {"orders", "a customer's latest orders, newest first (the by-customer index)", cmd_orders_usage,
     cmd_orders},
    {"order", "one order as it is now, with its items and versions seen (the orders model)",
     cmd_order_usage, cmd_order},
    {"loadtest", "drive a skewed load through the real pipeline; report heat, throttling, lag",
     cmd_loadtest_usage, cmd_loadtest},
    {"top", "live view of write heat: hottest partitions, days, Kafka partitions, customers",
     cmd_top_usage, cmd_top},
    {"fsck", "verify a data directory and its index; --repair quarantines damage", cmd_fsck_usage,
     cmd_fsck},
    {"compact", "rewrite an orders directory without its superseded versions", cmd_compact_usage,
     cmd_compact},
    {"gsi", "the by-customer index: `gsi check` verifies it, `gsi rebuild` rebuilds it",
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
    fprintf(out, "  %-10s %s\n", "help", "this text, or `dayshard help <command>`");
    fprintf(out, "\nEvery command takes --help. Exit status: 0 success, 1 failure, 2 usage error.\n"
                 "Environment: DS_LOG=error|warn|info|debug sets the log level (default warn).\n");
}

int cli_error(const char *command, int code, const char *fmt, ...)
{
    char message[512];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof(message), fmt, args);
    va_end(args);
    fprintf(stderr, "dayshard %s: %s\n", command, message);
    if (code == CLI_USAGE) {
        fprintf(stderr, "try 'dayshard %s --help'\n", command);
    }
    return code;
}

const char *cli_option_name(const struct option *options, int c, char *dst)
{
    for (const struct option *o = options; o->name != NULL; o++) {
        if (o->val == c) {
            snprintf(dst, CLI_OPTION_NAME_SIZE, "--%.58s", o->name);
            return dst;
        }
    }
    snprintf(dst, CLI_OPTION_NAME_SIZE, "-%c", c);
    return dst;
}

int cli_options_parse(const char *command, int argc, char **argv, const char *shortopts,
                      const struct option *options, cli_option_fn one, void *user, int *next)
{
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, shortopts, options, NULL)) != -1) {
        char name[CLI_OPTION_NAME_SIZE];
        if (c == 'h') {
            return -1;
        }
        if (c == '?' || c == ':') {
            return cli_error(command, CLI_USAGE, "unknown or incomplete option '%s'",
                             argv[optind - 1]);
        }
        if (one(c, optarg, user) != 0) {
            return cli_error(command, CLI_USAGE, "bad value '%s' for %s",
                             optarg != NULL ? optarg : "", cli_option_name(options, c, name));
        }
    }
    *next = optind;
    return 0;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path) == 0 ? 0 : -1;
}

int cli_remove_tree(const char *path)
{
    /* What is already gone needs no removing. */
    return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0 || errno == ENOENT ? 0 : -errno;
}

int cli_help(const char *usage)
{
    fputs(usage, stdout);
    return CLI_OK;
}

int cli_parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
    if (text == NULL || text[0] < '0' || text[0] > '9') {
        return -DS_EUSAGE;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max) {
        return -DS_EUSAGE;
    }
    *out = v;
    return 0;
}

int cli_parse_day(const char *text, int32_t *day)
{
    return ds_date_parse(text, strlen(text), day);
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
    for (size_t i = 0; i < DS_ARRAY_LEN(commands); i++) {
        if (strcmp(name, commands[i].name) == 0) {
            return commands[i].run(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "dayshard: unknown command '%s'; see 'dayshard help'\n", name);
    return CLI_USAGE;
}
