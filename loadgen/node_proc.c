/*
 * Starting and stopping a node process (node_proc.h) for the load test and the soak.
 *
 * The address is read from the child's stdout a byte at a time under poll, so a node that
 * never prints (a bad argument, a port in use) costs at most the timeout and never blocks the
 * caller; stdout is then closed on our side, which the node tolerates (it prints nothing more).
 * Rejected: fixed ports chosen by the caller (two runs on one machine, or a port left in
 * TIME_WAIT, would collide; the node binding port 0 cannot).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loadgen/node_proc.h"

extern char **environ;

/* Waiting for a stopping node, in steps: short next to any stop time worth measuring. */
#define NODE_PROC_WAIT_STEP_MS 10

/* Reads the node's first stdout line (its bound HTTP address), waiting at most timeout_ms. */
static int node_proc_address(int fd, char *dst, size_t cap, int timeout_ms)
{
    ASSERT(cap > 1);
    size_t len = 0;
    uint64_t deadline = ds_clock_ns() + (uint64_t)timeout_ms * 1000000u;
    while (len + 1 < cap) { /* bounded by cap and the deadline */
        uint64_t now = ds_clock_ns();
        if (now >= deadline) {
            return -ETIMEDOUT;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ready = poll(&p, 1, (int)((deadline - now) / 1000000u) + 1);
        if (ready <= 0) {
            continue;
        }
        ssize_t n = read(fd, dst + len, 1);
        if (n <= 0) {
            return -EPIPE;
        }
        if (dst[len] == '\n') {
            break;
        }
        len++;
    }
    dst[len] = '\0';
    return len > 0 ? 0 : -EPIPE;
}

int node_proc_spawn(const char *const *argv, const char *log_path, bool append_log, int timeout_ms,
                    pid_t *pid, char *address, size_t address_capacity)
{
    ASSERT(argv[0] != NULL);
    ASSERT(address_capacity > 1);
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) {
        return -errno;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addopen(&actions, 2, log_path,
                                     O_WRONLY | O_CREAT | (append_log ? O_APPEND : O_TRUNC), 0644);
    int rc = -posix_spawn(pid, argv[0], &actions, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    if (rc == 0) {
        rc = node_proc_address(out[0], address, address_capacity, timeout_ms);
    }
    close(out[0]);
    return rc;
}

int node_proc_stop(pid_t pid, int sig, int timeout_ms)
{
    ASSERT(pid > 0);
    kill(pid, sig);
    int status = 0;
    uint64_t deadline = ds_clock_ns() + (uint64_t)timeout_ms * 1000000u;
    for (;;) { /* bounded by the deadline */
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid) {
            return status;
        }
        if (got < 0 && errno != EINTR) {
            return -1;
        }
        if (ds_clock_ns() > deadline) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0) { /* until reaped */
                if (errno != EINTR) {
                    return -1;
                }
            }
            return status;
        }
        struct timespec ts = {.tv_sec = 0, .tv_nsec = NODE_PROC_WAIT_STEP_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
}
