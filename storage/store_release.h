/*
 * Private to storage/: storage_release_range's work (store_release.c), at the facade's level:
 * it reads committed rows through a reader handle and appends retraction rows on the writer.
 */
#ifndef DS_STORAGE_STORE_RELEASE_H
#define DS_STORAGE_STORE_RELEASE_H

#include "storage/store.h"

/* Appends, into st's open blocks, a retraction of every committed row of reader's partitions
 * (reader: a read-only handle of st's directory at st's last commit) whose source is Kafka
 * partition source at an offset >= lo and that no retraction cancels yet, adding them to
 * *released; stops with -EAGAIN after rows_max of them. Rows of blocks without row sources
 * (versions 1-3) that may be in the range are added to *unreleasable. Returns 0, -EAGAIN,
 * -ENOMEM, -DS_ECORRUPT or an I/O error. */
DS_MUST_USE int store_release_range(struct storage *st, struct storage *reader, int32_t source,
                                    int64_t lo, uint32_t rows_max, uint64_t *released,
                                    uint64_t *unreleasable);

#endif /* DS_STORAGE_STORE_RELEASE_H */
