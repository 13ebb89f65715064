/*
 * fake_io: a fault-injecting struct storage_io for tests.
 *
 * It runs real files (in a test's temp directory) through a real backend (sync by default,
 * io_uring with fake_io_create_over) and adds:
 * - failure injection: the n-th write-or-sync operation from now fails at flush with a chosen
 *   error, or (a write) lands only partly and flush reports -EIO;
 * - an operation counter, so a test can run a scenario once, read how many operations it took,
 *   then fail each of them in turn ("fail the Nth I/O for N = 1..k");
 * - crash simulation: it remembers, per file path, the durable length (the file's length at its
 *   last successful sync through the fake) and, after the code under test closed its files, cuts
 *   or damages everything past it as a power cut could.
 *
 * Semantics, all deterministic:
 * - Operations count from 1 in the order write/sync are called, both kinds together; skipped and
 *   failed ones count too. Reads, truncates, sizes, renames, opens and closes are never counted
 *   or failed (a cut or a rename is made durable by a sync, which is counted and can fail).
 * - A failed or short operation behaves like a broken io_uring chain: later writes and syncs of
 *   the same fd are skipped (not performed) until the next flush, which returns the first error
 *   in call order. Nothing is reported before flush, as with the real backends.
 * - Durable length: at a file's first open through the fake it is the file's size if it already
 *   existed, else 0; a successful sync sets it to the file's size; a truncate or an O_TRUNC open
 *   lowers it to the new length (a shrink is taken as durable at once); a rename moves the
 *   source path's durable length to the target path. Only regular files are
 *   tracked; paths are kept as given (relative ones resolve against the working directory).
 * - The model assumes writes append to a file or overwrite its unsynced tail, which is what an
 *   append-only store does: bytes below the durable length are never changed by a crash.
 *
 * Single-threaded, like the storage that uses it. Capacities are fixed: FAKE_IO_FILES_MAX paths
 * and FAKE_IO_FDS_MAX open fds (open answers -EMFILE past either).
 */
#ifndef DS_TEST_FAKE_IO_H
#define DS_TEST_FAKE_IO_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "storage/storage.h"

/* Paths tracked over a fake's life and fds open at once: far above any test's needs. */
#define FAKE_IO_FILES_MAX 1024u
#define FAKE_IO_FDS_MAX 1024u
/* Directories whose sync_dir calls are counted apart (fake_io_dir_syncs); the total counts
 * every directory. */
#define FAKE_IO_DIRS_MAX 256u
/* Most garbage bytes FAKE_CRASH_GARBAGE appends to one file. */
#define FAKE_IO_GARBAGE_BYTES_MAX 4096u

struct fake_io;

enum fake_crash_mode {
    FAKE_CRASH_CLEAN = 0, /* every tracked file is cut back to its durable length */
    FAKE_CRASH_TORN,      /* every file keeps a random prefix of its unsynced bytes */
    FAKE_CRASH_GARBAGE,   /* unsynced bytes stay, a random range of each file's is overwritten
                             with random bytes, and random bytes are appended to one random
                             tracked file (synced or not) */
};

/* Creates a fake over a fresh sync backend. Returns 0 or -ENOMEM. */
DS_MUST_USE int fake_io_create(struct fake_io **out);
/* Creates a fake over a fresh backend of mode (STORAGE_IO_SYNC or STORAGE_IO_URING), so that
 * every operation not failed by injection runs through that real backend. Returns 0, -ENOMEM,
 * or storage_io_create's refusal (-ENOSYS, -EPERM: io_uring unavailable; tests skip then). */
DS_MUST_USE int fake_io_create_over(enum storage_io_mode mode, struct fake_io **out);
/* The interface to hand to the code under test (borrowed: the fake still owns it). Its name is
 * "fake"; its destroy op is fake_io_destroy. */
struct storage_io *fake_io_base(struct fake_io *f);
/* Destroys the fake; open fds are closed. Accepts NULL. */
void fake_io_destroy(struct fake_io *f);

/* The n-th write-or-sync operation from now (n >= 1) fails with err (< 0) and is not performed.
 * n = 0 cancels. One pending failure at a time: a new call replaces the previous one. */
void fake_io_fail_nth(struct fake_io *f, uint64_t n, int err);
/* As fake_io_fail_nth, but every operation from the n-th on fails (a full or dead disk) until
 * cancelled with n = 0. */
void fake_io_fail_from(struct fake_io *f, uint64_t n, int err);
/* The n-th operation from now, if it is a write of len > 0 bytes, writes only its first bytes
 * bytes (at most len - 1) and flush reports -EIO. A sync at that position runs normally. n = 0
 * cancels. Independent of the fail_* setting; a failure at the same position wins. */
void fake_io_short_nth(struct fake_io *f, uint64_t n, size_t bytes);
/* Write and sync operations called so far over the fake's life. */
uint64_t fake_io_ops(const struct fake_io *f);
/* sync_dir calls so far (failed ones included) on the directory path (resolved with realpath,
 * as the fake resolves each synced fd), and on every directory together. */
uint32_t fake_io_dir_syncs(const struct fake_io *f, const char *path);
uint32_t fake_io_dir_syncs_total(const struct fake_io *f);

/* The durable length the fake holds for path (as it was passed to open). Returns 0 or -ENOENT
 * when the path was never opened through the fake. */
DS_MUST_USE int fake_io_durable_bytes(const struct fake_io *f, const char *path, uint64_t *len);

/* Simulates a power cut on the real files, to be called once the code under test has closed
 * every fd it opened through the fake (else -EBUSY). seed drives every random choice, so a seed
 * replays the same damage. Files removed since are skipped. Afterwards every tracked file's
 * durable length is its new size: the disk is what a reboot finds. Returns 0, -EBUSY, or the
 * negated errno of a failed open, truncate or write. */
DS_MUST_USE int fake_io_crash(struct fake_io *f, uint64_t seed, enum fake_crash_mode mode);

#endif /* DS_TEST_FAKE_IO_H */
