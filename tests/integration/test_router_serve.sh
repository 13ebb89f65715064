#!/usr/bin/env bash
# The router over `dayshard serve` instances: no Kafka, so it also runs under
# ThreadSanitizer (scripts/tsan.sh) and ASan. A generated stream is split line by line over two
# data directories (each a "node" holding half the topic), ingested in the events model with
# the by-customer index rebuilt; group 1 is two `serve` over them, group 2 two more `serve` over
# the same directories (a replica). The truth is one directory holding everything.
# - counts (a range by day, a status, one day) and a heavy customer's orders paged 7 at a time
#   through the router equal the truth; P2 of the events model is 409 once;
# - 4 clients ask in parallel while a group-1 member is killed: every answer is the exact count
#   (from group 1 before the kill, from group 2 after), none is wrong or partial;
# - both groups broken: 503 naming the two dead members; partial=true: half the count;
# - the router stops on SIGTERM with exit 0.
source "$(dirname "$0")/lib.sh"
GSI_LIB=$(dirname "$0")/gsi_lib.py
RANGE="day=2026-01-01&to=2026-01-28"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  [[ -n ${DS_KEEP:-} ]] || rm -rf "$WORK"
}
trap cleanup EXIT

"$DAYSHARD" generate --events 20000 --profile hot-customer --seed 15 >"$WORK/all.jsonl"
awk 'NR % 2' "$WORK/all.jsonl" >"$WORK/a.jsonl"
awk '!(NR % 2)' "$WORK/all.jsonl" >"$WORK/b.jsonl"
for d in a b all; do
  "$DAYSHARD" ingest --data "$WORK/d-$d" --model events "$WORK/$d.jsonl" >/dev/null ||
    { echo "ingest $d failed" >&2; exit 1; }
done
for d in a b; do
  "$DAYSHARD" gsi rebuild --data "$WORK/d-$d" >/dev/null 2>&1 || { echo "gsi rebuild $d" >&2; exit 1; }
done
total=$(wc -l <"$WORK/all.jsonl")

# start NAME ARGS...: a service printing its address first; sets ADDR and PID.
start() {
  local name=$1
  shift
  "$DAYSHARD" "$@" --http 127.0.0.1:0 </dev/null >"$WORK/$name.out" 2>"$WORK/$name.err" &
  PID=$!
  PIDS+=("$PID")
  for _ in $(seq 200); do
    [[ -s $WORK/$name.out ]] && break
    sleep 0.05
  done
  ADDR=$(head -1 "$WORK/$name.out")
  [[ $ADDR == 127.0.0.1:* ]] || { echo "$name did not start: $(cat "$WORK/$name.err")" >&2; exit 1; }
}
declare -A URL SPID
for n in a1:a b1:b a2:a b2:b; do
  start "${n%%:*}" serve --data "$WORK/d-${n#*:}"
  URL[${n%%:*}]=http://$ADDR
  SPID[${n%%:*}]=$PID
done
# Group 1: a1 (half a) and b1 (half b); group 2: a2 and b2, the same halves.
# The timeout is not what this test is about (test_router_hang is): under ThreadSanitizer with
# both cores busy, a member's first page of a customer took over the default 2 s, and a router
# that times out on both groups answers 503. Killed members fail at once whatever the timeout.
start router router --node "${URL[a1]},${URL[b1]}" --replica "${URL[a2]},${URL[b2]}" --probe-ms 100 \
  --timeout-ms 20000
R=http://$ADDR
ROUTER_PID=$PID
get() { curl -s --max-time 20 -o "$WORK/body" -w '%{http_code}' "$R$1"; }

expect_eq "/readyz" 200 "$(get /readyz)"
for q in "$RANGE&by=day|--day 2026-01-01 --to 2026-01-28 --by day" \
  "$RANGE&status=paid|--day 2026-01-01 --to 2026-01-28 --status paid" \
  "day=2026-01-21|--day 2026-01-21"; do
  # shellcheck disable=SC2086 # the CLI arguments are words on purpose
  "$DAYSHARD" count --data "$WORK/d-all" --json ${q#*|} >"$WORK/want.json"
  expect_eq "count ${q%%|*}" 200 "$(get "/v1/count?${q%%|*}")"
  "$PY" - "$WORK/want.json" "$WORK/body" <<'EOF' || fail "count ${q%%|*} differs from the truth"
import json, sys
want, got = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
g = lambda d: [(x["key"], x["count"], x["amount_sum"]) for x in d.get("groups", [])]
bad = [f for f in ("count", "amount_sum", "day", "to", "status") if want.get(f) != got.get(f)]
if g(want) != g(got) or got.get("node_group") != 1:
    bad.append("groups or node_group")
if bad:
    sys.exit("differs in %s: want %s got %s" % (bad, json.dumps(want)[:200], json.dumps(got)[:200]))
EOF
done
"$PY" "$GSI_LIB" truth 2 "$WORK/all.jsonl" >"$WORK/want.txt"
"$PY" "$GSI_LIB" pages "$R/v1/customers/2/orders" 7 >"$WORK/got.txt" 2>"$WORK/pages.err" || true
if cmp -s "$WORK/want.txt" "$WORK/got.txt" && [[ -s $WORK/want.txt ]]; then ok; else
  fail "customer 2 paged 7 at a time: $(wc -l <"$WORK/got.txt") of $(wc -l <"$WORK/want.txt") orders; $(tail -c 200 "$WORK/pages.err")"
fi
expect_eq "P2 of the events model: the members' 409, once" 409 "$(get /v1/orders/1)"

# Four clients in parallel while a1 dies: every answer is the whole count, from either group.
want=$("$DAYSHARD" count --data "$WORK/d-all" --day 2026-01-01 --to 2026-01-28 --json |
  "$PY" -c 'import json,sys; print(json.load(sys.stdin)["count"])')
CLIENTS=()
for c in 1 2 3 4; do
  (
    for i in $(seq 150); do
      curl -s --max-time 20 -w ' %{http_code}\n' "$R/v1/count?$RANGE" |
        "$PY" -c 'import json,sys; line=sys.stdin.read(); body,code=line.rsplit(" ",1); d=json.loads(body); print(code.strip(), d["count"], d.get("node_group"), d.get("partial", False))'
    done >"$WORK/client$c.txt"
  ) &
  CLIENTS+=($!)
done
sleep 0.5
kill -KILL "${SPID[a1]}"
for pid in "${CLIENTS[@]}"; do
  wait "$pid" || fail "a client loop failed"
done
answers=$(cat "$WORK"/client*.txt | wc -l)
expect_eq "parallel answers" 600 "$answers"
expect_eq "every parallel answer is 200 with the whole count, never partial" "" \
  "$(cat "$WORK"/client*.txt | awk -v w="$want" '$1 != 200 || $2 != w || $4 != "False"' | sort | uniq -c | head -3)"
groups=$(cat "$WORK"/client*.txt | awk '{print $3}' | sort -u | tr '\n' ' ')
[[ $groups == *2* ]] && ok || fail "no answer came from group 2 after the kill: groups $groups"
get /metrics >/dev/null
failovers=$(awk '$1 == "dayshard_router_failovers_total" {print $2}' "$WORK/body")
((failovers >= 1)) && ok || fail "/metrics: no failover counted ($failovers)"

# b2 dies too: neither group is complete.
kill -KILL "${SPID[b2]}"
sleep 0.3
expect_eq "no complete replica" 503 "$(get "/v1/count?$RANGE")"
expect_eq "503 names a1 and b2" "$(printf '%s\n' "${URL[a1]}" "${URL[b2]}" | sort | tr '\n' ' ')" \
  "$(json_get "$WORK/body" '"".join(m + " " for m in sorted(d["missing"]))')"
expect_eq "partial=true" 200 "$(get "/v1/count?$RANGE&partial=true")"
expect_eq "partial: half the events, marked" "True $(wc -l <"$WORK/b.jsonl")" \
  "$(json_get "$WORK/body" 'd["partial"], d["count"]')"

kill -TERM "$ROUTER_PID"
set +e
wait "$ROUTER_PID"
rc=$?
set -e
expect_eq "router exit status after SIGTERM" 0 "$rc"
# Under a sanitizer build a report in any process is a failure, even one whose answers were
# then failed over.
reports=$(grep -l "Sanitizer\|runtime error" "$WORK"/*.err 2>/dev/null || true)
expect_eq "sanitizer reports in the services' logs" "" "$reports"
finish
