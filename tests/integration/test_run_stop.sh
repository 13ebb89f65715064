#!/usr/bin/env bash
# A stop that is bounded: SIGTERM makes `dayshard run` exit 0 within 10 s whatever the broker's
# state, with what it read durable on disk first, and a restart against the broker resumes
# exactly (nothing lost, nothing counted twice). The node commits to storage once a minute, so
# at each stop it holds a part it read and has not stored (some of its lines bad: the
# dead-letter topic's flush is part of the stop); after each stop the per-day counts on disk
# equal the truth of every part sent. The stops:
#   1. the broker up: the stop commits to Kafka and leaves the group (at the next start no
#      group offset is behind the durable positions);
#   2. the broker frozen (SIGSTOP: connections open, nothing answered), then thawed;
#   3. the broker down (its connections refused, its state kept), then up: Kafka never heard
#      of the last part, and the next start resumes from the durable positions, ahead of the
#      group's offsets;
#   4. the broker killed (kill -9), at the end.
# Prints each stop's time; DS_STOP_RUNS=N repeats stops 1-3 N times (for medians).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"
runs=${DS_STOP_RUNS:-1}
# The bound the issue sets (Kubernetes' grace period is 30 s).
STOP_BOUND_MS=10000

# stop_timed NAME PID: SIGTERM; sets stop_ms (to the exit) and stop_rc; a watchdog kills the
# node after 60 s (then the bound fails, the script goes on).
stop_timed() {
  local name=$1 pid=$2 started
  started=$(now_ms)
  kill -TERM "$pid" 2>/dev/null || true
  (sleep 60 && kill -KILL "$pid") </dev/null >/dev/null 2>&1 &
  local watchdog=$!
  set +e
  wait "$pid"
  stop_rc=$?
  set -e
  stop_ms=$(($(now_ms) - started))
  { kill_tree "$watchdog"; wait "$watchdog"; } 2>/dev/null || true
  expect_eq "node $name: exit status after SIGTERM" 0 "$stop_rc"
  if ((stop_ms <= STOP_BOUND_MS)); then ok; else fail "node $name: stopped in $stop_ms ms (bound $STOP_BOUND_MS ms)"; fi
}

# A stream split in parts; each part has a few bad lines (dead letters, also sent to the topic).
parts=$((4 * runs + 2))
"$DAYSHARD" generate --events $((parts * 3000)) --profile busy-day --seed 26 >"$WORK/good.jsonl"
split -n l/$parts -d -a 2 "$WORK/good.jsonl" "$WORK/good."
for ((i = 0; i < parts; i++)); do
  printf '%s\n' 'not json' '{"order_id": 1, "customer_id": 2}' | cat "$WORK/good.$(printf %02d $i)" - >"$WORK/part$i.jsonl"
done
bad_per_part=2
# A storage commit a minute: what the node read is in memory only until the stop commits it.
SLOW=(--commit-interval-ms 60000)
DLQ=(--dlq-topic orders-dlq --deadletter-file-bytes 4096)

start_broker --partitions 4
DATA=$WORK/data
sent=()
part=0

# start: a node on DATA (ARGS...), assigned within 30 s.
start() {
  start_node node "$DATA" it-stop "${DLQ[@]}" "$@"
  wait_assigned node 30 || die "no assignment within 30 s"
}

# feed_read: sends the next part and waits until the node read all of it (its status line, every
# 5 s), while its storage commit is still to come: the count on disk is what was sent before.
feed_read() {
  local lines before
  lines=$(wc -l <"$WORK/part$part.jsonl")
  before=$(day_counts "$DATA")
  kcat_produce "$WORK/part$part.jsonl" || fail "kcat produce part $part"
  sent+=("$WORK/part$part.jsonl")
  part=$((part + 1))
  for _ in $(seq 300); do
    log_run_has node "node: $lines messages read" && break
    sleep 0.1
  done
  log_run_has node "node: $lines messages read" && ok || fail "part $part: the node did not read its $lines messages within 30 s"
  expect_eq "part $part: durable before the stop (the earlier parts)" "$before" "$(day_counts "$DATA")"
}

# durable_is_truth WHAT: the per-day counts on disk equal the truth of every part sent.
durable_is_truth() {
  expect_eq "$1: per-day counts on disk" "$(truth "${sent[@]}")" "$(day_counts "$DATA")"
}

# assigned_vs_durable: "SAME BEHIND" over the current run's assignments: partitions whose group
# offset equals the durable position, and partitions whose group offset is behind it; and
# checks that each started from its durable position.
assigned_vs_durable() {
  local lines
  lines=$(awk '/^==== run /{buf=""} {buf = buf $0 "\n"} END{printf "%s", buf}' "$WORK/node.log" |
    grep 'kafka: assigned' |
    sed -E 's/.*from offset (-?[0-9]+) \(durable here (-?[0-9]+), group (-?[0-9]+), positions (-?[0-9]+)\).*/\1 \2 \3 \4/')
  expect_eq "assignments not started from the durable position" 0 \
    "$(awk '$2 >= 0 && $1 != $2' <<<"$lines" | wc -l)"
  awk '$2 >= 0 {if ($3 == $2) same++; else if ($3 < $2) behind++} END {print same + 0, behind + 0}' <<<"$lines"
}

up_ms=() frozen_ms=() down_ms=()
start "${SLOW[@]}"
for ((r = 1; r <= runs; r++)); do
  # ---- 1. broker up: the stop commits to storage, then to Kafka, and leaves the group ----------
  feed_read
  stop_timed node "$NODE_PID"
  up_ms+=("$stop_ms")
  note "run $r: stop with the broker up: $stop_ms ms"
  log_run_has node "stopped in .* (left the group)" && ok || fail "the stop with the broker up did not leave the group"
  durable_is_truth "after the stop with the broker up"
  start "${SLOW[@]}"
  read -r same behind <<<"$(assigned_vs_durable)"
  expect_eq "after the stop with the broker up: partitions whose group offset is behind the durable position" 0 "$behind"
  ((same > 0)) && ok || fail "after the stop with the broker up: no partition with data"

  # ---- 2. broker frozen (SIGSTOP), then thawed -------------------------------------------------
  feed_read
  kill -STOP "$BROKER_PID"
  stop_timed node "$NODE_PID"
  frozen_ms+=("$stop_ms")
  note "run $r: stop with the broker frozen: $stop_ms ms"
  log_run_has node "stopped in .* (did not leave the group)" && ok || fail "the stop with the broker frozen left the group"
  durable_is_truth "after the stop with the broker frozen"
  kill -CONT "$BROKER_PID"
  start "${SLOW[@]}"
  # The frozen broker may still apply the commits it held in its socket buffers when thawed.
  note "after the thaw: partitions at / behind the durable position: $(assigned_vs_durable)"

  # ---- 3. broker down (connections refused), then up again -------------------------------------
  feed_read
  control "down 1"
  stop_timed node "$NODE_PID"
  down_ms+=("$stop_ms")
  note "run $r: stop with the broker down: $stop_ms ms"
  log_run_has node "stopped in .* (did not leave the group)" && ok || fail "the stop with the broker down left the group"
  durable_is_truth "after the stop with the broker down"
  control "up 1"
  start "${SLOW[@]}"
  # Kafka never heard of the part the stop committed to storage: the node resumes from its
  # durable positions, ahead of the group's.
  read -r same behind <<<"$(assigned_vs_durable)"
  ((behind > 0)) && ok || fail "after the stop with the broker down: no group offset behind the durable position ($same at it)"
done

# ---- the restart against the broker resumes exactly (every count is checked per day) ---------
feed_read

# ---- 4. broker killed (kill -9) -----------------------------------------------------------------
{ kill -KILL "$BROKER_PID" && wait "$BROKER_PID"; } 2>/dev/null || true
stop_timed node "$NODE_PID"
killed_ms=$stop_ms
note "stop with the broker killed: $stop_ms ms"
durable_is_truth "after the stop with the broker killed"
dead=$("$PY" -c '
import json, sys
keys = [(r["partition"], r["offset"]) for r in map(json.loads, open(sys.argv[1], "rb"))]
print(len(keys), len(set(keys)))' <(deadletters "$DATA"))
expect_eq "dead letters, distinct (partition, offset)" "$((part * bad_per_part)) $((part * bad_per_part))" "$dead"
if "$DAYSHARD" fsck --data "$DATA" >"$WORK/fsck.txt" 2>&1; then ok; else fail "fsck: $(head -c 300 "$WORK/fsck.txt")"; fi
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
note "stop times (ms): broker up ${up_ms[*]} (median $(median "${up_ms[@]}")), frozen ${frozen_ms[*]} (median $(median "${frozen_ms[@]}")), down ${down_ms[*]} (median $(median "${down_ms[@]}")), killed $killed_ms"
finish
