/*
 * Private to cli/: one settings mechanism for every command. A command's keys are
 * its long options, read from its usage text (cli/config.c says how), so `dayshard help CMD`
 * and the keys a file may set cannot disagree. Settings come from a Java-properties file
 * (--config FILE or DAYSHARD_CONFIG) and from DAYSHARD_* environment variables, and reach the
 * command as arguments inserted before the user's own: the command's own parser validates them
 * and the command line wins. Single-threaded: main() calls this before the command starts.
 */
#ifndef DS_CLI_CONFIG_H
#define DS_CLI_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/cli.h"

/* Long options of one command: the most any usage text has is about 25; room for twice that
 * plus the "gsi = off" style aliases of its --no-X flags. */
#define CONFIG_KEYS_MAX 96u
/* Settings of one file: a deployment file has tens; a file with more is a mistake. */
#define CONFIG_SETTINGS_MAX 512u
/* A line of the file, a key and a value: paths are at most DS_PATH_MAX (4096) long, but the
 * options dayshard takes are names, numbers, addresses and paths of ordinary length. */
#define CONFIG_LINE_BYTES_MAX 4096u
#define CONFIG_KEY_BYTES_MAX 128u
#define CONFIG_VALUE_BYTES_MAX 1024u
#define CONFIG_NAME_BYTES_MAX 64u

/* Keys of this prefix are librdkafka properties (-X), for commands that take -X. */
#define CONFIG_KAFKA_PREFIX_TEXT "kafka."
/* The one key every command has: it configures main's logging, not the command. */
#define CONFIG_LOG_FORMAT_KEY "log-format"

/* What a key's value must look like, from its placeholder in the usage text. */
enum config_type {
    CONFIG_STRING,    /* anything but empty (DIR, T, URL, ...) */
    CONFIG_BOOL,      /* a flag without a value: true/false, yes/no, on/off, 1/0 */
    CONFIG_INTEGER,   /* N, M, K, R, P, Q, MS: a non-negative integer */
    CONFIG_NUMBER,    /* F: a decimal number */
    CONFIG_DAY,       /* D, D2, YYYY-MM-DD: a civil date */
    CONFIG_HOST_PORT, /* HOST:PORT: a host and a port 0..65535 */
    CONFIG_ENUM,      /* a placeholder like auto|uring|sync: one of those words */
};

struct config_key {
    char name[CONFIG_NAME_BYTES_MAX];        /* "commit-interval-ms" (no dashes in front) */
    char placeholder[CONFIG_NAME_BYTES_MAX]; /* "N"; "" for a flag without a value */
    enum config_type type;
    /* For "gsi", the alias of the flag --no-gsi: the index of that flag, whose value is the
     * inverse of this one ("gsi = off" sets --no-gsi). -1 for a key that is an option itself. */
    int32_t inverse_of;
};

struct config_keys {
    const char *command; /* borrowed: the table's name */
    bool kafka;          /* the command takes -X key=value: kafka.* keys reach librdkafka */
    bool subcommand;     /* "usage: dayshard gsi rebuild ...": options follow a subcommand */
    uint32_t count;
    struct config_key key[CONFIG_KEYS_MAX];
};

/* Reads a command's keys from its usage text. Returns 0, or -DS_ELIMIT when the usage has more
 * options than CONFIG_KEYS_MAX (a programmer error the unit test catches first). */
DS_MUST_USE int config_keys_parse(const struct cli_command *command, struct config_keys *out);
/* The key named name, or NULL. */
const struct config_key *config_keys_find(const struct config_keys *keys, const char *name);

/* NULL when value suits key, else what it should be ("a non-negative integer"). */
const char *config_value_problem(const struct config_key *key, const char *value);
/* A boolean key's value: 1 true (true, yes, on, 1; any case), 0 false, -1 neither. */
int config_bool_parse(const char *value);

/* One "key = value" line of a file. */
struct config_setting {
    char command[CONFIG_NAME_BYTES_MAX]; /* "run" for "run.data = ...", "" without a prefix */
    char key[CONFIG_KEY_BYTES_MAX];      /* "data", "kafka.client.id" (the prefix removed) */
    char value[CONFIG_VALUE_BYTES_MAX];
    uint32_t line; /* 1-based */
};

struct config_file {
    const char *path; /* borrowed */
    uint32_t count;
    struct config_setting setting[CONFIG_SETTINGS_MAX];
};

/* Parses a Java-properties file: "key = value" or "key: value" lines, '#' and '!' comments,
 * blank lines; a key may start with a command's name and a dot ("run.data"). Lines that are
 * not a setting (no '=' or ':', a continuation backslash, a line or value too long) are errors
 * reported to report as "FILE:LINE: why". Returns the number of errors (0: clean), or a
 * negated errno when the file cannot be read (reported too). out is caller-provided. */
DS_MUST_USE int config_file_read(const char *path, struct config_file *out, FILE *report);

/* Checks file's settings against commands: an unprefixed key must be a key of only (when not
 * NULL) or of any command; a prefixed one of the command it names. Reports unknown keys (with a
 * close match, "did you mean"), bad values and duplicates (a warning naming both lines) to
 * report. Returns the number of errors (warnings do not count). */
DS_MUST_USE int config_file_check(const struct config_file *file,
                                  const struct cli_command *commands, size_t command_count,
                                  const struct cli_command *only, FILE *report);

/* The arguments a command runs with, and where each inserted one came from. */
struct config_run {
    int argc;
    char **argv;   /* owned, NULL-terminated */
    char **origin; /* owned; origin[i]: "FILE:LINE" or "DAYSHARD_X" for an inserted option
                    * word, NULL for the user's own words */
};

/* Builds the arguments command runs with from argv (argv[0] the command's name, as main passes
 * it): --config FILE and --log-format F taken out, and the settings of FILE (or of the file
 * DAYSHARD_CONFIG names) and of the DAYSHARD_* environment inserted before the user's options,
 * each key once at its winning value. Precedence, lowest first: the file's unprefixed keys, its
 * keys prefixed with this command, the environment, the command line. The file is checked
 * first as `dayshard config check FILE --command NAME` checks it. Sets DS_LOG_FORMAT from the
 * winning log-format. With --help or -h on the line it only takes the two options out.
 * Returns CLI_OK with out filled (release it with config_run_deinit), or CLI_USAGE / CLI_FAIL
 * after printing every error with its file and line (or variable). commands: the whole table,
 * for keys prefixed with another command. */
DS_MUST_USE int config_args(const struct cli_command *commands, size_t command_count,
                            const struct cli_command *command, int argc, char **argv,
                            struct config_run *out);
/* After the command failed with a usage error: names where each inserted option came from, so
 * that "bad value 'x' for --io" can be traced to its line. */
void config_run_explain(const struct config_run *run, const char *command);
void config_run_deinit(struct config_run *run);

#endif /* DS_CLI_CONFIG_H */
