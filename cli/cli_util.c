/*
 * The helpers every command shares (cli.h): errors, option parsing, numbers and days, help,
 * removing a scratch tree. Apart from main.c so that the files main.c calls (the config
 * mechanism) can use them too without a call circle.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "query/query.h"

int cli_error(const char *command, int code, const char *fmt, ...)
{
    char message[512];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof(message), fmt, args);
    va_end(args);
    if (cli_log_json()) { /* a collector reads one JSON object per line, errors included */
        ds_log_error("%s: %s%s%s%s", command, message, code == CLI_USAGE ? " (try 'dayshard " : "",
                     code == CLI_USAGE ? command : "", code == CLI_USAGE ? " --help')" : "");
        return code;
    }
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

int cli_options_parse_only(const char *command, int argc, char **argv, const struct option *options,
                           cli_option_fn one, void *user)
{
    int next = 0;
    int rc = cli_options_parse(command, argc, argv, "", options, one, user, &next);
    if (rc != 0) {
        return rc;
    }
    if (next < argc) {
        return cli_error(command, CLI_USAGE, "unexpected argument '%s'", argv[next]);
    }
    return 0;
}

int cli_help(const char *usage)
{
    fputs(usage, stdout);
    if (usage != cmd_config_usage) {
        fputs("Every command also takes --config FILE and --log-format text|json "
              "(`dayshard help config`).\n",
              stdout);
    }
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

/* Runs command with the settings of its --config file and of the DAYSHARD_* environment
 * inserted before the user's own options (cli/config.h). */

bool cli_log_json(void)
{
    const char *format = getenv("DS_LOG_FORMAT");
    return format != NULL && strcmp(format, "json") == 0;
}

void cli_stop_signals_block(sigset_t *stop)
{
    sigemptyset(stop);
    sigaddset(stop, SIGINT);
    sigaddset(stop, SIGTERM);
    ASSERT(pthread_sigmask(SIG_BLOCK, stop, NULL) == 0);
}

void cli_stop_signals_wait(const sigset_t *stop)
{
    siginfo_t info;
    while (sigwaitinfo(stop, &info) < 0) { /* until SIGINT or SIGTERM; EINTR retries */
    }
}

int cli_listen_error(const char *cmd, const char *flag, const char *listen, int rc)
{
    ASSERT(rc < 0);
    return cli_error(cmd, rc == -DS_EUSAGE ? CLI_USAGE : CLI_FAIL, "%s%s: %s", flag,
                     listen != NULL ? listen : QUERY_HTTP_LISTEN_DEFAULT,
                     rc == -DS_EUSAGE ? "bad listen address (HOST:PORT)" : ds_strerror(rc));
}
