/*
 * The documents of consistent=true (http_private.h): the field an answer carries to say which
 * guarantee it gave, and the 503 naming the positions a wait did not reach. Pure rendering,
 * kept apart from libmicrohttpd so unit tests check the bytes.
 *
 * A 503 lists only the partitions still missing (a client sees at once which one lags), except
 * when the store reached every position and only the by-customer index is behind: the index
 * follows store commits, not Kafka offsets, so it has no per-partition position of its own and
 * the document names the store commit it must hold instead. Rejected: an "indexed_next" per
 * partition (it would have to be derived from a history of commits nobody keeps).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "query/serve_private.h"

/* One rendered position: {"partition":...,"high_watermark":...,"durable_next":...}. */
#define POSITION_JSON_BYTES_MAX 96u

bool serve_position_reached(const struct query_position *p, int64_t durable_next)
{
    int64_t held = durable_next > p->stored_from ? durable_next : p->stored_from;
    return held >= p->high_watermark;
}

/* Counts what snprintf wrote at the end (*len) of a buffer of cap bytes; false when it did
 * not fit. */
static bool put(size_t cap, size_t *len, int n)
{
    if (n < 0 || (size_t)n >= cap - *len) {
        return false;
    }
    *len += (size_t)n;
    return true;
}

size_t serve_consistency_json_bound(uint32_t count)
{
    return 64u + (size_t)count * 32u;
}

int64_t serve_consistency_json(enum serve_consistency kind, const struct query_position *positions,
                               uint32_t count, char *dst, size_t dst_capacity)
{
    ASSERT(dst_capacity > 0);
    ASSERT(kind == SERVE_CONSISTENCY_ACKNOWLEDGED || count == 0);
    size_t len = 0;
    if (kind == SERVE_CONSISTENCY_DURABLE) {
        bool ok =
            put(dst_capacity, &len, snprintf(dst, dst_capacity, ",\"consistency\":\"durable\""));
        return ok ? (int64_t)len : -ENOSPC;
    }
    bool ok =
        put(dst_capacity, &len,
            snprintf(dst, dst_capacity, ",\"consistency\":\"acknowledged\",\"high_watermarks\":{"));
    for (uint32_t i = 0; ok && i < count; i++) {
        ok = put(dst_capacity, &len,
                 snprintf(dst + len, dst_capacity - len, "%s\"%" PRId32 "\":%" PRId64,
                          i > 0 ? "," : "", positions[i].partition, positions[i].high_watermark));
    }
    ok = ok && put(dst_capacity, &len, snprintf(dst + len, dst_capacity - len, "}"));
    return ok ? (int64_t)len : -ENOSPC;
}

size_t serve_unmet_json_bound(uint32_t count)
{
    return HTTP_ERROR_BYTES_MAX * 2u + 128u + (size_t)count * POSITION_JSON_BYTES_MAX;
}

static const char *unmet_message(enum serve_unmet why)
{
    switch (why) {
    case SERVE_UNMET_TIMEOUT:
        return "not every event the topic had acknowledged is durable here yet";
    case SERVE_UNMET_REBALANCE:
        return "the node's partitions were reassigned while waiting (a rebalance): retry";
    case SERVE_UNMET_INDEX:
        return "every acknowledged event is durable, but the by-customer index does not hold "
               "them yet";
    }
    ASSERT(false);
    return "";
}

static bool put_position(char *dst, size_t cap, size_t *len, const struct query_position *p,
                         int64_t durable_next, bool first)
{
    char next[24];
    if (durable_next >= 0) {
        snprintf(next, sizeof(next), "%" PRId64, durable_next);
    } else {
        snprintf(next, sizeof(next), "null");
    }
    return put(cap, len,
               snprintf(dst + *len, cap - *len,
                        "%s{\"partition\":%" PRId32 ",\"high_watermark\":%" PRId64
                        ",\"durable_next\":%s}",
                        first ? "" : ",", p->partition, p->high_watermark, next));
}

int64_t serve_unmet_json(const struct serve_unmet_wait *w, char *dst, size_t dst_capacity)
{
    ASSERT(w->count == 0 || w->positions != NULL);
    ASSERT(w->count == 0 || w->durable_next != NULL);
    char message[HTTP_ERROR_BYTES_MAX];
    snprintf(message, sizeof(message), "%s (timeout_ms %u)", unmet_message(w->why), w->timeout_ms);
    int64_t n = http_error_json(message, dst, dst_capacity);
    if (n < 0) {
        return n;
    }
    size_t len = (size_t)n - 1; /* over the closing brace */
    bool ok = put(dst_capacity, &len,
                  snprintf(dst + len, dst_capacity - len,
                           ",\"consistency\":\"acknowledged\",\"timeout_ms\":%u,\"missing\":[",
                           w->timeout_ms));
    bool first = true;
    for (uint32_t i = 0; ok && i < w->count; i++) {
        if (w->why != SERVE_UNMET_INDEX &&
            serve_position_reached(&w->positions[i], w->durable_next[i])) {
            continue;
        }
        ok = put_position(dst, dst_capacity, &len, &w->positions[i], w->durable_next[i], first);
        first = false;
    }
    ok = ok && put(dst_capacity, &len, snprintf(dst + len, dst_capacity - len, "]"));
    if (ok && w->why == SERVE_UNMET_INDEX) {
        ok = put(dst_capacity, &len,
                 snprintf(dst + len, dst_capacity - len, ",\"index_needed_seq\":%" PRIu64,
                          w->index_needed_seq));
    }
    ok = ok && put(dst_capacity, &len, snprintf(dst + len, dst_capacity - len, "}"));
    return ok ? (int64_t)len : -ENOSPC;
}
