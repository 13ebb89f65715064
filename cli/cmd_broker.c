/*
 * `dayshard broker [--listen HOST:PORT] [--partitions N] [--topic T] [--brokers N]`: librdkafka's
 * mock cluster as a development and test broker (docs/OPERATIONS.md). The bootstrap address is
 * the first line of standard output; fault-injection commands are read from standard input, one
 * per line, and answered with one line each; only SIGINT or SIGTERM stops it, with exit 0.
 *
 * One thread waits in poll(2) on a signalfd and on standard input. SIGINT and SIGTERM are
 * blocked before the broker starts, so librdkafka's threads inherit the mask and the signals
 * stay pending for the signalfd: no handler, no global flag. The end of standard input only
 * stops the reading (tests run the broker with stdin from /dev/null or a fifo).
 * Rejected: a reader thread blocked in fgets (it cannot be woken for shutdown without closing
 * stdin under it) and sigwaitinfo alone (it cannot also wait for input).
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cli/cli.h"
#include "loadgen/loadgen.h"

/* One command line: the broker's own bound on a command is the same 4 KiB. */
#define BROKER_LINE_BYTES_MAX 4096u
#define BROKER_REPLY_BYTES_MAX 512u

const char cmd_broker_usage[] =
    "usage: dayshard broker [options]\n"
    "\n"
    "Runs librdkafka's mock Kafka cluster, which speaks the real Kafka protocol over TCP, for\n"
    "development and tests. Prints the bootstrap address (what clients take as\n"
    "bootstrap.servers) as the first line of standard output, then serves until SIGINT or\n"
    "SIGTERM and exits 0. Nothing is kept across restarts, and each partition keeps only about\n"
    "its newest 5 MiB: consume while producing, or stay under that.\n"
    "\n"
    "Standard input may carry fault-injection commands, one per line, each answered with one\n"
    "line on standard output, \"ok ...\" or \"error: ...\" (blank lines and # comments are\n"
    "skipped). The end of standard input stops the reading, not the broker.\n"
    "  down ID                      take broker ID (1..N) down: its connections are closed\n"
    "                               and no new ones accepted; leadership does not move\n"
    "  up ID                        let broker ID accept connections again\n"
    "  rtt ID MS                    delay broker ID's responses by MS ms (0..60000; 0 clears)\n"
    "  errors APIKEY COUNT CODE...  fail the next COUNT (1..1024) requests of a Kafka API, a\n"
    "                               number or one of Produce, Fetch, ListOffsets, Metadata,\n"
    "                               OffsetCommit, OffsetFetch, FindCoordinator, JoinGroup,\n"
    "                               Heartbeat, LeaveGroup, SyncGroup, ApiVersions,\n"
    "                               InitProducerId; CODE is a Kafka error number or a\n"
    "                               librdkafka name (NOT_LEADER_FOR_PARTITION; _TRANSPORT\n"
    "                               drops the connection); one CODE is repeated COUNT times\n"
    "  leader PARTITION ID          make broker ID the leader of a partition of the topic\n"
    "\n"
    "options:\n"
    "  --listen HOST:PORT  where broker 1 listens and what it advertises: HOST an IPv4\n"
    "                      address or localhost, PORT 0 for any free port (default: a free\n"
    "                      port on 127.0.0.1); brokers 2..N always take free ports\n"
    "  --partitions N      partitions of the topic (default 12, 1..1024)\n"
    "  --topic T           the topic created at start (default orders); a client asking for\n"
    "                      another topic gets it created with the mock's defaults\n"
    "  --brokers N         brokers in the cluster (default 1, 1..16); the topic's\n"
    "                      replication factor is min(N, 3)\n"
    "  --help              this text\n"
    "\n"
    "exit status: 0 stopped by a signal, 1 could not start (for example: address in use),\n"
    "2 usage error\n";

static int parse_args(int argc, char **argv, struct loadgen_broker_config *cfg)
{
    static const struct option options[] = {
        {"listen", required_argument, NULL, 'l'}, {"partitions", required_argument, NULL, 'p'},
        {"topic", required_argument, NULL, 't'},  {"brokers", required_argument, NULL, 'b'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    loadgen_broker_config_defaults(cfg);
    int c;
    int index = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", options, &index)) != -1) {
        int rc = 0;
        uint64_t value = 0;
        switch (c) {
        case 'l': cfg->listen = optarg; break;
        case 't': cfg->topic = optarg; break;
        case 'p':
            rc = cli_parse_u64(optarg, 1, LOADGEN_BROKER_PARTITIONS_MAX, &value);
            cfg->partitions = (uint32_t)value;
            break;
        case 'b':
            rc = cli_parse_u64(optarg, 1, LOADGEN_BROKER_BROKERS_MAX, &value);
            cfg->brokers = (uint32_t)value;
            break;
        case 'h': return -1;
        default:
            return cli_error("broker", CLI_USAGE, "unknown or incomplete option '%s'",
                             argv[optind - 1]);
        }
        if (rc != 0) {
            return cli_error("broker", CLI_USAGE, "bad value '%s' for --%s", optarg,
                             options[index].name);
        }
    }
    if (optind < argc) {
        return cli_error("broker", CLI_USAGE, "unexpected argument '%s'", argv[optind]);
    }
    return 0;
}

/* Standard input split into lines, with a fixed buffer: a longer line is answered with an
 * error once and skipped to its end. */
struct line_reader {
    size_t len;
    bool skipping; /* inside a line that was too long */
    char buf[BROKER_LINE_BYTES_MAX];
};

static void print_line(const char *text)
{
    /* A reader that went away must not stop the broker: failures to print are ignored. */
    fputs(text, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

static void run_command(struct loadgen_broker *b, char *line)
{
    line[strcspn(line, "\r")] = '\0';
    const char *text = line + strspn(line, " \t");
    if (text[0] == '\0' || text[0] == '#') {
        return;
    }
    char reply[BROKER_REPLY_BYTES_MAX];
    int rc = loadgen_broker_control(b, text, reply, sizeof(reply));
    ASSERT(rc == 0 || rc == -DS_EUSAGE);
    print_line(reply);
}

/* Runs every complete line in the buffer and keeps the incomplete tail. */
static void run_lines(struct loadgen_broker *b, struct line_reader *r)
{
    size_t start = 0;
    for (;;) { /* bounded by the buffer: each turn consumes one line */
        char *nl = memchr(r->buf + start, '\n', r->len - start);
        if (nl == NULL) {
            break;
        }
        *nl = '\0';
        if (!r->skipping) {
            run_command(b, r->buf + start);
        }
        r->skipping = false;
        start = (size_t)(nl - r->buf) + 1;
    }
    memmove(r->buf, r->buf + start, r->len - start);
    r->len -= start;
    if (r->len == sizeof(r->buf)) {
        if (!r->skipping) {
            print_line("error: command line too long");
        }
        r->skipping = true;
        r->len = 0;
    }
}

/* Reads what standard input has; returns false once it is over (end, or an error). */
static bool read_commands(struct loadgen_broker *b, struct line_reader *r)
{
    ASSERT(r->len < sizeof(r->buf));
    ssize_t got = read(STDIN_FILENO, r->buf + r->len, sizeof(r->buf) - r->len);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) {
        return true;
    }
    if (got > 0) {
        r->len += (size_t)got;
        run_lines(b, r);
        return true;
    }
    if (got < 0) {
        ds_log_warn("broker: standard input: %s; commands are no longer read", strerror(errno));
    }
    /* A last line without its newline still counts. */
    if (r->len > 0 && !r->skipping) {
        r->buf[r->len] = '\0';
        run_command(b, r->buf);
    }
    r->len = 0;
    return false;
}

/* Serves until SIGINT or SIGTERM arrives on signal_fd. */
static int serve(struct loadgen_broker *b, int signal_fd)
{
    struct line_reader reader = {0};
    struct pollfd fds[2] = {{.fd = signal_fd, .events = POLLIN},
                            {.fd = STDIN_FILENO, .events = POLLIN}};
    for (;;) { /* runs until a signal; each turn handles one signal or one read */
        if (poll(fds, DS_ARRAY_LEN(fds), -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            return cli_error("broker", CLI_FAIL, "poll: %s", strerror(errno));
        }
        if (fds[0].revents != 0) {
            struct signalfd_siginfo info;
            ssize_t got = read(signal_fd, &info, sizeof(info));
            if (got == (ssize_t)sizeof(info)) {
                ds_log_info("broker: stopping on signal %u", info.ssi_signo);
                return CLI_OK;
            }
            continue;
        }
        /* POLLHUP without data, POLLERR and POLLNVAL (stdin closed) all end the input. */
        if (fds[1].revents != 0 && !read_commands(b, &reader)) {
            fds[1].fd = -1;
        }
    }
}

int cmd_broker(int argc, char **argv)
{
    struct loadgen_broker_config cfg;
    int rc = parse_args(argc, argv, &cfg);
    if (rc != 0) {
        return rc == -1 ? cli_help(cmd_broker_usage) : rc;
    }
    /* Blocked for good: restoring the mask at exit would let a second Ctrl-C kill the
     * process with a non-zero status after a clean stop. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    rc = pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    ASSERT(rc == 0);
    /* `dayshard broker &` from an interactive shell reads the terminal from the background:
     * rather than being stopped by SIGTTIN, it gets EIO and stops reading commands. */
    struct sigaction ignore = {.sa_handler = SIG_IGN};
    rc = sigaction(SIGTTIN, &ignore, NULL);
    ASSERT(rc == 0);
    int signal_fd = signalfd(-1, &stop_signals, SFD_CLOEXEC);
    if (signal_fd < 0) {
        return cli_error("broker", CLI_FAIL, "signalfd: %s", strerror(errno));
    }
    struct loadgen_broker *b = NULL;
    rc = loadgen_broker_start(&cfg, &b);
    if (rc != 0) {
        close(signal_fd);
        if (rc == -DS_EUSAGE) {
            return cli_error("broker", CLI_USAGE, "%s (see the line above)", ds_strerror(rc));
        }
        if (rc == -EADDRINUSE && cfg.listen != NULL) {
            return cli_error("broker", CLI_FAIL, "cannot listen on %s: address in use", cfg.listen);
        }
        return cli_error("broker", CLI_FAIL, "cannot start: %s", ds_strerror(rc));
    }
    print_line(loadgen_broker_bootstrap(b));
    rc = serve(b, signal_fd);
    loadgen_broker_stop(b);
    close(signal_fd);
    return rc;
}
