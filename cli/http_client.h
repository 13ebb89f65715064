/*
 * Private to cli/: a small HTTP GET client (libcurl) for the commands that take --server URL.
 * One request per call, on the calling thread, with a 10 s timeout and a bounded answer.
 */
#ifndef DS_CLI_HTTP_CLIENT_H
#define DS_CLI_HTTP_CLIENT_H

#include <stddef.h>

#include "common/common.h"

/* Largest answer body accepted: far above any count document (a 366-day by=hour answer is about
 * 700 KiB). */
#define CLI_HTTP_BODY_BYTES_MAX (64u * 1024 * 1024)

struct cli_http_answer {
    long status; /* HTTP status, 0 when no answer arrived */
    char *body;  /* NUL-terminated, owned; cli_http_answer_deinit frees it */
    size_t body_len;
    char error[256]; /* transport error, or the "error" of a JSON error document */
};

/* GETs base_url + path (path starts with '/'), with "Authorization: Bearer token" when token
 * is not NULL. Returns 0 when an answer arrived (any status: check ans->status), or a negative
 * code with ans->error set. The caller always calls cli_http_answer_deinit. */
DS_MUST_USE int cli_http_get(const char *base_url, const char *path, const char *token,
                             struct cli_http_answer *ans);
void cli_http_answer_deinit(struct cli_http_answer *ans);

/* One keep-alive connection to one server (a libcurl easy handle, reused), for callers that ask
 * the same server many times (the load test's sampler and query load). One thread owns it.
 * Returns 0, -ENOMEM or -DS_EUSAGE (URL or token too long). */
struct cli_http_conn;
DS_MUST_USE int cli_http_conn_open(const char *base_url, const char *token,
                                   struct cli_http_conn **out);
/* As cli_http_get, on the connection. */
DS_MUST_USE int cli_http_conn_get(struct cli_http_conn *c, const char *path,
                                  struct cli_http_answer *ans);
void cli_http_conn_close(struct cli_http_conn *c);

/* Percent-encodes everything but RFC 3986 unreserved characters; dst needs 3 * len + 1 bytes
 * (the text is cut to fit otherwise). */
void cli_url_escape(const char *src, char *dst, size_t dst_capacity);

#endif /* DS_CLI_HTTP_CLIENT_H */
