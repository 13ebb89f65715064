/*
 * The router's upstream client: parallel GETs to the members of a node group over libcurl's
 * multi interface, one struct router_client per router worker thread.
 *
 * Each client keeps a multi handle and one easy handle per node, created on first use and
 * reused for every later request to that node: libcurl keeps the connection in the multi
 * handle's cache, so a request after the first costs no TCP handshake (keep-alive), and with
 * TCP_NODELAY a small GET leaves at once. All calls of one fan-out are added to the multi
 * handle together and driven by curl_multi_poll until each finished; the slowest member
 * bounds the fan-out, not their sum. A call fails on a refused or timed-out connection, on its
 * per-request timeout, or on an answer larger than ROUTER_ANSWER_BYTES_MAX; the HTTP status of
 * an answer is the caller's to judge. A call still waiting can also be abandoned: after every
 * wake-up (a transfer's progress, router_client_wakeup from another thread, or 100 ms) the
 * caller's abandon function is asked about each waiting call, so a request stuck on a node that
 * another request just found hung fails over at once instead of waiting out its own timeout.
 *
 * Rejected: libmicrohttpd has no client side, and a hand-written HTTP/1.1 client would have to
 * get chunked bodies, keep-alive and timeouts right again; one easy handle per request (a new
 * connection each time: a handshake per node per request, on the latency path).
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/router_private.h"

struct router_client {
    CURLM *multi;
    uint32_t connect_timeout_ms;
    CURL *easy[ROUTER_NODES_TOTAL_MAX];
};

int router_fanout_init(void)
{
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -ENOMEM;
}

void router_fanout_deinit(void)
{
    curl_global_cleanup();
}

int router_client_create(uint32_t connect_timeout_ms, struct router_client **out)
{
    ASSERT(connect_timeout_ms > 0);
    struct router_client *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return -ENOMEM;
    }
    c->multi = curl_multi_init();
    if (c->multi == NULL) {
        free(c);
        return -ENOMEM;
    }
    c->connect_timeout_ms = connect_timeout_ms;
    *out = c;
    return 0;
}

void router_client_destroy(struct router_client *c)
{
    if (c == NULL) {
        return;
    }
    for (uint32_t i = 0; i < ROUTER_NODES_TOTAL_MAX; i++) {
        if (c->easy[i] != NULL) {
            curl_easy_cleanup(c->easy[i]);
        }
    }
    curl_multi_cleanup(c->multi);
    free(c);
}

void router_call_release(struct router_call *call)
{
    free(call->body);
    call->body = NULL;
    call->len = 0;
    call->capacity = 0;
}

/* libcurl's write callback: appends to the call's body, doubling it up to the answer limit.
 * Returning less than given makes libcurl fail the transfer (CURLE_WRITE_ERROR). */
static size_t call_write(char *data, size_t size, size_t nmemb, void *user)
{
    struct router_call *call = user;
    size_t n = size * nmemb;
    if (call->len + n + 1 > ROUTER_ANSWER_BYTES_MAX) {
        call->error = -EMSGSIZE;
        return 0;
    }
    if (call->len + n + 1 > call->capacity) {
        size_t cap = call->capacity > 0 ? call->capacity : 4096u;
        while (cap < call->len + n + 1) {
            cap *= 2;
        }
        char *body = realloc(call->body, cap);
        if (body == NULL) {
            call->error = -ENOMEM;
            return 0;
        }
        call->body = body;
        call->capacity = cap;
    }
    memcpy(call->body + call->len, data, n);
    call->len += n;
    call->body[call->len] = '\0';
    return n;
}

static CURL *client_easy(struct router_client *c, uint32_t node)
{
    ASSERT(node < ROUTER_NODES_TOTAL_MAX);
    if (c->easy[node] == NULL) {
        CURL *e = curl_easy_init();
        if (e == NULL) {
            return NULL;
        }
        curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)c->connect_timeout_ms);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, call_write);
        curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http");
        curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
        c->easy[node] = e;
    }
    return c->easy[node];
}

/* The failure of a finished transfer as a negated errno, with libcurl's words. */
static void call_failed(struct router_call *call, CURLcode code)
{
    if (call->error == 0) {
        call->error = code == CURLE_COULDNT_CONNECT      ? -ECONNREFUSED
                      : code == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT
                                                         : -EIO;
    }
    snprintf(call->error_text, sizeof(call->error_text), "%s",
             call->error == -EMSGSIZE ? "answer larger than the router reads"
                                      : curl_easy_strerror(code));
    call->status = 0;
}

/* Adds the calls to the multi handle; a call whose handle cannot be made fails at once. */
static uint32_t calls_add(struct router_client *c, struct router_call *calls, uint32_t count,
                          uint32_t timeout_ms, struct curl_slist *headers)
{
    uint32_t added = 0;
    for (uint32_t i = 0; i < count; i++) {
        struct router_call *call = &calls[i];
        call->status = 0;
        call->error = 0;
        call->error_text[0] = '\0';
        call->len = 0;
        if (call->body != NULL) {
            call->body[0] = '\0';
        }
        call->latency_ns = ds_clock_ns();
        call->running = false;
        CURL *e = client_easy(c, call->node);
        if (e == NULL) {
            call->error = -ENOMEM;
            snprintf(call->error_text, sizeof(call->error_text), "out of memory");
            continue;
        }
        curl_easy_setopt(e, CURLOPT_URL, call->url);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, call);
        curl_easy_setopt(e, CURLOPT_PRIVATE, call);
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
        if (curl_multi_add_handle(c->multi, e) != CURLM_OK) {
            call->error = -EIO;
            snprintf(call->error_text, sizeof(call->error_text), "curl_multi_add_handle failed");
            continue;
        }
        call->running = true;
        added++;
    }
    return added;
}

/* Reads the finished transfers' results; returns how many finished. */
static uint32_t calls_collect(struct router_client *c)
{
    uint32_t finished = 0;
    int left = 0;
    CURLMsg *msg = NULL;
    while ((msg = curl_multi_info_read(c->multi, &left)) != NULL) { /* one per transfer */
        if (msg->msg != CURLMSG_DONE) {
            continue;
        }
        struct router_call *call = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&call);
        ASSERT(call != NULL);
        call->latency_ns = ds_clock_ns() - call->latency_ns;
        if (msg->data.result == CURLE_OK) {
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &call->status);
        } else {
            call_failed(call, msg->data.result);
        }
        curl_multi_remove_handle(c->multi, msg->easy_handle);
        call->running = false;
        finished++;
    }
    return finished;
}

/* Gives up the waiting calls abandon names (their connection is closed with them); returns
 * how many. */
static uint32_t calls_abandon(struct router_client *c, struct router_call *calls, uint32_t count,
                              router_abandon_fn abandon, void *user)
{
    uint32_t abandoned = 0;
    for (uint32_t i = 0; i < count; i++) {
        struct router_call *call = &calls[i];
        if (!call->running || !abandon(call, user)) {
            continue;
        }
        ASSERT(curl_multi_remove_handle(c->multi, c->easy[call->node]) == CURLM_OK);
        call->running = false;
        call->latency_ns = ds_clock_ns() - call->latency_ns;
        call->error = -ECANCELED;
        call->status = 0;
        snprintf(call->error_text, sizeof(call->error_text),
                 "abandoned: the node stopped answering another call");
        abandoned++;
    }
    return abandoned;
}

void router_client_wakeup(struct router_client *c)
{
    (void)curl_multi_wakeup(c->multi); /* only fails on a bad handle; the poll ends in 100 ms */
}

void router_client_run(struct router_client *c, struct router_call *calls, uint32_t count,
                       uint32_t timeout_ms, const char *authorization, router_abandon_fn abandon,
                       void *abandon_user)
{
    ASSERT(count <= ROUTER_NODES_TOTAL_MAX);
    ASSERT(timeout_ms > 0);
    struct curl_slist *headers = NULL;
    char line[HTTP_HEADERS_BYTES_MAX + 32];
    if (authorization != NULL) {
        snprintf(line, sizeof(line), "Authorization: %s", authorization);
        headers = curl_slist_append(NULL, line);
    }
    uint32_t pending = calls_add(c, calls, count, timeout_ms, headers);
    /* Every transfer ends by its own timeout at the latest, so this loop ends too. */
    while (pending > 0) {
        int running = 0;
        CURLMcode mc = curl_multi_perform(c->multi, &running);
        if (mc == CURLM_OK) {
            pending -= calls_collect(c);
        }
        if (pending > 0 && abandon != NULL) {
            pending -= calls_abandon(c, calls, count, abandon, abandon_user);
        }
        if (pending > 0 && mc == CURLM_OK) {
            mc = curl_multi_poll(c->multi, NULL, 0, 100, NULL);
        }
        ASSERT(mc == CURLM_OK); /* only a broken handle or out of memory: not recoverable */
    }
    for (uint32_t i = 0; i < count; i++) {
        if (calls[i].body == NULL && calls[i].error == 0) {
            calls[i].body = strdup(""); /* an empty answer reads as "" */
            calls[i].error = calls[i].body == NULL ? -ENOMEM : 0;
        }
    }
    curl_slist_free_all(headers);
}
