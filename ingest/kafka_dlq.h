/*
 * Private to ingest/: the dead-letter topic of a node (`dayshard run --dlq-topic T`). Every
 * dead-letter record written to the file is also produced to T, keyed by the source partition;
 * before the node commits Kafka offsets it flushes these, so an offset never advances past a
 * bad event whose copy the topic has not acknowledged. All calls come from the writer thread.
 */
#ifndef DS_INGEST_KAFKA_DLQ_H
#define DS_INGEST_KAFKA_DLQ_H

#include <stdatomic.h>

#include "ingest/ingest.h"

struct kafka_dlq;

DS_MUST_USE int kafka_dlq_create(const char *brokers, const char *topic,
                                 const struct ingest_kafka_props *props, struct kafka_dlq **out);
/* Queues one record (copied). */
void kafka_dlq_send(struct kafka_dlq *q, const char *record, size_t len, int32_t partition);
/* Waits up to timeout_ms for every queued record, and no later than *deadline_ns once that is
 * non-zero (the node's stop, set from another thread while the wait runs; a deadline already
 * past still polls once); returns 0 when all were acknowledged since the last call, else
 * -DS_EKAFKA (the failures are logged with their count). */
DS_MUST_USE int kafka_dlq_flush(struct kafka_dlq *q, int timeout_ms,
                                const atomic_uint_least64_t *deadline_ns);
/* Waits up to timeout_ms (0: not at all) for the records still queued, then drops what is left
 * (the dead-letter file holds every record) and frees q. Accepts NULL. */
void kafka_dlq_destroy(struct kafka_dlq *q, int timeout_ms);

#endif /* DS_INGEST_KAFKA_DLQ_H */
