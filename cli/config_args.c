/*
 * The arguments a command starts with (cli/config.h, config_args): the user's own, with the
 * settings of the config file and of the DAYSHARD_* environment inserted in front as
 * "--name=value" words, one per key at its winning value, and -X "property=value" words for
 * kafka.* keys. Precedence, lowest first: the file's unprefixed keys, its keys prefixed with
 * the command ("run.data"), the environment, the command line (last on the line, so getopt's
 * last-one-wins gives it the final say).
 *
 * Environment names: DAYSHARD_ and the key upper-cased with '-' as '_' (DAYSHARD_DATA,
 * DAYSHARD_COMMIT_INTERVAL_MS, DAYSHARD_GSI=off); DAYSHARD_KAFKA_SASL_MECHANISM is the librdkafka
 * property sasl.mechanism (lower-cased, '_' as '.': every librdkafka property is dotted
 * lower-case words). A DAYSHARD_* variable that names no option of the command is ignored (with
 * a debug line): one environment often serves a node and its router, each taking part of it.
 * An empty variable counts as unset (compose files pass empty ones). A file key that is no
 * option of the command is an error instead: a file is written for its command.
 *
 * Rejected: applying the settings to the command's option structs directly (every command
 * would need a setter per key); putting file settings after the user's words (the file would
 * override the command line).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/config.h"

extern char **environ;

#define ARGS_ENV_PREFIX "DAYSHARD_"
#define ARGS_ENV_KAFKA_PREFIX "DAYSHARD_KAFKA_"
#define ARGS_ENV_CONFIG "DAYSHARD_CONFIG"
#define ARGS_ENV_NAME_BYTES_MAX (CONFIG_KEY_BYTES_MAX + 16u)

/* Where a winning value came from. */
struct args_origin {
    uint32_t line; /* of the file; 0: the environment variable env */
    char env[ARGS_ENV_NAME_BYTES_MAX];
};

/* Rank of a source: a higher one replaces a lower one; an equal one replaces (a later line). */
enum args_rank { ARGS_FILE = 1, ARGS_FILE_PREFIXED = 2, ARGS_ENV = 3 };

struct args_value {
    const char *value; /* borrowed from the file or the environment; NULL: unset */
    enum args_rank rank;
    struct args_origin origin;
};

struct args_kafka {
    char property[CONFIG_KEY_BYTES_MAX];
    struct args_value v;
};

struct args_resolve {
    const char *command;
    const char *path;         /* the file, NULL without one */
    struct config_file *file; /* its settings, which the values below borrow */
    struct config_keys keys;
    struct args_value slot[CONFIG_KEYS_MAX]; /* by key index; aliases fill their flag's */
    uint32_t kafka_count;
    struct args_kafka kafka[CONFIG_SETTINGS_MAX];
};

/* What main's own options say: --config, --log-format, --help; the other words in order. */
struct args_global {
    const char *config;
    const char *log_format;
    bool help;
    int argc;
    char **argv; /* the user's words without the two options; argv[0] the command */
};

static void value_put(struct args_value *slot, const char *value, enum args_rank rank,
                      const struct args_origin *origin)
{
    if (slot->value == NULL || rank >= slot->rank) {
        slot->value = value;
        slot->rank = rank;
        slot->origin = *origin;
    }
}

static int kafka_put(struct args_resolve *r, const char *property, const char *value,
                     enum args_rank rank, const struct args_origin *origin)
{
    for (uint32_t i = 0; i < r->kafka_count; i++) {
        if (strcmp(r->kafka[i].property, property) == 0) {
            value_put(&r->kafka[i].v, value, rank, origin);
            return 0;
        }
    }
    if (r->kafka_count == CONFIG_SETTINGS_MAX || strlen(property) >= CONFIG_KEY_BYTES_MAX) {
        return -DS_ELIMIT;
    }
    struct args_kafka *k = &r->kafka[r->kafka_count++];
    snprintf(k->property, sizeof(k->property), "%s", property);
    value_put(&k->v, value, rank, origin);
    return 0;
}

/* A checked setting of key (found in r->keys) into its slot; booleans become "true"/"false",
 * an alias ("gsi = off") the inverse value of its flag (--no-gsi). */
static void key_put(struct args_resolve *r, const struct config_key *key, const char *value,
                    enum args_rank rank, const struct args_origin *origin)
{
    uint32_t index = (uint32_t)(key - r->keys.key);
    ASSERT(index < r->keys.count);
    if (key->type == CONFIG_BOOL) {
        int b = config_bool_parse(value);
        ASSERT(b >= 0);
        if (key->inverse_of >= 0) {
            index = (uint32_t)key->inverse_of;
            b = !b;
        }
        value = b ? "true" : "false";
    }
    value_put(&r->slot[index], value, rank, origin);
}

/* The file's settings for this command (it was checked: every key is known). */
static int resolve_file(struct args_resolve *r, const struct config_file *file)
{
    for (uint32_t i = 0; i < file->count; i++) {
        const struct config_setting *s = &file->setting[i];
        bool prefixed = s->command[0] != '\0';
        if (prefixed && strcmp(s->command, r->command) != 0) {
            continue;
        }
        struct args_origin origin = {.line = s->line};
        enum args_rank rank = prefixed ? ARGS_FILE_PREFIXED : ARGS_FILE;
        size_t kafka_len = strlen(CONFIG_KAFKA_PREFIX_TEXT);
        if (strncmp(s->key, CONFIG_KAFKA_PREFIX_TEXT, kafka_len) == 0) {
            if (kafka_put(r, s->key + kafka_len, s->value, rank, &origin) != 0) {
                fprintf(stderr, "%s:%u: too many kafka.* settings\n", file->path, s->line);
                return 1;
            }
            continue;
        }
        const struct config_key *key = config_keys_find(&r->keys, s->key);
        ASSERT(key != NULL);
        key_put(r, key, s->value, rank, &origin);
    }
    return 0;
}

/* "DAYSHARD_COMMIT_INTERVAL_MS" for "commit-interval-ms". */
static void env_name(const char *key, char dst[ARGS_ENV_NAME_BYTES_MAX])
{
    size_t n = strlen(ARGS_ENV_PREFIX);
    memcpy(dst, ARGS_ENV_PREFIX, n);
    for (const char *k = key; *k != '\0' && n < ARGS_ENV_NAME_BYTES_MAX - 1; k++) {
        dst[n++] = *k == '-' ? '_' : (char)(*k >= 'a' && *k <= 'z' ? *k - 'a' + 'A' : *k);
    }
    dst[n] = '\0';
}

/* The environment's settings for the command's keys; returns the number of bad values. */
static int resolve_env_keys(struct args_resolve *r)
{
    int errors = 0;
    for (uint32_t i = 0; i < r->keys.count; i++) {
        const struct config_key *key = &r->keys.key[i];
        struct args_origin origin = {.line = 0};
        env_name(key->name, origin.env);
        const char *value = getenv(origin.env);
        if (value == NULL || value[0] == '\0') {
            continue;
        }
        const char *problem = config_value_problem(key, value);
        if (problem != NULL) {
            fprintf(stderr, "dayshard %s: bad value '%s' in %s (for --%s): %s\n", r->command, value,
                    origin.env, key->name, problem);
            errors++;
            continue;
        }
        key_put(r, key, value, ARGS_ENV, &origin);
    }
    return errors;
}

/* DAYSHARD_KAFKA_* (for a command taking -X), and a debug line for each DAYSHARD_* variable
 * that names nothing of this command. Returns the number of errors. */
static int resolve_env_other(struct args_resolve *r)
{
    size_t kafka_len = strlen(ARGS_ENV_KAFKA_PREFIX);
    for (char **e = environ; *e != NULL; e++) {
        const char *eq = strchr(*e, '=');
        size_t name_len = eq != NULL ? (size_t)(eq - *e) : 0;
        if (name_len == 0 || strncmp(*e, ARGS_ENV_PREFIX, strlen(ARGS_ENV_PREFIX)) != 0 ||
            name_len >= ARGS_ENV_NAME_BYTES_MAX) {
            continue;
        }
        struct args_origin origin = {.line = 0};
        memcpy(origin.env, *e, name_len);
        origin.env[name_len] = '\0';
        if (r->keys.kafka && name_len > kafka_len && eq[1] != '\0' &&
            strncmp(*e, ARGS_ENV_KAFKA_PREFIX, kafka_len) == 0) {
            char property[CONFIG_KEY_BYTES_MAX];
            size_t n = 0;
            for (const char *p = *e + kafka_len; p < eq && n < sizeof(property) - 1; p++) {
                property[n++] = *p == '_' ? '.' : (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
            }
            property[n] = '\0';
            if (kafka_put(r, property, eq + 1, ARGS_ENV, &origin) != 0) {
                fprintf(stderr, "dayshard %s: too many kafka properties\n", r->command);
                return 1;
            }
            continue;
        }
        bool known = strcmp(origin.env, ARGS_ENV_CONFIG) == 0;
        for (uint32_t i = 0; !known && i < r->keys.count; i++) {
            char name[ARGS_ENV_NAME_BYTES_MAX];
            env_name(r->keys.key[i].name, name);
            known = strcmp(name, origin.env) == 0;
        }
        if (!known) {
            ds_log_debug("%s names no option of `dayshard %s`: ignored", origin.env, r->command);
        }
    }
    return 0;
}

/* ---- main's own options -------------------------------------------------------------------- */

/* The value of "--name VALUE" or "--name=VALUE" at argv[*i] (advancing *i past a separate
 * value), or NULL when argv[*i] is another word. *missing: the option without its value. */
static const char *global_value(int argc, char **argv, int *i, const char *name, bool *missing)
{
    size_t len = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, len) != 0) {
        return NULL;
    }
    if (a[len] == '=') {
        return a + len + 1;
    }
    if (a[len] != '\0') {
        return NULL;
    }
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    (*i)++;
    return argv[*i];
}

/* Splits argv into main's options and the command's words; CLI_OK or CLI_USAGE (reported). */
static int global_parse(const char *command, int argc, char **argv, struct args_global *g)
{
    g->argv = calloc((size_t)argc + 1, sizeof(*g->argv));
    if (g->argv == NULL) {
        return cli_error(command, CLI_FAIL, "out of memory");
    }
    g->argv[g->argc++] = argv[0];
    bool rest = false; /* after "--" everything is the command's */
    for (int i = 1; i < argc; i++) {
        bool missing = false;
        const char *config = rest ? NULL : global_value(argc, argv, &i, "--config", &missing);
        const char *format = rest || config != NULL || missing
                                 ? NULL
                                 : global_value(argc, argv, &i, "--log-format", &missing);
        if (missing) {
            return cli_error(command, CLI_USAGE, "'%s' needs a value", argv[i]);
        }
        if (config != NULL && (g->config != NULL || config[0] == '\0')) {
            return cli_error(command, CLI_USAGE, "--config: one non-empty FILE");
        }
        if (format != NULL && strcmp(format, "text") != 0 && strcmp(format, "json") != 0) {
            return cli_error(command, CLI_USAGE, "bad value '%s' for --log-format: text or json",
                             format);
        }
        g->config = config != NULL ? config : g->config;
        g->log_format = format != NULL ? format : g->log_format;
        if (config == NULL && format == NULL) {
            rest = rest || strcmp(argv[i], "--") == 0;
            g->help = g->help ||
                      (!rest && (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0));
            g->argv[g->argc++] = argv[i];
        }
    }
    return CLI_OK;
}

/* ---- the command's arguments --------------------------------------------------------------- */

static int run_push(struct config_run *out, const char *word, const char *origin)
{
    out->argv[out->argc] = strdup(word);
    out->origin[out->argc] = origin != NULL ? strdup(origin) : NULL;
    if (out->argv[out->argc] == NULL || (origin != NULL && out->origin[out->argc] == NULL)) {
        free(out->argv[out->argc]);
        free(out->origin[out->argc]);
        out->argv[out->argc] = NULL;
        out->origin[out->argc] = NULL;
        return -ENOMEM;
    }
    out->argc++;
    return 0;
}

static void origin_text(const struct args_resolve *r, const struct args_origin *o, char *dst,
                        size_t capacity)
{
    if (o->line > 0) {
        snprintf(dst, capacity, "%s:%u", r->path, o->line);
    } else {
        snprintf(dst, capacity, "%s", o->env);
    }
}

/* The inserted words: "--name=value" (a true flag "--name", a false one nothing), then
 * "-X" "property=value". */
static int build_inserted(const struct args_resolve *r, struct config_run *out)
{
    char origin[DS_PATH_MAX + 32];
    char word[CONFIG_KEY_BYTES_MAX + CONFIG_VALUE_BYTES_MAX + 8];
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < r->keys.count; i++) {
        const struct config_key *key = &r->keys.key[i];
        const struct args_value *v = &r->slot[i];
        if (v->value == NULL || strcmp(key->name, CONFIG_LOG_FORMAT_KEY) == 0 ||
            (key->type == CONFIG_BOOL && strcmp(v->value, "true") != 0)) {
            continue;
        }
        origin_text(r, &v->origin, origin, sizeof(origin));
        if (key->type == CONFIG_BOOL) {
            snprintf(word, sizeof(word), "--%s", key->name);
        } else {
            snprintf(word, sizeof(word), "--%s=%s", key->name, v->value);
        }
        rc = run_push(out, word, origin);
    }
    for (uint32_t i = 0; rc == 0 && i < r->kafka_count; i++) {
        const struct args_kafka *k = &r->kafka[i];
        origin_text(r, &k->v.origin, origin, sizeof(origin));
        snprintf(word, sizeof(word), "%s=%s", k->property, k->v.value);
        rc = run_push(out, "-X", NULL);
        rc = rc == 0 ? run_push(out, word, origin) : rc;
    }
    return rc;
}

static int build_run(const struct args_resolve *r, const struct args_global *g,
                     struct config_run *out)
{
    size_t words = (size_t)g->argc + r->keys.count + 2u * r->kafka_count + 1u;
    out->argv = calloc(words, sizeof(*out->argv));
    out->origin = calloc(words, sizeof(*out->origin));
    if (out->argv == NULL || out->origin == NULL) {
        return -ENOMEM;
    }
    int first = 1;
    int rc = run_push(out, g->argv[0], NULL);
    /* "gsi rebuild --data D": options after the subcommand's word. */
    if (rc == 0 && r->keys.subcommand && g->argc > 1 && g->argv[1][0] != '-') {
        rc = run_push(out, g->argv[1], NULL);
        first = 2;
    }
    rc = rc == 0 ? build_inserted(r, out) : rc;
    for (int i = first; rc == 0 && i < g->argc; i++) {
        rc = run_push(out, g->argv[i], NULL);
    }
    ASSERT(rc != 0 || (size_t)out->argc < words);
    return rc;
}

/* The file (if any) read, checked and resolved into r; CLI_OK or an exit code (reported). */
static int load_file(const struct cli_command *commands, size_t command_count,
                     const struct cli_command *command, struct args_resolve *r)
{
    struct config_file *file = calloc(1, sizeof(*file));
    if (file == NULL) {
        return cli_error(command->name, CLI_FAIL, "out of memory");
    }
    r->file = file; /* freed with r */
    int errors = config_file_read(r->path, file, stderr);
    if (errors < 0) {
        return cli_error(command->name, CLI_FAIL, "--config %s: %s", r->path, ds_strerror(errors));
    }
    errors += config_file_check(file, commands, command_count, command, stderr);
    errors += errors == 0 ? resolve_file(r, file) : 0;
    if (errors > 0) {
        return cli_error(command->name, CLI_USAGE,
                         "%d error%s in %s (`dayshard config check %s --command %s` lists them)",
                         errors, errors == 1 ? "" : "s", r->path, r->path, command->name);
    }
    return CLI_OK;
}

static int resolve(const struct cli_command *commands, size_t command_count,
                   const struct cli_command *command, struct args_resolve *r)
{
    r->command = command->name;
    int rc = config_keys_parse(command, &r->keys);
    ASSERT(rc == 0); /* the usage texts are ours: tests/integration/test_config.sh */
    if (r->path != NULL) {
        rc = load_file(commands, command_count, command, r);
        if (rc != CLI_OK) {
            return rc;
        }
    }
    int errors = resolve_env_keys(r) + resolve_env_other(r);
    return errors > 0 ? CLI_USAGE : CLI_OK;
}

/* Takes the DAYSHARD_* variables out of the environment once they became arguments: they were
 * meant for the command typed, not for the processes it starts (`loadtest` spawns `run` nodes,
 * which would otherwise read the loadtest's DAYSHARD_CONFIG file as theirs and refuse its
 * keys). Single-threaded: no thread has started yet. */
static void scrub_environment(void)
{
    char name[ARGS_ENV_NAME_BYTES_MAX];
    bool found = true;
    while (found) { /* unsetenv changes environ: restart after each */
        found = false;
        for (char **e = environ; *e != NULL && !found; e++) {
            const char *eq = strchr(*e, '=');
            size_t len = eq != NULL ? (size_t)(eq - *e) : strlen(*e);
            if (strncmp(*e, ARGS_ENV_PREFIX, strlen(ARGS_ENV_PREFIX)) == 0 && len < sizeof(name)) {
                memcpy(name, *e, len);
                name[len] = '\0';
                found = unsetenv(name) == 0;
            }
        }
    }
}

/* DS_LOG_FORMAT (common/log.c reads it) from the command line, else the environment or file. */
static void apply_log_format(const struct args_resolve *r, const struct args_global *g)
{
    const char *format = g->log_format;
    const struct config_key *key = config_keys_find(&r->keys, CONFIG_LOG_FORMAT_KEY);
    if (format == NULL && key != NULL) {
        format = r->slot[key - r->keys.key].value;
    }
    if (format != NULL) {
        setenv("DS_LOG_FORMAT", format, 1);
    }
}

int config_args(const struct cli_command *commands, size_t command_count,
                const struct cli_command *command, int argc, char **argv, struct config_run *out)
{
    ASSERT(argc >= 1);
    ASSERT(command != NULL);
    memset(out, 0, sizeof(*out));
    struct args_global g = {.config = NULL};
    struct args_resolve *r = calloc(1, sizeof(*r));
    int rc = r != NULL ? global_parse(command->name, argc, argv, &g)
                       : cli_error(command->name, CLI_FAIL, "out of memory");
    if (rc == CLI_OK && !g.help) {
        const char *env = getenv(ARGS_ENV_CONFIG);
        r->path = g.config != NULL ? g.config : env != NULL && env[0] != '\0' ? env : NULL;
        rc = resolve(commands, command_count, command, r);
    }
    if (rc == CLI_OK && g.help) {
        r->keys.count = 0; /* --help: only the user's words */
        r->kafka_count = 0;
    }
    if (rc == CLI_OK && build_run(r, &g, out) != 0) {
        rc = cli_error(command->name, CLI_FAIL, "out of memory");
    }
    if (rc == CLI_OK) {
        apply_log_format(r, &g);
        scrub_environment(); /* after build_run: the arguments are copies */
    } else {
        config_run_deinit(out);
    }
    free(g.argv);
    if (r != NULL) {
        free(r->file);
    }
    free(r);
    return rc;
}

void config_run_explain(const struct config_run *run, const char *command)
{
    for (int i = 0; i < run->argc; i++) {
        if (run->origin[i] != NULL) {
            fprintf(stderr, "dayshard %s: '%s' came from %s\n", command, run->argv[i],
                    run->origin[i]);
        }
    }
}

void config_run_deinit(struct config_run *run)
{
    for (int i = 0; i < run->argc; i++) {
        free(run->argv[i]);
        free(run->origin[i]);
    }
    free(run->argv);
    free(run->origin);
    memset(run, 0, sizeof(*run));
}
