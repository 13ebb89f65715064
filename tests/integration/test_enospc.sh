#!/usr/bin/env bash
# A full disk, named and survived: the data directory on a small tmpfs.
#   1. `dayshard ingest` (io_uring and sync): exit 1, stderr names "No space left on device" with
#      a path in the data directory and never "Input/output error"; what the failed run stored
#      is exactly the events it reported durable and fsck reads it clean; after a remount with
#      space, `ingest --resume` of the same input gives exactly the truth's per-day counts.
#   2. `dayshard run` from a broker: the node stops (exit 1) naming the full disk and its data
#      directory; after the remount a restarted node resumes from its durable positions, the
#      group's committed offsets never passed them (read from the restart's assignment line:
#      "durable here D, group G"), and the final counts equal the truth exactly.
# Needs mount(2) (root or CAP_SYS_ADMIN): skipped (77) where it is refused.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"

MNT=$WORK/mnt
mkdir -p "$MNT"
if ! mount -t tmpfs -o size=512k tmpfs "$MNT" 2>"$WORK/mount.err"; then
  echo "SKIP: cannot mount a tmpfs here ($(head -c 200 "$WORK/mount.err")): needs root or CAP_SYS_ADMIN"
  exit 77
fi
# The mount goes before node_lib's cleanup removes $WORK.
trap 'umount -l "$MNT" 2>/dev/null || true; node_cleanup' EXIT

seed=${DS_TEST_SEED:-$RANDOM}
echo "seed=$seed"

# remount SIZE: an empty tmpfs of SIZE (the data of the previous part removed first).
remount_empty() {
  rm -rf "${MNT:?}"/*
  mount -o remount,size="$1" "$MNT"
}

# wait_node_exit WHY: waits up to 60 s for the node NODE_PID to stop by itself and sets rc to its
# exit status; a node still running then is killed and the test dies.
wait_node_exit() {
  local deadline=$(($(now_ms) + 60000))
  while kill -0 "$NODE_PID" 2>/dev/null && (($(now_ms) < deadline)); do sleep 0.2; done
  if kill -0 "$NODE_PID" 2>/dev/null; then
    crash_node "$NODE_PID"
    die "run: the node kept running for 60 s $1"
  fi
  rc=0
  wait "$NODE_PID" || rc=$?
}

# expect_named_full WHAT LOG DIR: the log names the full disk with a path under DIR, and never
# reads "Input/output error".
expect_named_full() {
  local what=$1 log=$2 dir=$3
  if grep -i "no space left on device" "$log" | grep -q -- "$dir"; then ok; else
    fail "$what: no line names 'No space left on device' with a path under $dir: $(tail -n 5 "$log")"
  fi
  if grep -qi "input/output error" "$log"; then
    fail "$what: the log reads Input/output error: $(grep -i "input/output error" "$log" | head -n 2)"
  else
    ok
  fi
}

# ---- 1. file ingest, both backends ------------------------------------------------------------
"$DAYSHARD" generate --events 200000 --seed "$seed" >"$WORK/events.jsonl"
want=$(truth "$WORK/events.jsonl")
for io in uring sync; do
  remount_empty 512k
  data=$MNT/ingest-$io
  set +e
  "$DAYSHARD" ingest --model events --io "$io" --commit-interval-ms 5 --data "$data" "$WORK/events.jsonl" \
    >/dev/null 2>"$WORK/ingest-$io.err"
  rc=$?
  set -e
  if [[ $io == uring ]] && grep -q "io_uring unavailable" "$WORK/ingest-$io.err"; then
    echo "io_uring refused here: the uring round ran on sync I/O"
  fi
  expect_eq "ingest --io $io on a full disk: exit status" 1 "$rc"
  expect_named_full "ingest --io $io" "$WORK/ingest-$io.err" "$data"
  durable=$(sed -nE 's/.*durable before the failure: ([0-9]+) events.*/\1/p' "$WORK/ingest-$io.err")
  [[ -n $durable && $durable -gt 0 ]] || fail "ingest --io $io: no commit before the disk filled ($durable)"
  stored=$(day_counts "$data" | total_of)
  expect_eq "ingest --io $io: stored == reported durable" "$durable" "$stored"
  if "$DAYSHARD" fsck --data "$data" >"$WORK/fsck.txt" 2>&1; then ok; else
    fail "ingest --io $io: fsck after the failure: $(tail -n 3 "$WORK/fsck.txt")"
  fi
  mount -o remount,size=64m "$MNT"
  "$DAYSHARD" ingest --io "$io" --resume --data "$data" "$WORK/events.jsonl" >/dev/null \
    2>"$WORK/resume-$io.err" || fail "ingest --io $io --resume: $(tail -n 2 "$WORK/resume-$io.err")"
  expect_eq "ingest --io $io: counts after --resume" "$want" "$(day_counts "$data")"
  echo "ingest --io $io: $durable events durable when the disk filled, $stored stored, exact after --resume"
done

# ---- 2. dayshard run ------------------------------------------------------------------------
remount_empty 1m # the orders model writes ~35 bytes an event: a few commits fit
data=$MNT/node
"$DAYSHARD" generate --events 60000 --seed "$seed" >"$WORK/node.jsonl"
want=$(truth "$WORK/node.jsonl")
start_broker --partitions 4
if ds_produce_works; then ds_produce "$WORK/node.jsonl" || fail "dayshard produce"; else
  py_produce "$WORK/node.jsonl" || fail "python producer"
fi
start_node n "$data" it-enospc
wait_node_exit "on a full disk"
expect_eq "run on a full disk: exit status" 1 "$rc"
expect_named_full "run" "$WORK/n.log" "$data"
stored=$(day_counts "$data" | total_of)
echo "run: stopped on the full disk with $stored of $(total_of <<<"$want") events durable"
((stored < $(total_of <<<"$want"))) || fail "run: the disk never filled ($stored events stored)"
((stored > 0)) && ok || fail "run: nothing durable before the disk filled (the restart should resume mid-way)"

mount -o remount,size=64m "$MNT"
start_node n "$data" it-enospc
wait_log n "kafka: assigned" 30 4 || fail "run after the remount: not all 4 partitions assigned within 30 s"
# Per partition at the restart: the offset it resumes from, the durable position, the group's
# committed offset and the positions group's. Nothing acknowledged past durable: group <= durable
# and positions <= durable; the resume point is the durable position (or, with nothing durable
# in the orders model, the partition's start: offset -2).
checked=$(awk '/^==== run /{n++} n == 2 && /kafka: assigned/' "$WORK/n.log" |
  sed -E 's/.*from offset (-?[0-9]+) \(durable here (-?[0-9]+), group (-?[0-9]+), positions (-?[0-9]+)\).*/\1 \2 \3 \4/' |
  awk '$3 > $2 || $4 > $2 || ($1 != $2 && !($1 == -2 && $2 == -1)) {bad++} END {print NR, bad + 0}')
expect_eq "restart: 4 partitions, none acknowledged past durable or resumed elsewhere" "4 0" "$checked"
wait_counts "run: after the remount and restart" "$want" 90 "$data"
stop_node n "$NODE_PID"

# ---- 3. only the index's disk is full ------------------------------------------------------
# DIR/gsi on a tmpfs of its own: the builder stops on ENOSPC, and the node stops with it (exit 1,
# naming the index and the cause) instead of staying paused forever behind a dead builder; the
# base data is intact; after the remount a restarted node finishes the index, exactly.
umount "$MNT"
data=$WORK/gsi-node
mkdir -p "$data/gsi"
mount -t tmpfs -o size=128k tmpfs "$data/gsi" || die "cannot mount the index's tmpfs"
trap 'umount -l "$data/gsi" 2>/dev/null || true; node_cleanup' EXIT
start_node g "$data" it-enospc-gsi
wait_node_exit "with its index's disk full"
expect_eq "run with the index's disk full: exit status" 1 "$rc"
grep -q "by-customer index builder stopped: No space left on device" "$WORK/g.log" && ok ||
  fail "run: the exit names neither the index nor the full disk: $(tail -n 3 "$WORK/g.log")"
expect_exit "fsck of the base data after the index filled its disk" 0 "$DAYSHARD" fsck --data "$data"
mount -o remount,size=64m "$data/gsi"
start_http_node g "$data" it-enospc-gsi
wait_counts "run: after the index's remount" "$want" 90 "$data"
heavy=$("$PY" -c '
import collections, json, sys
c = collections.Counter(json.dumps(json.loads(l)["customer_id"]) for l in open(sys.argv[1]))
print(next(k for k, n in c.most_common() if n <= 1000))' "$WORK/node.jsonl")
expected=$("$PY" -c '
import json, sys
print(sum(1 for l in open(sys.argv[1]) if json.dumps(json.loads(l)["customer_id"]) == sys.argv[2]))' \
  "$WORK/node.jsonl" "$heavy")
# The node that stopped left its group without a goodbye: a rebalance follows when its session
# expires, and a consistent read during it answers 503 "retry", as it says.
for _ in $(seq 30); do
  curl -s "$URL/v1/customers/$(customer_path "$heavy")/orders?limit=1000&consistent=true&timeout_ms=30000" \
    >"$WORK/orders.json"
  grep -q '"error":.*retry' "$WORK/orders.json" || break
  sleep 1
done
got=$("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["orders"]))' \
  "$WORK/orders.json" 2>/dev/null || head -c 300 "$WORK/orders.json")
expect_eq "the index after the remount: customer $heavy's orders" "$expected" "$got"
stop_node g "$NODE_PID"
stop_broker
finish
