/*
 * One-line logging to stderr. The threshold comes from DS_LOG, read on every call through
 * getenv (cheap, and no mutable global); each line is written with one write(2) so lines from
 * several threads never interleave. Rejected: syslog, which a CLI user does not read.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"

static enum ds_log_level log_threshold(void)
{
    const char *env = getenv("DS_LOG");
    if (env == NULL) {
        return DS_LOG_WARN;
    }
    if (strcmp(env, "error") == 0) {
        return DS_LOG_ERROR;
    }
    if (strcmp(env, "info") == 0) {
        return DS_LOG_INFO;
    }
    if (strcmp(env, "debug") == 0) {
        return DS_LOG_DEBUG;
    }
    return DS_LOG_WARN;
}

void ds_log(enum ds_log_level level, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    if (level > log_threshold()) {
        return;
    }
    char line[1024];
    int head = snprintf(line, sizeof(line), "dayshard: %s: ", names[level]);
    ASSERT(head > 0);
    va_list args;
    va_start(args, fmt);
    int body = vsnprintf(line + head, sizeof(line) - (size_t)head - 1, fmt, args);
    va_end(args);
    size_t len = (size_t)head + (body > 0 ? (size_t)body : 0);
    if (len > sizeof(line) - 2) {
        len = sizeof(line) - 2;
    }
    line[len++] = '\n';
    ssize_t ignored = write(STDERR_FILENO, line, len);
    (void)ignored;
}
