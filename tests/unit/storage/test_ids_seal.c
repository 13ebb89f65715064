/*
 * Tests of the orders-by-id store's sealed tier (storage/ids.c, storage/ids_file.c) with the
 * recent tier's budget lowered so that seals happen every few commits. Every record is a pure
 * function of (order index, version), and its day moves with the version, so updates move
 * orders between days' files. A model (one version per order, or ABSENT) must equal the store
 * after every commit, seal, retention drop, reopen and crash. Randomised tests print their seed
 * and replay DS_TEST_SEED.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "storage/ids.h"
#include "storage/storage.h"
#include "tests/support/tempdir.h"

#define ABSENT (-1)
#define ORDERS 2000u
#define DAY0 19700
#define DAYS_SPREAD 4u

struct fixture {
    char dir[64];
    struct storage_io *io;
    uint8_t scratch[IDS_RECORD_BYTES_MAX];
    uint8_t items[64];
    int64_t model[ORDERS];
};

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    assert_int_equal(test_tempdir_make(fx->dir, sizeof(fx->dir)), 0);
    assert_int_equal(storage_io_create(STORAGE_IO_SYNC, &fx->io), 0);
    for (uint64_t i = 0; i < ORDERS; i++) {
        fx->model[i] = ABSENT;
    }
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    fx->io->ops->destroy(fx->io);
    test_tempdir_remove(fx->dir);
    free(fx);
    return 0;
}

/* ---- the record of (order index, version) --------------------------------------------------- */

static struct ds_id order_id(uint64_t i)
{
    struct ds_id id = {0};
    if (i % 3 != 0) {
        id.value = (int64_t)(i * 7 + 1);
    } else {
        id.is_string = true;
        id.len = (uint8_t)snprintf(id.text, sizeof(id.text), "o-%llu", (unsigned long long)i);
    }
    return id;
}

/* The day of version v of order i: base + a spread that moves with v, so updates move days. */
static int32_t record_day(uint64_t i, int64_t v, int32_t base)
{
    return base + (int32_t)((i + (uint64_t)v) % DAYS_SPREAD);
}

static struct storage_order make_record(uint64_t i, int64_t v, int32_t day, uint8_t *items)
{
    struct storage_order r = {0};
    r.order_id = order_id(i);
    r.has_version = true;
    r.version = v;
    r.ts_ms = (int64_t)day * 86400000LL + (int64_t)(i % 86400) * 1000;
    r.day = day;
    r.shard = (uint32_t)(i % 4);
    r.status_len = (uint8_t)snprintf(r.status, sizeof(r.status), "s%lld", (long long)(v % 3));
    r.amount_units = (int64_t)(i * 31) - v;
    r.customer_id.value = (int64_t)(i % 100) + 1;
    r.items_bytes = (uint16_t)((i + (uint64_t)v) % 3 == 0 ? 0 : 5);
    if (r.items_bytes > 0) {
        memcpy(items, "\x01\x02xy\x03", 5);
        r.items = items;
    }
    r.versions_seen = (uint32_t)v + 1;
    return r;
}

/* The model's version of i lives on a day: kept beside it (versions only grow). */
struct model {
    int64_t version[ORDERS];
    int32_t day[ORDERS];
};

static void expect_model(struct fixture *fx, struct ids *ids, const struct model *m)
{
    uint64_t present = 0;
    for (uint64_t i = 0; i < ORDERS; i++) {
        struct ds_id id = order_id(i);
        struct storage_order got;
        int rc = ids_get(ids, &id, &got, fx->scratch, sizeof(fx->scratch));
        if (m->version[i] == ABSENT) {
            assert_int_equal(rc, -ENOENT);
            continue;
        }
        present++;
        assert_int_equal(rc, 0);
        struct storage_order want = make_record(i, m->version[i], m->day[i], fx->items);
        assert_true(ds_id_equal(&got.order_id, &want.order_id));
        assert_true(got.version == want.version);
        assert_int_equal(got.day, want.day);
        assert_true(got.amount_units == want.amount_units);
        assert_int_equal(got.items_bytes, want.items_bytes);
        assert_int_equal(got.versions_seen, want.versions_seen);
    }
    assert_int_equal(ids_count(ids), present);
}

struct visit_check {
    const struct model *m;
    uint64_t visited;
};

static int visit_one(const struct storage_order *rec, void *user)
{
    struct visit_check *c = user;
    uint64_t i = rec->order_id.is_string ? strtoull(rec->order_id.text + 2, NULL, 10)
                                         : (uint64_t)(rec->order_id.value - 1) / 7;
    assert_true(i < ORDERS);
    assert_true(c->m->version[i] == rec->version);
    assert_int_equal(c->m->day[i], rec->day);
    c->visited++;
    return 0;
}

static uint64_t commit(struct fixture *fx, struct ids *ids)
{
    uint64_t len = 0;
    assert_int_equal(ids_queue(ids, &len), 0);
    assert_int_equal(fx->io->ops->flush(fx->io), 0);
    ids_committed(ids, len);
    return len;
}

/* Sealed files on disk of days below floor, and files of any day. */
static unsigned day_files(const char *dir, int32_t floor, unsigned *all)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/ids", dir);
    DIR *d = opendir(path);
    assert_non_null(d);
    unsigned below = 0;
    *all = 0;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        long day = 0;
        if (sscanf(e->d_name, "day.%ld.", &day) == 1) {
            (*all)++;
            below += day < floor;
        }
    }
    closedir(d);
    return below;
}

/* One random step: a new version of a random order (on a day at or above floor), or the
 * removal of a present one; in the model only when ids is NULL. */
static void random_step(struct fixture *fx, struct ids *ids, struct model *m, uint64_t *rng,
                        int32_t base)
{
    *rng = ds_mix64(*rng);
    uint64_t i = *rng % ORDERS;
    if (m->version[i] != ABSENT && (*rng >> 32) % 8 == 0) {
        struct storage_order cur = make_record(i, m->version[i], m->day[i], fx->items);
        if (ids != NULL) {
            assert_int_equal(ids_remove(ids, &cur), 0);
        }
        m->version[i] = ABSENT;
        return;
    }
    int64_t v = m->version[i] == ABSENT ? (int64_t)((*rng >> 40) % 3) : m->version[i] + 1;
    int32_t day = record_day(i, v, base);
    struct storage_order r = make_record(i, v, day, fx->items);
    if (ids != NULL) {
        assert_int_equal(ids_put(ids, &r), 0);
    }
    m->version[i] = v;
    m->day[i] = day;
}

/* A model with every order absent. */
static struct model *model_new(void)
{
    struct model *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    for (uint64_t i = 0; i < ORDERS; i++) {
        m->version[i] = ABSENT;
    }
    return m;
}

/* After a seal with floor: the orders of days below it left. */
static void model_drop(struct model *m, int32_t floor)
{
    for (uint64_t i = 0; i < ORDERS; i++) {
        if (m->version[i] != ABSENT && m->day[i] < floor) {
            m->version[i] = ABSENT;
        }
    }
}

static void many_seals(void **state, bool background)
{
    /* A 4 KiB recent budget: a seal every few commits. The stream's days advance and the
     * retention floor follows them; after every commit the store equals the model (lookups,
     * count, a reader following the writer), dropped days leave no file, the keydir and the
     * number of files stay bounded, and reopening at random commits changes nothing. */
    struct fixture *fx = *state;
    uint64_t rng = test_seed();
    struct model *m = model_new();
    struct ids *ids = NULL;
    assert_int_equal(ids_open(fx->io, fx->dir, 0, false, &ids), 0);
    ids_set_recent_budget(ids, 4096);
    ids_set_background(ids, background);
    struct ids *reader = NULL;
    assert_int_equal(ids_open(fx->io, fx->dir, 0, true, &reader), 0);
    uint64_t seals = 0, reopens = 0, keydir_max = 0;
    uint32_t files_max = 0;
    int32_t base = DAY0, floor = 0;
    for (int round = 0; round < 400; round++) {
        if (round % 40 == 39) {
            base++; /* the stream day advances; retention keeps 4 + 2 days */
            floor = background ? 0 : base - 2; /* a background seal drops when it ends */
        }
        for (int k = 0; k < 40; k++) {
            random_step(fx, ids, m, &rng, base);
        }
        uint64_t len = commit(fx, ids);
        int sealed = ids_maintain(ids, floor);
        assert_true(sealed == 0 || sealed == 1);
        /* ids_progress's running figures agree with ids_seal_stalls' histogram */
        struct ids_progress progress;
        ids_progress(ids, &progress);
        uint64_t calls = 0, max_ns = 0, p99_ns = 0;
        ids_seal_stalls(ids, &calls, &max_ns, &p99_ns);
        assert_int_equal(progress.stall_calls, calls);
        assert_int_equal(progress.stall_max_ns, max_ns);
        assert_true(p99_ns <= max_ns && (calls == 0 || p99_ns > 0 || max_ns == 0));
        assert_true(progress.stall_total_ns >= max_ns);
        assert_true(progress.recent_bytes <= ids_committed_bytes(ids));
        if (sealed == 1 && !background) {
            seals++;
            model_drop(m, floor);
            unsigned all = 0;
            assert_int_equal(day_files(fx->dir, floor, &all), 0);
            assert_int_equal(all, ids_sealed_files(ids));
        }
        seals += sealed == 1 && background;
        keydir_max = ids_keydir_bytes(ids) > keydir_max ? ids_keydir_bytes(ids) : keydir_max;
        files_max = ids_sealed_files(ids) > files_max ? ids_sealed_files(ids) : files_max;
        if (round % 7 == 0) {
            expect_model(fx, ids, m);
            assert_int_equal(ids_refresh(reader, len), 0);
            expect_model(fx, reader, m);
        }
        if ((rng >> 20) % 23 == 0) {
            ids_close(ids);
            assert_int_equal(ids_open(fx->io, fx->dir, len, false, &ids), 0);
            ids_set_recent_budget(ids, 4096);
            ids_set_background(ids, background);
            expect_model(fx, ids, m);
            reopens++;
        }
    }
    struct visit_check c = {.m = m};
    assert_int_equal(ids_visit(ids, visit_one, &c), 0);
    assert_int_equal(c.visited, ids_count(ids));
    printf("%llu seals, %llu reopens, keydir at most %llu bytes, at most %u files\n",
           (unsigned long long)seals, (unsigned long long)reopens, (unsigned long long)keydir_max,
           files_max);
    assert_true(seals > (background ? 20 : 50));
    assert_true(files_max <= DAYS_SPREAD + (background ? 12 : 3));
    assert_true(keydir_max <= 16 * 1024); /* the smallest tables: the recent tier stays small */
    ids_close(reader);
    ids_close(ids);
    free(m);
}

static void test_ids_seal_many_seals_against_a_model(void **state)
{
    many_seals(state, false);
}

static void test_ids_seal_many_background_seals_against_a_model(void **state)
{
    /* The same with the seals on their thread: lookups during a seal read the frozen tier. */
    many_seals(state, true);
}

static void test_ids_seal_converts_a_log_of_the_single_log_layout(void **state)
{
    /* A store never sealed is the single-log layout (DIR/ids/log, no descriptor), as earlier
     * builds wrote it: it opens, its first seal moves it to sealed files and log.1, the old
     * log goes, and the orders stay; a reader opened on the old layout follows the change. */
    struct fixture *fx = *state;
    struct model *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    for (uint64_t i = 0; i < ORDERS; i++) {
        m->version[i] = ABSENT;
    }
    uint64_t rng = 42;
    struct ids *ids = NULL;
    assert_int_equal(ids_open(fx->io, fx->dir, 0, false, &ids), 0);
    for (int k = 0; k < 3000; k++) {
        random_step(fx, ids, m, &rng, DAY0);
    }
    uint64_t len = commit(fx, ids);
    ids_close(ids);
    char log[128], current[128], log1[128];
    snprintf(log, sizeof(log), "%s/ids/log", fx->dir);
    snprintf(current, sizeof(current), "%s/ids/CURRENT", fx->dir);
    snprintf(log1, sizeof(log1), "%s/ids/log.1", fx->dir);
    struct stat st;
    assert_int_equal(stat(log, &st), 0);
    assert_int_not_equal(stat(current, &st), 0);
    struct ids *reader = NULL;
    assert_int_equal(ids_open(fx->io, fx->dir, len, true, &reader), 0);
    expect_model(fx, reader, m);
    assert_int_equal(ids_open(fx->io, fx->dir, len, false, &ids), 0);
    expect_model(fx, ids, m);
    assert_int_equal(ids_seal(ids, 0), 0);
    assert_int_not_equal(stat(log, &st), 0);
    assert_int_equal(stat(current, &st), 0);
    assert_int_equal(stat(log1, &st), 0);
    assert_int_equal(st.st_size, 0);
    assert_true(ids_sealed_files(ids) == DAYS_SPREAD);
    assert_int_equal(ids_committed_bytes(ids), len); /* positions carry on across the seal */
    expect_model(fx, ids, m);
    random_step(fx, ids, m, &rng, DAY0);
    uint64_t len2 = commit(fx, ids);
    assert_true(len2 > len);
    assert_int_equal(ids_refresh(reader, len2), 0);
    expect_model(fx, reader, m);
    ids_close(ids);
    assert_int_equal(ids_open(fx->io, fx->dir, len2, false, &ids), 0);
    expect_model(fx, ids, m);
    ids_close(ids);
    ids_close(reader);
    free(m);
}

/* The crash test's child: continues the deterministic stream from round first, committing each
 * round (reported on fd as the round and the position, after the commit) and sealing with a
 * tiny budget, until killed. */
#define CRASH_STEPS 30

static void crash_round(struct fixture *fx, struct ids *ids, struct model *m, int round)
{
    uint64_t rng = 1000003u * (uint64_t)round + 17;
    for (int k = 0; k < CRASH_STEPS; k++) {
        random_step(fx, ids, m, &rng, DAY0 + round / 16);
    }
}

static void crash_child(struct fixture *fx, int fd, uint64_t committed, int first, struct model *m)
{
    struct ids *ids = NULL;
    if (ids_open(fx->io, fx->dir, committed, false, &ids) != 0) {
        _exit(3);
    }
    ids_set_recent_budget(ids, 2048);
    for (int round = first;; round++) {
        crash_round(fx, ids, m, round);
        uint64_t len = commit(fx, ids);
        uint64_t report[2] = {(uint64_t)round, len};
        if (write(fd, report, sizeof(report)) != (ssize_t)sizeof(report)) {
            _exit(4);
        }
        (void)ids_maintain(ids, 0);
    }
}

static void test_ids_seal_kill9_at_random_points(void **state)
{
    /* A child process commits rounds and seals every round or two; the parent kills it with
     * SIGKILL after a random delay, then reopens with the last position the child reported
     * committed (the MANIFEST's role) and checks the store equals the model replayed to that
     * round. The next child continues from there, so kills land in puts, commits and seals. */
    struct fixture *fx = *state;
    uint64_t rng = test_seed();
    struct model *m = model_new();
    uint64_t committed = 0;
    int next_round = 0;
    unsigned kills = 0;
    for (int run = 0; run < 25; run++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            crash_child(fx, fds[1], committed, next_round, m);
            _exit(0);
        }
        close(fds[1]);
        /* The first round's report before the random delay: every run commits something,
         * however loaded the machine. */
        uint64_t report[2];
        assert_int_equal(read(fds[0], report, sizeof(report)), (ssize_t)sizeof(report));
        assert_int_equal(report[0], (uint64_t)next_round);
        crash_round(fx, NULL, m, next_round++);
        committed = report[1];
        rng = ds_mix64(rng);
        usleep((useconds_t)(rng % 40000));
        kill(pid, SIGKILL);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0));
        kills += WIFSIGNALED(status);
        while (read(fds[0], report, sizeof(report)) == (ssize_t)sizeof(report)) {
            assert_int_equal(report[0], (uint64_t)next_round);
            crash_round(fx, NULL, m, next_round++);
            committed = report[1];
        }
        close(fds[0]);
        struct ids *ids = NULL;
        assert_int_equal(ids_open(fx->io, fx->dir, committed, false, &ids), 0);
        expect_model(fx, ids, m);
        ids_close(ids);
    }
    printf("%u kills, %d rounds committed\n", kills, next_round);
    assert_true(kills >= 20);
    assert_true(next_round >= 25);
    free(m);
}

static void expect_orders(struct fixture *fx, struct ids *ids, uint64_t count)
{
    for (uint64_t i = 0; i < count; i++) {
        struct ds_id id = order_id(i);
        struct storage_order got;
        assert_int_equal(ids_get(ids, &id, &got, fx->scratch, sizeof(fx->scratch)), 0);
        assert_int_equal(got.day, DAY0 + (int32_t)(i / 5000));
        assert_int_equal(got.amount_units, (int64_t)(i * 31));
    }
    assert_int_equal(ids_count(ids), count);
}

static void test_ids_seal_runs_past_a_lowered_slot_limit(void **state)
{
    /* The keydir's slot limit lowered to 1,024 slots (768 orders, where IDS_SLOTS_MAX's 2^28
     * allows 201M). Without seals the 769th order is refused; with seals every 4 KiB of log the
     * recent tier never comes near the limit and 20,000 orders, 26 times the limit, are all
     * found before and after a reopen. */
    struct fixture *fx = *state;
    const uint64_t limit = 1024 / 4 * 3, orders = 20000;
    struct ids *ids = NULL;
    assert_int_equal(ids_open(fx->io, fx->dir, 0, false, &ids), 0);
    ids_set_slots_max(ids, 1024);
    ids_set_recent_budget(ids, 1ull << 30);
    ids_set_background(ids, false);
    uint64_t i = 0;
    int rc = 0;
    for (; i <= limit && rc == 0; i++) {
        struct storage_order r = make_record(i, 0, DAY0 + (int32_t)(i / 5000), fx->items);
        rc = ids_put(ids, &r);
    }
    assert_int_equal(rc, -DS_ELIMIT);
    assert_int_equal(i, limit + 1);
    ids_close(ids); /* drops the uncommitted puts */

    assert_int_equal(ids_open(fx->io, fx->dir, 0, false, &ids), 0);
    ids_set_slots_max(ids, 1024);
    ids_set_recent_budget(ids, 4096);
    ids_set_background(ids, false);
    uint64_t len = 0, seals = 0;
    for (i = 0; i < orders; i++) {
        struct storage_order r = make_record(i, 0, DAY0 + (int32_t)(i / 5000), fx->items);
        assert_int_equal(ids_put(ids, &r), 0);
        if (i % 100 == 99) {
            len = commit(fx, ids);
            int sealed = ids_maintain(ids, 0);
            assert_true(sealed == 0 || sealed == 1);
            seals += (uint64_t)sealed;
        }
    }
    assert_true(seals > orders / limit);
    expect_orders(fx, ids, orders);
    ids_close(ids);
    assert_int_equal(ids_open(fx->io, fx->dir, len, false, &ids), 0);
    ids_set_slots_max(ids, 1024);
    expect_orders(fx, ids, orders);
    ids_close(ids);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ids_seal_many_seals_against_a_model, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ids_seal_many_background_seals_against_a_model, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ids_seal_converts_a_log_of_the_single_log_layout,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_ids_seal_kill9_at_random_points, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ids_seal_runs_past_a_lowered_slot_limit, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
