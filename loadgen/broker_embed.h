/*
 * Private to loadgen/: the embedded broker (kafka_broker.c) as the load test and the soak feed
 * their nodes from when no --brokers is given (broker_embed.c): started with the run's one
 * topic, and the producer setting it needs. Called from the run's thread.
 */
#ifndef DS_LOADGEN_BROKER_EMBED_H
#define DS_LOADGEN_BROKER_EMBED_H

#include <stdint.h>

#include "common/common.h"
#include "ingest/ingest.h"
#include "loadgen/loadgen.h"

/* The topic a run creates on the embedded broker (the name `dayshard run` reads by default). */
#define BROKER_EMBED_TOPIC "orders"

/* How the calling command reports a failure (soak_error, loadtest_error): prints the message
 * with the command's prefix and returns code. */
typedef int (*broker_embed_error_fn)(int code, const char *fmt, ...) DS_PRINTF(2, 3);

/* Starts the embedded broker on a free loopback port with one topic (borrowed for the call) of
 * partitions partitions. On success *out is the broker, which the caller stops with
 * loadgen_broker_stop, and *bootstrap its address, valid until then. Returns 0, or the code of
 * loadgen_broker_start after reporting it through error_fn (outputs untouched). */
DS_MUST_USE int broker_embed_start(const char *topic, uint32_t partitions,
                                   broker_embed_error_fn error_fn, struct loadgen_broker **out,
                                   const char **bootstrap);

/* Adds to props (which must have room for one more) the producer setting the embedded broker
 * needs. */
void broker_embed_producer_props(struct ingest_kafka_props *props);

#endif /* DS_LOADGEN_BROKER_EMBED_H */
