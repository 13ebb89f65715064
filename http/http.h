/*
 * http: HTTP for the project's own processes.
 */
#ifndef DS_HTTP_HTTP_H
#define DS_HTTP_HTTP_H

#include <stddef.h>

#include "common/common.h"

/* ---- client (client.c): libcurl, for the CLI and the load test ---- */

/* A small HTTP GET client for the commands that take --server URL and for the load test's
 * sampler and query load. One request per call, on the calling thread, with a 10 s timeout and
 * a bounded answer. */

/* Largest answer body accepted: far above any count document (a 366-day by=hour answer is about
 * 700 KiB). */
#define HTTP_CLIENT_BODY_BYTES_MAX (64u * 1024 * 1024)

struct http_client_answer {
    long status; /* HTTP status, 0 when no answer arrived */
    char *body;  /* NUL-terminated, owned; http_client_answer_deinit frees it */
    size_t body_len;
    char error[256]; /* transport error, or the "error" of a JSON error document */
};

/* GETs base_url + path (path starts with '/'), with "Authorization: Bearer token" when token
 * is not NULL. Returns 0 when an answer arrived (any status: check ans->status), or a negative
 * code with ans->error set. The caller always calls http_client_answer_deinit. */
DS_MUST_USE int http_client_get(const char *base_url, const char *path, const char *token,
                                struct http_client_answer *ans);
void http_client_answer_deinit(struct http_client_answer *ans);

/* One keep-alive connection to one server (a libcurl easy handle, reused), for callers that ask
 * the same server many times (the load test's sampler and query load). One thread owns it.
 * Returns 0, -ENOMEM or -DS_EUSAGE (URL or token too long). */
struct http_client_conn;
DS_MUST_USE int http_client_conn_open(const char *base_url, const char *token,
                                      struct http_client_conn **out);
/* As http_client_get, on the connection. */
DS_MUST_USE int http_client_conn_get(struct http_client_conn *c, const char *path,
                                     struct http_client_answer *ans);
void http_client_conn_close(struct http_client_conn *c);

/* Percent-encodes everything but RFC 3986 unreserved characters; dst needs 3 * len + 1 bytes
 * (the text is cut to fit otherwise). */
void http_client_url_escape(const char *src, char *dst, size_t dst_capacity);

#endif /* DS_HTTP_HTTP_H */
