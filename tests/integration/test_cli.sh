#!/usr/bin/env bash
# The command line as a user meets it: help, exit codes, the contract's busy-day example, dead
# letters with reasons and line numbers, and fsck on what ingest wrote.
source "$(dirname "$0")/lib.sh"

expect_exit "help" 0 "$DAYSHARD" help
expect_exit "no command" 2 "$DAYSHARD"
expect_exit "unknown command" 2 "$DAYSHARD" frobnicate
for cmd in ingest count fsck generate demo; do
  expect_exit "$cmd --help" 0 "$DAYSHARD" "$cmd" --help
  grep -q "usage: dayshard $cmd" "$WORK/out" && ok || fail "$cmd --help text"
  expect_exit "help $cmd" 0 "$DAYSHARD" help "$cmd"
done
expect_exit "ingest without --data" 2 "$DAYSHARD" ingest
expect_exit "ingest bad --shards" 2 "$DAYSHARD" ingest --data "$WORK/x" --shards 0
expect_exit "ingest bad --io" 2 "$DAYSHARD" ingest --data "$WORK/x" --io fast
expect_exit "ingest missing file" 1 "$DAYSHARD" ingest --data "$WORK/x" "$WORK/nope.jsonl"
grep -q "cannot open" "$WORK/err" && ok || fail "missing file reason"
expect_exit "count without --day" 2 "$DAYSHARD" count --data "$WORK/x"
expect_exit "count bad day" 2 "$DAYSHARD" count --data "$WORK/x" --day 2026-02-30
expect_exit "count to before day" 2 "$DAYSHARD" count --data "$WORK/x" --day 2026-01-02 --to 2026-01-01
expect_exit "count bad by" 2 "$DAYSHARD" count --data "$WORK/x" --day 2026-01-02 --by week
expect_exit "count range too long" 2 "$DAYSHARD" count --data "$WORK/x" --day 2025-01-01 --to 2026-06-01
expect_exit "fsck without --data" 2 "$DAYSHARD" fsck

# The contract example: shop + busy day with 3 shards.
data="$WORK/shop"
cat "$FIXTURES/shop.jsonl" "$FIXTURES/busy-day.jsonl" > "$WORK/in.jsonl"
expect_exit "ingest fixtures" 0 "$DAYSHARD" ingest --data "$data" --shards 3 --json "$WORK/in.jsonl"
cp "$WORK/out" "$WORK/ingest.json"
expect_eq "accepted" 9 "$(json_get "$WORK/ingest.json" 'd["accepted"]')"
expect_eq "rejected" 0 "$(json_get "$WORK/ingest.json" 'd["rejected"]')"
expect_exit "count busy day" 0 "$DAYSHARD" count --data "$data" --day 2026-01-21 --by shard --json
cp "$WORK/out" "$WORK/count.json"
expect_eq "busy day count" 4 "$(json_get "$WORK/count.json" 'd["count"]')"
expect_eq "busy day partitions" 3 "$(json_get "$WORK/count.json" 'd["partitions"]')"
expect_eq "busy day amount" 133.7400 "$(json_get "$WORK/count.json" 'd["amount_sum"]')"
expect_eq "busy day shards" "0:1 1:2 2:1" \
  "$(json_get "$WORK/count.json" '" ".join("%d:%d" % (g["key"], g["count"]) for g in d["groups"])')"
expect_exit "count paid in January" 0 "$DAYSHARD" count --data "$data" --day 2026-01-01 --to 2026-01-31 --status paid --json
expect_eq "paid count" 5 "$(json_get "$WORK/out" 'd["count"]')"
expect_exit "count by hour" 0 "$DAYSHARD" count --data "$data" --day 2026-01-21 --by hour --json
expect_eq "hour groups" "0:1 9:1 10:1 12:1" \
  "$(json_get "$WORK/out" '" ".join("%d:%d" % (int(g["key"][11:13]), g["count"]) for g in d["groups"] if g["count"])')"
expect_exit "count by day" 0 "$DAYSHARD" count --data "$data" --day 2026-01-20 --to 2026-01-22 --by day --json
expect_eq "day groups" "1 4 0" "$(json_get "$WORK/out" '" ".join(str(g["count"]) for g in d["groups"])')"
expect_exit "count table" 0 "$DAYSHARD" count --data "$data" --day 2026-01-21
grep -q "4 orders, amount 133.7400, 3 partitions read" "$WORK/out" && ok || fail "count table text"
expect_exit "fsck clean" 0 "$DAYSHARD" fsck --data "$data" --json
expect_eq "fsck events" 9 "$(json_get "$WORK/out" 'd["events_ok"]')"

# Ingesting again: in the orders model (the default) every line is an unchanged repeat of its
# order, so the day keeps its 4 orders; in the events model the day doubles.
expect_exit "ingest again" 0 "$DAYSHARD" ingest --data "$data" --json "$WORK/in.jsonl"
expect_exit "count again" 0 "$DAYSHARD" count --data "$data" --day 2026-01-21 --json
expect_eq "orders count after a repeat" 4 "$(json_get "$WORK/out" 'd["count"]')"
expect_exit "ingest events" 0 "$DAYSHARD" ingest --data "$WORK/ev" --model events --shards 3 "$WORK/in.jsonl"
expect_exit "ingest events again" 0 "$DAYSHARD" ingest --data "$WORK/ev" "$WORK/in.jsonl"
expect_exit "count events doubled" 0 "$DAYSHARD" count --data "$WORK/ev" --day 2026-01-21 --json
expect_eq "doubled count" 8 "$(json_get "$WORK/out" 'd["count"]')"

# The update stream (versions, a retry, items) after the two files: every line is accepted, and
# counted as events (16 lines) 2026-01-21 holds 8 (test_orders_fixtures.sh checks the orders).
data="$WORK/updates"
model=(--model events)
cat "$FIXTURES/shop.jsonl" "$FIXTURES/busy-day.jsonl" "$FIXTURES/updates.jsonl" > "$WORK/upd.jsonl"
expect_exit "ingest updates" 0 "$DAYSHARD" ingest --data "$data" --shards 3 "${model[@]}" --json "$WORK/upd.jsonl"
expect_eq "updates accepted" 16 "$(json_get "$WORK/out" 'd["accepted"]')"
expect_eq "updates rejected" 0 "$(json_get "$WORK/out" 'd["rejected"]')"
expect_exit "count updates day" 0 "$DAYSHARD" count --data "$data" --day 2026-01-21 --json
expect_eq "updates busy day as events" 8 "$(json_get "$WORK/out" 'd["count"]')"
expect_exit "fsck updates" 0 "$DAYSHARD" fsck --data "$data" --json
expect_eq "fsck updates events" 16 "$(json_get "$WORK/out" 'd["events_ok"]')"

# Bad lines go to the dead-letter file with reason and line number; good ones keep flowing.
data="$WORK/bad"
printf '%s\n' \
  '{"order_id": 1, "customer_id": 1, "ts": "2026-01-21T10:00:00Z"}' \
  'not json at all' \
  '{"order_id": 2, "customer_id": 1}' \
  '' \
  '{"order_id": 3, "customer_id": 1, "ts": "2026-01-21T10:00:00Z", "amount": 1.23456}' \
  '{"order_id": "x", "customer_id": 9, "ts": 1768996800000, "status": "paid"}' \
  '[1,2,3]' \
  '{"order_id": 4, "customer_id": 1, "ts": 1768996800000, "items": [{"product": "Pen", "quantity": 0}]}' \
  '{"order_id": 5, "customer_id": 1, "ts": 1768996800000, "version": 1.5}' > "$WORK/bad.jsonl"
expect_exit "ingest with bad lines" 0 "$DAYSHARD" ingest --data "$data" --json "$WORK/bad.jsonl"
cp "$WORK/out" "$WORK/bad.json"
expect_eq "bad accepted" 2 "$(json_get "$WORK/bad.json" 'd["accepted"]')"
expect_eq "bad rejected" 6 "$(json_get "$WORK/bad.json" 'd["rejected"]')"
expect_eq "bad reasons" "amount_precision=1 bad_items=1 bad_version=1 missing_ts=1 not_json=1 not_object=1" \
  "$(json_get "$WORK/bad.json" '" ".join("%s=%d" % kv for kv in sorted(d["rejected_by_reason"].items()))')"
expect_eq "dead letter lines" "2:not_json 3:missing_ts 5:amount_precision 7:not_object 8:bad_items 9:bad_version" \
  "$("$PY" -c '
import json, sys
print(" ".join("%d:%s" % (r["line"], r["reason"]) for r in map(json.loads, open(sys.argv[1]))))' <(deadletters "$data"))"
expect_eq "dead letter raw kept" "not json at all" \
  "$("$PY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["raw"])' <(deadletters "$data"))"

# A line longer than the 64 KiB event limit is rejected, not buffered without bound.
data="$WORK/long"
"$PY" -c 'print("{\"order_id\": 1, \"customer_id\": 1, \"ts\": 1768996800000, \"pad\": \"" + "x" * 200000 + "\"}"); print("{\"order_id\": 2, \"customer_id\": 1, \"ts\": 1768996800000}")' > "$WORK/long.jsonl"
expect_exit "ingest long line" 0 "$DAYSHARD" ingest --data "$data" --json "$WORK/long.jsonl"
expect_eq "long accepted" 1 "$(json_get "$WORK/out" 'd["accepted"]')"
expect_eq "long rejected" "{'too_large': 1}" "$(json_get "$WORK/out" 'd["rejected_by_reason"]')"

# Generated events round-trip through ingest: the per-day counts equal the generator's.
"$DAYSHARD" generate --events 20000 --profile busy-day --seed 7 > "$WORK/gen.jsonl"
expect_exit "ingest generated" 0 "$DAYSHARD" ingest --data "$WORK/gen" --json "$WORK/gen.jsonl"
expect_exit "count generated" 0 "$DAYSHARD" count --data "$WORK/gen" --day 2026-01-01 --to 2026-01-28 --by day --json
expect_eq "generated per-day counts" \
  "$("$PY" -c '
import json, sys, collections
from datetime import datetime, timezone
c = collections.Counter()
for line in open(sys.argv[1]):
    e = json.loads(line); ts = e["ts"]
    day = datetime.fromtimestamp(ts / 1000, timezone.utc).strftime("%Y-%m-%d") if isinstance(ts, int) else ts[:10]
    c[day] += 1
print(" ".join("%s=%d" % kv for kv in sorted(c.items())))' "$WORK/gen.jsonl")" \
  "$(json_get "$WORK/out" '" ".join("%s=%d" % (g["key"], g["count"]) for g in d["groups"] if g["count"])')"

# A path that holds no dayshard store is an error for every reader, naming the path
# (never an empty store, "0 orders", "clean", a service of zeros); only writers create a store.
mkdir -p "$WORK/empty"
for dir in "$WORK/no/such/dir" "$WORK/empty"; do
  expect_exit "count --data $dir" 1 "$DAYSHARD" count --data "$dir" --day 2026-01-21
  grep -q "$dir" "$WORK/err" && ok || fail "count names no path: $(cat "$WORK/err")"
  expect_exit "fsck --data $dir" 1 "$DAYSHARD" fsck --data "$dir"
  grep -q "$dir" "$WORK/err" && ok || fail "fsck names no path: $(cat "$WORK/err")"
  expect_exit "serve --data $dir" 1 timeout 10 "$DAYSHARD" serve --data "$dir" --http 127.0.0.1:0
  grep -q "$dir" "$WORK/err" && ok || fail "serve names no path: $(cat "$WORK/err")"
  expect_exit "orders --data $dir" 1 "$DAYSHARD" orders --data "$dir" --customer 1
done
[[ ! -e $WORK/no/such/dir ]] && [[ -z $(ls -A "$WORK/empty") ]] && ok ||
  fail "a reader created something"
expect_exit "a writer creates the store" 0 "$DAYSHARD" ingest --data "$WORK/empty" /dev/null
expect_exit "then readers open it" 0 "$DAYSHARD" count --data "$WORK/empty" --day 2026-01-21

# Every command the list names answers --help, and the list promises nothing that is not there
# (it once said `orders` "needs the by-customer index, not built yet").
expect_exit "help" 0 "$DAYSHARD" help
cp "$WORK/out" "$WORK/help.txt"
grep -qiE "not built|not yet|todo" "$WORK/help.txt" && fail "help promises something missing" || ok
for cmd in $(awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1}' "$WORK/help.txt"); do
  [[ $cmd == help ]] && continue
  expect_exit "$cmd --help (from the list)" 0 "$DAYSHARD" "$cmd" --help
  grep -qiE "not built|not yet" "$WORK/out" && fail "$cmd --help promises something missing" || ok
done
expect_exit "help --help" 0 "$DAYSHARD" help --help
grep -q "^commands:" "$WORK/out" && ok || fail "help --help prints no command list"

finish
