# Helpers for the integration scripts of the Kafka node (`dayshard run`), sourced after lib.sh:
# a broker with a control fifo, nodes with a log file per run, producers (Python's kafka package,
# kcat, `dayshard produce`), ground truth from `dayshard ingest`, bounded waits on counts.
# Every background job still running is killed (with its children) when the script exits.
# Not a test itself: CTest registers test_*.sh only.

# The mock broker makes a new member of a group that lost its last member wait for
# session.timeout.ms - 1000 ms, and keeps a kill -9'd member for session.timeout.ms: keep it short.
NODE_X=(-X session.timeout.ms=6000 -X heartbeat.interval.ms=1000)
# The data model of the nodes' new directories and of `truth`: empty is the default (orders); a
# test whose streams repeat order ids on purpose sets MODEL_X=(--model events).
MODEL_X=()
DAYS=(--day 2026-01-01 --to 2026-01-28 --by day --json)
LOG_RUNS=0

# kill_tree PID: PID and its descendants, by process id.
kill_tree() {
  local pid=$1 child
  for child in $(pgrep -P "$pid" 2>/dev/null); do kill_tree "$child"; done
  kill -KILL "$pid" 2>/dev/null || true
}

# shellcheck disable=SC2154 # failures is lib.sh's
node_cleanup() {
  local pid
  # This shell's unreaped jobs only: the id of a job already waited for may belong to another
  # process by now.
  for pid in $(jobs -p); do
    { kill_tree "$pid"; wait "$pid"; } 2>/dev/null || true
  done
  if [[ $failures != 0 ]]; then
    for log in "$WORK"/*.log; do
      [[ -f $log ]] || continue
      echo "---- last lines of $(basename "$log")" >&2
      tail -n 15 "$log" >&2
    done
  fi
  exec 3>&- 2>/dev/null || true
  if [[ -n ${DS_KEEP:-} ]]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap node_cleanup EXIT

die() {
  fail "$*"
  finish || true
  exit 1
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }
# note TEXT: a progress line with the time, for the CTest log.
note() { echo "$(date +%T) $*"; }

# start_broker [ARGS...]: a broker whose stdin is the fifo $WORK/ctl, kept open on fd 3 (for
# control). Sets BOOT and BROKER_PID.
start_broker() {
  mkfifo "$WORK/ctl"
  exec 3<>"$WORK/ctl"
  "$DAYSHARD" broker "$@" <"$WORK/ctl" >"$WORK/broker.out" 2>"$WORK/broker.log" 3>&- &
  BROKER_PID=$!
  wait_printed "$WORK/broker.out" "$BROKER_PID"
  BOOT=$(head -n1 "$WORK/broker.out")
  [[ -n $BOOT ]] || die "the broker printed no bootstrap address: $(tail -n 3 "$WORK/broker.log")"
}

# stop_broker: SIGTERM; expects exit 0 within 10 s.
stop_broker() {
  local rc
  kill -TERM "$BROKER_PID" 2>/dev/null || true
  (sleep 10 && kill -KILL "$BROKER_PID") </dev/null >/dev/null 2>&1 &
  local watchdog=$!
  set +e
  wait "$BROKER_PID"
  rc=$?
  set -e
  { kill_tree "$watchdog"; wait "$watchdog"; } 2>/dev/null || true
  expect_eq "broker: exit status after SIGTERM" 0 "$rc"
}

# control COMMAND: sends a fault command to the broker; expects "ok ..." within 5 s.
control() {
  local before answer=""
  before=$(wc -l <"$WORK/broker.out")
  echo "$1" >&3
  for _ in $(seq 100); do
    if (($(wc -l <"$WORK/broker.out") > before)); then
      answer=$(sed -n "$((before + 1))p" "$WORK/broker.out")
      break
    fi
    sleep 0.05
  done
  if [[ $answer == ok* ]]; then ok; else fail "broker command '$1': answer [$answer]"; fi
}

# start_node NAME DATA [GROUP [ARGS...]]: `dayshard run` in the background, its stderr in
# $WORK/NAME.log (appended across runs, each run headed by a marker line). Sets NODE_PID.
start_node() {
  local name=$1 data=$2 group=${3:-it}
  shift 3 || shift $#
  LOG_RUNS=$((LOG_RUNS + 1))
  echo "==== run $LOG_RUNS at $(date +%T.%N)" >>"$WORK/$name.log"
  "$DAYSHARD" run --brokers "$BOOT" --topic orders --group "$group" --data "$data" \
    "${NODE_X[@]}" "${MODEL_X[@]}" "$@" </dev/null >/dev/null 2>>"$WORK/$name.log" 3>&- &
  # shellcheck disable=SC2034 # read by the scripts
  NODE_PID=$!
}

# start_http_node NAME DATA GROUP [ARGS...]: a node with the query service on a port of its
# own (first stdout line); sets NODE_PID and URL, and marks the run in NAME.log for
# wait_assigned.
start_http_node() {
  local name=$1 data=$2 group=$3
  shift 3
  LOG_RUNS=$((LOG_RUNS + 1))
  echo "==== run $LOG_RUNS at $(date +%T.%N)" >>"$WORK/$name.log"
  : >"$WORK/$name.out"
  "$DAYSHARD" run --brokers "$BOOT" --topic orders --group "$group" --data "$data" \
    --http 127.0.0.1:0 "${NODE_X[@]}" "${MODEL_X[@]}" "$@" </dev/null >"$WORK/$name.out" \
    2>>"$WORK/$name.log" 3>&- &
  NODE_PID=$!
  wait_printed "$WORK/$name.out" "$NODE_PID"
  URL=http://$(head -1 "$WORK/$name.out")
  [[ $URL == http://127.0.0.1:* ]] ||
    die "node $name printed no HTTP address: $(tail -n 3 "$WORK/$name.log")"
}

# GSI_LIB: the by-customer index tests' Python helpers (truth, pages).
GSI_LIB=$(dirname "${BASH_SOURCE[0]}")/gsi_lib.py

# gsi_events SEED FILE: the by-customer index tests' input: 30,000 hot-customer events (two
# heavy customers) plus a light customer with one order, string ids with equal timestamps, an
# integer id that looks like one of them and a non-ASCII string id.
gsi_events() {
  "$DAYSHARD" generate --events 30000 --profile hot-customer --seed "$1" >"$WORK/gen.jsonl"
  {
    cat "$WORK/gen.jsonl"
    echo '{"order_id":"o-light","customer_id":999999999,"ts":"2026-01-05T10:00:00Z","amount":3.5}'
    echo '{"order_id":"s-1","customer_id":"42","ts":"2026-01-06T10:00:00Z","status":"paid","amount":1}'
    echo '{"order_id":"s-2","customer_id":"42","ts":"2026-01-06T10:00:00Z","status":"paid","amount":2}'
    echo '{"order_id":40000007,"customer_id":"42","ts":"2026-01-06T10:00:00Z","status":"new","amount":3}'
    echo '{"order_id":40000008,"customer_id":42,"ts":"2026-01-07T11:00:00.123Z","amount":4.25}'
    echo '{"order_id":"x","customer_id":"cust é","ts":1768000000000,"amount":0.0001}'
  } >"$2"
}

# customer_path ID: a customer id as JSON (42 or "42") as the path segment of
# /v1/customers/{id}/orders: a string keeps its quotes, percent-encoded.
customer_path() {
  "$PY" -c 'import json,sys,urllib.parse; c=json.loads(sys.argv[1]); print(urllib.parse.quote(json.dumps(c, ensure_ascii=False) if isinstance(c, str) else str(c)))' "$1"
}

# stop_node NAME PID: SIGTERM; expects exit 0 within 30 s (then a watchdog kills it).
stop_node() {
  local name=$1 pid=$2 rc
  kill -TERM "$pid" 2>/dev/null || true
  # The watchdog keeps no descriptor of ours open (an orphaned sleep holding the script's
  # stdout would make CTest wait for it) and is killed with its sleep.
  (sleep 30 && kill -KILL "$pid") </dev/null >/dev/null 2>&1 &
  local watchdog=$!
  set +e
  wait "$pid"
  rc=$?
  set -e
  { kill_tree "$watchdog"; wait "$watchdog"; } 2>/dev/null || true
  expect_eq "node $name: exit status after SIGTERM" 0 "$rc"
}

# crash_node PID: kill -9 and reap.
crash_node() {
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# log_run_has NAME PATTERN: whether the current run's part of NAME's log matches PATTERN. Not
# `grep -q`: it exits at the first match, and awk writing the rest (a run's log passes the 64 KiB
# of a pipe) dies of SIGPIPE, which pipefail turns into "no match" (seen in CI).
log_run_has() {
  awk '/^==== run /{buf=""} {buf = buf $0 "\n"} END{printf "%s", buf}' "$WORK/$1.log" |
    grep -- "$2" >/dev/null
}

# wait_log NAME TEXT SECONDS [COUNT]: until the node's current run has logged TEXT (at least
# COUNT times, 1 unless given).
wait_log() {
  local deadline=$(($(now_ms) + $3 * 1000)) want=${4:-1}
  while (($(now_ms) < deadline)); do
    (($(log_run_count "$1" "$2") >= want)) && return 0
    sleep 0.1
  done
  return 1
}

# log_run_count NAME TEXT: how many lines of the node's current run contain TEXT.
log_run_count() {
  awk '/^==== run /{buf=""} {buf = buf $0 "\n"} END{printf "%s", buf}' "$WORK/$1.log" |
    grep -c -- "$2" || true
}

# wait_paused NAME SECONDS: until the node's consumption is paused by back-pressure (its last
# "consumption paused/resumed" line says paused). The node must run with DS_LOG=debug.
wait_paused() {
  local deadline=$(($(now_ms) + $2 * 1000)) last
  while (($(now_ms) < deadline)); do
    last=$(grep -E 'consumption (paused|resumed)' "$WORK/$1.log" | tail -1)
    [[ $last == *"consumption paused"* ]] && return 0
    sleep 0.1
  done
  return 1
}

# wait_assigned NAME SECONDS: until the node's current run logs an assignment.
wait_assigned() {
  wait_log "$1" "kafka: assigned" "$2"
}

# status URL: GET URL, its body in $WORK/body; prints the HTTP status (000: no answer in 10 s).
status() { curl -s -o "$WORK/body" -w '%{http_code}' --max-time 10 "$1"; }

# start_heat_node SEED FILE: the heat tests' start: a broker of 4 partitions; FILE, 100,000
# busy-day events of SEED, with their per-day counts (truth) in EXPECTED; node a (data $WORK/a,
# group g1, --shard-capacity 1000, so the busy day outgrows its 4 shards) with its query service
# on a port of its own, once it has its partitions. Sets EXPECTED, URL_A and PID_A.
# shellcheck disable=SC2034 # read by the scripts
start_heat_node() {
  start_broker --partitions 4
  "$DAYSHARD" generate --events 100000 --profile busy-day --seed "$1" >"$2"
  EXPECTED=$(truth "$2")
  start_http_node a "$WORK/a" g1 --shard-capacity 1000
  URL_A=$URL
  PID_A=$NODE_PID
  wait_assigned a 30 || die "node a got no partitions"
}

# start_serve DIR: `dayshard serve` over DIR on a port of its own (its first stdout line), its
# log in $WORK/serve.log; sets SERVE_PID and SERVE_URL.
start_serve() {
  : >"$WORK/serve.out"
  "$DAYSHARD" serve --data "$1" --http 127.0.0.1:0 </dev/null >"$WORK/serve.out" \
    2>"$WORK/serve.log" 3>&- &
  SERVE_PID=$!
  wait_printed "$WORK/serve.out" "$SERVE_PID"
  SERVE_URL=http://$(head -1 "$WORK/serve.out")
  [[ $SERVE_URL == http://127.0.0.1:* ]] ||
    die "serve printed no HTTP address: $(tail -n 3 "$WORK/serve.log")"
}

# ---- counts -----------------------------------------------------------------------------------

# day_counts DIR...: "DAY=N" lines (non-zero days) summed over the data dirs (missing dirs: 0).
day_counts() {
  local dir
  for dir in "$@"; do
    if [[ -f $dir/MANIFEST ]]; then
      "$DAYSHARD" count --data "$dir" "${DAYS[@]}" 2>/dev/null || echo '{"groups":[]}'
    else
      echo '{"groups":[]}'
    fi
  done | "$PY" -c '
import json, sys, collections
total = collections.Counter()
for line in sys.stdin:
    for g in json.loads(line).get("groups", []):
        total[g["key"]] += g["count"]
for day in sorted(total):
    if total[day]:
        print("%s=%d" % (day, total[day]))'
}

# total_of "DAY=N" lines on stdin.
total_of() { awk -F= '{s += $2} END {print s + 0}'; }

# truth FILE...: per-day counts of the files ingested with `dayshard ingest` (the ground truth).
truth() {
  local dir
  dir=$(mktemp -d "$WORK/truth-XXXXXX")
  cat "$@" | "$DAYSHARD" ingest --data "$dir" "${MODEL_X[@]}" --json - >"$dir.json"
  day_counts "$dir"
  rm -rf "$dir"
}

# wait_counts WHAT EXPECTED SECONDS DIR...: polls until the total over DIR... reaches EXPECTED's
# total (or SECONDS pass), waits 2 s more (no overshoot), then compares per-day counts.
wait_counts() {
  local what=$1 expected=$2 seconds=$3 want got deadline
  shift 3
  want=$(total_of <<<"$expected")
  deadline=$(($(now_ms) + seconds * 1000))
  while (($(now_ms) < deadline)); do
    got=$(day_counts "$@" | total_of)
    ((got >= want)) && break
    sleep 0.5
  done
  sleep 2
  got=$(day_counts "$@")
  if [[ $got == "$expected" ]]; then
    ok
  else
    fail "$what: per-day counts differ: total $(total_of <<<"$got"), expected $want; " \
      "$(diff <(echo "$expected") <(echo "$got") | grep '^[<>]' | head -n 6 | tr '\n' ' ')"
  fi
}

# ---- producers (each bounded by timeout) ------------------------------------------------------

# py_produce FILE: each line a message value (key: the order id when the line has one).
py_produce() {
  timeout 60 "$PY" - "$BOOT" "$1" <<'EOF'
import re, sys
from kafka import KafkaProducer
boot, path = sys.argv[1], sys.argv[2]
p = KafkaProducer(bootstrap_servers=boot, acks="all", linger_ms=5, max_block_ms=20000,
                  request_timeout_ms=20000, retries=0)
futures = []
with open(path, "rb") as f:
    for line in f:
        line = line.rstrip(b"\n")
        m = re.search(rb'"order_id":\s*("?[^,"}]*"?)', line)
        futures.append(p.send("orders", key=m.group(1) if m else None, value=line))
p.flush(timeout=40)
bad = sum(1 for f in futures if f.exception is not None)
p.close(timeout=5)
sys.exit(1 if bad else 0)
EOF
}

# kcat_produce FILE [ARGS...]: each line a message value, unkeyed.
kcat_produce() {
  local file=$1
  shift
  timeout 60 kcat -b "$BOOT" -t orders -P -X enable.idempotence=true "$@" -l "$file"
}

# ds_produce FILE [ARGS...]: `dayshard produce`, which must ack every line within
# PRODUCE_SECONDS (default 120).
ds_produce() {
  local file=$1 out
  shift
  out=$(timeout "${PRODUCE_SECONDS:-120}" "$DAYSHARD" produce --brokers "$BOOT" --topic orders \
    --json "$@" "$file") || return 1
  echo "dayshard produce: $out"
  [[ $("$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["failed"])' "$out") == 0 ]]
}

# produce_paced FILE RATE [-X key=value...]: about RATE lines a second: `dayshard produce
# --rate`, or, while that is not available, kcat on chunks of a tenth of a second's worth.
produce_paced() {
  local file=$1 rate=$2 chunk
  shift 2
  if ds_produce_works; then
    PRODUCE_SECONDS=$(($(wc -l <"$file") / rate + 60)) ds_produce "$file" --rate "$rate" "$@"
    return
  fi
  chunk=$(mktemp -d "$WORK/chunks-XXXXXX")
  split -l $((rate / 10 > 0 ? rate / 10 : 1)) "$file" "$chunk/c"
  for c in "$chunk"/c*; do
    kcat_produce "$c" "$@" || return 1
    sleep 0.1
  done
}

# topic_values: every message value the topic "orders" holds, one per line, read back with kcat
# (an independent client) from the beginning to the end offsets.
topic_values() {
  timeout 60 kcat -b "$BOOT" -t orders -C -e -q -o beginning -f '%s\n'
}

# topic_messages: how many messages the topic holds (the sum of its partitions' high
# watermarks: the mock's offsets start at 0 and have no gaps while retention keeps everything).
topic_messages() {
  timeout 30 "$PY" - "$BOOT" <<'EOF'
import sys
from kafka import KafkaConsumer, TopicPartition
c = KafkaConsumer(bootstrap_servers=sys.argv[1], request_timeout_ms=20000)
parts = [TopicPartition("orders", p) for p in c.partitions_for_topic("orders")]
low, high = c.beginning_offsets(parts), c.end_offsets(parts)
c.close()
print(sum(high[p] - low[p] for p in parts) if all(low[p] == 0 for p in parts) else -1)
EOF
}

# Whether `dayshard produce` exists and works here (it is being written: fall back to kcat).
ds_produce_works() {
  "$DAYSHARD" produce --help >/dev/null 2>&1
}

# ---- the kill -9 tests' helpers ---------------------------------------------------------------

# PY_PRODUCER: an independent producer (python3-kafka, acks=all, its own retries) that records
# every acknowledged (partition, offset, order id); usage in its header.
PY_PRODUCER=$(dirname "${BASH_SOURCE[0]}")/py_producer.py

# py_producer_finished PID: waits for the kill -9 tests' producer (its report in
# $WORK/producer.out, its log in $WORK/producer.log), which must have been stopped before it ran
# out of events and must have sent again after the broker's injected errors. Sets $retried
# (the producer's resends) for the caller's report.
py_producer_finished() {
  wait "$1" || fail "producer: $(tail -c 300 "$WORK/producer.out" "$WORK/producer.log")"
  note "producer: $(cat "$WORK/producer.out")"
  expect_eq "the producer ran out of events before it was stopped" false \
    "$(json_get "$WORK/producer.out" 'str(d["ran_out"]).lower()')"
  retried=$(json_get "$WORK/producer.out" 'd["retried"]')
  ((retried > 0)) && ok || fail "the broker errors made the producer send nothing again"
}

# gsi_state URL: "COMMIT LAG_MS QUERYABLE" from the node's /metrics: its storage commit sequence,
# the by-customer index's lag gauge, and how many commits became queryable in the index so far
# (the lag histogram's count); empty when the node does not answer.
gsi_state() {
  { curl -s --max-time 2 "$1/metrics" || true; } | awk '
    $1 == "dayshard_storage_commit_seq" {seq = $2}
    $1 == "dayshard_gsi_lag_ms" {lag = $2}
    $1 == "dayshard_gsi_lag_seconds_count" {n = $2}
    END {if (seq != "" && lag != "" && n != "") print seq, lag, n}'
}

# topic_records FILE: every message of the topic "orders" as "partition<TAB>offset<TAB>key<TAB>
# value" lines, read back with kcat from the beginning to the end offsets.
topic_records() {
  timeout 120 kcat -b "$BOOT" -t orders -C -e -q -o beginning -f '%p\t%o\t%k\t%s\n' >"$1"
}

# ---- nodes at known ports behind a router (test_no_double_count, test_router_kill9) -----------

# free_port: a TCP port nothing listens on now (for a node started later at a known address).
free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_at NAME PORT: node NAME (data $WORK/NAME, group ga) listening on PORT (0: any); sets
# NODE_PID and URL. A restarted node takes its old port again, the one the router knows: a port
# not free yet (a killed node's) is tried again. Each node is a session of its own: the kernel
# sends SIGHUP to a stopped process whose process group it finds orphaned (the script's group
# once the shell that started the test has gone: a node died of it mid-freeze).
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
    wait_printed "$WORK/$name.out" "$NODE_PID"
    URL=http://$(head -1 "$WORK/$name.out")
    [[ $URL == http://127.0.0.1:* ]] && return 0
    wait "$NODE_PID" 2>/dev/null || true
    sleep 0.5
  done
  die "node $name printed no HTTP address (port $port): $(tail -n 3 "$WORK/$name.log")"
}

# start_router ARGS...: `dayshard router --http 127.0.0.1:0 ARGS...`, its log in
# $WORK/router.log; sets ROUTER_PID and R (its URL).
start_router() {
  : >"$WORK/router.out"
  "$DAYSHARD" router --http 127.0.0.1:0 "$@" </dev/null >"$WORK/router.out" \
    2>"$WORK/router.log" 3>&- &
  ROUTER_PID=$!
  wait_printed "$WORK/router.out" "$ROUTER_PID"
  R=http://$(head -1 "$WORK/router.out")
  [[ $R == http://127.0.0.1:* ]] || die "the router printed no address: $(tail -n 3 "$WORK/router.log")"
}

# stop_router WHAT: SIGTERM; expects exit 0 (a failure names WHAT, e.g. the run).
stop_router() {
  kill -TERM "$ROUTER_PID"
  wait "$ROUTER_PID" || fail "$1: router exit status"
}
