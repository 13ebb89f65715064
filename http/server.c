/*
 * The HTTP server core over libmicrohttpd (http.h): one daemon per server, the request
 * capture and limits, the token (bearer or cookie), and the answers. Lines libmicrohttpd logs
 * pass through http_redact_tokens, since they may quote a target holding /?token=.
 *
 * A request is captured by the URI log callback, before libmicrohttpd decodes anything: the raw
 * target is what the servers' parsers validate (libmicrohttpd's decoder leaves a bad escape as
 * is and truncates at a decoded NUL). The per-request memory (core fields and the server's own
 * state, one malloc) is freed by the request-completed callback. Sizes are bounded below
 * libmicrohttpd's per-connection memory so our JSON answers (414, 431) come first; connections
 * are bounded in total and per address and idle ones time out.
 *
 * Threads: libmicrohttpd's epoll thread pool (each worker accepting and serving its own
 * connections). Answers are counted in relaxed atomics, by tag and status class.
 *
 * Rejected: a thread per connection (hundreds of idle sockets would hold hundreds of threads),
 * and one copy of this plumbing per server (the query service and the router answered the same
 * limits and errors through two copies that could drift apart).
 */
#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/events.h"
#include "http/http.h"

#define SERVER_ADDRESS_TEXT_SIZE 300u
#define SERVER_NAME_BYTES_MAX 32u

_Static_assert((int)HTTP_RESULT_CLOSE == (int)MHD_NO, "http_result maps onto MHD_Result");
_Static_assert((int)HTTP_RESULT_OK == (int)MHD_YES, "http_result maps onto MHD_Result");

struct http_server {
    struct MHD_Daemon *daemon;
    int listen_fd;
    char address[SERVER_ADDRESS_TEXT_SIZE];
    char name[SERVER_NAME_BYTES_MAX];
    char token[HTTP_TOKEN_BYTES_MAX + 1];
    size_t token_len; /* 0: no token asked */
    struct http_server_config cfg;
    struct http_events *events; /* NULL without event streams */
    atomic_uint_fast64_t answers[HTTP_TAGS_MAX][HTTP_CLASS_COUNT];
};

struct http_request {
    struct http_server *server;
    struct MHD_Connection *connection;
    bool validated;
    bool accepted; /* validated without an answer: dispatch answers it */
    bool answered;
    uint32_t tag;
    size_t target_len; /* may exceed HTTP_URI_BYTES_MAX: then only the length is kept */
    char target[HTTP_URI_BYTES_MAX + 1];
    max_align_t state[]; /* cfg.request_state_bytes */
};

/* ---- answers ------------------------------------------------------------------------------- */

static enum http_class class_of(unsigned status)
{
    return status < 400 ? HTTP_CLASS_2XX : (status < 500 ? HTTP_CLASS_4XX : HTTP_CLASS_5XX);
}

/* Queues resp (destroyed here) with status, counted under tag. */
static enum http_result queue(struct http_server *s, struct MHD_Connection *c, uint32_t tag,
                              unsigned status, struct MHD_Response *resp)
{
    ASSERT(tag < HTTP_TAGS_MAX);
    atomic_fetch_add_explicit(&s->answers[tag][class_of(status)], 1, memory_order_relaxed);
    enum MHD_Result result = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return result == MHD_YES ? HTTP_RESULT_OK : HTTP_RESULT_CLOSE;
}

/* body taken; NULL answers 503 out of memory. retry_after_s 0: by the flags. */
static enum http_result respond_on(struct http_server *s, struct MHD_Connection *c, uint32_t tag,
                                   unsigned status, char *body, size_t len,
                                   const char *content_type, uint32_t retry_after_s)
{
    static const char oom[] = "{\"error\":\"out of memory\"}";
    struct MHD_Response *resp =
        body != NULL
            ? MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE)
            : MHD_create_response_from_buffer(sizeof(oom) - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
    if (resp == NULL) {
        free(body);
        return HTTP_RESULT_CLOSE;
    }
    status = body != NULL ? status : MHD_HTTP_SERVICE_UNAVAILABLE;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, HTTP_ALLOW);
    }
    if (status == MHD_HTTP_UNAUTHORIZED && (s->cfg.flags & HTTP_SERVER_CHALLENGE) != 0) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    }
    if (status == MHD_HTTP_SERVICE_UNAVAILABLE && retry_after_s == 0 &&
        (s->cfg.flags & HTTP_SERVER_RETRY_503) != 0) {
        retry_after_s = 1;
    }
    if (retry_after_s > 0) {
        char seconds[16];
        snprintf(seconds, sizeof(seconds), "%u", retry_after_s);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, seconds);
    }
    return queue(s, c, tag, status, resp);
}

static enum http_result respond_error_on(struct http_server *s, struct MHD_Connection *c,
                                         uint32_t tag, unsigned status, const char *message)
{
    size_t cap = strlen(message) * 6 + 32;
    char *body = malloc(cap);
    int64_t len = body != NULL ? http_error_json(message, body, cap) : 0;
    ASSERT(len >= 0);
    return respond_on(s, c, tag, status, body, (size_t)len, "application/json", 0);
}

enum http_result http_respond(struct http_request *req, unsigned status, char *body, size_t len,
                              const char *content_type)
{
    req->answered = true;
    return respond_on(req->server, req->connection, req->tag, status, body, len, content_type, 0);
}

enum http_result http_respond_json(struct http_request *req, unsigned status, char *body,
                                   int64_t len)
{
    ASSERT(body == NULL || len >= 0);
    return http_respond(req, status, body, body != NULL ? (size_t)len : 0, "application/json");
}

enum http_result http_respond_error(struct http_request *req, unsigned status, const char *message)
{
    req->answered = true;
    return respond_error_on(req->server, req->connection, req->tag, status, message);
}

enum http_result http_respond_unavailable(struct http_request *req, char *body, int64_t len,
                                          uint32_t retry_after_s)
{
    ASSERT(retry_after_s >= 1);
    if (body == NULL) {
        return http_respond_json(req, MHD_HTTP_SERVICE_UNAVAILABLE, NULL, 0);
    }
    ASSERT(len > 0);
    req->answered = true;
    return respond_on(req->server, req->connection, req->tag, MHD_HTTP_SERVICE_UNAVAILABLE, body,
                      (size_t)len, "application/json", retry_after_s);
}

/* The page may load scripts, styles and data from this server only, and be framed by none:
 * whatever a malicious day or customer name held, it could not call out. */
#define SERVER_PAGE_POLICY                                                                         \
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "               \
    "form-action 'self'; frame-ancestors 'none'"

enum http_result http_respond_static(struct http_request *req, unsigned status, const void *bytes,
                                     size_t len, const char *content_type)
{
    ASSERT(bytes != NULL);
    req->answered = true;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)bytes, MHD_RESPMEM_PERSISTENT);
    if (resp == NULL) {
        return HTTP_RESULT_CLOSE;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(resp, "Content-Security-Policy", SERVER_PAGE_POLICY);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    return queue(req->server, req->connection, req->tag, status, resp);
}

enum http_result http_respond_login(struct http_request *req, const char *location)
{
    struct http_server *s = req->server;
    ASSERT(location != NULL && location[0] == '/');
    if (s->token_len > 0 && !http_token_cookie_safe(s->token, s->token_len)) {
        return http_respond_error(req, 400,
                                  "the server's token holds bytes a cookie cannot carry (space, "
                                  "quote, comma, semicolon, backslash): send it as a bearer");
    }
    req->answered = true;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (resp == NULL) {
        return HTTP_RESULT_CLOSE;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, location);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (s->token_len > 0) {
        char cookie[HTTP_TOKEN_BYTES_MAX + 96];
        snprintf(cookie, sizeof(cookie), "%s=%s; HttpOnly; SameSite=Strict; Path=/",
                 HTTP_TOKEN_COOKIE, s->token);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_SET_COOKIE, cookie);
    }
    return queue(s, req->connection, req->tag, MHD_HTTP_SEE_OTHER, resp);
}

/* ---- streams ------------------------------------------------------------------------------- */

struct stream {
    http_stream_fn produce;
    http_stream_done_fn done;
    void *user;
};

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct stream *st = cls;
    ASSERT(max > 0);
    int64_t n = st->produce(st->user, buf, max);
    if (n == HTTP_STREAM_END) {
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (n <= 0) { /* HTTP_STREAM_ABORT; 0 would have libmicrohttpd spin on the producer */
        ASSERT(n == HTTP_STREAM_ABORT);
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    ASSERT((size_t)n <= max);
    return (ssize_t)n;
}

static void stream_free(void *cls)
{
    struct stream *st = cls;
    st->done(st->user);
    free(st);
}

enum http_result http_respond_stream(struct http_request *req, unsigned status,
                                     const char *content_type, http_stream_fn produce,
                                     http_stream_done_fn done, void *user)
{
    ASSERT(produce != NULL && done != NULL);
    req->answered = true;
    struct stream *st = malloc(sizeof(*st));
    if (st == NULL) {
        done(user);
        return http_respond_json(req, MHD_HTTP_SERVICE_UNAVAILABLE, NULL, 0);
    }
    *st = (struct stream){.produce = produce, .done = done, .user = user};
    struct MHD_Response *resp = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, HTTP_STREAM_BLOCK_BYTES, stream_read, st, stream_free);
    if (resp == NULL) {
        stream_free(st);
        return HTTP_RESULT_CLOSE;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    /* A proxy must pass each piece on as it comes, not collect the stream. */
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    return queue(req->server, req->connection, req->tag, status, resp);
}

/* ---- requests ------------------------------------------------------------------------------ */

enum http_result http_respond_events(struct http_request *req)
{
    struct http_events *e = req->server->events;
    ASSERT(e != NULL); /* the server was configured with events_streams_max */
    struct MHD_Response *resp = NULL;
    int rc = events_open(e, req->connection, &resp);
    if (rc == -EAGAIN) {
        char message[HTTP_ERROR_BYTES_MAX];
        snprintf(message, sizeof(message),
                 "too many event streams: at most %u at once (close one, or ask again later)",
                 events_streams_max(e));
        return http_respond_error(req, MHD_HTTP_SERVICE_UNAVAILABLE, message);
    }
    if (rc != 0) {
        return http_respond_json(req, MHD_HTTP_SERVICE_UNAVAILABLE, NULL, 0);
    }
    req->answered = true;
    return queue(req->server, req->connection, req->tag, MHD_HTTP_OK, resp);
}

uint32_t http_events_list(struct http_server *s, struct http_events_cursor *out, uint32_t capacity)
{
    ASSERT(s->events != NULL);
    return events_list(s->events, out, capacity);
}

int http_events_send(struct http_server *s, uint64_t id, char *event, size_t len, int64_t position)
{
    ASSERT(s->events != NULL);
    return events_send(s->events, id, event, len, position);
}

const char *http_request_target(const struct http_request *req, size_t *len)
{
    *len = req->target_len;
    return req->target;
}

const char *http_request_header(const struct http_request *req, const char *name)
{
    return MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, name);
}

bool http_request_authorized(const struct http_request *req)
{
    const struct http_server *s = req->server;
    if (s->token_len == 0) {
        return true;
    }
    /* Both are checked, whatever the first says: the time taken names neither. */
    bool bearer = http_bearer_ok(http_request_header(req, "Authorization"), s->token, s->token_len);
    bool cookie = http_cookie_ok(http_request_header(req, "Cookie"), s->token, s->token_len);
    return bearer || cookie;
}

bool http_request_token_required(const struct http_request *req)
{
    return req->server->token_len > 0;
}

bool http_request_token_is(const struct http_request *req, const char *text, size_t len)
{
    const struct http_server *s = req->server;
    return s->token_len > 0 && http_token_equal(text, len, s->token, s->token_len);
}

void *http_request_state(struct http_request *req)
{
    return req->state;
}

void http_request_tag(struct http_request *req, uint32_t tag)
{
    ASSERT(tag < HTTP_TAGS_MAX);
    req->tag = tag;
}

/* ---- libmicrohttpd callbacks --------------------------------------------------------------- */

static enum MHD_Result add_header_bytes(void *cls, enum MHD_ValueKind kind, const char *key,
                                        size_t key_size, const char *value, size_t value_size)
{
    (void)kind;
    (void)key;
    (void)value;
    size_t *total = cls;
    *total += key_size + value_size + 4;
    return MHD_YES;
}

/* First call of a request: the limits every server shares, then the server's own check. */
static enum MHD_Result handle_first(struct http_server *s, struct http_request *req,
                                    const char *method)
{
    req->validated = true;
    size_t header_bytes = 0;
    MHD_get_connection_values_n(req->connection, MHD_HEADER_KIND, add_header_bytes, &header_bytes);
    char message[HTTP_ERROR_BYTES_MAX];
    if (header_bytes > HTTP_HEADERS_BYTES_MAX) {
        snprintf(message, sizeof(message), "request headers larger than %u bytes",
                 HTTP_HEADERS_BYTES_MAX);
        return (enum MHD_Result)http_respond_error(req, 431, message);
    }
    if (req->target_len > HTTP_URI_BYTES_MAX) {
        snprintf(message, sizeof(message), "request target longer than %u bytes",
                 HTTP_URI_BYTES_MAX);
        return (enum MHD_Result)http_respond_error(req, 414, message);
    }
    enum http_result result = s->cfg.accept(s->cfg.user, req, method);
    req->accepted = !req->answered;
    ASSERT(req->answered || result == HTTP_RESULT_OK);
    return (enum MHD_Result)result;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
{
    (void)url;
    (void)version;
    (void)upload_data;
    struct http_server *s = cls;
    struct http_request *req = *con_cls;
    if (req == NULL) {
        return (enum MHD_Result)respond_error_on(s, c, 0, 503, "out of memory");
    }
    if (!req->validated) {
        return handle_first(s, req, method);
    }
    if (*upload_data_size > 0) { /* a body on a GET or HEAD: drained and ignored */
        *upload_data_size = 0;
        return MHD_YES;
    }
    ASSERT(req->accepted);
    enum http_result result = s->cfg.dispatch(s->cfg.user, req);
    ASSERT(req->answered);
    return (enum MHD_Result)result;
}

static void *capture_target(void *cls, const char *uri, struct MHD_Connection *c)
{
    struct http_server *s = cls;
    struct http_request *req = calloc(1, sizeof(*req) + s->cfg.request_state_bytes);
    if (req == NULL) {
        return NULL;
    }
    req->server = s;
    req->connection = c;
    req->target_len = strlen(uri);
    size_t keep = req->target_len <= HTTP_URI_BYTES_MAX ? req->target_len : 0;
    memcpy(req->target, uri, keep);
    req->target[keep] = '\0';
    return req;
}

static void request_done(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    free(*con_cls);
    *con_cls = NULL;
}

/* libmicrohttpd hands its own printf format: the attribute tells the compiler so. */
DS_PRINTF(2, 0) static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    const struct http_server *s = cls;
    char raw[512];
    vsnprintf(raw, sizeof(raw), fmt, ap);
    char line[512];
    size_t len = http_redact_tokens(raw, strlen(raw), line, sizeof(line));
    while (len > 0 && line[len - 1] == '\n') {
        line[--len] = '\0';
    }
    ds_log_info("%s: libmicrohttpd: %s", s->name, line);
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

uint64_t http_server_answers(const struct http_server *s, uint32_t tag, enum http_class cls)
{
    ASSERT(tag == HTTP_TAG_ANY || tag < HTTP_TAGS_MAX);
    ASSERT((unsigned)cls < HTTP_CLASS_COUNT);
    uint64_t total = 0;
    for (uint32_t t = 0; t < HTTP_TAGS_MAX; t++) {
        if (tag == HTTP_TAG_ANY || tag == t) {
            total += atomic_load_explicit(&s->answers[t][cls], memory_order_relaxed);
        }
    }
    return total;
}

int http_server_open(const struct http_server_config *cfg, struct http_server **out)
{
    ASSERT(cfg->name != NULL && cfg->listen != NULL);
    ASSERT(cfg->accept != NULL && cfg->dispatch != NULL);
    ASSERT(cfg->threads >= 1 && cfg->connections_max >= 1 && cfg->connections_per_ip >= 1);
    ASSERT(cfg->idle_timeout_s >= 1);
    if (cfg->token != NULL && strlen(cfg->token) > HTTP_TOKEN_BYTES_MAX) {
        return -DS_EUSAGE;
    }
    struct http_server *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return -ENOMEM;
    }
    s->cfg = *cfg;
    s->cfg.token = NULL;
    snprintf(s->name, sizeof(s->name), "%s", cfg->name);
    s->cfg.name = s->name;
    if (cfg->token != NULL) {
        s->token_len = strlen(cfg->token);
        memcpy(s->token, cfg->token, s->token_len);
    }
    ASSERT(cfg->events_streams_max <= HTTP_EVENTS_STREAMS_MAX);
    ASSERT(cfg->events_streams_max == 0 || cfg->events_tick != NULL);
    int rc = cfg->events_streams_max > 0 ? events_create(cfg->events_streams_max, cfg->events_tick,
                                                         cfg->user, s, &s->events)
                                         : 0;
    if (rc != 0) {
        free(s);
        return rc;
    }
    rc = http_listen(cfg->listen, &s->listen_fd, s->address, sizeof(s->address));
    if (rc != 0) {
        ds_log_error("%s: cannot listen on %s: %s", s->name, cfg->listen, ds_strerror(rc));
        events_destroy(s->events);
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

const char *http_server_address(const struct http_server *s)
{
    return s->address;
}

int http_server_start(struct http_server *s)
{
    ASSERT(s->daemon == NULL);
    uint32_t threads = s->cfg.threads;
    /* Event streams wait suspended (events.c). */
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG |
                     (s->events != NULL ? MHD_ALLOW_SUSPEND_RESUME : 0u);
    s->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, handle, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
        MHD_OPTION_LISTEN_SOCKET, s->listen_fd, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)(threads > 1 ? threads : 0), MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)s->cfg.connections_max, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)s->cfg.connections_per_ip, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)s->cfg.idle_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)HTTP_CONNECTION_MEMORY_BYTES, MHD_OPTION_URI_LOG_CALLBACK, capture_target, s,
        MHD_OPTION_NOTIFY_COMPLETED, request_done, NULL, MHD_OPTION_END);
    if (s->daemon == NULL) {
        ds_log_error("%s: libmicrohttpd refused to start on %s", s->name, s->address);
        return -EIO;
    }
    int rc = s->events != NULL ? events_start(s->events) : 0;
    if (rc != 0) {
        ds_log_error("%s: cannot start the event streams' thread: %s", s->name, ds_strerror(rc));
    }
    return rc;
}

void http_server_close(struct http_server *s)
{
    if (s == NULL) {
        return;
    }
    /* No stream may be suspended when the daemon stops: end them all first. */
    events_stop(s->events);
    if (s->daemon != NULL) {
        MHD_stop_daemon(s->daemon); /* closes the listening socket too */
    } else if (s->listen_fd >= 0) {
        close(s->listen_fd);
    }
    events_destroy(s->events);
    free(s);
}
