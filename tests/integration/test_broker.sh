#!/usr/bin/env bash
# `dayshard broker`: librdkafka's mock cluster as seen by real clients (kcat and Python's kafka
# package, both ways round), the topic it creates, --listen on a chosen port and a taken one,
# usage errors, fault-injection commands on standard input, and a clean exit 0 on SIGTERM.
# Every wait is bounded; every broker started here is killed when the script exits.
source "$(dirname "$0")/lib.sh"

BROKER_PIDS=()
cleanup() {
  local pid
  for pid in "${BROKER_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

die() { fail "$*"; finish || true; exit 1; }

# start_broker NAME INPUT [ARGS...]: starts a broker with stdin from INPUT; sets PID and BOOT
# (the first line of its standard output, which must come within 10 s).
start_broker() {
  local name=$1 input=$2
  shift 2
  "$DAYSHARD" broker "$@" <"$input" >"$WORK/$name.out" 2>"$WORK/$name.err" 3>&- &
  PID=$!
  BROKER_PIDS+=("$PID")
  wait_printed "$WORK/$name.out" "$PID"
  BOOT=$(head -n1 "$WORK/$name.out")
  [[ -z $BOOT ]] || return 0
  die "broker $name printed no bootstrap address ($(head -c 300 "$WORK/$name.err"))"
}

# stop_broker NAME PID: SIGTERM, then expects exit 0 within 5 s (a watchdog kills it after).
stop_broker() {
  local name=$1 pid=$2 rc start
  start=$(date +%s%N)
  kill -TERM "$pid"
  (sleep 5 && kill -KILL "$pid" 2>/dev/null) &
  local watchdog=$!
  set +e
  wait "$pid"
  rc=$?
  set -e
  kill "$watchdog" 2>/dev/null || true
  wait "$watchdog" 2>/dev/null || true
  expect_eq "broker $name exit status after SIGTERM" 0 "$rc"
  local ms=$((($(date +%s%N) - start) / 1000000))
  if ((ms < 5000)); then ok; else fail "broker $name took $ms ms to stop"; fi
}

# control NAME COMMAND: writes COMMAND to the broker's fifo (fd 3); sets ANSWER to the next
# line of its standard output (empty after 5 s without one).
control() {
  local name=$1 before
  before=$(wc -l <"$WORK/$name.out")
  echo "$2" >&3
  ANSWER=""
  for _ in $(seq 100); do
    if (($(wc -l <"$WORK/$name.out") > before)); then
      ANSWER=$(sed -n "$((before + 1))p" "$WORK/$name.out")
      return 0
    fi
    sleep 0.05
  done
}

free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# py_produce BOOT TOPIC N: N keyed messages "py-I" -> "value-I"; prints "acked partitions".
py_produce() {
  timeout 30 "$PY" - "$@" <<'EOF'
import sys
from kafka import KafkaProducer
boot, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = KafkaProducer(bootstrap_servers=boot, key_serializer=str.encode, value_serializer=str.encode,
                  acks="all", max_block_ms=10000, request_timeout_ms=10000)
futures = [p.send(topic, key="py-%d" % i, value="value-%d" % i) for i in range(n)]
p.flush(timeout=20)
partitions = {f.get(timeout=10).partition for f in futures}
p.close(timeout=5)
print(len(futures), len(partitions))
EOF
}

# py_consume BOOT TOPIC N: reads in a consumer group until N distinct keys (or 20 s), commits;
# prints "distinct-keys kcat-keys-with-matching-values".
py_consume() {
  timeout 30 "$PY" - "$@" <<'EOF'
import sys, time
from kafka import KafkaConsumer
boot, topic, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = KafkaConsumer(topic, bootstrap_servers=boot, group_id="it-broker",
                  auto_offset_reset="earliest", enable_auto_commit=False)
seen = {}
deadline = time.time() + 20
while len(seen) < want and time.time() < deadline:
    for records in c.poll(timeout_ms=500).values():
        for m in records:
            seen[m.key] = m.value
c.commit()
c.close()
print(len(seen), sum(1 for k, v in seen.items() if k.startswith(b"kc-") and v == b"kcat-" + k[3:]))
EOF
}

# kcat_produce BOOT TOPIC N: N keyed messages "kc-I" -> "kcat-I".
kcat_produce() {
  seq 1 "$3" | awk '{print "kc-" $1 ":kcat-" $1}' | timeout 20 kcat -b "$1" -t "$2" -P -K:
}

# kcat_consume BOOT TOPIC: every message from the beginning as "key value", then exits.
kcat_consume() {
  timeout 20 kcat -b "$1" -t "$2" -C -e -o beginning -q -f '%k %s\n'
}

# ---- usage ------------------------------------------------------------------------------------
expect_exit "--help" 0 "$DAYSHARD" broker --help
expect_eq "--help text" 1 "$(grep -c '^usage: dayshard broker' "$WORK/out")"
for bad in "--partitions 0" "--partitions 1025" "--brokers 0" "--brokers 17" "--bogus" \
  "stray" "--listen nohost:1" "--listen 127.0.0.1" "--listen 127.0.0.1:70000" \
  "--topic a/b" "--partitions"; do
  # shellcheck disable=SC2086 # split on purpose
  expect_exit "broker $bad" 2 timeout 10 "$DAYSHARD" broker $bad </dev/null
done

# ---- the default broker: Python -> kcat and kcat -> Python -----------------------------------
mkfifo "$WORK/ctl"
exec 3<>"$WORK/ctl"
start_broker a "$WORK/ctl"
A_PID=$PID A_BOOT=$BOOT
expect_eq "one broker on 127.0.0.1" 1 "$(grep -cE '^127\.0\.0\.1:[0-9]+$' <<<"$A_BOOT")"
expect_eq "orders has 12 partitions" 1 \
  "$(timeout 10 kcat -b "$A_BOOT" -L -t orders | grep -c 'topic "orders" with 12 partitions')"

expect_eq "python producer: acked, partitions" "1000 12" "$(py_produce "$A_BOOT" orders 1000)"
kcat_consume "$A_BOOT" orders >"$WORK/a.consumed"
expect_eq "kcat reads back python's messages" 1000 \
  "$(awk '{k = $1; v = $2; sub(/^py-/, "", k); sub(/^value-/, "", v)} k == v' \
    "$WORK/a.consumed" | sort -u | wc -l)"

kcat_produce "$A_BOOT" orders 1000
expect_eq "python consumer group reads both" "2000 1000" "$(py_consume "$A_BOOT" orders 2000)"

control a "frobnicate 1"
expect_eq "unknown command answered" "error:" "${ANSWER%% *}"
control a "down 2"
expect_eq "broker id out of range answered" "error: broker id '2' is not 1..1" "$ANSWER"

# ---- --listen on a chosen port, another topic, stdin at EOF ----------------------------------
port=$(free_port)
start_broker b /dev/null --listen "127.0.0.1:$port" --partitions 3 --topic t2
B_PID=$PID
expect_eq "--listen: bootstrap address" "127.0.0.1:$port" "$BOOT"
expect_eq "t2 has 3 partitions" 1 \
  "$(timeout 10 kcat -b "127.0.0.1:$port" -L -t t2 | grep -c 'topic "t2" with 3 partitions')"
kcat_produce "127.0.0.1:$port" t2 50
expect_eq "kcat round trip on t2 (after stdin EOF)" 50 \
  "$(kcat_consume "127.0.0.1:$port" t2 | grep -c '^kc-')"
expect_exit "taken port" 1 timeout 10 "$DAYSHARD" broker --listen "127.0.0.1:$port" </dev/null
expect_eq "taken port: reason" 1 "$(grep -c 'address in use' "$WORK/err")"

# ---- three brokers, one taken down and brought back ------------------------------------------
stop_broker a "$A_PID"
start_broker c "$WORK/ctl" --brokers 3
C_PID=$PID C_BOOT=$BOOT
expect_eq "three bootstrap addresses" 3 "$(tr ',' '\n' <<<"$C_BOOT" | grep -cE '^127\.0\.0\.1:[0-9]+$')"
control c "down 1"
expect_eq "down 1" "ok down 1" "$ANSWER"
control c "rtt 2 5"
expect_eq "rtt 2 5" "ok rtt 2 5" "$ANSWER"
control c "up 1"
expect_eq "up 1" "ok up 1" "$ANSWER"
control c "rtt 2 0"
expect_eq "rtt 2 0" "ok rtt 2 0" "$ANSWER"
kcat_produce "$C_BOOT" orders 100
expect_eq "python producer after up" "100 12" "$(py_produce "$C_BOOT" orders 100)"
expect_eq "kcat reads all after up" 200 "$(kcat_consume "$C_BOOT" orders | grep -cE '^(kc|py)-')"

stop_broker b "$B_PID"
stop_broker c "$C_PID"
exec 3>&-
finish
