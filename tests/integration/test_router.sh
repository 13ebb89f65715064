#!/usr/bin/env bash
# `dayshard router` over two node groups: a broker with a topic of 4 partitions,
# group A (nodes A1, A2, consumer group ga) and group B (B1, B2, consumer group gb) over the
# same topic, and a router with --node A1,A2 --replica B1,B2. The stream is the by-customer
# index tests' events (gsi_events: 30,000 hot-customer events plus string ids with equal
# timestamps), in the events model; the ground truth is `dayshard count --data` over a separate
# `ingest` of the same file (counts) and gsi_lib.py's oracle of the file (a customer's orders).
# Once every node holds everything:
# - counts through the router (one day, a range by day, by hour, a status) equal the truth,
#   amounts exact; a customer's orders paged through the router 3 at a time (and 1000 at a
#   time for the heaviest customer) equal the oracle;
# - consistent=true passes through (acknowledged, watermarks of every partition); partitions
#   add up, heat lists each member, a node's 409 is answered once; a router told of a fifth
#   partition no group covers answers 503 naming it;
# - bad requests are 400 from the router (validated there), an unknown path 404;
# - kill -9 A1: answers stay exact (from group B), /metrics counts a failover;
# - kill -9 B2 too: 503 naming A1 and B2 with Retry-After, /readyz 503; partial=true answers
#   200 with "partial":true and the same missing nodes, and a count below the total.
# - tokens: group B's nodes require a bearer token (--http-token), which the router sends them
#   (--node-token), so the failover above only works with it; a router with --http-token
#   refuses clients without its own token (401), but not /healthz.
# DS_LONG=1: 120,000 events (four times the hot-customer stream).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"
MODEL_X=(--model events)
RANGE="day=2026-01-01&to=2026-01-28"

gsi_events 9 "$WORK/events.jsonl"
if [[ -n ${DS_LONG:-} ]]; then
  for seed in 10 11 12; do
    "$DAYSHARD" generate --events 30000 --profile hot-customer --seed "$seed" |
      sed -E "s/\"order_id\":([0-9]+)/\"order_id\":${seed}00000\1/" >>"$WORK/events.jsonl"
  done
fi
events=$(wc -l <"$WORK/events.jsonl")
note "events: $events"
# The truth: one directory holding everything, counted by the CLI.
"$DAYSHARD" ingest --data "$WORK/truth" "${MODEL_X[@]}" --json "$WORK/events.jsonl" >/dev/null ||
  die "ingest of the truth"
truth_count() { "$DAYSHARD" count --data "$WORK/truth" --json "$@"; }

start_broker --partitions 4
declare -A URLS PIDS
NODE_TOKEN=node-secret-b
for n in a1 a2 b1 b2; do
  token=()
  [[ $n == b* ]] && token=(--http-token "$NODE_TOKEN")
  start_http_node "$n" "$WORK/$n" "g${n:0:1}" "${token[@]}"
  URLS[$n]=$URL
  PIDS[$n]=$NODE_PID
done
for n in a1 a2 b1 b2; do
  wait_assigned "$n" 30 || die "node $n: no assignment within 30 s"
done
ds_produce "$WORK/events.jsonl" || die "producer"

# Every node holds everything: each group's members add up to the events produced.
group_total() {
  local n total=0 c
  for n in "$@"; do
    c=$(curl -s --max-time 5 -H "Authorization: Bearer $NODE_TOKEN" "${URLS[$n]}/v1/count?$RANGE" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["count"])' 2>/dev/null || echo 0)
    total=$((total + c))
  done
  echo "$total"
}
deadline=$(($(now_ms) + 90000))
while (($(now_ms) < deadline)); do
  [[ $(group_total a1 a2) == "$events" && $(group_total b1 b2) == "$events" ]] && break
  sleep 0.5
done
expect_eq "group A holds every event" "$events" "$(group_total a1 a2)"
expect_eq "group B holds every event" "$events" "$(group_total b1 b2)"

# Each member's count carries its claims (events model): every partition of the topic is
# claimed open by exactly one member of a group, from an offset >= 0.
for g in a b; do
  for n in ${g}1 ${g}2; do
    curl -s --max-time 5 -H "Authorization: Bearer $NODE_TOKEN" "${URLS[$n]}/v1/count?$RANGE" >"$WORK/claims-$n.json"
  done
  "$PY" - "$WORK/claims-${g}1.json" "$WORK/claims-${g}2.json" <<'EOF' || fail "group $g: claims"
import json, sys
open_by = {}
for path in sys.argv[1:]:
    claims = json.load(open(path)).get("claims")
    if not isinstance(claims, dict):
        sys.exit("%s: no claims object: %s" % (path, claims))
    for p, (start, end) in claims.items():
        if not isinstance(start, int) or start < 0 or (end is not None and end < start):
            sys.exit("%s: claim %s of %s" % (path, [start, end], p))
        if end is None:
            open_by.setdefault(p, []).append(path)
if sorted(open_by) != ["0", "1", "2", "3"] or any(len(v) != 1 for v in open_by.values()):
    sys.exit("open claims by partition: %s" % open_by)
EOF
  ok
done

start_router --node "${URLS[a1]},${URLS[a2]}" --replica "${URLS[b1]}" \
  --replica "${URLS[b2]}" --partitions 4 --probe-ms 200 \
  --node-token "$NODE_TOKEN"

# get PATH: "STATUS BODY" of GET R/PATH (the body on one line).
get() { curl -s --max-time 20 -o "$WORK/body" -w '%{http_code}' "$R$1"; }

expect_eq "/healthz" 200 "$(get /healthz)"
expect_eq "/readyz" 200 "$(get /readyz)"

# check_counts WHAT: router answers == the truth (count, amount, groups by day and hour, a
# status, one day), and which group answered.
check_counts() {
  local what=$1 group=$2 q args
  for q in "$RANGE&by=day|--day 2026-01-01 --to 2026-01-28 --by day" \
    "$RANGE&by=hour|--day 2026-01-01 --to 2026-01-28 --by hour" \
    "$RANGE&status=paid|--day 2026-01-01 --to 2026-01-28 --status paid" \
    "day=2026-01-05|--day 2026-01-05"; do
    args=${q#*|}
    # shellcheck disable=SC2086 # args are words on purpose
    truth_count $args >"$WORK/want.json"
    expect_eq "$what: /v1/count?${q%%|*}" 200 "$(get "/v1/count?${q%%|*}")"
    "$PY" - "$WORK/want.json" "$WORK/body" "$group" <<'EOF' || fail "$what: /v1/count?${q%%|*} differs from the truth"
import json, sys
want, got = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
fields = ["count", "amount_sum", "status", "day", "to"]
bad = [f for f in fields if want.get(f) != got.get(f)]
g = lambda d: [(x["key"], x["count"], x["amount_sum"]) for x in d.get("groups", [])]
if g(want) != g(got):
    bad.append("groups")
if got.get("node_group") != int(sys.argv[3]):
    bad.append("node_group %s" % got.get("node_group"))
if sorted(got.get("as_of", {})) != ["0", "1", "2", "3"]:
    bad.append("as_of %s" % got.get("as_of"))
if bad:
    sys.exit("fields differ: %s\nwant %s\ngot  %s" % (bad, json.dumps(want)[:300], json.dumps(got)[:300]))
EOF
  done
}

# check_orders WHAT: customers paged through the router equal the oracle of the file.
check_orders() {
  local what=$1 spec customer limit path
  for spec in '"42"|1' '"42"|3' '66|3' '59|3' '999999999|3' '2|1000' '3|7'; do
    customer=${spec%|*}
    limit=${spec#*|}
    path=$(customer_path "$customer")
    "$PY" "$GSI_LIB" truth "$customer" "$WORK/events.jsonl" >"$WORK/want.txt"
    if "$PY" "$GSI_LIB" pages "$R/v1/customers/$path/orders" "$limit" >"$WORK/got.txt" 2>"$WORK/pages.err" &&
      cmp -s "$WORK/want.txt" "$WORK/got.txt"; then
      ok
    else
      fail "$what: customer $customer by $limit: $(wc -l <"$WORK/got.txt") orders, want $(wc -l <"$WORK/want.txt"); $(diff "$WORK/want.txt" "$WORK/got.txt" | head -n 4 | tr '\n' ' ') $(tail -c 300 "$WORK/pages.err")"
    fi
  done
}

# The indexes caught up: a consistent read of the heaviest customer through the router.
expect_eq "consistent orders through the router" 200 \
  "$(get "/v1/customers/2/orders?limit=5&consistent=true&timeout_ms=20000")"
check_counts "both groups up" 1
check_orders "both groups up"

# consistent=true passes through: every member waited for its acknowledged positions.
expect_eq "consistent count" 200 "$(get "/v1/count?$RANGE&consistent=true&timeout_ms=10000")"
expect_eq "consistent count: kind, count, watermarks of every partition" \
  "acknowledged $events ['0', '1', '2', '3']" \
  "$(json_get "$WORK/body" 'd["consistency"], d["count"], sorted(d["high_watermarks"])')"
# The other endpoints: partitions add up per shard, heat lists each member, one order of the
# events model is the nodes' 409 (answered once).
expect_eq "/v1/partitions" 200 "$(get "/v1/partitions?day=2026-01-05")"
expect_eq "partitions: events of the day" \
  "$(truth_count --day 2026-01-05 | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["count"])')" \
  "$(json_get "$WORK/body" 'sum(p["events"] for p in d["partitions"])')"
expect_eq "/v1/heat" 200 "$(get "/v1/heat?top=3")"
expect_eq "heat: one answer per member" 2 "$(json_get "$WORK/body" 'len(d["nodes"])')"
expect_eq "/v1/orders/{id} of the events model" 409 "$(get /v1/orders/1)"

# A router told the topic has 5 partitions finds no group covering partition 4: 503 naming it.
: >"$WORK/router5.out"
"$DAYSHARD" router --node "${URLS[a1]},${URLS[a2]}" --replica "${URLS[b1]},${URLS[b2]}" \
  --http 127.0.0.1:0 --partitions 5 --node-token "$NODE_TOKEN" </dev/null >"$WORK/router5.out" 2>"$WORK/router5.log" 3>&- &
R5_PID=$!
wait_printed "$WORK/router5.out" "$R5_PID"
expect_eq "a partition no group covers" "503 ['partition 4', 'partition 4']" \
  "$(curl -s -o "$WORK/body5" -w '%{http_code}' "http://$(head -1 "$WORK/router5.out")/v1/count?$RANGE") $(json_get "$WORK/body5" 'd["missing"]')"
kill -TERM "$R5_PID"
wait "$R5_PID" || fail "router --partitions 5: exit status"

# A router with a token of its own: clients without it (or with another) get 401, the probes
# do not need it, and with it the answer is the same count.
: >"$WORK/routert.out"
"$DAYSHARD" router --node "${URLS[a1]},${URLS[a2]}" --http 127.0.0.1:0 --partitions 4 \
  --http-token router-secret </dev/null >"$WORK/routert.out" 2>"$WORK/routert.log" 3>&- &
RT_PID=$!
wait_printed "$WORK/routert.out" "$RT_PID"
RT=http://$(head -1 "$WORK/routert.out")
expect_eq "router token: none" 401 "$(curl -s -o /dev/null -w '%{http_code}' "$RT/v1/count?$RANGE")"
expect_eq "router token: another" 401 \
  "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer router-secreT' "$RT/v1/count?$RANGE")"
expect_eq "router token: /healthz needs none" 200 "$(curl -s -o /dev/null -w '%{http_code}' "$RT/healthz")"
expect_eq "router token: the right one" "200 $events" \
  "$(curl -s -o "$WORK/bodyt" -w '%{http_code}' -H 'Authorization: Bearer router-secret' "$RT/v1/count?$RANGE") $(json_get "$WORK/bodyt" 'd["count"]')"
kill -TERM "$RT_PID"
wait "$RT_PID" || fail "router --http-token: exit status"
expect_eq "router: a token of 257 bytes" 2 \
  "$(set +e; "$DAYSHARD" router --node "${URLS[a1]}" --http-token "$(printf 'x%.0s' $(seq 257))" >/dev/null 2>&1; echo $?)"

# Bad requests: refused by the router itself, as a node refuses them.
for q in "/v1/count" "/v1/count?day=2026-13-01" "/v1/count?$RANGE&stauts=paid" \
  "/v1/count?$RANGE&partial=maybe" "/v1/count?$RANGE&partial=true&partial=true" \
  "/v1/customers/2/orders?limit=0" "/v1/count?day=2026-01-02&to=2026-01-01"; do
  expect_eq "bad request $q" 400 "$(get "$q")"
  json_get "$WORK/body" 'd["error"]' >/dev/null || fail "bad request $q: no error message"
done
expect_eq "unknown path" 404 "$(get /v1/nothing)"
expect_eq "a cursor that is not one: the nodes' 400, once" 400 \
  "$(get "/v1/customers/2/orders?cursor=zz")"

# A1 down: group B answers, exactly.
crash_node "${PIDS[a1]}"
check_counts "A1 killed" 2
check_orders "A1 killed"
get /metrics >/dev/null
failovers=$(awk '$1 == "dayshard_router_failovers_total" {print $2}' "$WORK/body")
((failovers >= 1)) && ok || fail "/metrics: no failover counted ($failovers)"
grep -q "dayshard_router_upstream_latency_seconds_count{node=\"${URLS[b1]}\"}" "$WORK/body" &&
  ok || fail "/metrics: no latency histogram of B1"

# B2 down too: no complete replica.
crash_node "${PIDS[b2]}"
expect_eq "no complete replica" 503 "$(get "/v1/count?$RANGE")"
both=$("$PY" -c 'import sys; print(" ".join(sorted(sys.argv[1:])))' "${URLS[a1]}" "${URLS[b2]}")
expect_eq "503 names A1 and B2" "$both" \
  "$(json_get "$WORK/body" '" ".join(sorted(d["missing"]))')"
curl -s -D "$WORK/headers" -o /dev/null "$R/v1/count?$RANGE"
grep -qi '^Retry-After: 1' "$WORK/headers" && ok || fail "503 without Retry-After"
expect_eq "orders: no complete replica" 503 "$(get "/v1/customers/2/orders?limit=3")"
sleep 0.5 # the prober's next round
expect_eq "/readyz without a complete replica" 503 "$(get /readyz)"
expect_eq "partial=true" 200 "$(get "/v1/count?$RANGE&partial=true")"
expect_eq "partial answer says so" "True $both" \
  "$(json_get "$WORK/body" 'd["partial"], " ".join(sorted(d["missing"]))')"
partial=$(json_get "$WORK/body" 'd["count"]')
((partial > 0 && partial < events)) && ok || fail "partial count $partial of $events"

kill -TERM "$ROUTER_PID"
set +e
wait "$ROUTER_PID"
rc=$?
set -e
expect_eq "router: exit status after SIGTERM" 0 "$rc"
stop_node a2 "${PIDS[a2]}"
stop_node b1 "${PIDS[b1]}"
stop_broker
finish
