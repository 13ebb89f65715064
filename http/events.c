/*
 * Server-sent event streams (http.h, "server-sent events"): a bounded set of long-lived
 * answers per server, fed by a pump thread, that wait for their next event without holding a
 * worker thread.
 *
 * A stream is a chunked answer whose content reader hands out the events queued for it. With
 * nothing queued, the reader suspends its connection (MHD_suspend_connection, allowed from a
 * content reader; the daemon runs with MHD_ALLOW_SUSPEND_RESUME) and returns 0: libmicrohttpd
 * then leaves the connection out of its event loop, and the worker serves its other
 * connections. The pump queues an event and resumes the connection (MHD_resume_connection,
 * any thread); the worker calls the reader again. One mutex per server guards every stream's
 * queue and flags; the reader, the pump and the answer's free callback each hold it briefly.
 * libmicrohttpd never calls us holding a lock we wait for while holding ours (the reader runs
 * under the answer's own mutex, which nothing here takes), so the order is always ours first.
 *
 * Bounds: at most streams_max streams (the next gets 503); at most HTTP_EVENTS_QUEUED_MAX
 * events queued per stream (a client that falls that far behind is ended, never buffered for);
 * a client that stops reading with less queued makes no progress, and libmicrohttpd's idle
 * timeout closes it. A suspended connection is not watched by libmicrohttpd, so a client that
 * went away is noticed at the next event or ": idle" line, within HTTP_EVENTS_IDLE_MS.
 *
 * Shutdown: libmicrohttpd must not stop a daemon with a suspended connection, so events_stop
 * marks every stream ended and resumes the suspended ones before the core stops its daemon;
 * a resumed stream's reader then ends its answer. New streams are refused from then on.
 *
 * Invariants: a stream is in slots[] from its answer until libmicrohttpd frees that answer
 * (the free callback takes it out), so the pump only touches live connections; `suspended` is
 * true exactly between the reader's suspend and the pump's resume; an ended stream gets
 * nothing queued.
 *
 * Rejected: a content reader that waits (sleeps) for the next event, as http_respond_stream
 * does: it blocks its worker and every other connection of that worker for as long as the
 * stream lives. Rejected too: libmicrohttpd's thread-per-connection mode for the whole server
 * (a thread per idle keep-alive socket).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/events.h"

/* The keep-alive line: a comment, which EventSource ignores. */
static const char events_idle_line[] = ": idle\n\n";

struct events_piece {
    char *text; /* owned, or events_idle_line */
    size_t len;
};

struct events_stream {
    struct http_events *events;
    struct MHD_Connection *connection;
    uint64_t id;
    int64_t position;
    uint64_t last_sent_ns; /* when the last piece was queued (or the stream opened) */
    bool suspended;
    bool ended;
    bool dropped; /* ended because the client did not read: the answer is cut, not completed */
    uint32_t head;
    uint32_t count;
    size_t offset; /* bytes of queue[head] already handed out */
    struct events_piece queue[HTTP_EVENTS_QUEUED_MAX];
};

struct http_events {
    struct http_server *server;
    http_events_tick_fn tick;
    void *user;
    uint32_t streams_max;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t pump;
    bool pump_started;
    bool stopping;                                        /* under lock */
    uint64_t next_id;                                     /* under lock */
    uint32_t stream_count;                                /* under lock */
    struct events_stream *slots[HTTP_EVENTS_STREAMS_MAX]; /* under lock; NULL: free */
};

static uint64_t events_now_ns(void)
{
    struct timespec ts;
    ASSERT(clock_gettime(CLOCK_MONOTONIC, &ts) == 0);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void events_piece_free(struct events_piece *p)
{
    if (p->text != events_idle_line) {
        free(p->text);
    }
    *p = (struct events_piece){0};
}

/* Under lock: lets a suspended stream's reader run again. */
static void events_wake_stream(struct events_stream *st)
{
    if (st->suspended) {
        st->suspended = false;
        MHD_resume_connection(st->connection);
    }
}

/* Under lock: ends a stream (dropped: the client did not read) and frees what it had queued. */
static void events_end_stream(struct events_stream *st, bool dropped)
{
    st->ended = true;
    st->dropped = st->dropped || dropped;
    while (st->count > 0) {
        events_piece_free(&st->queue[st->head]);
        st->head = (st->head + 1u) % HTTP_EVENTS_QUEUED_MAX;
        st->count--;
    }
    st->offset = 0;
    events_wake_stream(st);
}

/* Under lock: queues a piece (taken); -ENOBUFS ends the stream. */
static int events_queue_piece(struct events_stream *st, char *text, size_t len)
{
    ASSERT(!st->ended);
    ASSERT(len > 0);
    if (st->count == HTTP_EVENTS_QUEUED_MAX) {
        struct events_piece dropped = {.text = text, .len = len};
        events_piece_free(&dropped);
        events_end_stream(st, true);
        return -ENOBUFS;
    }
    st->queue[(st->head + st->count) % HTTP_EVENTS_QUEUED_MAX] =
        (struct events_piece){.text = text, .len = len};
    st->count++;
    st->last_sent_ns = events_now_ns();
    events_wake_stream(st);
    return 0;
}

/* ---- the answer: libmicrohttpd's callbacks ------------------------------------------------- */

static ssize_t events_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct events_stream *st = cls;
    struct http_events *e = st->events;
    ASSERT(max > 0);
    ASSERT(pthread_mutex_lock(&e->lock) == 0);
    ssize_t n = 0;
    if (st->ended) {
        n = st->dropped ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
    } else if (st->count == 0) {
        /* Nothing to send: out of the worker's loop until the pump resumes it. */
        ASSERT(!st->suspended);
        st->suspended = true;
        MHD_suspend_connection(st->connection);
    } else {
        struct events_piece *p = &st->queue[st->head];
        size_t take = p->len - st->offset < max ? p->len - st->offset : max;
        memcpy(buf, p->text + st->offset, take);
        st->offset += take;
        if (st->offset == p->len) {
            events_piece_free(p);
            st->head = (st->head + 1u) % HTTP_EVENTS_QUEUED_MAX;
            st->count--;
            st->offset = 0;
        }
        n = (ssize_t)take;
    }
    ASSERT(pthread_mutex_unlock(&e->lock) == 0);
    return n;
}

/* The answer is freed: the client went, the stream ended, or the daemon stopped. */
static void events_free(void *cls)
{
    struct events_stream *st = cls;
    struct http_events *e = st->events;
    ASSERT(pthread_mutex_lock(&e->lock) == 0);
    ASSERT(!st->suspended);
    events_end_stream(st, false);
    for (uint32_t i = 0; i < e->streams_max; i++) {
        if (e->slots[i] == st) {
            e->slots[i] = NULL;
            e->stream_count--;
        }
    }
    ASSERT(pthread_mutex_unlock(&e->lock) == 0);
    free(st);
}

/* Under lock: a free slot for a new stream, or NULL (full, or stopping). */
static struct events_stream **events_free_slot(struct http_events *e)
{
    if (e->stopping || e->stream_count == e->streams_max) {
        return NULL;
    }
    for (uint32_t i = 0; i < e->streams_max; i++) {
        if (e->slots[i] == NULL) {
            return &e->slots[i];
        }
    }
    ASSERT(false); /* stream_count counts the slots in use */
    return NULL;
}

int events_open(struct http_events *e, struct MHD_Connection *connection, struct MHD_Response **out)
{
    ASSERT(e != NULL && connection != NULL && out != NULL);
    struct events_stream *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        return -ENOMEM;
    }
    *st = (struct events_stream){.events = e,
                                 .connection = connection,
                                 .position = HTTP_EVENTS_START,
                                 .last_sent_ns = events_now_ns()};
    /* From here the stream is the answer's: events_free takes it out of the slots (if it got
     * one) and frees it when the answer is destroyed, whichever way. */
    struct MHD_Response *resp = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, HTTP_STREAM_BLOCK_BYTES, events_read, st, events_free);
    if (resp == NULL) {
        free(st);
        return -ENOMEM;
    }
    ASSERT(pthread_mutex_lock(&e->lock) == 0);
    struct events_stream **slot = events_free_slot(e);
    if (slot != NULL) {
        st->id = ++e->next_id;
        *slot = st;
        e->stream_count++;
        pthread_cond_signal(&e->wake);
    }
    ASSERT(pthread_mutex_unlock(&e->lock) == 0);
    if (slot == NULL) {
        MHD_destroy_response(resp);
        return -EAGAIN;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    *out = resp;
    return 0;
}

uint32_t events_streams_max(const struct http_events *e)
{
    return e->streams_max;
}

uint32_t events_list(struct http_events *e, struct http_events_cursor *out, uint32_t capacity)
{
    ASSERT(e != NULL);
    ASSERT(out != NULL || capacity == 0);
    uint32_t count = 0;
    ASSERT(pthread_mutex_lock(&e->lock) == 0);
    for (uint32_t i = 0; i < e->streams_max && count < capacity; i++) {
        const struct events_stream *st = e->slots[i];
        if (st != NULL && !st->ended) {
            out[count++] = (struct http_events_cursor){.id = st->id, .position = st->position};
        }
    }
    ASSERT(pthread_mutex_unlock(&e->lock) == 0);
    return count;
}

/* Under lock: the live stream with id, or NULL. */
static struct events_stream *events_find(struct http_events *e, uint64_t id)
{
    for (uint32_t i = 0; i < e->streams_max; i++) {
        struct events_stream *st = e->slots[i];
        if (st != NULL && st->id == id && !st->ended) {
            return st;
        }
    }
    return NULL;
}

int events_send(struct http_events *e, uint64_t id, char *event, size_t len, int64_t position)
{
    ASSERT(e != NULL);
    ASSERT(event != NULL && len > 0);
    ASSERT(pthread_mutex_lock(&e->lock) == 0);
    struct events_stream *st = events_find(e, id);
    int rc = -ENOENT;
    if (st != NULL) {
        rc = events_queue_piece(st, event, len);
        st->position = position;
        event = NULL;
    }
    ASSERT(pthread_mutex_unlock(&e->lock) == 0);
    free(event);
    return rc;
}

/* ---- the pump ------------------------------------------------------------------------------ */

/* Under lock: ": idle" to every stream that had nothing for HTTP_EVENTS_IDLE_MS. */
static void events_keep_alive(struct http_events *e, uint64_t now_ns)
{
    for (uint32_t i = 0; i < e->streams_max; i++) {
        struct events_stream *st = e->slots[i];
        if (st != NULL && !st->ended &&
            now_ns - st->last_sent_ns >= (uint64_t)HTTP_EVENTS_IDLE_MS * 1000000u) {
            (void)events_queue_piece(st, (char *)events_idle_line, sizeof(events_idle_line) - 1);
        }
    }
}

/* Runs until events_stop: a tick every HTTP_EVENTS_TICK_MS while a stream is open, else
 * asleep until one opens. Each turn's work is bounded by the streams (at most streams_max). */
static void *events_pump(void *arg)
{
    struct http_events *e = arg;
    ASSERT(pthread_mutex_lock(&e->lock) == 0);
    while (!e->stopping) {
        if (e->stream_count == 0) {
            pthread_cond_wait(&e->wake, &e->lock);
            continue;
        }
        struct timespec until;
        ASSERT(clock_gettime(CLOCK_REALTIME, &until) == 0);
        until.tv_nsec += (long)HTTP_EVENTS_TICK_MS * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        (void)pthread_cond_timedwait(&e->wake, &e->lock, &until);
        if (e->stopping) {
            break;
        }
        ASSERT(pthread_mutex_unlock(&e->lock) == 0);
        e->tick(e->user, e->server);
        ASSERT(pthread_mutex_lock(&e->lock) == 0);
        events_keep_alive(e, events_now_ns());
    }
    ASSERT(pthread_mutex_unlock(&e->lock) == 0);
    return NULL;
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

int events_create(uint32_t streams_max, http_events_tick_fn tick, void *user, struct http_server *s,
                  struct http_events **out)
{
    ASSERT(streams_max >= 1 && streams_max <= HTTP_EVENTS_STREAMS_MAX);
    ASSERT(tick != NULL && s != NULL && out != NULL);
    struct http_events *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        return -ENOMEM;
    }
    *e = (struct http_events){.server = s, .tick = tick, .user = user, .streams_max = streams_max};
    ASSERT(pthread_mutex_init(&e->lock, NULL) == 0);
    ASSERT(pthread_cond_init(&e->wake, NULL) == 0);
    *out = e;
    return 0;
}

int events_start(struct http_events *e)
{
    ASSERT(!e->pump_started);
    int rc = pthread_create(&e->pump, NULL, events_pump, e);
    if (rc != 0) {
        return -rc;
    }
    e->pump_started = true;
    return 0;
}

void events_stop(struct http_events *e)
{
    if (e == NULL) {
        return;
    }
    ASSERT(pthread_mutex_lock(&e->lock) == 0);
    e->stopping = true;
    for (uint32_t i = 0; i < e->streams_max; i++) {
        if (e->slots[i] != NULL) {
            events_end_stream(e->slots[i], false);
        }
    }
    pthread_cond_broadcast(&e->wake);
    ASSERT(pthread_mutex_unlock(&e->lock) == 0);
    if (e->pump_started) {
        ASSERT(pthread_join(e->pump, NULL) == 0);
        e->pump_started = false;
    }
}

void events_destroy(struct http_events *e)
{
    if (e == NULL) {
        return;
    }
    ASSERT(!e->pump_started);
    ASSERT(e->stream_count == 0); /* the daemon stopped: every answer was freed */
    pthread_cond_destroy(&e->wake);
    pthread_mutex_destroy(&e->lock);
    free(e);
}
