/*
 * The data directory fixture of storage's unit tests (store_fixture.h). One fixture struct for
 * all of them, with room for what some need (a path, a report's text), so each test file keeps
 * only what its tests build in the directory. Rejected: a fixture sized by each test, which
 * cmocka's setup signature (void **state) cannot pass without a per-file wrapper again.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "storage/format.h"
#include "tests/support/store_fixture.h"
#include "tests/support/tempdir.h"

int test_store_setup(void **state)
{
    struct test_store_fixture *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    assert_int_equal(test_tempdir_make(fx->dir, sizeof(fx->dir)), 0);
    *state = fx;
    return 0;
}

int test_store_teardown(void **state)
{
    struct test_store_fixture *fx = *state;
    test_tempdir_remove(fx->dir);
    free(fx);
    return 0;
}

void test_store_config(struct storage_config *cfg, const char *dir, enum storage_model model,
                       bool read_only, uint32_t partitions_max)
{
    storage_config_defaults(cfg);
    cfg->dir = dir;
    cfg->io_mode = STORAGE_IO_SYNC;
    cfg->read_only = read_only;
    cfg->partitions_max = partitions_max;
    cfg->model = read_only ? STORAGE_MODEL_RECORDED : model;
}

struct storage *test_store_open(const struct storage_config *cfg)
{
    struct storage *st = NULL;
    int rc = storage_open(cfg, &st);
    if (rc != 0) {
        fail_msg("storage_open %s: %s", cfg->dir, ds_strerror(rc));
    }
    return st;
}

void test_store_block_damage(const char *dir, int32_t day, uint32_t shard, uint32_t index)
{
    char date[DS_DATE_TEXT_SIZE];
    ds_date_format(day, date);
    char path[DS_PATH_MAX];
    snprintf(path, sizeof(path), "%s/parts/%s/%u/%08u.seg", dir, date, shard, 1u);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint64_t at = sizeof(struct segment_header);
    struct block_header h;
    for (uint32_t i = 0;; i++) {
        assert_int_equal(pread(fd, &h, sizeof(h), (off_t)at), (ssize_t)sizeof(h));
        assert_int_equal(h.magic, BLOCK_MAGIC);
        if (i == index) {
            break;
        }
        at += (uint64_t)h.header_bytes + h.payload_bytes;
    }
    off_t flip = (off_t)(at + h.header_bytes + h.payload_bytes - 2);
    uint8_t byte = 0;
    assert_int_equal(pread(fd, &byte, 1, flip), 1);
    byte ^= 0x5A;
    assert_int_equal(pwrite(fd, &byte, 1, flip), 1);
    assert_int_equal(close(fd), 0);
}
