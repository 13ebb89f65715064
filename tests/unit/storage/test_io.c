/*
 * Tests of the storage I/O interface: the same behaviour cases against the io_uring and the sync
 * backend (the io_uring cases skip when the kernel refuses io_uring), backend selection and mode
 * parsing, and the fault-injecting fake of tests/support.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/common.h"
#include "storage/storage.h"
#include "tests/support/fake_io.h"
#include "tests/support/tempdir.h"

/* Files and writes per file of the many-fds case: more ops than one queue holds. */
#define IO_TEST_FILES 64u
#define IO_TEST_FILE_WRITES 4u
#define IO_TEST_FILE_BYTES 9192u
/* Slots rewritten over and over by the queue-overflow case. */
#define IO_TEST_SLOTS 37u
#define IO_TEST_SLOT_BYTES 16u

struct io_fixture {
    enum storage_io_mode mode;
    struct storage_io *io; /* NULL when the backend was refused (io_uring in a container) */
    struct fake_io *fake;  /* fake cases only; then io is its base */
    char dir[64];
};

static const enum storage_io_mode io_mode_uring = STORAGE_IO_URING;
static const enum storage_io_mode io_mode_sync = STORAGE_IO_SYNC;

/* ---- fixtures ------------------------------------------------------------------------------ */

static int io_setup(void **state)
{
    const enum storage_io_mode *mode = *state;
    struct io_fixture *fx = calloc(1, sizeof(*fx));
    if (fx == NULL || test_tempdir_make(fx->dir, sizeof(fx->dir)) != 0) {
        free(fx);
        return -1;
    }
    fx->mode = *mode;
    int rc = storage_io_create(fx->mode, &fx->io);
    if (rc == -ENOSYS || rc == -EPERM) {
        fx->io = NULL;
    } else if (rc != 0) {
        test_tempdir_remove(fx->dir);
        free(fx);
        return -1;
    }
    *state = fx;
    return 0;
}

static int io_fake_setup(void **state)
{
    struct io_fixture *fx = calloc(1, sizeof(*fx));
    if (fx == NULL || test_tempdir_make(fx->dir, sizeof(fx->dir)) != 0 ||
        fake_io_create(&fx->fake) != 0) {
        if (fx != NULL) {
            test_tempdir_remove(fx->dir);
        }
        free(fx);
        return -1;
    }
    fx->mode = STORAGE_IO_SYNC;
    fx->io = fake_io_base(fx->fake);
    *state = fx;
    return 0;
}

static int io_teardown(void **state)
{
    struct io_fixture *fx = *state;
    char mnt[sizeof(fx->dir) + 8];
    snprintf(mnt, sizeof(mnt), "%s/small", fx->dir);
    (void)umount2(mnt, MNT_DETACH); /* a full-disk case that failed before its umount */
    if (fx->fake != NULL) {
        fake_io_destroy(fx->fake);
    } else if (fx->io != NULL) {
        fx->io->ops->destroy(fx->io);
    }
    test_tempdir_remove(fx->dir);
    free(fx);
    return 0;
}

/* Cases that change DS_IO_URING_DISABLE start without it and put back the caller's value. */
struct io_env {
    bool was_set;
    char value[64];
};

static int io_env_setup(void **state)
{
    struct io_env *env = calloc(1, sizeof(*env));
    if (env == NULL) {
        return -1;
    }
    const char *value = getenv("DS_IO_URING_DISABLE");
    if (value != NULL) {
        env->was_set = true;
        snprintf(env->value, sizeof(env->value), "%s", value);
    }
    *state = env;
    return unsetenv("DS_IO_URING_DISABLE");
}

static int io_env_teardown(void **state)
{
    struct io_env *env = *state;
    int rc = env->was_set ? setenv("DS_IO_URING_DISABLE", env->value, 1)
                          : unsetenv("DS_IO_URING_DISABLE");
    free(env);
    return rc;
}

/* The fixture of a backend case; skips the case when its backend was refused. */
static struct io_fixture *io_fixture(void **state)
{
    struct io_fixture *fx = *state;
    if (fx->io == NULL) {
        skip();
    }
    return fx;
}

/* ---- helpers ------------------------------------------------------------------------------- */

static void io_path(const struct io_fixture *fx, const char *name, char *dst, size_t cap)
{
    int n = snprintf(dst, cap, "%s/%s", fx->dir, name);
    assert_true(n > 0 && (size_t)n < cap);
}

static int io_open(struct io_fixture *fx, const char *name, int flags)
{
    char path[DS_PATH_MAX];
    io_path(fx, name, path, sizeof(path));
    int fd = fx->io->ops->open(fx->io, path, flags, 0644);
    assert_true(fd >= 0);
    return fd;
}

static void io_write(struct io_fixture *fx, int fd, const void *buf, size_t len, uint64_t offset)
{
    assert_int_equal(fx->io->ops->write(fx->io, fd, buf, len, offset), 0);
}

static void io_sync(struct io_fixture *fx, int fd)
{
    assert_int_equal(fx->io->ops->sync(fx->io, fd), 0);
}

static int io_flush(struct io_fixture *fx)
{
    return fx->io->ops->flush(fx->io);
}

static uint64_t io_size(struct io_fixture *fx, int fd)
{
    uint64_t len = UINT64_MAX;
    assert_int_equal(fx->io->ops->size(fx->io, fd, &len), 0);
    return len;
}

/* Asserts that fd holds exactly len bytes equal to expect. */
static void io_expect_contents(struct io_fixture *fx, int fd, const void *expect, size_t len)
{
    assert_int_equal(io_size(fx, fd), len);
    unsigned char *got = malloc(len + 1);
    assert_non_null(got);
    assert_int_equal(fx->io->ops->read(fx->io, fd, got, len + 1, 0), (ssize_t)len);
    assert_memory_equal(got, expect, len);
    free(got);
}

static void io_fill(unsigned char *dst, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++) {
        dst[i] = (unsigned char)(seed * 131u + i * 7u + 1u);
    }
}

/* Plain-syscall file access for what the fake must not see (pre-existing files, crash results). */
static void file_put(const struct io_fixture *fx, const char *name, const void *data, size_t len)
{
    char path[DS_PATH_MAX];
    io_path(fx, name, path, sizeof(path));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
}

/* Reads a whole file into dst; returns its length. */
static size_t file_get(const struct io_fixture *fx, const char *name, void *dst, size_t cap)
{
    char path[DS_PATH_MAX];
    io_path(fx, name, path, sizeof(path));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    ssize_t n = read(fd, dst, cap);
    assert_true(n >= 0 && (size_t)n < cap);
    assert_int_equal(close(fd), 0);
    return (size_t)n;
}

/* ---- both backends ------------------------------------------------------------------------- */

static void test_io_write_reads_back_at_offsets(void **state)
{
    /* Writes at scattered offsets land there after flush; the hole between them reads as zeros. */
    struct io_fixture *fx = io_fixture(state);
    int fd = io_open(fx, "a", O_RDWR | O_CREAT);
    unsigned char one[100], two[300], expect[1300] = {0};
    io_fill(one, sizeof(one), 1);
    io_fill(two, sizeof(two), 2);
    io_write(fx, fd, two, sizeof(two), 1000);
    io_write(fx, fd, one, sizeof(one), 0);
    assert_int_equal(io_flush(fx), 0);
    memcpy(expect, one, sizeof(one));
    memcpy(expect + 1000, two, sizeof(two));
    io_expect_contents(fx, fd, expect, sizeof(expect));
    unsigned char mid[10];
    assert_int_equal(fx->io->ops->read(fx->io, fd, mid, sizeof(mid), 1005), 10);
    assert_memory_equal(mid, two + 5, sizeof(mid));
    fx->io->ops->close(fx->io, fd);
}

static void test_io_flush_many_fds_in_order(void **state)
{
    /* 64 files x (4 writes + sync) in one flush, more ops than a queue holds: each file's writes
     * apply in queue order (a later overlapping write wins) and every file is complete. */
    struct io_fixture *fx = io_fixture(state);
    static unsigned char data[IO_TEST_FILES][IO_TEST_FILE_WRITES][4096];
    static const struct {
        uint64_t offset;
        size_t len;
    } writes[IO_TEST_FILE_WRITES] = {{0, 4096}, {4096, 4096}, {50, 100}, {8192, 1000}};
    int fds[IO_TEST_FILES];
    for (unsigned f = 0; f < IO_TEST_FILES; f++) {
        char name[16];
        snprintf(name, sizeof(name), "f%02u", f);
        fds[f] = io_open(fx, name, O_RDWR | O_CREAT);
    }
    for (unsigned f = 0; f < IO_TEST_FILES; f++) {
        for (unsigned w = 0; w < IO_TEST_FILE_WRITES; w++) {
            io_fill(data[f][w], writes[w].len, f * 16 + w);
            io_write(fx, fds[f], data[f][w], writes[w].len, writes[w].offset);
        }
        io_sync(fx, fds[f]);
    }
    assert_int_equal(io_flush(fx), 0);
    for (unsigned f = 0; f < IO_TEST_FILES; f++) {
        unsigned char expect[IO_TEST_FILE_BYTES];
        for (unsigned w = 0; w < IO_TEST_FILE_WRITES; w++) {
            memcpy(expect + writes[w].offset, data[f][w], writes[w].len);
        }
        io_expect_contents(fx, fds[f], expect, sizeof(expect));
        fx->io->ops->close(fx->io, fds[f]);
    }
}

static void test_io_flush_orders_writes_beyond_queue_depth(void **state)
{
    /* Three queues' worth of rewrites of the same slots in one flush: the implicit flushes keep
     * queue order, so each slot holds its last write. */
    struct io_fixture *fx = io_fixture(state);
    int fd = io_open(fx, "slots", O_RDWR | O_CREAT);
    const unsigned writes = 3 * STORAGE_IO_DEPTH_MAX + 7;
    static unsigned char data[3 * STORAGE_IO_DEPTH_MAX + 7][IO_TEST_SLOT_BYTES];
    unsigned char expect[IO_TEST_SLOTS * IO_TEST_SLOT_BYTES];
    for (unsigned i = 0; i < writes; i++) {
        unsigned slot = i % IO_TEST_SLOTS;
        io_fill(data[i], IO_TEST_SLOT_BYTES, i);
        io_write(fx, fd, data[i], IO_TEST_SLOT_BYTES, (uint64_t)slot * IO_TEST_SLOT_BYTES);
        memcpy(expect + slot * IO_TEST_SLOT_BYTES, data[i], IO_TEST_SLOT_BYTES);
    }
    io_sync(fx, fd);
    assert_int_equal(io_flush(fx), 0);
    io_expect_contents(fx, fd, expect, sizeof(expect));
    fx->io->ops->close(fx->io, fd);
}

static void test_io_read_short_at_eof(void **state)
{
    /* A read past the end returns what there is: short across EOF, 0 at and beyond it. */
    struct io_fixture *fx = io_fixture(state);
    int fd = io_open(fx, "short", O_RDWR | O_CREAT);
    unsigned char data[100], got[200];
    io_fill(data, sizeof(data), 3);
    io_write(fx, fd, data, sizeof(data), 0);
    assert_int_equal(io_flush(fx), 0);
    assert_int_equal(fx->io->ops->read(fx->io, fd, got, sizeof(got), 50), 50);
    assert_memory_equal(got, data + 50, 50);
    assert_int_equal(fx->io->ops->read(fx->io, fd, got, sizeof(got), 100), 0);
    assert_int_equal(fx->io->ops->read(fx->io, fd, got, sizeof(got), 1u << 20), 0);
    assert_int_equal(fx->io->ops->read(fx->io, fd, got, 0, 0), 0);
    fx->io->ops->close(fx->io, fd);
}

static void test_io_truncate_sets_size(void **state)
{
    /* truncate cuts a file and extends it with zeros; size follows both. */
    struct io_fixture *fx = io_fixture(state);
    int fd = io_open(fx, "trunc", O_RDWR | O_CREAT);
    assert_int_equal(io_size(fx, fd), 0);
    unsigned char data[500];
    io_fill(data, sizeof(data), 4);
    io_write(fx, fd, data, sizeof(data), 0);
    assert_int_equal(io_flush(fx), 0);
    assert_int_equal(io_size(fx, fd), 500);
    assert_int_equal(fx->io->ops->truncate(fx->io, fd, 120), 0);
    io_expect_contents(fx, fd, data, 120);
    assert_int_equal(fx->io->ops->truncate(fx->io, fd, 200), 0);
    unsigned char expect[200] = {0};
    memcpy(expect, data, 120);
    io_expect_contents(fx, fd, expect, sizeof(expect));
    fx->io->ops->close(fx->io, fd);
}

static void test_io_size_sees_queued_writes(void **state)
{
    /* A synchronous call on an fd with queued writes runs after them, in both backends. */
    struct io_fixture *fx = io_fixture(state);
    int fd = io_open(fx, "queued", O_RDWR | O_CREAT);
    unsigned char data[10];
    io_fill(data, sizeof(data), 5);
    io_write(fx, fd, data, sizeof(data), 0);
    assert_int_equal(io_size(fx, fd), 10);
    assert_int_equal(io_flush(fx), 0);
    fx->io->ops->close(fx->io, fd);
}

static void test_io_flush_fails_on_readonly_fd(void **state)
{
    /* A write to a read-only fd fails the flush with -EBADF, not with the -ECANCELED of the sync
     * behind it; other fds' writes still land and the next flush starts clean. */
    struct io_fixture *fx = io_fixture(state);
    unsigned char data[64];
    io_fill(data, sizeof(data), 6);
    file_put(fx, "ro", data, sizeof(data));
    int ro = io_open(fx, "ro", O_RDONLY);
    int rw = io_open(fx, "rw", O_RDWR | O_CREAT);
    io_write(fx, ro, data, sizeof(data), 0);
    io_sync(fx, ro);
    io_write(fx, rw, data, sizeof(data), 0);
    io_sync(fx, rw);
    assert_int_equal(io_flush(fx), -EBADF);
    io_expect_contents(fx, rw, data, sizeof(data));
    assert_int_equal(io_flush(fx), 0);
    io_write(fx, rw, data, 10, 64);
    assert_int_equal(io_flush(fx), 0);
    fx->io->ops->close(fx->io, ro);
    fx->io->ops->close(fx->io, rw);
}

static void test_io_sync_dir_runs_at_flush_and_reports_errors(void **state)
{
    /* sync_dir queues a directory's fsync beside other fds' writes and syncs; a flush runs it
     * and reports its failure (here an O_PATH descriptor, which cannot be synced) as the
     * flush's error, while the other fds' operations still land. */
    struct io_fixture *fx = io_fixture(state);
    char sub[DS_PATH_MAX];
    io_path(fx, "sub", sub, sizeof(sub));
    assert_int_equal(mkdir(sub, 0755), 0);
    int dir = fx->io->ops->open(fx->io, sub, O_RDONLY | O_DIRECTORY, 0);
    assert_true(dir >= 0);
    unsigned char data[32];
    io_fill(data, sizeof(data), 9);
    int rw = io_open(fx, "sub/file", O_RDWR | O_CREAT);
    io_write(fx, rw, data, sizeof(data), 0);
    io_sync(fx, rw);
    assert_int_equal(fx->io->ops->sync_dir(fx->io, dir), 0);
    assert_int_equal(io_flush(fx), 0);

    int path_only = open(sub, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(path_only >= 0);
    io_write(fx, rw, data, sizeof(data), sizeof(data));
    assert_int_equal(fx->io->ops->sync_dir(fx->io, path_only), 0);
    assert_int_equal(fx->io->ops->sync_dir(fx->io, dir), 0);
    assert_int_equal(io_flush(fx), -EBADF);
    assert_int_equal(io_size(fx, rw), 2 * sizeof(data));
    assert_int_equal(io_flush(fx), 0);
    close(path_only);
    fx->io->ops->close(fx->io, rw);
    fx->io->ops->close(fx->io, dir);
}

static void test_io_flush_reports_error_of_implicit_flush(void **state)
{
    /* An error met when a full queue is flushed implicitly is returned by the next flush. */
    struct io_fixture *fx = io_fixture(state);
    unsigned char data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    file_put(fx, "ro", data, sizeof(data));
    int ro = io_open(fx, "ro", O_RDONLY);
    int rw = io_open(fx, "rw", O_RDWR | O_CREAT);
    io_write(fx, ro, data, sizeof(data), 0);
    for (unsigned i = 0; i < STORAGE_IO_DEPTH_MAX + 1; i++) {
        io_write(fx, rw, data, sizeof(data), (uint64_t)i * sizeof(data));
    }
    assert_int_equal(io_flush(fx), -EBADF);
    assert_int_equal(io_size(fx, rw), (STORAGE_IO_DEPTH_MAX + 1) * sizeof(data));
    assert_int_equal(io_flush(fx), 0);
    fx->io->ops->close(fx->io, ro);
    fx->io->ops->close(fx->io, rw);
}

static void test_io_flush_fails_on_short_write(void **state)
{
    /* A write cut short by RLIMIT_FSIZE fails the flush with the -EFBIG of its remainder's
     * retry on both backends (io_uring completes the short write with a count and no errno,
     * which once read as -EIO and hid the cause) and the fd's later ops in that flush are not
     * performed. */
    struct io_fixture *fx = io_fixture(state);
    int fd = io_open(fx, "limit", O_RDWR | O_CREAT);
    int other = io_open(fx, "other", O_RDWR | O_CREAT);
    static unsigned char data[8192];
    io_fill(data, sizeof(data), 12);
    struct rlimit saved;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &saved), 0);
    struct rlimit limit = {.rlim_cur = 4096, .rlim_max = saved.rlim_max};
    void (*saved_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &limit), 0);
    io_write(fx, fd, data, sizeof(data), 0);
    io_write(fx, other, data, 100, 0); /* another fd: runs */
    io_sync(fx, fd);
    io_write(fx, fd, data + 100, 10, 0); /* cancelled with the rest of the fd's chain */
    int rc = io_flush(fx);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &saved), 0);
    (void)signal(SIGXFSZ, saved_handler);
    assert_int_equal(rc, -EFBIG);
    io_expect_contents(fx, fd, data, 4096);
    io_expect_contents(fx, other, data, 100);
    io_write(fx, fd, data + 4096, 4096, 4096);
    assert_int_equal(io_flush(fx), 0);
    io_expect_contents(fx, fd, data, sizeof(data));
    fx->io->ops->close(fx->io, fd);
    fx->io->ops->close(fx->io, other);
}

static void test_io_flush_reports_enospc_of_full_device(void **state)
{
    /* /dev/full refuses every write with ENOSPC: the flush returns -ENOSPC, not -EIO, on both
     * backends, and a second fd's ops in the same flush still run. */
    struct io_fixture *fx = io_fixture(state);
    int full = fx->io->ops->open(fx->io, "/dev/full", O_WRONLY, 0);
    if (full < 0) {
        print_message("/dev/full cannot be opened (%s): skipping\n", ds_strerror(full));
        skip();
    }
    int other = io_open(fx, "beside-full", O_RDWR | O_CREAT);
    static unsigned char data[4096];
    io_fill(data, sizeof(data), 21);
    io_write(fx, full, data, sizeof(data), 0);
    io_write(fx, other, data, sizeof(data), 0);
    assert_int_equal(io_flush(fx), -ENOSPC);
    io_expect_contents(fx, other, data, sizeof(data));
    fx->io->ops->close(fx->io, full);
    fx->io->ops->close(fx->io, other);
}

/* Mounts a tmpfs of size_kib at dir (root or CAP_SYS_ADMIN only). Returns 0 or the errno. */
static int io_tmpfs_mount(const char *dir, unsigned size_kib)
{
    char options[64];
    snprintf(options, sizeof(options), "size=%uk", size_kib);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        return errno;
    }
    return mount("tmpfs", dir, "tmpfs", 0, options) == 0 ? 0 : errno;
}

static void test_io_flush_reports_enospc_of_filling_disk(void **state)
{
    /* A real full disk: a 64 KiB tmpfs and one 96 KiB write. The write lands partly (a short
     * count, no errno); the flush must report the -ENOSPC of the rest on both backends, and a
     * sync queued after it in the same chain must not run as if all were well. After space
     * returns (the file is cut back), the same fd takes writes again. */
    struct io_fixture *fx = io_fixture(state);
    char mnt[DS_PATH_MAX];
    io_path(fx, "small", mnt, sizeof(mnt));
    int err = io_tmpfs_mount(mnt, 64);
    if (err != 0) {
        print_message("cannot mount a tmpfs (%s): skipping the full-disk case\n", strerror(err));
        skip();
    }
    int fd = io_open(fx, "small/file", O_RDWR | O_CREAT);
    static unsigned char data[96 * 1024];
    io_fill(data, sizeof(data), 33);
    io_write(fx, fd, data, sizeof(data), 0);
    io_sync(fx, fd);
    int rc = io_flush(fx);
    uint64_t landed = io_size(fx, fd);
    assert_int_equal(rc, -ENOSPC);
    assert_true(landed > 0 && landed < sizeof(data)); /* it was a short write, then ENOSPC */
    assert_int_equal(fx->io->ops->truncate(fx->io, fd, 0), 0);
    io_write(fx, fd, data, 4096, 0);
    io_sync(fx, fd);
    assert_int_equal(io_flush(fx), 0);
    io_expect_contents(fx, fd, data, 4096);
    fx->io->ops->close(fx->io, fd);
    assert_int_equal(umount(mnt), 0);
}

static void io_signal_ignore(int signo)
{
    (void)signo;
}

static void test_io_flush_survives_signals(void **state)
{
    /* Flushes interrupted by a 50 us timer signal (no SA_RESTART) still run every op once. */
    struct io_fixture *fx = io_fixture(state);
    struct sigaction action = {.sa_handler = io_signal_ignore};
    struct sigaction saved_action;
    assert_int_equal(sigaction(SIGALRM, &action, &saved_action), 0);
    struct itimerval timer = {.it_interval = {0, 50}, .it_value = {0, 50}};
    struct itimerval saved_timer;
    assert_int_equal(setitimer(ITIMER_REAL, &timer, &saved_timer), 0);
    static unsigned char data[STORAGE_IO_DEPTH_MAX][512];
    int fds[8];
    int rc = 0;
    for (unsigned f = 0; f < DS_ARRAY_LEN(fds); f++) {
        char name[16];
        snprintf(name, sizeof(name), "sig%u", f);
        fds[f] = io_open(fx, name, O_RDWR | O_CREAT);
    }
    for (unsigned round = 0; round < 20 && rc == 0; round++) {
        for (unsigned i = 0; i < STORAGE_IO_DEPTH_MAX - DS_ARRAY_LEN(fds); i++) {
            unsigned f = i % DS_ARRAY_LEN(fds);
            io_fill(data[i], sizeof(data[i]), round * 1000 + i);
            io_write(fx, fds[f], data[i], sizeof(data[i]), (uint64_t)(i / DS_ARRAY_LEN(fds)) * 512);
        }
        for (unsigned f = 0; f < DS_ARRAY_LEN(fds); f++) {
            io_sync(fx, fds[f]);
        }
        rc = io_flush(fx);
    }
    assert_int_equal(setitimer(ITIMER_REAL, &saved_timer, NULL), 0);
    /* Ignoring discards a SIGALRM still pending (valgrind delivers late) before the default
     * action, which would kill the process, comes back. */
    struct sigaction ignore = {.sa_handler = SIG_IGN};
    assert_int_equal(sigaction(SIGALRM, &ignore, NULL), 0);
    assert_int_equal(sigaction(SIGALRM, &saved_action, NULL), 0);
    assert_int_equal(rc, 0);
    for (unsigned i = 0; i < STORAGE_IO_DEPTH_MAX - DS_ARRAY_LEN(fds); i++) {
        unsigned char got[512];
        unsigned f = i % DS_ARRAY_LEN(fds);
        uint64_t offset = (uint64_t)(i / DS_ARRAY_LEN(fds)) * 512;
        assert_int_equal(fx->io->ops->read(fx->io, fds[f], got, sizeof(got), offset), 512);
        assert_memory_equal(got, data[i], sizeof(got));
    }
    for (unsigned f = 0; f < DS_ARRAY_LEN(fds); f++) {
        fx->io->ops->close(fx->io, fds[f]);
    }
}

static void test_io_write_rejects_offset_beyond_off_t(void **state)
{
    /* A range past off_t is refused when queued, and leaves the queue usable. */
    struct io_fixture *fx = io_fixture(state);
    int fd = io_open(fx, "big", O_RDWR | O_CREAT);
    unsigned char data[4] = {0};
    assert_int_equal(fx->io->ops->write(fx->io, fd, data, sizeof(data), UINT64_MAX), -EINVAL);
    assert_int_equal(fx->io->ops->write(fx->io, fd, data, sizeof(data), (uint64_t)INT64_MAX),
                     -EINVAL);
    assert_int_equal(io_flush(fx), 0);
    fx->io->ops->close(fx->io, fd);
}

static void test_io_open_fails_on_missing_file(void **state)
{
    /* open without O_CREAT of a missing file returns -ENOENT. */
    struct io_fixture *fx = io_fixture(state);
    char path[DS_PATH_MAX];
    io_path(fx, "missing", path, sizeof(path));
    assert_int_equal(fx->io->ops->open(fx->io, path, O_RDONLY, 0), -ENOENT);
}

static void test_io_name_matches_mode(void **state)
{
    /* A backend names itself after the mode that made it. */
    struct io_fixture *fx = io_fixture(state);
    const char *expect = fx->mode == STORAGE_IO_URING ? "uring" : "sync";
    assert_string_equal(storage_io_name(fx->io), expect);
}

/* ---- selection and parsing ----------------------------------------------------------------- */

static void test_io_mode_parse_accepts_names(void **state)
{
    /* The three documented names parse to their modes. */
    (void)state;
    enum storage_io_mode mode = STORAGE_IO_SYNC;
    assert_int_equal(storage_io_mode_parse("auto", &mode), 0);
    assert_int_equal(mode, STORAGE_IO_AUTO);
    assert_int_equal(storage_io_mode_parse("uring", &mode), 0);
    assert_int_equal(mode, STORAGE_IO_URING);
    assert_int_equal(storage_io_mode_parse("sync", &mode), 0);
    assert_int_equal(mode, STORAGE_IO_SYNC);
}

static void test_io_mode_parse_rejects_unknown(void **state)
{
    /* Anything else is -DS_EUSAGE and leaves the output alone. */
    (void)state;
    static const char *const bad[] = {"", "Sync", "io_uring", "auto ", "syncx"};
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        enum storage_io_mode mode = STORAGE_IO_URING;
        assert_int_equal(storage_io_mode_parse(bad[i], &mode), -DS_EUSAGE);
        assert_int_equal(mode, STORAGE_IO_URING);
    }
    enum storage_io_mode mode = STORAGE_IO_URING;
    assert_int_equal(storage_io_mode_parse(NULL, &mode), -DS_EUSAGE);
}

static void test_io_create_auto_falls_back_when_disabled(void **state)
{
    /* DS_IO_URING_DISABLE=1: AUTO picks sync, URING fails with -ENOSYS, SYNC is unaffected. */
    (void)state;
    assert_int_equal(setenv("DS_IO_URING_DISABLE", "1", 1), 0);
    struct storage_io *io = NULL;
    assert_int_equal(storage_io_create(STORAGE_IO_AUTO, &io), 0);
    assert_string_equal(storage_io_name(io), "sync");
    io->ops->destroy(io);
    io = NULL;
    assert_int_equal(storage_io_create(STORAGE_IO_URING, &io), -ENOSYS);
    assert_null(io);
    assert_int_equal(storage_io_create(STORAGE_IO_SYNC, &io), 0);
    assert_string_equal(storage_io_name(io), "sync");
    io->ops->destroy(io);
}

static void test_io_create_auto_prefers_uring(void **state)
{
    /* Where io_uring works, AUTO uses it; "0" in DS_IO_URING_DISABLE does not disable it. */
    (void)state;
    struct storage_io *io = NULL;
    int rc = storage_io_create(STORAGE_IO_URING, &io);
    if (rc == -ENOSYS || rc == -EPERM) {
        skip();
    }
    assert_int_equal(rc, 0);
    io->ops->destroy(io);
    assert_int_equal(setenv("DS_IO_URING_DISABLE", "0", 1), 0);
    assert_int_equal(storage_io_create(STORAGE_IO_AUTO, &io), 0);
    assert_string_equal(storage_io_name(io), "uring");
    io->ops->destroy(io);
}

static void test_io_uring_kernel_cancellation_is_finished(void **state)
{
    /* A chain the kernel cancelled with nothing of ours failing (its io-wq could not start a
     * worker: CI saw a flush fail with -ECANCELED under a 50 us timer signal on a loaded
     * machine) is finished synchronously in order: flush returns 0 and every byte is there,
     * from a chain's head (K = 1) or its middle (K = 2). A real failure still wins: the ops
     * after it stay cancelled and flush reports the failure, not -ECANCELED. */
    (void)state;
    for (unsigned from = 1; from <= 2; from++) {
        char value[8];
        snprintf(value, sizeof(value), "%u", from);
        assert_int_equal(setenv("DS_IO_URING_TEST_CANCEL", value, 1), 0);
        struct io_fixture fx = {.mode = STORAGE_IO_URING};
        int rc = storage_io_create(STORAGE_IO_URING, &fx.io);
        assert_int_equal(unsetenv("DS_IO_URING_TEST_CANCEL"), 0);
        if (rc == -ENOSYS || rc == -EPERM) {
            skip();
        }
        assert_int_equal(rc, 0);
        assert_int_equal(test_tempdir_make(fx.dir, sizeof(fx.dir)), 0);
        unsigned char data[3][512];
        int fds[2];
        for (unsigned f = 0; f < 2; f++) {
            char name[16];
            snprintf(name, sizeof(name), "c%u", f);
            fds[f] = io_open(&fx, name, O_RDWR | O_CREAT);
            for (unsigned i = 0; i < 3; i++) {
                io_fill(data[i], sizeof(data[i]), from * 100 + i);
                io_write(&fx, fds[f], data[i], sizeof(data[i]), (uint64_t)i * 512);
            }
            io_sync(&fx, fds[f]);
        }
        assert_int_equal(io_flush(&fx), 0);
        for (unsigned f = 0; f < 2; f++) {
            for (unsigned i = 0; i < 3; i++) {
                unsigned char got[512];
                assert_int_equal(fx.io->ops->read(fx.io, fds[f], got, sizeof(got), i * 512u), 512);
                assert_memory_equal(got, data[i], sizeof(got));
            }
            fx.io->ops->close(fx.io, fds[f]);
        }
        int ro = io_open(&fx, "c0", O_RDONLY);
        io_write(&fx, ro, data[0], sizeof(data[0]), 0);
        io_sync(&fx, ro);
        assert_int_equal(io_flush(&fx), -EBADF);
        fx.io->ops->close(fx.io, ro);
        fx.io->ops->destroy(fx.io);
        test_tempdir_remove(fx.dir);
    }
}

/* ---- the fake ------------------------------------------------------------------------------ */

static void test_io_fake_fail_nth_eio_surfaces_at_flush(void **state)
{
    /* The 2nd op fails with -EIO at flush and is not performed; the rest of its fd is skipped,
     * other fds run, and the next flush is clean. */
    struct io_fixture *fx = *state;
    int a = io_open(fx, "a", O_RDWR | O_CREAT);
    int b = io_open(fx, "b", O_RDWR | O_CREAT);
    unsigned char one[10], two[10], three[10];
    io_fill(one, sizeof(one), 1);
    io_fill(two, sizeof(two), 2);
    io_fill(three, sizeof(three), 3);
    fake_io_fail_nth(fx->fake, 2, -EIO);
    io_write(fx, a, one, sizeof(one), 0);
    io_write(fx, a, two, sizeof(two), 10);
    io_write(fx, a, three, sizeof(three), 20);
    io_write(fx, b, three, sizeof(three), 0);
    assert_int_equal(io_flush(fx), -EIO);
    io_expect_contents(fx, a, one, sizeof(one));
    io_expect_contents(fx, b, three, sizeof(three));
    io_write(fx, a, two, sizeof(two), 10);
    assert_int_equal(io_flush(fx), 0);
    assert_int_equal(io_size(fx, a), 20);
    fx->io->ops->close(fx->io, a);
    fx->io->ops->close(fx->io, b);
}

static void test_io_fake_fail_nth_enospc_on_sync(void **state)
{
    /* A sync failing with -ENOSPC surfaces at flush and leaves the durable length alone. */
    struct io_fixture *fx = *state;
    char path[DS_PATH_MAX];
    io_path(fx, "s", path, sizeof(path));
    int fd = io_open(fx, "s", O_RDWR | O_CREAT);
    unsigned char data[32];
    io_fill(data, sizeof(data), 7);
    fake_io_fail_nth(fx->fake, 2, -ENOSPC);
    io_write(fx, fd, data, sizeof(data), 0);
    io_sync(fx, fd);
    assert_int_equal(io_flush(fx), -ENOSPC);
    uint64_t durable = UINT64_MAX;
    assert_int_equal(fake_io_durable_bytes(fx->fake, path, &durable), 0);
    assert_int_equal(durable, 0);
    io_sync(fx, fd);
    assert_int_equal(io_flush(fx), 0);
    assert_int_equal(fake_io_durable_bytes(fx->fake, path, &durable), 0);
    assert_int_equal(durable, sizeof(data));
    fx->io->ops->close(fx->io, fd);
}

/* A fixed scenario of 6 ops over two files, for the fail-each-op loop. */
static int fake_scenario(struct io_fixture *fx, unsigned round)
{
    char a_name[16], b_name[16];
    snprintf(a_name, sizeof(a_name), "a%u", round);
    snprintf(b_name, sizeof(b_name), "b%u", round);
    int a = io_open(fx, a_name, O_RDWR | O_CREAT);
    int b = io_open(fx, b_name, O_RDWR | O_CREAT);
    unsigned char data[16];
    io_fill(data, sizeof(data), round);
    io_write(fx, a, data, sizeof(data), 0);
    io_write(fx, b, data, sizeof(data), 0);
    io_write(fx, a, data, sizeof(data), 16);
    io_sync(fx, a);
    io_write(fx, b, data, sizeof(data), 16);
    io_sync(fx, b);
    int rc = io_flush(fx);
    fx->io->ops->close(fx->io, a);
    fx->io->ops->close(fx->io, b);
    return rc;
}

static void test_io_fake_fail_nth_each_op_of_scenario(void **state)
{
    /* Failing op N for N = 1..6 of a 6-op scenario always fails its flush; N = 7 does not. */
    struct io_fixture *fx = *state;
    uint64_t before = fake_io_ops(fx->fake);
    assert_int_equal(fake_scenario(fx, 0), 0);
    uint64_t ops = fake_io_ops(fx->fake) - before;
    assert_int_equal(ops, 6);
    for (unsigned n = 1; n <= ops + 1; n++) {
        fake_io_fail_nth(fx->fake, n, -EIO);
        int rc = fake_scenario(fx, n);
        assert_int_equal(rc, n <= ops ? -EIO : 0);
    }
}

static void test_io_fake_fail_from_persists(void **state)
{
    /* fail_from keeps failing every op across flushes until cancelled. */
    struct io_fixture *fx = *state;
    int fd = io_open(fx, "full", O_RDWR | O_CREAT);
    unsigned char data[8] = {0};
    fake_io_fail_from(fx->fake, 2, -ENOSPC);
    io_write(fx, fd, data, sizeof(data), 0);
    assert_int_equal(io_flush(fx), 0);
    io_write(fx, fd, data, sizeof(data), 8);
    assert_int_equal(io_flush(fx), -ENOSPC);
    io_sync(fx, fd);
    assert_int_equal(io_flush(fx), -ENOSPC);
    fake_io_fail_from(fx->fake, 0, 0);
    io_write(fx, fd, data, sizeof(data), 8);
    assert_int_equal(io_flush(fx), 0);
    assert_int_equal(io_size(fx, fd), 16);
    fx->io->ops->close(fx->io, fd);
}

static void test_io_fake_short_write_reports_eio(void **state)
{
    /* A short write puts only its first bytes on disk, flush says -EIO, and the sync behind it
     * is skipped so nothing becomes durable. */
    struct io_fixture *fx = *state;
    char path[DS_PATH_MAX];
    io_path(fx, "torn", path, sizeof(path));
    int fd = io_open(fx, "torn", O_RDWR | O_CREAT);
    unsigned char data[100];
    io_fill(data, sizeof(data), 8);
    fake_io_short_nth(fx->fake, 1, 10);
    io_write(fx, fd, data, sizeof(data), 0);
    io_sync(fx, fd);
    assert_int_equal(io_flush(fx), -EIO);
    io_expect_contents(fx, fd, data, 10);
    uint64_t durable = UINT64_MAX;
    assert_int_equal(fake_io_durable_bytes(fx->fake, path, &durable), 0);
    assert_int_equal(durable, 0);
    fx->io->ops->close(fx->io, fd);
}

static void test_io_fake_counts_write_and_sync_ops(void **state)
{
    /* Writes and syncs count, even skipped ones; reads, sizes, truncates and opens do not. */
    struct io_fixture *fx = *state;
    assert_int_equal(fake_io_ops(fx->fake), 0);
    int fd = io_open(fx, "count", O_RDWR | O_CREAT);
    unsigned char data[4] = {0};
    io_write(fx, fd, data, sizeof(data), 0);
    io_sync(fx, fd);
    assert_int_equal(fake_io_ops(fx->fake), 2);
    assert_int_equal(fx->io->ops->read(fx->io, fd, data, sizeof(data), 0), 4);
    assert_int_equal(fx->io->ops->truncate(fx->io, fd, 2), 0);
    (void)io_size(fx, fd);
    assert_int_equal(fake_io_ops(fx->fake), 2);
    fake_io_fail_nth(fx->fake, 1, -EIO);
    io_write(fx, fd, data, sizeof(data), 0);
    io_write(fx, fd, data, sizeof(data), 4); /* skipped */
    assert_int_equal(fake_io_ops(fx->fake), 4);
    assert_int_equal(io_flush(fx), -EIO);
    assert_int_equal(fake_io_ops(fx->fake), 4);
    fx->io->ops->close(fx->io, fd);
}

/* Three files for the crash cases: "synced" (100 synced + 50 unsynced bytes), "never" (created,
 * 30 bytes never synced), "old" (40 bytes from before the fake, 20 unsynced appended). */
static void fake_crash_prepare(struct io_fixture *fx, unsigned char synced[150],
                               unsigned char old[60])
{
    io_fill(synced, 150, 10);
    io_fill(old, 60, 11);
    file_put(fx, "old", old, 40);
    int s = io_open(fx, "synced", O_RDWR | O_CREAT);
    int n = io_open(fx, "never", O_RDWR | O_CREAT);
    int o = io_open(fx, "old", O_RDWR);
    io_write(fx, s, synced, 100, 0);
    io_sync(fx, s);
    io_write(fx, s, synced + 100, 50, 100);
    io_write(fx, n, synced, 30, 0);
    io_write(fx, o, old + 40, 20, 40);
    assert_int_equal(io_flush(fx), 0);
    fx->io->ops->close(fx->io, s);
    fx->io->ops->close(fx->io, n);
    fx->io->ops->close(fx->io, o);
}

static void test_io_fake_crash_clean_drops_unsynced(void **state)
{
    /* CLEAN keeps exactly the synced bytes (and a pre-existing file's original bytes). */
    struct io_fixture *fx = *state;
    unsigned char synced[150], old[60], got[512];
    fake_crash_prepare(fx, synced, old);
    assert_int_equal(fake_io_crash(fx->fake, 1, FAKE_CRASH_CLEAN), 0);
    assert_int_equal(file_get(fx, "synced", got, sizeof(got)), 100);
    assert_memory_equal(got, synced, 100);
    assert_int_equal(file_get(fx, "never", got, sizeof(got)), 0);
    assert_int_equal(file_get(fx, "old", got, sizeof(got)), 40);
    assert_memory_equal(got, old, 40);
}

static void test_io_fake_crash_torn_keeps_prefix(void **state)
{
    /* TORN keeps the synced bytes plus a prefix of the unsynced ones, the same for a given seed. */
    struct io_fixture *fx = *state;
    uint64_t seed = test_seed();
    unsigned char synced[150], old[60], got[512];
    fake_crash_prepare(fx, synced, old);
    assert_int_equal(fake_io_crash(fx->fake, seed, FAKE_CRASH_TORN), 0);
    size_t len_synced = file_get(fx, "synced", got, sizeof(got));
    assert_in_range(len_synced, 100, 150);
    assert_memory_equal(got, synced, len_synced);
    size_t len_never = file_get(fx, "never", got, sizeof(got));
    assert_in_range(len_never, 0, 30);
    assert_memory_equal(got, synced, len_never);
    size_t len_old = file_get(fx, "old", got, sizeof(got));
    assert_in_range(len_old, 40, 60);
    assert_memory_equal(got, old, len_old);

    /* The same history and seed in a second fake tear the files identically. */
    struct io_fixture again = {.mode = STORAGE_IO_SYNC};
    assert_int_equal(test_tempdir_make(again.dir, sizeof(again.dir)), 0);
    assert_int_equal(fake_io_create(&again.fake), 0);
    again.io = fake_io_base(again.fake);
    fake_crash_prepare(&again, synced, old);
    assert_int_equal(fake_io_crash(again.fake, seed, FAKE_CRASH_TORN), 0);
    assert_int_equal(file_get(&again, "synced", got, sizeof(got)), len_synced);
    assert_int_equal(file_get(&again, "never", got, sizeof(got)), len_never);
    assert_int_equal(file_get(&again, "old", got, sizeof(got)), len_old);
    fake_io_destroy(again.fake);
    test_tempdir_remove(again.dir);
}

static void test_io_fake_crash_garbage_keeps_synced_bytes(void **state)
{
    /* GARBAGE never touches synced bytes, keeps unsynced lengths, and appends to one file. */
    struct io_fixture *fx = *state;
    unsigned char synced[150], old[60], got[8192];
    fake_crash_prepare(fx, synced, old);
    assert_int_equal(fake_io_crash(fx->fake, test_seed(), FAKE_CRASH_GARBAGE), 0);
    size_t len_synced = file_get(fx, "synced", got, sizeof(got));
    assert_true(len_synced >= 150);
    assert_memory_equal(got, synced, 100);
    size_t len_never = file_get(fx, "never", got, sizeof(got));
    assert_true(len_never >= 30);
    size_t len_old = file_get(fx, "old", got, sizeof(got));
    assert_true(len_old >= 60);
    assert_memory_equal(got, old, 40);
    assert_true(len_synced + len_never + len_old > 150 + 30 + 60);
}

static void test_io_fake_crash_refuses_open_fds(void **state)
{
    /* A crash while the code under test still holds an fd is a test bug: -EBUSY. */
    struct io_fixture *fx = *state;
    int fd = io_open(fx, "open", O_RDWR | O_CREAT);
    assert_int_equal(fake_io_crash(fx->fake, 1, FAKE_CRASH_CLEAN), -EBUSY);
    fx->io->ops->close(fx->io, fd);
    assert_int_equal(fake_io_crash(fx->fake, 1, FAKE_CRASH_CLEAN), 0);
}

/* ---- main ---------------------------------------------------------------------------------- */

/* Case names carry the backend: the same test function runs once per backend. */
#define IO_CASE(fn, mode_name, mode_ptr)                                                           \
    {                                                                                              \
        .name = #fn "/" mode_name, .test_func = fn, .setup_func = io_setup,                        \
        .teardown_func = io_teardown, .initial_state = (void *)(mode_ptr)                          \
    }
#define IO_CASE_BOTH(fn) IO_CASE(fn, "uring", &io_mode_uring), IO_CASE(fn, "sync", &io_mode_sync)
#define IO_FAKE_CASE(fn)                                                                           \
    {                                                                                              \
        .name = #fn, .test_func = fn, .setup_func = io_fake_setup, .teardown_func = io_teardown    \
    }
#define IO_ENV_CASE(fn)                                                                            \
    {                                                                                              \
        .name = #fn, .test_func = fn, .setup_func = io_env_setup, .teardown_func = io_env_teardown \
    }

int main(void)
{
    const struct CMUnitTest tests[] = {
        IO_CASE_BOTH(test_io_write_reads_back_at_offsets),
        IO_CASE_BOTH(test_io_flush_many_fds_in_order),
        IO_CASE_BOTH(test_io_flush_orders_writes_beyond_queue_depth),
        IO_CASE_BOTH(test_io_read_short_at_eof),
        IO_CASE_BOTH(test_io_truncate_sets_size),
        IO_CASE_BOTH(test_io_size_sees_queued_writes),
        IO_CASE_BOTH(test_io_flush_fails_on_readonly_fd),
        IO_CASE_BOTH(test_io_flush_reports_error_of_implicit_flush),
        IO_CASE_BOTH(test_io_flush_fails_on_short_write),
        IO_CASE_BOTH(test_io_flush_reports_enospc_of_full_device),
        IO_CASE_BOTH(test_io_flush_reports_enospc_of_filling_disk),
        IO_CASE_BOTH(test_io_flush_survives_signals),
        IO_CASE_BOTH(test_io_write_rejects_offset_beyond_off_t),
        IO_CASE_BOTH(test_io_open_fails_on_missing_file),
        IO_CASE_BOTH(test_io_name_matches_mode),
        /* After test_io_flush_survives_signals: run before it, this case made that case's
         * io_uring flush return -ECANCELED in 4 of 25 runs under ASan (0 of 25 without it, 0
         * of 30 after it). Not understood; the io-wq workers it leaves are the suspect. */
        IO_CASE_BOTH(test_io_sync_dir_runs_at_flush_and_reports_errors),
        IO_ENV_CASE(test_io_mode_parse_accepts_names),
        IO_ENV_CASE(test_io_mode_parse_rejects_unknown),
        IO_ENV_CASE(test_io_create_auto_falls_back_when_disabled),
        IO_ENV_CASE(test_io_create_auto_prefers_uring),
        IO_ENV_CASE(test_io_uring_kernel_cancellation_is_finished),
        IO_FAKE_CASE(test_io_fake_fail_nth_eio_surfaces_at_flush),
        IO_FAKE_CASE(test_io_fake_fail_nth_enospc_on_sync),
        IO_FAKE_CASE(test_io_fake_fail_nth_each_op_of_scenario),
        IO_FAKE_CASE(test_io_fake_fail_from_persists),
        IO_FAKE_CASE(test_io_fake_short_write_reports_eio),
        IO_FAKE_CASE(test_io_fake_counts_write_and_sync_ops),
        IO_FAKE_CASE(test_io_fake_crash_clean_drops_unsynced),
        IO_FAKE_CASE(test_io_fake_crash_torn_keeps_prefix),
        IO_FAKE_CASE(test_io_fake_crash_garbage_keeps_synced_bytes),
        IO_FAKE_CASE(test_io_fake_crash_refuses_open_fds),
    };
    /* Exit 77 (skipped) only when io_uring is refused and nothing but io_uring cases remain,
     * which is never the case today: the sync and fake cases always run. */
    struct storage_io *probe = NULL;
    int rc = storage_io_create(STORAGE_IO_URING, &probe);
    if (rc == 0) {
        probe->ops->destroy(probe);
    }
    size_t uring_cases = 0;
    for (size_t i = 0; i < DS_ARRAY_LEN(tests); i++) {
        uring_cases += tests[i].initial_state == &io_mode_uring;
    }
    if ((rc == -ENOSYS || rc == -EPERM) && uring_cases == DS_ARRAY_LEN(tests)) {
        return 77;
    }
    return cmocka_run_group_tests_name("storage_io", tests, NULL, NULL);
}
