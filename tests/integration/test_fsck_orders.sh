#!/usr/bin/env bash
# fsck's balance check of the orders model (storage/fsck_orders.c), end to end.
#
# 1. A generated update stream (30% updates, 5% duplicates, 20% with items) ingested with
#    --model orders in two runs (the second one reopens the orders-by-id store): `fsck --json`
#    is clean and its balance figures equal the independent oracle's (orders_oracle.py):
#    orders = its orders, retractions = its applied events (one retraction each), nothing
#    unmatched or mismatched; the text output says the same. The by-customer index, rebuilt
#    from the base, still compares clean against it (superseded rows stay in both).
# 1b. A stream that makes the writer compact (one busy day, 60% updates): still balanced, the
#    same orders as the oracle, fewer retractions than applied updates.
# 2. A copy with one block damaged: fsck finds it (exit 1, the partition's balance unchecked);
#    --repair quarantines it and reconciles the orders (exit 0): the retractions balance, the
#    orders are the oracle's minus the lost ones, each reverted or lost order is one line of
#    quarantine/*.orders.jsonl, and the next fsck is clean. (The naming of violations is unit
#    tested: tests/unit/storage/test_fsck_orders.c.)
# 3. The same stream with --model events: nothing to balance, all figures 0, clean.
# DS_LONG=1: 400,000 lines instead of 20,000.
source "$(dirname "$0")/lib.sh"

ORACLE="$ROOT/tests/integration/orders_oracle.py"
EVENTS=20000
if [[ ${DS_LONG:-} == 1 ]]; then EVENTS=400000; fi

"$DAYSHARD" generate --events "$EVENTS" --updates 0.3 --duplicates 0.05 --items 0.2 --seed 14 \
  >"$WORK/gen.jsonl"
half=$((EVENTS / 2))
head -n "$half" "$WORK/gen.jsonl" >"$WORK/a.jsonl"
tail -n +"$((half + 1))" "$WORK/gen.jsonl" >"$WORK/b.jsonl"
"$PY" "$ORACLE" --model orders --out "$WORK/oracle.json" "$WORK/gen.jsonl"
want_orders=$(json_get "$WORK/oracle.json" "len(d['orders'])")
want_applied=$(json_get "$WORK/oracle.json" "d['totals']['applied']")
if (( want_applied < EVENTS / 5 )); then
  fail "the stream has only $want_applied applied updates"
fi

# ---- 1. a clean orders-model directory ------------------------------------------------------

data="$WORK/orders"
expect_exit "ingest first half" 0 "$DAYSHARD" ingest --data "$data" --model orders --io sync "$WORK/a.jsonl"
expect_exit "ingest second half" 0 "$DAYSHARD" ingest --data "$data" --io sync "$WORK/b.jsonl"
expect_exit "gsi rebuild" 0 "$DAYSHARD" gsi rebuild --data "$data"
expect_exit "fsck --json clean" 0 "$DAYSHARD" fsck --data "$data" --json
cp "$WORK/out" "$WORK/fsck.json"
expect_eq "fsck: model, ok" "orders True" "$(json_get "$WORK/fsck.json" "'%s %s' % (d['model'], d['ok'])")"
expect_eq "fsck: orders = oracle's orders" "$want_orders" "$(json_get "$WORK/fsck.json" "d['orders']")"
expect_eq "fsck: retractions = oracle's applied updates" "$want_applied" \
  "$(json_get "$WORK/fsck.json" "d['retractions']")"
expect_eq "fsck: unmatched, mismatched, unchecked" "0 0 0" \
  "$(json_get "$WORK/fsck.json" "'%d %d %d' % (d['retractions_unmatched'], d['orders_mismatched'], d['balance_unchecked'])")"
expect_eq "fsck: rows = orders + 2 x retractions" "$((want_orders + 2 * want_applied))" \
  "$(json_get "$WORK/fsck.json" "d['events_ok']")"
expect_eq "fsck: the index is present and clean" "True False" \
  "$(json_get "$WORK/fsck.json" "'%s %s' % (d['index']['present'], d['index']['damaged'])")"
expect_exit "fsck text clean" 0 "$DAYSHARD" fsck --data "$data"
expect_eq "fsck text: balance line" \
  "$data: $want_orders orders, $want_applied retractions: 0 cancel no earlier row, 0 rows and orders do not match" \
  "$(grep ' retractions: ' "$WORK/out" || true)"
echo "orders model: $want_orders orders, $want_applied retractions over $EVENTS lines"

# ---- 1b. after compaction -------------------------------------------------------------------
# 90% of 200,000 lines on one day, 60% updates: its 4 partitions take far more than
# STORAGE_COMPACT_DEAD_ROWS_MIN dead rows, so the writer compacts them while ingesting (in
# slices between commits: frequent commits let a rewrite finish before the input does).
# Compaction drops retractions with the rows they cancel: fewer retractions than applied
# updates, and still rows = orders + 2 x retractions, and the same orders as the oracle.

"$DAYSHARD" generate --events 200000 --updates 0.6 --duplicates 0.05 --profile busy-day \
  --busy-fraction 0.9 --seed 3 >"$WORK/busy.jsonl"
"$PY" "$ORACLE" --model orders --out "$WORK/busy-oracle.json" "$WORK/busy.jsonl"
busy_orders=$(json_get "$WORK/busy-oracle.json" "len(d['orders'])")
busy_applied=$(json_get "$WORK/busy-oracle.json" "d['totals']['applied']")
expect_exit "ingest busy" 0 "$DAYSHARD" ingest --data "$WORK/busy" --model orders --io sync \
  --commit-interval-ms 5 "$WORK/busy.jsonl"
# A writer's recovery removes the replaced segments at once (else 30 s later).
expect_exit "ingest nothing (recovery)" 0 "$DAYSHARD" ingest --data "$WORK/busy" --io sync /dev/null
expect_exit "fsck after compaction" 0 "$DAYSHARD" fsck --data "$WORK/busy" --json
cp "$WORK/out" "$WORK/busy-fsck.json"
expect_eq "compacted: orders = oracle's, nothing unmatched or mismatched" "$busy_orders 0 0 0" \
  "$(json_get "$WORK/busy-fsck.json" "'%d %d %d %d' % (d['orders'], d['retractions_unmatched'], d['orders_mismatched'], d['balance_unchecked'])")"
expect_eq "compacted: fewer retractions than applied updates" True \
  "$(json_get "$WORK/busy-fsck.json" "0 < d['retractions'] < $busy_applied")"
expect_eq "compacted: rows = orders + 2 x retractions" True \
  "$(json_get "$WORK/busy-fsck.json" "d['events_ok'] == d['orders'] + 2 * d['retractions']")"

# ---- 2. a damaged block quarantined breaks the balance --------------------------------------

broken="$WORK/broken"
cp -a "$data" "$broken"
rm -rf "$broken/gsi" # the index is rebuilt by --repair; not what this test is about
# The largest segment (several blocks: both ingest runs wrote to it); its last block's payload
# ends the file: flip a byte just before its end.
seg=$(find "$broken/parts" -name '*.seg' -printf '%s %p\n' | sort -n | tail -n 1 | cut -d' ' -f2-)
size=$(stat -c %s "$seg")
printf '\xff' | dd of="$seg" bs=1 seek=$((size - 3)) conv=notrunc status=none
expect_exit "fsck: the damaged block found" 1 "$DAYSHARD" fsck --data "$broken" --json
expect_eq "fsck: one damaged block, a balance not checked" "1 True" \
  "$(json_get "$WORK/out" "'%d %s' % (d['blocks_bad'], d['balance_unchecked'] > 0)")"
expect_exit "fsck --repair: ends balanced" 0 "$DAYSHARD" fsck --data "$broken" --repair --json
cp "$WORK/out" "$WORK/repair.json"
cp "$WORK/err" "$WORK/repair.err"
expect_eq "repair quarantined one block, blocks clean" "1 0" \
  "$(json_get "$WORK/repair.json" "'%d %d' % (d['quarantined_blocks'], d['blocks_bad'])")"
expect_eq "repair: balanced" "0 0 0" \
  "$(json_get "$WORK/repair.json" "'%d %d %d' % (d['retractions_unmatched'], d['orders_mismatched'], d['balance_unchecked'])")"
expect_eq "repair: orders reverted or lost" True \
  "$(json_get "$WORK/repair.json" "d['orders_reverted'] + d['orders_lost'] > 0")"
lost=$(json_get "$WORK/repair.json" "d['orders_lost']")
changed=$(json_get "$WORK/repair.json" "d['orders_reverted'] + d['orders_lost']")
expect_eq "repair: orders = the oracle's - lost" "$((want_orders - lost))" \
  "$(json_get "$WORK/repair.json" "d['orders']")"
expect_eq "repair: one record line per reverted or lost order" "$changed" \
  "$(cat "$broken"/quarantine/*.orders.jsonl | wc -l)"
expect_eq "repair: the record's lost lines" "$lost" \
  "$(grep -c '"outcome":"lost"' "$broken"/quarantine/*.orders.jsonl || true)"
if grep -q 'reconciled the orders with the data' "$WORK/repair.err"; then ok; else
  fail "repair does not say what it reconciled: $(head -c 600 "$WORK/repair.err")"
fi
expect_exit "fsck after repair: clean" 0 "$DAYSHARD" fsck --data "$broken" --json
expect_exit "fsck --repair again: nothing to do" 0 "$DAYSHARD" fsck --data "$broken" --repair --json
expect_eq "second repair: nothing reverted or lost" "0 0" \
  "$(json_get "$WORK/out" "'%d %d' % (d['orders_reverted'], d['orders_lost'])")"

# ---- 3. the events model: nothing to balance ------------------------------------------------

events="$WORK/events"
expect_exit "ingest --model events" 0 "$DAYSHARD" ingest --data "$events" --model events --io sync "$WORK/gen.jsonl"
expect_exit "fsck events model" 0 "$DAYSHARD" fsck --data "$events" --json
expect_eq "events model: zeros" "events 0 0 0 0 0" \
  "$(json_get "$WORK/out" "'%s %d %d %d %d %d' % (d['model'], d['orders'], d['retractions'], d['retractions_unmatched'], d['orders_mismatched'], d['balance_unchecked'])")"

finish
