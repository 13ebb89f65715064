/*
 * Unit tests of ingest/tenure.c: the tenure history's text (strict parse, bounded format,
 * prepend), the release point over the handovers the design names, the node id file and the
 * TENURES file (atomic save, strict load, damage named as an error).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ingest/tenure.h"
#include "tests/support/events.h"
#include "tests/support/tempdir.h"

#define NODE_A 0x00000000000000aaull
#define NODE_B 0x00000000000000bbull
#define NODE_D 0xdd000000000000ddull

struct tenure_fixture {
    char dir[256];
};

static int setup(void **state)
{
    struct tenure_fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(test_tempdir_make(f->dir, sizeof(f->dir)), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct tenure_fixture *f = *state;
    test_tempdir_remove(f->dir);
    free(f);
    return 0;
}

static void parse_ok(const char *text, struct tenure_history *h)
{
    const char *reason = "unset";
    assert_int_equal(tenure_parse(text, strlen(text), h, &reason), 0);
    assert_null(reason);
}

static void parse_bad(const char *text)
{
    struct tenure_history h;
    memset(&h, 0x5a, sizeof(h));
    const char *reason = NULL;
    assert_int_equal(tenure_parse(text, strlen(text), &h, &reason), -EINVAL);
    assert_non_null(reason);
    assert_int_equal(h.count, 0);
}

static void write_file(const char *dir, const char *name, const void *data, size_t len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
}

static size_t read_back(const char *dir, const char *name, char *dst, size_t cap)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *file = fopen(path, "rb");
    assert_non_null(file);
    size_t n = fread(dst, 1, cap - 1, file);
    fclose(file);
    dst[n] = '\0';
    return n;
}

/* ---- the history text ---------------------------------------------------------------------- */

static void test_tenure_history_round_trip(void **state)
{
    /* Intent: prepend builds newest first; the formatted text is the documented spelling and
     * parses back to the same entries; empty metadata is an empty history without a reason. */
    (void)state;
    struct tenure_history h = {0};
    tenure_prepend(&h, NODE_A, 0);
    tenure_prepend(&h, NODE_B, 1200);
    tenure_prepend(&h, NODE_D, INT64_MAX);
    char text[TENURE_TEXT_BYTES_MAX];
    int64_t n = tenure_format(&h, text, sizeof(text));
    const char *want = "dstenure1 dd000000000000dd@9223372036854775807,"
                       "00000000000000bb@1200,00000000000000aa@0";
    assert_string_equal(text, want);
    assert_int_equal(n, (int64_t)strlen(want));
    struct tenure_history back;
    parse_ok(text, &back);
    assert_int_equal(back.count, 3);
    assert_memory_equal(back.entries, h.entries, 3 * sizeof(h.entries[0]));

    struct tenure_history empty;
    const char *reason = "unset";
    assert_int_equal(tenure_parse(NULL, 0, &empty, &reason), 0);
    assert_null(reason);
    assert_int_equal(empty.count, 0);
    parse_ok("dstenure1 ", &empty); /* what an empty history formats as */
    assert_int_equal(empty.count, 0);
    assert_int_equal(tenure_format(&empty, text, sizeof(text)), 10);
    assert_string_equal(text, "dstenure1 ");
}

static void test_tenure_history_keeps_newest_sixteen(void **state)
{
    /* Intent: a full history drops its oldest entry on prepend, and its longest text fits the
     * documented bound; a smaller buffer gets -ENOSPC and no half history. */
    (void)state;
    struct tenure_history h = {0};
    for (uint32_t i = 1; i <= TENURE_ENTRIES_MAX + 3; i++) {
        tenure_prepend(&h, UINT64_MAX - i, INT64_MAX - (int64_t)i);
    }
    assert_int_equal(h.count, TENURE_ENTRIES_MAX);
    assert_int_equal(h.entries[0].node, UINT64_MAX - (TENURE_ENTRIES_MAX + 3));
    assert_int_equal(h.entries[TENURE_ENTRIES_MAX - 1].node, UINT64_MAX - 4);
    char text[TENURE_TEXT_BYTES_MAX];
    int64_t n = tenure_format(&h, text, sizeof(text));
    assert_int_equal(n, (int64_t)TENURE_TEXT_BYTES_MAX - 1);
    struct tenure_history back;
    parse_ok(text, &back);
    assert_memory_equal(&back, &h, sizeof(h));
    assert_int_equal(tenure_format(&h, text, (size_t)n), -ENOSPC);
    assert_string_equal(text, "");
    assert_int_equal(tenure_format(&h, text, 4), -ENOSPC);
    /* Seventeen entries are not a history this code writes. */
    char longer[TENURE_TEXT_BYTES_MAX + 64];
    snprintf(longer, sizeof(longer), "%s,00000000000000aa@1", text);
    parse_bad(longer);
}

static void test_tenure_parse_refuses_foreign_and_damaged(void **state)
{
    /* Intent: every spelling other than the documented one is no history with a reason. */
    (void)state;
    static const char *const bad[] = {
        "",                                                /* parsed as empty: checked below */
        "some other client's metadata",                    /* foreign */
        "dstenure2 00000000000000aa@1",                    /* another version */
        "dstenure1",                                       /* the prefix without its space */
        "dstenure1 00000000000000aa",                      /* no start */
        "dstenure1 00000000000000aa@",                     /* empty start */
        "dstenure1 00000000000000aa@01",                   /* a leading zero */
        "dstenure1 00000000000000aa@-1",                   /* a sign */
        "dstenure1 00000000000000aa@+1",                   /* a sign */
        "dstenure1 00000000000000aa@9223372036854775808",  /* past INT64_MAX */
        "dstenure1 00000000000000AA@1",                    /* upper case */
        "dstenure1 aa@1",                                  /* short id */
        "dstenure1 000000000000000000aa@1",                /* long id */
        "dstenure1 0000000000000000@1",                    /* id 0 */
        "dstenure1 00000000000000aa@1,",                   /* trailing comma */
        "dstenure1 00000000000000aa@1;00000000000000bb@2", /* another separator */
        "dstenure1 ,00000000000000aa@1",                   /* leading comma */
        "dstenure1 00000000000000aa@1 ",                   /* trailing space */
        "dstenure1 00000000000000aa@1\n",                  /* trailing newline */
    };
    for (size_t i = 1; i < DS_ARRAY_LEN(bad); i++) {
        parse_bad(bad[i]);
    }
    struct tenure_history h;
    parse_ok(bad[0], &h);
    assert_int_equal(h.count, 0);
    /* A NUL inside the metadata ends nothing: the length given is what is parsed. */
    const char with_nul[] = "dstenure1 00000000000000aa@1\0";
    const char *reason = NULL;
    assert_int_equal(tenure_parse(with_nul, sizeof(with_nul) - 1, &h, &reason), -EINVAL);
    assert_non_null(reason);
    assert_int_equal(tenure_parse(with_nul, sizeof(with_nul) - 2, &h, &reason), 0);
    assert_int_equal(h.count, 1);
}

static void test_tenure_parse_random_bytes(void **state)
{
    /* Intent: random bytes and random mutations of a good history never crash the parser nor
     * read past the given length (each input sits at the end of its own malloc'd block, so
     * ASan catches an overread); whatever parses formats back to exactly the same bytes, and
     * a failure always has a reason. */
    (void)state;
    uint64_t rng = test_seed();
    struct tenure_history good = {0};
    for (uint32_t i = 0; i < 5; i++) {
        tenure_prepend(&good, 0x1000 + i, (int64_t)i * 977);
    }
    char good_text[TENURE_TEXT_BYTES_MAX];
    int64_t good_len = tenure_format(&good, good_text, sizeof(good_text));
    assert_true(good_len > 0);
    static const char alphabet[] = "dstenure1 0123456789abcdefABCDEF@,-+\n";
    uint32_t parsed = 0;
    uint32_t refused = 0;
    for (uint32_t round = 0; round < 20000; round++) {
        size_t len = (size_t)test_rng_below(&rng, (uint64_t)good_len + 8);
        char *buf = malloc(len > 0 ? len : 1);
        assert_non_null(buf);
        uint64_t kind = test_rng_below(&rng, 3);
        for (size_t i = 0; i < len; i++) {
            if (kind == 0) {
                buf[i] = (char)test_rng_next(&rng);
            } else if (kind == 1) {
                buf[i] = alphabet[test_rng_below(&rng, sizeof(alphabet) - 1)];
            } else {
                buf[i] = i < (size_t)good_len ? good_text[i] : ',';
            }
        }
        if (kind == 2 && len > 0) { /* a mutation of a good history, or a cut of it */
            buf[test_rng_below(&rng, len)] = alphabet[test_rng_below(&rng, sizeof(alphabet) - 1)];
        }
        struct tenure_history h;
        const char *reason = NULL;
        int rc = tenure_parse(buf, len, &h, &reason);
        if (rc == 0) {
            parsed++;
            assert_null(reason);
            char again[TENURE_TEXT_BYTES_MAX];
            int64_t n = tenure_format(&h, again, sizeof(again));
            if (len > 0) {
                assert_int_equal(n, (int64_t)len);
                assert_memory_equal(again, buf, len);
            }
        } else {
            refused++;
            assert_int_equal(rc, -EINVAL);
            assert_non_null(reason);
            assert_int_equal(h.count, 0);
        }
        free(buf);
    }
    assert_true(parsed > 100);
    assert_true(refused > 10000);
}

/* ---- the release point --------------------------------------------------------------------- */

static bool release(const struct tenure_history *h, uint64_t node, int64_t next, int64_t *lo)
{
    *lo = -1;
    return tenure_release_point(h, node, next, lo);
}

static void test_tenure_release_no_history_or_own_newest(void **state)
{
    /* Intent: nothing to release without a history, or when the node is the newest holder
     * (it restarted and nobody held the partition since). */
    (void)state;
    struct tenure_history h = {0};
    int64_t lo = -1;
    assert_false(release(&h, NODE_A, 500, &lo));
    tenure_prepend(&h, NODE_B, 0);
    tenure_prepend(&h, NODE_A, 100);
    assert_false(release(&h, NODE_A, 500, &lo));
    assert_int_equal(lo, -1);
}

static void test_tenure_release_stale_after_handover(void **state)
{
    /* Intent: A -> B with B starting at 300: A, which stored up to 500, releases [300, inf);
     * at exactly 300 (or below) it holds nothing B holds. */
    (void)state;
    struct tenure_history h = {0};
    tenure_prepend(&h, NODE_A, 0);
    tenure_prepend(&h, NODE_B, 300);
    int64_t lo = -1;
    assert_true(release(&h, NODE_A, 500, &lo));
    assert_int_equal(lo, 300);
    assert_true(release(&h, NODE_A, 301, &lo));
    assert_int_equal(lo, 300);
    assert_false(release(&h, NODE_A, 300, &lo));
    assert_false(release(&h, NODE_A, 0, &lo));
    /* B is the newest holder: nothing. */
    assert_false(release(&h, NODE_B, 900, &lo));
}

static void test_tenure_release_frozen_through_two_handovers(void **state)
{
    /* Intent: A -> B -> D while A was frozen: A releases from B's start, the earliest holder
     * after it, not D's; B (stale after D) releases from D's start. */
    (void)state;
    struct tenure_history h = {0};
    tenure_prepend(&h, NODE_A, 0);
    tenure_prepend(&h, NODE_B, 300);
    tenure_prepend(&h, NODE_D, 700);
    int64_t lo = -1;
    assert_true(release(&h, NODE_A, 500, &lo));
    assert_int_equal(lo, 300);
    assert_true(release(&h, NODE_B, 800, &lo));
    assert_int_equal(lo, 700);
    assert_false(release(&h, NODE_B, 700, &lo));
}

static void test_tenure_release_back_to_former_owner(void **state)
{
    /* Intent: A -> B -> A, checked before A prepends its new entry: A's latest own entry is
     * its first run, so it releases from B's start; after the prepend it is the newest and
     * releases nothing, and its older entry further down does not matter. */
    (void)state;
    struct tenure_history h = {0};
    tenure_prepend(&h, NODE_A, 0);
    tenure_prepend(&h, NODE_B, 300);
    int64_t lo = -1;
    assert_true(release(&h, NODE_A, 450, &lo));
    assert_int_equal(lo, 300);
    tenure_prepend(&h, NODE_A, 300);
    assert_false(release(&h, NODE_A, 450, &lo));
    /* A -> B -> A -> B: A's latest entry is the second one, so B's newest start counts. */
    tenure_prepend(&h, NODE_B, 600);
    assert_true(release(&h, NODE_A, 650, &lo));
    assert_int_equal(lo, 600);
}

static void test_tenure_release_absent_from_full_history(void **state)
{
    /* Intent: a node whose entry was dropped (16 handovers since) or that never held the
     * partition takes the oldest entry kept as T. */
    (void)state;
    struct tenure_history h = {0};
    tenure_prepend(&h, NODE_A, 0);
    for (uint32_t i = 0; i < TENURE_ENTRIES_MAX; i++) {
        tenure_prepend(&h, 0x100 + i, 1000 + 100 * (int64_t)i);
    }
    assert_int_equal(h.count, TENURE_ENTRIES_MAX);
    int64_t lo = -1;
    assert_true(release(&h, NODE_A, 1001, &lo));
    assert_int_equal(lo, 1000);
    assert_false(release(&h, NODE_A, 1000, &lo));
    /* The same for a history of one entry. */
    struct tenure_history one = {0};
    tenure_prepend(&one, NODE_B, 40);
    assert_true(release(&one, NODE_A, 41, &lo));
    assert_int_equal(lo, 40);
}

/* ---- NODE_ID ------------------------------------------------------------------------------- */

static void test_tenure_node_id_created_once(void **state)
{
    /* Intent: the first load creates a nonzero id in the documented spelling, no temp file is
     * left, and every later load returns the same id. */
    struct tenure_fixture *f = *state;
    uint64_t id = 0;
    assert_int_equal(tenure_node_id_load(f->dir, &id), 0);
    assert_true(id != 0);
    char text[64];
    assert_int_equal(read_back(f->dir, "NODE_ID", text, sizeof(text)), 17);
    char want[32];
    snprintf(want, sizeof(want), "%016llx\n", (unsigned long long)id);
    assert_string_equal(text, want);
    char tmp[512];
    snprintf(tmp, sizeof(tmp), "%s/NODE_ID.tmp", f->dir);
    assert_int_equal(access(tmp, F_OK), -1);
    uint64_t again = 0;
    assert_int_equal(tenure_node_id_load(f->dir, &again), 0);
    assert_true(again == id);
}

static void test_tenure_node_id_damaged_is_an_error(void **state)
{
    /* Intent: a damaged NODE_ID is refused (never replaced by a new id: the node would lose
     * its place in every history) and left as it was. */
    struct tenure_fixture *f = *state;
    static const char *const damaged[] = {
        "",
        "00000000000000aa",
        "00000000000000aa\n\n",
        "00000000000000AA\n",
        "0000000000000000\n",
        "00000000000000ag\n",
        "00000000000000aa\r",
    };
    for (size_t i = 0; i < DS_ARRAY_LEN(damaged); i++) {
        write_file(f->dir, "NODE_ID", damaged[i], strlen(damaged[i]));
        uint64_t id = 7;
        assert_int_equal(tenure_node_id_load(f->dir, &id), -DS_ECORRUPT);
        assert_true(id == 7);
        char text[64];
        assert_int_equal(read_back(f->dir, "NODE_ID", text, sizeof(text)), strlen(damaged[i]));
    }
    char big[128];
    memset(big, '0', sizeof(big));
    write_file(f->dir, "NODE_ID", big, sizeof(big));
    uint64_t id = 0;
    assert_int_equal(tenure_node_id_load(f->dir, &id), -DS_ECORRUPT);
    write_file(f->dir, "NODE_ID", "00000000000000aa\n", 17);
    assert_int_equal(tenure_node_id_load(f->dir, &id), 0);
    assert_true(id == 0xaa);
    /* A directory that does not exist is an error of its own. */
    char missing[600];
    snprintf(missing, sizeof(missing), "%s/nowhere", f->dir);
    assert_int_equal(tenure_node_id_load(missing, &id), -ENOENT);
}

/* ---- TENURES ------------------------------------------------------------------------------- */

static void test_tenure_runs_save_and_load(void **state)
{
    /* Intent: a missing file is no runs known; saved runs load back exactly (set, lowered,
     * the largest partition and offset), in the documented text, without a temp file left. */
    struct tenure_fixture *f = *state;
    struct tenure_runs *runs = calloc(1, sizeof(*runs));
    struct tenure_runs *back = calloc(1, sizeof(*back));
    assert_non_null(runs);
    assert_non_null(back);
    memset(back, 0x5a, sizeof(*back));
    assert_int_equal(tenure_runs_load(f->dir, back), 0);
    int64_t from = -1;
    for (uint32_t p = 0; p < TENURE_PARTITIONS_MAX; p++) {
        assert_false(tenure_runs_get(back, p, &from));
    }
    tenure_runs_set(runs, 3, 1200);
    tenure_runs_set(runs, 1, 0);
    tenure_runs_set(runs, 7, 900);
    tenure_runs_lower(runs, 7, 950); /* not lower: kept */
    tenure_runs_lower(runs, 7, 400);
    tenure_runs_lower(runs, 9, 5); /* unknown: stays unknown */
    tenure_runs_set(runs, TENURE_PARTITIONS_MAX - 1, INT64_MAX);
    assert_int_equal(tenure_runs_save(f->dir, runs), 0);
    char text[256];
    read_back(f->dir, "TENURES", text, sizeof(text));
    const char *want = "dayshard tenures 1\n1 0\n3 1200\n7 400\n4092 9223372036854775807\n"
                       "crc32c ";
    assert_true(strncmp(text, want, strlen(want)) == 0);
    assert_int_equal(strlen(text), strlen(want) + 9);
    assert_int_equal(tenure_runs_load(f->dir, back), 0);
    assert_true(tenure_runs_get(back, 3, &from));
    assert_int_equal(from, 1200);
    assert_true(tenure_runs_get(back, 7, &from));
    assert_int_equal(from, 400);
    assert_true(tenure_runs_get(back, TENURE_PARTITIONS_MAX - 1, &from));
    assert_int_equal(from, INT64_MAX);
    assert_false(tenure_runs_get(back, 9, &from));
    assert_memory_equal(back->known, runs->known, sizeof(runs->known));
    char tmp[512];
    snprintf(tmp, sizeof(tmp), "%s/TENURES.tmp", f->dir);
    assert_int_equal(access(tmp, F_OK), -1);
    /* Every partition known: the largest file still saves and loads. */
    for (uint32_t p = 0; p < TENURE_PARTITIONS_MAX; p++) {
        tenure_runs_set(runs, p, INT64_MAX - p);
    }
    assert_int_equal(tenure_runs_save(f->dir, runs), 0);
    assert_int_equal(tenure_runs_load(f->dir, back), 0);
    assert_memory_equal(back, runs, sizeof(*runs));
    free(runs);
    free(back);
}

static void test_tenure_runs_damage_is_named(void **state)
{
    /* Intent: every single-byte change of a good file and every cut is refused as damaged
     * (-DS_ECORRUPT, the output untouched); another version is -DS_EFORMAT; a well-formed
     * file with a bad line and a right CRC is still refused. */
    struct tenure_fixture *f = *state;
    struct tenure_runs *runs = calloc(1, sizeof(*runs));
    struct tenure_runs *back = calloc(1, sizeof(*back));
    assert_non_null(runs);
    assert_non_null(back);
    tenure_runs_set(runs, 0, 5);
    tenure_runs_set(runs, 12, 77);
    char good[256];
    int64_t len = tenure_runs_format(runs, good, sizeof(good));
    assert_true(len > 20);
    assert_int_equal(tenure_runs_format(runs, good, 10), -ENOSPC);
    len = tenure_runs_format(runs, good, sizeof(good));
    uint32_t checked = 0;
    for (int64_t at = 0; at < len; at++) {
        for (int bit = 0; bit < 8; bit++) {
            char bad[256];
            memcpy(bad, good, (size_t)len);
            bad[at] = (char)(bad[at] ^ (1 << bit));
            memset(back, 0x5a, sizeof(*back));
            int rc = tenure_runs_parse(bad, (size_t)len, back);
            /* The version and its newline may turn into another version. */
            assert_true(rc == -DS_ECORRUPT || (rc == -DS_EFORMAT && (at == 17 || at == 18)));
            assert_true(back->from[0] == 0x5a5a5a5a5a5a5a5aLL);
            checked++;
        }
    }
    for (int64_t cut = 0; cut < len; cut++) {
        assert_int_equal(tenure_runs_parse(good, (size_t)cut, back), -DS_ECORRUPT);
    }
    assert_true(checked > 200);
    assert_int_equal(tenure_runs_parse("dayshard tenures 2\ncrc32c 00000000\n", 35, back),
                     -DS_EFORMAT);
    /* Lines out of order, a leading zero, a partition past the bound: CRC right, refused. */
    static const char *const bodies[] = {
        "dayshard tenures 1\n3 1\n1 1\n", "dayshard tenures 1\n1 01\n",
        "dayshard tenures 1\n4093 1\n",   "dayshard tenures 1\n1 1\n1 2\n",
        "dayshard tenures 1\n1  1\n",     "dayshard tenures 1\n1 -1\n",
    };
    for (size_t i = 0; i < DS_ARRAY_LEN(bodies); i++) {
        char text[128];
        size_t n = strlen(bodies[i]);
        memcpy(text, bodies[i], n);
        n += (size_t)snprintf(text + n, sizeof(text) - n, "crc32c %08x\n",
                              ds_crc32c(0, bodies[i], strlen(bodies[i])));
        assert_int_equal(tenure_runs_parse(text, n, back), -DS_ECORRUPT);
    }
    /* Through the file: damage is an error, the file stays for a person to look at. */
    good[len - 3] = good[len - 3] == '0' ? '1' : '0';
    write_file(f->dir, "TENURES", good, (size_t)len);
    assert_int_equal(tenure_runs_load(f->dir, back), -DS_ECORRUPT);
    write_file(f->dir, "TENURES", "", 0);
    assert_int_equal(tenure_runs_load(f->dir, back), -DS_ECORRUPT);
    assert_int_equal(tenure_runs_save(f->dir, runs), 0);
    assert_int_equal(tenure_runs_load(f->dir, back), 0);
    write_file(f->dir, "TENURES", "dayshard tenures 2\ncrc32c 00000000\n", 35);
    assert_int_equal(tenure_runs_load(f->dir, back), -DS_EFORMAT);
    free(runs);
    free(back);
}

static void test_tenure_files_other_errors(void **state)
{
    /* Intent: errors of the file system come back as they are: a file that is a directory,
     * a save into a directory that does not exist (nothing left behind). */
    struct tenure_fixture *f = *state;
    struct tenure_runs *runs = calloc(1, sizeof(*runs));
    assert_non_null(runs);
    char path[512];
    snprintf(path, sizeof(path), "%s/TENURES", f->dir);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(tenure_runs_load(f->dir, runs), -EISDIR);
    snprintf(path, sizeof(path), "%s/NODE_ID", f->dir);
    assert_int_equal(mkdir(path, 0755), 0);
    uint64_t id = 0;
    assert_int_equal(tenure_node_id_load(f->dir, &id), -EISDIR);
    snprintf(path, sizeof(path), "%s/nowhere", f->dir);
    tenure_runs_set(runs, 1, 2);
    assert_int_equal(tenure_runs_save(path, runs), -ENOENT);
    assert_int_equal(access(path, F_OK), -1);
    free(runs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tenure_history_round_trip),
        cmocka_unit_test(test_tenure_history_keeps_newest_sixteen),
        cmocka_unit_test(test_tenure_parse_refuses_foreign_and_damaged),
        cmocka_unit_test(test_tenure_parse_random_bytes),
        cmocka_unit_test(test_tenure_release_no_history_or_own_newest),
        cmocka_unit_test(test_tenure_release_stale_after_handover),
        cmocka_unit_test(test_tenure_release_frozen_through_two_handovers),
        cmocka_unit_test(test_tenure_release_back_to_former_owner),
        cmocka_unit_test(test_tenure_release_absent_from_full_history),
        cmocka_unit_test_setup_teardown(test_tenure_node_id_created_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tenure_node_id_damaged_is_an_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tenure_runs_save_and_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tenure_runs_damage_is_named, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tenure_files_other_errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
