/*
 * The embedded broker as a run uses it (broker_embed.h): the load test and the soak each start
 * one for a run without --brokers and point their producer at it, in the same way, so the
 * start, its error and the producer's setting live here once.
 *
 * The error is reported through the caller's function rather than logged here, so each command
 * keeps its own prefix and log format ("dayshard soak: ...", the load test's JSON lines).
 * Rejected: a start that also picks the topic for --brokers, as the two differ there (the load
 * test makes a topic per run on a real cluster, the soak takes --topic).
 */
#include "loadgen/broker_embed.h"

int broker_embed_start(const char *topic, uint32_t partitions, broker_embed_error_fn error_fn,
                       struct loadgen_broker **out, const char **bootstrap)
{
    ASSERT(topic != NULL);
    ASSERT(error_fn != NULL);
    ASSERT(out != NULL && bootstrap != NULL);
    struct loadgen_broker_config b;
    loadgen_broker_config_defaults(&b);
    b.topic = topic;
    b.partitions = partitions;
    struct loadgen_broker *broker = NULL;
    int rc = loadgen_broker_start(&b, &broker);
    if (rc != 0) {
        return error_fn(rc, "cannot start the embedded broker: %s", ds_strerror(rc));
    }
    *out = broker;
    *bootstrap = loadgen_broker_bootstrap(broker);
    return 0;
}

void broker_embed_producer_props(struct ingest_kafka_props *props)
{
    ASSERT(props != NULL);
    /* The embedded broker finds a fetch offset by walking a partition's message sets: at
     * 10,000 events/s over 8 partitions the default linger of 5 ms makes sets of ~6 messages,
     * and after 30 s the walk took a whole core (41 s of CPU in 60 s, the nodes 3 s behind).
     * Sets of 50 ms: 2 s of CPU. Real Kafka indexes offsets: defaults there. */
    int rc = ingest_kafka_props_add(props, "linger.ms=50");
    ASSERT(rc == 0);
}
