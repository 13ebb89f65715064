#!/usr/bin/env bash
# kill -9 of `dayshard run` at random moments while a producer runs, the node restarted on the
# same data directory each time: at the end every day's count equals what was produced (the
# ground truth from file ingest of the same events): nothing lost, nothing stored twice. On
# every assignment the group's committed offsets are at or behind the node's durable positions
# (Kafka never runs ahead of storage); every bad event is in the dead-letter files once (they
# rotate every 2 KiB, so kills land around rotations too); fsck is clean at the end.
# Randomised: prints its seed, DS_TEST_SEED replays it. Sizes: 4 kills, DS_SHORT=1 3, DS_LONG=1
# (or the older DS_SOAK=1) 30 (at most one of them while the node joins the group, the others
# while it consumes).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"
rounds=4
long=${DS_LONG:-${DS_SOAK:-0}}
[[ ${DS_SHORT:-} == 1 ]] && rounds=3
[[ $long == 1 ]] && rounds=30
seed=${DS_TEST_SEED:-$RANDOM}
echo "seed=$seed rounds=$rounds"
RANDOM=$seed
# A killed member stays in the group for session.timeout.ms, and the mock then waits
# session.timeout.ms - 1000 for it to rejoin: 4 s makes a round about 7.5 s instead of 10.5 s
# (below 3 s the mock's first join outlasts the session: the group never forms).
NODE_X=(-X session.timeout.ms=4000 -X heartbeat.interval.ms=500)

# The producer runs through all the rounds (about 8.5 s each), within the mock's retention.
seconds=$((rounds * 85 / 10 + 5))
events=$((seconds * 2500))
((events > 280000)) && events=280000
rate=$((events / seconds))
"$DAYSHARD" generate --events "$events" --profile busy-day --seed "$seed" >"$WORK/good.jsonl"
# One bad event in about 500: dead letters must survive the crashes exactly once as well (the
# files are cut back to their committed position at each start and the events read again).
"$PY" - "$WORK/good.jsonl" "$seed" >"$WORK/events.jsonl" <<'EOF'
import random, sys
rnd = random.Random(int(sys.argv[2]))
bad = [b"not json", b'{"order_id":1,"customer_id":2}', b'{"order_id":"' + b"y" * 70 + b'"}',
       b'{"order_id":3,"customer_id":4,"ts":"2026-01-02T00:00:00Z"} x']
out = sys.stdout.buffer
for line in open(sys.argv[1], "rb"):
    if rnd.random() < 0.002:
        out.write(rnd.choice(bad) + b"\n")
    out.write(line)
EOF
bad_lines=$(($(wc -l <"$WORK/events.jsonl") - $(wc -l <"$WORK/good.jsonl")))
expected=$(truth "$WORK/events.jsonl")

start_broker --partitions 12
DATA=$WORK/data
# Batches of ~100 ms: the mock broker serves a backlog of one-message batches slowly (measured:
# after 30 rounds at 5 ms batches, about 1,000 events/s caught up, against ~20,000/s normally).
produce_paced "$WORK/events.jsonl" "$rate" -X linger.ms=100 >"$WORK/producer.out" 2>&1 &
producer=$!
early=0
for ((round = 1; round <= rounds; round++)); do
  start_node node "$DATA" it-crash --deadletter-file-bytes 2048
  started=$(now_ms)
  if ((early == 0 && RANDOM % 4 == 0)); then
    early=1
    # Now and then while it joins (or just after): nothing may be half-done there either.
    delay_ms=$((RANDOM % 4000))
    when="$delay_ms ms after start"
  else
    wait_assigned node 30 || fail "round $round: no assignment within 30 s"
    # Half of the time within 300 ms: while it catches up on what arrived during the restart.
    delay_ms=$((RANDOM % 2 ? RANDOM % 300 : RANDOM % 1500))
    when="$delay_ms ms after its assignment, $(($(now_ms) - started)) ms after start"
  fi
  sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  crash_node "$NODE_PID"
  stored=$(day_counts "$DATA" | total_of)
  echo "round $round: killed $when; $stored events stored"
done
if kill -0 "$producer" 2>/dev/null; then ok; else fail "the producer ended before the last kill (rounds too long)"; fi

start_node node "$DATA" it-crash --deadletter-file-bytes 2048
wait "$producer" || fail "producer: $(tail -c 300 "$WORK/producer.out")"
expect_eq "messages in the topic" "$(wc -l <"$WORK/events.jsonl")" "$(topic_messages)"
# Catching up after the last restart is bounded by the backlog: more rounds, longer waits.
wait_counts "after $rounds crashes" "$expected" $((rounds * 5 > 60 ? rounds * 5 : 60)) "$DATA"
stop_node node "$NODE_PID"
# Kafka's offsets never ahead of storage: on every assignment of every run, neither committed
# offset exceeds the durable position here (a single node owns everything).
ahead=$(grep -h 'kafka: assigned' "$WORK/node.log" |
  sed -E 's/.*\(durable here (-?[0-9]+), group (-?[0-9]+), positions (-?[0-9]+)\).*/\1 \2 \3/' |
  awk '$2 > $1 || $3 > $1' | wc -l)
expect_eq "assignments where a committed offset ran ahead of durable data" 0 "$ahead"
dead=$("$PY" -c '
import json, sys
keys = [(r["partition"], r["offset"]) for r in map(json.loads, open(sys.argv[1], "rb"))]
print(len(keys), len(set(keys)))' <(deadletters "$DATA"))
expect_eq "dead letters, distinct (partition, offset)" "$bad_lines $bad_lines" "$dead"
if "$DAYSHARD" fsck --data "$DATA" >"$WORK/fsck.txt" 2>&1; then ok; else fail "fsck: $(head -c 300 "$WORK/fsck.txt")"; fi
stop_broker
finish
