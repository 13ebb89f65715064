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

#include "index/index.h"

/* Between two refreshes of a view that is behind. */
#define READER_WAIT_STEP_NS (20u * 1000000u)

/* A wait's state between two steps (ds_wait_until's user). */
struct reader_wait {
    struct index_reader *reader;
    pthread_rwlock_t *lock; /* NULL: the view is this thread's */
    uint64_t want_seq;
    uint64_t indexed; /* what the last refresh reached */
    int rc;           /* the first refresh error: ends the wait */
};

/* One refresh (under the lock when given): done once the view holds want_seq or the refresh
 * failed. */
static bool reader_wait_step(void *user)
{
    struct reader_wait *w = user;
    if (w->lock != NULL) {
        ASSERT(pthread_rwlock_wrlock(w->lock) == 0);
    }
    uint64_t reached = 0;
    int rc = index_reader_refresh(w->reader);
    rc = rc == 0 ? index_reader_indexed_seq(w->reader, &reached) : rc;
    if (w->lock != NULL) {
        ASSERT(pthread_rwlock_unlock(w->lock) == 0);
    }
    if (rc != 0) {
        w->rc = rc;
        return true;
    }
    w->indexed = reached;
    return reached >= w->want_seq;
}

int index_reader_wait(struct index_reader *r, uint64_t want_seq, uint32_t timeout_ms,
                      pthread_rwlock_t *lock, uint64_t *indexed)
{
    ASSERT(r != NULL && indexed != NULL);
    struct reader_wait w = {.reader = r, .lock = lock, .want_seq = want_seq};
    uint64_t deadline = ds_clock_ns() + (uint64_t)timeout_ms * 1000000u;
    bool done = ds_wait_until(reader_wait_step, &w, deadline, READER_WAIT_STEP_NS);
    if (w.rc != 0) {
        return w.rc;
    }
    *indexed = w.indexed;
    return done ? 0 : -ETIMEDOUT;
}
