#!/usr/bin/env bash
# Two `dayshard run` nodes in one consumer group, each with its own data directory: node A
# alone, then node B joins mid-stream (a rebalance: A commits what it stored and lets half the
# partitions go), then A stops mid-stream (its partitions move to B from the offsets A
# committed). The per-day counts of A and B added up equal the ground truth from file ingest
# exactly (no event in both, none lost), and each node stored some.
# Randomised: prints its seed, DS_TEST_SEED replays it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"
# The events model: the handover resumes at the offsets the other member committed, and a
# stopped node's data still counts (test_run_rebalance_orders covers the orders model, whose
# partitions are read from their start by the member that takes them).
MODEL_X=(--model events)
seed=${DS_TEST_SEED:-$RANDOM}
echo "seed=$seed"
RANDOM=$seed

"$DAYSHARD" generate --events 90000 --profile busy-day --seed "$seed" >"$WORK/events.jsonl"
head -n 30000 "$WORK/events.jsonl" >"$WORK/part1.jsonl"
sed -n '30001,60000p' "$WORK/events.jsonl" >"$WORK/part2.jsonl"
tail -n +60001 "$WORK/events.jsonl" >"$WORK/part3.jsonl"
expected=$(truth "$WORK/events.jsonl")

start_broker --partitions 12
start_node a "$WORK/a" it-group
A_PID=$NODE_PID
wait_assigned a 30 || fail "node A: no assignment within 30 s"

# Part 1 over ~10 s; B joins 1..4 s into it, and the mock completes the rebalance about 5 s
# later (it waits session.timeout.ms - 1000 for the members to rejoin): still mid-stream.
produce_paced "$WORK/part1.jsonl" 3000 &
producer=$!
sleep "$((1 + RANDOM % 3)).$((RANDOM % 10))"
start_node b "$WORK/b" it-group
B_PID=$NODE_PID
wait "$producer" || fail "producer (part 1)"
wait_assigned b 30 || fail "node B: no assignment within 30 s"

# Part 2 at full speed to both; part 3 paced, and A stops 1..3 s into it.
produce_paced "$WORK/part2.jsonl" 20000 || fail "producer (part 2)"
produce_paced "$WORK/part3.jsonl" 6000 &
producer=$!
sleep "$((1 + RANDOM % 2)).$((RANDOM % 10))"
stop_node a "$A_PID"
wait "$producer" || fail "producer (part 3)"

expect_eq "messages in the topic" "$(wc -l <"$WORK/events.jsonl")" "$(topic_messages)"
wait_counts "A + B" "$expected" 60 "$WORK/a" "$WORK/b"
a_total=$(day_counts "$WORK/a" | total_of)
b_total=$(day_counts "$WORK/b" | total_of)
echo "node A stored $a_total events, node B $b_total"
if ((a_total > 0)); then ok; else fail "node A stored nothing"; fi
if ((b_total > 0)); then ok; else fail "node B stored nothing"; fi
# B took partitions over from A at the offsets A committed (never from the beginning).
handed=$(grep -cE 'kafka: assigned .* from offset [1-9][0-9]* \(durable here -1, .*positions [1-9]' \
  "$WORK/b.log" || true)
if ((handed > 0)); then ok; else fail "node B never resumed a partition from A's committed offset"; fi
# Each node resumed every partition at max(durable here, group, positions).
bad_resume=$(grep -h 'kafka: assigned' "$WORK/a.log" "$WORK/b.log" |
  sed -E 's/.*from offset (-?[0-9]+) \(durable here (-?[0-9]+), group (-?[0-9]+), positions (-?[0-9]+)\).*/\1 \2 \3 \4/' |
  awk '{m = $2 > $3 ? $2 : $3; m = $4 > m ? $4 : m} $1 != m' | wc -l)
expect_eq "assignments not resumed at max(durable, group, positions)" 0 "$bad_resume"
stop_node b "$B_PID"
stop_broker
for d in a b; do
  if "$DAYSHARD" fsck --data "$WORK/$d" >"$WORK/fsck.txt" 2>&1; then ok; else fail "fsck $d: $(head -c 300 "$WORK/fsck.txt")"; fi
done
finish
