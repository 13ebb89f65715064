#!/usr/bin/env bash
# `dayshard run --retention-days 7`: a node with its query service and by-customer
# index reads a 28-day stream from a one-partition topic (one arrival order, so the oracle's
# stream time is the node's). Its index takes the early days while they are kept; the drops
# come later, so customer views must hide them at read time. Checked: per-day counts, statuses,
# customer views and P2 over HTTP equal orders_oracle.py --retention-days 7 (orders_compare,
# consistent=true); too_late dead letters equal the oracle's, in the file and in /metrics; a
# late event sent after everything is a too_late dead letter; a restart keeps the floor; fsck
# (the live index included) is clean.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"

ORACLE="$ROOT/tests/integration/orders_oracle.py"
COMPARE="$ROOT/tests/integration/orders_compare.py"
EVENTS=6000
if [[ ${DS_LONG:-} == 1 ]]; then EVENTS=100000; fi

start_broker --partitions 1
"$DAYSHARD" generate --events "$EVENTS" --customers 30 --updates 0.25 --seed 33 >"$WORK/all.jsonl"
printf '%s\n' '{"order_id":"late-1","customer_id":3,"ts":"2026-01-10T10:00:00Z","status":"paid","amount":5}' \
  '{"order_id":"kept-1","customer_id":3,"ts":"2026-01-27T10:00:00Z","status":"paid","amount":5}' >"$WORK/late.jsonl"
"$PY" "$ORACLE" --retention-days 7 --out "$WORK/oracle.json" "$WORK/all.jsonl" "$WORK/late.jsonl"
late_expected=$(json_get "$WORK/oracle.json" "d['totals']['bad_by_reason']['too_late']")

data="$WORK/data"
start_http_node n1 "$data" ret --retention-days 7
wait_assigned n1 30 || die "node n1 got no partitions"
kcat_produce "$WORK/all.jsonl" || fail "kcat produce"
kcat_produce "$WORK/late.jsonl" || fail "kcat produce (late)"
# the late event is the last message: once it is a dead letter, everything was read
deadline=$(($(now_ms) + 60000))
while (($(now_ms) < deadline)) && ! grep -q 'late-1' <(deadletters "$data"); do
  sleep 0.3
done

if "$PY" "$COMPARE" --oracle "$WORK/oracle.json" --server "$URL" --consistent \
  --stream "$WORK/all.jsonl" --customers 30 --orders 200 >"$WORK/compare.out" 2>&1; then
  ok
else
  fail "orders_compare over HTTP: $(head -c 1500 "$WORK/compare.out")"
fi
expect_eq "too_late dead letters" "$late_expected" "$(grep -c '"reason":"too_late"' <(deadletters "$data") || true)"
expect_eq "the late event is the last dead letter" "too_late late-1" \
  "$(tail -n 1 <(deadletters "$data") | "$PY" -c 'import json,sys; r=json.loads(sys.stdin.read()); print(r["reason"], json.loads(r["raw"])["order_id"])')"
# /metrics counts dead letters once their commit is durable: poll for it
deadline=$(($(now_ms) + 10000))
while :; do
  metric=$(curl -s "$URL/metrics" | grep 'reason="too_late"' | awk '{print $NF}')
  [[ $metric == "$late_expected" ]] || (($(now_ms) > deadline)) && break
  sleep 0.2
done
expect_eq "/metrics too_late" "$late_expected" "$metric"
stop_node n1 "$NODE_PID"
# the files of dropped days go 30 s after their drop or when the node stops
expect_eq "days left" "2026-01-22 2026-01-23 2026-01-24 2026-01-25 2026-01-26 2026-01-27 2026-01-28" \
  "$(ls "$data/parts" | tr '\n' ' ' | sed 's/ $//')"

# a restart without the flag keeps the floor
start_http_node n1 "$data" ret
wait_assigned n1 30 || die "node n1 got no partitions after the restart"
printf '%s\n' '{"order_id":"late-2","customer_id":3,"ts":"2026-01-21T23:59:59Z","status":"paid","amount":5}' >"$WORK/late2.jsonl"
kcat_produce "$WORK/late2.jsonl" || fail "kcat produce (late 2)"
deadline=$(($(now_ms) + 30000))
while (($(now_ms) < deadline)) && ! grep -q 'late-2' <(deadletters "$data"); do sleep 0.3; done
expect_eq "after a restart, 2026-01-21 is too late" too_late \
  "$(grep 'late-2' <(deadletters "$data") | "$PY" -c 'import json,sys; print(json.loads(sys.stdin.read())["reason"])')"
stop_node n1 "$NODE_PID"
expect_exit "fsck" 0 "$DAYSHARD" fsck --data "$data"
stop_broker
finish
