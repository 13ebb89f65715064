/*
 * The heat history document (query.h, GET /v1/heat/history, and the "history" of a stream
 * frame): a copy of the history (shard.h) as one JSON object without newlines.
 *
 * Revisions (shard.h, "heat history"): the document's "revision" is the history's newest at the
 * copy, each column's the one it was last taken at, so a reader holding the document of an
 * earlier revision tells an amended column (a late event re-took it) from a new one. A column
 * with no cell (a second nobody wrote in) is left out: a reader draws an absent second as empty,
 * and an amended column always has a cell (amending only adds events).
 *
 * A column's cells come ordered by day and then shard, so each day is one run of cells and its
 * array is written in one pass, zeros filling the shards of that day nobody wrote in that second.
 * The bound is computed from the copy itself (each day's array is as long as its highest shard
 * written plus one), so a request allocates what its answer needs: a quiet node's whole history
 * is a few kilobytes, and the worst case (every partition key of the table, every second) is
 * what it costs, never more.
 *
 * Rejected: a fixed buffer for the worst case (300 columns of 8192 cells, up to tens of
 * megabytes) per request or per stream.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "query/query.h"
#include "query/serve_private.h"

/* "{"version":1,"second":...,"seconds":300,...,"revision":...,"columns":[" and "],"growths":["
 * and "]}". */
#define HISTORY_FIXED_BYTES 256u
/* {"t":...,"revision":...,"days":{}}, with its comma. */
#define HISTORY_COLUMN_BYTES 80u
/* "YYYY-MM-DD":[], with its comma. */
#define HISTORY_DAY_BYTES 20u
/* A count of a shard (at most 4294967295) and its comma. */
#define HISTORY_VALUE_BYTES 11u
/* A growth: the fixed keys and numbers, and its reason escaped (at most 6 bytes a byte). */
#define HISTORY_GROWTH_BYTES (160u + 6u * SHARD_GROWTH_REASON_BYTES)

/* The bytes a column's days need: for each day, its array up to the highest shard written. */
static size_t history_column_bound(const struct shard_heat_column *c,
                                   const struct shard_heat_cell *cells)
{
    size_t bytes = HISTORY_COLUMN_BYTES;
    for (uint32_t i = 0; i < c->cell_count; i++) {
        const struct shard_heat_cell *cell = &cells[c->first_cell + i];
        bool last_of_day =
            i + 1u == c->cell_count || cells[c->first_cell + i + 1u].day != cell->day;
        if (last_of_day) {
            bytes += HISTORY_DAY_BYTES + ((size_t)cell->shard + 1u) * HISTORY_VALUE_BYTES;
        }
    }
    return bytes;
}

size_t query_heat_history_json_bound(const struct shard_heat_history_view *view,
                                     const struct shard_heat_cell *cells)
{
    ASSERT(view != NULL);
    size_t bytes = HISTORY_FIXED_BYTES + (size_t)view->growth_count * HISTORY_GROWTH_BYTES;
    for (uint32_t k = 0; k < view->column_count; k++) {
        bytes +=
            view->columns[k].cell_count > 0 ? history_column_bound(&view->columns[k], cells) : 0;
    }
    return bytes;
}

/* One day's run of cells [first, end) as "YYYY-MM-DD":[n,0,n,...]. */
static void history_put_day(struct http_text *b, const struct shard_heat_cell *cells,
                            uint32_t first, uint32_t end)
{
    char day[DS_DATE_TEXT_SIZE];
    ds_date_format(cells[first].day, day);
    http_text_put(b, "\"%s\":[", day);
    uint32_t shard = 0;
    for (uint32_t i = first; i < end; i++) {
        ASSERT(cells[i].shard >= shard); /* ordered, each shard once */
        for (; shard < cells[i].shard; shard++) {
            http_text_put(b, "%s0", shard > 0 ? "," : "");
        }
        http_text_put(b, "%s%" PRIu32, shard > 0 ? "," : "", cells[i].events);
        shard++;
    }
    http_text_put(b, "]");
}

static void history_put_column(struct http_text *b, const struct shard_heat_column *c,
                               const struct shard_heat_cell *cells)
{
    ASSERT(c->cell_count > 0);
    http_text_put(b, "{\"t\":%" PRId64 ",\"revision\":%" PRIu64 ",\"days\":{", c->t, c->revision);
    uint32_t end = c->first_cell + c->cell_count;
    for (uint32_t first = c->first_cell; first < end;) {
        uint32_t next = first + 1u;
        while (next < end && cells[next].day == cells[first].day) {
            next++;
        }
        http_text_put(b, "%s", first > c->first_cell ? "," : "");
        history_put_day(b, cells, first, next);
        first = next;
    }
    http_text_put(b, "}}");
}

static void history_put_growths(struct http_text *b, const struct shard_heat_history_view *view)
{
    http_text_put(b, "],\"growths\":[");
    for (uint32_t i = 0; i < view->growth_count; i++) {
        heat_growth_json(b, &view->growths[i], i == 0);
    }
    http_text_put(b, "]}");
}

int64_t query_heat_history_json(const struct shard_heat_history_view *view,
                                const struct shard_heat_cell *cells,
                                const struct query_heat_history_scale *scale, char *dst,
                                size_t dst_capacity)
{
    ASSERT(view != NULL && scale != NULL && dst != NULL);
    ASSERT(view->cell_count == 0 || cells != NULL);
    struct http_text b = {.dst = dst, .capacity = dst_capacity};
    http_text_put(&b, "{\"version\":1,\"second\":");
    if (view->second >= 0) {
        http_text_put(&b, "%" PRId64, view->second);
    } else {
        http_text_put(&b, "null");
    }
    http_text_put(
        &b,
        ",\"seconds\":%u,\"shard_capacity_eps\":%u,\"max_shards\":%u,\"revision\":%" PRIu64
        ",\"columns\":[",
        scale->seconds, scale->capacity_eps, scale->max_shards, view->revision);
    uint32_t put = 0;
    for (uint32_t k = 0; k < view->column_count; k++) {
        if (view->columns[k].cell_count == 0) {
            continue; /* a second nobody wrote in */
        }
        http_text_put(&b, "%s", put++ > 0 ? "," : "");
        history_put_column(&b, &view->columns[k], cells);
    }
    history_put_growths(&b, view);
    return b.overflow ? -ENOSPC : (int64_t)b.len;
}
