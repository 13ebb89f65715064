/*
 * Temp directories and seeds for tests. Removal walks the tree with nftw (FTW_DEPTH so that
 * children go before their directory, FTW_PHYS so that a symlink is removed, never followed out
 * of the tree). Rejected: system("rm -rf"), which breaks on odd paths and forks per teardown.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/tempdir.h"

#define TEMPDIR_TEMPLATE "/tmp/dayshard-test-XXXXXX"
/* Directory depth nftw keeps descriptors open for; tests' trees are a few levels deep. */
#define TEMPDIR_FDS_MAX 16
#define TEST_SEED_DEFAULT 20261130ull

int test_tempdir_make(char *dst, size_t cap)
{
    ASSERT(dst != NULL);
    if (cap < sizeof(TEMPDIR_TEMPLATE)) {
        return -ENAMETOOLONG;
    }
    memcpy(dst, TEMPDIR_TEMPLATE, sizeof(TEMPDIR_TEMPLATE));
    if (mkdtemp(dst) == NULL) {
        int err = -errno;
        dst[0] = '\0';
        return err;
    }
    return 0;
}

static int tempdir_remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    (void)remove(path);
    return 0; /* keep going: remove as much as possible */
}

static int tempdir_remove_entry_checked(const char *path, const struct stat *st, int type,
                                        struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    return remove(path) == 0 ? 0 : -errno; /* nonzero stops the walk, and nftw returns it */
}

void test_tempdir_remove(const char *path)
{
    if (path == NULL || path[0] == '\0') {
        return;
    }
    (void)nftw(path, tempdir_remove_entry, TEMPDIR_FDS_MAX, FTW_DEPTH | FTW_PHYS);
}

int test_tempdir_remove_checked(const char *path)
{
    ASSERT(path != NULL);
    ASSERT(path[0] != '\0');
    int rc = nftw(path, tempdir_remove_entry_checked, TEMPDIR_FDS_MAX, FTW_DEPTH | FTW_PHYS);
    if (rc == -1) {
        return -errno; /* the walk itself failed (path missing, unreadable directory) */
    }
    return rc;
}

uint64_t test_seed(void)
{
    uint64_t seed = test_seed_or(TEST_SEED_DEFAULT);
    fprintf(stderr, "seed=%llu\n", (unsigned long long)seed);
    return seed;
}

uint64_t test_seed_or(uint64_t fallback)
{
    uint64_t seed = fallback;
    const char *env = getenv("DS_TEST_SEED");
    if (env != NULL && env[0] != '\0') {
        char *end = NULL;
        errno = 0;
        unsigned long long value = strtoull(env, &end, 0);
        if (errno == 0 && end != NULL && *end == '\0') {
            seed = (uint64_t)value;
        } else {
            fprintf(stderr, "DS_TEST_SEED=%s is not a number, using the default\n", env);
        }
    }
    return seed;
}

bool test_short_run(void)
{
    const char *env = getenv("DS_SHORT");
    return env != NULL && strcmp(env, "1") == 0;
}
