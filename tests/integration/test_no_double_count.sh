#!/usr/bin/env bash
# No order counted twice across nodes, Jepsen-style (orders model, the default). Each run: a
# broker (topic of 4 partitions), one consumer group of three nodes n1, n2, n3 behind a router
# (--node n1,n2,n3 --partitions 4, n3's port chosen ahead), and double_count.py: a producer of
# unique orders and status updates that keep an order's day, and a client asking the unfiltered
# total through the router about 20 times a second (every 4th consistent=true) and now and
# then one node directly. n1 and n2 start first; n3 is added 2..5 s into the stream; then, on
# a random schedule until the stream ends (3..8 s apart, so the group settles in between; the
# first a long freeze), one node at a time is killed (kill -9, back after
# 0..3 s), frozen briefly (SIGSTOP for 1..3 s) or long (6..10 s: past the 4 s session timeout
# its partitions move while it sleeps, and it wakes holding their orders), or restarted
# (SIGTERM, then started again).
# Checked by double_count.py over every answer: a complete answer of the router (200, not
# partial) is at most the distinct orders sent before it arrived and at least every complete
# answer received before its request left; a node's own count is at most the orders sent; once
# every node runs again and the producer stopped, the consistent count equals the distinct
# orders sent. Without the router's ownership rules (router_owner.c) the answers after a
# takeover count the moved partition's orders twice, or go back while the new owner re-reads
# it.
# Runs: 1 of 40 s (DS_LONG=1: 5 of 90 s; DS_RUNS, DS_STREAM_S override). Randomised (schedule,
# stream): prints its seed; DS_TEST_SEED replays the choices (their timing follows the machine).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"
# A short session timeout: a frozen or killed member's partitions move within seconds.
NODE_X=(-X session.timeout.ms=4000 -X heartbeat.interval.ms=500)
RUNS=1
STREAM_S=40
[[ -n ${DS_LONG:-} ]] && RUNS=5 STREAM_S=90
RUNS=${DS_RUNS:-$RUNS}
STREAM_S=${DS_STREAM_S:-$STREAM_S}
RATE=600
SETTLE_S=60
DOUBLE_COUNT=$(dirname "$0")/double_count.py
seed=${DS_TEST_SEED:-$RANDOM}
echo "seed=$seed runs=$RUNS stream=${STREAM_S}s"
RANDOM=$seed
BASE=$WORK
trap 'WORK=$BASE; node_cleanup' EXIT
"$PY" -c 'import kafka' 2>/dev/null || {
  echo "SKIP: python3-kafka is not installed"
  exit 77
}

# free_port: a TCP port nothing listens on now (for a node started later at a known address).
free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_at NAME PORT: node NAME (data $WORK/NAME, group ga) on PORT; sets NODE_PID and URL. A
# port not free yet (a killed node's) is tried again. Each node is a session of its own: the
# kernel sends SIGHUP to a stopped process whose process group it finds orphaned (the script's
# group once the shell that started the test has gone: a node died of it mid-freeze).
start_at() {
  local name=$1 port=$2
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    LOG_RUNS=$((LOG_RUNS + 1))
    echo "==== run $LOG_RUNS at $(date +%T.%N)" >>"$WORK/$name.log"
    : >"$WORK/$name.out"
    setsid "$DAYSHARD" run --brokers "$BOOT" --topic orders --group ga --data "$WORK/$name" \
      --http "127.0.0.1:$port" "${NODE_X[@]}" "${MODEL_X[@]}" </dev/null >"$WORK/$name.out" \
      2>>"$WORK/$name.log" 3>&- &
    NODE_PID=$!
    for _ in $(seq 100); do
      [[ -s $WORK/$name.out ]] && break
      kill -0 "$NODE_PID" 2>/dev/null || break
      sleep 0.1
    done
    URL=http://$(head -1 "$WORK/$name.out")
    [[ $URL == http://127.0.0.1:* ]] && return 0
    wait "$NODE_PID" 2>/dev/null || true
    sleep 0.5
  done
  die "node $name printed no HTTP address (port $port): $(tail -n 3 "$WORK/$name.log")"
}

# pause_s LOW HIGH: a random number of seconds in LOW..HIGH (tenths).
pause_s() {
  local tenths=$((($1 * 10) + RANDOM % (($2 - $1) * 10 + 1)))
  echo "$((tenths / 10)).$((tenths % 10))"
}

run_once() {
  local run=$1 before t0 victim action hold rc n faults=""
  # shellcheck disable=SC2154 # failures is lib.sh's
  before=$failures
  WORK=$BASE/run-$run
  mkdir -p "$WORK"
  start_broker --partitions 4
  declare -A port pid
  for n in n1 n2 n3; do port[$n]=$(free_port); done
  for n in n1 n2; do
    start_at "$n" "${port[$n]}"
    pid[$n]=$NODE_PID
  done
  for n in n1 n2; do
    wait_assigned "$n" 30 || die "run $run: node $n: no assignment within 30 s"
  done
  : >"$WORK/router.out"
  "$DAYSHARD" router --node "http://127.0.0.1:${port[n1]},http://127.0.0.1:${port[n2]},http://127.0.0.1:${port[n3]}" \
    --http 127.0.0.1:0 --partitions 4 --probe-ms 100 --timeout-ms 1000 --threads 4 \
    </dev/null >"$WORK/router.out" 2>"$WORK/router.log" 3>&- &
  local router_pid=$!
  for _ in $(seq 100); do
    [[ -s $WORK/router.out ]] && break
    sleep 0.1
  done
  R=http://$(head -1 "$WORK/router.out")
  [[ $R == http://127.0.0.1:* ]] || die "run $run: the router printed no address"

  "$PY" "$DOUBLE_COUNT" "$BOOT" orders "$R" \
    "http://127.0.0.1:${port[n1]},http://127.0.0.1:${port[n2]},http://127.0.0.1:${port[n3]}" \
    "$RATE" "$((seed * 100 + run))" "$WORK/stop" "$SETTLE_S" "$WORK/report.json" \
    </dev/null >"$WORK/client.out" 2>"$WORK/client.log" 3>&- &
  local client=$!
  t0=$(now_ms)
  sleep "$(pause_s 2 5)"
  start_at n3 "${port[n3]}"
  pid[n3]=$NODE_PID
  faults="n3 added at $(($(now_ms) - t0)) ms"
  local first=1
  while (($(now_ms) - t0 < STREAM_S * 1000)); do
    sleep "$(pause_s 3 8)"
    victim=n$((1 + RANDOM % 3))
    action=$((RANDOM % 4))
    # Every run has a takeover while the old owner sleeps: the window the rules close.
    ((first)) && action=3
    first=0
    case $action in
    0)
      crash_node "${pid[$victim]}"
      hold=$(pause_s 0 3)
      faults="$faults; $victim kill -9 at $(($(now_ms) - t0)) ms, back after ${hold}s"
      sleep "$hold"
      start_at "$victim" "${port[$victim]}"
      pid[$victim]=$NODE_PID
      ;;
    1 | 3)
      kill -STOP "${pid[$victim]}"
      if ((action == 1)); then hold=$(pause_s 1 3); else hold=$(pause_s 6 10); fi
      faults="$faults; $victim SIGSTOP at $(($(now_ms) - t0)) ms for ${hold}s"
      sleep "$hold"
      kill -CONT "${pid[$victim]}"
      ;;
    2)
      faults="$faults; $victim restarted at $(($(now_ms) - t0)) ms"
      stop_node "$victim" "${pid[$victim]}"
      start_at "$victim" "${port[$victim]}"
      pid[$victim]=$NODE_PID
      ;;
    esac
  done
  touch "$WORK/stop"
  note "run $run: $faults"
  set +e
  wait "$client"
  rc=$?
  set -e
  note "run $run: $(cat "$WORK/report.json" 2>/dev/null || echo "(no report)")"
  expect_eq "run $run: every answer held the checks (double_count.py's exit status)" 0 "$rc"
  if [[ $failures != "$before" ]]; then
    tail -n 5 "$WORK/client.log" >&2
    for n in n1 n2 n3; do
      echo "---- last lines of $n.log" >&2
      grep -v CONFWARN "$WORK/$n.log" | tail -n 12 >&2
    done
    echo "---- router.log" >&2
    tail -n 5 "$WORK/router.log" >&2
  fi
  kill -TERM "$router_pid"
  wait "$router_pid" || fail "run $run: router exit status"
  for n in n1 n2 n3; do crash_node "${pid[$n]}"; done
  kill -KILL "$BROKER_PID" 2>/dev/null || true
  wait "$BROKER_PID" 2>/dev/null || true
  exec 3>&-
  [[ -n ${DS_KEEP:-} || $failures != "$before" ]] || rm -rf "$WORK"
  WORK=$BASE
}

for run in $(seq "$RUNS"); do
  run_once "$run"
done
finish
