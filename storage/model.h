/*
 * storage's data model: what a data directory counts, events or orders. Part of the public API
 * through storage.h, which includes it; storage's own headers include this one instead of the
 * facade.
 */
#ifndef DS_STORAGE_MODEL_H
#define DS_STORAGE_MODEL_H

#include <stddef.h>

#include "common/common.h"

/* ---- the data model ------------------------------------------------------------------------ */

/* What a data directory counts (docs/EVENTS.md): chosen when the directory is created,
 * recorded in DIR/MODEL (written and synced before the MANIFEST exists, so a directory holding
 * data always has its record), and never changed. A directory made before models were recorded
 * has no MODEL and holds events: it reads as STORAGE_MODEL_EVENTS. */
enum storage_model {
    STORAGE_MODEL_RECORDED = 0, /* config only: what the directory records (a writer creating
                                   one gives it STORAGE_MODEL_NEW_DEFAULT) */
    STORAGE_MODEL_EVENTS,       /* every event counts: streams of facts such as clicks */
    STORAGE_MODEL_ORDERS,       /* one order per order_id, its latest version */
};

/* The model a writer records when it creates a directory without an explicit one (orders is
 * the default: the question users ask is about orders, not events). */
#define STORAGE_MODEL_NEW_DEFAULT STORAGE_MODEL_ORDERS
/* Room for the reason storage_model_check gives (a path and two model names). */
#define STORAGE_MODEL_WHY_SIZE (DS_PATH_MAX + 256)

/* Parses "orders" or "events" (a --model value); returns 0 or -DS_EUSAGE. */
DS_MUST_USE int storage_model_parse(const char *text, enum storage_model *out);
/* "orders", "events", or "recorded" (STORAGE_MODEL_RECORDED). */
const char *storage_model_name(enum storage_model model);
/* For a writer's command line, before it opens dir: the model an open with wanted would get,
 * or why it is refused, with the same rules as storage_open. Returns 0 (*model set, why
 * untouched), -DS_EUSAGE (dir records another model than wanted, both named), or -DS_ECORRUPT / a
 * negated errno (DIR/MODEL unreadable, -ENAMETOOLONG for a path storage_open would refuse); every
 * failure writes a one-line reason to why (why_size >= STORAGE_MODEL_WHY_SIZE). */
DS_MUST_USE int storage_model_check(const char *dir, enum storage_model wanted,
                                    enum storage_model *model, char *why, size_t why_size);

#endif /* DS_STORAGE_MODEL_H */
