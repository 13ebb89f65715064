/*
 * The io_uring I/O backend: one ring, one fixed queue of write and sync operations, run at flush
 * with every fd's operations as one linked chain and different fds' chains side by side.
 *
 * Why chains: a segment's block writes must land before its fdatasync, but the blocks and syncs
 * of several partitions are independent. Grouping the queue by fd (stable, so each fd keeps its
 * queue order) and linking each group with IOSQE_IO_LINK gives exactly that order and no more.
 * A failed or short write breaks its chain: the kernel completes the rest with -ECANCELED, so a
 * sync never follows a failed write of its file; a cancellation is never reported as the first
 * error, the failure that caused it is. A short write's remainder is retried synchronously
 * (uring_finish_chains), so that a full disk reports -ENOSPC like the sync backend. A chain the
 * kernel cancelled with nothing of ours failing (likely the work it queued for its io-wq when it
 * could not start a worker thread: kernel 6.x gives up after a few creations interrupted by
 * signals) is finished synchronously too, in order, as the ring would have run it.
 *
 * Invariants:
 * - count <= STORAGE_IO_DEPTH_MAX, the ring's submission queue depth, so a whole queue (and any
 *   chain in it) fits in the ring and goes to the kernel in one submit. A full queue is flushed
 *   implicitly before the next operation is queued; its error is kept in err and returned by the
 *   next flush, so nothing queued counts as done until a flush returns 0.
 * - Between flushes the submission and completion rings are empty: a drain reaps every
 *   completion of what it submitted before returning.
 * - Synchronous calls (read, size, truncate, close) on an fd with queued operations drain the
 *   queue first, so they see (or follow) those operations exactly as with the sync backend.
 * - A ring that fails in a way it cannot recover from (an io_uring_enter error other than
 *   EINTR, EAGAIN, EBUSY, or no progress at all after URING_SUBMIT_RETRIES_MAX submits) is
 *   marked broken and every later flush returns that error: SQEs it may still hold point at
 *   buffers the caller is free to reuse once flush returns, so it is never entered again.
 *
 * DS_IO_URING_DISABLE set to anything but "" or "0" makes creation fail with -ENOSYS, as on a
 * kernel without io_uring, so tests and operators can force the sync fallback.
 * DS_IO_URING_TEST_CANCEL=K (tests only; K >= 1) turns the completions of every chain from its
 * K-th op on into -ECANCELED after the ring ran them, as a kernel cancellation looks: the only
 * way to reach that path on demand (test_io_uring_kernel_cancellation_is_finished).
 *
 * Rejected: one ring submission per fd, waiting for each in turn (loses the overlap of syncs of
 * different segments, the reason for io_uring here), and IOSQE_IO_DRAIN (orders every operation
 * against every other, fds included, serialising the whole flush).
 */
#include <liburing.h>

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "storage/io_private.h"
#include "storage/limits.h"

/* One queued write covers at most this: an SQE length is 32 bits and the kernel caps one write
 * at MAX_RW_COUNT (2 GiB - 4 KiB). Longer writes are queued as several consecutive ops. */
#define URING_WRITE_BYTES_MAX (1u << 30)
/* Submits in a row answered -EAGAIN or -EBUSY (or taking nothing) with nothing in flight to wait
 * for, before a flush gives up with -EAGAIN: a few ride out a momentary shortage of kernel
 * memory, a thousand mean the ring is stuck and the writer should stop rather than spin. */
#define URING_SUBMIT_RETRIES_MAX 1000u
/* The result of an op whose completion has not been reaped; no kernel result is this negative. */
#define URING_RES_PENDING INT_MIN

static_assert(STORAGE_IO_DEPTH_MAX <= UINT16_MAX, "order[] holds op indexes in 16 bits");
static_assert(URING_WRITE_BYTES_MAX <= INT_MAX, "a write's cqe->res must fit its length");

/* URING_OP_SYNC is fdatasync, URING_OP_SYNC_DIR a full fsync (a directory's new entries). */
enum uring_op_kind { URING_OP_WRITE, URING_OP_SYNC, URING_OP_SYNC_DIR };

struct uring_op {
    const void *buf; /* retained until the flush returns */
    uint64_t offset;
    uint32_t len;
    int fd;
    int res; /* cqe->res, or URING_RES_PENDING */
    enum uring_op_kind kind;
};

struct uring_backend {
    struct storage_io base; /* first member: the ops table casts back */
    struct io_uring ring;
    int err;                   /* first error of an implicit flush since the last flush, or 0 */
    int broken;                /* the unrecoverable ring error, or 0 */
    uint32_t test_cancel_from; /* DS_IO_URING_TEST_CANCEL: chains' ops from this one (1-based) */
    uint32_t count;
    struct uring_op ops[STORAGE_IO_DEPTH_MAX];
    uint16_t order[STORAGE_IO_DEPTH_MAX]; /* op indexes grouped by fd, queue order kept */
};

static const struct storage_io_ops uring_ops;

static struct uring_backend *uring_from(struct storage_io *io)
{
    ASSERT(io != NULL);
    ASSERT(io->ops == &uring_ops);
    return (struct uring_backend *)io;
}

/* ---- flush: order, prepare, submit, reap, report ------------------------------------------ */

/* Stable insertion sort of op indexes by fd: at most STORAGE_IO_DEPTH_MAX entries, and queues
 * are mostly runs of one fd already, which insertion sort handles in linear time. */
static void uring_order_by_fd(struct uring_backend *b)
{
    for (uint32_t i = 0; i < b->count; i++) {
        uint16_t index = (uint16_t)i;
        uint32_t j = i;
        while (j > 0 && b->ops[b->order[j - 1]].fd > b->ops[index].fd) {
            b->order[j] = b->order[j - 1];
            j--;
        }
        b->order[j] = index;
    }
}

static void uring_prepare(struct uring_backend *b)
{
    ASSERT(io_uring_sq_space_left(&b->ring) >= b->count);
    for (uint32_t i = 0; i < b->count; i++) {
        struct uring_op *op = &b->ops[b->order[i]];
        struct io_uring_sqe *sqe = io_uring_get_sqe(&b->ring);
        ASSERT(sqe != NULL);
        if (op->kind == URING_OP_WRITE) {
            io_uring_prep_write(sqe, op->fd, op->buf, op->len, op->offset);
        } else {
            io_uring_prep_fsync(sqe, op->fd,
                                op->kind == URING_OP_SYNC ? IORING_FSYNC_DATASYNC : 0u);
        }
        io_uring_sqe_set_data64(sqe, b->order[i]);
        bool chained = i + 1 < b->count && b->ops[b->order[i + 1]].fd == op->fd;
        if (chained) {
            io_uring_sqe_set_flags(sqe, IOSQE_IO_LINK);
        }
        op->res = URING_RES_PENDING;
    }
}

/* Records every available completion; returns how many. */
static uint32_t uring_reap(struct uring_backend *b)
{
    uint32_t reaped = 0;
    struct io_uring_cqe *cqe = NULL;
    while (io_uring_peek_cqe(&b->ring, &cqe) == 0) {
        uint64_t index = io_uring_cqe_get_data64(cqe);
        ASSERT(index < b->count);
        ASSERT(b->ops[index].res == URING_RES_PENDING);
        b->ops[index].res = cqe->res;
        io_uring_cq_advance(&b->ring, 1);
        reaped++;
    }
    return reaped;
}

/* Submits the prepared queue and waits for every completion. Returns 0 once all are reaped (each
 * op's own result is in op->res), or the ring's unrecoverable error.
 *
 * The kernel may take fewer SQEs than offered (it stops at one it cannot even start). A chain
 * cut at that boundary would let its tail run alongside its head, so nothing more is submitted
 * until everything in flight has completed: order per fd holds in every case. (The tail then
 * runs even if its head failed; the flush still reports the head's error, after which the
 * contract leaves the file's state unknown anyway.) */
static int uring_run(struct uring_backend *b)
{
    uint32_t n = b->count;
    uint32_t submitted = 0;
    uint32_t done = 0;
    uint32_t retries = 0;
    while (done < n) {
        ASSERT(done <= submitted);
        ASSERT(submitted <= n);
        uint32_t progress_before = submitted + done;
        int rc;
        if (submitted == done) {
            rc = io_uring_submit_and_wait(&b->ring, n - submitted);
            if (rc > 0) {
                submitted += (uint32_t)rc;
            }
        } else {
            struct io_uring_cqe *cqe = NULL;
            rc = io_uring_wait_cqe_nr(&b->ring, &cqe, submitted - done);
        }
        done += uring_reap(b);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
            ds_log_error("io_uring_enter failed with %u of %u ops in flight: %s", submitted - done,
                         n - done, ds_strerror(rc));
            b->broken = rc;
            return rc;
        }
        if (submitted + done != progress_before || submitted > done || rc == -EINTR) {
            retries = 0;
            continue; /* progress, or completions to wait for */
        }
        if (++retries > URING_SUBMIT_RETRIES_MAX) {
            ds_log_error("io_uring submit made no progress (%u of %u ops done): %s", done, n,
                         ds_strerror(rc < 0 ? rc : -EAGAIN));
            /* Unsubmitted SQEs stay in the ring pointing at buffers the caller will reuse:
             * the ring must never be entered again. */
            b->broken = -EAGAIN;
            return -EAGAIN;
        }
        (void)sched_yield();
    }
    ASSERT(done == n);
    return 0;
}

/* Runs op synchronously from byte from on (0 for a sync); returns what its completion would
 * have held: the write's full length or the sync's 0, else the negated errno. */
static int uring_op_run_sync(const struct uring_op *op, uint32_t from)
{
    ASSERT(from <= op->len);
    if (op->kind != URING_OP_WRITE) {
        int rc;
        do {
            rc = op->kind == URING_OP_SYNC ? fdatasync(op->fd) : fsync(op->fd);
        } while (rc != 0 && errno == EINTR);
        return rc == 0 ? 0 : -errno;
    }
    int rc =
        ds_pwrite_full(op->fd, (const char *)op->buf + from, op->len - from, op->offset + from);
    return rc == 0 ? (int)op->len : rc;
}

/* A short write completes with fewer bytes and no errno, and breaks its fd's chain (the kernel
 * cancels the rest). It is what a filling disk looks like: the write that crosses the last free
 * block lands partly. Here each short write's remainder is written synchronously: on a full disk
 * that answers with the real cause (-ENOSPC, -EDQUOT, -EFBIG) instead of a bare -EIO; if it
 * succeeds (a write cut short by a signal), the chain's cancelled operations run after it, in
 * order, as the ring would have run them. A chain cancelled while nothing before it in the chain
 * failed (likely the kernel's io-wq not starting a worker: seen in CI under a 50 us timer signal
 * on a loaded machine) is run the same way from its first cancelled op. An op after a real failure
 * stays cancelled: its file's state is unknown and the failure is what flush reports. Either way
 * flush reports what the sync backend would. */
static void uring_finish_chains(struct uring_backend *b)
{
    int fd = -1;
    bool intact = true; /* nothing of the current fd's chain failed so far */
    for (uint32_t i = 0; i < b->count; i++) {
        struct uring_op *op = &b->ops[b->order[i]];
        ASSERT(op->res != URING_RES_PENDING);
        if (op->fd != fd) {
            fd = op->fd;
            intact = true;
        }
        if (!intact) {
            continue;
        }
        if (op->res == -ECANCELED) {
            op->res = uring_op_run_sync(op, 0);
        } else if (op->kind == URING_OP_WRITE && op->res >= 0 && (uint32_t)op->res < op->len) {
            op->res = uring_op_run_sync(op, (uint32_t)op->res);
        }
        intact = op->res >= 0;
    }
}

/* DS_IO_URING_TEST_CANCEL: what a kernel cancellation leaves, on ops the ring did run. */
static void uring_test_cancel(struct uring_backend *b)
{
    int fd = -1;
    uint32_t nth = 0;
    for (uint32_t i = 0; i < b->count; i++) {
        struct uring_op *op = &b->ops[b->order[i]];
        nth = op->fd == fd ? nth + 1 : 1;
        fd = op->fd;
        if (nth >= b->test_cancel_from) {
            op->res = -ECANCELED;
        }
    }
}

/* The error an op completed with: 0 or the negated errno. Short writes were finished by
 * uring_finish_chains; one left (a remainder that wrote nothing) is -EIO. */
static int uring_op_error(const struct uring_op *op)
{
    ASSERT(op->res != URING_RES_PENDING);
    if (op->res < 0) {
        return op->res;
    }
    if (op->kind == URING_OP_WRITE && (uint32_t)op->res != op->len) {
        return -EIO;
    }
    return 0;
}

static void uring_log_failure(const struct uring_op *op, int err, uint32_t failed_more)
{
    char name[DS_PATH_MAX];
    io_common_fd_name(op->fd, name, sizeof(name));
    io_common_log_failure(name, op->kind != URING_OP_WRITE, op->len, op->offset, err, failed_more);
}

/* The first error in queue order, cancellations of broken chains excepted; logs it once. */
static int uring_first_error(const struct uring_backend *b)
{
    const struct uring_op *first = NULL;
    int first_err = 0;
    int cancelled = 0;
    uint32_t failed = 0;
    for (uint32_t i = 0; i < b->count; i++) {
        int err = uring_op_error(&b->ops[i]);
        if (err == -ECANCELED) {
            cancelled = err;
        } else if (err != 0) {
            failed++;
            if (first == NULL) {
                first = &b->ops[i];
                first_err = err;
            }
        }
    }
    if (first == NULL) {
        return cancelled; /* cancelled by something other than a failure of ours */
    }
    uring_log_failure(first, first_err, failed - 1);
    return first_err;
}

/* Runs and empties the queue; returns 0 or its first error. */
static int uring_drain(struct uring_backend *b)
{
    if (b->count == 0) {
        return 0;
    }
    if (b->broken != 0) {
        b->count = 0;
        return b->broken;
    }
    uring_order_by_fd(b);
    uring_prepare(b);
    int rc = uring_run(b);
    if (rc == 0 && b->test_cancel_from > 0) {
        uring_test_cancel(b);
    }
    if (rc == 0) {
        uring_finish_chains(b);
        rc = uring_first_error(b);
    }
    b->count = 0;
    return rc;
}

/* An implicit flush: its error waits for the next explicit one. */
static void uring_drain_keep_error(struct uring_backend *b)
{
    int rc = uring_drain(b);
    if (rc != 0 && b->err == 0) {
        b->err = rc;
    }
}

static void uring_drain_fd(struct uring_backend *b, int fd)
{
    for (uint32_t i = 0; i < b->count; i++) {
        if (b->ops[i].fd == fd) {
            uring_drain_keep_error(b);
            return;
        }
    }
}

static void uring_queue(struct uring_backend *b, const struct uring_op *op)
{
    ASSERT(op->fd >= 0);
    if (b->count == STORAGE_IO_DEPTH_MAX) {
        uring_drain_keep_error(b);
    }
    ASSERT(b->count < STORAGE_IO_DEPTH_MAX);
    b->ops[b->count++] = *op;
}

/* ---- ops ----------------------------------------------------------------------------------- */

static int uring_write(struct storage_io *io, int fd, const void *buf, size_t len, uint64_t offset)
{
    struct uring_backend *b = uring_from(io);
    ASSERT(fd >= 0);
    ASSERT(buf != NULL || len == 0);
    int rc = io_common_check_range(len, offset);
    if (rc != 0) {
        return rc;
    }
    const char *bytes = buf;
    size_t done = 0;
    do {
        size_t chunk = len - done < URING_WRITE_BYTES_MAX ? len - done : URING_WRITE_BYTES_MAX;
        struct uring_op op = {.buf = bytes + done,
                              .offset = offset + done,
                              .len = (uint32_t)chunk,
                              .fd = fd,
                              .res = URING_RES_PENDING,
                              .kind = URING_OP_WRITE};
        uring_queue(b, &op);
        done += chunk;
    } while (done < len);
    return 0;
}

static int uring_sync(struct storage_io *io, int fd)
{
    struct uring_backend *b = uring_from(io);
    struct uring_op op = {.fd = fd, .res = URING_RES_PENDING, .kind = URING_OP_SYNC};
    uring_queue(b, &op);
    return 0;
}

static int uring_sync_dir(struct storage_io *io, int fd)
{
    struct uring_backend *b = uring_from(io);
    struct uring_op op = {.fd = fd, .res = URING_RES_PENDING, .kind = URING_OP_SYNC_DIR};
    uring_queue(b, &op);
    return 0;
}

static int uring_flush(struct storage_io *io)
{
    struct uring_backend *b = uring_from(io);
    int rc = uring_drain(b);
    int err = b->err != 0 ? b->err : rc;
    b->err = 0;
    ASSERT(b->count == 0);
    return err;
}

static void uring_close(struct storage_io *io, int fd)
{
    struct uring_backend *b = uring_from(io);
    uring_drain_fd(b, fd);
    io_common_close(io, fd);
}

static ssize_t uring_read(struct storage_io *io, int fd, void *buf, size_t len, uint64_t offset)
{
    struct uring_backend *b = uring_from(io);
    uring_drain_fd(b, fd);
    return io_common_read(io, fd, buf, len, offset);
}

static int uring_truncate(struct storage_io *io, int fd, uint64_t len)
{
    struct uring_backend *b = uring_from(io);
    uring_drain_fd(b, fd);
    return io_common_truncate(io, fd, len);
}

static int uring_size(struct storage_io *io, int fd, uint64_t *len)
{
    struct uring_backend *b = uring_from(io);
    uring_drain_fd(b, fd);
    return io_common_size(io, fd, len);
}

static void uring_destroy(struct storage_io *io)
{
    if (io == NULL) {
        return;
    }
    struct uring_backend *b = uring_from(io);
    /* Queued but never flushed operations are dropped, as the contract allows: nothing queued
     * was acknowledged. io_uring_queue_exit waits for anything a broken ring left in flight. */
    io_uring_queue_exit(&b->ring);
    free(b);
}

static const struct storage_io_ops uring_ops = {
    .name = "uring",
    .open = io_common_open,
    .close = uring_close,
    .write = uring_write,
    .sync = uring_sync,
    .sync_dir = uring_sync_dir,
    .flush = uring_flush,
    .read = uring_read,
    .truncate = uring_truncate,
    .size = uring_size,
    .rename = io_common_rename,
    .destroy = uring_destroy,
};

static bool uring_disabled_by_env(void)
{
    const char *value = getenv("DS_IO_URING_DISABLE");
    return value != NULL && value[0] != '\0' && strcmp(value, "0") != 0;
}

int io_uring_backend_create(struct storage_io **out)
{
    ASSERT(out != NULL);
    if (uring_disabled_by_env()) {
        return -ENOSYS;
    }
    struct uring_backend *b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return -ENOMEM;
    }
    int rc = io_uring_queue_init(STORAGE_IO_DEPTH_MAX, &b->ring, 0);
    if (rc < 0) {
        free(b);
        return rc;
    }
    ASSERT(b->ring.sq.ring_entries >= STORAGE_IO_DEPTH_MAX);
    const char *cancel = getenv("DS_IO_URING_TEST_CANCEL");
    b->test_cancel_from = cancel != NULL ? (uint32_t)strtoul(cancel, NULL, 10) : 0;
    b->base.ops = &uring_ops;
    *out = &b->base;
    return 0;
}
