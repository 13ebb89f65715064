/*
 * gsi_rocks: the first store of the by-customer index, on RocksDB, kept as the test oracle of
 * query/gsi/gsi.c (the purpose-built store that replaced it; ARCHITECTURE.md, "By-customer
 * index"). Same entries, same order, same page tokens: a differential test applies the same
 * batches to both and compares every page.
 *
 * Threads: one writer handle per directory; gsi_rocks_query may run on many threads at once.
 */
#ifndef DS_TESTS_SUPPORT_GSI_ROCKS_H
#define DS_TESTS_SUPPORT_GSI_ROCKS_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "query/gsi/gsi.h"

/* Block cache: at least 1 MiB, at most 64 GiB. */
#define GSI_ROCKS_CACHE_BYTES_MIN (1ull << 20)
#define GSI_ROCKS_CACHE_BYTES_MAX (64ull << 30)
#define GSI_ROCKS_CACHE_BYTES_DEFAULT (64ull << 20)
/* Write buffers (two memtables, each half of this): at least 1 MiB, at most 16 GiB. */
#define GSI_ROCKS_WRITE_BUFFER_BYTES_MIN (1ull << 20)
#define GSI_ROCKS_WRITE_BUFFER_BYTES_MAX (16ull << 30)
#define GSI_ROCKS_WRITE_BUFFER_BYTES_DEFAULT (128ull << 20)

struct gsi_rocks_config {
    const char *dir;             /* the index directory; created when missing */
    uint64_t cache_bytes;        /* block cache, index and filter blocks included */
    uint32_t batch_entries_max;  /* largest n gsi_rocks_apply accepts */
    uint64_t write_buffer_bytes; /* writer: memtables, both together */
};

struct gsi_rocks;

void gsi_rocks_config_defaults(struct gsi_rocks_config *cfg);
DS_MUST_USE int gsi_rocks_config_check(const struct gsi_rocks_config *cfg);
uint64_t gsi_rocks_memory_bytes(const struct gsi_rocks_config *cfg);
/* Returns 0, -DS_EUSAGE, -DS_EFORMAT, -DS_ELOCKED, -ENOMEM or -EIO. */
DS_MUST_USE int gsi_rocks_open(const struct gsi_rocks_config *cfg, struct gsi_rocks **out);
DS_MUST_USE int gsi_rocks_open_reader(const struct gsi_rocks_config *cfg, const char *secondary_dir,
                                      struct gsi_rocks **out);
DS_MUST_USE int gsi_rocks_reader_refresh(struct gsi_rocks *g);
void gsi_rocks_close(struct gsi_rocks *g);
/* Entries and cursor atomically; re-applying an entry replaces it by the same bytes. */
DS_MUST_USE int gsi_rocks_apply(struct gsi_rocks *g, const struct gsi_entry *entries, size_t n,
                                const void *cursor, size_t cursor_len);
DS_MUST_USE int gsi_rocks_cursor(struct gsi_rocks *g, void *buf, size_t cap, size_t *len);
/* The page order and token format of gsi_query (gsi.h). */
DS_MUST_USE int gsi_rocks_query(struct gsi_rocks *g, const struct ds_id *customer, uint32_t limit,
                                const char *page_token, struct gsi_page *out);
uint64_t gsi_rocks_bytes_on_disk(struct gsi_rocks *g);

#endif /* DS_TESTS_SUPPORT_GSI_ROCKS_H */
