/*
 * librdkafka properties from the command line (-X key=value; a --config file's kafka.* keys
 * arrive the same way, cli/config_args.c), applied to an rd_kafka_conf_t in one place so that
 * every Kafka client of the project (node, producer) honours the same settings.
 */
#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/ingest.h"
#include "ingest/kafka_log.h"

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

/* The global properties librdkafka documents for one kind of client only, read once from
 * rd_kafka_conf_properties_show (the library is the one source: its list changes with its
 * version). A row reads "name | C/P | range | default | importance | description", with C/P
 * "C" (consumers), "P" (producers) or "*" (both). */
#define PROPS_SCOPED_MAX 512u
#define PROPS_NAME_BYTES 64u

struct props_scoped {
    uint32_t count;
    char name[PROPS_SCOPED_MAX][PROPS_NAME_BYTES];
    char scope[PROPS_SCOPED_MAX]; /* 'C' or 'P' */
};

static struct props_scoped props_scoped;
static pthread_once_t props_scoped_once = PTHREAD_ONCE_INIT;

static void props_scoped_row(const char *line)
{
    const char *bar = strchr(line, '|');
    if (bar == NULL || props_scoped.count == PROPS_SCOPED_MAX) {
        return;
    }
    size_t len = (size_t)(bar - line);
    while (len > 0 && line[len - 1] == ' ') {
        len--;
    }
    const char *scope = bar + 1;
    while (*scope == ' ') {
        scope++;
    }
    if (len == 0 || len >= PROPS_NAME_BYTES || (*scope != 'C' && *scope != 'P') ||
        scope[1] != ' ') {
        return; /* a header, a separator, "*" (both kinds) */
    }
    memcpy(props_scoped.name[props_scoped.count], line, len);
    props_scoped.name[props_scoped.count][len] = '\0';
    props_scoped.scope[props_scoped.count++] = *scope;
}

static void props_scoped_load(void)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (f == NULL) {
        return; /* nothing known: every property goes to every client, as librdkafka allows */
    }
    rd_kafka_conf_properties_show(f);
    if (fclose(f) != 0 || text == NULL) {
        free(text);
        return;
    }
    for (char *line = text, *next = NULL; line != NULL && *line != '\0'; line = next) {
        next = strchr(line, '\n');
        if (next != NULL) {
            *next++ = '\0';
        }
        if (strncmp(line, "## Topic configuration", 22) == 0) {
            break; /* topic properties apply to producers and consumers through their topics */
        }
        props_scoped_row(line);
    }
    free(text);
}

/* 'C', 'P', or 0 for a property both kinds take (or one librdkafka does not list). */
static char props_scope(const char *name)
{
    pthread_once(&props_scoped_once, props_scoped_load);
    for (uint32_t i = 0; i < props_scoped.count; i++) {
        if (strcmp(props_scoped.name[i], name) == 0) {
            return props_scoped.scope[i];
        }
    }
    return 0;
}

int ingest_kafka_props_apply(const struct ingest_kafka_props *props,
                             enum ingest_kafka_client client, void *rd_conf, char *err,
                             size_t err_capacity)
{
    rd_kafka_conf_t *conf = rd_conf;
    char other = client == INGEST_KAFKA_PRODUCER ? 'C' : 'P';
    for (uint32_t i = 0; props != NULL && i < props->count; i++) {
        if (props_scope(props->key[i]) == other) {
            ds_log_debug("kafka: %s is for %s only: not given to a %s", props->key[i],
                         other == 'C' ? "consumers" : "producers",
                         other == 'C' ? "producer" : "consumer");
            continue;
        }
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

void ingest_kafka_conf_set_log(void *rd_conf)
{
    ASSERT(rd_conf != NULL);
    rd_kafka_conf_set_log_cb(rd_conf, kafka_log);
}
