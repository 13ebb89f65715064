/*
 * Test helpers: throwaway directories, the seed of randomised tests and the run's size.
 *
 * Single-threaded test code only. Directories live under /tmp with the prefix "dayshard-test-"
 * so that a crashed run's leftovers are easy to find and remove.
 */
#ifndef DS_TEST_TEMPDIR_H
#define DS_TEST_TEMPDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

/* Creates a fresh directory /tmp/dayshard-test-XXXXXX and writes its path (NUL-terminated) into
 * dst. Returns 0, -ENAMETOOLONG when cap is too small, or the negated errno of mkdtemp. */
DS_MUST_USE int test_tempdir_make(char *dst, size_t cap);

/* Removes path and everything under it (depth-first, symlinks not followed). Errors are ignored:
 * this runs in teardown, where there is nobody left to tell. NULL or "" does nothing. */
void test_tempdir_remove(const char *path);
/* As test_tempdir_remove, but stops at the first entry it cannot remove and returns the negated
 * errno, for a teardown that must fail when a test leaves an undeletable tree behind. Returns 0
 * when everything is gone. path must not be NULL or "". */
DS_MUST_USE int test_tempdir_remove_checked(const char *path);

/* The seed of a randomised test: DS_TEST_SEED when set (decimal or 0x-hex), else 20261130.
 * Prints "seed=N" to stderr on every call, so a failing run can be replayed. */
uint64_t test_seed(void);
/* DS_TEST_SEED when set, parsed as test_seed does, else fallback. Prints nothing (a bad value
 * aside): for tests that keep a default seed of their own and print it once, in main. */
uint64_t test_seed_or(uint64_t fallback);

/* True when DS_SHORT=1: the sanitizer passes, where each loop iteration costs 5-30 times as
 * much, ask the longest loops for a sample of their cases instead of every one. */
bool test_short_run(void);

#endif /* DS_TEST_TEMPDIR_H */
