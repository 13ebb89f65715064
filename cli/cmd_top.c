/*
 * `dayshard top --server URL [--interval-ms N] [--top N] [--once]`: a live terminal view of a
 * node's write heat (GET /v1/heat), one frame per interval, like top(1): the hottest
 * partitions, days, Kafka partitions and customers, the last growths of adaptive sharding, and
 * the advice on hot spots more shards cannot relieve.
 *
 * A frame is a pure function of the parsed answer and the options (top_render: a json_t in,
 * text out to a FILE *). Every field may be missing or null (an older node) and shows as "-";
 * a missing list shows as not reported. Every line is cut to TOP_COLUMNS, and text from the
 * node loses its control bytes before it reaches the terminal (a customer id must not be able
 * to move the cursor or retitle the window).
 *
 * Live, a frame is built in a buffer of fixed size and written at once: on a terminal after
 * "home, clear", cut to the window so the redraw neither flickers nor scrolls; elsewhere frames
 * follow one another, separated by a blank line. SIGINT and SIGTERM stay blocked and are waited
 * for with sigtimedwait between frames: no handler, no global flag. The price: a stop signal
 * that arrives during a request waits for its answer (at most the client's 10 s timeout; an
 * unreachable node fails at once).
 *
 * Rejected: curses (a dependency and a terminal database for one screen that only redraws),
 * and keeping the last good frame on screen while the node does not answer (a stale view that
 * looks live is worse than an error that says so).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/cli.h"
#include "http/http.h"
#include "shard/shard.h"

/* The frame's width: the widest table row is 97 columns. */
#define TOP_COLUMNS 100u
/* The rates are per second: polling faster only loads the node. An hour is the slowest. */
#define TOP_INTERVAL_MS_MIN 100u
#define TOP_INTERVAL_MS_MAX 3600000u
#define TOP_INTERVAL_MS_DEFAULT 1000u
/* Rows per list: the service's default and maximum (`?top=N`). */
#define TOP_ROWS_DEFAULT 10u
#define TOP_ROWS_MAX SHARD_HEAT_TOP_MAX
/* A node lists every Kafka partition (up to 256): the view shows the hottest few. */
#define TOP_KAFKA_ROWS_MAX 8u
#define TOP_GROWTH_ROWS_MAX 5u
/* Advice rows shown (a node gives at most SHARD_ADVICE_MAX), and the lines each of its two
 * texts may fold over: a node's texts fit in 4 lines, a longer one is cut. */
#define TOP_ADVICE_ROWS_MAX SHARD_ADVICE_MAX
#define TOP_ADVICE_TEXT_LINES 4u
#define TOP_ADVICE_INDENT 7u
/* '#' per 10% of share. */
#define TOP_BAR_WIDTH 10u
/* A text cell: a whole line at most, plus quotes and the NUL. */
#define TOP_CELL_SIZE (TOP_COLUMNS + 4u)
#define TOP_ERROR_SIZE 512u
/* Lines of the largest frame: 3 header lines; per list a blank line, a column header and its
 * rows, plus one line of "more" (Kafka) or of "not reported". */
#define TOP_FRAME_LINES_MAX                                                                        \
    (3u + 4u * (3u + TOP_ROWS_MAX) + 3u + TOP_GROWTH_ROWS_MAX + 2u +                               \
     TOP_ADVICE_ROWS_MAX * (1u + 2u * TOP_ADVICE_TEXT_LINES))
#define TOP_FRAME_BYTES_MAX (64u * 1024u)
/* A frame as written: "home, clear" (7 bytes) and a newline the last line may lack. */
#define TOP_SCREEN_BYTES_MAX (TOP_FRAME_BYTES_MAX + 8u)

_Static_assert(TOP_KAFKA_ROWS_MAX <= TOP_ROWS_MAX, "the Kafka list is counted as a full list");
_Static_assert(TOP_FRAME_LINES_MAX *(TOP_COLUMNS + 1u) < TOP_FRAME_BYTES_MAX,
               "the largest frame fits its buffer");

const char cmd_top_usage[] =
    "usage: dayshard top --server URL [options]\n"
    "\n"
    "A live view of where a node's writes concentrate (GET /v1/heat), redrawn every interval\n"
    "like top(1): the hottest partitions (day + shard) with their rate now, average and peak\n"
    "over the window, share of all writes, the day's shard count, throttled events and OVER\n"
    "when a partition takes more than the capacity; then days, Kafka partitions (the hottest\n"
    "8) with lag, top customers (estimated rate +- error) and the last growths; then the\n"
    "node's advice, when a hot spot is one more shards cannot relieve (a skewed Kafka\n"
    "partition, a hot customer, a day at --max-shards): the evidence and the remedy. Rates\n"
    "are events per second of producer time; \"-\" is a value the node did not report.\n"
    "\n"
    "On a terminal the view redraws in place, cut to the window; otherwise frames follow one\n"
    "another, separated by a blank line. While the node does not answer, the frame says why\n"
    "and the view keeps trying. SIGINT or SIGTERM ends it.\n"
    "\n"
    "options:\n"
    "  --server URL         the node's query service (dayshard run --http), required\n"
    "  --interval-ms N      time between frames (100..3600000, default 1000)\n"
    "  --top N              rows per list (1..64, default 10)\n"
    "  --once               print one frame and exit\n"
    "  --http-token T       bearer token for --server (or DAYSHARD_HTTP_TOKEN)\n"
    "  --help               this text\n"
    "\n"
    "exit status: 0 stopped by a signal or --once printed its frame, 1 --once got no heat\n"
    "document (the node unreachable or answering an error), 2 usage error\n";

struct top_args {
    const char *server;
    const char *token;
    uint64_t interval_ms;
    uint64_t rows;
    bool once;
};

/* A row picked from a list: its index and what it was ranked by. */
struct top_pick {
    size_t index;
    double rate;
};

static int parse_one(int c, const char *value, void *user)
{
    struct top_args *a = user;
    switch (c) {
    case 'S': a->server = value; return 0;
    case 'T': a->token = value; return 0;
    case 'o': a->once = true; return 0;
    case 'i':
        return cli_parse_u64(value, TOP_INTERVAL_MS_MIN, TOP_INTERVAL_MS_MAX, &a->interval_ms);
    case 'n': return cli_parse_u64(value, 1, TOP_ROWS_MAX, &a->rows);
    }
    return -DS_EUSAGE;
}

static int parse_args(int argc, char **argv, struct top_args *a)
{
    static const struct option options[] = {{"server", required_argument, NULL, 'S'},
                                            {"interval-ms", required_argument, NULL, 'i'},
                                            {"top", required_argument, NULL, 'n'},
                                            {"once", no_argument, NULL, 'o'},
                                            {"http-token", required_argument, NULL, 'T'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    memset(a, 0, sizeof(*a));
    a->interval_ms = TOP_INTERVAL_MS_DEFAULT;
    a->rows = TOP_ROWS_DEFAULT;
    a->token = getenv("DAYSHARD_HTTP_TOKEN");
    int next = 0;
    int rc = cli_options_parse("top", argc, argv, "", options, parse_one, a, &next);
    if (rc != 0) {
        return rc;
    }
    if (next < argc) {
        return cli_error("top", CLI_USAGE, "unexpected argument '%s'", argv[next]);
    }
    if (a->server == NULL || a->server[0] == '\0') {
        return cli_error("top", CLI_USAGE, "--server URL is required");
    }
    return 0;
}

/* ---- cells: one value of the answer as text ------------------------------------------------ */

/* The longest prefix of s[0..len) that does not end inside a UTF-8 character; s[len] must be
 * readable (the first byte left out). */
static size_t utf8_cut(const char *s, size_t len)
{
    while (len > 0 && ((unsigned char)s[len] & 0xC0u) == 0x80u) {
        len--;
    }
    return len;
}

/* Text from the node as a cell of at most width bytes: control bytes (C0, DEL, and C1 encoded
 * as UTF-8) become '?'; a longer text is cut and ends in '~'. dst has TOP_CELL_SIZE bytes. */
static const char *top_text(const char *s, size_t width, char *dst)
{
    ASSERT(width > 1);
    ASSERT(width < TOP_CELL_SIZE - 1);
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0' && n <= width; p++) {
        bool c1 = p[0] == 0xC2u && p[1] >= 0x80u && p[1] <= 0x9Fu;
        dst[n++] = *p < 0x20u || *p == 0x7Fu || c1 ? '?' : (char)*p;
        p += c1 ? 1 : 0;
    }
    if (n > width) {
        n = utf8_cut(dst, width - 1);
        dst[n++] = '~';
    }
    dst[n] = '\0';
    return dst;
}

/* A value as a cell: a string (as top_text), an integer, a real with `decimals` decimals, or
 * "-" (missing, null, anything else). dst has TOP_CELL_SIZE bytes. */
static const char *top_cell(const json_t *v, int decimals, size_t width, char *dst)
{
    if (json_is_string(v)) {
        return top_text(json_string_value(v), width, dst);
    }
    if (json_is_integer(v)) {
        snprintf(dst, TOP_CELL_SIZE, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    } else if (json_is_real(v)) {
        double x = json_real_value(v);
        snprintf(dst, TOP_CELL_SIZE, x > -1e12 && x < 1e12 ? "%.*f" : "%.*e", decimals, x);
    } else {
        snprintf(dst, TOP_CELL_SIZE, "-");
    }
    return dst;
}

/* The cell of o's field `key`. */
static const char *top_field(const json_t *o, const char *key, int decimals, char *dst)
{
    return top_cell(json_object_get(o, key), decimals, TOP_COLUMNS, dst);
}

/* The cell of o's field `key` followed by unit, or "-" alone. */
static const char *top_field_unit(const json_t *o, const char *key, const char *unit, char *dst)
{
    top_field(o, key, 0, dst);
    if (strcmp(dst, "-") != 0) {
        size_t len = strlen(dst);
        snprintf(dst + len, TOP_CELL_SIZE - len, "%s", unit);
    }
    return dst;
}

static bool top_number(const json_t *v, double *out)
{
    if (!json_is_number(v)) {
        return false;
    }
    *out = json_number_value(v);
    return true;
}

/* A share (0..1) as " 24.0% ###" (one '#' per 10%, at least one for any share), or "-". */
static const char *top_share(const json_t *o, char *dst)
{
    double share = 0;
    if (!top_number(json_object_get(o, "share"), &share)) {
        return strcpy(dst, "-");
    }
    char bar[TOP_BAR_WIDTH + 1];
    size_t n = share <= 0 ? 0 : share >= 1 ? TOP_BAR_WIDTH : (size_t)(share * TOP_BAR_WIDTH + 0.5);
    n = share > 0 && n == 0 ? 1 : n;
    ASSERT(n <= TOP_BAR_WIDTH);
    memset(bar, '#', n);
    bar[n] = '\0';
    snprintf(dst, TOP_CELL_SIZE, share < 1e6 ? "%5.1f%% %s" : "%.0e%% %s", share * 100, bar);
    return dst;
}

/* A customer id: an integer as digits, a string as it is unless it reads as an integer, then
 * in quotes (the rule of `dayshard orders --customer`). */
static const char *top_customer_id(const json_t *v, char *dst)
{
    const char *s = json_string_value(v);
    if (s == NULL || s[0] == '\0' || strspn(s, "0123456789") != strlen(s)) {
        return top_cell(v, 0, 24, dst);
    }
    snprintf(dst, TOP_CELL_SIZE, strlen(s) <= 22 ? "\"%s\"" : "\"%.20s~\"", s);
    return dst;
}

/* ---- the frame ----------------------------------------------------------------------------- */

static void top_line(FILE *out, const char *fmt, ...) DS_PRINTF(2, 3);

/* One line of the frame, cut to TOP_COLUMNS bytes, without trailing blanks. */
static void top_line(FILE *out, const char *fmt, ...)
{
    char text[4 * TOP_COLUMNS];
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(text, sizeof(text), fmt, args);
    va_end(args);
    ASSERT(n >= 0);
    size_t len = strlen(text);
    len = len > TOP_COLUMNS ? utf8_cut(text, TOP_COLUMNS) : len;
    while (len > 0 && text[len - 1] == ' ') {
        len--;
    }
    fprintf(out, "%.*s\n", (int)len, text);
}

/* The list `name` of doc, or NULL after a line saying the node did not report it. */
static const json_t *top_list(const json_t *doc, const char *name, FILE *out)
{
    const json_t *list = json_object_get(doc, name);
    if (!json_is_array(list)) {
        top_line(out, "  (not reported by this node)");
        return NULL;
    }
    if (json_array_size(list) == 0) {
        top_line(out, "  (none)");
    }
    return list;
}

/* Up to k rows of list with the highest numeric field `key` (ties: the earlier row first),
 * highest first; a row without the field ranks last. Returns the count picked. */
static size_t top_hottest(const json_t *list, const char *key, struct top_pick *picks, size_t k)
{
    ASSERT(k > 0);
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(list); i++) {
        double rate = -1;
        if (!top_number(json_object_get(json_array_get(list, i), key), &rate)) {
            rate = -1;
        }
        if (n == k && rate <= picks[k - 1].rate) {
            continue;
        }
        size_t at = n < k ? n++ : k - 1;
        while (at > 0 && picks[at - 1].rate < rate) {
            picks[at] = picks[at - 1];
            at--;
        }
        picks[at] = (struct top_pick){.index = i, .rate = rate};
    }
    ASSERT(n <= k);
    return n;
}

static void top_render_header(const json_t *doc, const struct top_args *a, FILE *out)
{
    char c[4][TOP_CELL_SIZE];
    top_line(out, "dayshard top  %s  second %s  window %s", top_text(a->server, 48, c[0]),
             top_field(doc, "second", 0, c[1]), top_field_unit(doc, "window_s", " s", c[2]));
    top_line(out, "rate %s  events %s  untracked %s  GSI lag %s",
             top_field_unit(doc, "rate_now", "/s", c[0]), top_field(doc, "events", 0, c[1]),
             top_field(doc, "untracked_events", 0, c[2]),
             top_field_unit(doc, "gsi_lag_ms", " ms", c[3]));
    double capacity = -1;
    if (top_number(json_object_get(doc, "shard_capacity_eps"), &capacity) && capacity == 0) {
        top_line(out, "capacity off (fixed shard counts)");
        return;
    }
    top_line(out, "capacity %s per partition, max %s shards  over capacity %s  would throttle %s",
             top_field_unit(doc, "shard_capacity_eps", "/s", c[0]),
             top_field(doc, "max_shards", 0, c[1]),
             top_field_unit(doc, "over_capacity_seconds", " s", c[2]),
             top_field(doc, "would_throttle_events", 0, c[3]));
    if (json_is_true(json_object_get(doc, "growth_failed"))) {
        top_line(out, "GROWTH STOPPED: a shard map write failed (see the node's log); events keep "
                      "their shards");
    }
}

static void top_render_partitions(const json_t *doc, const struct top_args *a, FILE *out)
{
    double capacity = 0;
    bool capped = top_number(json_object_get(doc, "shard_capacity_eps"), &capacity) && capacity > 0;
    top_line(out, "\n%-24s %9s %9s %9s  %6s %-10s %6s %10s", "PARTITION", "now/s", "avg/s",
             "peak/s", "share", "", "shards", "throttled");
    const json_t *list = top_list(doc, "partitions", out);
    for (size_t i = 0; i < json_array_size(list) && i < a->rows; i++) {
        const json_t *p = json_array_get(list, i);
        char c[7][TOP_CELL_SIZE];
        double now = 0;
        bool over = capped && top_number(json_object_get(p, "rate_now"), &now) && now > capacity;
        top_line(out, "%-24s %9s %9s %9s  %-17s %6s %10s%s",
                 top_cell(json_object_get(p, "key"), 0, 24, c[0]),
                 top_field(p, "rate_now", 0, c[1]), top_field(p, "rate_avg", 1, c[2]),
                 top_field(p, "rate_peak", 0, c[3]), top_share(p, c[4]),
                 top_field(p, "day_shards", 0, c[5]),
                 top_field(p, "would_throttle_events", 0, c[6]), over ? "  OVER" : "");
    }
}

static void top_render_days(const json_t *doc, const struct top_args *a, FILE *out)
{
    top_line(out, "\n%-24s %9s %9s %9s  %6s %-10s %6s %10s", "DAY", "now/s", "avg/s", "peak/s",
             "share", "", "shards", "events");
    const json_t *list = top_list(doc, "days", out);
    for (size_t i = 0; i < json_array_size(list) && i < a->rows; i++) {
        const json_t *d = json_array_get(list, i);
        char c[7][TOP_CELL_SIZE];
        top_line(out, "%-24s %9s %9s %9s  %-17s %6s %10s",
                 top_cell(json_object_get(d, "day"), 0, 24, c[0]),
                 top_field(d, "rate_now", 0, c[1]), top_field(d, "rate_avg", 1, c[2]),
                 top_field(d, "rate_peak", 0, c[3]), top_share(d, c[4]),
                 top_field(d, "shards", 0, c[5]), top_field(d, "events", 0, c[6]));
    }
}

/* The node lists every Kafka partition by number: the hottest few, by rate now. */
static void top_render_kafka(const json_t *doc, const struct top_args *a, FILE *out)
{
    top_line(out, "\n%-24s %9s %9s %12s %12s", "KAFKA PARTITION", "now/s", "peak/s", "events",
             "lag");
    const json_t *list = top_list(doc, "kafka_partitions", out);
    struct top_pick picks[TOP_KAFKA_ROWS_MAX];
    size_t k = a->rows < TOP_KAFKA_ROWS_MAX ? (size_t)a->rows : TOP_KAFKA_ROWS_MAX;
    size_t n = top_hottest(list, "rate_now", picks, k);
    for (size_t i = 0; i < n; i++) {
        const json_t *s = json_array_get(list, picks[i].index);
        char c[5][TOP_CELL_SIZE];
        top_line(out, "%-24s %9s %9s %12s %12s",
                 top_cell(json_object_get(s, "partition"), 0, 24, c[0]),
                 top_field(s, "rate_now", 0, c[1]), top_field(s, "rate_peak", 0, c[2]),
                 top_field(s, "events", 0, c[3]), top_field(s, "lag", 0, c[4]));
    }
    if (json_array_size(list) > n) {
        top_line(out, "  (%zu more, colder)", json_array_size(list) - n);
    }
}

static void top_render_customers(const json_t *doc, const struct top_args *a, FILE *out)
{
    top_line(out, "\n%-24s %9s %10s  %6s", "CUSTOMER", "rate/s", "+-error/s", "share");
    const json_t *list = top_list(doc, "customers", out);
    for (size_t i = 0; i < json_array_size(list) && i < a->rows; i++) {
        const json_t *u = json_array_get(list, i);
        char c[4][TOP_CELL_SIZE];
        char error[TOP_CELL_SIZE + 2];
        snprintf(error, sizeof(error), "+-%s", top_field(u, "error_eps", 1, c[2]));
        top_line(out, "%-24s %9s %10s  %-17s",
                 top_customer_id(json_object_get(u, "customer_id"), c[0]),
                 top_field(u, "rate_eps", 1, c[1]), strcmp(c[2], "-") != 0 ? error : "-",
                 top_share(u, c[3]));
    }
}

/* The latest few growths, newest first, by "at" (ISO 8601 UTC sorts as text): whatever order
 * the node keeps them in. */
static void top_render_growths(const json_t *doc, FILE *out)
{
    top_line(out, "\n%-20s  %-10s  %-12s  %s", "GROWTH AT", "DAY", "SHARDS", "REASON");
    const json_t *list = top_list(doc, "growths", out);
    size_t picks[TOP_GROWTH_ROWS_MAX];
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(list); i++) {
        const char *at = json_string_value(json_object_get(json_array_get(list, i), "at"));
        at = at != NULL ? at : "";
        size_t slot = n < TOP_GROWTH_ROWS_MAX ? n++ : TOP_GROWTH_ROWS_MAX;
        for (; slot > 0; slot--) {
            const json_t *prev = json_array_get(list, picks[slot - 1]);
            const char *prev_at = json_string_value(json_object_get(prev, "at"));
            if (strcmp(prev_at != NULL ? prev_at : "", at) > 0) {
                break;
            }
            if (slot < TOP_GROWTH_ROWS_MAX) {
                picks[slot] = picks[slot - 1];
            }
        }
        if (slot < TOP_GROWTH_ROWS_MAX) {
            picks[slot] = i;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *g = json_array_get(list, picks[i]);
        char c[5][TOP_CELL_SIZE];
        top_line(out, "%-20s  %-10s  %4s -> %-4s  %s", top_field(g, "at", 0, c[0]),
                 top_field(g, "day", 0, c[1]), top_field(g, "from", 0, c[2]),
                 top_field(g, "to", 0, c[3]), top_field(g, "reason", 0, c[4]));
    }
}

/* text folded over at most TOP_ADVICE_TEXT_LINES lines after `label` (TOP_ADVICE_INDENT
 * columns), control bytes replaced as in a cell; a longer text ends in '~'. */
static void top_fold(FILE *out, const char *label, const char *text)
{
    enum { WIDTH = TOP_COLUMNS - TOP_ADVICE_INDENT };
    char clean[TOP_ADVICE_TEXT_LINES * WIDTH + 1];
    size_t len = 0;
    for (const unsigned char *p = (const unsigned char *)text;
         *p != '\0' && len < sizeof(clean) - 1; p++) {
        bool c1 = p[0] == 0xC2u && p[1] >= 0x80u && p[1] <= 0x9Fu;
        clean[len++] = *p < 0x20u || *p == 0x7Fu || c1 ? '?' : (char)*p;
        p += c1 ? 1 : 0;
    }
    bool cut = len == sizeof(clean) - 1 && strlen(text) > len;
    clean[len] = '\0';
    if (cut) {
        len = utf8_cut(clean, len - 1);
        clean[len++] = '~';
        clean[len] = '\0';
    }
    for (size_t at = 0, line = 0; at < len && line < TOP_ADVICE_TEXT_LINES; line++) {
        size_t n = len - at;
        if (n > WIDTH) {
            n = utf8_cut(clean + at, WIDTH);
            n = n > 0 ? n : WIDTH;
        }
        top_line(out, "%-*s%.*s", (int)TOP_ADVICE_INDENT, line == 0 ? label : "", (int)n,
                 clean + at);
        at += n;
    }
}

/* The advice of the node (hot spots more shards cannot relieve), under the tables: a line with
 * the case and subject, then the evidence and the remedy. Nothing when there is none. */
static void top_render_advice(const json_t *doc, FILE *out)
{
    const json_t *list = json_object_get(doc, "advice");
    size_t rows = json_array_size(list);
    if (rows == 0) {
        return;
    }
    top_line(out, "\nADVICE: MORE SHARDS CANNOT HELP");
    for (size_t i = 0; i < rows && i < TOP_ADVICE_ROWS_MAX; i++) {
        const json_t *a = json_array_get(list, i);
        char c[2][TOP_CELL_SIZE];
        top_line(out, "%s  %s", top_cell(json_object_get(a, "case"), 0, 24, c[0]),
                 top_cell(json_object_get(a, "subject"), 0, TOP_COLUMNS - 30, c[1]));
        const char *evidence = json_string_value(json_object_get(a, "evidence"));
        const char *remedy = json_string_value(json_object_get(a, "remedy"));
        top_fold(out, "  why", evidence != NULL ? evidence : "-");
        top_fold(out, "  fix", remedy != NULL ? remedy : "-");
    }
}

/* One frame of a heat document (borrowed): pure, it reads nothing but doc and a. */
static void top_render(const json_t *doc, const struct top_args *a, FILE *out)
{
    top_render_header(doc, a, out);
    top_render_partitions(doc, a, out);
    top_render_days(doc, a, out);
    top_render_kafka(doc, a, out);
    top_render_customers(doc, a, out);
    top_render_growths(doc, out);
    top_render_advice(doc, out);
}

/* The frame while the node does not answer: the error (from top_fetch, at most TOP_ERROR_SIZE
 * bytes) folded over as many lines as it takes, rather than cut where the cause begins. */
static void top_render_error(const char *error, const struct top_args *a, FILE *out)
{
    char server[TOP_CELL_SIZE];
    top_line(out, "dayshard top  %s", top_text(a->server, 48, server));
    top_line(out, "\nno heat document:");
    size_t len = strlen(error);
    ASSERT(len < TOP_ERROR_SIZE);
    for (size_t at = 0; at < len;) {
        size_t n = len - at;
        if (n > TOP_COLUMNS - 2) {
            n = utf8_cut(error + at, TOP_COLUMNS - 2);
            n = n > 0 ? n : TOP_COLUMNS - 2; /* not UTF-8 after all: cut anywhere */
        }
        top_line(out, "  %.*s", (int)n, error + at);
        at += n;
    }
    top_line(out, "trying again every %llu ms", (unsigned long long)a->interval_ms);
}

/* ---- fetching and showing ------------------------------------------------------------------ */

/* GETs the heat document into *doc (the caller decrefs it). On failure returns a negative code
 * with error set to "URL: cause" (control bytes replaced) and leaves *doc NULL. */
static int top_fetch(const struct top_args *a, json_t **doc, char *error, size_t error_capacity)
{
    char path[64];
    snprintf(path, sizeof(path), "/v1/heat?top=%u", (unsigned)a->rows);
    size_t base_len = strlen(a->server);
    while (base_len > 0 && a->server[base_len - 1] == '/') {
        base_len--;
    }
    *doc = NULL;
    struct http_client_answer ans;
    int rc = http_client_get(a->server, path, a->token, &ans);
    if (rc != 0) {
        snprintf(error, error_capacity, "%.*s%s: %s", (int)base_len, a->server, path, ans.error);
    } else if (ans.status != 200) {
        snprintf(error, error_capacity, "%.*s%s answered %ld: %s%s", (int)base_len, a->server, path,
                 ans.status, ans.error,
                 ans.status == 404 ? " (a node older than the heat view?)" : "");
        rc = -EIO;
    } else {
        json_error_t err;
        *doc = json_loadb(ans.body, ans.body_len, 0, &err);
        if (!json_is_object(*doc)) {
            snprintf(error, error_capacity, "%.*s%s: not a heat document (%s)", (int)base_len,
                     a->server, path, *doc == NULL ? err.text : "not a JSON object");
            json_decref(*doc);
            *doc = NULL;
            rc = -DS_ECORRUPT;
        }
    }
    http_client_answer_deinit(&ans);
    for (char *p = error; rc != 0 && *p != '\0'; p++) {
        *p = (unsigned char)*p < 0x20u || *p == 0x7F ? '?' : *p;
    }
    return rc;
}

/* One request and its frame, into frame[0..capacity); returns the frame's length (0: out of
 * memory). */
static size_t top_build(const struct top_args *a, char *frame, size_t capacity)
{
    FILE *out = fmemopen(frame, capacity, "w");
    if (out == NULL) {
        return 0;
    }
    json_t *doc = NULL;
    char error[TOP_ERROR_SIZE];
    if (top_fetch(a, &doc, error, sizeof(error)) == 0) {
        top_render(doc, a, out);
    } else {
        top_render_error(error, a, out);
    }
    json_decref(doc);
    long len = ftell(out);
    fclose(out);
    ASSERT(len >= 0);
    return (size_t)len < capacity ? (size_t)len : capacity - 1;
}

/* The bytes that show a frame: on a terminal "home, clear", then at most a window's height less
 * one line (so nothing scrolls), each line cut to its width; elsewhere the frame as it is, after
 * a blank line unless it is the first. screen has TOP_SCREEN_BYTES_MAX bytes; returns the
 * length used. */
static size_t top_screen(const char *frame, size_t len, bool tty, bool first, char *screen)
{
    ASSERT(len <= TOP_FRAME_BYTES_MAX);
    if (!tty) {
        size_t n = first ? 0 : 1;
        screen[0] = '\n';
        memcpy(screen + n, frame, len);
        return n + len;
    }
    struct winsize ws = {0};
    size_t rows = SIZE_MAX;
    size_t columns = SIZE_MAX;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 1 && ws.ws_col > 0) {
        rows = ws.ws_row - 1u;
        columns = ws.ws_col;
    }
    static const char home_clear[] = "\033[H\033[2J";
    size_t n = sizeof(home_clear) - 1;
    memcpy(screen, home_clear, n);
    const char *p = frame;
    const char *end = frame + len;
    for (size_t row = 0; row < rows && p < end; row++) {
        const char *newline = memchr(p, '\n', (size_t)(end - p));
        size_t line_len = newline != NULL ? (size_t)(newline - p) : (size_t)(end - p);
        size_t keep = line_len > columns ? utf8_cut(p, columns) : line_len;
        memcpy(screen + n, p, keep);
        n += keep;
        screen[n++] = '\n';
        p += line_len + 1;
    }
    ASSERT(n <= TOP_SCREEN_BYTES_MAX);
    return n;
}

/* Writes all of buf to fd, past short writes and interruptions; returns 0 or -errno. */
static int top_write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) { /* each turn writes at least a byte, is interrupted, or fails */
        ssize_t written = write(fd, buf, len);
        if (written < 0 && errno == EINTR) {
            continue;
        }
        if (written <= 0) {
            return written < 0 ? -errno : -EIO;
        }
        buf += written;
        len -= (size_t)written;
    }
    return 0;
}

/* Waits until deadline_ns (ds_clock_ns) or a signal of stop; true for a signal. */
static bool top_wait(const sigset_t *stop, uint64_t deadline_ns)
{
    for (;;) { /* each turn ends in a signal, the deadline, or an interruption by another one */
        uint64_t now_ns = ds_clock_ns();
        uint64_t left_ns = deadline_ns > now_ns ? deadline_ns - now_ns : 0;
        struct timespec left = {.tv_sec = (time_t)(left_ns / 1000000000u),
                                .tv_nsec = (long)(left_ns % 1000000000u)};
        if (sigtimedwait(stop, NULL, &left) > 0) {
            return true;
        }
        if (errno != EINTR) {
            ASSERT(errno == EAGAIN);
            return false;
        }
    }
}

/* Frames go out with write(2), one call each, rather than through stdout: a terminal's line
 * buffering would split a frame into a write per line (flicker), and a bigger stdio buffer
 * would have to outlive this function. */
static int top_live(const struct top_args *a)
{
    /* Blocked before the first request, so the HTTP client's resolver threads inherit it. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    int rc = sigprocmask(SIG_BLOCK, &stop, NULL);
    ASSERT(rc == 0);
    char *frame = malloc(TOP_FRAME_BYTES_MAX + TOP_SCREEN_BYTES_MAX);
    if (frame == NULL) {
        return cli_error("top", CLI_FAIL, "out of memory");
    }
    char *screen = frame + TOP_FRAME_BYTES_MAX;
    bool tty = isatty(STDOUT_FILENO) == 1;
    int exit_code = CLI_OK;
    for (uint64_t n = 0;; n++) { /* runs until a stop signal: one request and one frame a turn */
        uint64_t start_ns = ds_clock_ns();
        size_t len = top_build(a, frame, TOP_FRAME_BYTES_MAX);
        rc = len > 0
                 ? top_write_all(STDOUT_FILENO, screen, top_screen(frame, len, tty, n == 0, screen))
                 : -ENOMEM;
        if (rc != 0) {
            exit_code = cli_error("top", CLI_FAIL, "cannot show a frame: %s", ds_strerror(rc));
            break;
        }
        if (top_wait(&stop, start_ns + a->interval_ms * 1000000u)) {
            break;
        }
    }
    free(frame);
    return exit_code;
}

static int top_once(const struct top_args *a)
{
    json_t *doc = NULL;
    char error[TOP_ERROR_SIZE];
    if (top_fetch(a, &doc, error, sizeof(error)) != 0) {
        return cli_error("top", CLI_FAIL, "%s", error);
    }
    top_render(doc, a, stdout);
    json_decref(doc);
    if (fflush(stdout) != 0) {
        return cli_error("top", CLI_FAIL, "standard output: %s", strerror(errno));
    }
    return CLI_OK;
}

int cmd_top(int argc, char **argv)
{
    struct top_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != 0) {
        return rc == -1 ? cli_help(cmd_top_usage) : rc;
    }
    return a.once ? top_once(&a) : top_live(&a);
}
