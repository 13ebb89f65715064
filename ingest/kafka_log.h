/*
 * Private to ingest/: librdkafka's own log lines through dayshard's logger (DS_LOG), so a
 * broker going away reads as one warning in our words (the error callbacks) and not also as
 * librdkafka's "%3|...|FAIL|..." lines beside it.
 */
#ifndef DS_INGEST_KAFKA_LOG_H
#define DS_INGEST_KAFKA_LOG_H

#include <librdkafka/rdkafka.h>

/* For rd_kafka_conf_set_log_cb: configuration warnings (CONFWARN) are warnings; everything
 * else is debug, since what matters reaches the error callbacks, which log it once. */
void kafka_log(const rd_kafka_t *rk, int level, const char *facility, const char *text);

#endif /* DS_INGEST_KAFKA_LOG_H */
