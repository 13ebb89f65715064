/*
 * The HTTP client of `count --server`, `orders --server` and the load test, on libcurl (Debian's
 * libcurl4-openssl-dev), plus the extraction of the service's {"error": ...} message with
 * jansson. Rejected: a hand-written HTTP/1.1 client (chunked encoding, redirects, proxies and
 * TLS would all be ours to get right).
 */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"

struct body_sink {
    char *data;
    size_t len;
    bool too_large;
};

static size_t collect(char *chunk, size_t size, size_t count, void *user)
{
    struct body_sink *sink = user;
    size_t n = size * count;
    if (sink->len + n > HTTP_CLIENT_BODY_BYTES_MAX) {
        sink->too_large = true;
        return 0; /* makes curl stop with CURLE_WRITE_ERROR */
    }
    char *grown = realloc(sink->data, sink->len + n + 1);
    if (grown == NULL) {
        return 0;
    }
    memcpy(grown + sink->len, chunk, n);
    sink->data = grown;
    sink->len += n;
    sink->data[sink->len] = '\0';
    return n;
}

/* A non-200 answer: take the service's message, or say what came instead. */
static void error_from_body(struct http_client_answer *ans)
{
    json_error_t err;
    json_t *doc = json_loadb(ans->body, ans->body_len, 0, &err);
    const char *message = json_string_value(json_object_get(doc, "error"));
    snprintf(ans->error, sizeof(ans->error), "%s",
             message != NULL ? message : "an answer without a JSON error message");
    json_decref(doc);
}

static int perform(CURL *curl, const char *url, struct curl_slist *headers, struct body_sink *sink,
                   struct http_client_answer *ans)
{
    char curl_error[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, sink);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_error);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode rc = curl_easy_perform(curl);
    if (rc != CURLE_OK) {
        snprintf(ans->error, sizeof(ans->error), "%s",
                 sink->too_large ? "answer too large"
                                 : (curl_error[0] != '\0' ? curl_error : curl_easy_strerror(rc)));
        return -EIO;
    }
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &ans->status);
    return 0;
}

struct http_client_conn {
    CURL *curl;
    struct curl_slist *headers;
    char base[2048];
};

int http_client_conn_open(const char *base_url, const char *token, struct http_client_conn **out)
{
    size_t base_len = strlen(base_url);
    while (base_len > 0 && base_url[base_len - 1] == '/') {
        base_len--;
    }
    struct http_client_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return -ENOMEM;
    }
    char auth[512];
    if (base_len >= sizeof(c->base) ||
        (token != NULL &&
         (size_t)snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token) >= sizeof(auth))) {
        free(c);
        return -DS_EUSAGE;
    }
    memcpy(c->base, base_url, base_len);
    c->base[base_len] = '\0';
    c->curl = curl_easy_init();
    c->headers = token != NULL ? curl_slist_append(NULL, auth) : NULL;
    if (c->curl == NULL || (token != NULL && c->headers == NULL)) {
        http_client_conn_close(c);
        return -ENOMEM;
    }
    *out = c;
    return 0;
}

int http_client_conn_get(struct http_client_conn *c, const char *path,
                         struct http_client_answer *ans)
{
    memset(ans, 0, sizeof(*ans));
    char url[4096];
    int n = snprintf(url, sizeof(url), "%s%s", c->base, path);
    if (n < 0 || (size_t)n >= sizeof(url)) {
        snprintf(ans->error, sizeof(ans->error), "URL too long");
        return -DS_EUSAGE;
    }
    struct body_sink sink = {0};
    int rc = perform(c->curl, url, c->headers, &sink, ans);
    ans->body = sink.data != NULL ? sink.data : calloc(1, 1);
    ans->body_len = sink.len;
    if (rc == 0 && ans->body == NULL) {
        snprintf(ans->error, sizeof(ans->error), "out of memory");
        rc = -ENOMEM;
    }
    if (rc == 0 && ans->status != 200) {
        error_from_body(ans);
    }
    return rc;
}

void http_client_conn_close(struct http_client_conn *c)
{
    if (c == NULL) {
        return;
    }
    curl_slist_free_all(c->headers);
    if (c->curl != NULL) {
        curl_easy_cleanup(c->curl);
    }
    free(c);
}

int http_client_get(const char *base_url, const char *path, const char *token,
                    struct http_client_answer *ans)
{
    memset(ans, 0, sizeof(*ans));
    struct http_client_conn *c = NULL;
    int rc = http_client_conn_open(base_url, token, &c);
    if (rc != 0) {
        snprintf(ans->error, sizeof(ans->error), "%s",
                 rc == -ENOMEM ? "out of memory" : "URL or token too long");
        return rc;
    }
    rc = http_client_conn_get(c, path, ans);
    http_client_conn_close(c);
    return rc;
}

void http_client_answer_deinit(struct http_client_answer *ans)
{
    free(ans->body);
    ans->body = NULL;
    ans->body_len = 0;
}

void http_client_url_escape(const char *src, char *dst, size_t dst_capacity)
{
    static const char hex[] = "0123456789ABCDEF";
    ASSERT(dst_capacity > 0);
    size_t n = 0;
    for (const char *p = src; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;
        bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '-' || c == '.' || c == '_' || c == '~';
        size_t need = plain ? 1 : 3;
        if (n + need >= dst_capacity) {
            break;
        }
        if (plain) {
            dst[n++] = (char)c;
        } else {
            dst[n++] = '%';
            dst[n++] = hex[c >> 4];
            dst[n++] = hex[c & 15];
        }
    }
    dst[n] = '\0';
}
