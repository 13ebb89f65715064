/*
 * Waiting for a view of the by-customer index to catch up (`orders --data --consistent` and
 * `serve`'s consistent=true): refresh, compare the sequence the view holds with the one asked
 * for, sleep a step, until it holds it or the time is up. One loop for both callers, so an error
 * of the refresh is never mistaken for "not there yet" and never answered with an older page.
 *
 * A view shared by threads (the service's) is refreshed under its lock held for writing and
 * read by queries under the same lock held for reading; the lock is taken per step, never across
 * the sleep, so queries go on while a request waits.
 *
 * Rejected: a condition variable woken by the builder (the builder runs in another process for
 * these readers: the log file is all they share).
 */
#include <errno.h>
#include <time.h>

#include "index/index.h"

/* Between two refreshes of a view that is behind. */
#define READER_WAIT_STEP_NS (20u * 1000000u)

/* One refresh (under lock when given) and the sequence it reached. */
static int reader_wait_step(struct index_reader *r, pthread_rwlock_t *lock, uint64_t *indexed)
{
    if (lock != NULL) {
        ASSERT(pthread_rwlock_wrlock(lock) == 0);
    }
    int rc = index_reader_refresh(r);
    rc = rc == 0 ? index_reader_indexed_seq(r, indexed) : rc;
    if (lock != NULL) {
        ASSERT(pthread_rwlock_unlock(lock) == 0);
    }
    return rc;
}

int index_reader_wait(struct index_reader *r, uint64_t want_seq, uint32_t timeout_ms,
                      pthread_rwlock_t *lock, uint64_t *indexed)
{
    ASSERT(r != NULL && indexed != NULL);
    uint64_t deadline = ds_clock_ns() + (uint64_t)timeout_ms * 1000000u;
    for (;;) { /* bounded by the deadline */
        uint64_t reached = 0;
        int rc = reader_wait_step(r, lock, &reached);
        if (rc != 0) {
            return rc;
        }
        *indexed = reached;
        if (reached >= want_seq) {
            return 0;
        }
        if (ds_clock_ns() >= deadline) {
            return -ETIMEDOUT;
        }
        struct timespec step = {.tv_sec = 0, .tv_nsec = READER_WAIT_STEP_NS};
        nanosleep(&step, NULL);
    }
}
