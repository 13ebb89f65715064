#!/usr/bin/env bash
# A data directory's model: chosen when the directory is created,
# recorded in DIR/MODEL, shown by every reader (count text and JSON, /v1/count, fsck, the demo),
# and never changed: a writer asking for another one is a usage error naming both. Directories
# made before models were recorded hold events; a new one counts orders unless told otherwise.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"

cat "$FIXTURES/shop.jsonl" "$FIXTURES/busy-day.jsonl" >"$WORK/in.jsonl"

# --help of every writer documents the flag.
for cmd in ingest run demo loadtest; do
  expect_exit "$cmd --help" 0 "$DAYSHARD" "$cmd" --help
  grep -q -- "--model M" "$WORK/out" && ok || fail "$cmd --help lacks --model"
done

# An explicit events: recorded, counted, shown.
data="$WORK/events"
expect_exit "ingest --model events" 0 "$DAYSHARD" ingest --data "$data" --model events --shards 3 "$WORK/in.jsonl"
grep -q "model events" "$WORK/out" && ok || fail "ingest summary model: $(cat "$WORK/out")"
expect_eq "MODEL record" "events" "$(cat "$data/MODEL")"
expect_exit "count text" 0 "$DAYSHARD" count --data "$data" --day 2026-01-21
grep -q "4 orders, amount 133.7400, 3 partitions read (model events)" "$WORK/out" && ok ||
  fail "count text: $(cat "$WORK/out")"
expect_exit "count json" 0 "$DAYSHARD" count --data "$data" --day 2026-01-21 --json
cp "$WORK/out" "$WORK/count.json"
expect_eq "count json model" "events" "$(json_get "$WORK/count.json" 'd["model"]')"
expect_eq "count json count" 4 "$(json_get "$WORK/count.json" 'd["count"]')"
expect_exit "fsck text" 0 "$DAYSHARD" fsck --data "$data"
grep -q "clean: .*, model events" "$WORK/out" && ok || fail "fsck text: $(cat "$WORK/out")"
expect_exit "fsck json" 0 "$DAYSHARD" fsck --data "$data" --json
cp "$WORK/out" "$WORK/fsck.json"
expect_eq "fsck json model" "events" "$(json_get "$WORK/fsck.json" 'd["model"]')"

# Without --model a writer takes the recorded one; the same explicit one fits.
expect_exit "ingest again, no --model" 0 "$DAYSHARD" ingest --data "$data" "$FIXTURES/updates.jsonl"
expect_exit "ingest again, --model events" 0 "$DAYSHARD" ingest --data "$data" --model events /dev/null
expect_exit "count after updates" 0 "$DAYSHARD" count --data "$data" --day 2026-01-21 --json
expect_eq "events count every line (fixtures README: 8)" 8 "$(json_get "$WORK/out" 'd["count"]')"

# Another model on an existing directory: exit 2, both named, nothing written.
before=$(cat "$data/MANIFEST" | md5sum)
expect_exit "ingest --model orders on events" 2 "$DAYSHARD" ingest --data "$data" --model orders "$WORK/in.jsonl"
grep -q "holds the events model.*--model orders does not match" "$WORK/err" && ok ||
  fail "mismatch reason: $(cat "$WORK/err")"
expect_eq "mismatch wrote nothing" "$before" "$(cat "$data/MANIFEST" | md5sum)"
expect_exit "run --model orders on events" 2 "$DAYSHARD" run --brokers 127.0.0.1:1 --data "$data" --model orders
grep -q "holds the events model.*--model orders does not match" "$WORK/err" && ok ||
  fail "run mismatch reason: $(cat "$WORK/err")"
# A directory a later binary made in the orders model (its MODEL says so): a writer asking for
# events is refused naming both; readers show orders.
cp -r "$data" "$WORK/orders-made"
printf 'orders\n' >"$WORK/orders-made/MODEL"
expect_exit "ingest --model events on orders" 2 "$DAYSHARD" ingest --data "$WORK/orders-made" --model events "$WORK/in.jsonl"
grep -q "holds the orders model.*--model events does not match" "$WORK/err" && ok ||
  fail "mismatch reason (orders): $(cat "$WORK/err")"
expect_exit "count json of an orders directory" 0 "$DAYSHARD" count --data "$WORK/orders-made" --day 2026-01-21 --json
expect_eq "count json model orders" "orders" "$(json_get "$WORK/out" 'd["model"]')"

# Bad values.
expect_exit "ingest --model bogus" 2 "$DAYSHARD" ingest --data "$WORK/bogus" --model bogus "$WORK/in.jsonl"
grep -q "bad value 'bogus' for --model" "$WORK/err" && ok || fail "bogus reason: $(cat "$WORK/err")"
[[ ! -e $WORK/bogus ]] && ok || fail "--model bogus created the directory"
expect_exit "run --model bogus" 2 "$DAYSHARD" run --brokers 127.0.0.1:1 --data "$WORK/bogus" --model bogus
expect_exit "demo --model bogus" 2 "$DAYSHARD" demo --no-kafka --events 10 --model bogus
expect_exit "loadtest --model bogus" 2 "$DAYSHARD" loadtest --events 10 --model bogus --out "$WORK/lt"

# The default for a new directory: orders (STORAGE_MODEL_NEW_DEFAULT), counted as orders.
expect_exit "ingest default" 0 "$DAYSHARD" ingest --data "$WORK/default" "$WORK/in.jsonl"
expect_eq "default MODEL" "orders" "$(cat "$WORK/default/MODEL")"
grep -q "model orders" "$WORK/out" && ok || fail "default ingest summary: $(cat "$WORK/out")"

# Every writer takes --model orders and records it.
expect_exit "ingest --model orders" 0 "$DAYSHARD" ingest --data "$WORK/orders" --model orders --shards 3 "$WORK/in.jsonl"
expect_eq "orders MODEL" "orders" "$(cat "$WORK/orders/MODEL")"
expect_exit "ingest updates, no --model" 0 "$DAYSHARD" ingest --data "$WORK/orders" "$FIXTURES/updates.jsonl"
expect_exit "count orders" 0 "$DAYSHARD" count --data "$WORK/orders" --day 2026-01-21 --json
expect_eq "orders count one per order (fixtures README: 5)" 5 "$(json_get "$WORK/out" 'd["count"]')"
expect_eq "orders count model" "orders" "$(json_get "$WORK/out" 'd["model"]')"
expect_exit "demo --model orders" 0 "$DAYSHARD" demo --no-kafka --events 2000 --model orders --data "$WORK/demo-orders"
expect_eq "demo orders MODEL" "orders" "$(cat "$WORK/demo-orders/MODEL")"
expect_exit "loadtest --model orders" 0 "$DAYSHARD" loadtest --events 2000 --model orders --keep-data --out "$WORK/lt"
grep -rqx "orders" "$WORK/lt" --include=MODEL && ok || fail "loadtest recorded no orders MODEL: $(find "$WORK/lt" -name MODEL)"
# An events directory whose MODEL a later binary turned into orders would be inconsistent; a
# writer asking for events on a real orders directory is refused naming both.
expect_exit "ingest --model events on a real orders directory" 2 "$DAYSHARD" ingest --data "$WORK/orders" --model events "$WORK/in.jsonl"
grep -q "holds the orders model.*--model events does not match" "$WORK/err" && ok ||
  fail "orders mismatch reason: $(cat "$WORK/err")"

# A directory made before models were recorded: no MODEL, reads as events, stays so.
cp -r "$data" "$WORK/old"
rm "$WORK/old/MODEL"
expect_exit "count of an old directory" 0 "$DAYSHARD" count --data "$WORK/old" --day 2026-01-21 --json
expect_eq "old directory model" "events" "$(json_get "$WORK/out" 'd["model"]')"
expect_exit "ingest into an old directory" 0 "$DAYSHARD" ingest --data "$WORK/old" /dev/null
[[ ! -e $WORK/old/MODEL ]] && ok || fail "an old directory got a MODEL"
expect_exit "ingest --model orders into an old directory" 2 "$DAYSHARD" ingest --data "$WORK/old" --model orders /dev/null
grep -q "before models were recorded" "$WORK/err" && ok || fail "old mismatch reason: $(cat "$WORK/err")"

# A damaged record: readers and writers refuse it, fsck reports damage.
cp -r "$data" "$WORK/damaged"
printf 'evnts\n' >"$WORK/damaged/MODEL"
expect_exit "count of a damaged MODEL" 1 "$DAYSHARD" count --data "$WORK/damaged" --day 2026-01-21
expect_exit "ingest into a damaged MODEL" 1 "$DAYSHARD" ingest --data "$WORK/damaged" /dev/null
grep -q "MODEL: the data model record is damaged" "$WORK/err" && ok || fail "damaged reason: $(cat "$WORK/err")"
expect_exit "fsck of a damaged MODEL" 1 "$DAYSHARD" fsck --data "$WORK/damaged"

# The demo's summary names the model it created.
expect_exit "demo --model events" 0 "$DAYSHARD" demo --no-kafka --events 2000 --model events --data "$WORK/demo"
grep -q "(model events: every event counts)" "$WORK/out" && ok || fail "demo summary: $(cat "$WORK/out")"
expect_eq "demo MODEL" "events" "$(cat "$WORK/demo/MODEL")"

# /v1/count over HTTP.
serve_start "$data"
code=$(get "/v1/count?day=2026-01-21")
expect_eq "/v1/count status" 200 "$code"
expect_eq "/v1/count model" "events" "$(json_get "$WORK/body" 'd["model"]')"
expect_exit "count --server text" 0 "$DAYSHARD" count --server "http://$SERVE_ADDR" --day 2026-01-21
grep -q "(model events)" "$WORK/out" && ok || fail "count --server text: $(cat "$WORK/out")"
serve_stop

finish
