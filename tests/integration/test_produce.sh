#!/usr/bin/env bash
# `dayshard produce` against `dayshard broker`: generated events arrive exactly as `dayshard
# generate` prints them, keyed by order id, read back with kcat and with Python's kafka package;
# file and stdin input go out verbatim (bad events too, unkeyed), blank lines are skipped and
# counted; --rate paces; SIGTERM stops cleanly; a dead broker, bad flags and --help give the
# documented exit codes.
source "$(dirname "$0")/lib.sh"

command -v kcat >/dev/null || { echo "SKIP: kcat is not installed"; exit 77; }
"$PY" -c 'import kafka' 2>/dev/null || { echo "SKIP: python3-kafka is not installed"; exit 77; }

# The broker reads fault-injection commands from a fifo (fd 3) and answers on its stdout.
mkfifo "$WORK/ctl"
"$DAYSHARD" broker --partitions 12 <"$WORK/ctl" >"$WORK/broker.out" 2>"$WORK/broker.err" &
broker_pid=$!
exec 3>"$WORK/ctl"
trap 'kill "$broker_pid" 2>/dev/null || true; wait "$broker_pid" 2>/dev/null || true; rm -rf "$WORK"' EXIT
wait_printed "$WORK/broker.out" "$broker_pid"
boot=$(head -n 1 "$WORK/broker.out" 2>/dev/null || true)
if [[ -z $boot ]]; then
  echo "FAIL: the broker printed no address: $(head -c 300 "$WORK/broker.err")" >&2
  exit 1
fi

produce_to() { local topic=$1; shift; timeout 60 "$DAYSHARD" produce --brokers "$boot" --topic "$topic" "$@"; }
produce() { produce_to orders "$@"; }
# Every message of a topic as "KEY VALUE" lines (an unkeyed message has an empty KEY).
consume_kcat() { timeout 30 kcat -b "$boot" -t "$1" -C -e -q -o beginning -f '%k %s\n'; }
values() { sed 's/^[^ ]* //' | LC_ALL=C sort; }

# Checks "KEY VALUE" lines on stdin: a value listed in the file $1 (bad events) must be
# unkeyed; every other value is an event whose order_id, as text, is its key.
cat >"$WORK/check_keys.py" <<'EOF'
import json, sys
bad = set(open(sys.argv[1]).read().splitlines()) if len(sys.argv) > 1 else set()
wrong = 0
for line in sys.stdin.read().splitlines():
    key, value = line.split(" ", 1)
    expected = "" if value in bad else str(json.loads(value)["order_id"])
    if key != expected:
        wrong += 1
        if wrong <= 3:
            print("key %r for %s" % (key, value[:80]), file=sys.stderr)
print(wrong)
EOF
# Reads a whole topic with kafka-python (manual assignment, from the beginning to the end
# offsets seen at the start); prints "KEY VALUE" lines like consume_kcat.
cat >"$WORK/consume.py" <<'EOF'
import sys, time
from kafka import KafkaConsumer, TopicPartition
boot, topic = sys.argv[1], sys.argv[2]
c = KafkaConsumer(bootstrap_servers=boot, group_id=None, enable_auto_commit=False,
                  request_timeout_ms=10000, api_version_auto_timeout_ms=10000)
tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic))]
c.assign(tps)
c.seek_to_beginning(*tps)
end = c.end_offsets(tps)
deadline = time.time() + 30
out = sys.stdout
while any(c.position(tp) < end[tp] for tp in tps):
    if time.time() > deadline:
        sys.exit("timed out")
    for msgs in c.poll(timeout_ms=500).values():
        for m in msgs:
            key = m.key.decode() if m.key is not None else ""
            out.write("%s %s\n" % (key, m.value.decode()))
c.close()
EOF

# Generated events: exactly what `dayshard generate` prints, each keyed by its order id.
expect_exit "produce generated" 0 produce --events 20000 --seed 3 --profile busy-day --json
cp "$WORK/out" "$WORK/gen.json"
expect_eq "generated sent" 20000 "$(json_get "$WORK/gen.json" 'd["sent"]')"
expect_eq "generated acked" 20000 "$(json_get "$WORK/gen.json" 'd["acked"]')"
expect_eq "generated failed" 0 "$(json_get "$WORK/gen.json" 'd["failed"]')"
expect_eq "generated skipped" 0 "$(json_get "$WORK/gen.json" 'd["skipped"]')"
"$DAYSHARD" generate --events 20000 --seed 3 --profile busy-day >"$WORK/gen.jsonl"
LC_ALL=C sort "$WORK/gen.jsonl" >"$WORK/gen.sorted"
consume_kcat orders >"$WORK/kcat1.txt" && ok || fail "kcat consume"
values <"$WORK/kcat1.txt" >"$WORK/kcat1.sorted"
cmp -s "$WORK/gen.sorted" "$WORK/kcat1.sorted" && ok ||
  fail "kcat: messages differ from generate ($(wc -l <"$WORK/kcat1.sorted") lines read)"
expect_eq "kcat keys are order ids" 0 "$("$PY" "$WORK/check_keys.py" <"$WORK/kcat1.txt")"

py_topic=orders
if ! "$PY" -c 'import lz4' 2>/dev/null; then
  # kafka-python cannot read lz4 batches without python3-lz4: read a gzip copy instead.
  echo "note: python3-lz4 missing, kafka-python reads a gzip-compressed copy"
  py_topic=orders-gzip
  expect_exit "produce gzip copy" 0 produce_to orders-gzip --events 20000 --seed 3 \
    --profile busy-day -X compression.codec=gzip
fi
timeout 60 "$PY" "$WORK/consume.py" "$boot" "$py_topic" >"$WORK/py1.txt" && ok || fail "python consume"
values <"$WORK/py1.txt" >"$WORK/py1.sorted"
cmp -s "$WORK/gen.sorted" "$WORK/py1.sorted" && ok ||
  fail "kafka-python: messages differ from generate ($(wc -l <"$WORK/py1.sorted") lines read)"
expect_eq "kafka-python keys are order ids" 0 "$("$PY" "$WORK/check_keys.py" <"$WORK/py1.txt")"

# An order stream: updates, duplicates and items arrive as `generate` prints them.
order_flags=(--events 3000 --seed 5 --updates 0.3 --duplicates 0.05 --items 0.2)
expect_exit "produce an order stream" 0 produce_to order-stream "${order_flags[@]}" --json
"$DAYSHARD" generate "${order_flags[@]}" | LC_ALL=C sort >"$WORK/orders.sorted"
consume_kcat order-stream | values >"$WORK/orders.kcat"
cmp -s "$WORK/orders.sorted" "$WORK/orders.kcat" && ok ||
  fail "order stream: messages differ from generate ($(wc -l <"$WORK/orders.kcat") lines read)"
grep -q '"items":' "$WORK/orders.kcat" && grep -q '"version":' "$WORK/orders.kcat" && ok ||
  fail "order stream: no items or no versions sent"

# A file and stdin: every non-blank line is sent verbatim, blank lines skipped. A bad event is
# keyed by its order_id when that is its first member and valid (file-bad-2), else unkeyed.
printf '%s\n' 'not json at all' '{"customer_id": 5, "order_id": "file-bad-1"}' \
  'stdin {garbage' '{"order_id": 1.5, "customer_id": 1, "ts": 0}' >"$WORK/bad.txt"
{
  "$DAYSHARD" generate --events 50 --seed 7
  sed -n 1,2p "$WORK/bad.txt"
  echo '{"order_id": "file-bad-2", "customer_id": 5}'
  printf '\n   \n'
  echo '{"order_id":"file-s-1","customer_id":"c-1","ts":"2026-01-21T10:00:00Z","amount":1.5}'
} >"$WORK/file.jsonl"
expect_exit "produce file" 0 produce --json "$WORK/file.jsonl"
expect_eq "file sent/skipped" "54 2 54" \
  "$(json_get "$WORK/out" '"%d %d %d" % (d["sent"], d["skipped"], d["acked"])')"
{
  "$DAYSHARD" generate --events 40 --seed 8
  sed -n 3,4p "$WORK/bad.txt"
  printf '\n'
  printf '%s' '{"order_id":"stdin-s-1","customer_id":2,"order_date":"2026-01-22"}'
} >"$WORK/stdin.jsonl"
produce_stdin() { produce --json - <"$WORK/stdin.jsonl"; }
expect_exit "produce stdin" 0 produce_stdin
expect_eq "stdin sent/skipped" "43 1 43" \
  "$(json_get "$WORK/out" '"%d %d %d" % (d["sent"], d["skipped"], d["acked"])')"
consume_kcat orders >"$WORK/kcat2.txt" && ok || fail "kcat consume after file and stdin"
cat "$WORK/gen.jsonl" "$WORK/file.jsonl" "$WORK/stdin.jsonl" | grep -v '^ *$' | LC_ALL=C sort \
  >"$WORK/all.sorted"
values <"$WORK/kcat2.txt" >"$WORK/kcat2.sorted"
cmp -s "$WORK/all.sorted" "$WORK/kcat2.sorted" && ok ||
  fail "file and stdin lines not all read back verbatim ($(wc -l <"$WORK/kcat2.sorted") lines)"
expect_eq "file and stdin keys" 0 "$("$PY" "$WORK/check_keys.py" "$WORK/bad.txt" <"$WORK/kcat2.txt")"

# Generator options make no sense with an input file.
expect_exit "generator option with a file" 2 produce --events 5 "$WORK/file.jsonl"
expect_exit "missing input file" 1 produce "$WORK/nope.jsonl"

# --rate 5000 for 10000 events takes about two seconds.
start=$(date +%s%N)
expect_exit "produce paced" 0 produce --rate 5000 --events 10000 --json
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
((elapsed_ms >= 1500 && elapsed_ms <= 6000)) && ok || fail "--rate 5000 --events 10000 took ${elapsed_ms} ms"
expect_eq "paced acked" 10000 "$(json_get "$WORK/out" 'd["acked"]')"

# SIGTERM stops sending; what was sent is flushed and acknowledged: exit 0.
"$DAYSHARD" produce --brokers "$boot" --topic orders --rate 2000 --events 1000000 \
  --flush-timeout-ms 20000 --json >"$WORK/term.json" 2>"$WORK/term.err" &
producer_pid=$!
sleep 1
kill -TERM "$producer_pid"
set +e
wait "$producer_pid"
rc=$?
set -e
expect_eq "SIGTERM exit" 0 "$rc"
expect_eq "SIGTERM: all sent acked, stopped early" "True True" \
  "$(json_get "$WORK/term.json" '"%s %s" % (d["sent"] == d["acked"], 0 < d["sent"] < 1000000)')"

# No broker: the events are never acknowledged; exit 1 with the reason after the flush timeout.
expect_exit "dead broker" 1 timeout 30 "$DAYSHARD" produce --brokers 127.0.0.1:1 --topic orders \
  --flush-timeout-ms 2000 --events 10 --json
grep -q "not acknowledged" "$WORK/err" && ok || fail "dead broker reason: $(tail -n 2 "$WORK/err")"
expect_eq "dead broker counts" "10 0 10" \
  "$(json_get "$WORK/out" '"%d %d %d" % (d["sent"], d["acked"], d["failed"])')"

# A first SIGINT stops sending, a second one stops the wait for a broker that never answers.
"$DAYSHARD" produce --brokers 127.0.0.1:1 --topic orders --events 10 >"$WORK/int.out" \
  2>"$WORK/int.err" &
producer_pid=$!
sleep 0.5
kill -INT "$producer_pid"
sleep 0.5
start=$(date +%s%N)
kill -INT "$producer_pid"
set +e
wait "$producer_pid"
rc=$?
set -e
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
expect_eq "two SIGINTs: exit 1" 1 "$rc"
((elapsed_ms < 5000)) && ok || fail "a second SIGINT took ${elapsed_ms} ms to stop the wait"
grep -q "interrupted" "$WORK/int.err" && ok || fail "two SIGINTs reason: $(tail -n 1 "$WORK/int.err")"

# --key: every mode on generated events and on a file (integer and string ids, ts and
# order_date), read back with each message's Kafka partition; keys are checked against values.
cat >"$WORK/check_key_mode.py" <<'EOF'
import datetime, json, re, sys
mode, shards = sys.argv[1], int(sys.argv[2])
bad = set(open(sys.argv[3]).read().splitlines()) if len(sys.argv) > 3 else set()
wrong = 0
day_partitions = {}
partitions = set()
def day_of(e):
    if "order_date" in e:
        return e["order_date"]
    ts = e["ts"]
    if isinstance(ts, int):
        return datetime.datetime.fromtimestamp(ts // 1000, datetime.timezone.utc).strftime("%Y-%m-%d")
    return ts[:10]
def shard_of(order_id, s):
    if isinstance(order_id, int):
        return order_id % s
    h = 14695981039346656037
    for b in order_id.encode():
        h = ((h ^ b) * 1099511628211) % (1 << 64)
    return h % s
for line in sys.stdin.read().splitlines():
    partition, key, value = line.split(" ", 2)
    partitions.add(partition)
    if value in bad:
        expected = ""
    else:
        e = json.loads(value)
        day = day_of(e)
        if mode == "customer":
            expected = str(e["customer_id"])
        elif mode == "day":
            expected = day
            if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", key):
                wrong += 1
            day_partitions.setdefault(day, set()).add(partition)
        else:
            m = re.fullmatch(r"DAY#(\d{4}-\d{2}-\d{2})#(\d+)", key)
            if not m or int(m.group(2)) >= shards:
                wrong += 1
            expected = "DAY#%s#%d" % (day, shard_of(e["order_id"], shards))
    if key != expected:
        wrong += 1
        if wrong <= 3:
            print("key %r for %s, expected %r" % (key, value[:80], expected), file=sys.stderr)
split_days = sorted(d for d, p in day_partitions.items() if len(p) > 1)
if split_days:
    print("days in more than one Kafka partition: %s" % split_days[:3], file=sys.stderr)
print("%d %d %d" % (wrong, len(split_days), len(partitions)))
EOF
consume_partitions() { timeout 30 kcat -b "$boot" -t "$1" -C -e -q -o beginning -f '%p %k %s\n'; }
"$DAYSHARD" generate --events 30 --seed 12 --profile busy-day >"$WORK/keys.jsonl"
printf '%s\n' '{"order_id":"k-1","customer_id":"c-9","ts":"2026-01-05T23:59:59.999Z"}' \
  '{"order_id":"k-2","customer_id":77,"order_date":"2026-01-06"}' \
  '{"order_id":3000000001,"customer_id":"c-1","ts":1768996800000}' >>"$WORK/keys.jsonl"
for mode in customer day partition; do
  expect_exit "produce --key $mode" 0 produce_to "keys-$mode" --key "$mode" --shards 3 --json \
    --events 3000 --seed 12 --profile busy-day
  expect_eq "--key $mode acked" 3000 "$(json_get "$WORK/out" 'd["acked"]')"
  expect_exit "produce --key $mode file" 0 produce_to "keys-$mode" --key "$mode" --shards 3 \
    "$WORK/keys.jsonl"
  consume_partitions "keys-$mode" >"$WORK/keys-$mode.txt" && ok || fail "kcat consume keys-$mode"
  expect_eq "--key $mode: messages" 3033 "$(wc -l <"$WORK/keys-$mode.txt")"
  read -r wrong split used < <("$PY" "$WORK/check_key_mode.py" "$mode" 3 <"$WORK/keys-$mode.txt")
  expect_eq "--key $mode: wrong keys" 0 "$wrong"
  expect_eq "--key $mode: days split over Kafka partitions" 0 "$split"
  ((used > 1)) && ok || fail "--key $mode: only $used Kafka partition(s) used"
done
# File input with --key day: a bad event (not decodable as a whole) goes out unkeyed, even when
# its order_id could be read (file-bad-2 has no ts).
expect_exit "produce --key day bad lines" 0 produce_to keys-bad --key day "$WORK/file.jsonl"
consume_partitions keys-bad >"$WORK/keys-bad.txt" && ok || fail "kcat consume keys-bad"
{
  cat "$WORK/bad.txt"
  echo '{"order_id": "file-bad-2", "customer_id": 5}'
} >"$WORK/bad-day.txt"
read -r wrong split used < <("$PY" "$WORK/check_key_mode.py" day 4 "$WORK/bad-day.txt" \
  <"$WORK/keys-bad.txt")
expect_eq "--key day: bad lines unkeyed, the others by day" 0 "$wrong"
expect_exit "unknown --key" 2 produce --key shard --events 1
grep -q "unknown --key 'shard': expected order, customer, day or partition" "$WORK/err" && ok ||
  fail "unknown --key message: $(head -n 1 "$WORK/err")"
expect_exit "--shards 0" 2 produce --key partition --shards 0 --events 1
expect_exit "--shards 1025" 2 produce --key partition --shards 1025 --events 1
expect_exit "flash-sale without --rate" 2 produce --profile flash-sale --events 1000
grep -q "flash-sale needs a rate" "$WORK/err" && ok || fail "flash-sale reason: $(head -n 1 "$WORK/err")"
expect_exit "flash-sale too short" 2 produce --profile flash-sale --rate 1000 --events 1000
grep -q "needs at least 195000" "$WORK/err" && ok || fail "flash-sale length: $(head -n 1 "$WORK/err")"

# Open-loop pacing: 10000 events at 2000/s are due over 5 s. A producer stopped (SIGSTOP) for
# 2 s falls 2 s behind, then sends at once until it has caught up: it still ends after about 5 s
# (the old closed-loop pacing took 7), reports how far behind it fell and warns.
"$DAYSHARD" produce --brokers "$boot" --topic orders --rate 2000 --events 10000 --json \
  >"$WORK/stall.json" 2>"$WORK/stall.err" &
producer_pid=$!
start=$(date +%s%N)
sleep 1
kill -STOP "$producer_pid"
sleep 2
kill -CONT "$producer_pid"
set +e
wait "$producer_pid"
rc=$?
set -e
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
expect_eq "stalled producer exit" 0 "$rc"
# Closed-loop pacing takes at least 7 s (the 5 s schedule after the 2 s stall); up to 6.9 s
# leaves a busy machine room to catch up.
((elapsed_ms >= 4500 && elapsed_ms <= 6900)) && ok ||
  fail "a producer stalled 2 s in a 5 s schedule took ${elapsed_ms} ms"
expect_eq "stalled producer: acked, behind 1.5..4 s" "10000 True" \
  "$(json_get "$WORK/stall.json" '"%d %s" % (d["acked"], 1.5 <= d["behind_max_s"] <= 4.0)')"
grep -q "fell .* s behind its schedule: the producer itself, not the pipeline" "$WORK/stall.err" &&
  ok || fail "no behind-schedule warning: $(tail -n 2 "$WORK/stall.err")"

# Usage errors and help.
expect_exit "produce --help" 0 "$DAYSHARD" produce --help
grep -q "usage: dayshard produce" "$WORK/out" && ok || fail "produce --help text"
expect_exit "help produce" 0 "$DAYSHARD" help produce
expect_exit "no --brokers" 2 "$DAYSHARD" produce --topic orders
expect_exit "no --topic" 2 "$DAYSHARD" produce --brokers "$boot"
expect_exit "bad --rate" 2 produce --rate fast
expect_exit "bad --profile" 2 produce --profile weekend
expect_exit "bad --flush-timeout-ms" 2 produce --flush-timeout-ms 0
expect_exit "unknown option" 2 produce --frobnicate
expect_exit "-X without =" 2 produce -X linger.ms
expect_exit "-X unknown property" 2 produce -X no.such.property=1 --events 1
expect_exit "two inputs" 2 produce "$WORK/file.jsonl" "$WORK/file.jsonl"
printf 'kafka.linger.ms=2\nshard=4\n' >"$WORK/bad.properties"
expect_exit "--config with a non-kafka key" 2 produce --config "$WORK/bad.properties"
printf '# producer settings\nkafka.linger.ms = 2\n' >"$WORK/good.properties"
expect_exit "--config" 0 produce --config "$WORK/good.properties" --events 100 --json
expect_eq "--config acked" 100 "$(json_get "$WORK/out" 'd["acked"]')"

# A fatal producer error (the idempotent producer cannot get its producer id) stops the run.
echo "errors 22 1 31" >&3
for _ in $(seq 50); do grep -q '^ok errors' "$WORK/broker.out" && break; sleep 0.1; done
expect_exit "fatal producer error" 1 produce --events 100 --flush-timeout-ms 5000
grep -q "fatal producer error" "$WORK/err" && ok || fail "fatal error reason: $(tail -n 2 "$WORK/err")"

finish
