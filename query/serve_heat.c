/*
 * The heat console's live data on a node (serve_private.h): GET /v1/heat/history and the
 * frames of GET /v1/heat/stream, which the server core's event pump (http/events.c) asks for
 * every HTTP_EVENTS_TICK_MS while a stream is open.
 *
 * A frame goes to a stream when the history's revision moved past the revision of the stream's
 * previous frame (its position): {"heat": /v1/heat?top=20, "history": the columns appended or
 * amended since that revision and the growths that became visible since (everything kept for a
 * new stream), "counts": stored events per day, the newest SERVE_STREAM_COUNT_DAYS days the
 * node holds}. So a column a late event re-took goes again, and the console repaints it. The
 * heat and the counts are made once per tick whatever the number of streams; the history once
 * per distinct position (streams opened at different times differ only in their first frame).
 * Counts come from query_count on a reader, as /v1/count answers them.
 *
 * Rejected: a frame per stream made on the worker thread that serves it (the worker would wait
 * for the next second, holding every other connection of that worker), and a frame built on
 * the consumer thread at each second (the query's readers belong to the service).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/serve_private.h"

/* The cells a first copy makes room for: a quiet node's whole history fits. */
#define SERVE_HISTORY_CELLS_FIRST 65536u
/* Copies tried before giving up on a history that keeps outgrowing the buffer. */
#define SERVE_HISTORY_TRIES 4u
/* "counts" of a stream frame: a month of days. */
#define SERVE_STREAM_COUNT_DAYS 31u
/* Rows of a stream frame's "heat" (as /v1/heat?top=20). */
#define SERVE_STREAM_HEAT_TOP 20u
/* One "counts" entry: {"day":"YYYY-MM-DD","count":N}, with its comma. */
#define SERVE_COUNT_ENTRY_BYTES 56u

/* A copy of the history: the view and its cells (owned), released with history_copy_free. */
struct serve_history_copy {
    struct shard_heat_history_view *view;
    struct shard_heat_cell *cells;
};

static void history_copy_free(struct serve_history_copy *c)
{
    free(c->view);
    free(c->cells);
    *c = (struct serve_history_copy){0};
}

/* Which part of the history a copy takes: the last seconds, or what changed since a revision
 * (since_revision: the stream's frames). */
struct serve_history_ask {
    uint32_t seconds;
    bool since_revision;
    uint64_t after_revision;
};

/* Copies the history (as shard_heat_history_copy or _copy_since), growing the cells to what it
 * needs. */
static int history_copy(struct shard_heat_history *history, const struct serve_history_ask *ask,
                        struct serve_history_copy *out)
{
    *out = (struct serve_history_copy){.view = malloc(sizeof(*out->view))};
    size_t capacity = SERVE_HISTORY_CELLS_FIRST;
    int rc = out->view != NULL ? -ENOSPC : -ENOMEM;
    for (uint32_t tries = 0; rc == -ENOSPC && tries < SERVE_HISTORY_TRIES; tries++) {
        free(out->cells);
        out->cells = malloc(capacity * sizeof(*out->cells));
        if (out->cells == NULL) {
            rc = -ENOMEM;
            break;
        }
        rc = ask->since_revision
                 ? shard_heat_history_copy_since(history, ask->after_revision, out->view,
                                                 out->cells, capacity)
                 : shard_heat_history_copy(history, ask->seconds, SHARD_HEAT_HISTORY_ALL, out->view,
                                           out->cells, capacity);
        /* What it needs now, with room for the columns that come while this one is made. */
        capacity = (size_t)out->view->cell_count + out->view->cell_count / 4u + 1024u;
    }
    if (rc != 0) {
        history_copy_free(out);
    }
    return rc;
}

/* The history document of a copy into a new buffer (*len its length); NULL: out of memory. */
static char *history_text(const struct serve_history_copy *copy, const struct shard_heat_report *r,
                          uint32_t seconds, size_t *len)
{
    struct query_heat_history_scale scale = {
        .seconds = seconds, .capacity_eps = r->heat.capacity_eps, .max_shards = r->max_shards};
    size_t cap = query_heat_history_json_bound(copy->view, copy->cells);
    char *text = malloc(cap);
    if (text == NULL) {
        return NULL;
    }
    int64_t n = query_heat_history_json(copy->view, copy->cells, &scale, text, cap);
    ASSERT(n > 0);
    *len = (size_t)n;
    return text;
}

/* ---- GET /v1/heat/history ------------------------------------------------------------------ */

struct shard_heat_report *serve_heat_report(struct query_http *h, struct http_request *c,
                                            bool history, enum http_result *answered)
{
    if (h->metrics == NULL || (history && h->metrics->heat_history == NULL)) {
        *answered = http_respond_error(c, 501,
                                       "heat is measured by a node: ask the --http address of "
                                       "`dayshard run`, not `dayshard serve`");
        return NULL;
    }
    struct shard_heat_report *report = malloc(sizeof(*report));
    if (report == NULL) {
        *answered = serve_storage_error(c, -ENOMEM);
        return NULL;
    }
    if (!query_metrics_heat_get(h->metrics, report)) {
        free(report);
        *answered = http_respond_error(c, 503, "no heat yet: the node has not completed a second");
        return NULL;
    }
    return report;
}

enum http_result serve_heat_history(struct query_http *h, struct http_request *c,
                                    const struct query_route *route)
{
    enum http_result answered;
    struct shard_heat_report *report = serve_heat_report(h, c, true, &answered);
    if (report == NULL) {
        return answered;
    }
    struct serve_history_copy copy;
    struct serve_history_ask ask = {.seconds = route->seconds};
    int rc = history_copy(h->metrics->heat_history, &ask, &copy);
    size_t len = 0;
    char *body = rc == 0 ? history_text(&copy, report, route->seconds, &len) : NULL;
    history_copy_free(&copy);
    free(report);
    if (rc != 0) {
        return serve_storage_error(c, rc == -ENOSPC ? -ENOMEM : rc);
    }
    return http_respond_json(c, 200, body, (int64_t)len);
}

/* ---- GET /v1/heat/stream ------------------------------------------------------------------- */

enum http_result serve_heat_stream(struct query_http *h, struct http_request *c)
{
    if (h->metrics == NULL || h->metrics->heat_history == NULL) {
        return http_respond_error(c, 501,
                                  "heat is measured by a node: ask the --http address of `dayshard "
                                  "run`, not `dayshard serve`");
    }
    return http_respond_events(c);
}

/* The first day of the newest SERVE_STREAM_COUNT_DAYS days map holds up to last. */
static int32_t stream_first_day(const struct shard_map *map, int32_t last)
{
    int32_t first = last;
    for (uint32_t k = 1; k < SERVE_STREAM_COUNT_DAYS; k++) {
        int32_t previous = shard_map_previous_day(map, first);
        if (previous < 0 || last - previous >= (int32_t)QUERY_RANGE_DAYS_MAX) {
            break;
        }
        first = previous;
    }
    return first;
}

/* "counts":[{"day":...,"count":N},...] of the newest days the node holds, oldest first, into b.
 * A storage error leaves the list empty (the frame still carries the heat). */
static void stream_put_counts(struct query_http *h, struct http_text *b)
{
    http_text_put(b, "\"counts\":[");
    struct serve_reader *r = NULL;
    if (serve_reader_acquire(h, &r) != 0) {
        http_text_put(b, "]");
        return;
    }
    int32_t last = shard_map_last_day(r->map);
    struct query_count_request req = {.day_first = last >= 0 ? stream_first_day(r->map, last) : 0,
                                      .day_last = last,
                                      .by = QUERY_GROUP_DAY,
                                      .range_days_max = QUERY_RANGE_DAYS_MAX};
    struct query_count_result res;
    if (last >= 0 && query_count(r->st, r->map, &req, &res) == 0) {
        uint32_t put = 0;
        for (size_t i = 0; i < res.group_count; i++) {
            const struct query_group_row *g = &res.groups[i];
            if (shard_map_get(r->map, g->day) == 0) {
                continue; /* a day between the days held */
            }
            char day[DS_DATE_TEXT_SIZE];
            ds_date_format(g->day, day);
            http_text_put(b, "%s{\"day\":\"%s\",\"count\":%" PRIu64 "}", put++ > 0 ? "," : "", day,
                          g->count);
        }
        query_count_result_deinit(&res);
    }
    serve_reader_release(r);
    http_text_put(b, "]");
}

/* What every stream's frame of this tick shares: the heat and the counts. */
struct stream_tick {
    struct shard_heat_report *report;
    char *heat; /* {"heat":...,  */
    size_t heat_len;
    char *counts; /* ,"counts":[...]} and the event's end */
    size_t counts_len;
};

static void stream_tick_free(struct stream_tick *t)
{
    free(t->report);
    free(t->heat);
    free(t->counts);
}

/* Fills t; false when there is no heat yet or memory ran out (no frame this tick). */
static bool stream_tick_make(struct query_http *h, struct stream_tick *t)
{
    *t = (struct stream_tick){.report = malloc(sizeof(*t->report))};
    if (t->report == NULL || !query_metrics_heat_get(h->metrics, t->report)) {
        return false;
    }
    static const char head[] = "event: heat\ndata: {\"heat\":";
    size_t cap = sizeof(head) + query_heat_json_bound();
    t->heat = malloc(cap);
    size_t counts_cap = 64u + SERVE_STREAM_COUNT_DAYS * SERVE_COUNT_ENTRY_BYTES;
    t->counts = malloc(counts_cap);
    if (t->heat == NULL || t->counts == NULL) {
        return false;
    }
    memcpy(t->heat, head, sizeof(head) - 1);
    int64_t n = query_heat_json(t->report, h->metrics, SERVE_STREAM_HEAT_TOP,
                                t->heat + sizeof(head) - 1, cap - (sizeof(head) - 1));
    ASSERT(n > 0);
    t->heat_len = sizeof(head) - 1 + (size_t)n;
    struct http_text b = {.dst = t->counts, .capacity = counts_cap};
    http_text_put(&b, ",");
    stream_put_counts(h, &b);
    http_text_put(&b, "}\n\n");
    ASSERT(!b.overflow);
    t->counts_len = b.len;
    return true;
}

/* A stream's position as the revision its frames are after (0: a new stream, everything). */
static uint64_t stream_after(int64_t position)
{
    return position > 0 ? (uint64_t)position : 0;
}

/* One stream's frame: the shared heat and counts around the history since revision `after`
 * (*revision: the copy's, the stream's next position). */
static char *stream_frame(struct query_http *h, const struct stream_tick *t, uint64_t after,
                          uint64_t *revision, size_t *len)
{
    struct serve_history_copy copy;
    struct serve_history_ask ask = {
        .seconds = SHARD_HEAT_HISTORY_S, .since_revision = true, .after_revision = after};
    if (history_copy(h->metrics->heat_history, &ask, &copy) != 0) {
        return NULL;
    }
    size_t history_len = 0;
    char *history = history_text(&copy, t->report, SHARD_HEAT_HISTORY_S, &history_len);
    *revision = copy.view->revision;
    history_copy_free(&copy);
    static const char key[] = ",\"history\":";
    size_t total = t->heat_len + sizeof(key) - 1 + history_len + t->counts_len;
    char *frame = history != NULL ? malloc(total) : NULL;
    if (frame != NULL) {
        size_t at = 0;
        memcpy(frame + at, t->heat, t->heat_len);
        at += t->heat_len;
        memcpy(frame + at, key, sizeof(key) - 1);
        at += sizeof(key) - 1;
        memcpy(frame + at, history, history_len);
        at += history_len;
        memcpy(frame + at, t->counts, t->counts_len);
        ASSERT(at + t->counts_len == total);
        *len = total;
    }
    free(history);
    return frame;
}

void serve_heat_tick(void *user, struct http_server *s)
{
    struct query_http *h = user;
    struct http_events_cursor cursors[HTTP_EVENTS_STREAMS_MAX];
    uint32_t count = http_events_list(s, cursors, HTTP_EVENTS_STREAMS_MAX);
    uint64_t revision = shard_heat_history_revision(h->metrics->heat_history);
    ASSERT(revision <= (uint64_t)INT64_MAX); /* one a second: never near */
    bool due = false;
    for (uint32_t i = 0; i < count; i++) {
        due = due || stream_after(cursors[i].position) < revision;
    }
    struct stream_tick t;
    if (!due || !stream_tick_make(h, &t)) {
        if (due) {
            stream_tick_free(&t);
        }
        return;
    }
    /* Streams at the same position get the same frame: made once, copied. */
    char *frame = NULL;
    size_t len = 0;
    uint64_t made_after = 0;
    uint64_t made_revision = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint64_t after = stream_after(cursors[i].position);
        if (after >= revision) {
            continue;
        }
        if (frame == NULL || made_after != after) {
            free(frame);
            made_after = after;
            frame = stream_frame(h, &t, made_after, &made_revision, &len);
            if (frame == NULL) {
                break;
            }
        }
        char *copy = malloc(len);
        if (copy == NULL) {
            break;
        }
        memcpy(copy, frame, len);
        (void)http_events_send(s, cursors[i].id, copy, len, (int64_t)made_revision);
    }
    free(frame);
    stream_tick_free(&t);
}
