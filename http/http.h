/*
 * http: the HTTP plumbing of dayshard, shared by every part that speaks HTTP.
 *
 * The server core runs the libmicrohttpd daemon of the query service (`serve`, `run --http`)
 * and of the router: the listening socket, the worker pool, the limits on what a client may
 * send (target, headers, connection memory), the bearer token and its cookie (a browser cannot
 * put a bearer on a page load or an EventSource), and the answers ({"error": ...}
 * bodies, Allow on a 405, Retry-After, a long-lived stream). Each server keeps only its
 * dispatch (which handler answers a request) and its handlers.
 *
 * Threads: http_server_open .. http_server_close from one thread; the accept and dispatch
 * callbacks and every http_respond_* run on the daemon's worker threads, one request on one
 * thread at a time. Text and JSON helpers are pure functions, any thread.
 *
 * The client (libcurl) is the small GET client of the commands that take --server URL and of
 * the load test: one request per call on the calling thread, or one keep-alive connection that
 * one thread owns.
 */
#ifndef DS_HTTP_HTTP_H
#define DS_HTTP_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

/* ---- server (server.c): libmicrohttpd, for the query service and the router ---- */

/* The raw request target (path and query): a count needs under 120 bytes; 2 KiB leaves room
 * for long status values and is what common proxies accept without complaint. Longer: 414. */
#define HTTP_URI_BYTES_MAX 2048u
/* All request header names and values together; longer: 431. */
#define HTTP_HEADERS_BYTES_MAX 8192u
/* libmicrohttpd's per-connection memory; past it libmicrohttpd answers 414/431 itself (with
 * its own HTML body). It must leave room above our own JSON-answered limits. */
#define HTTP_CONNECTION_MEMORY_BYTES 32768u
/* The message of a 4xx answer. */
#define HTTP_ERROR_BYTES_MAX 256u
/* Token bytes: enough for any generated secret, small enough to compare in constant time. */
#define HTTP_TOKEN_BYTES_MAX 256u
/* The cookie that carries the token for a browser (the console): accepted wherever the bearer
 * is. Set by http_respond_login as HttpOnly (no script reads it) and SameSite=Strict (no other
 * site's page sends it). */
#define HTTP_TOKEN_COOKIE "dayshard_token"
/* What a redacted token reads as in a log line. */
#define HTTP_REDACTED "REDACTED"
/* Tags a server may put on its answers to have them counted apart (the router: by endpoint). */
#define HTTP_TAGS_MAX 16u
/* "GET, HEAD": what every endpoint of both servers allows (the Allow header of a 405). */
#define HTTP_ALLOW "GET, HEAD"

_Static_assert(HTTP_URI_BYTES_MAX + HTTP_HEADERS_BYTES_MAX < HTTP_CONNECTION_MEMORY_BYTES,
               "our JSON 414 and 431 must come before libmicrohttpd's own");

/* What a handler returns: its answer was queued, or the connection must close (libmicrohttpd
 * could not take the answer). */
enum http_result { HTTP_RESULT_CLOSE = 0, HTTP_RESULT_OK = 1 };

/* Status classes of the answers a server counts. */
enum http_class { HTTP_CLASS_2XX = 0, HTTP_CLASS_4XX, HTTP_CLASS_5XX, HTTP_CLASS_COUNT };
/* http_server_answers over every tag. */
#define HTTP_TAG_ANY UINT32_MAX

enum http_server_flags {
    HTTP_SERVER_CHALLENGE = 1u << 0, /* a 401 carries WWW-Authenticate: Bearer */
    HTTP_SERVER_RETRY_503 = 1u << 1, /* every 503 carries Retry-After: 1 */
};

struct http_server;
/* The pump of a server's event streams (http_respond_events), on a thread of the core's own,
 * every HTTP_EVENTS_TICK_MS while a stream is open: looks at the streams (http_events_list) and
 * sends each what is new for it (http_events_send). user is the server's cfg.user. */
typedef void (*http_events_tick_fn)(void *user, struct http_server *s);
/* One request, from its headers to its answer: the raw target, the server's own state for it
 * (http_request_state) and the connection to answer on. Owned by the core. */
struct http_request;

/* First call of a request, its headers read, its target within HTTP_URI_BYTES_MAX and its
 * headers within HTTP_HEADERS_BYTES_MAX: validates it. Answering (an error) ends the request
 * (the connection then closes, which also drops any body); answering nothing accepts it, and
 * dispatch runs once its body (if any) was drained, so the connection can be kept alive. */
typedef enum http_result (*http_accept_fn)(void *user, struct http_request *req,
                                           const char *method);
/* An accepted request: must answer it (one http_respond_*). */
typedef enum http_result (*http_dispatch_fn)(void *user, struct http_request *req);

struct http_server_config {
    const char *name;            /* "serve", "router": log lines start with it; borrowed */
    const char *listen;          /* "HOST:PORT" (an IPv6 host in brackets; port 0: any) */
    uint32_t threads;            /* workers (libmicrohttpd's epoll thread pool), >= 1 */
    uint32_t connections_max;    /* open connections in total, >= 1 */
    uint32_t connections_per_ip; /* from one address, >= 1 */
    uint32_t idle_timeout_s;     /* an idle (or dribbling) connection is closed, >= 1 */
    const char *token;           /* bearer token (http_request_authorized), or NULL; copied */
    enum http_server_flags flags;
    size_t request_state_bytes; /* per request, zeroed, for the server's own use */
    http_accept_fn accept;
    http_dispatch_fn dispatch;
    void *user; /* retained until http_server_close */
    /* Server-sent event streams open at once (1..HTTP_EVENTS_STREAMS_MAX), 0 for none; with
     * events_tick, which feeds them. */
    uint32_t events_streams_max;
    http_events_tick_fn events_tick;
};

/* Binds and listens on cfg->listen (nothing is served yet: the caller opens what its handlers
 * need, then calls http_server_start). Returns 0, -DS_EUSAGE (an address that does not parse
 * or resolve, a token over HTTP_TOKEN_BYTES_MAX), -ENOMEM, or a negated errno of
 * socket/bind/listen; the cause is logged. */
DS_MUST_USE int http_server_open(const struct http_server_config *cfg, struct http_server **out);
/* "HOST:PORT" actually bound (the port chosen when 0 was asked). */
const char *http_server_address(const struct http_server *s);
/* Starts the workers. Returns 0 or -EIO (libmicrohttpd refused; logged). */
DS_MUST_USE int http_server_start(struct http_server *s);
/* Stops accepting, ends every event stream, finishes the requests in progress (a stream ends),
 * closes the socket and frees s. Accepts NULL. */
void http_server_close(struct http_server *s);
/* Answers counted so far with tag (or HTTP_TAG_ANY) and class; any thread. */
uint64_t http_server_answers(const struct http_server *s, uint32_t tag, enum http_class cls);

/* The raw target as the client sent it (before any decoding), *len bytes (not NUL-terminated
 * for the parser's sake, though a NUL follows). */
const char *http_request_target(const struct http_request *req, size_t *len);
/* A request header's value, or NULL. */
const char *http_request_header(const struct http_request *req, const char *name);
/* Whether the request carries the server's token (always true without a token), as
 * "Authorization: Bearer T" or as the cookie HTTP_TOKEN_COOKIE=T: the comparison is
 * constant-time over the token. */
bool http_request_authorized(const struct http_request *req);
/* Whether the server has a token at all. */
bool http_request_token_required(const struct http_request *req);
/* Whether text (len bytes: a token a client typed, say /?token=T decoded) is the server's token;
 * constant time over the token. False when the server has no token. */
bool http_request_token_is(const struct http_request *req, const char *text, size_t len);
/* request_state_bytes of zeroed memory the server keeps per request (aligned for any type). */
void *http_request_state(struct http_request *req);
/* Counts the request's answer under tag (< HTTP_TAGS_MAX; 0 until set). */
void http_request_tag(struct http_request *req, uint32_t tag);

/* Answers with body (len bytes; taken: freed by the core, on failure too). A NULL body answers
 * 503 {"error":"out of memory"} instead (the caller's malloc failed). Adds Allow on a 405 and,
 * by the server's flags, WWW-Authenticate on a 401 and Retry-After: 1 on a 503. */
enum http_result http_respond(struct http_request *req, unsigned status, char *body, size_t len,
                              const char *content_type);
/* http_respond with application/json; len >= 0 when body is not NULL. */
enum http_result http_respond_json(struct http_request *req, unsigned status, char *body,
                                   int64_t len);
/* {"error": message} with status. */
enum http_result http_respond_error(struct http_request *req, unsigned status, const char *message);
/* A 503 JSON body (taken; NULL: out of memory) with Retry-After: retry_after_s (>= 1). */
enum http_result http_respond_unavailable(struct http_request *req, char *body, int64_t len,
                                          uint32_t retry_after_s);

/* Answers a browser document (a page, a script, a style sheet compiled into the binary: bytes
 * borrowed for the process's life) with the headers a page wants: a Content-Security-Policy that
 * lets it load and connect to this server only (default-src 'self'), X-Content-Type-Options:
 * nosniff, Referrer-Policy: no-referrer and Cache-Control: no-cache. */
enum http_result http_respond_static(struct http_request *req, unsigned status, const void *bytes,
                                     size_t len, const char *content_type);
/* The console's login: 303 See Other to location (a path of this server) with
 * Set-Cookie: HTTP_TOKEN_COOKIE=<the server's token>; HttpOnly; SameSite=Strict; Path=/ (no
 * cookie when the server has no token). The caller checked the token the client gave
 * (http_request_token_is). A token with bytes a cookie cannot hold (space, quote, comma,
 * semicolon, backslash, controls) answers 400 naming the cause: use the bearer. */
enum http_result http_respond_login(struct http_request *req, const char *location);

/* A long-lived answer produced piece by piece (server-sent events, a live console): writes up
 * to capacity bytes into dst and returns how many (> 0), HTTP_STREAM_END when the stream is
 * complete or HTTP_STREAM_ABORT to cut the connection. It runs on the request's worker thread
 * and may wait for its next piece (bounded: a heartbeat every few seconds keeps the client and
 * any proxy informed), but every other connection of that worker waits with it: a server with
 * many streams gives them workers of their own. */
typedef int64_t (*http_stream_fn)(void *user, char *dst, size_t capacity);
/* Called once when the stream is over, whichever way: the producer ended it, the client went,
 * or the server stopped. The last call on user: it may free it. */
typedef void (*http_stream_done_fn)(void *user);
#define HTTP_STREAM_END (-1)
#define HTTP_STREAM_ABORT (-2)
/* Pieces handed to the producer at most (its capacity). */
#define HTTP_STREAM_BLOCK_BYTES 4096u
/* Answers status with a body of unknown length (chunked) from produce; done is called once the
 * stream is over, also when this fails (then with nothing queued). */
enum http_result http_respond_stream(struct http_request *req, unsigned status,
                                     const char *content_type, http_stream_fn produce,
                                     http_stream_done_fn done, void *user);

/* ---- server-sent events (events.c): streams that wait without holding a worker ---- */

/* A live view (the heat console) per operator and a few dashboards; more answer 503. */
#define HTTP_EVENTS_STREAMS_MAX 16u
/* Events queued for one stream: a client that falls this many behind does not read, and is
 * dropped rather than buffered for (its stream ends; its connection, making no progress, closes
 * at the server's idle timeout, which frees its place). */
#define HTTP_EVENTS_QUEUED_MAX 4u
/* How often the pump looks for something new to send: a new stream's first event comes within
 * this, and an event stream's events within this of being made. */
#define HTTP_EVENTS_TICK_MS 100u
/* A stream with nothing sent for this long gets the comment line ": idle" (so the client and
 * any proxy in between know it is alive, and a client that went away is noticed). */
#define HTTP_EVENTS_IDLE_MS 5000u
/* The position of a stream nothing was sent to yet. */
#define HTTP_EVENTS_START INT64_MIN

/* An open stream: its id and the position the last http_events_send gave it. */
struct http_events_cursor {
    uint64_t id;
    int64_t position;
};

/* Answers 200 text/event-stream (Cache-Control: no-cache) with a stream that stays open until
 * the client goes, is dropped, or the server closes; its events come from the pump. Answers
 * 503 {"error": ...} when events_streams_max streams are open (or the server is closing). The
 * stream waits for its next event suspended (libmicrohttpd's suspend/resume), so no worker
 * thread waits with it. */
enum http_result http_respond_events(struct http_request *req);
/* From the pump: the open streams, up to capacity; returns how many. */
uint32_t http_events_list(struct http_server *s, struct http_events_cursor *out, uint32_t capacity);
/* From the pump: queues event (len bytes, one or more whole "event:/data:" blocks; taken: freed
 * by the core, on failure too) on stream id and sets its position. Returns 0, -ENOENT (the
 * stream is gone) or -ENOBUFS (HTTP_EVENTS_QUEUED_MAX events were queued: the client does not
 * read, and the stream is ended). */
int http_events_send(struct http_server *s, uint64_t id, char *event, size_t len, int64_t position);

/* ---- text (text.c): bodies in fixed buffers ---- */

/* Formatted text appended to a caller's fixed buffer (JSON answers, the Prometheus page).
 * Overflow is sticky and checked once at the end. */
struct http_text {
    char *dst;
    size_t capacity;
    size_t len;
    bool overflow; /* a put did not fit: len stops growing, the text is incomplete */
};

/* Appends like snprintf at b->len; on overflow marks b and writes nothing more. */
DS_PRINTF(2, 3) void http_text_put(struct http_text *b, const char *fmt, ...);
/* Writes s (len bytes) as a JSON string literal (quotes included) into dst; returns the
 * length or -ENOSPC. */
DS_MUST_USE int64_t http_json_string(const char *s, size_t len, char *dst, size_t dst_capacity);
/* Renders {"error": message} into dst. Returns the length or -ENOSPC. */
DS_MUST_USE int64_t http_error_json(const char *message, char *dst, size_t dst_capacity);
/* Whether an Authorization header value is "Bearer " and token. Constant time over the token's
 * length: the answer must not reveal a matching prefix. authorization may be NULL (no
 * header). */
bool http_bearer_ok(const char *authorization, const char *token, size_t token_len);
/* Whether a Cookie header value ("a=1; dayshard_token=T; b=2") holds HTTP_TOKEN_COOKIE with
 * the value token (a quoted value is unquoted); any one of several such cookies may match.
 * Constant time over the token's length for each candidate. cookie may be NULL (no header). */
bool http_cookie_ok(const char *cookie, const char *token, size_t token_len);
/* got (got_len bytes) equals token (token_len bytes), in time that depends on token_len only. */
bool http_token_equal(const char *got, size_t got_len, const char *token, size_t token_len);
/* Whether every byte of token may stand in a cookie value unquoted (RFC 6265 cookie-octet). */
bool http_token_cookie_safe(const char *token, size_t token_len);
/* Copies text (len bytes: a request target, or a log line that may quote one) into dst with the
 * value after every "token=" (any case) replaced by HTTP_REDACTED, up to the next '&', '#',
 * quote, white space or the end: a token given as /?token=T never reaches a log. NUL-terminated,
 * cut to fit dst_capacity (>= 1). Returns the length written. */
size_t http_redact_tokens(const char *text, size_t len, char *dst, size_t dst_capacity);

/* ---- heat history documents (heat_merge.c) ---- */

/* Documents one merge takes: every node a router fronts (two groups of 64). */
#define HTTP_HEAT_MERGE_MEMBERS_MAX 128u
/* The seconds a node's heat history keeps (shard.h's SHARD_HEAT_HISTORY_S; asserted where both
 * are seen). */
#define HTTP_HEAT_HISTORY_SECONDS_MAX 300u
/* A day's array in a column: the most shards a day has (shard.h's SHARD_COUNT_MAX, asserted
 * where both are seen). */
#define HTTP_HEAT_SHARDS_MAX 1024u
/* One GET /v1/heat/history document from those of nodes whose heats add up (bodies[0..count),
 * the members of one consumer group), for the last `seconds` (1..HTTP_HEAT_HISTORY_SECONDS_MAX)
 * up to the oldest member's newest second: columns summed by t, growths unioned, with
 * "members" and, when the members' capacities differ, "warnings" (heat_merge.c says why).
 * Returns 0 with *body (malloc'd, the caller frees) and *len, -DS_ECORRUPT with error naming
 * the field of a member's document that is not valid, or -ENOMEM. */
DS_MUST_USE int http_heat_history_merge(uint32_t seconds, const char *const *bodies, uint32_t count,
                                        char **body, size_t *len, char *error, size_t error_size);

/* ---- listening (listen.c) ---- */

/* Binds and listens on "HOST:PORT": *fd gets the non-blocking socket and address the bound
 * "HOST:PORT" (the port picked for 0). Returns 0, -DS_EUSAGE for an address that does not
 * parse or resolve, or a negated errno of socket/bind/listen. */
DS_MUST_USE int http_listen(const char *listen_text, int *fd, char *address, size_t address_size);

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
