/*
 * A unit test over one data directory (storage/storage.h): a fresh temporary directory per
 * test as cmocka's setup and teardown, and a store opened on it with the settings these tests
 * share. Single-threaded test code only; a failure fails the running test.
 */
#ifndef DS_TEST_STORE_FIXTURE_H
#define DS_TEST_STORE_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/storage.h"

#define TEST_STORE_PATH_BYTES 256u
#define TEST_STORE_TEXT_BYTES 65536u

/* What test_store_setup gives each test as *state; test_store_teardown removes dir with
 * everything under it and frees the fixture. */
struct test_store_fixture {
    char dir[TEST_STORE_PATH_BYTES];      /* /tmp/dayshard-test-XXXXXX, made for this test */
    char path[2 * TEST_STORE_PATH_BYTES]; /* the test's own: a path it builds under dir */
    char text[TEST_STORE_TEXT_BYTES];     /* the test's own: a report it reads back */
};

int test_store_setup(void **state);
int test_store_teardown(void **state);

/* storage_config_defaults, then the settings these tests share: dir, synchronous I/O (their
 * fault and crash loops count the I/O in order), room for partitions_max partitions, and model;
 * a reader (read_only) takes the model the directory records. The caller sets the rest. */
void test_store_config(struct storage_config *cfg, const char *dir, enum storage_model model,
                       bool read_only, uint32_t partitions_max);
/* storage_open(cfg); a failure fails the test, naming the directory and the error. */
struct storage *test_store_open(const struct storage_config *cfg);

/* Flips one byte near the end of the payload of block index (0: the first) in the first
 * segment of partition (day, shard) of the closed store in dir: its checksum fails, and fsck
 * --repair quarantines that block alone. */
void test_store_block_damage(const char *dir, int32_t day, uint32_t shard, uint32_t index);

#endif /* DS_TEST_STORE_FIXTURE_H */
