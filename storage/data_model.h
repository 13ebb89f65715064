/*
 * The record of a data directory's model (storage.h, "the data model"): DIR/MODEL, private to
 * storage. Used by the facade at open (readers and writers) and by storage_model_check.
 */
#ifndef DS_STORAGE_DATA_MODEL_H
#define DS_STORAGE_DATA_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "storage/io.h"
#include "storage/model.h"

/* What a directory says about its model. */
struct data_model_state {
    enum storage_model recorded; /* DIR/MODEL's model, or RECORDED when there is no MODEL */
    bool holds_store;            /* a MANIFEST with content or a parts/ directory */
};

/* Reads dir's record; a missing directory or MODEL is no record. Returns 0, -DS_ECORRUPT
 * (MODEL holds anything but a model's name: reason in why), or a negated errno (in why). */
DS_MUST_USE int data_model_read(const char *dir, struct data_model_state *out, char *why,
                                size_t why_size);
/* Decides the model an open of dir asking for wanted gets, from what dir says. Returns 0 with
 * *model (never RECORDED), or -DS_EUSAGE with the reason in why. */
DS_MUST_USE int data_model_choose(const char *dir, const struct data_model_state *state,
                                  enum storage_model wanted, enum storage_model *model, char *why,
                                  size_t why_size);
/* Whether a writer that opens dir must create the record (a new directory). */
bool data_model_must_record(const struct data_model_state *state);
/* Records model in dir: MODEL.tmp written and synced through io, renamed over MODEL, then the
 * directory synced. Returns 0 or a negated errno (logged); after a failure MODEL is absent or
 * complete, and the open fails before any MANIFEST exists. */
DS_MUST_USE int data_model_write(struct storage_io *io, const char *dir, enum storage_model model);

#endif /* DS_STORAGE_DATA_MODEL_H */
