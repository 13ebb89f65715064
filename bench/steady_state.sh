#!/usr/bin/env bash
# Benchmark: a real node (`dayshard run --http`, default orders model, index on) at steady
# state, fed through the embedded broker (`dayshard broker`) by `dayshard produce`. Measures
# the done-when figures of a node that runs for months (docs/PERFORMANCE.md, "Memory" and "Retention and the soak"):
#   month      a generated 1M-event month (busy-day and uniform profiles, one node each); after
#              the last event is durable, the bytes of the data dir (whole, ids/, gsi/, parts/,
#              the rest; apparent and allocated) every SAMPLE_EVERY s for SAMPLE_SECONDS s, as
#              B/event (targets: whole <= 20, index <= 12, within a minute, nothing run by hand)
#   retention  --retention-days 5 over 60 days of stream time, 60k new orders a day and half as
#              many updates (--updates 1/3); fed a stream day at a time, sampled after each day
#              is durable: ids/, gsi/, parts/, whole dir, RSS, VmHWM; ratios of the largest
#              size over days 51-60 to that over days 21-30 (targets: ids and gsi each
#              <= 1.25x), and of the single days 60 / 30; CSV and PNG (gnuplot) in OUT
#   rss        10M new orders, no updates: VmHWM per 1M orders and the ingest rate seen
#              (target: VmHWM <= 256 MiB at 10M)
# The stream is a file from `dayshard generate`, sent in produce calls of a chunk each: the
# embedded broker keeps only the newest ~5 MiB per partition (~130k of these events), so a call
# starts only once the node has made durable (its source positions in /metrics) all but the
# previous call. At the end the node must have taken in (events + dead letters in /metrics)
# every message the producer had acknowledged, and the data dir's per-day counts must equal
# `dayshard ingest` of the same file (same model and retention), else events were lost and the
# script fails.
# Retention: the stream is sorted by day (stable: the generator's order within a day) and sent
# on a one-partition topic (the node sees the file's order, so its stream time and too_late
# dead letters equal ingest's). Unsorted, the generator's moved-day updates (3% of updates move
# 1-3 days, and moves chain) put day d+5 among the first day's lines, so the node's stream time
# (the greatest day seen) runs 5-6 days ahead and, at --retention-days 5, most events are
# too_late (seen: 388k of the first 720k lines). Sorted, every update arrives within its
# order's day and nothing is too_late: what the node must reclaim is superseded versions and the
# orders of dropped days. The dropped days' files go 30 s after their drop, so at this feed rate
# parts/ still holds tens of days ("held"): ids/ and gsi/ are the figures the targets name.
# Exit status: 0 when the runs completed (targets met or not: each is printed as met/MISSED;
# STRICT=1 makes a miss exit 3), 1 when the node or the broker died, events were lost or a step
# failed, 2 on a usage error.
#   usage: bench/steady_state.sh [month|retention|rss|all] [KEY=VALUE...]   (--help: the keys)
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/steady_state.sh [month|retention|rss|all] [KEY=VALUE...]

Keys (also read from the environment; a KEY=VALUE argument wins):
  DAYSHARD=build/dayshard  the binary under test (any build: main's, a branch's)
  SCALE=1                  multiplies every mode's event count (0.1: a quick run)
  OUT=DIR                  where CSV, PNG and logs go (default: a new /tmp/dayshard-steady-*)
  WORKDIR=DIR              where streams and data dirs go (default: OUT/work; removed at the
                           end unless KEEP=1)
  PARTITIONS=12            partitions of the embedded broker's topic (month, rss)
  SEED=24                  generator seed
  STRICT=0                 1: exit 3 when a done-when target is missed
  NODE_ARGS=""             extra arguments for `dayshard run` (word-split)
 month:
  MONTH_EVENTS=1000000     events of each generated month (x SCALE)
  MONTH_PROFILES="busy-day uniform"
  MONTH_CHUNK=100000       lines per produce call
  MONTH_RATE=0             producer events/s within a chunk (0: as fast as it can)
  SAMPLE_SECONDS=60        how long to sample after the last event is durable
  SAMPLE_EVERY=5           seconds between samples
 retention:
  RET_EVENTS=5400000       lines in all (x SCALE); 2/3 new orders, 1/3 updates
  RET_DAYS=60              days of stream time (one produce call per day)
  RET_UPDATES=0.333333     share of update lines: half as many updates as new orders
  RETENTION_DAYS=5         the node's --retention-days
  RET_RATE=100000          producer events/s
  RET_CHUNK=30000          lines per produce call (a stream day is one or more calls)
  RET_SORT=1               send the stream sorted by day (stable); 0: in the generator's order
  RET_PARTITIONS=1         partitions of the topic: one arrival order, so the node's stream
                           time (and its too_late dead letters) equals `dayshard ingest`'s
 rss:
  RSS_EVENTS=10000000      new orders, no updates (x SCALE)
  RSS_DAYS=28              days they cover
  RSS_CHUNK=250000         lines per produce call
  RSS_SAMPLE=1000000       orders between samples (x SCALE)
  RSS_RATE=0               producer events/s within a chunk (0: as fast as it can)
EOF
}

MODE=""
for arg in "$@"; do
  case $arg in
  -h | --help) usage; exit 0 ;;
  month | retention | rss | all) MODE=$arg ;;
  [A-Z]*=*)
    key=${arg%%=*}
    [[ $key =~ ^[A-Z_]+$ ]] || { echo "steady_state: bad key in '$arg'" >&2; exit 2; }
    printf -v "$key" '%s' "${arg#*=}"
    export "${key?}"
    ;;
  *) echo "steady_state: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n $MODE ]] || { usage >&2; exit 2; }

DAYSHARD=${DAYSHARD:-build/dayshard}
SCALE=${SCALE:-1}
PARTITIONS=${PARTITIONS:-12}
SEED=${SEED:-24}
STRICT=${STRICT:-0}
NODE_ARGS=${NODE_ARGS:-}
MONTH_EVENTS=${MONTH_EVENTS:-1000000}
MONTH_PROFILES=${MONTH_PROFILES:-busy-day uniform}
MONTH_CHUNK=${MONTH_CHUNK:-100000}
MONTH_RATE=${MONTH_RATE:-0}
SAMPLE_SECONDS=${SAMPLE_SECONDS:-60}
SAMPLE_EVERY=${SAMPLE_EVERY:-5}
RET_EVENTS=${RET_EVENTS:-5400000}
RET_DAYS=${RET_DAYS:-60}
RET_UPDATES=${RET_UPDATES:-0.333333}
RETENTION_DAYS=${RETENTION_DAYS:-5}
RET_RATE=${RET_RATE:-100000}
RET_CHUNK=${RET_CHUNK:-30000}
RET_PARTITIONS=${RET_PARTITIONS:-1}
RET_SORT=${RET_SORT:-1}
RSS_EVENTS=${RSS_EVENTS:-10000000}
RSS_DAYS=${RSS_DAYS:-28}
RSS_CHUNK=${RSS_CHUNK:-250000}
RSS_SAMPLE=${RSS_SAMPLE:-1000000}
RSS_RATE=${RSS_RATE:-0}
FIRST_DAY=2026-01-01
PY=/usr/bin/python3

[[ -x $DAYSHARD ]] || { echo "steady_state: DAYSHARD=$DAYSHARD is not an executable" >&2; exit 2; }
DAYSHARD=$(cd "$(dirname "$DAYSHARD")" && pwd)/$(basename "$DAYSHARD")
for n in PARTITIONS SEED MONTH_EVENTS MONTH_CHUNK MONTH_RATE SAMPLE_SECONDS SAMPLE_EVERY \
  RET_EVENTS RET_DAYS RETENTION_DAYS RET_RATE RET_CHUNK RET_PARTITIONS RET_SORT RSS_EVENTS RSS_DAYS RSS_CHUNK RSS_SAMPLE RSS_RATE; do
  [[ ${!n} =~ ^[0-9]+$ ]] || { echo "steady_state: $n=${!n} is not a whole number" >&2; exit 2; }
done
for n in PARTITIONS MONTH_CHUNK SAMPLE_EVERY RET_DAYS RET_CHUNK RET_PARTITIONS RSS_CHUNK RSS_SAMPLE; do
  ((${!n} > 0)) || { echo "steady_state: $n must be at least 1" >&2; exit 2; }
done
awk -v s="$SCALE" 'BEGIN {exit !(s + 0 > 0)}' || { echo "steady_state: SCALE=$SCALE must be above 0" >&2; exit 2; }
scaled() { awk -v n="$1" -v s="$SCALE" 'BEGIN {printf "%d", n * s + 0.5}'; }

OUT=${OUT:-$(mktemp -d /tmp/dayshard-steady-XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORKDIR=${WORKDIR:-$OUT/work}
mkdir -p "$WORKDIR"

NODE_PID=""
BROKER_PID=""
cleanup() {
  local pid
  for pid in $NODE_PID $BROKER_PID; do kill -KILL "$pid" 2>/dev/null || true; done
  exec 3>&- 2>/dev/null || true
  if [[ -z ${KEEP:-} ]]; then rm -rf "$WORKDIR"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

note() { echo "$(date +%T) $*"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
die() {
  echo "steady_state: FAIL: $*" >&2
  local log
  for log in "$OUT"/*.log; do
    [[ -f $log ]] || continue
    echo "---- last lines of $log" >&2
    tail -n 8 "$log" >&2
  done
  exit 1
}

# ---- the node and the broker -------------------------------------------------------------------

# start_broker NAME PARTITIONS: the embedded broker, its stdin a fifo held open on fd 3 (it runs until
# SIGTERM). Sets BOOT and BROKER_PID.
start_broker() {
  rm -f "$WORKDIR/ctl"
  mkfifo "$WORKDIR/ctl"
  exec 3<>"$WORKDIR/ctl"
  "$DAYSHARD" broker --partitions "$2" <"$WORKDIR/ctl" >"$WORKDIR/broker.out" \
    2>"$OUT/$1-broker.log" 3>&- &
  BROKER_PID=$!
  BOOT=""
  for _ in $(seq 100); do
    [[ -s $WORKDIR/broker.out ]] && { BOOT=$(head -n1 "$WORKDIR/broker.out"); return 0; }
    sleep 0.1
  done
  die "the broker printed no bootstrap address"
}

# start_node NAME DATA [ARGS...]: `dayshard run` with its query service on a free port, waits
# until it is assigned partitions. Sets NODE_PID and URL.
start_node() {
  local name=$1 data=$2
  shift 2
  # shellcheck disable=SC2086 # NODE_ARGS is word-split on purpose
  "$DAYSHARD" run --brokers "$BOOT" --topic orders --group steady --data "$data" \
    --http 127.0.0.1:0 "$@" $NODE_ARGS </dev/null >"$WORKDIR/node.out" 2>"$OUT/$name-node.log" 3>&- &
  NODE_PID=$!
  for _ in $(seq 100); do
    [[ -s $WORKDIR/node.out ]] && break
    sleep 0.1
  done
  URL=http://$(head -n1 "$WORKDIR/node.out")
  [[ $URL == http://127.0.0.1:* ]] || die "node $name printed no HTTP address"
  local deadline=$(($(now_ms) + 60000))
  until grep -q 'kafka: assigned' "$OUT/$name-node.log"; do
    alive
    (($(now_ms) < deadline)) || die "node $name got no partitions within 60 s"
    sleep 0.2
  done
}

alive() {
  kill -0 "$NODE_PID" 2>/dev/null || die "the node (pid $NODE_PID) died"
  kill -0 "$BROKER_PID" 2>/dev/null || die "the broker (pid $BROKER_PID) died"
}

# stop_pid WHAT PID: SIGTERM, at most 60 s, exit status 0 expected.
stop_pid() {
  local rc=0 deadline=$(($(now_ms) + 60000))
  kill -TERM "$2" 2>/dev/null || true
  while kill -0 "$2" 2>/dev/null && (($(now_ms) < deadline)); do sleep 0.1; done
  kill -KILL "$2" 2>/dev/null || true
  wait "$2" || rc=$?
  ((rc == 0)) || die "$1 exited with status $rc after SIGTERM"
}

stop_all() {
  stop_pid node "$NODE_PID"
  NODE_PID=""
  stop_pid broker "$BROKER_PID"
  BROKER_PID=""
  exec 3>&-
}

# metrics: "DURABLE CONSUMED" from /metrics: the sum of the durable source positions (messages
# made durable, the topic's offsets starting at 0) and the messages the node took in (events
# stored + dead letters); empty when the node does not answer.
metrics() {
  { curl -s --max-time 5 "$URL/metrics" || true; } | awk '
    $1 ~ /^dayshard_source_next_offset[{]/ {pos += $2; seen = 1}
    $1 == "dayshard_events_ingested_total" {ev = $2}
    $1 ~ /^dayshard_events_rejected_total[{]/ {rej += $2}
    END {if (seen && ev != "") printf "%d %d\n", pos, ev + rej}'
}

# proc_kib FIELD: VmRSS or VmHWM of the node, KiB.
proc_kib() { awk -v f="$1:" '$1 == f {print $2}' "/proc/$NODE_PID/status" 2>/dev/null || echo 0; }

# wait_durable TARGET SECONDS: until the node's durable position reaches TARGET messages.
wait_durable() {
  local target=$1 deadline=$(($(now_ms) + $2 * 1000)) m
  while :; do
    alive
    m=$(metrics)
    [[ -n $m ]] && ((${m%% *} >= target)) && return 0
    (($(now_ms) < deadline)) || die "the node made ${m%% *} of $target messages durable in $2 s (lag, or events lost at the broker)"
    sleep 0.2
  done
}

# produce FILE RATE: one `dayshard produce` call; prints how many were acknowledged, fails
# when any was not.
produce() {
  local out
  out=$("$DAYSHARD" produce --brokers "$BOOT" --topic orders --json --rate "$2" "$1" 2>>"$OUT/produce.log") ||
    die "dayshard produce of $1 failed: $out"
  "$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["acked"] if d["failed"] == 0 else -1)' "$out"
}

# check_consumed NAME: the node took in (stored or dead-lettered) every message produced: one
# the broker dropped before the node read it moves the position without being taken in.
check_consumed() {
  local m deadline=$(($(now_ms) + 10000))
  while :; do
    m=$(metrics)
    [[ -n $m && ${m#* } -ge $SENT ]] && break
    (($(now_ms) < deadline)) || die "$1: the node took in ${m#* } of $SENT messages produced: events lost at the broker"
    sleep 0.2
  done
  note "$1: the node took in ${m#* } messages (events + dead letters), $SENT produced"
}

# ---- sizes, counts ---------------------------------------------------------------------------

# bytes PATH: "APPARENT ALLOCATED" of a file or tree (files that vanish meanwhile are skipped).
bytes() {
  if [[ -e $1 ]]; then
    echo "$(du -sb "$1" 2>/dev/null | cut -f1) $(du -s -B1 "$1" 2>/dev/null | cut -f1)"
  else
    echo "0 0"
  fi
}

# sizes DIR: "WHOLE_A WHOLE_B IDS_A IDS_B GSI_A GSI_B PARTS_A PARTS_B REST_A REST_B".
sizes() {
  local wa wb ia ib ga gb pa pb
  read -r wa wb <<<"$(bytes "$1")"
  read -r ia ib <<<"$(bytes "$1/ids")"
  read -r ga gb <<<"$(bytes "$1/gsi")"
  read -r pa pb <<<"$(bytes "$1/parts")"
  echo "$wa $wb $ia $ib $ga $gb $pa $pb $((wa - ia - ga - pa)) $((wb - ib - gb - pb))"
}

# partitions DIR: how many day/shard partitions DIR/parts holds (adaptive sharding grows a day
# whose write rate, in Kafka message time, passes the shard capacity: the feed rate shows here).
partitions() { { find "$1/parts" -mindepth 2 -maxdepth 2 -type d 2>/dev/null || true; } | wc -l; }

# day_counts DIR FIRST LAST: "DAY=N" lines of the non-zero days (DAYS at most 366 per call).
day_counts() {
  local from=$2 to
  while [[ ! $from > $3 ]]; do
    to=$(date -u -d "$from + 365 days" +%F)
    [[ $to > $3 ]] && to=$3
    "$DAYSHARD" count --data "$1" --day "$from" --to "$to" --by day --json
    from=$(date -u -d "$to + 1 day" +%F)
  done | "$PY" -c '
import json, sys
for line in sys.stdin:
    for g in json.loads(line).get("groups", []):
        if g["count"]:
            print("%s=%d" % (g["key"], g["count"]))'
}

# check_counts NAME DATA FILE PRODUCED FIRST LAST [INGEST_ARGS...]: the node (stopped) took in
# every produced message and its data dir counts what `dayshard ingest` of FILE counts.
check_counts() {
  local name=$1 data=$2 file=$3 produced=$4 first=$5 last=$6 truth got
  shift 6
  truth=$WORKDIR/truth-$name
  rm -rf "$truth"
  "$DAYSHARD" ingest --data "$truth" --json "$@" "$file" >"$WORKDIR/truth-$name.json" ||
    die "dayshard ingest of $file (the ground truth) failed"
  day_counts "$truth" "$first" "$last" >"$WORKDIR/truth-$name.days"
  day_counts "$data" "$first" "$last" >"$WORKDIR/node-$name.days"
  rm -rf "$truth"
  if ! cmp -s "$WORKDIR/truth-$name.days" "$WORKDIR/node-$name.days"; then
    diff "$WORKDIR/truth-$name.days" "$WORKDIR/node-$name.days" | grep '^[<>]' | head -n 8 >&2 || true
    die "$name: the data dir's per-day counts (total $(awk -F= '{s += $2} END {print s + 0}' \
      "$WORKDIR/node-$name.days")) differ from dayshard ingest of the same stream (total \
$(awk -F= '{s += $2} END {print s + 0}' "$WORKDIR/truth-$name.days")): events lost at the broker or the node"
  fi
  got=$(awk -F= '{s += $2} END {print s + 0}' "$WORKDIR/node-$name.days")
  note "$name: counts equal dayshard ingest of the stream ($got orders on $(wc -l <"$WORKDIR/node-$name.days") days; $produced messages produced)"
}

# verdict VALUE LIMIT: sets V to "met" or "MISSED" (counted in MISSED for STRICT).
MISSED=0
verdict() {
  if awk -v v="$1" -v l="$2" 'BEGIN {exit !(v <= l)}'; then
    V=met
  else
    MISSED=$((MISSED + 1))
    V=MISSED
  fi
}
mib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}'; }
per() { awk -v b="$1" -v n="$2" 'BEGIN {printf "%.1f", b / n}'; }

# feed NAME FILE STEP CHUNK RATE: sends FILE in steps of STEP lines, each in produce calls of
# CHUNK lines at RATE events/s; a call starts once all but the previous call is durable (so the
# broker never holds more than two calls' worth the node has not read), and after each step,
# once all of it is durable, on_step K SENT runs (K from 1). Sets SENT.
feed() {
  local name=$1 file=$2 step=$3 chunk=$4 rate=$5 k=0 st c acked before
  local dir=$WORKDIR/feed-$name
  rm -rf "$dir"
  mkdir -p "$dir/steps" "$dir/chunks"
  split -a 6 -d -l "$step" "$file" "$dir/steps/s"
  SENT=0
  for st in "$dir"/steps/s*; do
    k=$((k + 1))
    split -a 6 -d -l "$chunk" "$st" "$dir/chunks/c"
    rm -f "$st"
    for c in "$dir"/chunks/c*; do
      before=$SENT
      acked=$(produce "$c" "$rate")
      [[ $acked == "$(wc -l <"$c")" ]] || die "$name: produce: $acked of $(wc -l <"$c") acknowledged"
      rm -f "$c"
      SENT=$((SENT + acked))
      wait_durable "$before" 900
    done
    wait_durable "$SENT" 900
    on_step "$k" "$SENT"
  done
  rm -rf "$dir"
}

header() {
  echo "steady_state $MODE: $(date -u '+%F %T UTC'), $(uname -n), $(uname -srm)"
  echo "  $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), nproc $(nproc)," \
    "$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "  build $DAYSHARD ($("$DAYSHARD" --version 2>/dev/null | head -n1), $(date -u -r "$DAYSHARD" '+built %F %T UTC'))"
  echo "  work $WORKDIR ($(df -T "$WORKDIR" | awk 'NR == 2 {print $2}')), out $OUT, SCALE $SCALE"
}

# ---- month -----------------------------------------------------------------------------------

month_one() {
  local profile=$1 events file data t0 t1 t_last s rows line
  events=$(scaled "$MONTH_EVENTS")
  file=$WORKDIR/month-$profile.jsonl
  data=$WORKDIR/month-$profile
  rm -rf "$data"
  "$DAYSHARD" generate --events "$events" --profile "$profile" --seed "$SEED" >"$file"
  note "month/$profile: $events events generated ($(du -h "$file" | cut -f1)), starting broker and node"
  start_broker "month-$profile" "$PARTITIONS"
  start_node "month-$profile" "$data"
  t0=$(now_ms)
  on_step() { :; }
  feed "month-$profile" "$file" "$events" "$MONTH_CHUNK" "$MONTH_RATE"
  t_last=$(now_ms)
  note "month/$profile: the last event is durable, $((t_last - t0)) ms after the first was sent" \
    "($((events * 1000 / (t_last - t0 + 1))) events/s); sampling ${SAMPLE_SECONDS} s"
  local csv=$OUT/month-$profile.csv
  echo "t_s,whole_apparent,whole_allocated,ids_apparent,ids_allocated,gsi_apparent,gsi_allocated,parts_apparent,parts_allocated,rest_apparent,rest_allocated,rss_kib,hwm_kib" >"$csv"
  printf '  %5s  %-13s %-13s %-13s %-13s %-13s (B/event, apparent/allocated)\n' t_s whole ids gsi parts rest
  local t=0 wa wb ia ib ga gb pa pb ra rb
  while :; do
    alive
    s=$(sizes "$data")
    read -r wa wb ia ib ga gb pa pb ra rb <<<"$s"
    echo "$t,${s// /,},$(proc_kib VmRSS),$(proc_kib VmHWM)" >>"$csv"
    printf '  %5d  %-13s %-13s %-13s %-13s %-13s\n' "$t" "$(per "$wa" "$events")/$(per "$wb" "$events")" \
      "$(per "$ia" "$events")/$(per "$ib" "$events")" "$(per "$ga" "$events")/$(per "$gb" "$events")" \
      "$(per "$pa" "$events")/$(per "$pb" "$events")" "$(per "$ra" "$events")/$(per "$rb" "$events")"
    ((t >= SAMPLE_SECONDS)) && break
    t1=$((t_last + (t + SAMPLE_EVERY) * 1000))
    while (($(now_ms) < t1)); do sleep 0.2; done
    t=$((t + SAMPLE_EVERY))
  done
  # Judged on the larger of apparent and allocated bytes, at the last sample.
  local whole=$((wa > wb ? wa : wb)) gsi=$((ga > gb ? ga : gb))
  verdict "$(per "$whole" "$events")" 20
  rows="whole $(per "$whole" "$events") B/event (<= 20: $V),"
  verdict "$(per "$gsi" "$events")" 12
  rows+=" index $(per "$gsi" "$events") B/event (<= 12: $V),"
  rows+=" ids $(per "$((ia > ib ? ia : ib))" "$events"), parts $(per "$((pa > pb ? pa : pb))" "$events")"
  line="month/$profile at ${SAMPLE_SECONDS} s: $rows; $(partitions "$data") partitions; VmHWM $(mib $(($(proc_kib VmHWM) * 1024))) MiB"
  check_consumed "month/$profile"
  stop_all
  read -r wa wb ia ib ga gb pa pb ra rb <<<"$(sizes "$data")"
  line+="; after the node stopped: whole $(per "$wa" "$events")/$(per "$wb" "$events"),"
  line+=" index $(per "$ga" "$events")/$(per "$gb" "$events") B/event"
  RESULTS+=("$line")
  check_counts "month-$profile" "$data" "$file" "$SENT" "$FIRST_DAY" 2026-12-31
  [[ $(awk -F= '{s += $2} END {print s + 0}' "$WORKDIR/node-month-$profile.days") == "$events" ]] ||
    die "month/$profile: the data dir counts $(awk -F= '{s += $2} END {print s + 0}' \
      "$WORKDIR/node-month-$profile.days") orders, $events were produced (every line a new order)"
  rm -rf "$data" "$file"
}

mode_month() {
  local p
  for p in $MONTH_PROFILES; do month_one "$p"; done
}

# ---- retention -------------------------------------------------------------------------------

ret_sample() {
  local k=$1 sent=$2 last days_held day_idx s rss hwm
  # Days vanish while they are listed (dropped by retention): a failed listing is not fatal.
  last=$({ find "$RET_DATA/parts" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' 2>/dev/null || true; } | sort | tail -n1)
  days_held=$({ find "$RET_DATA/parts" -mindepth 1 -maxdepth 1 -type d 2>/dev/null || true; } | wc -l)
  day_idx=$((($(date -u -d "$last" +%s) - $(date -u -d "$FIRST_DAY" +%s)) / 86400 + 1))
  s=$(sizes "$RET_DATA")
  rss=$(proc_kib VmRSS)
  hwm=$(proc_kib VmHWM)
  echo "$k,$day_idx,$last,$days_held,$sent,${s// /,},$rss,$hwm,$(($(now_ms) - RET_T0)),$(partitions "$RET_DATA")" >>"$RET_CSV"
  local wa wb ia ib ga gb pa pb ra rb
  read -r wa wb ia ib ga gb pa pb ra rb <<<"$s"
  printf '  %4d %4d %-10s %4d %9d %9s %9s %9s %9s %8s %8s\n' "$k" "$day_idx" "$last" "$days_held" \
    "$sent" "$(mib "$ia")" "$(mib "$ga")" "$(mib "$pa")" "$(mib "$wa")" "$(mib $((rss * 1024)))" \
    "$(mib $((hwm * 1024)))"
}

mode_retention() {
  local events file first last
  events=$(scaled "$RET_EVENTS")
  file=$WORKDIR/retention.jsonl
  RET_DATA=$WORKDIR/retention
  RET_CSV=$OUT/retention.csv
  rm -rf "$RET_DATA"
  "$DAYSHARD" generate --events "$events" --days "$RET_DAYS" --updates "$RET_UPDATES" \
    --seed "$SEED" >"$file.gen"
  if ((RET_SORT)); then
    # Stable sort by the day of ts: lines keep the generator's order within a day.
    awk '{d = ""; if (match($0, /"ts":"[0-9]+-[0-9]+-[0-9]+/)) d = substr($0, RSTART + 6, RLENGTH - 6)
          print d "\t" $0}' "$file.gen" | LC_ALL=C sort -s -t "$(printf '\t')" -k1,1 | cut -f2- >"$file"
    rm -f "$file.gen"
  else
    mv "$file.gen" "$file"
  fi
  note "retention: $events lines over $RET_DAYS days ($(du -h "$file" | cut -f1)), about" \
    "$(awk -v e="$events" -v u="$RET_UPDATES" -v d="$RET_DAYS" 'BEGIN {printf "%d", e * (1 - u) / d}') new orders a day," \
    "--retention-days $RETENTION_DAYS, sent at $RET_RATE events/s, a stream day per produce call"
  start_broker retention "$RET_PARTITIONS"
  start_node retention "$RET_DATA" --retention-days "$RETENTION_DAYS"
  echo "chunk,stream_day,day,days_held,sent,whole_apparent,whole_allocated,ids_apparent,ids_allocated,gsi_apparent,gsi_allocated,parts_apparent,parts_allocated,rest_apparent,rest_allocated,rss_kib,hwm_kib,elapsed_ms,partitions" >"$RET_CSV"
  printf '  %4s %4s %-10s %4s %9s %9s %9s %9s %9s %8s %8s\n' feed day "newest" held sent \
    "ids MiB" "gsi MiB" "parts MiB" "dir MiB" "RSS MiB" "HWM MiB"
  RET_T0=$(now_ms)
  on_step() { ret_sample "$@"; }
  local lines_per_day=$(((events + RET_DAYS - 1) / RET_DAYS))
  feed retention "$file" "$lines_per_day" "$RET_CHUNK" "$RET_RATE"
  local feeds
  feeds=$(($(wc -l <"$RET_CSV") - 1))
  note "retention: $SENT messages durable in $(($(now_ms) - RET_T0)) ms; $feeds stream days fed"
  # The last day fed against day N/2, as the largest size over the ten feeds up to each: a
  # store kept by seals is a sawtooth (it grows until a seal, drops after it), and one sample
  # per side compares phases of it, not bounds. Columns ids, gsi, parts, whole (apparent), RSS,
  # VmHWM; the single samples' ratio follows in brackets.
  local half=$((feeds / 2)) line
  line="retention, largest of feeds $((feeds - 9))-$feeds / of $((half - 9))-$half:"
  local what col a b r r1
  for what in ids:8 gsi:10 parts:12 whole:6 rss:16 hwm:17; do
    col=${what#*:}
    a=$(awk -F, -v k="$half" -v c="$col" '$1 > k - 10 && $1 <= k && $c > m {m = $c} END {print m + 0}' "$RET_CSV")
    b=$(awk -F, -v k="$feeds" -v c="$col" '$1 > k - 10 && $1 <= k && $c > m {m = $c} END {print m + 0}' "$RET_CSV")
    r=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", (a > 0 ? b / a : 0)}')
    r1=$(awk -F, -v h="$half" -v f="$feeds" -v c="$col" '$1 == h {a = $c} $1 == f {b = $c}
      END {printf "%.2f", (a > 0 ? b / a : 0)}' "$RET_CSV")
    line+=" ${what%%:*} ${r}x [${r1}x]"
    case ${what%%:*} in
    ids | gsi)
      verdict "$r" 1.25
      line+=" (<= 1.25: $V)"
      ;;
    esac
    case ${what%%:*} in
    rss | hwm) line+=" ($(mib $((a * 1024))) -> $(mib $((b * 1024))) MiB)," ;;
    *) line+=" ($(mib "$a") -> $(mib "$b") MiB)," ;;
    esac
  done
  RESULTS+=("${line%,}")
  ret_plot "$events"
  check_consumed retention
  stop_all
  first=$FIRST_DAY
  last=$(date -u -d "$FIRST_DAY + $((RET_DAYS - 1)) days" +%F)
  check_counts retention "$RET_DATA" "$file" "$SENT" "$first" "$last" --retention-days "$RETENTION_DAYS"
  rm -rf "$RET_DATA" "$file"
}

ret_plot() {
  if ! command -v gnuplot >/dev/null; then
    note "retention: no gnuplot, no PNG (the CSV is $RET_CSV)"
    return 0
  fi
  gnuplot <<EOF || note "retention: gnuplot failed (the CSV is $RET_CSV)"
set terminal pngcairo size 1000,600
set output '$OUT/retention.png'
set datafile separator ','
set key top left
set title 'dayshard run --retention-days $RETENTION_DAYS: $1 lines over $RET_DAYS days (feed: a stream day per step)'
set xlabel 'stream day fed'
set ylabel 'MiB'
set grid
plot '$RET_CSV' using 1:(\$8/1048576) with lines lw 2 title 'ids/', \
     '' using 1:(\$10/1048576) with lines lw 2 title 'gsi/', \
     '' using 1:(\$12/1048576) with lines lw 2 title 'parts/', \
     '' using 1:(\$6/1048576) with lines lw 2 title 'whole dir', \
     '' using 1:(\$16/1024) with lines lw 2 dt 2 title 'RSS', \
     '' using 1:(\$17/1024) with lines lw 2 dt 3 title 'VmHWM'
EOF
  [[ -s $OUT/retention.png ]] && note "retention: plot $OUT/retention.png"
  return 0
}

# ---- rss -------------------------------------------------------------------------------------

# rss_sample K SENT: a row once step K is durable. VmRSS splits into anonymous memory and
# file pages mapped by the node (RssAnon, RssFile): both count in VmHWM.
rss_sample() {
  local now rss hwm anon file rate
  now=$(now_ms)
  rss=$(proc_kib VmRSS)
  hwm=$(proc_kib VmHWM)
  anon=$(proc_kib RssAnon)
  file=$(proc_kib RssFile)
  rate=$((($2 - RSS_LAST_N) * 1000 / (now - RSS_LAST_T + 1)))
  echo "$2,$rss,$hwm,$anon,$file,$((now - RSS_T0)),$rate" >>"$RSS_CSV"
  printf '  %10d %9s %9s %9s %9s %8s %10d\n' "$2" "$(mib $((rss * 1024)))" "$(mib $((hwm * 1024)))" \
    "$(mib $((anon * 1024)))" "$(mib $((file * 1024)))" \
    "$(awk -v t=$((now - RSS_T0)) 'BEGIN {printf "%.1f", t / 1000}')" "$rate"
  RSS_LAST_N=$2
  RSS_LAST_T=$now
}

mode_rss() {
  local events file data step
  events=$(scaled "$RSS_EVENTS")
  step=$(scaled "$RSS_SAMPLE")
  file=$WORKDIR/rss.jsonl
  data=$WORKDIR/rss
  RSS_CSV=$OUT/rss.csv
  rm -rf "$data"
  "$DAYSHARD" generate --events "$events" --days "$RSS_DAYS" --seed "$SEED" >"$file"
  note "rss: $events new orders over $RSS_DAYS days ($(du -h "$file" | cut -f1)), chunks of" \
    "$RSS_CHUNK lines, a row per $step orders durable"
  start_broker rss "$PARTITIONS"
  start_node rss "$data"
  echo "durable,rss_kib,hwm_kib,rss_anon_kib,rss_file_kib,elapsed_ms,events_per_s" >"$RSS_CSV"
  printf '  %10s %9s %9s %9s %9s %8s %10s\n' durable "RSS MiB" "HWM MiB" "anon MiB" "file MiB" "s" "events/s"
  RSS_T0=$(now_ms)
  RSS_LAST_T=$RSS_T0
  RSS_LAST_N=0
  on_step() { rss_sample "$@"; }
  feed rss "$file" "$((step > 0 ? step : 1))" "$RSS_CHUNK" "$RSS_RATE"
  rm -f "$file"
  local t=$(($(now_ms) - RSS_T0)) hwm anon file
  hwm=$(proc_kib VmHWM)
  anon=$(proc_kib RssAnon)
  file=$(proc_kib RssFile)
  verdict "$(mib $((hwm * 1024)))" 256
  local line
  line="rss: $SENT orders durable in $(awk -v t="$t" 'BEGIN {printf "%.1f", t / 1000}') s,"
  line+=" $((SENT * 1000 / (t + 1))) events/s seen (producer and pauses between calls included);"
  line+=" VmHWM $(mib $((hwm * 1024))) MiB (<= 256: $V), at the end RssAnon $(mib $((anon * 1024)))"
  line+=" + RssFile $(mib $((file * 1024))) MiB; per step: $RSS_CSV"
  RESULTS+=("$line")
  check_consumed rss
  stop_all
  # Every line a new order: the data dir must count them all.
  local got
  got=$(day_counts "$data" "$FIRST_DAY" "$(date -u -d "$FIRST_DAY + $((RSS_DAYS - 1)) days" +%F)" |
    awk -F= '{s += $2} END {print s + 0}')
  [[ $got == "$events" ]] || die "rss: the data dir counts $got orders, $events were produced: events lost"
  note "rss: the data dir counts all $got orders"
  rm -rf "$data"
}

# ---- main ------------------------------------------------------------------------------------

RESULTS=()
header
case $MODE in
month) mode_month ;;
retention) mode_retention ;;
rss) mode_rss ;;
all) mode_month; mode_retention; mode_rss ;;
esac
echo "steady_state $MODE: results (build $DAYSHARD, SCALE $SCALE)"
for r in "${RESULTS[@]}"; do echo "  $r"; done
echo "  files in $OUT: $(find "$OUT" -maxdepth 1 -type f -printf '%f\n' | sort | tr '\n' ' ')"
if ((STRICT && MISSED > 0)); then
  echo "steady_state: $MISSED target(s) missed (STRICT=1)" >&2
  exit 3
fi
