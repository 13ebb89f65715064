/*
 * The embedded broker: librdkafka's mock cluster (rdkafka_mock.h) hosted on an otherwise idle
 * producer handle. The mock speaks the real Kafka protocol over loopback TCP, so every client
 * (ours, kcat, Python's kafka package) talks to it as to Kafka (docs/OPERATIONS.md).
 *
 * Invariants: a started broker has its topic created with the configured partition count, and
 * its bootstrap string is fixed for its lifetime; when a listen address was asked for, the first
 * entry of that string is exactly that address (start fails otherwise, nothing half-started).
 *
 * Choosing the address. librdkafka 2.0.2 binds every mock broker's listener to 127.0.0.1:0 and
 * advertises whatever getsockname() then reports; it has no API to choose the port. We interpose
 * bind(2): this file defines `bind`, the dayshard executable exports it
 * (-Wl,--export-dynamic-symbol=bind), so librdkafka.so's call resolves here. While armed by
 * loadgen_broker_start (just around rd_kafka_mock_cluster_new, which creates its brokers on the
 * calling thread), the first AF_INET bind to 127.0.0.1 port 0 is rewritten to the requested
 * address; every other bind goes straight to the kernel. Start then checks that the rewrite
 * happened and that the cluster advertises the address, and fails with -EADDRNOTAVAIL if the
 * interposer was not reached (an executable linked without the export). librdkafka must never
 * see that bind fail: 2.0.2 aborts the process on any failure inside
 * rd_kafka_mock_cluster_new (its cleanup asserts on a counter not yet raised). A refused
 * address (in use) is therefore bound as librdkafka asked, and start destroys that cluster and
 * returns the recorded errno.
 * Rejected: a loopback TCP proxy on the requested address forwarding to broker 1 (a thread and
 * a connection table more, and clients would still be sent to the advertised random ports by
 * the metadata, so the proxy only helps for bootstrapping); a patched librdkafka (Debian's
 * package is what the project builds against).
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ingest/ingest.h"
#include "loadgen/loadgen.h"

/* Kafka's own limit on a topic name. */
#define BROKER_TOPIC_BYTES_MAX 249u
/* "255.255.255.255:65535," per broker, and the terminator. */
#define BROKER_ENDPOINT_BYTES_MAX 22u
#define BROKER_BOOTSTRAP_BYTES_MAX (LOADGEN_BROKER_BROKERS_MAX * BROKER_ENDPOINT_BYTES_MAX + 1u)
/* Kafka's usual upper bound on replicas; the mock has no use for more. */
#define BROKER_REPLICATION_MAX 3u
/* One control command: the longest useful one is "errors" with BROKER_ERRORS_MAX codes. */
#define BROKER_COMMAND_BYTES_MAX 4096u
/* Errors pushed by one "errors" command: enough to fail every retry of a client for minutes. */
#define BROKER_ERRORS_MAX 1024u
/* Latency injected by "rtt": a minute is far beyond any client timeout worth testing. */
#define BROKER_RTT_MS_MAX 60000

static_assert(BROKER_BOOTSTRAP_BYTES_MAX < 1024u, "the bootstrap string stays small");
static_assert(BROKER_ERRORS_MAX * 2u < BROKER_COMMAND_BYTES_MAX, "a command can hold the codes");

struct loadgen_broker {
    rd_kafka_t *rk;
    rd_kafka_mock_cluster_t *cluster;
    uint32_t partitions;
    uint32_t brokers;
    char topic[BROKER_TOPIC_BYTES_MAX + 1];
    char bootstrap[BROKER_BOOTSTRAP_BYTES_MAX];
};

/* ---- the bind(2) interposer ---------------------------------------------------------------- */

enum bind_rewrite_state {
    BIND_IDLE = 0, /* not armed: every bind passes through */
    BIND_CLAIMED,  /* a start is writing the address */
    BIND_ARMED,    /* the next bind to 127.0.0.1:0 is rewritten */
    BIND_BINDING,  /* that bind is in progress */
    BIND_DONE,     /* it happened; result_errno tells how it went */
};

/* The one piece of mutable global state in the project, and why it cannot hang off a context:
 * bind(2) is called by librdkafka, which passes us nothing. It is armed only for the duration
 * of one rd_kafka_mock_cluster_new call, consumed by at most one bind, and a second concurrent
 * start is refused (-EBUSY) rather than queued. */
static struct {
    atomic_int state;        /* enum bind_rewrite_state */
    struct sockaddr_in addr; /* written while CLAIMED, read while BINDING */
    atomic_int result_errno; /* 0, or the errno of the rewritten bind; valid in DONE */
} bind_rewrite;

static bool bind_is_mock_listener(const struct sockaddr *addr, socklen_t addr_len)
{
    if (addr == NULL || addr_len < (socklen_t)sizeof(struct sockaddr_in) ||
        addr->sa_family != AF_INET) {
        return false;
    }
    struct sockaddr_in sin;
    memcpy(&sin, addr, sizeof(sin));
    return sin.sin_addr.s_addr == htonl(INADDR_LOOPBACK) && sin.sin_port == 0;
}

static int bind_syscall(int fd, const struct sockaddr *addr, socklen_t addr_len)
{
    return (int)syscall(SYS_bind, fd, addr, addr_len);
}

/* Overrides libc's bind for the whole process; see the file comment. __CONST_SOCKADDR_ARG is
 * glibc's transparent union for the address argument under _GNU_SOURCE. */
int bind(int fd, __CONST_SOCKADDR_ARG addr, socklen_t addr_len)
{
    const struct sockaddr *sa = addr.__sockaddr__;
    int expected = BIND_ARMED;
    if (atomic_load_explicit(&bind_rewrite.state, memory_order_acquire) != BIND_ARMED ||
        !bind_is_mock_listener(sa, addr_len) ||
        !atomic_compare_exchange_strong(&bind_rewrite.state, &expected, BIND_BINDING)) {
        return bind_syscall(fd, sa, addr_len);
    }
    /* Real Kafka sets SO_REUSEADDR too: a restarted broker must get its port back while the
     * connections of its previous life sit in TIME_WAIT. Linux still refuses a second
     * listener on the port, so "address in use" keeps meaning what it says. */
    int on = 1;
    int rc = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (rc == 0) {
        rc = bind_syscall(fd, (const struct sockaddr *)&bind_rewrite.addr,
                          sizeof(bind_rewrite.addr));
    }
    atomic_store(&bind_rewrite.result_errno, rc == 0 ? 0 : errno);
    atomic_store_explicit(&bind_rewrite.state, BIND_DONE, memory_order_release);
    /* librdkafka 2.0.2 must not see this bind fail: its rd_kafka_mock_cluster_new cleans up a
     * failed broker through rd_kafka_mock_cluster_destroy, which asserts and aborts the
     * process. So a refused address falls back to what librdkafka asked for, and start
     * destroys the cluster it gets and reports the recorded errno. */
    return rc == 0 ? 0 : bind_syscall(fd, sa, addr_len);
}

/* Returns 0, or -EBUSY when another start holds the interposer. */
static int bind_rewrite_arm(const struct sockaddr_in *addr)
{
    int expected = BIND_IDLE;
    if (!atomic_compare_exchange_strong(&bind_rewrite.state, &expected, BIND_CLAIMED)) {
        return -EBUSY;
    }
    bind_rewrite.addr = *addr;
    atomic_store(&bind_rewrite.result_errno, 0);
    atomic_store_explicit(&bind_rewrite.state, BIND_ARMED, memory_order_release);
    return 0;
}

/* Disarms. Sets *reached to whether a bind was rewritten; returns 0, or the negated errno of
 * the rewritten bind. */
static int bind_rewrite_disarm(bool *reached)
{
    int state = atomic_load_explicit(&bind_rewrite.state, memory_order_acquire);
    /* Brokers are created on the thread that calls rd_kafka_mock_cluster_new, so the bind has
     * returned by the time we get here. */
    ASSERT(state != BIND_BINDING);
    ASSERT(state == BIND_ARMED || state == BIND_DONE);
    *reached = state == BIND_DONE;
    int rc = *reached ? -atomic_load(&bind_rewrite.result_errno) : 0;
    atomic_store_explicit(&bind_rewrite.state, BIND_IDLE, memory_order_release);
    return rc;
}

/* ---- configuration ------------------------------------------------------------------------- */

void loadgen_broker_config_defaults(struct loadgen_broker_config *cfg)
{
    *cfg = (struct loadgen_broker_config){
        .listen = NULL, .topic = "orders", .partitions = 12, .brokers = 1};
}

/* "HOST:PORT" with HOST an IPv4 address or "localhost". Returns 0 or -DS_EUSAGE (logged). */
static int listen_parse(const char *text, struct sockaddr_in *out)
{
    const char *colon = strrchr(text, ':');
    char host[INET_ADDRSTRLEN];
    size_t host_len = colon != NULL ? (size_t)(colon - text) : 0;
    char *end = NULL;
    unsigned long port = 0;
    if (colon != NULL && colon[1] >= '0' && colon[1] <= '9') {
        errno = 0;
        port = strtoul(colon + 1, &end, 10);
    }
    if (end == NULL || *end != '\0' || errno != 0 || port > 65535 || host_len == 0 ||
        host_len >= sizeof(host)) {
        ds_log_error("broker: listen address '%s' is not HOST:PORT with PORT 0..65535", text);
        return -DS_EUSAGE;
    }
    memcpy(host, text, host_len);
    host[host_len] = '\0';
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (strcmp(host, "localhost") == 0) {
        sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    } else if (inet_pton(AF_INET, host, &sin.sin_addr) != 1) {
        ds_log_error("broker: listen host '%s' is not an IPv4 address or localhost", host);
        return -DS_EUSAGE;
    }
    *out = sin;
    return 0;
}

static bool topic_valid(const char *topic)
{
    size_t len = strlen(topic);
    if (len == 0 || len > BROKER_TOPIC_BYTES_MAX || strcmp(topic, ".") == 0 ||
        strcmp(topic, "..") == 0) {
        return false;
    }
    return strspn(topic, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
           len;
}

/* Returns 0 or -DS_EUSAGE (logged). */
static int broker_config_check(const struct loadgen_broker_config *cfg)
{
    if (cfg->topic == NULL || !topic_valid(cfg->topic)) {
        ds_log_error("broker: topic '%s' is not 1..%u of [a-zA-Z0-9._-]",
                     cfg->topic != NULL ? cfg->topic : "", BROKER_TOPIC_BYTES_MAX);
        return -DS_EUSAGE;
    }
    if (cfg->partitions < 1 || cfg->partitions > LOADGEN_BROKER_PARTITIONS_MAX) {
        ds_log_error("broker: %u partitions is not 1..%u", cfg->partitions,
                     LOADGEN_BROKER_PARTITIONS_MAX);
        return -DS_EUSAGE;
    }
    if (cfg->brokers < 1 || cfg->brokers > LOADGEN_BROKER_BROKERS_MAX) {
        ds_log_error("broker: %u brokers is not 1..%u", cfg->brokers, LOADGEN_BROKER_BROKERS_MAX);
        return -DS_EUSAGE;
    }
    return 0;
}

/* ---- the librdkafka adapter ---------------------------------------------------------------- */

static void broker_log(const rd_kafka_t *rk, int level, const char *facility, const char *text)
{
    (void)rk;
    enum ds_log_level ds_level = DS_LOG_DEBUG;
    if (level <= 3) {
        ds_level = DS_LOG_ERROR;
    } else if (level == 4) {
        ds_level = DS_LOG_WARN;
    } else if (level <= 6) {
        ds_level = DS_LOG_INFO;
    }
    ds_log(ds_level, "broker: librdkafka %s: %s", facility, text);
}

/* The handle the mock cluster hangs off: a producer that never produces. */
static int broker_handle_create(struct loadgen_broker *b)
{
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "client.id", "dayshard-broker", err, sizeof(err)) !=
        RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        ds_log_error("broker: librdkafka refused its configuration: %s", err);
        return -DS_EKAFKA;
    }
    rd_kafka_conf_set_log_cb(conf, broker_log);
    /* rd_kafka_new takes conf on success only. */
    b->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    if (b->rk == NULL) {
        rd_kafka_conf_destroy(conf);
        ds_log_error("broker: cannot create the librdkafka handle: %s", err);
        return -DS_EKAFKA;
    }
    return 0;
}

/* "HOST:PORT" of an IPv4 address, as librdkafka writes its bootstrap entries. */
#define ADDRESS_TEXT_BYTES (INET_ADDRSTRLEN + sizeof(":65535"))
static void address_format(const struct sockaddr_in *sin, char *dst, size_t dst_capacity)
{
    ASSERT(dst_capacity >= ADDRESS_TEXT_BYTES);
    const char *host = inet_ntop(AF_INET, &sin->sin_addr, dst, (socklen_t)dst_capacity);
    ASSERT(host != NULL);
    size_t len = strlen(dst);
    int written = snprintf(dst + len, dst_capacity - len, ":%u", ntohs(sin->sin_port));
    ASSERT(written > 0 && (size_t)written < dst_capacity - len);
}

/* Creates the cluster, with broker 1 on listen when it is not NULL. On failure b->cluster may
 * still be set: the caller destroys it. */
static int broker_cluster_create(struct loadgen_broker *b, const struct sockaddr_in *listen)
{
    if (listen == NULL) {
        b->cluster = rd_kafka_mock_cluster_new(b->rk, (int)b->brokers);
        if (b->cluster == NULL) {
            ds_log_error("broker: librdkafka could not create a mock cluster of %u brokers",
                         b->brokers);
            return -DS_EKAFKA;
        }
        return 0;
    }
    int rc = bind_rewrite_arm(listen);
    if (rc != 0) {
        ds_log_error("broker: another broker of this process is starting");
        return rc;
    }
    b->cluster = rd_kafka_mock_cluster_new(b->rk, (int)b->brokers);
    bool reached = false;
    rc = bind_rewrite_disarm(&reached);
    char asked[ADDRESS_TEXT_BYTES];
    address_format(listen, asked, sizeof(asked));
    if (!reached) {
        ds_log_error("broker: cannot listen on %s: the bind(2) interposer was not reached "
                     "(the executable must export bind: -Wl,--export-dynamic-symbol=bind)",
                     asked);
        rc = -EADDRNOTAVAIL;
    } else if (rc != 0) {
        ds_log_error("broker: cannot listen on %s: %s", asked, ds_strerror(rc));
    } else if (b->cluster == NULL) {
        ds_log_error("broker: librdkafka could not create a mock cluster of %u brokers "
                     "listening on %s",
                     b->brokers, asked);
        rc = -DS_EKAFKA;
    }
    return rc;
}

/* Copies the bootstrap string and, when an address was asked for, checks that broker 1
 * advertises it. Returns 0 or -EADDRNOTAVAIL (logged). */
static int broker_bootstrap_check(struct loadgen_broker *b, const struct sockaddr_in *listen)
{
    const char *bootstrap = rd_kafka_mock_cluster_bootstraps(b->cluster);
    ASSERT(bootstrap != NULL);
    size_t len = strlen(bootstrap);
    ASSERT(len > 0 && len < sizeof(b->bootstrap));
    memcpy(b->bootstrap, bootstrap, len + 1);
    if (listen == NULL) {
        return 0;
    }
    char asked[ADDRESS_TEXT_BYTES];
    address_format(listen, asked, sizeof(asked));
    /* Port 0 asks for any free port on HOST: then only "HOST:" can be checked. */
    size_t compare_len = strlen(asked) - (listen->sin_port == 0 ? 1 : 0);
    size_t first_len = strcspn(b->bootstrap, ",");
    if ((listen->sin_port != 0 && first_len != compare_len) ||
        strncmp(b->bootstrap, asked, compare_len) != 0) {
        ds_log_error("broker: broker 1 advertises %.*s, not the address asked for (%s)",
                     (int)first_len, b->bootstrap, asked);
        return -EADDRNOTAVAIL;
    }
    return 0;
}

static int broker_topic_create_one(struct loadgen_broker *b, const char *topic, uint32_t partitions)
{
    uint32_t replication =
        b->brokers < BROKER_REPLICATION_MAX ? b->brokers : BROKER_REPLICATION_MAX;
    rd_kafka_resp_err_t err =
        rd_kafka_mock_topic_create(b->cluster, topic, (int)partitions, (int)replication);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        ds_log_error("broker: cannot create topic %s with %u partitions: %s", topic, partitions,
                     rd_kafka_err2str(err));
        return -DS_EKAFKA;
    }
    return 0;
}

/* The data topic and its shard map topic ("<topic>.shardmap", one partition: the mock broker
 * implements no CreateTopics for the nodes to create it, nor compaction, which a map of a few
 * messages per day does not need here). */
static int broker_topic_create(struct loadgen_broker *b, const char *topic)
{
    size_t len = strlen(topic);
    ASSERT(len < sizeof(b->topic));
    char map_topic[BROKER_TOPIC_BYTES_MAX + sizeof(".shardmap")];
    snprintf(map_topic, sizeof(map_topic), "%s.shardmap", topic);
    int rc = broker_topic_create_one(b, topic, b->partitions);
    rc = rc == 0 ? broker_topic_create_one(b, map_topic, 1) : rc;
    if (rc != 0) {
        return rc;
    }
    memcpy(b->topic, topic, len + 1);
    return 0;
}

int loadgen_broker_start(const struct loadgen_broker_config *cfg, struct loadgen_broker **out)
{
    ASSERT(cfg != NULL);
    ASSERT(out != NULL);
    int rc = broker_config_check(cfg);
    struct sockaddr_in listen_addr;
    if (rc == 0 && cfg->listen != NULL) {
        rc = listen_parse(cfg->listen, &listen_addr);
    }
    if (rc != 0) {
        return rc;
    }
    const struct sockaddr_in *listen = cfg->listen != NULL ? &listen_addr : NULL;
    struct loadgen_broker *b = calloc(1, sizeof(*b));
    if (b == NULL) {
        ds_log_error("broker: out of memory");
        return -ENOMEM;
    }
    b->partitions = cfg->partitions;
    b->brokers = cfg->brokers;
    rc = broker_handle_create(b);
    if (rc != 0) {
        goto fail;
    }
    rc = broker_cluster_create(b, listen);
    if (rc == 0) {
        rc = broker_bootstrap_check(b, listen);
    }
    if (rc == 0) {
        rc = broker_topic_create(b, cfg->topic);
    }
    if (rc != 0) {
        goto fail;
    }
    ds_log_info("broker: %u brokers at %s, topic %s with %u partitions", b->brokers, b->bootstrap,
                b->topic, b->partitions);
    *out = b;
    return 0;
fail:
    loadgen_broker_stop(b);
    return rc;
}

const char *loadgen_broker_bootstrap(const struct loadgen_broker *b)
{
    ASSERT(b != NULL);
    ASSERT(b->bootstrap[0] != '\0');
    return b->bootstrap;
}

void loadgen_broker_stop(struct loadgen_broker *b)
{
    if (b == NULL) {
        return;
    }
    if (b->cluster != NULL) {
        rd_kafka_mock_cluster_destroy(b->cluster);
    }
    if (b->rk != NULL) {
        rd_kafka_destroy(b->rk);
    }
    free(b);
}

/* ---- fault injection ----------------------------------------------------------------------- */

/* Kafka API keys by name, for "errors"; any other key is given as its number. */
static const struct {
    const char *name;
    int16_t key;
} api_keys[] = {
    {"Produce", 0},         {"Fetch", 1},       {"ListOffsets", 2},      {"Metadata", 3},
    {"OffsetCommit", 8},    {"OffsetFetch", 9}, {"FindCoordinator", 10}, {"JoinGroup", 11},
    {"Heartbeat", 12},      {"LeaveGroup", 13}, {"SyncGroup", 14},       {"ApiVersions", 18},
    {"InitProducerId", 22},
};

/* The whole text is a decimal integer in min..max. */
static bool parse_i64(const char *text, int64_t min, int64_t max, int64_t *out)
{
    if (text == NULL || text[0] == '\0') {
        return false;
    }
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max) {
        return false;
    }
    *out = v;
    return true;
}

static bool parse_api_key(const char *text, int16_t *out)
{
    for (size_t i = 0; i < DS_ARRAY_LEN(api_keys); i++) {
        if (strcmp(text, api_keys[i].name) == 0) {
            *out = api_keys[i].key;
            return true;
        }
    }
    int64_t v = 0;
    if (!parse_i64(text, 0, INT16_MAX, &v)) {
        return false;
    }
    *out = (int16_t)v;
    return true;
}

/* A number, or librdkafka's name of the code ("NOT_LEADER_FOR_PARTITION", "_TRANSPORT"). */
static bool parse_error_code(const char *text, rd_kafka_resp_err_t *out)
{
    const struct rd_kafka_err_desc *descs = NULL;
    size_t count = 0;
    rd_kafka_get_err_descs(&descs, &count);
    for (size_t i = 0; i < count; i++) {
        if (descs[i].name != NULL && strcmp(text, descs[i].name) == 0) {
            *out = descs[i].code;
            return true;
        }
    }
    int64_t v = 0;
    if (!parse_i64(text, INT16_MIN, INT16_MAX, &v) || v == 0) {
        return false;
    }
    *out = (rd_kafka_resp_err_t)v;
    return true;
}

struct control_reply {
    char *text;
    size_t capacity;
};

/* Writes "error: ..." and returns -DS_EUSAGE, for `return control_error(...)`. */
static int control_error(struct control_reply *reply, const char *fmt, ...) DS_PRINTF(2, 3);
static int control_error(struct control_reply *reply, const char *fmt, ...)
{
    int head = snprintf(reply->text, reply->capacity, "error: ");
    if (head > 0 && (size_t)head < reply->capacity) {
        va_list args;
        va_start(args, fmt);
        vsnprintf(reply->text + head, reply->capacity - (size_t)head, fmt, args);
        va_end(args);
    }
    return -DS_EUSAGE;
}

static int control_result(struct control_reply *reply, rd_kafka_resp_err_t err, const char *what)
{
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        return control_error(reply, "%s: %s", what, rd_kafka_err2str(err));
    }
    snprintf(reply->text, reply->capacity, "ok %s", what);
    return 0;
}

/* "down ID", "up ID", "rtt ID MS": args holds the tokens after the verb. */
static int control_broker(struct loadgen_broker *b, const char *verb, char **args, size_t count,
                          struct control_reply *reply)
{
    bool is_rtt = strcmp(verb, "rtt") == 0;
    int64_t id = 0;
    int64_t rtt_ms = 0;
    if (count != (is_rtt ? 2u : 1u)) {
        return control_error(reply, "usage: %s", is_rtt ? "rtt ID MS" : "down|up ID");
    }
    if (!parse_i64(args[0], 1, b->brokers, &id)) {
        return control_error(reply, "broker id '%s' is not 1..%u", args[0], b->brokers);
    }
    if (is_rtt && !parse_i64(args[1], 0, BROKER_RTT_MS_MAX, &rtt_ms)) {
        return control_error(reply, "rtt '%s' is not 0..%d ms", args[1], BROKER_RTT_MS_MAX);
    }
    char what[64];
    rd_kafka_resp_err_t err;
    if (is_rtt) {
        snprintf(what, sizeof(what), "rtt %d %d", (int)id, (int)rtt_ms);
        err = rd_kafka_mock_broker_set_rtt(b->cluster, (int32_t)id, (int)rtt_ms);
    } else if (strcmp(verb, "down") == 0) {
        snprintf(what, sizeof(what), "down %d", (int)id);
        err = rd_kafka_mock_broker_set_down(b->cluster, (int32_t)id);
    } else {
        snprintf(what, sizeof(what), "up %d", (int)id);
        err = rd_kafka_mock_broker_set_up(b->cluster, (int32_t)id);
    }
    return control_result(reply, err, what);
}

/* "errors APIKEY COUNT ERRCODE...": one code is repeated COUNT times, else COUNT codes. */
static int control_errors(struct loadgen_broker *b, char **args, size_t count,
                          struct control_reply *reply)
{
    int16_t api_key = 0;
    int64_t errors_count = 0;
    if (count < 3) {
        return control_error(reply, "usage: errors APIKEY COUNT ERRCODE...");
    }
    if (!parse_api_key(args[0], &api_key)) {
        return control_error(reply, "api key '%s' is not a number or a known name", args[0]);
    }
    if (!parse_i64(args[1], 1, BROKER_ERRORS_MAX, &errors_count)) {
        return control_error(reply, "count '%s' is not 1..%u", args[1], BROKER_ERRORS_MAX);
    }
    size_t codes_count = count - 2;
    if (codes_count != 1 && codes_count != (size_t)errors_count) {
        return control_error(reply, "give one error code or %d of them", (int)errors_count);
    }
    rd_kafka_resp_err_t codes[BROKER_ERRORS_MAX];
    for (size_t i = 0; i < (size_t)errors_count; i++) {
        const char *text = args[2 + (codes_count == 1 ? 0 : i)];
        if (!parse_error_code(text, &codes[i])) {
            return control_error(reply, "error code '%s' is not a number or a librdkafka name",
                                 text);
        }
    }
    rd_kafka_mock_push_request_errors_array(b->cluster, api_key, (size_t)errors_count, codes);
    char what[64];
    snprintf(what, sizeof(what), "errors %d %d", (int)api_key, (int)errors_count);
    return control_result(reply, RD_KAFKA_RESP_ERR_NO_ERROR, what);
}

/* "leader PARTITION ID" for the broker's topic. */
static int control_leader(struct loadgen_broker *b, char **args, size_t count,
                          struct control_reply *reply)
{
    int64_t partition = 0;
    int64_t id = 0;
    if (count != 2) {
        return control_error(reply, "usage: leader PARTITION ID");
    }
    if (!parse_i64(args[0], 0, (int64_t)b->partitions - 1, &partition)) {
        return control_error(reply, "partition '%s' is not 0..%u", args[0], b->partitions - 1);
    }
    if (!parse_i64(args[1], 1, b->brokers, &id)) {
        return control_error(reply, "broker id '%s' is not 1..%u", args[1], b->brokers);
    }
    char what[64];
    snprintf(what, sizeof(what), "leader %d %d", (int)partition, (int)id);
    rd_kafka_resp_err_t err =
        rd_kafka_mock_partition_set_leader(b->cluster, b->topic, (int32_t)partition, (int32_t)id);
    return control_result(reply, err, what);
}

int loadgen_broker_control(struct loadgen_broker *b, const char *command, char *reply,
                           size_t reply_capacity)
{
    ASSERT(b != NULL && b->cluster != NULL);
    ASSERT(command != NULL);
    ASSERT(reply != NULL && reply_capacity > 0);
    struct control_reply r = {.text = reply, .capacity = reply_capacity};
    size_t len = strlen(command);
    if (len >= BROKER_COMMAND_BYTES_MAX) {
        return control_error(&r, "command longer than %u bytes", BROKER_COMMAND_BYTES_MAX - 1);
    }
    char copy[BROKER_COMMAND_BYTES_MAX];
    memcpy(copy, command, len + 1);
    /* A command of N bytes has at most N/2 + 1 tokens: the array cannot overflow. */
    char *tokens[BROKER_COMMAND_BYTES_MAX / 2 + 1];
    size_t count = 0;
    char *save = NULL;
    for (char *t = strtok_r(copy, " \t\r\n", &save); t != NULL;
         t = strtok_r(NULL, " \t\r\n", &save)) {
        ASSERT(count < DS_ARRAY_LEN(tokens));
        tokens[count++] = t;
    }
    if (count == 0) {
        return control_error(&r, "empty command");
    }
    const char *verb = tokens[0];
    if (strcmp(verb, "down") == 0 || strcmp(verb, "up") == 0 || strcmp(verb, "rtt") == 0) {
        return control_broker(b, verb, tokens + 1, count - 1, &r);
    }
    if (strcmp(verb, "errors") == 0) {
        return control_errors(b, tokens + 1, count - 1, &r);
    }
    if (strcmp(verb, "leader") == 0) {
        return control_leader(b, tokens + 1, count - 1, &r);
    }
    return control_error(&r,
                         "unknown command '%s' (down ID, up ID, rtt ID MS, "
                         "errors APIKEY COUNT ERRCODE..., leader PARTITION ID)",
                         verb);
}
