#!/usr/bin/env bash
# kill -9 of a node in the orders model (`dayshard run --model orders --http`) in a loop, while
# an independent producer (py_producer.py: python3-kafka, acks=all, keyed by order id, its own
# retries) streams an update-heavy generated stream (`generate --updates 0.4 --duplicates 0.05
# --items 0.2`: new versions of recent orders, stale versions, retries, moves of day and
# customer) at a steady rate through the whole test. As test_kill9.sh: each cycle starts the
# node on the same data directory, waits 0.2-3 s (after its assignment; now and then after its
# start, while it joins) and kills it -9; every third cycle the broker fails a few of the
# producer's requests (it sends them again, so the topic may hold a message twice, and a
# resent version may land after a later one: the topic's order is the truth).
# At the end, the producer stopped and the node settled (a consistent read):
# - the ground truth is the topic's contents in offset order per partition (read back with
#   kcat); every ack is in it, no message is foreign, and every order's messages are in one
#   partition (the key is the order id);
# - orders_compare.py finds no difference between the node and the oracle (orders_oracle.py on
#   the topic's contents): per-day counts and exact amount sums, per-status counts, the
#   customer views of a sample (all pages), P2 records (when `dayshard order` exists), through
#   the node's HTTP (consistent=true) and through the CLI on its data directory. Exactly once:
#   a version stored twice, or one lost, changes a count, a status or versions_seen;
# - no committed Kafka offset ran ahead of durable data; no dead letters; fsck is clean.
# Randomised: prints its seed, DS_TEST_SEED replays it. Sizes: 4 cycles (cycle 1 the broker's
# NOT_LEADER_FOR_PARTITION, cycle 4 its _TRANSPORT errors; about 1.5 min on 2 shared cores),
# the same with DS_SHORT=1; DS_LONG=1 runs 100. Skips (77) while the build refuses --model
# orders.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"
started_ms=$(now_ms)
COMPARE="$ROOT/tests/integration/orders_compare.py"
ORACLE="$ROOT/tests/integration/orders_oracle.py"
if [[ ${DS_LONG:-} == 1 ]]; then
  cycles=100 rate=500 partitions=24
else
  cycles=4 rate=1500 partitions=12
fi
seed=${DS_TEST_SEED:-$RANDOM}
echo "seed=$seed cycles=$cycles (DS_TEST_SEED=$seed replays it)"
RANDOM=$seed
NODE_X=(-X session.timeout.ms=4000 -X heartbeat.interval.ms=500)
DATA=$WORK/data

if ! "$DAYSHARD" ingest --data "$WORK/probe" --model orders /dev/null >/dev/null 2>"$WORK/probe.err"; then
  if grep -q "orders model is not implemented yet" "$WORK/probe.err"; then
    echo "SKIP: this build refuses --model orders ($(cat "$WORK/probe.err"))"
    exit 77
  fi
  die "ingest --model orders of nothing: $(cat "$WORK/probe.err")"
fi

# More than the cycles can take (at most ~12 s each); the producer stops when told. Each
# partition stays well under the mock broker's ~5 MiB retention (every ack must be in the topic).
"$DAYSHARD" generate --events $((rate * (cycles * 12 + 60))) --customers 20000 --updates 0.4 \
  --duplicates 0.05 --items 0.2 --seed "$seed" >"$WORK/stream.jsonl"

start_broker --partitions "$partitions"
"$PY" "$PY_PRODUCER" "$BOOT" orders "$WORK/stream.jsonl" "$rate" "$WORK/acks.txt" "$WORK/stop" \
  >"$WORK/producer.out" 2>"$WORK/producer.log" 3>&- &
producer=$!

for ((cycle = 1; cycle <= cycles; cycle++)); do
  if ((cycle % 3 == 1)); then
    code=NOT_LEADER_FOR_PARTITION
    ((cycle % 2)) || code=_TRANSPORT
    control "errors Produce 3 $code"
  fi
  start_http_node node "$DATA" k9o --model orders
  started=$(now_ms)
  delay_ms=$((200 + RANDOM % 2800))
  if ((RANDOM % 4 == 0)); then
    when="$delay_ms ms after its start"
  else
    wait_assigned node 30 || fail "cycle $cycle: no assignment within 30 s"
    when="$delay_ms ms after its assignment, $(($(now_ms) - started)) ms after its start"
  fi
  sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  crash_node "$NODE_PID"
  echo "cycle $cycle: killed $when; $(day_counts "$DATA" | total_of) orders stored"
done
touch "$WORK/stop"

start_http_node node "$DATA" k9o --model orders
py_producer_finished "$producer"

# The ground truth: the topic, per partition in offset order.
topic_records "$WORK/topic.tsv"
sort -t$'\t' -k1,1n -k2,2n "$WORK/topic.tsv" | cut -f4 >"$WORK/values.jsonl"
read -r produced missing foreign split badkey < <("$PY" - "$WORK/topic.tsv" "$WORK/acks.txt" <<'EOF'
import collections, json, sys
topic = set()
keys = collections.Counter()
parts = collections.defaultdict(set)
badkey = 0
for line in open(sys.argv[1], "rb"):
    p, o, k, v = line.rstrip(b"\n").split(b"\t", 3)
    topic.add((int(p), int(o), k.decode()))
    keys[k.decode()] += 1
    oid = json.dumps(json.loads(v)["order_id"])
    parts[oid].add(int(p))
    badkey += k.decode() != oid
acks = [tuple(l.split(" ", 2)) for l in open(sys.argv[2]).read().splitlines()]
acks = [(int(p), int(o), k) for p, o, k in acks]
ack_keys = set(k for _, _, k in acks)
print(len(topic), sum(1 for a in acks if a not in topic), sum(1 for k in keys if k not in ack_keys),
      sum(1 for s in parts.values() if len(s) > 1), badkey)
EOF
)
note "topic: $produced messages"
expect_eq "producer acks missing from the topic" 0 "$missing"
expect_eq "topic messages the producer never sent" 0 "$foreign"
expect_eq "orders whose messages are in more than one partition" 0 "$split"
expect_eq "messages whose key is not their order id" 0 "$badkey"
"$PY" "$ORACLE" --model orders --out "$WORK/oracle.json" "$WORK/values.jsonl"
note "oracle: $(json_get "$WORK/oracle.json" 'd["totals"]')"

# Settled: a consistent count answers once the node stored everything the topic acknowledged.
deadline=$(($(now_ms) + 120000))
until code=$(curl -s -o "$WORK/settle.json" -w '%{http_code}' --max-time 15 \
  "$URL/v1/count?day=2026-01-01&consistent=true&timeout_ms=10000") && [[ $code == 200 ]]; do
  (($(now_ms) < deadline)) || break
  sleep 1
done
expect_eq "consistent count after the kills" 200 "$code"
for way in "--server $URL" "--data $DATA --dayshard $DAYSHARD"; do
  # shellcheck disable=SC2086 # way is two options and their values
  if "$PY" "$COMPARE" --oracle "$WORK/oracle.json" $way --consistent --stream "$WORK/values.jsonl" \
    --seed "$seed" --label "after $cycles kills, ${way%% *}" >"$WORK/compare.out" 2>&1; then ok; else
    fail "orders_compare ${way%% *} after $cycles kills: $(head -c 1500 "$WORK/compare.out")"
  fi
  cat "$WORK/compare.out"
done
# The node's own figures, when it exports them: the distinct orders it holds (after the restarts:
# read from its orders-by-id store) must be the oracle's.
curl -s --max-time 5 "$URL/metrics" >"$WORK/metrics.txt" || true
note "node metrics: $(grep -E '^dayshard_order' "$WORK/metrics.txt" | tr '\n' ' ' || true)"
held=$(awk '$1 == "dayshard_orders" {print $2}' "$WORK/metrics.txt")
if [[ -n $held ]]; then
  expect_eq "dayshard_orders of the node" "$(json_get "$WORK/oracle.json" 'd["totals"]["orders"]')" "$held"
fi
stop_node node "$NODE_PID"

ahead=$(grep -h 'kafka: assigned' "$WORK/node.log" |
  sed -E 's/.*\(durable here (-?[0-9]+), group (-?[0-9]+), positions (-?[0-9]+)\).*/\1 \2 \3/' |
  awk '$2 > $1 || $3 > $1' | wc -l)
expect_eq "assignments where a committed offset ran ahead of durable data" 0 "$ahead"
if [[ -n $(deadletters "$DATA") ]]; then fail "dead letters: $(head -c 300 <(deadletters "$DATA"))"; else ok; fi
if "$DAYSHARD" fsck --data "$DATA" >"$WORK/fsck.txt" 2>&1; then ok; else fail "fsck: $(head -c 300 "$WORK/fsck.txt")"; fi
stop_broker
echo "kill9 orders summary: cycles $cycles, messages $produced, orders $(json_get "$WORK/oracle.json" 'd["totals"]["orders"]'), producer retries $retried," \
  "elapsed $((($(now_ms) - started_ms) / 1000)) s (seed $seed)"
finish
