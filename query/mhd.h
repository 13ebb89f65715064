/*
 * Private to query/: the libmicrohttpd callbacks the query service (http.c) and the router
 * (router.c) share. Apart from http_private.h, which stays free of libmicrohttpd.
 */
#ifndef DS_QUERY_MHD_H
#define DS_QUERY_MHD_H

#include <microhttpd.h>
#include <stdarg.h>

#include "common/common.h"

/* MHD_OPTION_EXTERNAL_LOGGER: one info line per message, cls naming the service ("serve",
 * "router"), trailing newlines dropped. */
DS_PRINTF(2, 0) void http_mhd_log(void *cls, const char *fmt, va_list ap);
/* MHD_OPTION_NOTIFY_COMPLETED: frees the per-request state (*con_cls, from malloc). */
void http_mhd_request_done(void *cls, struct MHD_Connection *c, void **con_cls,
                           enum MHD_RequestTerminationCode toe);

#endif /* DS_QUERY_MHD_H */
