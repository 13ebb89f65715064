#!/usr/bin/env bash
# `dayshard compact`: an orders directory loaded with --no-compact keeps every
# superseded version and its retraction; compact rewrites every partition to its current
# versions: the same counts, sums, per-status counts and P2 answers, fewer rows and bytes, a
# clean fsck (balance included), and a second compact has nothing to do. Refusals: an events
# directory (exit 2), a missing directory (exit 1), a node holding the lock (exit 1), usage.
source "$(dirname "$0")/lib.sh"

"$DAYSHARD" generate --events 60000 --updates 0.4 --duplicates 0.05 --items 0.2 --seed 7 >"$WORK/in.jsonl"
data="$WORK/data"
expect_exit "ingest --no-compact" 0 "$DAYSHARD" ingest --data "$data" --no-compact "$WORK/in.jsonl"
counts() {
  "$DAYSHARD" count --data "$data" --day 2026-01-01 --to 2026-01-31 --by day --json |
    "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(d["count"], d["amount_sum"], " ".join(str(g["count"]) for g in d["groups"]))'
  for s in pending paid shipped cancelled; do
    "$DAYSHARD" count --data "$data" --day 2026-01-01 --to 2026-01-31 --status "$s" --json |
      "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(d["count"], d["amount_sum"])'
  done
}
counts >"$WORK/before.txt"
rows_before=$("$DAYSHARD" fsck --data "$data" --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["retractions"])')
((rows_before > 1000)) && ok || fail "the stream made too few retractions to compact: $rows_before"
"$DAYSHARD" order 17 --data "$data" --json >"$WORK/p2-before.json" || fail "order 17 before"

expect_exit "compact" 0 "$DAYSHARD" compact --data "$data" --json
cp "$WORK/out" "$WORK/compact.json"
expect_eq "rows after = orders" \
  "$("$PY" "$ROOT/tests/integration/orders_oracle.py" "$WORK/in.jsonl" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["totals"]["orders"])')" \
  "$(json_get "$WORK/compact.json" 'd["rows_after"]')"
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["compacted"] > 0 and d["bytes_after"] < d["bytes_before"] and d["rows_after"] < d["rows_before"] else 1)' \
  "$WORK/compact.json" && ok || fail "compact removed nothing: $(cat "$WORK/compact.json")"
counts >"$WORK/after.txt"
cmp -s "$WORK/before.txt" "$WORK/after.txt" && ok || fail "answers changed: $(diff "$WORK/before.txt" "$WORK/after.txt" | head -5)"
"$DAYSHARD" order 17 --data "$data" --json >"$WORK/p2-after.json" || fail "order 17 after"
cmp -s "$WORK/p2-before.json" "$WORK/p2-after.json" && ok || fail "P2 changed"
expect_exit "fsck after compact" 0 "$DAYSHARD" fsck --data "$data" --json
expect_eq "no retraction left" 0 "$(json_get "$WORK/out" 'd["retractions"]')"
expect_exit "compact again" 0 "$DAYSHARD" compact --data "$data" --json
expect_eq "nothing left to compact" 0 "$(json_get "$WORK/out" 'd["compacted"]')"
# Only the current segments remain: each partition has one segment file after the reopen.
segments=$(find "$data/parts" -name '*.seg' | wc -l)
partitions=$(find "$data/parts" -mindepth 2 -maxdepth 2 -type d | wc -l)
expect_eq "one segment per partition" "$partitions" "$segments"

# Refusals.
expect_exit "compact without --data" 2 "$DAYSHARD" compact
expect_exit "compact with an extra argument" 2 "$DAYSHARD" compact --data "$data" extra
"$DAYSHARD" ingest --data "$WORK/events" --model events "$WORK/in.jsonl" >/dev/null
expect_exit "compact an events directory" 2 "$DAYSHARD" compact --data "$WORK/events"
grep -q "counts events" "$WORK/err" && ok || fail "events refusal: $(cat "$WORK/err")"
expect_exit "compact a missing directory" 1 "$DAYSHARD" compact --data "$WORK/nothing"
expect_exit "compact --help" 0 "$DAYSHARD" compact --help
# A writer holds the lock (an ingest waiting on a FIFO): refused, naming it.
mkfifo "$WORK/fifo"
"$DAYSHARD" ingest --data "$data" "$WORK/fifo" >/dev/null 2>&1 &
writer=$!
exec 7>"$WORK/fifo"
for _ in $(seq 50); do [[ -e $data/LOCK ]] && break; sleep 0.1; done
sleep 0.5
expect_exit "compact beside a writer" 1 "$DAYSHARD" compact --data "$data"
grep -q "stop it first" "$WORK/err" && ok || fail "lock refusal: $(cat "$WORK/err")"
exec 7>&-
wait "$writer" || fail "the writer holding the lock failed"
finish
