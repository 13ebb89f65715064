/*
 * Private to cli/: the subcommand table and small argument helpers shared by the cmd_*.c files.
 * Exit codes (docs/CONFIGURATION.md): 0 success, 1 failure, 2 usage error; each failure prints one
 * line "dayshard <command>: <reason>" to stderr.
 */
#ifndef DS_CLI_H
#define DS_CLI_H

#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/common.h"
#include "index/index.h"
#include "loadgen/loadgen.h"

enum cli_exit { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

struct cli_command {
    const char *name;
    const char *summary;
    const char *usage; /* the full --help text */
    int (*run)(int argc, char **argv);
};

int cmd_ingest(int argc, char **argv);
int cmd_count(int argc, char **argv);
int cmd_fsck(int argc, char **argv);
int cmd_compact(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_broker(int argc, char **argv);
int cmd_produce(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_orders(int argc, char **argv);
int cmd_order(int argc, char **argv);
int cmd_gsi(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_loadtest(int argc, char **argv);
int cmd_soak(int argc, char **argv);

extern const char cmd_ingest_usage[];
extern const char cmd_count_usage[];
extern const char cmd_fsck_usage[];
extern const char cmd_compact_usage[];
extern const char cmd_demo_usage[];
extern const char cmd_generate_usage[];
extern const char cmd_broker_usage[];
extern const char cmd_produce_usage[];
extern const char cmd_run_usage[];
extern const char cmd_serve_usage[];
/* `dayshard router` (cli/cmd_router.c): one HTTP API over several nodes. */
int cmd_router(int argc, char **argv);
extern const char cmd_router_usage[];
extern const char cmd_orders_usage[];
extern const char cmd_order_usage[];
extern const char cmd_gsi_usage[];
extern const char cmd_top_usage[];
extern const char cmd_loadtest_usage[];
extern const char cmd_soak_usage[];

/* Prints "dayshard <command>: <message>" to stderr; returns code, for `return cli_error(...)`. */
int cli_error(const char *command, int code, const char *fmt, ...) DS_PRINTF(3, 4);
/* The option loop commands share: getopt_long over argv with shortopts ("" or e.g. "X:") and
 * options; each option's value (NULL for a flag) goes to one(c, value, user), which returns 0
 * or non-zero to refuse it. Returns 0 with *next the index of the first argument after the
 * options, -1 for --help (an option whose val is 'h'), or CLI_USAGE after printing why (an
 * unknown or incomplete option; a refused value: "bad value 'V' for --name"). */
typedef int (*cli_option_fn)(int c, const char *value, void *user);
DS_MUST_USE int cli_options_parse(const char *command, int argc, char **argv, const char *shortopts,
                                  const struct option *options, cli_option_fn one, void *user,
                                  int *next);

/* As cli_options_parse, for a command that takes options only: an argument after them is a
 * usage error ("unexpected argument 'A'", CLI_USAGE). Returns 0, -1 for --help, or CLI_USAGE. */
DS_MUST_USE int cli_options_parse_only(const char *command, int argc, char **argv,
                                       const struct option *options, cli_option_fn one, void *user);

/* ---- commands that run and write a report directory (loadtest, soak; cli/cli_report.c) ---- */

/* The default --out: "PREFIX-YYYYMMDD-HHMMSS" of the current UTC time (cut to fit dst). */
void cli_report_dir_default(const char *prefix, char *dst, size_t dst_capacity);
/* This binary's path (/proc/self/exe; "" when unreadable), the nodes' program. */
void cli_report_self(char *dst, size_t dst_capacity);
/* "dayshard" and argv joined by spaces, as report.json records it (cut to fit dst). */
void cli_report_command(int argc, char **argv, char *dst, size_t dst_capacity);

/* ---- the by-customer index (cli/cmd_gsi.c) ------------------------------------------------- */

/* index_note_fn for the index's maintenance calls (index_rebuild, index_verify): user is the
 * command's name (a char array), ERROR lines go through cli_error, INFO lines to stderr as
 * "dayshard <command>: <text>". */
void cli_index_note(enum index_note_kind kind, const char *text, void *user);

/* A service's main thread (serve, router): blocks SIGINT and SIGTERM in this thread before it
 * starts any (they inherit the mask), then waits for one with sigwaitinfo: no handler, no
 * global flag. */
void cli_stop_signals_block(sigset_t *stop);
void cli_stop_signals_wait(const sigset_t *stop);
/* The error of an HTTP service that did not start on listen (flag names the option when the
 * message should, "" otherwise): exit 2 for an address that does not parse, 1 for any other
 * cause (address in use, data directory unreadable), named. */
int cli_listen_error(const char *cmd, const char *flag, const char *listen, int rc);

/* Whether log lines are JSON objects (--log-format json, set before any thread starts): then a
 * command's final lines go through the logger too. */
bool cli_log_json(void);

/* Prints a usage text to stdout and returns CLI_OK (for --help). */
int cli_help(const char *usage);

/* `dayshard config check|keys` (cli/cmd_config.c): main dispatches it with the command table,
 * whose usage texts give each command's keys (cli/config.h). */
int cmd_config(int argc, char **argv, const struct cli_command *commands, size_t command_count);
extern const char cmd_config_usage[];

/* "--name" of the long option whose value is c, or "-c" for a short one: for messages about an
 * option's value (argv[optind - 1] is the value itself when it is a separate word). */
#define CLI_OPTION_NAME_SIZE 64
const char *cli_option_name(const struct option *options, int c, char *dst);

/* One generator option by its getopt value: 'n' --events, 'p' --profile, 's' --seed,
 * 'f' --first-day, 'D' --days, 'c' --customers, 'b' --busy-fraction, 'r' --rate (the schedule's
 * rate_eps). Returns 0 or -DS_EUSAGE (an unknown c too). */
struct loadgen_workload_config;
DS_MUST_USE int cli_parse_workload_option(int c, const char *value,
                                          struct loadgen_workload_config *cfg);

/* Strict numeric and date parsing: the whole text must be consumed. Return 0 or -DS_EUSAGE. */
DS_MUST_USE int cli_parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out);
DS_MUST_USE int cli_parse_day(const char *text, int32_t *day);

#endif /* DS_CLI_H */
