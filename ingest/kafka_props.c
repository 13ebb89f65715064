/*
 * librdkafka properties from the command line (-X key=value) and from Java-properties style
 * files (--config FILE, "kafka.*" keys), applied to an rd_kafka_conf_t in one place so that
 * every Kafka client of the project (node, producer) honours the same settings.
 * Rejected: passing the file to librdkafka unparsed (it has no file loader, and the file also
 * carries dayshard's own settings).
 */
#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/ingest.h"
#include "ingest/kafka_log.h"

#define PROPS_LINE_BYTES_MAX 4096u

static int props_put(struct ingest_kafka_props *props, const char *key, size_t key_len,
                     const char *value, size_t value_len)
{
    if (key_len == 0) {
        return -DS_EUSAGE;
    }
    if (key_len >= INGEST_KAFKA_PROP_BYTES_MAX || value_len >= INGEST_KAFKA_PROP_BYTES_MAX ||
        props->count == INGEST_KAFKA_PROPS_MAX) {
        return -DS_ELIMIT;
    }
    uint32_t i = props->count++;
    memcpy(props->key[i], key, key_len);
    props->key[i][key_len] = '\0';
    memcpy(props->value[i], value, value_len);
    props->value[i][value_len] = '\0';
    return 0;
}

int ingest_kafka_props_add(struct ingest_kafka_props *props, const char *key_value)
{
    const char *eq = strchr(key_value, '=');
    if (eq == NULL) {
        return -DS_EUSAGE;
    }
    return props_put(props, key_value, (size_t)(eq - key_value), eq + 1, strlen(eq + 1));
}

static void trim(const char **start, const char **end)
{
    while (*start < *end && (**start == ' ' || **start == '\t')) {
        (*start)++;
    }
    while (*end > *start &&
           ((*end)[-1] == ' ' || (*end)[-1] == '\t' || (*end)[-1] == '\r' || (*end)[-1] == '\n')) {
        (*end)--;
    }
}

/* One line of a properties file; returns 0 or -DS_EUSAGE / -DS_ELIMIT. */
static int props_line(struct ingest_kafka_props *props, const char *line,
                      ingest_props_other_fn other_fn, void *user)
{
    const char *start = line;
    const char *end = line + strlen(line);
    trim(&start, &end);
    if (start == end || *start == '#' || *start == '!') {
        return 0;
    }
    const char *sep = start;
    while (sep < end && *sep != '=' && *sep != ':') {
        sep++;
    }
    if (sep == end) {
        return -DS_EUSAGE;
    }
    const char *key_end = sep;
    const char *value = sep + 1;
    trim(&start, &key_end);
    trim(&value, &end);
    static const char prefix[] = "kafka.";
    size_t key_len = (size_t)(key_end - start);
    if (key_len > sizeof(prefix) - 1 && memcmp(start, prefix, sizeof(prefix) - 1) == 0) {
        return props_put(props, start + sizeof(prefix) - 1, key_len - (sizeof(prefix) - 1), value,
                         (size_t)(end - value));
    }
    if (other_fn == NULL || key_len >= INGEST_KAFKA_PROP_BYTES_MAX ||
        (size_t)(end - value) >= INGEST_KAFKA_PROP_BYTES_MAX) {
        return -DS_EUSAGE;
    }
    char key[INGEST_KAFKA_PROP_BYTES_MAX];
    char val[INGEST_KAFKA_PROP_BYTES_MAX];
    memcpy(key, start, key_len);
    key[key_len] = '\0';
    memcpy(val, value, (size_t)(end - value));
    val[end - value] = '\0';
    return other_fn(key, val, user);
}

int ingest_kafka_props_load(struct ingest_kafka_props *props, const char *path,
                            ingest_props_other_fn other_fn, void *user)
{
    FILE *in = fopen(path, "r");
    if (in == NULL) {
        int err = -errno;
        ds_log_error("%s: cannot open: %s", path, ds_strerror(err));
        return err;
    }
    char line[PROPS_LINE_BYTES_MAX];
    int rc = 0;
    for (unsigned number = 1; rc == 0 && fgets(line, sizeof(line), in) != NULL; number++) {
        size_t len = strlen(line);
        if (len == sizeof(line) - 1 && line[len - 1] != '\n') {
            ds_log_error("%s:%u: line longer than %u bytes", path, number, PROPS_LINE_BYTES_MAX);
            rc = -DS_EUSAGE;
            break;
        }
        rc = props_line(props, line, other_fn, user);
        if (rc != 0) {
            ds_log_error("%s:%u: %s", path, number,
                         rc == -DS_ELIMIT ? "too many or too long properties"
                                          : "not a key=value setting dayshard knows");
        }
    }
    if (rc == 0 && ferror(in)) {
        rc = -EIO;
    }
    fclose(in);
    return rc;
}

int ingest_kafka_props_apply(const struct ingest_kafka_props *props, void *rd_conf, char *err,
                             size_t err_capacity)
{
    rd_kafka_conf_t *conf = rd_conf;
    for (uint32_t i = 0; props != NULL && i < props->count; i++) {
        if (rd_kafka_conf_set(conf, props->key[i], props->value[i], err, err_capacity) !=
            RD_KAFKA_CONF_OK) {
            return -DS_EUSAGE;
        }
    }
    return 0;
}

void kafka_log(const rd_kafka_t *rk, int level, const char *facility, const char *text)
{
    (void)rk;
    (void)level;
    bool config = strcmp(facility, "CONFWARN") == 0;
    ds_log(config ? DS_LOG_WARN : DS_LOG_DEBUG, "rdkafka %s: %s", facility, text);
}
