#!/usr/bin/env bash
# `dayshard run --dlq-topic T`: every dead letter lands in DIR/deadletter.*.jsonl and, as the same
# record, on topic T; good events keep flowing; counts are exact. A restart does not send or
# write a dead letter twice. The files rotate at every commit that wrote one (size 1 byte), so
# the checks read several.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"

start_broker --partitions 4
"$DAYSHARD" generate --events 3000 --profile busy-day --seed 21 > "$WORK/good.jsonl"
printf '%s\n' 'not json' '{"order_id": 1, "customer_id": 2}' \
  '{"order_id": 3, "customer_id": 4, "ts": "2026-02-30T00:00:00Z"}' '[1]' \
  '{"order_id": 5, "customer_id": 6, "ts": 1768996800000, "amount": 1.23456}' > "$WORK/bad.jsonl"
cat "$WORK/good.jsonl" "$WORK/bad.jsonl" "$WORK/good.jsonl" > "$WORK/mixed.jsonl"
expected=$(truth "$WORK/good.jsonl" "$WORK/good.jsonl")

start_node n1 "$WORK/data" dlq --dlq-topic orders-dlq --deadletter-file-bytes 1
wait_assigned n1 30 || die "node n1 got no partitions"
kcat_produce "$WORK/mixed.jsonl" || fail "kcat produce"
wait_counts "counts with dead letters mixed in" "$expected" 60 "$WORK/data"
stop_node n1 "$NODE_PID"

# A restart reads nothing again: no new dead letters in the file or on the topic. The node has
# read past everything before once a marker produced after the restart is stored (one event
# into each partition, with near certainty: 50 new orders spread over the 4 partitions).
start_node n1 "$WORK/data" dlq --dlq-topic orders-dlq --deadletter-file-bytes 1
wait_assigned n1 30 || die "node n1 got no partitions after the restart"
for i in $(seq 50); do
  echo "{\"order_id\": \"marker-$i\", \"customer_id\": 7, \"ts\": 1768996800000, \"amount\": 1}"
done >"$WORK/marker.jsonl"
kcat_produce "$WORK/marker.jsonl" || fail "kcat produce (marker)"
expected=$(truth "$WORK/good.jsonl" "$WORK/good.jsonl" "$WORK/marker.jsonl")
wait_counts "counts with the marker" "$expected" 60 "$WORK/data"
stop_node n1 "$NODE_PID"

expect_eq "dead letters in the files" 5 "$(deadletters "$WORK/data" | wc -l)"
files=$(find "$WORK/data" -maxdepth 1 -name 'deadletter.*.jsonl' | wc -l)
if ((files >= 2)); then ok; else fail "dead letters in $files file(s), expected rotation"; fi
timeout 30 kcat -b "$BOOT" -t orders-dlq -C -e -o beginning -q -f '%s\n' > "$WORK/topic.jsonl" ||
  fail "kcat could not read the dead-letter topic"
expect_eq "dead letters on the topic" 5 "$(grep -c . "$WORK/topic.jsonl")"
if cmp -s <(deadletters "$WORK/data" | sort) <(sort "$WORK/topic.jsonl"); then
  ok
else
  fail "the topic's records differ from the file's: $(diff <(deadletters "$WORK/data" | sort) <(sort "$WORK/topic.jsonl") | head -4)"
fi
expect_eq "reasons" "amount_precision bad_ts missing_ts not_json not_object" \
  "$("$PY" -c 'import json,sys; print(" ".join(sorted(json.loads(l)["reason"] for l in open(sys.argv[1]))))' <(deadletters "$WORK/data"))"
stop_broker
finish
