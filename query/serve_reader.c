/*
 * The query service's storage readers (http_private.h): one read-only storage handle and shard
 * map per worker, each behind a mutex, refreshed on every request; and the pieces of an answer
 * every endpoint read from a reader shares (a storage error, as_of and extra fields appended to
 * a rendered document).
 *
 * Freshness is per request (http.c's head comment says why): a stat(2) of the manifest when
 * nothing changed, a re-read of its tail and a reload of the shard map after a commit.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/serve_private.h"

/* ---- readers ------------------------------------------------------------------------------- */

static void render_as_of(struct serve_reader *r)
{
    size_t n = 0;
    r->as_of[n++] = '{';
    for (int32_t p = DS_SOURCE_FILE; p < (int32_t)STORAGE_SOURCES_MAX - 2; p++) {
        int64_t next = storage_source_next(r->st, p);
        if (next < 0) {
            continue;
        }
        char key[16];
        if (p == DS_SOURCE_FILE) {
            snprintf(key, sizeof(key), "file");
        } else {
            snprintf(key, sizeof(key), "%" PRId32, p);
        }
        int w = snprintf(r->as_of + n, SERVE_AS_OF_BYTES_MAX - n, "%s\"%s\":%" PRId64,
                         n > 1 ? "," : "", key, next);
        ASSERT(w > 0 && (size_t)w < SERVE_AS_OF_BYTES_MAX - n);
        n += (size_t)w;
    }
    r->as_of[n++] = '}';
    r->as_of[n] = '\0';
    r->as_of_len = n;
}

/* Brings a reader up to the last commit. Called with r->lock held. */
static int reader_refresh(struct serve_reader *r)
{
    int rc = storage_refresh(r->st);
    if (rc != 0) {
        ds_log_error("serve: refreshing the storage view: %s", ds_strerror(rc));
        return rc;
    }
    uint64_t seq = storage_commit_seq(r->st);
    if (seq == r->seq && r->as_of_len > 0) {
        return 0;
    }
    rc = shard_map_reload(r->map);
    if (rc != 0) {
        ds_log_error("serve: reloading the shard map: %s", ds_strerror(rc));
        return rc;
    }
    r->seq = seq;
    render_as_of(r);
    return 0;
}

int serve_reader_open(struct serve_reader *r, const char *dir)
{
    r->as_of = malloc(SERVE_AS_OF_BYTES_MAX);
    r->order_scratch = malloc(STORAGE_ORDER_SCRATCH_BYTES);
    if (r->as_of == NULL || r->order_scratch == NULL) {
        return -ENOMEM;
    }
    int rc = storage_open_reader(dir, &r->st);
    if (rc == 0) {
        rc = shard_map_open(dir, SHARD_COUNT_DEFAULT, SHARD_MAP_READ_ONLY, &r->map);
    }
    if (rc == 0) {
        rc = reader_refresh(r);
    }
    return rc;
}

void serve_reader_close(struct serve_reader *r)
{
    shard_map_close(r->map);
    storage_close(r->st);
    free(r->as_of);
    free(r->order_scratch);
    r->map = NULL;
    r->st = NULL;
    r->as_of = NULL;
    r->order_scratch = NULL;
}

/* Takes a free reader (the lock is held on return), refreshed to the last commit. */
int serve_reader_acquire(struct query_http *h, struct serve_reader **out)
{
    unsigned first = atomic_fetch_add_explicit(&h->reader_next, 1, memory_order_relaxed);
    struct serve_reader *r = NULL;
    for (uint32_t i = 0; i < h->reader_count && r == NULL; i++) {
        struct serve_reader *c = &h->readers[(first + i) % h->reader_count];
        if (pthread_mutex_trylock(&c->lock) == 0) {
            r = c;
        }
    }
    if (r == NULL) {
        r = &h->readers[first % h->reader_count];
        ASSERT(pthread_mutex_lock(&r->lock) == 0);
    }
    int rc = reader_refresh(r);
    if (rc != 0) {
        ASSERT(pthread_mutex_unlock(&r->lock) == 0);
        return rc;
    }
    *out = r;
    return 0;
}

void serve_reader_release(struct serve_reader *r)
{
    ASSERT(pthread_mutex_unlock(&r->lock) == 0);
}

/* ---- answers ------------------------------------------------------------------------------- */

enum http_result serve_storage_error(struct http_request *c, int rc)
{
    char message[160];
    snprintf(message, sizeof(message), "storage: %s", ds_strerror(rc));
    /* -ESTALE: a file this reader's view named was removed since (a day retention dropped, a
     * compaction's replaced segment): the next request refreshes first, so it is a retry. */
    return http_respond_error(c, rc == -ENOMEM || rc == -ESTALE ? 503 : 500, message);
}

/* Appends text (len bytes) before the closing brace of the JSON object in body (body_len
 * bytes; capacity for it was reserved). Returns the new length. */
size_t serve_append_fields(char *body, size_t body_len, const char *text, size_t len)
{
    ASSERT(body_len > 0);
    ASSERT(body[body_len - 1] == '}');
    memcpy(body + body_len - 1, text, len);
    body[body_len - 1 + len] = '}';
    body[body_len + len] = '\0';
    return body_len + len;
}

enum http_result serve_respond_starting(struct http_request *c)
{
    return http_respond_error(c, 503,
                              "starting: this node has not loaded its claims (the Kafka "
                              "partitions it holds runs of) yet");
}

int64_t serve_append_claims(const struct query_http *h, char *body, size_t len,
                            const struct serve_reader *r)
{
    ASSERT(len > 0 && body[len - 1] == '}');
    struct query_claim claims[STORAGE_SOURCES_MAX];
    int count = h->claims != NULL && storage_model(r->st) == STORAGE_MODEL_EVENTS
                    ? h->claims(h->claims_user, claims, STORAGE_SOURCES_MAX)
                    : -ENOENT;
    if (count == -ENOENT && h->claims != NULL && storage_model(r->st) == STORAGE_MODEL_EVENTS) {
        /* A node whose claims are not loaded yet (starting): a router must not sum it with
         * another member unchecked. */
        return -EAGAIN;
    }
    if (count < 0) {
        return (int64_t)len; /* no claims: a router does not check this member */
    }
    size_t n = len - 1;
    size_t start = n;
    n += (size_t)snprintf(body + n, SERVE_CLAIMS_BYTES_MAX, ",\"claims\":{");
    bool first = true;
    for (int i = 0; i < count; i++) {
        int64_t next = storage_source_next(r->st, claims[i].partition);
        if (!claims[i].open && next < 0) {
            continue;
        }
        char end[24];
        if (claims[i].open) {
            snprintf(end, sizeof(end), "null");
        } else {
            snprintf(end, sizeof(end), "%" PRId64, next);
        }
        int w = snprintf(body + n, SERVE_CLAIMS_BYTES_MAX - (n - start),
                         "%s\"%" PRId32 "\":[%" PRId64 ",%s]", first ? "" : ",",
                         claims[i].partition, claims[i].from, end);
        ASSERT(w > 0 && (size_t)w < SERVE_CLAIMS_BYTES_MAX - (n - start));
        n += (size_t)w;
        first = false;
    }
    body[n++] = '}';
    body[n++] = '}';
    body[n] = '\0';
    return (int64_t)n;
}

/* Appends ,"as_of":{...} before the closing brace of the JSON object in body (len bytes;
 * capacity for it was reserved). Returns the new length. */
size_t serve_append_as_of(char *body, size_t len, const struct serve_reader *r)
{
    ASSERT(len > 0 && body[len - 1] == '}');
    static const char key[] = ",\"as_of\":";
    len--;
    memcpy(body + len, key, sizeof(key) - 1);
    len += sizeof(key) - 1;
    memcpy(body + len, r->as_of, r->as_of_len);
    len += r->as_of_len;
    body[len++] = '}';
    body[len] = '\0';
    return len;
}
