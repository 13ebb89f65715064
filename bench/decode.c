/*
 * Benchmark of ingest_decode on realistic event lines: fixed seed, 1M lines built in memory
 * like the shared fixtures (~110 bytes: integer ids, customers up to 10M, five statuses, amounts
 * with two decimals, RFC 3339 "Z" timestamps for most and epoch milliseconds for one in ten),
 * each decoded once per round, several rounds.
 *
 * Reports the median round as ns/event, events/s and MB/s, the fastest and slowest round, and
 * p50/p99/max of ns/event over batches of BENCH_BATCH_EVENTS consecutive lines (all rounds).
 *
 * Usage: bench_decode [events] [rounds] [items]   (CI runs it with a tiny count as a smoke test).
 * With items = 1 every line also carries a "version" and an "items" array of 1..3 line items
 * (~80 bytes more, as in the fixtures' updates.jsonl), decoded with ingest_decoder_decode so the
 * canonical items are built; with 0 (the default) the lines are as above and decoded with
 * ingest_decode. The mode only adds text, so a decoder that ignores version and items (an
 * older build) runs the same lines for a before/after comparison.
 *
 * Rejected: timing each call (a clock read costs a fifth of a decode); a jansson baseline in the
 * same run (bench executables link only the project's libraries, and jansson is test-only).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "ingest/ingest.h"

#define BENCH_EVENTS_DEFAULT 1000000u
#define BENCH_ROUNDS_DEFAULT 7u
#define BENCH_BATCH_EVENTS 1024u
#define BENCH_LINE_BYTES_MAX 320u
#define BENCH_SEED 0x6465636f6465ull /* "decode" */

struct bench_lines {
    char *text;      /* every line, back to back, each ending in '\n' */
    size_t *offsets; /* count + 1 entries: line i is text[offsets[i], offsets[i + 1]) */
    size_t count;
};

static uint64_t bench_rng(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ', "version": N, "items": [...]' of 1..3 line items for one line into dst; returns the
 * length. */
static size_t bench_extras(uint64_t *rng, char *dst, size_t capacity)
{
    static const char *const products[] = {"Pen", "Notebook", "Ink cartridge (black)", "Stapler",
                                           "A4 paper, 500 sheets"};
    size_t count = 1 + bench_rng(rng) % 3;
    int n = snprintf(dst, capacity, ", \"version\": %llu, \"items\": [",
                     (unsigned long long)(1 + bench_rng(rng) % 5));
    size_t len = (size_t)n;
    for (size_t k = 0; k < count; k++) {
        n = snprintf(dst + len, capacity - len, "%s{\"product\": \"%s\", \"quantity\": %llu}",
                     k > 0 ? ", " : "", products[bench_rng(rng) % DS_ARRAY_LEN(products)],
                     (unsigned long long)(1 + bench_rng(rng) % 12));
        len += (size_t)n;
    }
    n = snprintf(dst + len, capacity - len, "]");
    len += (size_t)n;
    ASSERT(len < capacity);
    return len;
}

/* One fixture-like line for order number i into dst; returns its length. */
static size_t bench_line(uint64_t *rng, size_t i, bool items, char *dst)
{
    static const char *const statuses[] = {"paid", "pending", "shipped", "cancelled", "refunded"};
    const int64_t day0_ms = 1768953600000LL; /* 2026-01-21T00:00:00Z */
    uint64_t customer = 1 + bench_rng(rng) % 10000000u;
    uint64_t cents = 100 + bench_rng(rng) % 99900u;
    const char *status = statuses[bench_rng(rng) % DS_ARRAY_LEN(statuses)];
    int64_t ts_ms = day0_ms + (int64_t)(bench_rng(rng) % (7u * 86400u)) * 1000;
    char ts[32];
    if (bench_rng(rng) % 10 == 0) {
        snprintf(ts, sizeof(ts), "%lld", (long long)ts_ms);
    } else {
        char date[DS_DATE_TEXT_SIZE];
        int64_t seconds = ts_ms / 1000 % 86400;
        ds_date_format(ds_day_from_ms(ts_ms), date);
        snprintf(ts, sizeof(ts), "\"%sT%02d:%02d:%02dZ\"", date, (int)(seconds / 3600),
                 (int)(seconds / 60 % 60), (int)(seconds % 60));
    }
    char extras[200] = "";
    if (items) {
        bench_extras(rng, extras, sizeof(extras));
    }
    int len =
        snprintf(dst, BENCH_LINE_BYTES_MAX,
                 "{\"order_id\": %zu, \"customer_id\": %llu, \"status\": \"%s\", "
                 "\"amount\": %llu.%02llu, \"ts\": %s%s}\n",
                 1000000 + i, (unsigned long long)customer, status,
                 (unsigned long long)(cents / 100), (unsigned long long)(cents % 100), ts, extras);
    ASSERT(len > 0 && (size_t)len < BENCH_LINE_BYTES_MAX);
    return (size_t)len;
}

static void bench_lines_build(struct bench_lines *lines, size_t count, bool items)
{
    uint64_t rng = BENCH_SEED;
    lines->text = malloc(count * BENCH_LINE_BYTES_MAX);
    lines->offsets = malloc((count + 1) * sizeof(size_t));
    ASSERT(lines->text != NULL && lines->offsets != NULL);
    lines->count = count;
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        lines->offsets[i] = at;
        at += bench_line(&rng, i, items, lines->text + at);
    }
    lines->offsets[count] = at;
}

/* One round over every line; batch_ns_per_event gets each batch's ns/event. Returns the round's
 * nanoseconds; every decoded event folds into *checksum so nothing is optimised away. */
static uint64_t bench_round(const struct bench_lines *lines, struct ingest_decoder *decoder,
                            double *batch_ns_per_event, uint64_t *checksum)
{
    struct ds_event event;
    struct ingest_error error;
    uint64_t sum = 0;
    uint64_t round_start = ds_clock_ns();
    for (size_t first = 0; first < lines->count; first += BENCH_BATCH_EVENTS) {
        size_t last = first + BENCH_BATCH_EVENTS;
        last = last > lines->count ? lines->count : last;
        uint64_t start = ds_clock_ns();
        for (size_t i = first; i < last; i++) {
            const char *line = lines->text + lines->offsets[i];
            size_t len = lines->offsets[i + 1] - lines->offsets[i];
            int rc = decoder != NULL ? ingest_decoder_decode(decoder, line, len, &event, &error)
                                     : ingest_decode(line, len, &event, &error);
            ASSERT(rc == 0);
            sum += (uint64_t)event.ts_ms ^ (uint64_t)event.customer_id.value ^
                   (uint64_t)event.amount_units ^ event.status_len;
        }
        batch_ns_per_event[first / BENCH_BATCH_EVENTS] =
            (double)(ds_clock_ns() - start) / (double)(last - first);
    }
    *checksum += sum;
    return ds_clock_ns() - round_start;
}

static double bench_per_event(uint64_t ns, size_t events)
{
    return (double)ns / (double)events;
}

int main(int argc, char **argv)
{
    size_t events = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : BENCH_EVENTS_DEFAULT;
    size_t rounds = argc > 2 ? (size_t)strtoull(argv[2], NULL, 10) : BENCH_ROUNDS_DEFAULT;
    bool items = argc > 3 && strcmp(argv[3], "1") == 0;
    if (events == 0 || rounds == 0 || (argc > 3 && !items && strcmp(argv[3], "0") != 0)) {
        fprintf(stderr, "usage: bench_decode [events > 0] [rounds > 0] [items: 0 or 1]\n");
        return 2;
    }
    struct bench_lines lines;
    bench_lines_build(&lines, events, items);
    struct ingest_decoder *decoder = items ? malloc(sizeof(*decoder)) : NULL;
    ASSERT(!items || decoder != NULL);
    size_t batches = (events + BENCH_BATCH_EVENTS - 1) / BENCH_BATCH_EVENTS;
    double *batch_ns = malloc(batches * rounds * sizeof(double));
    uint64_t *round_ns = malloc(rounds * sizeof(uint64_t));
    ASSERT(batch_ns != NULL && round_ns != NULL);
    uint64_t checksum = 0;
    /* warm-up: caches, page faults, branch history */
    bench_round(&lines, decoder, batch_ns, &checksum);
    for (size_t r = 0; r < rounds; r++) {
        round_ns[r] = bench_round(&lines, decoder, batch_ns + r * batches, &checksum);
    }
    qsort(round_ns, rounds, sizeof(uint64_t), bench_compare_u64);
    size_t batch_count = batches * rounds;
    qsort(batch_ns, batch_count, sizeof(double), bench_compare_double);
    uint64_t median = round_ns[rounds / 2];
    double bytes = (double)lines.offsets[events];
    printf("bench_decode: %zu events%s, %.1f bytes/event avg, %zu rounds, seed %#llx\n", events,
           items ? " with version and items" : "", bytes / (double)events, rounds,
           (unsigned long long)BENCH_SEED);
    printf("  median round: %.1f ns/event, %.2f M events/s, %.1f MB/s\n",
           bench_per_event(median, events), (double)events / ((double)median / 1e9) / 1e6,
           bytes / ((double)median / 1e9) / 1e6);
    printf("  fastest round %.1f ns/event, slowest round %.1f ns/event\n",
           bench_per_event(round_ns[0], events), bench_per_event(round_ns[rounds - 1], events));
    printf("  batches of %u events: p50 %.1f, p99 %.1f, max %.1f ns/event (%zu batches)\n",
           BENCH_BATCH_EVENTS, batch_ns[batch_count / 2], batch_ns[batch_count * 99 / 100],
           batch_ns[batch_count - 1], batch_count);
    printf("  checksum %llx\n", (unsigned long long)checksum);
    free(decoder);
    free(round_ns);
    free(batch_ns);
    free(lines.offsets);
    free(lines.text);
    return 0;
}
