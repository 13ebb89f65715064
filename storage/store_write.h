/*
 * Private to storage/: the write side of the engine (store_write.c), one layer above store.h.
 * Only the facade (storage.c) calls it; it never calls the read side. Every file operation it
 * makes on data and manifest files goes through st->io, so a fault-injecting backend reaches
 * appends, commits, rotation and recovery alike.
 *
 * The sticky failure rule: after an I/O error in a commit, st->failed holds it and the facade
 * refuses further writes until the directory is reopened.
 */
#ifndef DS_STORAGE_STORE_WRITE_H
#define DS_STORAGE_STORE_WRITE_H

#include "storage/store.h"

/* Recovery at open (after the lock is taken and st->io set): replays the manifest, cuts every
 * segment and the manifest back to what was committed, removes segments no commit reached,
 * and opens the manifest for appends. Returns 0, -DS_ECORRUPT, -DS_EFORMAT or a negated errno. */
DS_MUST_USE int store_write_recover(struct storage *st);

/* Adds one event to p's open block (sealing early when the block is full). source (may be NULL)
 * was validated by the caller. */
DS_MUST_USE int store_write_append(struct storage *st, struct part *p, const struct ds_event *event,
                                   const struct ds_source *source);
/* Like store_write_append, but source is only kept as the row's own (the events model): the
 * source's position does not move (a release's retraction rows). */
DS_MUST_USE int store_write_append_kept(struct storage *st, struct part *p,
                                        const struct ds_event *event,
                                        const struct ds_source *source);
/* Records a source offset as seen, to be committed with the next commit. */
void store_write_source_note(struct storage *st, const struct ds_source *source);

/* The group commit (two I/O flushes, see store_write.c). When floor is above the committed
 * retention floor, the manifest record is a snapshot that also drops the days below floor
 * (store_write_drop_below), so the commit and its drop are one atomic step. Returns the number
 * n of partitions it made durable, which are st->touched[0 .. n) until the next append, or a
 * negated errno. */
DS_MUST_USE int store_write_commit(struct storage *st, int32_t floor);
/* Rewrites the manifest as one snapshot when it has grown past MANIFEST_BYTES_ROTATE; else 0. */
DS_MUST_USE int store_write_rotate_if_due(struct storage *st);

/* Compaction (orders.c): a rewrite of p into new segments, built in slices between commits
 * while p takes appends. begin (between commits) starts the rewrite's first segment in shadow,
 * a partition outside the table, STORE_REWRITE_GAP ids above p's segment; append adds a row to
 * it (sealing full blocks); sync, at the end of each slice, writes and syncs what was sealed;
 * commit, right after a commit once the rewrite holds every row p committed (nothing pending
 * anywhere), seals and syncs the rest, makes the rewrite p's segments (store_part_rebase) and
 * writes the state as a new MANIFEST (atomic rename, format 3), then schedules the replaced
 * segments' removal (STORE_RETIRE_DELAY_NS later, so that readers holding the previous state
 * finish; recovery removes any a crash left). abort removes the rewrite's files; a roll of p
 * that would reach the rewrite's ids aborts it too (st->rewrite becomes NULL). On error the
 * storage is failed: reopened, it has the old partition, and recovery removes the unfinished
 * rewrite (segments past the committed one). */
DS_MUST_USE int store_write_rewrite_begin(struct storage *st, const struct part *p,
                                          struct part *shadow);
/* source (may be NULL): the row's source, kept in the events model as storage_append keeps it. */
DS_MUST_USE int store_write_rewrite_append(struct storage *st, struct part *shadow,
                                           const struct ds_event *event,
                                           const struct ds_source *source);
DS_MUST_USE int store_write_rewrite_sync(struct storage *st, struct part *shadow);
DS_MUST_USE int store_write_rewrite_commit(struct storage *st, struct part *p, struct part *shadow);
void store_write_rewrite_abort(struct storage *st);
/* Removes the replaced segments whose delay has passed (called after each commit). */
void store_write_retire_due(struct storage *st);

/* Retention: with the commit's blocks durable and its state applied (store_write_commit), or
 * at a writer's open, makes floor (above the current one) the retention floor:
 * one new MANIFEST (atomic rename, format 4) without the partitions of the days below it and
 * naming the floor, then their files' removal is scheduled STORE_RETIRE_DELAY_NS later (a
 * reader holding the previous state finishes; recovery removes any a crash left). On error the
 * storage is failed; reopened, it has the days whole. */
DS_MUST_USE int store_write_drop_below(struct storage *st, int32_t floor);
/* Removes the files of dropped days whose delay has passed (all: every one, at close). */
void store_write_drop_due(struct storage *st, bool all);

/* For fsck --repair (holding the lock, with the state replayed but no recovery run): replaces
 * the MANIFEST with one snapshot of st, plus its skip entries (format 2 when there are any),
 * by an atomic rename. Returns 0 or a negated errno. */
DS_MUST_USE int store_write_manifest_rewrite(struct storage *st);

#endif /* DS_STORAGE_STORE_WRITE_H */
