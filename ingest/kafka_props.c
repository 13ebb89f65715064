/*
 * librdkafka properties from the command line (-X key=value; a --config file's kafka.* keys
 * arrive the same way, cli/config_args.c), applied to an rd_kafka_conf_t in one place so that
 * every Kafka client of the project (node, producer) honours the same settings.
 */
#include <errno.h>
#include <librdkafka/rdkafka.h>
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

void ingest_kafka_conf_set_log(void *rd_conf)
{
    ASSERT(rd_conf != NULL);
    rd_kafka_conf_set_log_cb(rd_conf, kafka_log);
}
