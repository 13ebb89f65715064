/*
 * Unit tests of http/events.c, server-sent event streams: a real daemon on loopback with ONE
 * worker thread, spoken to over plain sockets. Events reach a stream as the pump sends them;
 * a waiting stream leaves the worker free for other requests; streams are bounded (503); a
 * client that does not read is dropped and its place freed; closing the server with streams
 * open ends them promptly.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http/http.h"
#include "tests/support/http_client.h"

#define TEST_STREAMS 2u
/* A client that does not read holds its connection until libmicrohttpd's idle timeout. */
#define TEST_IDLE_TIMEOUT_S 2u
/* A flood event: big enough that a few fill the socket buffers of a client that does not read. */
#define TEST_FLOOD_BYTES (512u * 1024u)

struct fixture {
    struct http_server *server;
    atomic_llong published; /* the newest event: streams behind it get it */
    atomic_bool flood;      /* every tick, a new big event to every stream */
    atomic_int dropped;     /* sends refused with -ENOBUFS */
};

static void tick(void *user, struct http_server *s)
{
    struct fixture *f = user;
    struct http_events_cursor cursors[HTTP_EVENTS_STREAMS_MAX];
    uint32_t count = http_events_list(s, cursors, HTTP_EVENTS_STREAMS_MAX);
    if (atomic_load(&f->flood)) {
        atomic_fetch_add(&f->published, 1);
    }
    long long published = atomic_load(&f->published);
    for (uint32_t i = 0; i < count; i++) {
        if (cursors[i].position >= published) {
            continue;
        }
        size_t cap = atomic_load(&f->flood) ? TEST_FLOOD_BYTES : 64u;
        char *event = malloc(cap);
        assert_non_null(event);
        int n = snprintf(event, cap, "event: test\ndata: %lld\n\n", published);
        assert_true(n > 0);
        size_t len = (size_t)n;
        if (cap == TEST_FLOOD_BYTES) {
            memset(event, ':', cap - 1); /* a comment line of the whole size */
            event[cap - 1] = '\n';
            len = cap;
        }
        if (http_events_send(s, cursors[i].id, event, len, published) == -ENOBUFS) {
            atomic_fetch_add(&f->dropped, 1);
        }
    }
}

static enum http_result accept_request(void *user, struct http_request *req, const char *method)
{
    (void)user;
    (void)req;
    (void)method;
    return HTTP_RESULT_OK;
}

static enum http_result dispatch(void *user, struct http_request *req)
{
    (void)user;
    size_t len = 0;
    const char *target = http_request_target(req, &len);
    if (strncmp(target, "/events", 7) == 0) {
        return http_respond_events(req);
    }
    return http_respond_json(req, 200, strdup("{\"ok\":true}"), 11);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    atomic_store(&f->published, 1);
    struct http_server_config cfg = {.name = "test",
                                     .listen = "127.0.0.1:0",
                                     .threads = 1,
                                     .connections_max = 16,
                                     .connections_per_ip = 16,
                                     .idle_timeout_s = TEST_IDLE_TIMEOUT_S,
                                     .accept = accept_request,
                                     .dispatch = dispatch,
                                     .user = f,
                                     .events_streams_max = TEST_STREAMS,
                                     .events_tick = tick};
    assert_int_equal(http_server_open(&cfg, &f->server), 0);
    assert_int_equal(http_server_start(f->server), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    http_server_close(f->server);
    free(f);
    return 0;
}

static int open_stream(const struct fixture *f)
{
    int fd = test_http_dial(f->server);
    test_http_send_all(fd, "GET /events HTTP/1.1\r\nHost: t\r\n\r\n");
    return fd;
}

static void test_events_arrive_and_leave_the_worker_free(void **state)
{
    /* A stream gets the current event, then each new one; while it waits, the one worker
     * answers other requests. */
    struct fixture *f = *state;
    int fd = open_stream(f);
    char buf[8192] = "";
    size_t len = 0;
    assert_true(test_http_read_until(fd, buf, sizeof(buf), &len, "data: 1\n\n"));
    assert_non_null(strstr(buf, "HTTP/1.1 200"));
    assert_non_null(strcasestr(buf, "Content-Type: text/event-stream"));
    assert_non_null(strcasestr(buf, "Cache-Control: no-cache"));
    for (int i = 0; i < 3; i++) {
        int other = test_http_dial(f->server);
        test_http_send_all(other, "GET /json HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        char answer[1024] = "";
        size_t got = 0;
        assert_true(test_http_read_until(other, answer, sizeof(answer), &got, "{\"ok\":true}"));
        close(other);
    }
    atomic_store(&f->published, 2);
    assert_true(test_http_read_until(fd, buf, sizeof(buf), &len, "data: 2\n\n"));
    atomic_store(&f->published, 3);
    assert_true(test_http_read_until(fd, buf, sizeof(buf), &len, "data: 3\n\n"));
    assert_null(strstr(buf, "data: 4"));
    close(fd);
}

static void test_events_streams_bounded(void **state)
{
    /* TEST_STREAMS streams at once: the next is a 503 naming the bound; a closed one's place
     * is free again once the server notices (at its next event or keep-alive). */
    struct fixture *f = *state;
    int fds[TEST_STREAMS];
    for (uint32_t i = 0; i < TEST_STREAMS; i++) {
        fds[i] = open_stream(f);
        char buf[4096] = "";
        size_t len = 0;
        assert_true(test_http_read_until(fds[i], buf, sizeof(buf), &len, "data: 1\n\n"));
    }
    int extra = test_http_dial(f->server);
    test_http_send_all(extra, "GET /events HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    char buf[4096] = "";
    size_t len = 0;
    assert_true(test_http_read_until(extra, buf, sizeof(buf), &len, "}"));
    assert_non_null(strstr(buf, "HTTP/1.1 503"));
    assert_non_null(strstr(buf, "too many event streams: at most 2 at once"));
    close(extra);
    close(fds[0]);
    /* The server notices a client that went at a write: the first after the close may still be
     * taken by the kernel, the next fails. So events keep coming while the test retries. */
    bool reopened = false;
    for (int tries = 0; tries < 50 && !reopened; tries++) {
        atomic_fetch_add(&f->published, 1);
        test_sleep_ms(150);
        int fd = open_stream(f);
        char again[4096] = "";
        size_t got = 0;
        reopened = test_http_read_until(fd, again, sizeof(again), &got, "\r\n\r\n") &&
                   strstr(again, "HTTP/1.1 200") != NULL;
        close(fd);
    }
    assert_true(reopened);
    close(fds[1]);
}

/* A stream opened and answered 200 (retried for up to 10 s while the bound is reached). */
static int open_stream_retried(const struct fixture *f)
{
    for (int tries = 0; tries < 100; tries++) {
        int fd = open_stream(f);
        char buf[4096] = "";
        size_t len = 0;
        if (test_http_read_until(fd, buf, sizeof(buf), &len, "\r\n\r\n") &&
            strstr(buf, "HTTP/1.1 200") != NULL) {
            return fd;
        }
        close(fd);
        test_sleep_ms(100);
    }
    return -1;
}

static void test_events_client_not_reading_is_dropped(void **state)
{
    /* A client that reads nothing while big events keep coming: its queue fills, the next send
     * is refused and the stream ends; its connection closes at the idle timeout, and its place
     * is free again: two new streams open (the bound is two). */
    struct fixture *f = *state;
    int fd = open_stream(f);
    atomic_store(&f->flood, true);
    for (int i = 0; i < 300 && atomic_load(&f->dropped) == 0; i++) {
        test_sleep_ms(100);
    }
    assert_true(atomic_load(&f->dropped) >= 1);
    atomic_store(&f->flood, false);
    int a = open_stream_retried(f);
    assert_true(a >= 0);
    int b = open_stream_retried(f);
    assert_true(b >= 0);
    close(a);
    close(b);
    close(fd);
}

static void test_events_close_ends_open_streams(void **state)
{
    /* Closing the server with waiting (suspended) streams returns promptly and ends them. */
    struct fixture *f = *state;
    int fds[TEST_STREAMS];
    for (uint32_t i = 0; i < TEST_STREAMS; i++) {
        fds[i] = open_stream(f);
        char buf[4096] = "";
        size_t len = 0;
        assert_true(test_http_read_until(fds[i], buf, sizeof(buf), &len, "data: 1\n\n"));
    }
    struct timespec t0;
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    http_server_close(f->server);
    f->server = NULL;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_true(seconds < 2.0);
    for (uint32_t i = 0; i < TEST_STREAMS; i++) {
        char buf[4096];
        ssize_t n = 0;
        do { /* whatever was still in flight, then the end */
            n = recv(fds[i], buf, sizeof(buf), 0);
        } while (n > 0);
        assert_int_equal(n, 0);
        close(fds[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_events_arrive_and_leave_the_worker_free, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_events_streams_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_events_client_not_reading_is_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_events_close_ends_open_streams, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
