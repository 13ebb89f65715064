/*
 * ingest_kafka_props_apply: a property librdkafka documents for one kind of client reaches only
 * that kind (so a producer built from a node's -X settings does not warn that it ignores a
 * consumer's), a property for both reaches both, and a refused one is an error with its reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <librdkafka/rdkafka.h>

#include "ingest/ingest.h"

/* The value a configuration holds for name, or "" when unset. */
static const char *conf_value(rd_kafka_conf_t *conf, const char *name, char *dst, size_t cap)
{
    size_t size = cap;
    if (rd_kafka_conf_get(conf, name, dst, &size) != RD_KAFKA_CONF_OK) {
        dst[0] = '\0';
    }
    return dst;
}

static void test_props_reach_their_kind_of_client(void **state)
{
    (void)state;
    static struct ingest_kafka_props props;
    memset(&props, 0, sizeof(props));
    assert_int_equal(ingest_kafka_props_add(&props, "session.timeout.ms=6000"), 0); /* C */
    assert_int_equal(ingest_kafka_props_add(&props, "linger.ms=17"), 0);            /* P */
    assert_int_equal(ingest_kafka_props_add(&props, "socket.timeout.ms=4321"), 0);  /* * */
    char err[512];
    char v[64];

    rd_kafka_conf_t *producer = rd_kafka_conf_new();
    assert_int_equal(
        ingest_kafka_props_apply(&props, INGEST_KAFKA_PRODUCER, producer, err, sizeof(err)), 0);
    assert_string_equal(conf_value(producer, "session.timeout.ms", v, sizeof(v)), "45000");
    assert_string_equal(conf_value(producer, "linger.ms", v, sizeof(v)), "17");
    assert_string_equal(conf_value(producer, "socket.timeout.ms", v, sizeof(v)), "4321");
    rd_kafka_conf_destroy(producer);

    rd_kafka_conf_t *consumer = rd_kafka_conf_new();
    assert_int_equal(
        ingest_kafka_props_apply(&props, INGEST_KAFKA_CONSUMER, consumer, err, sizeof(err)), 0);
    assert_string_equal(conf_value(consumer, "session.timeout.ms", v, sizeof(v)), "6000");
    assert_string_not_equal(conf_value(consumer, "linger.ms", v, sizeof(v)), "17");
    assert_string_equal(conf_value(consumer, "socket.timeout.ms", v, sizeof(v)), "4321");
    rd_kafka_conf_destroy(consumer);
}

static void test_props_refused_with_reason(void **state)
{
    (void)state;
    static struct ingest_kafka_props props;
    memset(&props, 0, sizeof(props));
    assert_int_equal(ingest_kafka_props_add(&props, "no.such.property=1"), 0);
    char err[512] = "";
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    assert_int_equal(
        ingest_kafka_props_apply(&props, INGEST_KAFKA_CONSUMER, conf, err, sizeof(err)),
        -DS_EUSAGE);
    assert_non_null(strstr(err, "no.such.property"));
    rd_kafka_conf_destroy(conf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_props_reach_their_kind_of_client),
        cmocka_unit_test(test_props_refused_with_reason),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
