/*
 * Private to storage/: the pure pieces of the restore from the topic (fsck_restore.c), apart so
 * that unit tests reach them: reading a quarantine record, a restore marker and a line of a
 * repair's <time>.orders.jsonl, each of which fsck_restore.c and quarantine.c write themselves.
 */
#ifndef DS_STORAGE_FSCK_RESTORE_H
#define DS_STORAGE_FSCK_RESTORE_H

#include "storage/storage.h"

/* One line of DIR/quarantine/<time>.orders.jsonl: the order and the version it had before the
 * repair (reverted or lost alike: the version a restore must bring back). */
struct restore_order_line {
    struct ds_id id;
    bool has_version;
    int64_t version;
    int64_t ts_ms;
    int32_t day;
    uint8_t status_len;
    char status[DS_STATUS_BYTES_MAX];
    uint32_t versions_seen; /* the order's count with that version; 0: not on the line */
    /* Not from the line: the order has a newer version already (nothing to restore), and a
     * restore read back an event with the version's fields. */
    bool settled;
    bool found;
    bool last_checked; /* storage_restore_orders_last saw its last event */
};

/* Reads a quarantine record (<name>.json, quarantine.h) into out (name left as it is). Returns
 * 0 or -DS_ECORRUPT for a record missing a field or holding a bad value. */
DS_MUST_USE int fsck_restore_parse_record(const char *text, size_t len,
                                          struct storage_restore_range *out);
/* Reads a restore marker (<name>.restore) into out's state and started_seq. Returns 0 or
 * -DS_ECORRUPT. */
DS_MUST_USE int fsck_restore_parse_marker(const char *text, size_t len,
                                          struct storage_restore_range *out);
/* Reads one line of an orders.jsonl. Returns 0 or -DS_ECORRUPT. */
DS_MUST_USE int fsck_restore_parse_order(const char *line, size_t len,
                                         struct restore_order_line *out);

#endif /* DS_STORAGE_FSCK_RESTORE_H */
