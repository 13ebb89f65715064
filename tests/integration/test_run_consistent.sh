#!/usr/bin/env bash
# consistent=true on a node (`run --http`) is read-your-writes from the producer's view:
# - rounds of 1-50 events produced by an independent client (python3-kafka, acks=all, flush),
#   each round immediately followed by /v1/count?...&consistent=true and
#   /v1/customers/C/orders?consistent=true for a customer new that round: every acknowledged
#   event is in both answers (the old code answered without it: the count did not take
#   consistent at all, the orders only waited for what was already durable), with bad events
#   (dead letters) among them, which must not block the wait;
# - while the node's ingest is paused: 503 within about timeout_ms, Retry-After, and the
#   positions still missing; after resuming, the same request answers everything;
# - a rebalance while a request waits: 503 saying so, never a partial answer;
# - bad timeout_ms -> 400; without consistent=true the answers are unchanged; the CLI passes
#   --consistent / --timeout-ms through; `serve` says it guarantees "durable" only.
# DS_LONG=1: 200 rounds instead of 30.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"

ROUNDS=30
[[ -n ${DS_LONG:-} ]] && ROUNDS=200
RANGE="day=2026-01-01&to=2026-01-28"
# Each consistent request that expects a 200 may wait this long: the test is about what an answer
# holds, and a node slowed by a busy machine can take longer than the default 2 s to reach the
# positions (the paused-node case below tests the timeout and its 503).
WAIT_MS=30000

start_broker --partitions 4
# DS_LOG=debug: the node logs each pause and resume of its consumption, which the test waits for.
export DS_TEST_PAUSE_FILE=$WORK/pause DS_LOG=debug
start_http_node n1 "$WORK/data" rw
unset DS_LOG
wait_assigned n1 30 || die "the node got no partitions"

# rounds ROUNDS SEED: the read-your-writes rounds; prints a summary line, fails on any miss.
cat >"$WORK/rounds.py" <<'EOF'
import json, random, sys, urllib.error, urllib.request
from kafka import KafkaProducer
boot, url, rounds, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
WAIT_MS = int(sys.argv[5])
rng = random.Random(seed)
print("seed", seed)
p = KafkaProducer(bootstrap_servers=boot, acks="all", linger_ms=1, max_block_ms=20000,
                  request_timeout_ms=20000, retries=0)

def get(path):
    try:
        with urllib.request.urlopen(url + path, timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)

produced = 0     # good events
messages = 0     # every message, bad ones too
misses = []
plain_behind = 0
order = 0
for rnd in range(rounds):
    n = rng.randint(1, 50)
    fresh = 5000000 + rnd          # a customer new this round
    mine = []
    futures = []
    for i in range(n):
        order += 1
        customer = fresh if i % 3 == 0 else rng.randint(1, 50)
        e = {"order_id": order, "customer_id": customer,
             "ts": "2026-01-%02dT%02d:00:00Z" % (rng.randint(1, 28), rng.randint(0, 23)),
             "status": "paid", "amount": 1}
        if customer == fresh:
            mine.append(order)
        futures.append(p.send("orders", key=str(order).encode(), value=json.dumps(e).encode()))
    if rnd % 4 == 1:  # a bad event: a dead letter advances its partition too
        futures.append(p.send("orders", key=b"bad", value=b"{not json"))
        messages += 1
    p.flush(timeout=30)
    for f in futures:
        f.get(timeout=1)  # raises if the broker did not acknowledge
    produced += n
    messages += n
    # A plain count right away (no waiting): only to show the race the test exists for.
    status, doc = get("/v1/count?" + "day=2026-01-01&to=2026-01-28")
    plain_behind += doc["count"] < produced
    status, doc = get("/v1/customers/%d/orders?consistent=true&timeout_ms=%d&limit=1000"
                      % (fresh, WAIT_MS))
    got = sorted(o["order_id"] for o in doc.get("orders", []))
    if status != 200 or got != sorted(mine) or doc.get("consistency") != "acknowledged":
        misses.append("round %d: %d, customer %d orders %s, produced %s (%s)" % (
            rnd, status, fresh, got, mine, doc.get("consistency", doc.get("error"))))
    status, doc = get("/v1/count?day=2026-01-01&to=2026-01-28&consistent=true&timeout_ms=%d"
                      % WAIT_MS)
    if status != 200 or doc["count"] != produced or doc.get("consistency") != "acknowledged":
        misses.append("round %d: %d, count %s, produced %d (%s)" % (
            rnd, status, doc.get("count"), produced, doc.get("consistency", doc.get("error"))))
    if status == 200 and sum(doc.get("high_watermarks", {}).values()) != messages:
        misses.append("round %d: high watermarks %s, messages %d" % (
            rnd, doc.get("high_watermarks"), messages))
p.close(timeout=5)
print("rounds %d, events %d, messages %d, plain count behind in %d rounds, misses %d"
      % (rounds, produced, messages, plain_behind, len(misses)))
for m in misses[:10]:
    print("MISS", m)
sys.exit(1 if misses else 0)
EOF
note "read-your-writes rounds"
if timeout 600 "$PY" "$WORK/rounds.py" "$BOOT" "$URL" "$ROUNDS" "${DS_TEST_SEED:-$RANDOM}" \
  "$WAIT_MS"; then
  ok
else
  fail "a consistent answer missed acknowledged events"
fi
total=$(curl -s "$URL/v1/count?$RANGE&consistent=true&timeout_ms=$WAIT_MS" | "$PY" -c 'import json,sys; print(json.load(sys.stdin).get("count"))')

# Without consistent=true the documents are what they were: no consistency field.
curl -s "$URL/v1/count?$RANGE" >"$WORK/plain.json"
curl -s "$URL/v1/customers/1/orders" >"$WORK/plain_orders.json"
expect_eq "plain count: no consistency field" "False True" \
  "$(json_get "$WORK/plain.json" '"consistency" in d, "as_of" in d')"
expect_eq "plain orders: no consistency field" "False" \
  "$(json_get "$WORK/plain_orders.json" '"consistency" in d')"

# Bad timeout_ms: 400 naming it.
for q in "consistent=true&timeout_ms=0" "consistent=true&timeout_ms=60001" \
  "consistent=true&timeout_ms=abc" "timeout_ms=100"; do
  expect_eq "count ?$q" 400 "$(curl -s -o "$WORK/bad.json" -w '%{http_code}' "$URL/v1/count?$RANGE&$q")"
  grep -q timeout_ms "$WORK/bad.json" && ok || fail "count ?$q: $(cat "$WORK/bad.json")"
  expect_eq "orders ?$q" 400 "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/customers/1/orders?$q")"
done

# The CLI passes the flags through.
"$DAYSHARD" count --server "$URL" --day 2026-01-01 --to 2026-01-28 --consistent --timeout-ms "$WAIT_MS" \
  --json >"$WORK/cli.json" || fail "count --consistent"
expect_eq "count --consistent" "acknowledged $total" "$(json_get "$WORK/cli.json" 'd["consistency"], d["count"]')"
"$DAYSHARD" orders --server "$URL" --customer 5000000 --consistent --timeout-ms "$WAIT_MS" --json \
  >"$WORK/cli_orders.json" || fail "orders --consistent"
expect_eq "orders --consistent" "acknowledged" "$(json_get "$WORK/cli_orders.json" 'd["consistency"]')"
expect_exit "count --consistent without --server" 2 "$DAYSHARD" count --data "$WORK/data" \
  --day 2026-01-01 --consistent

# Ingest paused: acknowledged events cannot become durable, so the answer is a 503 within about
# timeout_ms, with Retry-After and the positions still missing.
note "paused node"
touch "$WORK/pause"
wait_paused n1 30 || fail "the node did not pause within 30 s"
cat >"$WORK/fresh.jsonl" <<'EOF'
{"order_id":"p-1","customer_id":6000001,"ts":"2026-01-10T10:00:00Z","amount":1}
{"order_id":"p-2","customer_id":6000001,"ts":"2026-01-10T11:00:00Z","amount":2}
{"order_id":"p-3","customer_id":6000002,"ts":"2026-01-11T10:00:00Z","amount":3}
EOF
py_produce "$WORK/fresh.jsonl" || fail "produce while paused"
t0=$(now_ms)
code=$(curl -s -D "$WORK/h503" -o "$WORK/b503.json" -w '%{http_code}' \
  "$URL/v1/count?$RANGE&consistent=true&timeout_ms=700")
elapsed=$(($(now_ms) - t0))
expect_eq "paused: count status" 503 "$code"
((elapsed >= 650 && elapsed < 3000)) && ok || fail "paused: 503 after $elapsed ms (timeout 700)"
retry=$(tr -d '\r' <"$WORK/h503" | awk -F': ' 'tolower($1) == "retry-after" {print $2}')
[[ $retry =~ ^[0-9]+$ ]] && ((retry >= 1)) && ok || fail "paused: Retry-After '$retry'"
"$PY" - "$WORK/b503.json" <<'EOF' && ok || fail "paused: 503 body $(cat "$WORK/b503.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["error"] and d["consistency"] == "acknowledged" and d["timeout_ms"] == 700, d
m = d["missing"]
assert 1 <= len(m) <= 3, m
for p in m:
    assert p["durable_next"] is None or p["durable_next"] < p["high_watermark"], p
    assert set(p) == {"partition", "high_watermark", "durable_next"}, p
EOF
code=$(curl -s -D "$WORK/h503o" -o "$WORK/b503o.json" -w '%{http_code}' \
  "$URL/v1/customers/6000001/orders?consistent=true&timeout_ms=300")
expect_eq "paused: orders status" 503 "$code"
grep -qi '^retry-after: [1-9]' "$WORK/h503o" && grep -q '"missing":\[{"partition"' "$WORK/b503o.json" &&
  ok || fail "paused: orders 503: $(cat "$WORK/h503o" "$WORK/b503o.json")"
# Without consistent=true the paused node answers at once, without the new events.
plain=$(curl -s "$URL/v1/count?$RANGE" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["count"])')
expect_eq "paused: plain count" "$total" "$plain"

# Resumed: a request that arrived while the events were not durable waits and gets them all.
curl -s "$URL/v1/count?$RANGE&consistent=true&timeout_ms=10000" >"$WORK/resumed.json" &
waiter=$!
sleep 0.3
rm "$WORK/pause"
wait "$waiter" || fail "resumed: curl"
expect_eq "resumed: count" "$((total + 3))" "$(json_get "$WORK/resumed.json" 'd["count"]')"
got=$(curl -s "$URL/v1/customers/6000001/orders?consistent=true&timeout_ms=$WAIT_MS")
grep -q '"p-1"' <<<"$got" && grep -q '"p-2"' <<<"$got" && ok || fail "resumed: orders $got"

# A rebalance while a request waits: the node gives up its partitions; the request says so.
note "rebalance mid-wait"
touch "$WORK/pause"
wait_paused n1 30 || fail "the node did not pause within 30 s"
echo '{"order_id":"r-1","customer_id":6000003,"ts":"2026-01-12T10:00:00Z","amount":1}' >"$WORK/r.jsonl"
py_produce "$WORK/r.jsonl" || fail "produce before the rebalance"
curl -s -o "$WORK/rebalance.json" -w '%{http_code}' \
  "$URL/v1/count?$RANGE&consistent=true&timeout_ms=30000" >"$WORK/rebalance.code" &
waiter=$!
sleep 0.5
start_node n2 "$WORK/data2" rw
n2=$NODE_PID
wait "$waiter" || true
expect_eq "rebalance: status" 503 "$(cat "$WORK/rebalance.code")"
grep -q "rebalance" "$WORK/rebalance.json" && ok || fail "rebalance: $(cat "$WORK/rebalance.json")"
stop_node n2 "$n2"
rm "$WORK/pause"

# `serve` has no broker: it says it guarantees what was durable on arrival.
"$DAYSHARD" serve --data "$WORK/data" --http 127.0.0.1:0 >"$WORK/serve.out" 2>"$WORK/serve.log" &
wait_printed "$WORK/serve.out" $!
SERVE=http://$(head -1 "$WORK/serve.out")
curl -s "$SERVE/v1/count?$RANGE&consistent=true" >"$WORK/serve.json"
expect_eq "serve: count" "durable" "$(json_get "$WORK/serve.json" 'd["consistency"]')"
curl -s "$SERVE/v1/customers/6000001/orders?consistent=true&timeout_ms=5000" >"$WORK/serve_o.json"
expect_eq "serve: orders" "durable" "$(json_get "$WORK/serve_o.json" 'd["consistency"]')"

stop_node n1 "$NODE_PID"
stop_broker
finish
