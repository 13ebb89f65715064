/*
 * Test helpers: a plain-socket HTTP client for unit tests that start an http/ server on
 * loopback and check the bytes on the wire (test_server.c, test_events.c).
 *
 * Single-threaded test code; each call asserts with cmocka, so a refused connection or a send
 * error fails the test where it happened. Every socket has a receive timeout
 * (TEST_HTTP_RECV_TIMEOUT_S): a server that stops answering fails the test, it never hangs it.
 */
#ifndef DS_TEST_HTTP_CLIENT_H
#define DS_TEST_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include "http/http.h"

/* How long a read waits for the next bytes before the test gives up on the server. */
#define TEST_HTTP_RECV_TIMEOUT_S 10
/* The largest whole response test_http_exchange reads (the tests' answers are a few kB). */
#define TEST_HTTP_RESPONSE_BYTES_MAX 65536u

/* A connected socket to s's address on 127.0.0.1 (the port of http_server_address). The
 * caller closes it. */
int test_http_dial(const struct http_server *s);

/* Sends all of text on fd. */
void test_http_send_all(int fd, const char *text);

/* Reads from fd into buf (capacity bytes, NUL-terminated, *len bytes already there) until buf
 * holds want, the peer closes, the buffer is full or a read times out. Returns whether want
 * arrived. */
bool test_http_read_until(int fd, char *buf, size_t capacity, size_t *len, const char *want);

/* Sends request (which should say Connection: close) on a new connection and reads the whole
 * response until the server closes. Returns a new NUL-terminated buffer; the caller frees it. */
char *test_http_exchange(const struct http_server *s, const char *request);

/* Sleeps ms milliseconds: the step of a test's wait for a state, never the wait itself. */
void test_sleep_ms(long ms);

#endif /* DS_TEST_HTTP_CLIENT_H */
