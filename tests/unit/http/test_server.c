/*
 * Unit tests of http/server.c, the HTTP server core: a real daemon on loopback, spoken to over
 * a plain socket so that the bytes on the wire are what is checked. Covers the limits every
 * server shares (414), the errors ({"error": ...}, Allow on a 405, WWW-Authenticate on a 401),
 * the answer counters, the bearer check, and streams: several pieces delivered in order and an end
 * when the producer ends, and an end (the done callback) when the client goes mid-stream. And the
 * console's token plumbing: the cookie accepted wherever the bearer is, the login (303 with the
 * cookie, none for a wrong token), the page headers of a static answer, the cookie parser and the
 * redaction of tokens in logged text.
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
#include <unistd.h>

#include "http/http.h"
#include "tests/support/http_client.h"

#define TEST_PIECES 5

struct fixture {
    struct http_server *server;
    atomic_int done;     /* stream done callbacks */
    atomic_int produced; /* producer calls */
};

/* A stream's state: the pieces left, or -1 for one that never ends. */
struct stream_state {
    struct fixture *f;
    int left;
    int next;
};

static int64_t produce(void *user, char *dst, size_t capacity)
{
    struct stream_state *st = user;
    atomic_fetch_add(&st->f->produced, 1);
    if (st->left == 0) {
        return HTTP_STREAM_END;
    }
    if (st->left > 0) {
        st->left--;
    }
    int n = snprintf(dst, capacity, "data: piece %d\n\n", st->next++);
    assert_true(n > 0 && (size_t)n < capacity);
    if (st->left < 0) { /* a never-ending stream fills each block, so the client is flooded */
        memset(dst + n, ':', capacity - (size_t)n);
        return (int64_t)capacity;
    }
    return n;
}

static void stream_done(void *user)
{
    struct stream_state *st = user;
    atomic_fetch_add(&st->f->done, 1);
    free(st);
}

static enum http_result accept_request(void *user, struct http_request *req, const char *method)
{
    (void)user;
    size_t len = 0;
    const char *target = http_request_target(req, &len);
    if (strcmp(method, "GET") != 0) {
        return http_respond_error(req, 405, "use GET");
    }
    if (len >= 8 && memcmp(target, "/private", 8) == 0 && !http_request_authorized(req)) {
        return http_respond_error(req, 401, "missing or wrong bearer token");
    }
    if (len >= 5 && memcmp(target, "/deny", 5) == 0) {
        http_request_tag(req, 1);
        return http_respond_error(req, 403, "denied \"here\"");
    }
    return HTTP_RESULT_OK;
}

static enum http_result dispatch(void *user, struct http_request *req)
{
    struct fixture *f = user;
    size_t len = 0;
    const char *target = http_request_target(req, &len);
    if (strncmp(target, "/login?t=", 9) == 0) {
        if (http_request_token_is(req, target + 9, len - 9)) {
            return http_respond_login(req, "/");
        }
        return http_respond_error(req, 401, "wrong token");
    }
    if (strcmp(target, "/page") == 0) {
        static const char page[] = "<!doctype html><p>hi</p>";
        return http_respond_static(req, 200, page, sizeof(page) - 1, "text/html; charset=utf-8");
    }
    bool forever = strncmp(target, "/forever", 8) == 0;
    if (forever || strncmp(target, "/stream", 7) == 0) {
        struct stream_state *st = malloc(sizeof(*st));
        assert_non_null(st);
        *st = (struct stream_state){.f = f, .left = forever ? -1 : TEST_PIECES};
        return http_respond_stream(req, 200, "text/event-stream", produce, stream_done, st);
    }
    return http_respond_json(req, 200, strdup("{\"ok\":true}"), 11);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    struct http_server_config cfg = {.name = "test",
                                     .listen = "127.0.0.1:0",
                                     .threads = 2,
                                     .connections_max = 16,
                                     .connections_per_ip = 16,
                                     .idle_timeout_s = 10,
                                     .token = "secret",
                                     .flags = HTTP_SERVER_CHALLENGE,
                                     .accept = accept_request,
                                     .dispatch = dispatch,
                                     .user = f};
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

/* Waits up to 10 s for the done count to reach want. */
static bool done_reaches(struct fixture *f, int want)
{
    for (int i = 0; i < 1000; i++) {
        if (atomic_load(&f->done) >= want) {
            return true;
        }
        test_sleep_ms(10);
    }
    return false;
}

static void test_server_stream_delivers_pieces_and_ends(void **state)
{
    /* A finite stream arrives chunked, every piece in order, and ends with the producer. */
    struct fixture *f = *state;
    char *resp = test_http_exchange(f->server,
                                    "GET /stream HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(resp, "HTTP/1.1 200"));
    assert_non_null(strcasestr(resp, "Transfer-Encoding: chunked"));
    assert_non_null(strcasestr(resp, "Content-Type: text/event-stream"));
    const char *at = resp;
    for (int i = 0; i < TEST_PIECES; i++) {
        char piece[32];
        snprintf(piece, sizeof(piece), "data: piece %d\n\n", i);
        const char *found = strstr(at, piece);
        assert_non_null(found);
        at = found + strlen(piece);
    }
    assert_non_null(strstr(at, "\r\n0\r\n")); /* the last chunk: the stream ended */
    free(resp);
    assert_true(done_reaches(f, 1));
    assert_int_equal(atomic_load(&f->produced), TEST_PIECES + 1);
}

static void test_server_stream_ends_when_client_goes(void **state)
{
    /* A never-ending stream is cut when its client closes: done runs, the producer stops. */
    struct fixture *f = *state;
    int fd = test_http_dial(f->server);
    test_http_send_all(fd, "GET /forever HTTP/1.1\r\nHost: t\r\n\r\n");
    char buf[8192];
    size_t got = 0;
    /* Several pieces arrive. Counted where they are produced: libmicrohttpd may hand the
     * producer more than HTTP_STREAM_BLOCK_BYTES at a time, so bytes received say nothing of how
     * many calls made them. */
    while (atomic_load(&f->produced) < 3) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        assert_true(n > 0);
        got += (size_t)n;
        assert_true(got < 64u * 1024 * 1024); /* bounded: a stalled producer fails, not hangs */
    }
    close(fd);
    assert_true(done_reaches(f, 1));
    int produced = atomic_load(&f->produced);
    assert_true(produced >= 3);
    test_sleep_ms(100);
    assert_int_equal(atomic_load(&f->produced), produced);
}

static void test_server_errors_json_with_headers(void **state)
{
    /* Errors are {"error": ...} JSON; a 405 says Allow, a 401 challenges; answers are counted
     * by tag and class. */
    struct fixture *f = *state;
    char *resp =
        test_http_exchange(f->server, "GET /deny HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(resp, "HTTP/1.1 403"));
    assert_non_null(strstr(resp, "{\"error\":\"denied \\\"here\\\"\"}"));
    free(resp);
    resp =
        test_http_exchange(f->server, "POST /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(resp, "HTTP/1.1 405"));
    assert_non_null(strcasestr(resp, "Allow: GET, HEAD"));
    free(resp);
    resp = test_http_exchange(f->server,
                              "GET /private HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(resp, "HTTP/1.1 401"));
    assert_non_null(strcasestr(resp, "WWW-Authenticate: Bearer"));
    free(resp);
    resp = test_http_exchange(f->server,
                              "GET /private HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer secret\r\n"
                              "Connection: close\r\n\r\n");
    assert_non_null(strstr(resp, "HTTP/1.1 200"));
    assert_non_null(strstr(resp, "{\"ok\":true}"));
    free(resp);
    assert_int_equal(http_server_answers(f->server, 1, HTTP_CLASS_4XX), 1);
    assert_int_equal(http_server_answers(f->server, HTTP_TAG_ANY, HTTP_CLASS_4XX), 3);
    assert_int_equal(http_server_answers(f->server, HTTP_TAG_ANY, HTTP_CLASS_2XX), 1);
}

static void test_server_target_too_long(void **state)
{
    /* A target over HTTP_URI_BYTES_MAX is our JSON 414, before the server's own check. */
    struct fixture *f = *state;
    size_t cap = HTTP_URI_BYTES_MAX + 256;
    char *request = malloc(cap);
    assert_non_null(request);
    int n = snprintf(request, cap, "GET /");
    memset(request + n, 'a', HTTP_URI_BYTES_MAX);
    snprintf(request + n + HTTP_URI_BYTES_MAX, cap - (size_t)n - HTTP_URI_BYTES_MAX,
             " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    char *resp = test_http_exchange(f->server, request);
    assert_non_null(strstr(resp, "HTTP/1.1 414"));
    assert_non_null(strstr(resp, "{\"error\":\"request target longer than 2048 bytes\"}"));
    free(resp);
    free(request);
}

static void test_server_bearer_ok_exact_token_only(void **state)
{
    /* Only "Bearer " and the exact token pass: not a prefix, not a longer value, not none. */
    (void)state;
    assert_true(http_bearer_ok("Bearer secret", "secret", 6));
    assert_false(http_bearer_ok("Bearer secre", "secret", 6));
    assert_false(http_bearer_ok("Bearer secrets", "secret", 6));
    assert_false(http_bearer_ok("Basic secret", "secret", 6));
    assert_false(http_bearer_ok("Bearer ", "secret", 6));
    assert_false(http_bearer_ok(NULL, "secret", 6));
}

static void test_server_cookie_authorizes_like_the_bearer(void **state)
{
    /* The cookie dayshard_token=<token> passes where the bearer does, among other cookies; a
     * wrong value or a look-alike name does not. */
    struct fixture *f = *state;
    static const char *const good[] = {"dayshard_token=secret", "a=1; dayshard_token=secret; b=2",
                                       "dayshard_token=\"secret\""};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        char request[256];
        snprintf(request, sizeof(request),
                 "GET /private HTTP/1.1\r\nHost: t\r\nCookie: %s\r\nConnection: close\r\n\r\n",
                 good[i]);
        char *resp = test_http_exchange(f->server, request);
        assert_non_null(strstr(resp, "HTTP/1.1 200"));
        free(resp);
    }
    static const char *const bad[] = {"dayshard_token=secre", "xdayshard_token=secret",
                                      "dayshard_token=secrets", "token=secret"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char request[256];
        snprintf(request, sizeof(request),
                 "GET /private HTTP/1.1\r\nHost: t\r\nCookie: %s\r\nConnection: close\r\n\r\n",
                 bad[i]);
        char *resp = test_http_exchange(f->server, request);
        assert_non_null(strstr(resp, "HTTP/1.1 401"));
        free(resp);
    }
}

static void test_server_login_sets_cookie_for_the_right_token_only(void **state)
{
    /* The right token: 303 to / with the HttpOnly, SameSite=Strict cookie. A wrong one (a
     * prefix, a longer value): 401 and no cookie at all. */
    struct fixture *f = *state;
    char *resp = test_http_exchange(
        f->server, "GET /login?t=secret HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(resp, "HTTP/1.1 303"));
    assert_non_null(strcasestr(resp, "\r\nLocation: /\r\n"));
    assert_non_null(strcasestr(
        resp, "\r\nSet-Cookie: dayshard_token=secret; HttpOnly; SameSite=Strict; Path=/\r\n"));
    free(resp);
    static const char *const wrong[] = {"secre", "secrets", "SECRET"};
    for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
        char request[128];
        snprintf(request, sizeof(request),
                 "GET /login?t=%s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", wrong[i]);
        resp = test_http_exchange(f->server, request);
        assert_non_null(strstr(resp, "HTTP/1.1 401"));
        assert_null(strcasestr(resp, "Set-Cookie"));
        free(resp);
    }
}

static void test_server_static_answer_carries_page_headers(void **state)
{
    /* A compiled-in page comes with the policy that confines it to this server. */
    struct fixture *f = *state;
    char *resp =
        test_http_exchange(f->server, "GET /page HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(resp, "HTTP/1.1 200"));
    assert_non_null(strcasestr(resp, "Content-Type: text/html; charset=utf-8"));
    assert_non_null(strcasestr(resp, "Content-Security-Policy: default-src 'self'"));
    assert_non_null(strcasestr(resp, "X-Content-Type-Options: nosniff"));
    assert_non_null(strstr(resp, "<!doctype html><p>hi</p>"));
    free(resp);
}

static void test_server_cookie_ok_parses_pairs(void **state)
{
    /* Pairs split at ';' with optional blanks; the name compared exactly; one pair of quotes
     * taken off; any one of several dayshard_token cookies may match; none, or empty, fails. */
    (void)state;
    assert_true(http_cookie_ok("dayshard_token=secret", "secret", 6));
    assert_true(http_cookie_ok("a=1;dayshard_token=secret", "secret", 6));
    assert_true(http_cookie_ok(" a=1 ;\tdayshard_token=secret\t; b=\"x;\"", "secret", 6));
    assert_true(http_cookie_ok("dayshard_token=old; dayshard_token=secret", "secret", 6));
    assert_true(http_cookie_ok("dayshard_token=\"secret\"", "secret", 6));
    assert_false(http_cookie_ok("dayshard_token=\"secret", "secret", 6));
    assert_false(http_cookie_ok("dayshard_token=", "secret", 6));
    assert_false(http_cookie_ok("dayshard_token", "secret", 6));
    assert_false(http_cookie_ok("Dayshard_token=secret", "secret", 6));
    assert_false(http_cookie_ok("dayshard_tokens=secret", "secret", 6));
    assert_false(http_cookie_ok("a=dayshard_token=secret", "secret", 6));
    assert_false(http_cookie_ok("", "secret", 6));
    assert_false(http_cookie_ok(NULL, "secret", 6));
    assert_true(http_token_cookie_safe("abc-_.~+/=", 10));
    assert_false(http_token_cookie_safe("a b", 3));
    assert_false(http_token_cookie_safe("a;b", 3));
    assert_false(http_token_cookie_safe("", 0));
}

/* http_redact_tokens into a buffer of cap bytes, as a string. */
static const char *redacted(const char *text, char *dst, size_t cap)
{
    size_t n = http_redact_tokens(text, strlen(text), dst, cap);
    assert_true(n < cap);
    assert_int_equal(strlen(dst), n);
    return dst;
}

static void test_server_redact_tokens_hides_every_value(void **state)
{
    /* Every token= value (any case, anywhere: a target or a log line quoting one) is replaced;
     * nothing else changes; a small buffer cuts the text, never leaks the token's bytes. */
    (void)state;
    char out[256];
    assert_string_equal(redacted("/?token=secret", out, sizeof(out)), "/?token=REDACTED");
    assert_string_equal(redacted("/v1/x?a=1&token=s3cr%20t&b=2", out, sizeof(out)),
                        "/v1/x?a=1&token=REDACTED&b=2");
    assert_string_equal(redacted("GET \"/?TOKEN=abc\" failed; Token=def end", out, sizeof(out)),
                        "GET \"/?TOKEN=REDACTED\" failed; Token=REDACTED end");
    assert_string_equal(redacted("/?token=&x=1", out, sizeof(out)), "/?token=&x=1");
    assert_string_equal(redacted("/v1/count?day=2026-01-21", out, sizeof(out)),
                        "/v1/count?day=2026-01-21");
    assert_string_equal(redacted("/?token=secret#frag", out, sizeof(out)), "/?token=REDACTED#frag");
    assert_string_equal(redacted("/?token=secret", out, 12), "/?token=RED");
    assert_string_equal(redacted("/?tok", out, 4), "/?t");
    assert_string_equal(redacted("", out, 1), "");
    for (size_t cap = 1; cap < 24; cap++) { /* no cut ever shows a byte of the token */
        assert_null(strstr(redacted("x token=secret y", out, cap), "sec"));
    }
}

static void test_server_listen_refuses_ports_past_16_bits(void **state)
{
    /* A port is 0..65535 in decimal: 99999 is refused, not bound as 34463 (99999 - 65536), and
     * signs, letters and six digits are refused too; port 0 binds a free port. */
    (void)state;
    const char *bad[] = {"127.0.0.1:99999", "127.0.0.1:65536",  "127.0.0.1:-1", "127.0.0.1:+80",
                         "127.0.0.1:80a",   "127.0.0.1:000080", "127.0.0.1:"};
    char address[300];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int fd = -1;
        assert_int_equal(http_listen(bad[i], &fd, address, sizeof(address)), -DS_EUSAGE);
        assert_int_equal(fd, -1);
    }
    int fd = -1;
    assert_int_equal(http_listen("127.0.0.1:0", &fd, address, sizeof(address)), 0);
    assert_true(fd >= 0);
    assert_true(strncmp(address, "127.0.0.1:", 10) == 0 && strcmp(address, "127.0.0.1:0") != 0);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_server_stream_delivers_pieces_and_ends, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_server_stream_ends_when_client_goes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_errors_json_with_headers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_target_too_long, setup, teardown),
        cmocka_unit_test(test_server_bearer_ok_exact_token_only),
        cmocka_unit_test_setup_teardown(test_server_cookie_authorizes_like_the_bearer, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_server_login_sets_cookie_for_the_right_token_only,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_static_answer_carries_page_headers, setup,
                                        teardown),
        cmocka_unit_test(test_server_cookie_ok_parses_pairs),
        cmocka_unit_test(test_server_redact_tokens_hides_every_value),
        cmocka_unit_test(test_server_listen_refuses_ports_past_16_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
