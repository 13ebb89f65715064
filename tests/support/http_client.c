/*
 * The plain-socket HTTP client of the http/ unit tests (http_client.h). The tests check the
 * bytes the server writes (status lines, headers, chunking, event streams), so the client sends
 * and reads raw text and parses nothing.
 *
 * Rejected: libcurl (http/'s own client): it parses and hides exactly the framing these tests
 * check, and its own timeouts and retries would blur what the server did.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/http_client.h"

int test_http_dial(const struct http_server *s)
{
    const char *address = http_server_address(s);
    const char *colon = strrchr(address, ':');
    assert_non_null(colon);
    int port = atoi(colon + 1);
    assert_true(port > 0 && port <= 65535);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct timeval timeout = {.tv_sec = TEST_HTTP_RECV_TIMEOUT_S};
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)), 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

void test_http_send_all(int fd, const char *text)
{
    size_t len = strlen(text);
    while (len > 0) {
        ssize_t n = send(fd, text, len, MSG_NOSIGNAL);
        assert_true(n > 0);
        text += n;
        len -= (size_t)n;
    }
}

bool test_http_read_until(int fd, char *buf, size_t capacity, size_t *len, const char *want)
{
    assert_true(*len < capacity);
    buf[*len] = '\0';
    while (strstr(buf, want) == NULL) {
        if (*len + 1 >= capacity) {
            return false;
        }
        ssize_t n = recv(fd, buf + *len, capacity - 1 - *len, 0);
        if (n <= 0) {
            return false;
        }
        *len += (size_t)n;
        buf[*len] = '\0';
    }
    return true;
}

char *test_http_exchange(const struct http_server *s, const char *request)
{
    int fd = test_http_dial(s);
    test_http_send_all(fd, request);
    char *buf = malloc(TEST_HTTP_RESPONSE_BYTES_MAX + 1);
    assert_non_null(buf);
    size_t len = 0;
    for (;;) { /* until the server closes; bounded by the buffer and the receive timeout */
        ssize_t n = recv(fd, buf + len, TEST_HTTP_RESPONSE_BYTES_MAX - len, 0);
        assert_true(n >= 0);
        if (n == 0) {
            break;
        }
        len += (size_t)n;
        assert_true(len < TEST_HTTP_RESPONSE_BYTES_MAX);
    }
    close(fd);
    buf[len] = '\0';
    return buf;
}

void test_sleep_ms(long ms)
{
    assert_true(ms >= 0);
    struct timespec step = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    nanosleep(&step, NULL);
}
