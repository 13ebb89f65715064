/*
 * `dayshard config check FILE [--command C]`: checks a settings file without running anything,
 * and `dayshard config keys [C]`: lists the keys each command takes (its long options, read
 * from its usage text by cli/config.c). The checker is the one every command runs at startup
 * on its --config file, so a file this passes starts.
 * Rejected: a `--check` option on every command (a deployment wants to check a file before the
 * service that reads it is installed, and one file may serve several commands).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/config.h"

const char cmd_config_usage[] =
    "usage: dayshard config check FILE [--command C]\n"
    "       dayshard config keys [C]\n"
    "\n"
    "Every command takes --config FILE: settings in Java-properties form, one 'key = value'\n"
    "(or 'key: value') a line, '#' or '!' comments. The keys are the command's long options\n"
    "without the dashes (data = /var/lib/dayshard, commit-interval-ms = 100); a flag takes\n"
    "true/false (also yes/no, on/off, 1/0), and a flag --no-X also answers to X (gsi = off).\n"
    "kafka.* keys are librdkafka properties, as -X gives them (kafka.security.protocol = SSL),\n"
    "for the commands that take -X. A key prefixed with a command's name applies to that\n"
    "command only (run.http = 127.0.0.1:8080), so one file can serve several commands; an\n"
    "unprefixed key must be an option of the command reading the file, else it refuses to\n"
    "start, naming the file and line. log-format = text|json is a key of every command.\n"
    "DAYSHARD_CONFIG=FILE names the file when --config is not given.\n"
    "\n"
    "Environment: DAYSHARD_<KEY> sets a key, the key upper-cased with '-' as '_'\n"
    "(DAYSHARD_DATA, DAYSHARD_COMMIT_INTERVAL_MS, DAYSHARD_GSI=off, DAYSHARD_LOG_FORMAT=json);\n"
    "DAYSHARD_KAFKA_<PROPERTY> a librdkafka property, '_' as '.' (DAYSHARD_KAFKA_SASL_PASSWORD\n"
    "is kafka.sasl.password). Variables that name no option of the command are ignored (one\n"
    "environment may serve a node and a router); empty ones count as unset.\n"
    "Precedence, lowest first: the file, its keys prefixed with the command, the environment,\n"
    "the command line. A flag set true by the file or environment cannot be cleared on the\n"
    "command line (set it false in the environment instead).\n"
    "\n"
    "check: reports every unknown key (with a close match), bad value (by the option's\n"
    "placeholder: N, K, R, Q, MS integers, F a number, D a day, HOST:PORT) and line that is not\n"
    "a setting, as FILE:LINE: why; a key set twice is a warning (the later line wins). Without\n"
    "--command a key must be an option of some command; with it, of C. Values the checker\n"
    "cannot type (--io MODE, kafka.* properties) are checked when the command starts.\n"
    "Exit status: 0 clean, 1 errors found, 2 usage error.\n"
    "\n"
    "keys: prints each command's keys, one 'command key placeholder' a line.\n"
    "\n"
    "options:\n"
    "  --command C      check the file for command C\n"
    "  --help           this text\n";

static int config_help(void)
{
    fputs(cmd_config_usage, stdout);
    return CLI_OK;
}

static const struct cli_command *command_find(const struct cli_command *commands, size_t count,
                                              const char *name)
{
    for (size_t i = 0; i < count; i++) {
        if (strcmp(commands[i].name, name) == 0) {
            return &commands[i];
        }
    }
    return NULL;
}

static int config_check(int argc, char **argv, const struct cli_command *commands, size_t count)
{
    static const struct option options[] = {{"command", required_argument, NULL, 'c'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    const char *only_name = NULL;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (c == 'h') {
            return config_help();
        }
        if (c != 'c') {
            return cli_error("config check", CLI_USAGE, "unknown or incomplete option '%s'",
                             argv[optind - 1]);
        }
        only_name = optarg;
    }
    if (optind + 1 != argc) {
        return cli_error("config check", CLI_USAGE, "one FILE is required");
    }
    const struct cli_command *only = NULL;
    if (only_name != NULL && (only = command_find(commands, count, only_name)) == NULL) {
        return cli_error("config check", CLI_USAGE, "unknown command '%s'", only_name);
    }
    struct config_file *file = calloc(1, sizeof(*file));
    if (file == NULL) {
        return cli_error("config check", CLI_FAIL, "out of memory");
    }
    int errors = config_file_read(argv[optind], file, stdout);
    if (errors < 0) {
        free(file);
        return CLI_USAGE; /* reported: the file cannot be read */
    }
    errors += config_file_check(file, commands, count, only, stdout);
    printf("%s: %u setting%s, %d error%s\n", argv[optind], file->count, file->count == 1 ? "" : "s",
           errors, errors == 1 ? "" : "s");
    free(file);
    return errors == 0 ? CLI_OK : CLI_FAIL;
}

static int config_keys(int argc, char **argv, const struct cli_command *commands, size_t count)
{
    if (argc > 2) {
        return cli_error("config keys", CLI_USAGE, "at most one command");
    }
    const struct cli_command *only = argc == 2 ? command_find(commands, count, argv[1]) : NULL;
    if (argc == 2 && only == NULL) {
        return cli_error("config keys", CLI_USAGE, "unknown command '%s'", argv[1]);
    }
    struct config_keys *keys = calloc(1, sizeof(*keys));
    if (keys == NULL) {
        return cli_error("config keys", CLI_FAIL, "out of memory");
    }
    for (size_t i = 0; i < count; i++) {
        if (only != NULL && only != &commands[i]) {
            continue;
        }
        int rc = config_keys_parse(&commands[i], keys);
        ASSERT(rc == 0);
        for (uint32_t k = 0; k < keys->count; k++) {
            const struct config_key *key = &keys->key[k];
            printf("%s %s %s\n", commands[i].name, key->name,
                   key->inverse_of >= 0          ? "(on|off)"
                   : key->placeholder[0] != '\0' ? key->placeholder
                                                 : "(true|false)");
        }
        if (keys->kafka) {
            printf("%s kafka.* PROPERTY\n", commands[i].name);
        }
    }
    free(keys);
    return CLI_OK;
}

int cmd_config(int argc, char **argv, const struct cli_command *commands, size_t count)
{
    if (argc < 2) {
        return cli_error("config", CLI_USAGE, "a subcommand is required: check, keys");
    }
    const char *sub = argv[1];
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0) {
        return config_help();
    }
    if (strcmp(sub, "check") == 0) {
        return config_check(argc - 1, argv + 1, commands, count);
    }
    if (strcmp(sub, "keys") == 0) {
        return config_keys(argc - 1, argv + 1, commands, count);
    }
    return cli_error("config", CLI_USAGE, "unknown subcommand '%s' (known: check, keys)", sub);
}
