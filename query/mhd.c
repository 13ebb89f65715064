/*
 * The libmicrohttpd callbacks the query service and the router share (mhd.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/mhd.h"

/* libmicrohttpd hands its own printf format: the attribute tells the compiler so. */
void http_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    vsnprintf(line, sizeof(line), fmt, ap);
    size_t len = strlen(line);
    while (len > 0 && line[len - 1] == '\n') {
        line[--len] = '\0';
    }
    ds_log_info("%s: libmicrohttpd: %s", (const char *)cls, line);
}

void http_mhd_request_done(void *cls, struct MHD_Connection *c, void **con_cls,
                           enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    free(*con_cls);
    *con_cls = NULL;
}
