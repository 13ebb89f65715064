/*
 * What the commands that run something and write a report directory (loadtest, soak) share
 * around their option parsing (cli.h): the default --out, the binary the run spawns its nodes
 * from, and the command line report.json records. Their options and checks stay in their own
 * cmd_*.c, as the two have few options in common and each reads best as one table.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

void cli_report_dir_default(const char *prefix, char *dst, size_t dst_capacity)
{
    ASSERT(prefix != NULL && dst != NULL && dst_capacity > 0);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char stamp[32];
    strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
    snprintf(dst, dst_capacity, "%s-%s", prefix, stamp);
}

void cli_report_self(char *dst, size_t dst_capacity)
{
    ASSERT(dst != NULL && dst_capacity > 1);
    ssize_t n = readlink("/proc/self/exe", dst, dst_capacity - 1);
    dst[n > 0 ? n : 0] = '\0';
}

void cli_report_command(int argc, char **argv, char *dst, size_t dst_capacity)
{
    ASSERT(dst != NULL && dst_capacity > sizeof("dayshard"));
    snprintf(dst, dst_capacity, "dayshard");
    size_t len = strlen(dst);
    for (int i = 0; i < argc && len + 2 < dst_capacity; i++) {
        int n = snprintf(dst + len, dst_capacity - len, " %s", argv[i]);
        len = n > 0 ? len + (size_t)n : len;
        len = len < dst_capacity ? len : dst_capacity - 1;
    }
}
