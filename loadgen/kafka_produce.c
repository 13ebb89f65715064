/*
 * The producer and load generator behind `dayshard produce`: JSON events from a file, stdin or
 * the workload generator, sent to one Kafka topic keyed as cfg->key says (produce_key.c),
 * idempotent and compressed, then every delivery report awaited (bounded by flush_timeout_ms).
 *
 * Pacing is open loop, as a load test needs: event i is due at start + its send time (the
 * generator's schedule, or i / rate for input lines); the producer waits for that moment, and
 * when it is late it sends at once until it has caught up, never skipping an event and never
 * moving the schedule. So a slow pipeline shows as lag in Kafka, not as a slower producer;
 * how far behind the producer itself ever fell is reported (behind_max_s) and warned about,
 * and each event's own delay (taken minus due) goes to cfg->on_sent for the load test.
 * Only the caller's pause (cfg->pause, the soak's guard for a broker that keeps little) moves
 * the schedule: by exactly the time held, so the producer resumes at its rate, not in a burst.
 *
 * Invariants: everything here runs on the calling thread. librdkafka's delivery-report and
 * error callbacks are served only by rd_kafka_poll()/rd_kafka_flush() on this thread, so the
 * counters need no atomics; the log callback runs on librdkafka's threads and touches only
 * ds_log. An event is counted in sent exactly when rd_kafka_produce() took it, so after the
 * final flush sent == acked + (failed or never delivered); failed is reported as sent - acked.
 * A full local queue is never a reason to drop: we serve delivery reports and retry.
 * Bad events are sent as they are (the consumer's dead-letter path must see them); only blank
 * lines and lines over the message size limit are skipped, and counted.
 *
 * Input lines are cut from one fixed read buffer with memchr and copied by librdkafka
 * (RD_KAFKA_MSG_F_COPY), so nothing is allocated per event on our side.
 *
 * Rejected: a token bucket that may catch up only a few milliseconds of events after a stall (the
 * previous design): a stalled producer became a slower one, hiding the very lag a load test
 * measures, and a flash-sale schedule could not be followed at all;
 * rd_kafka_producev() (it parses varargs and looks the topic up for every message,
 * which rd_kafka_produce() with a topic handle does not); generating or reading on a thread
 * apart from the polling one (profiled, this thread and librdkafka's broker thread already take
 * about half of the CPU each, so on two cores a third busy thread would only contend, and the
 * callbacks would need atomics);
 * leaving outstanding messages to rd_kafka_destroy() after a flush timeout (it would block on
 * them; purging first turns them into failed delivery reports at once).
 */
#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ingest/ingest.h"
#include "loadgen/loadgen.h"
#include "shard/shard.h"

/* Used when the caller leaves flush_timeout_ms at 0: a minute covers broker fail-over and
 * leader elections of a real cluster without hanging a script forever. */
#define PRODUCE_FLUSH_TIMEOUT_MS_DEFAULT 60000u
/* Longer input lines are skipped: librdkafka's default message.max.bytes is 1,000,000, so
 * nothing longer could be sent without changing the broker too. */
#define PRODUCE_LINE_BYTES_MAX (1024u * 1024u)
/* The read buffer: a maximal line plus room for 3 MiB of reads, so reads stay large. */
#define PRODUCE_READ_BYTES (4u * PRODUCE_LINE_BYTES_MAX)
/* Delivery reports are served every this many messages: about once a millisecond at full
 * speed, often enough to keep the local queue from filling. */
#define PRODUCE_POLL_EVERY 1024u
/* The progress line is rewritten about four times a second. */
#define PRODUCE_PROGRESS_NS 250000000ull
/* Waiting steps: a full queue waits in 1 ms steps; the input waits in 100 ms steps; pacing
 * waits until the next event is due (rounded up to the millisecond, so an event is at most about
 * a millisecond late) but at most 100 ms at a time, so that a stop request, delivery reports
 * and the progress line are served during long gaps of a schedule. */
#define PRODUCE_STEP_MS 1
#define PRODUCE_INPUT_WAIT_MS 100
#define PRODUCE_PACE_WAIT_MS_MAX 100u
/* Falling further behind the schedule than this is worth a warning: well above the millisecond
 * jitter of the waits and of linger.ms, well below what a load test reads as lag. */
#define PRODUCE_BEHIND_WARN_S 1.0
/* Send times are capped here (about 31 years) so that their nanoseconds fit in 64 bits. */
#define PRODUCE_DUE_S_MAX 1e9
/* After a flush timeout, purged messages get their (failed) reports within this time. */
#define PRODUCE_PURGE_WAIT_MS 1000
#define PRODUCE_ERROR_BYTES_MAX 512u
/* *stop at 1 stops sending; at 2 or more (a second signal) it also abandons the final wait. */
#define PRODUCE_STOP_NOW 2

_Static_assert(PRODUCE_READ_BYTES > 2u * PRODUCE_LINE_BYTES_MAX,
               "a maximal line must leave room for a large read");
_Static_assert(INGEST_EVENT_BYTES_MAX <= PRODUCE_LINE_BYTES_MAX,
               "every event size the consumer accepts, and a bit more, can be sent");

struct produce_input {
    int fd;
    char *buf; /* PRODUCE_READ_BYTES, unconsumed bytes are [start, end) */
    size_t start;
    size_t end;
    bool eof;
    bool discarding; /* inside an over-long line, dropping bytes up to its newline */
    uint64_t line_number;
};

/* One message about to be sent; value and key point into the producer or its input buffer. */
struct produce_message {
    const char *value;
    size_t value_len;
    const char *key; /* NULL: unkeyed */
    size_t key_len;
    uint64_t line_number; /* 0 for generated events */
};

struct produce {
    const struct loadgen_produce_config *cfg;
    const volatile int *stop;
    rd_kafka_t *rk;
    rd_kafka_topic_t *rkt;
    struct loadgen_workload *workload; /* when generating */
    struct produce_input input;        /* when reading */
    double rate_eps;                   /* the schedule's rate; 0 = as fast as possible */
    uint32_t base_shards;              /* S(day) when the shard map does not say */
    uint64_t lines_taken;              /* input lines taken to send: the next one's index */
    uint64_t sent;
    uint64_t acked;
    uint64_t failed;
    uint64_t skipped;
    bool fatal;
    rd_kafka_resp_err_t first_delivery_error;
    char last_error[PRODUCE_ERROR_BYTES_MAX]; /* the last client error, for the final reason */
    uint64_t start_ns;                        /* the schedule's origin */
    uint64_t due_ns; /* when the event about to be sent is due (paced), for cfg->on_sent */
    double behind_max_s;
    uint64_t paused_ns; /* held by cfg->pause, in all */
    uint64_t progress_ns;
    uint64_t progress_acked;
    bool progress_shown;
    char json[LOADGEN_WORKLOAD_LINE_BYTES_MAX]; /* a generated line, items included */
    char key[LOADGEN_PRODUCE_KEY_BYTES_MAX];
};

/* ---- librdkafka callbacks (delivery reports and errors on the polling thread) ----------- */

static void produce_on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    (void)rk;
    struct produce *p = opaque;
    ASSERT(p != NULL);
    if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        p->acked++;
        if (p->cfg->acked_live != NULL) {
            atomic_store_explicit(p->cfg->acked_live, p->acked, memory_order_relaxed);
        }
    } else {
        if (p->failed == 0) {
            p->first_delivery_error = msg->err;
        }
        p->failed++;
    }
    ASSERT(p->acked + p->failed <= p->sent);
}

static void produce_on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    struct produce *p = opaque;
    ASSERT(p != NULL);
    if (err != RD_KAFKA_RESP_ERR__FATAL) {
        /* librdkafka retries these itself and logs them through kafka_log; keep the
         * latest one to explain a flush timeout. */
        snprintf(p->last_error, sizeof(p->last_error), "%s", reason);
        ds_log_debug("produce: client error (retried): %s", reason);
        return;
    }
    char fatal[PRODUCE_ERROR_BYTES_MAX];
    rd_kafka_resp_err_t code = rd_kafka_fatal_error(rk, fatal, sizeof(fatal));
    if (!p->fatal) {
        ds_log_error("produce: fatal producer error: %s: %s", rd_kafka_err2name(code), fatal);
    }
    snprintf(p->last_error, sizeof(p->last_error), "%s", fatal);
    p->fatal = true;
}

/* ---- setup ---------------------------------------------------------------------------- */

/* Our defaults, then the caller's properties over them. Returns 0 or -DS_EUSAGE (logged). */
static int produce_configure(struct produce *p, rd_kafka_conf_t *conf)
{
    /* linger.ms 5 fills batches at high rates without a visible delay at low ones; lz4 costs
     * the least CPU per byte of the codecs this librdkafka has; 50000 queued messages are
     * ~40 ms of sending at full speed (~20 MiB), enough to ride out a slow broker turn; against
     * the mock broker smaller queues cost slightly less CPU per event than 100000 (measured). */
    static const char *const defaults[][2] = {
        {"client.id", "dayshard-produce"},
        {"enable.idempotence", "true"},
        {"compression.codec", "lz4"},
        {"linger.ms", "5"},
        {"batch.num.messages", "10000"},
        {"batch.size", "1000000"},
        {"queue.buffering.max.messages", "50000"},
        {"queue.buffering.max.kbytes", "262144"},
    };
    char err[PRODUCE_ERROR_BYTES_MAX];
    if (rd_kafka_conf_set(conf, "bootstrap.servers", p->cfg->brokers, err, sizeof(err)) !=
        RD_KAFKA_CONF_OK) {
        ds_log_error("produce: brokers '%s': %s", p->cfg->brokers, err);
        return -DS_EUSAGE;
    }
    for (size_t i = 0; i < DS_ARRAY_LEN(defaults); i++) {
        rd_kafka_conf_res_t res =
            rd_kafka_conf_set(conf, defaults[i][0], defaults[i][1], err, sizeof(err));
        ASSERT(res == RD_KAFKA_CONF_OK);
    }
    if (ingest_kafka_props_apply(p->cfg->props, INGEST_KAFKA_PRODUCER, conf, err, sizeof(err)) !=
        0) {
        ds_log_error("produce: Kafka property refused: %s", err);
        return -DS_EUSAGE;
    }
    rd_kafka_conf_set_opaque(conf, p);
    rd_kafka_conf_set_dr_msg_cb(conf, produce_on_delivery);
    rd_kafka_conf_set_error_cb(conf, produce_on_error);
    ingest_kafka_conf_set_log(conf);
    return 0;
}

/* Creates the producer and the topic handle. Returns 0 or -DS_EUSAGE / -DS_EKAFKA (logged). */
static int produce_client_create(struct produce *p)
{
    ASSERT(p->rk == NULL);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    ASSERT(conf != NULL);
    int rc = produce_configure(p, conf);
    if (rc != 0) {
        rd_kafka_conf_destroy(conf);
        return rc;
    }
    char err[PRODUCE_ERROR_BYTES_MAX];
    p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    if (p->rk == NULL) {
        /* rd_kafka_new() fails on contradicting settings (acks=1 with idempotence...). */
        rd_kafka_conf_destroy(conf);
        ds_log_error("produce: cannot create the Kafka producer: %s", err);
        return -DS_EUSAGE;
    }
    p->rkt = rd_kafka_topic_new(p->rk, p->cfg->topic, NULL);
    if (p->rkt == NULL) {
        ds_log_error("produce: topic '%s': %s", p->cfg->topic,
                     rd_kafka_err2str(rd_kafka_last_error()));
        return -DS_EKAFKA;
    }
    return 0;
}

/* The generator, its schedule at the producer's rate (or at its own when the producer has
 * none), or the input buffer. Returns 0 or an error (logged). */
static int produce_source_create(struct produce *p)
{
    const struct loadgen_produce_config *cfg = p->cfg;
    if (cfg->input_fd < 0) {
        struct loadgen_workload_config workload = cfg->workload;
        if (cfg->rate > 0) {
            workload.rate_eps = (double)cfg->rate;
        }
        p->rate_eps = workload.rate_eps;
        int rc = loadgen_workload_create(&workload, &p->workload);
        if (rc != 0) {
            ds_log_error("produce: invalid workload: %s", ds_strerror(rc));
        }
        return rc;
    }
    p->rate_eps = (double)cfg->rate;
    p->input.fd = cfg->input_fd;
    p->input.buf = malloc(PRODUCE_READ_BYTES);
    if (p->input.buf == NULL) {
        ds_log_error("produce: no memory for the %u-byte read buffer", PRODUCE_READ_BYTES);
        return -ENOMEM;
    }
    return 0;
}

/* ---- progress, stopping, pacing ------------------------------------------------------- */

static bool produce_stopping(const struct produce *p)
{
    return p->fatal || (p->stop != NULL && *p->stop != 0);
}

static void produce_progress(struct produce *p)
{
    FILE *out = p->cfg->progress_file;
    if (out == NULL) {
        return;
    }
    uint64_t now = ds_clock_ns();
    uint64_t elapsed = now - p->progress_ns;
    if (elapsed < PRODUCE_PROGRESS_NS) {
        return;
    }
    double per_second = (double)(p->acked - p->progress_acked) * 1e9 / (double)elapsed;
    fprintf(out, "\rsent %llu, acked %llu, failed %llu, %.0f events/s   ",
            (unsigned long long)p->sent, (unsigned long long)p->acked,
            (unsigned long long)p->failed, per_second);
    fflush(out);
    p->progress_ns = now;
    p->progress_acked = p->acked;
    p->progress_shown = true;
}

/* The send time of the event about to be sent, in seconds from the start. */
static double produce_due_s(const struct produce *p)
{
    if (p->workload != NULL) {
        return loadgen_workload_send_time(p->workload);
    }
    ASSERT(p->lines_taken >= 1);
    return (double)(p->lines_taken - 1) / p->rate_eps;
}

/* Waits until the event about to be sent is due, serving delivery reports; when it is already
 * due, returns at once and records how late it is. Returns false when asked to stop first. */
static bool produce_pace(struct produce *p)
{
    ASSERT(p->rate_eps > 0.0);
    double due_s = produce_due_s(p);
    ASSERT(due_s >= 0.0);
    /* Past PRODUCE_DUE_S_MAX (a slow rate over a long stream) an event is simply never due. */
    uint64_t due_ns =
        p->start_ns + (uint64_t)((due_s < PRODUCE_DUE_S_MAX ? due_s : PRODUCE_DUE_S_MAX) * 1e9);
    p->due_ns = due_ns;
    for (;;) {
        uint64_t now = ds_clock_ns();
        if (now >= due_ns) {
            double behind_s = (double)(now - due_ns) / 1e9;
            if (behind_s > p->behind_max_s) {
                p->behind_max_s = behind_s;
            }
            return true;
        }
        if (produce_stopping(p)) {
            return false;
        }
        uint64_t wait_ms = (due_ns - now + 999999u) / 1000000u;
        rd_kafka_poll(
            p->rk, (int)(wait_ms < PRODUCE_PACE_WAIT_MS_MAX ? wait_ms : PRODUCE_PACE_WAIT_MS_MAX));
        produce_progress(p);
    }
}

/* Holds the producer while *cfg->pause is non-zero, serving delivery reports, then moves the
 * schedule's origin on by the time held: the events due meanwhile are due that much later, so
 * the producer resumes at its rate instead of catching up in a burst. Returns false when asked
 * to stop first. */
static bool produce_hold(struct produce *p)
{
    const atomic_int *pause = p->cfg->pause;
    if (pause == NULL || atomic_load_explicit(pause, memory_order_relaxed) == 0) {
        return true;
    }
    uint64_t held_from = ds_clock_ns();
    while (atomic_load_explicit(pause, memory_order_relaxed) != 0) { /* until released */
        if (produce_stopping(p)) {
            return false;
        }
        rd_kafka_poll(p->rk, PRODUCE_PACE_WAIT_MS_MAX / 10u);
        produce_progress(p);
    }
    uint64_t held_ns = ds_clock_ns() - held_from;
    p->start_ns += held_ns;
    p->paused_ns += held_ns;
    return true;
}

/* ---- sources: the generator and JSON lines ----------------------------------------------- */

/* Keys m by the event under cfg->key. */
static void produce_key_set(struct produce *p, const struct ds_event *event,
                            struct produce_message *m)
{
    int n = loadgen_produce_key_format(p->cfg->key, event, p->base_shards, p->key, sizeof(p->key),
                                       p->cfg->shards_of_day, p->cfg->shards_user);
    ASSERT(n > 0);
    m->key = p->key;
    m->key_len = (size_t)n;
}

/* Returns 1 with the next generated event in *m, or 0 at the end. */
static int produce_next_generated(struct produce *p, struct produce_message *m)
{
    struct ds_event event;
    if (!loadgen_workload_next(p->workload, &event)) {
        return 0;
    }
    int n = loadgen_workload_line(p->workload, p->json, sizeof(p->json));
    ASSERT(n > 0);
    *m = (struct produce_message){.value = p->json, .value_len = (size_t)n};
    produce_key_set(p, &event, m);
    return 1;
}

/* Waits until the input has bytes (or end of file) while serving delivery reports, so that a
 * slow pipe neither freezes the counters nor ignores a stop request. Returns 1 when readable,
 * 0 when asked to stop, or a negated errno. */
static int produce_input_wait(struct produce *p)
{
    struct pollfd pfd = {.fd = p->input.fd, .events = POLLIN};
    int timeout_ms = 0;
    for (;;) {
        int n = poll(&pfd, 1, timeout_ms);
        if (n > 0) {
            return 1;
        }
        if (n < 0 && errno != EINTR) {
            int err = -errno;
            ds_log_error("produce: cannot wait for input: %s", ds_strerror(err));
            return err;
        }
        if (produce_stopping(p)) {
            return 0;
        }
        rd_kafka_poll(p->rk, 0);
        produce_progress(p);
        timeout_ms = PRODUCE_INPUT_WAIT_MS;
    }
}

/* Moves the unconsumed bytes to the front and reads more. Returns 1 on progress (bytes or end of
 * file), 0 when asked to stop, or a negated errno. */
static int produce_input_fill(struct produce *p)
{
    struct produce_input *in = &p->input;
    ASSERT(!in->eof);
    ASSERT(in->end - in->start <= PRODUCE_LINE_BYTES_MAX);
    memmove(in->buf, in->buf + in->start, in->end - in->start);
    in->end -= in->start;
    in->start = 0;
    int rc = produce_input_wait(p);
    if (rc <= 0) {
        return rc;
    }
    ssize_t n = read(in->fd, in->buf + in->end, PRODUCE_READ_BYTES - in->end);
    if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) {
            return 1;
        }
        int err = -errno;
        ds_log_error("produce: cannot read input after line %llu: %s",
                     (unsigned long long)in->line_number, ds_strerror(err));
        return err;
    }
    in->end += (size_t)n;
    in->eof = n == 0;
    return 1;
}

static void produce_skip_long(struct produce *p)
{
    p->skipped++;
    ds_log_warn("produce: line %llu skipped: longer than %u bytes",
                (unsigned long long)p->input.line_number, PRODUCE_LINE_BYTES_MAX);
}

/* Cuts the next line (without its newline) from the input. Over-long lines are dropped and
 * counted as skipped here. Returns 1 with a line, 0 at the end or when asked to stop, or a
 * negated errno. */
static int produce_input_line(struct produce *p, const char **line, size_t *len)
{
    struct produce_input *in = &p->input;
    for (;;) {
        char *begin = in->buf + in->start;
        size_t avail = in->end - in->start;
        char *newline = avail > 0 ? memchr(begin, '\n', avail) : NULL;
        if (newline != NULL || (in->eof && avail > 0)) {
            size_t line_len = newline != NULL ? (size_t)(newline - begin) : avail;
            in->start += newline != NULL ? line_len + 1 : line_len;
            if (in->discarding) {
                in->discarding = false; /* the tail of an over-long line, already counted */
                continue;
            }
            in->line_number++;
            if (line_len > PRODUCE_LINE_BYTES_MAX) {
                produce_skip_long(p);
                continue;
            }
            *line = begin;
            *len = line_len;
            return 1;
        }
        if (in->eof) {
            return 0;
        }
        if (avail > PRODUCE_LINE_BYTES_MAX) {
            if (!in->discarding) {
                in->line_number++;
                produce_skip_long(p);
            }
            in->discarding = true;
            in->start = in->end;
        }
        int rc = produce_input_fill(p);
        if (rc <= 0) {
            return rc;
        }
    }
}

static bool produce_blank(const char *line, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r') {
            return false;
        }
    }
    return true;
}

/* Keys an input line under cfg->key when it can: the order key needs only a readable order_id
 * (ingest_decode_order_id, the fast path), the others decode the whole event. A line that
 * cannot be keyed goes unkeyed: the consumer's dead-letter path must see it as it is. */
static void produce_key_line(struct produce *p, const char *line, size_t len,
                             struct produce_message *m)
{
    struct ds_event event;
    if (p->cfg->key == LOADGEN_PRODUCE_KEY_ORDER) {
        /* Order mode reads only order_id: the rest of event stays unset. */
        if (ingest_decode_order_id(line, len, &event.order_id) == 0) {
            produce_key_set(p, &event, m);
        }
        return;
    }
    struct ingest_error error;
    if (ingest_decode(line, len, &event, &error) == 0) {
        produce_key_set(p, &event, m);
    }
}

/* Returns 1 with the next non-blank input line in *m (keyed when it can be), 0 at the end or
 * when asked to stop, or a negated errno. */
static int produce_next_line(struct produce *p, struct produce_message *m)
{
    const char *line = NULL;
    size_t len = 0;
    for (;;) {
        int rc = produce_input_line(p, &line, &len);
        if (rc <= 0) {
            return rc;
        }
        if (!produce_blank(line, len)) {
            break;
        }
        p->skipped++;
    }
    *m = (struct produce_message){
        .value = line, .value_len = len, .line_number = p->input.line_number};
    p->lines_taken++;
    produce_key_line(p, line, len, m);
    return 1;
}

/* ---- sending ------------------------------------------------------------------------------ */

/* Hands one message to librdkafka, serving delivery reports while its queue is full. Returns 0
 * (sent, skipped as too large, or abandoned because asked to stop) or -DS_EKAFKA (logged). */
static int produce_send(struct produce *p, const struct produce_message *m)
{
    ASSERT(m->value != NULL);
    ASSERT(m->key == NULL || m->key_len > 0);
    for (;;) {
        if (rd_kafka_produce(p->rkt, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY, (void *)m->value,
                             m->value_len, m->key, m->key_len, NULL) == 0) {
            p->sent++;
            if (p->cfg->on_sent != NULL && p->rate_eps > 0.0) {
                /* Taken now, after any wait on a full queue: that wait is part of the delay. */
                p->cfg->on_sent(p->due_ns, ds_clock_ns(), p->cfg->sent_user);
            }
            return 0;
        }
        rd_kafka_resp_err_t err = rd_kafka_last_error();
        if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(p->rk, PRODUCE_STEP_MS);
            produce_progress(p);
            if (produce_stopping(p)) {
                return 0;
            }
            continue;
        }
        if (err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE) {
            p->skipped++;
            ds_log_warn("produce: line %llu skipped: %zu bytes is over message.max.bytes",
                        (unsigned long long)m->line_number, m->value_len);
            return 0;
        }
        if (err == RD_KAFKA_RESP_ERR__FATAL) {
            rd_kafka_poll(p->rk, 0); /* produce_on_error logs the cause and sets p->fatal */
            p->fatal = true;
            return 0;
        }
        ds_log_error("produce: cannot send to topic '%s': %s", p->cfg->topic,
                     rd_kafka_err2str(err));
        return -DS_EKAFKA;
    }
}

/* Sends every event of the source until it ends or a stop is requested. Returns 0 or the
 * first error (logged). */
static int produce_send_all(struct produce *p)
{
    uint32_t since_poll = 0;
    for (;;) {
        if (produce_stopping(p)) {
            return 0;
        }
        struct produce_message m;
        int rc = p->workload != NULL ? produce_next_generated(p, &m) : produce_next_line(p, &m);
        if (rc <= 0) {
            return rc;
        }
        if (!produce_hold(p) || (p->rate_eps > 0.0 && !produce_pace(p))) {
            return 0;
        }
        rc = produce_send(p, &m);
        if (rc != 0) {
            return rc;
        }
        if (++since_poll == PRODUCE_POLL_EVERY) {
            since_poll = 0;
            rd_kafka_poll(p->rk, 0);
            produce_progress(p);
        }
    }
}

/* Waits (bounded) for every delivery report; purges what is still outstanding so that it is
 * reported as failed. Returns 0 when everything sent was acknowledged, else -DS_EKAFKA. */
static int produce_finish(struct produce *p)
{
    uint32_t timeout_ms =
        p->cfg->flush_timeout_ms != 0 ? p->cfg->flush_timeout_ms : PRODUCE_FLUSH_TIMEOUT_MS_DEFAULT;
    uint64_t deadline = ds_clock_ns() + (uint64_t)timeout_ms * 1000000u;
    bool interrupted = false;
    while (p->acked + p->failed < p->sent && !p->fatal) {
        uint64_t now = ds_clock_ns();
        interrupted = p->stop != NULL && *p->stop >= PRODUCE_STOP_NOW;
        if (now >= deadline || interrupted) {
            break;
        }
        uint64_t left_ms = (deadline - now + 999999u) / 1000000u;
        rd_kafka_flush(p->rk, (int)(left_ms < 250 ? left_ms : 250));
        produce_progress(p);
    }
    uint64_t outstanding = p->sent - p->acked - p->failed;
    if (outstanding > 0) {
        char when[64];
        snprintf(when, sizeof(when), interrupted ? "(the wait was interrupted)" : "within %u ms",
                 timeout_ms);
        ds_log_error("produce: %llu events not acknowledged %s%s%s",
                     (unsigned long long)outstanding, when,
                     p->last_error[0] != '\0' ? "; last client error: " : "", p->last_error);
        rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_flush(p->rk, PRODUCE_PURGE_WAIT_MS);
    } else if (p->failed > 0) {
        ds_log_error("produce: %llu events failed delivery, the first with: %s",
                     (unsigned long long)p->failed, rd_kafka_err2str(p->first_delivery_error));
    }
    ASSERT(p->acked + p->failed <= p->sent);
    return p->acked == p->sent && !p->fatal ? 0 : -DS_EKAFKA;
}

static void produce_deinit(struct produce *p)
{
    if (p->rkt != NULL) {
        rd_kafka_topic_destroy(p->rkt);
    }
    if (p->rk != NULL) {
        rd_kafka_destroy(p->rk);
    }
    loadgen_workload_destroy(p->workload);
    free(p->input.buf);
}

/* Checks what librdkafka does not: the key mode and the base shard count. Returns 0 or
 * -DS_EUSAGE (logged). */
static int produce_check(struct produce *p)
{
    const struct loadgen_produce_config *cfg = p->cfg;
    if ((unsigned)cfg->key > LOADGEN_PRODUCE_KEY_PARTITION) {
        ds_log_error("produce: unknown key mode %d", (int)cfg->key);
        return -DS_EUSAGE;
    }
    if (cfg->base_shards > SHARD_COUNT_MAX) {
        ds_log_error("produce: base shard count %u is over %u", cfg->base_shards, SHARD_COUNT_MAX);
        return -DS_EUSAGE;
    }
    p->base_shards = cfg->base_shards != 0 ? cfg->base_shards : SHARD_COUNT_DEFAULT;
    return 0;
}

static int produce_run(struct produce *p)
{
    int rc = produce_check(p);
    if (rc == 0) {
        rc = produce_source_create(p);
    }
    if (rc == 0) {
        rc = produce_client_create(p);
    }
    if (rc != 0) {
        return rc;
    }
    p->start_ns = ds_clock_ns();
    p->progress_ns = p->start_ns;
    int send_rc = produce_send_all(p);
    if (p->behind_max_s > PRODUCE_BEHIND_WARN_S) {
        ds_log_warn("produce: producer fell %.1f s behind its schedule: the producer itself, not "
                    "the pipeline, limited the rate",
                    p->behind_max_s);
    }
    rc = produce_finish(p);
    if (p->progress_shown) {
        fputc('\n', (FILE *)p->cfg->progress_file);
    }
    return send_rc != 0 ? send_rc : rc;
}

int loadgen_produce_run(const struct loadgen_produce_config *cfg,
                        struct loadgen_produce_stats *stats, const volatile int *stop)
{
    ASSERT(cfg != NULL);
    ASSERT(cfg->brokers != NULL);
    ASSERT(cfg->topic != NULL);
    ASSERT(stats != NULL);
    *stats = (struct loadgen_produce_stats){.sent = 0};
    struct produce *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return -ENOMEM;
    }
    p->cfg = cfg;
    p->stop = stop;
    p->input.fd = -1;
    int rc = produce_run(p);
    uint64_t end_ns = ds_clock_ns();
    *stats = (struct loadgen_produce_stats){
        .sent = p->sent,
        .acked = p->acked,
        .failed = p->sent - p->acked,
        .skipped = p->skipped,
        .seconds = p->start_ns != 0 ? (double)(end_ns - p->start_ns) / 1e9 : 0.0,
        .behind_max_s = p->behind_max_s,
        .paused_s = (double)p->paused_ns / 1e9,
    };
    produce_deinit(p);
    free(p);
    return rc;
}
