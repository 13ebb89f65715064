#!/usr/bin/env bash
# `dayshard run --http`: the node serves the query API over its own data directory. Answers
# equal `count --data` and the ground truth; /metrics carries the node's live figures (events
# ingested, dead letters by reason, consumer lag per partition, group-commit latency);
# /readyz says 503 until the node has joined its group and while its lag exceeds
# --ready-max-lag, 200 once it caught up; the service stops with the node.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"

expect_exit "--http-token without --http" 2 "$DAYSHARD" run --brokers 127.0.0.1:1 --data "$WORK/x" \
  --http-token secret
expect_exit "bad --http address" 2 "$DAYSHARD" run --brokers 127.0.0.1:1 --data "$WORK/x" --http nowhere

start_broker --partitions 4
"$DAYSHARD" generate --events 20000 --profile busy-day --seed 5 >"$WORK/good.jsonl"
printf '%s\n' 'not json' '{"order_id": 1, "customer_id": 2}' '[1]' >"$WORK/bad.jsonl"
cat "$WORK/good.jsonl" "$WORK/bad.jsonl" >"$WORK/mixed.jsonl"
expected=$(truth "$WORK/good.jsonl")

"$DAYSHARD" run --brokers "$BOOT" --topic orders --group http --data "$WORK/data" \
  --http 127.0.0.1:0 --ready-max-lag 50 "${NODE_X[@]}" </dev/null >"$WORK/node.out" \
  2>>"$WORK/n1.log" 3>&- &
NODE_PID=$!
wait_printed "$WORK/node.out" "$NODE_PID"
ADDR=$(head -1 "$WORK/node.out")
[[ $ADDR == 127.0.0.1:* ]] && ok || die "the node printed no HTTP address: '$ADDR'"
URL=http://$ADDR

# status URL: the HTTP status code; body in $WORK/body.
status() { curl -s -o "$WORK/body" -w '%{http_code}' --max-time 10 "$1"; }

# The group's first join takes the broker's rebalance delay (seconds): not ready until then.
expect_eq "readyz before the node joined" 503 "$(status "$URL/readyz")"
grep -q '"error".*joined' "$WORK/body" && ok || fail "readyz body: $(cat "$WORK/body")"
expect_eq "healthz" 200 "$(status "$URL/healthz")"

wait_assigned n1 30 || die "the node got no partitions"
kcat_produce "$WORK/mixed.jsonl" || fail "kcat produce"
wait_counts "counts" "$expected" 60 "$WORK/data"

# Every day over HTTP equals the ground truth; tables equal `count --data`.
while IFS='=' read -r day want; do
  [[ $(status "$URL/v1/count?day=$day") == 200 ]] || fail "count $day: $(cat "$WORK/body")"
  expect_eq "count of $day over HTTP" "$want" "$(json_get "$WORK/body" 'd["count"]')"
done <<<"$expected"
for args in "--day 2026-01-21 --by shard" "--day 2026-01-01 --to 2026-01-28 --by day"; do
  # shellcheck disable=SC2086 # word splitting of args is intended
  server=$("$DAYSHARD" count $args --server "$URL")
  # shellcheck disable=SC2086
  local_=$("$DAYSHARD" count $args --data "$WORK/data")
  expect_eq "count $args: --server equals --data" "$local_" "$server"
done

# The live figures: lag drops to 0 within a few samples once everything is read.
for _ in $(seq 50); do
  curl -s --max-time 10 "$URL/metrics" >"$WORK/metrics.txt"
  lag=$(awk '/^dayshard_consumer_lag_messages\{/ {s += $2; n++} END {print n + 0, s + 0}' \
    "$WORK/metrics.txt")
  [[ $lag == "4 0" ]] && break
  sleep 0.2
done
expect_eq "consumer lag gauges: partitions and total" "4 0" "$lag"
metric() { awk -v name="$1" '$1 == name {print $2}' "$WORK/metrics.txt"; }
expect_eq "events ingested" "$(wc -l <"$WORK/good.jsonl")" "$(metric dayshard_events_ingested_total)"
expect_eq "not_json" 1 "$(metric 'dayshard_events_rejected_total{reason="not_json"}')"
expect_eq "missing_ts" 1 "$(metric 'dayshard_events_rejected_total{reason="missing_ts"}')"
expect_eq "not_object" 1 "$(metric 'dayshard_events_rejected_total{reason="not_object"}')"
grep -q 'reason="ok"' "$WORK/metrics.txt" && fail "a rejection reason named ok" || ok
commits=$(metric dayshard_fsync_seconds_count)
((commits > 0)) && ok || fail "no group commit observed: '$commits'"
expect_eq "readyz once caught up" 200 "$(status "$URL/readyz")"

stop_node n1 "$NODE_PID"
if curl -s --max-time 2 "$URL/healthz" >/dev/null; then fail "the service outlived the node"; else ok; fi
stop_broker
finish
