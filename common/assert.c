/*
 * Assertion failure: print the broken invariant and abort, so a core dump or the sanitizer
 * names it. Uses only async-signal-safe calls, since an assertion may fire anywhere.
 * Rejected: assert(3), which NDEBUG turns off in release builds, where stored data is at stake.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"

void ds_assert_fail(const char *expr, const char *file, int line)
{
    char text[512];
    int len =
        snprintf(text, sizeof(text), "dayshard: assertion failed: %s (%s:%d)\n", expr, file, line);
    if (len > 0) {
        size_t n = (size_t)len < sizeof(text) ? (size_t)len : sizeof(text) - 1;
        ssize_t ignored = write(STDERR_FILENO, text, n);
        (void)ignored;
    }
    abort();
}
