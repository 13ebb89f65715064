#!/usr/bin/env bash
# Nothing counted twice across nodes, Jepsen-style, in both data models: DS_MODEL=both (the
# default), orders or events. Each run: a broker (topic of 4 partitions), one consumer group of
# three nodes n1, n2, n3 behind a router (--node n1,n2,n3 --partitions 4, n3's port chosen
# ahead), and double_count.py: a producer of unique orders and status updates that keep an
# order's day, and a client asking the unfiltered total through the router about 20 times a
# second (every 4th consistent=true) and now and then one node directly. n1 and n2 start
# first; n3 is added 2..5 s into the stream; then, on a random schedule until the stream ends
# and at least four faults ran (3..8 s apart, so the group settles in between), one node at a
# time is killed (kill -9, back after 0..3 s), frozen briefly (SIGSTOP for 1..3 s) or long
# (6..10 s: past the 4 s session timeout its partitions move while it sleeps, and it wakes
# holding them), or restarted (SIGTERM, then started again). The first four faults are one of
# each kind, the long freeze first; the rest are drawn.
# Checked by double_count.py over every answer: a complete answer of the router (200, not
# partial) is at most what was sent before it arrived (orders model: distinct orders; events
# model: messages, each line one event) and at least every complete answer received before its
# request left; a node's own count is at most what was sent; once every node runs again and the
# producer stopped, the consistent count equals the truth (the distinct orders sent; the
# messages the topic holds, each counted exactly once). Without the router's ownership rules
# (router_owner.c) the orders model's answers after a takeover count the moved partition's
# orders twice, or go back while the new owner re-reads it; without the events model's tenures
# and claims (ingest/node_tenure.c) a range its old owner stored past the new owner's start
# counts twice for good (docs/ARCHITECTURE.md, section 15: "No event counted twice across
# nodes, in the events model").
# Prints, for each model, the schedule (each fault with its time and node), the answers checked
# by kind and the final counts.
# Runs: 1 of 25 s per model (DS_SHORT=1: 20 s; DS_LONG=1: 3 of 90 s per model, about 30
# faults each; DS_RUNS, DS_STREAM_S override). Randomised (schedule, stream): prints its seed; DS_TEST_SEED replays
# the choices (their timing follows the machine).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"
# A short session timeout: a frozen or killed member's partitions move within seconds.
NODE_X=(-X session.timeout.ms=4000 -X heartbeat.interval.ms=500)
RUNS=1
STREAM_S=25
[[ ${DS_SHORT:-} == 1 ]] && STREAM_S=20
[[ -n ${DS_LONG:-} ]] && RUNS=3 STREAM_S=90
RUNS=${DS_RUNS:-$RUNS}
STREAM_S=${DS_STREAM_S:-$STREAM_S}
case ${DS_MODEL:-both} in
orders | events) MODELS=("$DS_MODEL") ;;
both) MODELS=(orders events) ;;
*) die "DS_MODEL: orders, events or both, not '$DS_MODEL'" ;;
esac
RATE=600
SETTLE_S=60
DOUBLE_COUNT=$(dirname "$0")/double_count.py
seed=${DS_TEST_SEED:-$RANDOM}
echo "seed=$seed models=${MODELS[*]} runs=$RUNS stream=${STREAM_S}s"
BASE=$WORK
mkdir -p "$BASE/reports"
trap 'WORK=$BASE; node_cleanup' EXIT
"$PY" -c 'import kafka' 2>/dev/null || {
  echo "SKIP: python3-kafka is not installed"
  exit 77
}

# pause_s LOW HIGH: sets PAUSE to a random number of seconds in LOW..HIGH (tenths). Not
# echoed: a command substitution is a subshell, where bash seeds $RANDOM afresh, and the seed
# would not replay it.
pause_s() {
  local tenths=$((($1 * 10) + RANDOM % (($2 - $1) * 10 + 1)))
  PAUSE=$((tenths / 10)).$((tenths % 10))
}

# fault TEXT: one line of the schedule ("+MS NODE WHAT"), printed and kept for the summary.
fault() {
  local line="+$(($(now_ms) - t0)) ms $*"
  note "$model run $run: $line"
  echo "$run $line" >>"$BASE/reports/$model.schedule"
}

run_once() {
  local model=$1 run=$2 before victim action hold rc n faults=0
  # shellcheck disable=SC2154 # failures is lib.sh's
  before=$failures
  WORK=$BASE/$model-$run
  mkdir -p "$WORK"
  MODEL_X=(--model "$model")
  start_broker --partitions 4
  declare -A port pid
  for n in n1 n2 n3; do port[$n]=$(free_port); done
  for n in n1 n2; do
    start_at "$n" "${port[$n]}"
    pid[$n]=$NODE_PID
  done
  for n in n1 n2; do
    wait_assigned "$n" 30 || die "$model run $run: node $n: no assignment within 30 s"
  done
  local nodes=http://127.0.0.1:${port[n1]},http://127.0.0.1:${port[n2]}
  nodes=$nodes,http://127.0.0.1:${port[n3]}
  start_router --node "$nodes" --partitions 4 --probe-ms 100 --timeout-ms 1000 --threads 4

  "$PY" "$DOUBLE_COUNT" "$model" "$BOOT" orders "$R" "$nodes" "$RATE" "$((seed * 100 + run))" \
    "$WORK/stop" "$SETTLE_S" "$WORK/report.json" \
    </dev/null >"$WORK/client.out" 2>"$WORK/client.log" 3>&- &
  local client=$!
  t0=$(now_ms)
  pause_s 2 5
  sleep "$PAUSE"
  start_at n3 "${port[n3]}"
  pid[n3]=$NODE_PID
  fault "n3 added"
  local -a kinds_first=(3 0 2 1)
  while ((faults < ${#kinds_first[@]} || $(now_ms) - t0 < STREAM_S * 1000)); do
    pause_s 3 8
    sleep "$PAUSE"
    victim=n$((1 + RANDOM % 3))
    action=$((RANDOM % 4))
    # Every run has each kind, first a takeover while the old owner sleeps: the window the
    # rules close.
    ((faults < ${#kinds_first[@]})) && action=${kinds_first[faults]}
    faults=$((faults + 1))
    case $action in
    0)
      crash_node "${pid[$victim]}"
      pause_s 0 3
      hold=$PAUSE
      fault "$victim kill -9, back after ${hold} s"
      sleep "$hold"
      start_at "$victim" "${port[$victim]}"
      pid[$victim]=$NODE_PID
      ;;
    1 | 3)
      kill -STOP "${pid[$victim]}"
      if ((action == 1)); then pause_s 1 3; else pause_s 6 10; fi
      hold=$PAUSE
      fault "$victim SIGSTOP for ${hold} s"
      sleep "$hold"
      kill -CONT "${pid[$victim]}"
      ;;
    2)
      fault "$victim restarted (SIGTERM)"
      stop_node "$victim" "${pid[$victim]}"
      start_at "$victim" "${port[$victim]}"
      pid[$victim]=$NODE_PID
      ;;
    esac
  done
  touch "$WORK/stop"
  set +e
  wait "$client"
  rc=$?
  set -e
  cp "$WORK/report.json" "$BASE/reports/$model-$run.json" 2>/dev/null || true
  note "$model run $run: $(cat "$WORK/report.json" 2>/dev/null || echo "(no report)")"
  expect_eq "$model run $run: every answer held the checks (double_count.py's exit status)" 0 "$rc"
  if [[ $failures != "$before" ]]; then
    tail -n 5 "$WORK/client.log" >&2
    for n in n1 n2 n3; do
      echo "---- last lines of $n.log" >&2
      grep -v CONFWARN "$WORK/$n.log" | tail -n 12 >&2
    done
    echo "---- router.log" >&2
    tail -n 5 "$WORK/router.log" >&2
  fi
  stop_router "$model run $run"
  for n in n1 n2 n3; do crash_node "${pid[$n]}"; done
  kill -KILL "$BROKER_PID" 2>/dev/null || true
  wait "$BROKER_PID" 2>/dev/null || true
  exec 3>&-
  [[ -n ${DS_KEEP:-} || $failures != "$before" ]] || rm -rf "$WORK"
  WORK=$BASE
}

# summary MODEL: the model's schedule, faults by kind, answers checked by kind and final counts
# over its runs (from the schedule and double_count.py's reports).
summary() {
  "$PY" - "$1" "$BASE/reports" "$seed" <<'PYEOF'
import collections, glob, json, os, sys
model, reports, seed = sys.argv[1:]
lines = open(os.path.join(reports, model + ".schedule")).read().split("\n")
lines = [l for l in lines if l]
kinds = collections.Counter()
for l in lines:
    what = l.split(" ms ", 1)[1]
    kinds["added" if "added" in what else "kill -9" if "kill" in what else
          "restart" if "restarted" in what else
          "long freeze" if float(what.split("for ")[1].split()[0]) >= 6 else "freeze"] += 1
print("== %s model: seed %s, %d faults (%s)" % (
    model, seed, len(lines), ", ".join("%s %d" % kv for kv in sorted(kinds.items()))))
for l in lines:
    run, rest = l.split(" ", 1)
    print("   run %s %s" % (run, rest))
tot = collections.Counter()
for path in sorted(glob.glob(os.path.join(reports, model + "-*.json"))):
    d = json.load(open(path))
    run = path.rsplit("-", 1)[1][:-5]
    for k in ("answers", "complete", "consistent_complete", "unavailable", "node_answers",
              "node_answers_ok", "violations"):
        tot[k] += d[k]
    print("   run %s: truth %s (%s orders, %s messages, %s acked, %s sent again, topic %s), "
          "final consistent %s; answers %d: complete %d (consistent %d), 503/partial %d, "
          "statuses %s, the 503s named %s; node-direct %d (200: %d); longest 503 stretch %s; "
          "violations %d %s" % (
              run, d["truth"], d["orders"], d["messages"], d["acked"], d["retried"], d["topic"],
              d["final"], d["answers"], d["complete"], d["consistent_complete"],
              d["unavailable"], d["statuses"], d["missing"], d["node_answers"],
              d["node_answers_ok"], d["longest_ms"], d["violations"], d["violations_by_check"]))
print("   all runs: router answers %d: complete %d (consistent %d), 503/partial %d; "
      "node-direct %d (200: %d); violations %d" % (
          tot["answers"], tot["complete"], tot["consistent_complete"], tot["unavailable"],
          tot["node_answers"], tot["node_answers_ok"], tot["violations"]))
PYEOF
}

for model in "${MODELS[@]}"; do
  # Each model replays the same choices for a seed, whether run alone (DS_MODEL) or not.
  RANDOM=$seed
  for run in $(seq "$RUNS"); do
    run_once "$model" "$run"
  done
done
for model in "${MODELS[@]}"; do
  summary "$model" || fail "$model: no summary"
done
finish
