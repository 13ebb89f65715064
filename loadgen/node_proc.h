/*
 * Private to loadgen/: a `dayshard run` child process, as the load test and the soak start and
 * stop nodes (node_proc.c). The node is this binary (cfg->self, /proc/self/exe), so its CPU,
 * memory and crashes are its own, as in production; it prints its bound HTTP address as the
 * first line of stdout, which is how its caller finds a port it asked for as 127.0.0.1:0.
 * Called from one thread; SIGCHLD must not be ignored (the caller reaps with waitpid).
 */
#ifndef DS_LOADGEN_NODE_PROC_H
#define DS_LOADGEN_NODE_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/common.h"

/* Spawns argv (argv[0] is the program, NULL-terminated; all borrowed) with stdin from
 * /dev/null, stderr into log_path (appended, or the file truncated first) and stdout on a pipe, and
 * reads the first stdout line (its address, "HOST:PORT") into address, waiting at most timeout_ms.
 * *pid is set whenever the process was started, on failure too (the caller stops it). Returns 0,
 * -ETIMEDOUT, -EPIPE (it exited or closed stdout first) or a negated errno of the spawn. */
DS_MUST_USE int node_proc_spawn(const char *const *argv, const char *log_path, bool append_log,
                                int timeout_ms, pid_t *pid, char *address, size_t address_capacity);

/* Sends sig to pid and waits for it at most timeout_ms, then SIGKILL and waits. Returns the
 * wait status (as waitpid's), or -1 when pid was not a child of ours. */
int node_proc_stop(pid_t pid, int sig, int timeout_ms);

#endif /* DS_LOADGEN_NODE_PROC_H */
