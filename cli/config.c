/*
 * One settings mechanism for every command: a Java-properties file, DAYSHARD_*
 * environment variables, then the command line.
 *
 * A command's keys are its long options as its usage text lists them: a line "  --name" is a
 * flag (a boolean key), "  --name VALUE" an option whose placeholder types the value (N, K, R,
 * Q, MS integers; F a number; D, D2 a day; HOST:PORT; a|b|c one of the words; anything else
 * text). A flag --no-X also answers to the key X with the inverse value ("gsi = off"), the form
 * the node's --config took before. "  -X key=value" in the usage means kafka.* keys reach
 * librdkafka. So the help text and the key set cannot disagree, and no command file knows
 * about configuration at all.
 *
 * Settings become arguments inserted before the user's own, one per key at its winning value:
 * each command's own parser validates them as it validates typed options, and getopt's "the
 * last one wins" makes the command line win. A boolean set false inserts nothing (so a file's
 * true cannot be turned off on the command line; the environment can: DAYSHARD_JSON=false).
 * Before that the file is checked as `dayshard config check` checks it, so a typo fails at
 * startup naming the file and line rather than being ignored.
 *
 * Rejected: a config struct per command filled from the file (fifteen parsers to keep in step
 * with their getopt tables; the old `run --config` had its own key list, already one key short
 * of its options); passing unknown keys through silently (a misspelt `shard = 8` would run with
 * the default and nobody would know).
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/config.h"

/* A close key for "did you mean": at most this many single-character edits away. */
#define CONFIG_SUGGEST_DISTANCE_MAX 2u

/* ---- keys from usage texts ----------------------------------------------------------------- */

static enum config_type placeholder_type(const char *placeholder)
{
    static const char *const integers[] = {"N", "K", "R", "Q", "MS"};
    static const char *const days[] = {"D", "D2", "YYYY-MM-DD"};
    if (placeholder[0] == '\0') {
        return CONFIG_BOOL;
    }
    if (strchr(placeholder, '|') != NULL) {
        return CONFIG_ENUM;
    }
    if (strcmp(placeholder, "HOST:PORT") == 0) {
        return CONFIG_HOST_PORT;
    }
    if (strcmp(placeholder, "F") == 0) {
        return CONFIG_NUMBER;
    }
    for (size_t i = 0; i < DS_ARRAY_LEN(integers); i++) {
        if (strcmp(placeholder, integers[i]) == 0) {
            return CONFIG_INTEGER;
        }
    }
    for (size_t i = 0; i < DS_ARRAY_LEN(days); i++) {
        if (strcmp(placeholder, days[i]) == 0) {
            return CONFIG_DAY;
        }
    }
    return CONFIG_STRING;
}

const struct config_key *config_keys_find(const struct config_keys *keys, const char *name)
{
    for (uint32_t i = 0; i < keys->count; i++) {
        if (strcmp(keys->key[i].name, name) == 0) {
            return &keys->key[i];
        }
    }
    return NULL;
}

static int keys_add(struct config_keys *keys, const char *name, size_t name_len,
                    const char *placeholder, size_t placeholder_len, int32_t inverse_of)
{
    if (name_len >= CONFIG_NAME_BYTES_MAX || placeholder_len >= CONFIG_NAME_BYTES_MAX) {
        return -DS_ELIMIT;
    }
    char copy[CONFIG_NAME_BYTES_MAX];
    memcpy(copy, name, name_len);
    copy[name_len] = '\0';
    if (config_keys_find(keys, copy) != NULL) {
        return 0; /* listed twice (two subcommands): one key */
    }
    if (keys->count == CONFIG_KEYS_MAX) {
        return -DS_ELIMIT;
    }
    struct config_key *k = &keys->key[keys->count++];
    memcpy(k->name, copy, name_len + 1);
    memcpy(k->placeholder, placeholder, placeholder_len);
    k->placeholder[placeholder_len] = '\0';
    k->type = placeholder_type(k->placeholder);
    k->inverse_of = inverse_of;
    return 0;
}

/* One usage line "  --name [PLACEHOLDER]  description"; others are ignored. */
static int keys_line(struct config_keys *keys, const char *line, const char *end)
{
    if (end - line > 5 && memcmp(line, "  -X ", 5) == 0) {
        keys->kafka = true;
        return 0;
    }
    if (end - line < 5 || memcmp(line, "  --", 4) != 0) {
        return 0;
    }
    const char *name = line + 4;
    const char *p = name;
    while (p < end && (islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-')) {
        p++;
    }
    size_t name_len = (size_t)(p - name);
    const char *placeholder = p;
    /* One space and a word: a placeholder; two spaces (or none): a flag's description. */
    if (p + 1 < end && (*p == ' ' || *p == '=') && p[1] != ' ') {
        placeholder = p + 1;
        p = placeholder;
        while (p < end && *p != ' ') {
            p++;
        }
    }
    size_t placeholder_len = (size_t)(p - placeholder);
    static const char *const skip[] = {"help", "config", CONFIG_LOG_FORMAT_KEY};
    for (size_t i = 0; i < DS_ARRAY_LEN(skip); i++) {
        if (name_len == strlen(skip[i]) && memcmp(name, skip[i], name_len) == 0) {
            return 0;
        }
    }
    return name_len == 0 ? 0 : keys_add(keys, name, name_len, placeholder, placeholder_len, -1);
}

int config_keys_parse(const struct cli_command *command, struct config_keys *out)
{
    ASSERT(command != NULL);
    ASSERT(command->usage != NULL);
    memset(out, 0, sizeof(*out));
    out->command = command->name;
    const char *usage = command->usage;
    char first[96];
    snprintf(first, sizeof(first), "usage: dayshard %s ", command->name);
    if (strncmp(usage, first, strlen(first)) == 0) {
        const char *word = usage + strlen(first);
        size_t len = 0;
        while (islower((unsigned char)word[len])) {
            len++;
        }
        out->subcommand = len > 0 && (word[len] == ' ' || word[len] == '\n');
    }
    for (const char *line = usage; *line != '\0';) {
        const char *end = strchr(line, '\n');
        end = end != NULL ? end : line + strlen(line);
        int rc = keys_line(out, line, end);
        if (rc != 0) {
            return rc;
        }
        line = *end == '\n' ? end + 1 : end;
    }
    /* "gsi = off" for --no-gsi, unless the command also has a --gsi of its own. */
    uint32_t options = out->count;
    for (uint32_t i = 0; i < options; i++) {
        const struct config_key *k = &out->key[i];
        if (k->type == CONFIG_BOOL && strncmp(k->name, "no-", 3) == 0) {
            int rc = keys_add(out, k->name + 3, strlen(k->name + 3), "", 0, (int32_t)i);
            if (rc != 0) {
                return rc;
            }
        }
    }
    return keys_add(out, CONFIG_LOG_FORMAT_KEY, strlen(CONFIG_LOG_FORMAT_KEY), "text|json", 9, -1);
}

/* ---- values -------------------------------------------------------------------------------- */

/* A decimal integer at most max, the whole text. */
static bool u64_ok(const char *text, uint64_t max)
{
    uint64_t ignored = 0;
    return cli_parse_u64(text, 0, max, &ignored) == 0;
}

int config_bool_parse(const char *value)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < DS_ARRAY_LEN(yes); i++) {
        if (strcasecmp(value, yes[i]) == 0) {
            return 1;
        }
        if (strcasecmp(value, no[i]) == 0) {
            return 0;
        }
    }
    return -1;
}

static bool enum_has(const char *words, const char *value)
{
    size_t len = strlen(value);
    for (const char *w = words; *w != '\0';) {
        const char *bar = strchr(w, '|');
        size_t wlen = bar != NULL ? (size_t)(bar - w) : strlen(w);
        if (len > 0 && wlen == len && memcmp(w, value, len) == 0) {
            return true;
        }
        w += wlen + (bar != NULL ? 1 : 0);
    }
    return false;
}

static bool host_port_valid(const char *value)
{
    const char *colon = strrchr(value, ':');
    return colon != NULL && colon != value && u64_ok(colon + 1, 65535);
}

static bool number_valid(const char *value)
{
    char *end = NULL;
    errno = 0;
    double d = strtod(value, &end);
    (void)d;
    return value[0] != '\0' && !isspace((unsigned char)value[0]) && *end == '\0' && errno == 0;
}

const char *config_value_problem(const struct config_key *key, const char *value)
{
    int32_t day = 0;
    switch (key->type) {
    case CONFIG_BOOL:
        return config_bool_parse(value) >= 0 ? NULL : "true or false (also yes/no, on/off, 1/0)";
    case CONFIG_INTEGER: return u64_ok(value, UINT64_MAX) ? NULL : "a non-negative integer";
    case CONFIG_NUMBER: return number_valid(value) ? NULL : "a number";
    case CONFIG_DAY:
        return ds_date_parse(value, strlen(value), &day) == 0 ? NULL : "a day, YYYY-MM-DD";
    case CONFIG_HOST_PORT: return host_port_valid(value) ? NULL : "HOST:PORT, the port 0..65535";
    case CONFIG_ENUM: return enum_has(key->placeholder, value) ? NULL : key->placeholder;
    case CONFIG_STRING: return value[0] != '\0' ? NULL : "a value (it is empty)";
    }
    return "?";
}

/* ---- the file ------------------------------------------------------------------------------ */

static void trim(const char **start, const char **end)
{
    while (*start < *end && isspace((unsigned char)**start)) {
        (*start)++;
    }
    while (*end > *start && isspace((unsigned char)(*end)[-1])) {
        (*end)--;
    }
}

static bool key_chars_valid(const char *key, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)key[i];
        if (!isalnum(c) && c != '-' && c != '.' && c != '_') {
            return false;
        }
    }
    return len > 0;
}

/* One line; NULL when it is fine (a setting in s, or nothing: *set false), else why not. */
static const char *file_line(const char *line, struct config_setting *s, bool *set)
{
    const char *start = line;
    const char *end = line + strlen(line);
    trim(&start, &end);
    *set = false;
    if (start == end || *start == '#' || *start == '!') {
        return NULL;
    }
    const char *sep = start;
    while (sep < end && *sep != '=' && *sep != ':') {
        sep++;
    }
    if (sep == end) {
        return "not a 'key = value' line";
    }
    const char *key_end = sep;
    const char *value = sep + 1;
    trim(&start, &key_end);
    trim(&value, &end);
    if (!key_chars_valid(start, (size_t)(key_end - start))) {
        return "not a 'key = value' line (a key is letters, digits, '-', '.' and '_')";
    }
    if (end > value && end[-1] == '\\') {
        return "continuation lines (a trailing '\\') are not supported";
    }
    const char *dot = memchr(start, '.', (size_t)(key_end - start));
    size_t prefix_len = dot != NULL ? (size_t)(dot - start) : 0;
    if (key_end[-1] == '.' || (dot != NULL && prefix_len == 0)) {
        return "not a key (a part around a '.' is empty)";
    }
    if (dot != NULL && !(prefix_len == 5 && memcmp(start, "kafka", 5) == 0)) {
        if (prefix_len >= sizeof(s->command)) {
            return "unknown key (its prefix is no command)";
        }
        memcpy(s->command, start, prefix_len);
        s->command[prefix_len] = '\0';
        start = dot + 1;
    } else {
        s->command[0] = '\0';
    }
    if ((size_t)(key_end - start) >= sizeof(s->key) || (size_t)(end - value) >= sizeof(s->value)) {
        return "key or value too long";
    }
    memcpy(s->key, start, (size_t)(key_end - start));
    s->key[key_end - start] = '\0';
    memcpy(s->value, value, (size_t)(end - value));
    s->value[end - value] = '\0';
    *set = true;
    return NULL;
}

int config_file_read(const char *path, struct config_file *out, FILE *report)
{
    out->path = path;
    out->count = 0;
    FILE *in = fopen(path, "r");
    if (in == NULL) {
        int err = -errno;
        fprintf(report, "%s: cannot open: %s\n", path, ds_strerror(err));
        return err;
    }
    char line[CONFIG_LINE_BYTES_MAX];
    int errors = 0;
    uint32_t number = 0;
    while (fgets(line, sizeof(line), in) != NULL) {
        number++;
        size_t len = strlen(line);
        if (len == sizeof(line) - 1 && line[len - 1] != '\n') {
            fprintf(report, "%s:%u: line longer than %u bytes\n", path, number,
                    CONFIG_LINE_BYTES_MAX);
            errors++;
            int c;
            while ((c = fgetc(in)) != EOF && c != '\n') {
            }
            continue;
        }
        if (out->count == CONFIG_SETTINGS_MAX) {
            fprintf(report, "%s:%u: more than %u settings\n", path, number, CONFIG_SETTINGS_MAX);
            errors++;
            break;
        }
        struct config_setting *s = &out->setting[out->count];
        bool set = false;
        const char *why = file_line(line, s, &set);
        if (why != NULL) {
            fprintf(report, "%s:%u: %s\n", path, number, why);
            errors++;
        } else if (set) {
            s->line = number;
            out->count++;
        }
    }
    int err = ferror(in) ? -EIO : 0;
    fclose(in);
    if (err != 0) {
        fprintf(report, "%s: read error: %s\n", path, ds_strerror(err));
        return err;
    }
    return errors;
}

/* ---- checking a file ----------------------------------------------------------------------- */

/* Levenshtein distance, capped: the answer is min(distance, cap + 1). */
static size_t edit_distance(const char *a, const char *b, size_t cap)
{
    size_t la = strlen(a);
    size_t lb = strlen(b);
    if (la >= CONFIG_KEY_BYTES_MAX || lb >= CONFIG_KEY_BYTES_MAX) {
        return cap + 1;
    }
    size_t row[CONFIG_KEY_BYTES_MAX + 1];
    for (size_t j = 0; j <= lb; j++) {
        row[j] = j;
    }
    for (size_t i = 1; i <= la; i++) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t above = row[j];
            size_t best = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
            best = above + 1 < best ? above + 1 : best;
            best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
            row[j] = best;
            diagonal = above;
        }
    }
    return row[lb] < cap + 1 ? row[lb] : cap + 1;
}

/* The closest key of keys[0..count) to name within CONFIG_SUGGEST_DISTANCE_MAX, or NULL. */
static const char *suggest(const struct config_keys *keys, size_t count, const char *name)
{
    const char *best = NULL;
    size_t best_distance = CONFIG_SUGGEST_DISTANCE_MAX + 1;
    for (size_t c = 0; c < count; c++) {
        for (uint32_t i = 0; i < keys[c].count; i++) {
            size_t d = edit_distance(name, keys[c].key[i].name, CONFIG_SUGGEST_DISTANCE_MAX);
            if (d < best_distance) {
                best_distance = d;
                best = keys[c].key[i].name;
            }
        }
    }
    return best;
}

struct check {
    const struct config_file *file;
    const struct config_keys *keys; /* one per command */
    size_t count;
    FILE *report;
};

static void report_unknown(const struct check *k, const struct config_setting *s,
                           const struct config_keys *scope, size_t scope_count)
{
    const char *close = suggest(scope, scope_count, s->key);
    fprintf(k->report, "%s:%u: unknown key '%s%s%s'", k->file->path, s->line, s->command,
            s->command[0] != '\0' ? "." : "", s->key);
    if (scope_count == 1) {
        fprintf(k->report, " (not an option of `dayshard %s`)", scope[0].command);
    }
    if (close != NULL) {
        fprintf(k->report, "; did you mean '%s%s%s'?", s->command, s->command[0] != '\0' ? "." : "",
                close);
    }
    fputc('\n', k->report);
}

/* Checks s against the commands keys[0..count) (any may take it); returns 1 on an error. */
static int check_against(const struct check *k, const struct config_setting *s,
                         const struct config_keys *scope, size_t scope_count)
{
    if (strncmp(s->key, CONFIG_KAFKA_PREFIX_TEXT, strlen(CONFIG_KAFKA_PREFIX_TEXT)) == 0) {
        for (size_t c = 0; c < scope_count; c++) {
            if (scope[c].kafka) {
                return 0; /* librdkafka judges the property and its value at startup */
            }
        }
        fprintf(k->report, "%s:%u: '%s': `dayshard %s` takes no librdkafka properties\n",
                k->file->path, s->line, s->key, scope_count == 1 ? scope[0].command : "...");
        return 1;
    }
    const struct config_key *first = NULL;
    for (size_t c = 0; c < scope_count; c++) {
        const struct config_key *key = config_keys_find(&scope[c], s->key);
        if (key != NULL && config_value_problem(key, s->value) == NULL) {
            return 0;
        }
        first = first != NULL ? first : key;
    }
    if (first == NULL) {
        report_unknown(k, s, scope, scope_count);
        return 1;
    }
    fprintf(k->report, "%s:%u: bad value '%s' for '%s': %s\n", k->file->path, s->line, s->value,
            s->key, config_value_problem(first, s->value));
    return 1;
}

static int check_setting(const struct check *k, const struct config_setting *s,
                         const struct config_keys *only)
{
    if (s->command[0] == '\0') {
        return only != NULL ? check_against(k, s, only, 1) : check_against(k, s, k->keys, k->count);
    }
    for (size_t c = 0; c < k->count; c++) {
        if (strcmp(k->keys[c].command, s->command) == 0) {
            return check_against(k, s, &k->keys[c], 1);
        }
    }
    fprintf(k->report, "%s:%u: unknown key '%s.%s' ('%s' is no command)\n", k->file->path, s->line,
            s->command, s->key, s->command);
    return 1;
}

/* A key set twice in one scope: the later line wins, as in Java; a warning names both. */
static void check_duplicate(const struct check *k, uint32_t index)
{
    const struct config_setting *s = &k->file->setting[index];
    for (uint32_t j = 0; j < index; j++) {
        const struct config_setting *earlier = &k->file->setting[j];
        if (strcmp(earlier->command, s->command) == 0 && strcmp(earlier->key, s->key) == 0) {
            fprintf(k->report, "%s:%u: warning: '%s' is also set on line %u; line %u wins\n",
                    k->file->path, s->line, s->key, earlier->line, s->line);
            return;
        }
    }
}

int config_file_check(const struct config_file *file, const struct cli_command *commands,
                      size_t command_count, const struct cli_command *only, FILE *report)
{
    struct config_keys *keys = calloc(command_count, sizeof(*keys));
    if (keys == NULL) {
        fprintf(report, "%s: out of memory\n", file->path);
        return 1;
    }
    const struct config_keys *only_keys = NULL;
    for (size_t c = 0; c < command_count; c++) {
        int rc = config_keys_parse(&commands[c], &keys[c]);
        ASSERT(rc == 0); /* the usage texts are ours: tests/integration/test_config.sh */
        only_keys = &commands[c] == only ? &keys[c] : only_keys;
    }
    ASSERT(only == NULL || only_keys != NULL);
    struct check k = {.file = file, .keys = keys, .count = command_count, .report = report};
    int errors = 0;
    for (uint32_t i = 0; i < file->count; i++) {
        check_duplicate(&k, i);
        errors += check_setting(&k, &file->setting[i], only_keys);
    }
    free(keys);
    return errors;
}
