/*
 * The Kafka message keys of `dayshard produce` (enum loadgen_produce_key): what a producer keys
 * an order event by decides which Kafka partition takes it, so it decides whether a hot day is
 * also a hot Kafka partition.
 *
 * - order: the order_id's text (decimal, or a string id's bytes): orders spread evenly;
 * - customer: the customer_id's text: one customer's orders stay in order in one partition;
 * - day: "YYYY-MM-DD" of the event's UTC day: every event of a day in one partition, the
 *   classic hot partition reproduced at the Kafka level;
 * - partition: the storage partition key "DAY#YYYY-MM-DD#k" with k = shard_of_id(order_id, S)
 *   (shard/shard.h), S from the caller's view of the shard map: a day salted over S keys, the
 *   mitigation, with exactly the routing a node applies.
 *
 * Invariants: pure functions of their arguments (the shard count callback aside), no
 * allocation; a key is at most LOADGEN_PRODUCE_KEY_BYTES_MAX bytes, not NUL-terminated.
 *
 * Rejected: hashing the key ourselves and choosing the Kafka partition (RD_KAFKA_PARTITION_UA
 * with librdkafka's murmur2 partitioner is what Java producers do too, so a key lands on the
 * same partition whichever client sent it, and the topic's partition count stays the broker's).
 */
#include <errno.h>
#include <string.h>

#include "ingest/ingest.h"
#include "loadgen/loadgen.h"
#include "shard/shard.h"

_Static_assert(DS_ID_BYTES_MAX <= LOADGEN_PRODUCE_KEY_BYTES_MAX, "an id's text fits a key");
_Static_assert(SHARD_KEY_TEXT_SIZE - 1u <= LOADGEN_PRODUCE_KEY_BYTES_MAX,
               "a partition key fits a key");
_Static_assert(DS_DATE_TEXT_SIZE - 1 <= LOADGEN_PRODUCE_KEY_BYTES_MAX, "a date fits a key");

/* Indexed by enum loadgen_produce_key: the names of `--key`. */
static const char *const produce_key_names[] = {"order", "customer", "day", "partition"};
_Static_assert(sizeof(produce_key_names) / sizeof(produce_key_names[0]) ==
                   LOADGEN_PRODUCE_KEY_PARTITION + 1,
               "every key mode has a name");

int loadgen_produce_key_parse(const char *text, enum loadgen_produce_key *out)
{
    ASSERT(text != NULL);
    ASSERT(out != NULL);
    for (size_t i = 0; i < DS_ARRAY_LEN(produce_key_names); i++) {
        if (strcmp(text, produce_key_names[i]) == 0) {
            *out = (enum loadgen_produce_key)i;
            return 0;
        }
    }
    return -DS_EUSAGE;
}

const char *loadgen_produce_key_name(enum loadgen_produce_key mode)
{
    if ((unsigned)mode >= DS_ARRAY_LEN(produce_key_names)) {
        return "unknown";
    }
    return produce_key_names[mode];
}

/* The text of an id into dst (at least DS_ID_BYTES_MAX bytes): the decimal digits of an
 * integer id (1..2^63-1, so 1..19 digits), or a string id's bytes. Returns the length. */
static size_t produce_key_id(const struct ds_id *id, char *dst)
{
    if (id->is_string) {
        ASSERT(id->len >= 1 && id->len <= DS_ID_BYTES_MAX);
        memcpy(dst, id->text, id->len);
        return id->len;
    }
    ASSERT(id->value >= 1);
    char digits[24];
    size_t n = 0;
    for (uint64_t v = (uint64_t)id->value; v != 0; v /= 10) {
        digits[n++] = (char)('0' + v % 10);
    }
    for (size_t i = 0; i < n; i++) {
        dst[i] = digits[n - 1 - i];
    }
    ASSERT(n >= 1 && n <= 19);
    return n;
}

/* "DAY#YYYY-MM-DD#k" of the event into dst (at least SHARD_KEY_TEXT_SIZE bytes). */
static size_t produce_key_partition(const struct ds_event *event, int32_t day, uint32_t base_shards,
                                    char *dst, loadgen_produce_shards_fn shards_of_day,
                                    void *shards_user)
{
    uint32_t shard_count = shards_of_day != NULL ? shards_of_day(day, shards_user) : 0;
    if (shard_count == 0) {
        shard_count = base_shards;
    }
    ASSERT(shard_count >= 1 && shard_count <= SHARD_COUNT_MAX);
    uint32_t shard = shard_of_id(&event->order_id, shard_count);
    size_t len = shard_key_format(day, shard, dst);
    ASSERT(len < SHARD_KEY_TEXT_SIZE);
    return len;
}

int loadgen_produce_key_format(enum loadgen_produce_key mode, const struct ds_event *event,
                               uint32_t base_shards, char *dst, size_t dst_capacity,
                               loadgen_produce_shards_fn shards_of_day, void *shards_user)
{
    ASSERT(event != NULL);
    ASSERT(dst != NULL);
    ASSERT(base_shards >= 1 && base_shards <= SHARD_COUNT_MAX);
    /* Formatted in place first: every mode writes at most this much (the asserts above). */
    char key[LOADGEN_PRODUCE_KEY_BYTES_MAX > SHARD_KEY_TEXT_SIZE ? LOADGEN_PRODUCE_KEY_BYTES_MAX
                                                                 : SHARD_KEY_TEXT_SIZE];
    size_t len = 0;
    if (mode == LOADGEN_PRODUCE_KEY_ORDER || mode == LOADGEN_PRODUCE_KEY_CUSTOMER) {
        len = produce_key_id(
            mode == LOADGEN_PRODUCE_KEY_ORDER ? &event->order_id : &event->customer_id, key);
    } else {
        ASSERT(mode == LOADGEN_PRODUCE_KEY_DAY || mode == LOADGEN_PRODUCE_KEY_PARTITION);
        /* Events from the decoder and the generator are within DS_TS_MS_MIN..MAX. */
        ASSERT(event->ts_ms >= DS_TS_MS_MIN && event->ts_ms <= DS_TS_MS_MAX);
        int32_t day = ds_day_from_ms(event->ts_ms);
        if (mode == LOADGEN_PRODUCE_KEY_DAY) {
            char date[DS_DATE_TEXT_SIZE];
            ds_date_format(day, date);
            len = DS_DATE_TEXT_SIZE - 1;
            memcpy(key, date, len);
        } else {
            len = produce_key_partition(event, day, base_shards, key, shards_of_day, shards_user);
        }
    }
    ASSERT(len >= 1 && len <= LOADGEN_PRODUCE_KEY_BYTES_MAX);
    if (len > dst_capacity) {
        return -ENOSPC;
    }
    memcpy(dst, key, len);
    return (int)len;
}
