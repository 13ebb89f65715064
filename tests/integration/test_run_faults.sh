#!/usr/bin/env bash
# `dayshard run` under broker faults injected through the stdin of a 3-broker `dayshard broker`
# while an idempotent producer runs: latency, failed Fetch / OffsetCommit / Produce /
# OffsetFetch requests, dropped connections, moved partition leaders, brokers taken down and
# brought back, and a restart of the node in the middle. The final per-day counts equal the
# ground truth: file ingest of what the topic holds, read back with kcat (nothing lost,
# nothing stored twice), and the topic holds every produced event; the node stops cleanly
# and fsck is clean. A partition led by a broker that is down is unavailable until "up": every
# "down" here is followed by its "up" before the end is awaited.
# Randomised (events, fault timing): prints its seed, DS_TEST_SEED replays it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"
seed=${DS_TEST_SEED:-$RANDOM}
note "seed=$seed"
RANDOM=$seed

# More events than the faults need at the producer's rate (about 40 s of the 180 s these
# take): the producer is stopped after the last fault, so production spans every fault however
# slowly the machine runs them, and the truth is what it sent.
"$DAYSHARD" generate --events 400000 --profile busy-day --seed "$seed" >"$WORK/events.jsonl"
start_broker --brokers 3
DATA=$WORK/data
start_node node "$DATA" it-faults
wait_assigned node 30 || fail "no assignment within 30 s"
# The producer is not idempotent here (acks=all, one request in flight): librdkafka 2.0.2's
# mock broker loses acknowledged messages of an idempotent producer around "errors Produce"
# bursts and leader moves (with several requests in flight: a few per burst; with one: 1-3 in
# 90,000 in about a third of the runs, seen on a fresh clone), reporting them delivered. This
# test is about the node; without idempotence a retried batch can only be stored twice, which
# the truth below (what the topic holds) absorbs, and a lost one is still caught.
note "node assigned; producing and injecting faults"
"$DAYSHARD" produce --brokers "$BOOT" --topic orders --json --rate 2200 \
  -X enable.idempotence=false -X acks=all -X max.in.flight.requests.per.connection=1 \
  "$WORK/events.jsonl" >"$WORK/producer.out" 2>"$WORK/producer.err" &
producer=$!

# step SECONDS COMMAND...: waits about SECONDS (jittered by up to half a second), then sends the
# commands to the broker, each expected to be answered "ok".
step() {
  local seconds=$1 command
  shift
  sleep "$seconds.$((RANDOM % 5))"
  for command in "$@"; do
    echo "$(date +%T) fault: $command" >>"$WORK/faults.txt"
    control "$command"
  done
}

step 2 "rtt 2 300"
step 3 "rtt 2 0" "errors Fetch 20 NOT_LEADER_FOR_PARTITION"
step 2 "errors OffsetCommit 5 REQUEST_TIMED_OUT"
step 2 "errors Produce 10 NOT_LEADER_FOR_PARTITION"
step 2 "down 3"
step 4 "up 3"
step 2 "leader 0 2" "leader 1 3" "leader 4 1" "rtt 1 100"
step 2 "errors Fetch 10 _TRANSPORT" "rtt 1 0"
step 2 "down 1"
step 4 "up 1"
# A restart while the committed offsets cannot be read at first, and commits fail around the
# stop: the node resumes from its own durable positions.
step 2 "errors OffsetCommit 8 REQUEST_TIMED_OUT" "errors OffsetFetch 3 COORDINATOR_LOAD_IN_PROGRESS"
stop_node node "$NODE_PID"
start_node node "$DATA" it-faults
step 2 "errors Fetch 5 UNKNOWN_TOPIC_OR_PART" "rtt 3 200"
step 3 "rtt 3 0"
if kill -0 "$producer" 2>/dev/null; then ok; else fail "the producer ended before the last fault"; fi

note "faults done"
kill -TERM "$producer" 2>/dev/null # stops sending; what was sent is still awaited
wait "$producer" || fail "producer: $(tail -c 300 "$WORK/producer.out") $(tail -c 300 "$WORK/producer.err")"
sent=$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["sent"] if d["failed"] == 0 else -1)' \
  "$WORK/producer.out") || sent=-1
((sent > 0)) || fail "producer: $(cat "$WORK/producer.out")"
head -n "$sent" "$WORK/events.jsonl" >"$WORK/sent.jsonl"
note "producer done: $sent events sent"
# The node's promise is exactly once from the topic into storage, so the truth is what the
# topic holds, read back by kcat. The producer must have lost nothing; the mock broker of
# librdkafka 2.0.2 may keep a retried batch twice around a leader move under load (seen here:
# 2-4 duplicates in 90,000 on a loaded machine), which is the broker's doing and counted as
# stored data, not as a node error.
topic_values >"$WORK/topic.jsonl" || fail "kcat could not read the topic back"
produced=$(wc -l <"$WORK/sent.jsonl")
held=$(wc -l <"$WORK/topic.jsonl")
missing=$(LC_ALL=C comm -23 <(LC_ALL=C sort -u "$WORK/sent.jsonl") \
  <(LC_ALL=C sort -u "$WORK/topic.jsonl") | wc -l)
expect_eq "produced events missing from the topic" 0 "$missing"
expect_eq "the topic's messages (kcat) against its offsets" "$held" "$(topic_messages)"
((held == produced)) || note "the broker holds $((held - produced)) duplicate message(s)"
expected=$(truth "$WORK/topic.jsonl")
wait_counts "after the faults" "$expected" 60 "$DATA"
note "counts checked"
stop_node node "$NODE_PID"
note "node stopped"
# The faults are told once, in dayshard's words: librdkafka's own lines ("%3|...|FAIL|...")
# go through dayshard's logger (debug), never raw beside its warnings.
raw=$(grep -cE '^%[0-7]\|' "$WORK/node.log" || true)
expect_eq "raw librdkafka log lines in the node's log" 0 "$raw"
grep -q "warn: kafka: " "$WORK/node.log" && ok || fail "the broker's faults left no warning"
if "$DAYSHARD" fsck --data "$DATA" >"$WORK/fsck.txt" 2>&1; then ok; else fail "fsck: $(head -c 300 "$WORK/fsck.txt")"; fi
stop_broker
note "broker stopped"
finish
