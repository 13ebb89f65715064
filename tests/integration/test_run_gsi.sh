#!/usr/bin/env bash
# The by-customer index (GSI) built by `dayshard run` and served at /v1/customers/{id}/orders:
# - full pagination (limits 1, 7, 1000) equals a ground truth computed from the input: a heavy
#   customer (thousands of orders), a light one (one order), string ids and an integer id that
#   looks like one of them, ids back in the type they went in; no gaps, no repeats;
# - consistent=true right after producing an order returns it;
# - kill -9 of the node while it builds, restart: the same view, nothing twice;
# - bad limit, cursor and id: 4xx JSON errors;
# - `dayshard serve` beside the node: the same view, and after `gsi rebuild` the new index.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"

start_broker --partitions 4
gsi_events 9 "$WORK/events.jsonl"
expected=$(truth "$WORK/events.jsonl")

# check_view WHAT: every customer's full pagination equals the truth.
check_view() {
  local what=$1 customer path limit
  for customer in 2 1 999999999 '"42"' 42 '"cust é"' 123456789012; do
    path=$(customer_path "$customer")
    "$PY" "$GSI_LIB" truth "$customer" "$WORK/events.jsonl" >"$WORK/want.txt"
    for limit in 1 7 1000; do
      if [[ $limit == 1 && ($customer == 1 || $customer == 2) ]]; then continue; fi # many pages
      "$PY" "$GSI_LIB" pages "$URL/v1/customers/$path/orders" "$limit" >"$WORK/got.txt" ||
        fail "$what: pages of $customer (limit $limit) failed"
      if cmp -s "$WORK/want.txt" "$WORK/got.txt"; then ok; else
        fail "$what: customer $customer limit $limit: $(diff "$WORK/want.txt" "$WORK/got.txt" | head -4)"
      fi
    done
  done
}

start_http_node n1 "$WORK/data" gsi
wait_assigned n1 30 || die "the node got no partitions"
ds_produce "$WORK/events.jsonl" || fail "produce"
wait_counts "counts" "$expected" 60 "$WORK/data"
expect_eq "consistent read" 200 "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/customers/1/orders?consistent=true")"
check_view "after building"
heavy_count=$("$PY" "$GSI_LIB" truth 2 "$WORK/events.jsonl" | wc -l)
((heavy_count > 2000)) && ok || fail "the heavy customer has only $heavy_count orders"

# consistent=true right after producing an order returns it.
echo '{"order_id":"fresh-1","customer_id":777777,"ts":"2026-01-28T12:00:00Z","amount":9}' \
  >"$WORK/fresh.jsonl"
ds_produce "$WORK/fresh.jsonl" || fail "produce fresh"
cat "$WORK/fresh.jsonl" >>"$WORK/events.jsonl"
for _ in $(seq 100); do # the node must first store it (durable), then the index answers
  [[ $(day_counts "$WORK/data" | total_of) == $(($(total_of <<<"$expected") + 1)) ]] && break
  sleep 0.05
done
got=$(curl -s "$URL/v1/customers/777777/orders?consistent=true")
grep -q '"order_id":"fresh-1"' <<<"$got" && ok || fail "consistent read missed the new order: $got"

# Hostile requests.
expect_eq "limit 0" 400 "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/customers/1/orders?limit=0")"
expect_eq "limit 1001" 400 "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/customers/1/orders?limit=1001")"
expect_eq "bad cursor" 400 "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/customers/1/orders?cursor=zz")"
expect_eq "empty id" 400 "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/customers/%22%22/orders")"
expect_eq "consistent=maybe" 400 "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/customers/1/orders?consistent=maybe")"
curl -s "$URL/v1/customers/1/orders?cursor=zz" | grep -q '"error"' && ok || fail "no JSON error"

# kill -9 while building a second batch, restart: the same view, nothing twice.
# The same days as the counts cover (node_lib.sh DAYS), string order ids of their own.
"$DAYSHARD" generate --events 20000 --profile hot-customer --seed 10 \
  | sed 's/"order_id":\([0-9]*\)/"order_id":"b\1"/' >"$WORK/more.jsonl"
cat "$WORK/more.jsonl" >>"$WORK/events.jsonl"
ds_produce "$WORK/more.jsonl" &
producer=$!
sleep 0.$((RANDOM % 9 + 1))
crash_node "$NODE_PID"
wait "$producer" || fail "produce more"
start_http_node n1 "$WORK/data" gsi
wait_assigned n1 30 || die "the node got no partitions after the restart"
wait_counts "counts after the crash" "$(truth "$WORK/events.jsonl")" 60 "$WORK/data"
expect_eq "consistent read" 200 "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/customers/1/orders?consistent=true")"
check_view "after kill -9 and restart"
grep -q "gsi: following" "$WORK/n1.log" && ok || fail "no builder start logged"

# The CLI: a table from the node's service, the JSON document from the directory itself.
"$DAYSHARD" orders --server "$URL" --customer '"42"' --limit 2 >"$WORK/table.txt" ||
  fail "orders --server"
grep -q '"s-2"' "$WORK/table.txt" && grep -q "next: " "$WORK/table.txt" && ok ||
  fail "orders --server table: $(cat "$WORK/table.txt")"
"$DAYSHARD" orders --data "$WORK/data" --customer 2 --limit 5 --consistent --json \
  >"$WORK/local.json" || fail "orders --data"
"$PY" -c 'import json,sys
for o in json.load(open(sys.argv[1]))["orders"]: print(json.dumps(o["order_id"]))' \
  "$WORK/local.json" >"$WORK/local.txt"
"$PY" "$GSI_LIB" truth 2 "$WORK/events.jsonl" >"$WORK/want.txt"
head -n 5 "$WORK/want.txt" | cut -d' ' -f1 >"$WORK/want5.txt"
cmp -s "$WORK/local.txt" "$WORK/want5.txt" && ok ||
  fail "orders --data: $(diff "$WORK/want5.txt" "$WORK/local.txt" | head -4)"

# --consistent cannot promise anything when the data's commit cannot be read: it fails, naming
# the directory, and prints no page (it used to print whatever the index held).
mkdir -p "$WORK/broken"
cp -r "$WORK/data/gsi" "$WORK/broken/"
mkdir "$WORK/broken/MANIFEST"
expect_exit "orders --consistent over an unreadable commit" 1 "$DAYSHARD" orders \
  --data "$WORK/broken" --customer 2 --consistent --json
[[ ! -s $WORK/out ]] && grep -q "$WORK/broken" "$WORK/err" && ok ||
  fail "orders --consistent printed a page or no reason: $(head -c 300 "$WORK/out" "$WORK/err")"

# `dayshard serve` beside the node reads the same index (a read-only view of it).
DS_LOG=info "$DAYSHARD" serve --data "$WORK/data" --http 127.0.0.1:0 >"$WORK/serve.out" \
  2>"$WORK/serve.log" &
serve_pid=$!
wait_printed "$WORK/serve.out" "$serve_pid"
SERVE_URL=http://$(head -1 "$WORK/serve.out")
curl -s "$SERVE_URL/v1/customers/2/orders?consistent=true" >/dev/null
"$PY" "$GSI_LIB" truth 2 "$WORK/events.jsonl" >"$WORK/want.txt"
"$PY" "$GSI_LIB" pages "$SERVE_URL/v1/customers/2/orders" 1000 >"$WORK/got.txt" ||
  fail "serve pages failed"
cmp -s "$WORK/want.txt" "$WORK/got.txt" && ok ||
  fail "serve's view: $(diff "$WORK/want.txt" "$WORK/got.txt" | head -4)"
# `gsi rebuild` (node stopped) replaces the index under the running serve: serve reads the new
# one, so an order the restarted node indexes afterwards reaches serve's consistent reads
# (reading the old, moved-aside log it never would).
stop_node n1 "$NODE_PID"
expect_exit "rebuild under a running serve" 0 "$DAYSHARD" gsi rebuild --data "$WORK/data"
start_http_node n1 "$WORK/data" gsi
wait_assigned n1 30 || fail "the node got no partitions after the rebuild"
echo '{"order_id":"after-rebuild","customer_id":888888,"ts":"2026-01-28T13:00:00Z","amount":1}' \
  >"$WORK/after.jsonl"
before=$(day_counts "$WORK/data" | total_of)
ds_produce "$WORK/after.jsonl" || fail "produce after the rebuild"
for _ in $(seq 200); do # durable first; then serve's consistent read must wait for the index
  (($(day_counts "$WORK/data" | total_of) > before)) && break
  sleep 0.05
done
got=$(curl -s --max-time 15 "$SERVE_URL/v1/customers/888888/orders?consistent=true")
grep -q '"order_id":"after-rebuild"' <<<"$got" && ok || fail "serve kept the old index: $got"
grep -q "the index was rebuilt; reading the new one" "$WORK/serve.log" && ok ||
  fail "serve did not say it reopened the index"
kill -TERM "$serve_pid"
wait "$serve_pid" || fail "serve did not stop cleanly"
stop_node n1 "$NODE_PID"
stop_broker
finish
