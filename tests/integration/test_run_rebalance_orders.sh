#!/usr/bin/env bash
# Orders across a rebalance: two `dayshard run --model orders` nodes in one consumer
# group, each with its own data directory, on an update stream whose orders have versions
# spread over the whole stream (`generate --updates 0.4 --duplicates 0.05`), keyed by order id.
#   1. node A alone takes the first 40% of the stream;
#   2. node B joins while the next 30% is being sent: A gives the partitions it loses up (their
#      orders leave its directory, storage_release_source), B reads each of them from its start
#      (the orders of a partition are the state of its whole history); updates of orders A
#      created arrive at B;
#   3. once both answer consistent reads: each node holds exactly the orders of the partitions
#      it is assigned (the oracle of those partitions' messages), and A + B equal the oracle of
#      the whole topic: counts, sums and per-status counts, nothing counted twice;
#   4. A stops (it keeps its data, as a stopped node does) and the last 30% is sent: B takes A's
#      partitions over from their start and equals the oracle of the whole topic;
# and fsck (with the retractions' balance) is clean on both directories. Keying is checked from
# the topic itself (kcat). Randomised: prints its seed, DS_TEST_SEED replays it.
# Sizes: 30,000 events (part 2 at 1,500/s: 6 s, B joins 1-3 s into it); DS_SHORT=1 20,000
# (part 2 at 1,000/s); DS_LONG=1 200,000 at 3,000/s. The steps are the same in every tier; each
# comparison samples 60 customers and 60 orders.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"
COMPARE="$ROOT/tests/integration/orders_compare.py"
ORACLE="$ROOT/tests/integration/orders_oracle.py"
seed=${DS_TEST_SEED:-$RANDOM}
echo "seed=$seed"
RANDOM=$seed
events=30000 rate=1500
if [[ ${DS_SHORT:-} == 1 ]]; then events=20000 rate=1000; fi
if [[ ${DS_LONG:-} == 1 ]]; then events=200000 rate=3000; fi

# stamp: each line of stdin prefixed with the time it was read (seconds, microseconds).
stamp() { while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done; }

# start_stamped NAME DATA: `dayshard run --model orders --http` in the group, its stderr stamped
# into $WORK/NAME.log. Sets NODE_PID and URL.
start_stamped() {
  local name=$1 data=$2
  LOG_RUNS=$((LOG_RUNS + 1))
  echo "==== run $LOG_RUNS at $(date +%T.%N)" >>"$WORK/$name.log"
  : >"$WORK/$name.out"
  DS_LOG=info "$DAYSHARD" run --brokers "$BOOT" --topic orders --group rb --data "$data" \
    --model orders --http 127.0.0.1:0 "${NODE_X[@]}" </dev/null >"$WORK/$name.out" \
    2> >(stamp >>"$WORK/$name.log") 3>&- &
  NODE_PID=$!
  wait_printed "$WORK/$name.out" "$NODE_PID"
  URL=http://$(head -1 "$WORK/$name.out")
  [[ $URL == http://127.0.0.1:* ]] || die "node $name printed no HTTP address"
}

"$DAYSHARD" generate --events "$events" --customers 5000 --updates 0.4 --duplicates 0.05 \
  --items 0.1 --seed "$seed" >"$WORK/stream.jsonl"
first=$((events * 4 / 10))
second=$((events * 3 / 10))
head -n "$first" "$WORK/stream.jsonl" >"$WORK/part1.jsonl"
sed -n "$((first + 1)),$((first + second))p" "$WORK/stream.jsonl" >"$WORK/part2.jsonl"
tail -n +"$((first + second + 1))" "$WORK/stream.jsonl" >"$WORK/part3.jsonl"
start_broker --partitions 12
start_stamped a "$WORK/a"
A_PID=$NODE_PID
A_URL=$URL
wait_assigned a 30 || fail "node A: no assignment within 30 s"
ds_produce "$WORK/part1.jsonl" >"$WORK/produce1.out" 2>&1 || fail "produce part 1"

# consistent URL: waits (90 s at most) until the node answers a consistent count.
consistent() {
  local url=$1 code deadline=$(($(now_ms) + 90000))
  until code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 15 \
    "$url/v1/count?day=2026-01-01&consistent=true&timeout_ms=10000") && [[ $code == 200 ]]; do
    (($(now_ms) < deadline)) || break
    sleep 1
  done
  echo "$code"
}
# assigned URL: the Kafka partitions the node reads now (those with a lag in /metrics).
assigned() {
  curl -s --max-time 10 "$1/metrics" | sed -n 's/^dayshard_consumer_lag_messages{partition="\([0-9]*\)"}.*/\1/p' |
    sort -n | tr '\n' ' '
}
expect_eq "node A alone: consistent" 200 "$(consistent "$A_URL")"

# 2: B joins while part 2 is on its way.
PRODUCE_SECONDS=120 ds_produce "$WORK/part2.jsonl" --rate "$rate" >"$WORK/produce2.out" 2>&1 &
producer=$!
sleep "$((1 + RANDOM % 2)).$((RANDOM % 10))"
start_stamped b "$WORK/b"
B_PID=$NODE_PID
B_URL=$URL
wait_assigned b 30 || fail "node B: no assignment within 30 s"
wait "$producer" || fail "producer: $(tail -c 300 "$WORK/produce2.out")"

# 3: both settled. The group may still be rebalancing a moment after B's first assignment:
# the nodes' assignments must cover the 12 partitions exactly once.
for _ in $(seq 60); do
  parts_a=$(assigned "$A_URL")
  parts_b=$(assigned "$B_URL")
  (($(wc -w <<<"$parts_a $parts_b") == 12)) && [[ -n $parts_a && -n $parts_b ]] && break
  sleep 1
done
note "assigned: A [$parts_a] B [$parts_b]"
expect_eq "partitions assigned once each" 12 "$(echo "$parts_a $parts_b" | tr ' ' '\n' | grep -c .)"
expect_eq "node A: consistent" 200 "$(consistent "$A_URL")"
expect_eq "node B: consistent" 200 "$(consistent "$B_URL")"
expect_eq "the same assignment after the consistent reads" "$parts_a|$parts_b" \
  "$(assigned "$A_URL")|$(assigned "$B_URL")"
log_run_has a "orders leave this node" && ok || fail "node A logged no partition given up"
topic_records "$WORK/topic2.tsv"
expect_eq "messages in the topic after part 2" "$((first + second))" "$(wc -l <"$WORK/topic2.tsv")"

# values FILE [PARTITION...]: the messages of those partitions (all without any), in offset
# order per partition, as JSON lines.
values() {
  local file=$1
  shift
  "$PY" - "$file" "$@" <<'EOF2'
import sys
keep = set(sys.argv[2:])
rows = []
for line in open(sys.argv[1], "rb"):
    p, o, k, v = line.rstrip(b"\n").split(b"\t", 3)
    if not keep or p.decode() in keep:
        rows.append((int(p), int(o), v))
sys.stdout.buffer.write(b"".join(v + b"\n" for _, _, v in sorted(rows)))
EOF2
}
# The CLI way starts a process per page and per order (each opens the data directory and loads
# its orders-by-id store): a sample of 60 customers and 60 orders; the per-day counts, sums and
# statuses are compared whole.
compare() { # compare NAME ORACLE_INPUT DATA
  "$PY" "$ORACLE" --model orders --out "$WORK/$1.oracle.json" "$2"
  if "$PY" "$COMPARE" --oracle "$WORK/$1.oracle.json" --data "$3" --dayshard "$DAYSHARD" \
    --customers 60 --orders 60 --seed "$seed" --label "$1" >"$WORK/$1.compare" 2>&1; then ok; else
    fail "$1: $(head -c 1500 "$WORK/$1.compare")"
  fi
  tail -1 "$WORK/$1.compare"
}
# shellcheck disable=SC2086 # the partition lists split on purpose
values "$WORK/topic2.tsv" $parts_a >"$WORK/a.jsonl"
# shellcheck disable=SC2086
values "$WORK/topic2.tsv" $parts_b >"$WORK/b.jsonl"
compare "node A = its partitions" "$WORK/a.jsonl" "$WORK/a"
compare "node B = its partitions" "$WORK/b.jsonl" "$WORK/b"
values "$WORK/topic2.tsv" >"$WORK/all2.jsonl"
"$PY" "$ORACLE" --model orders --out "$WORK/whole2.json" "$WORK/all2.jsonl"
# 3: the contract: A + B equal the oracle of the whole topic.
"$PY" - "$DAYSHARD" "$WORK/whole2.json" "$WORK/a" "$WORK/b" >"$WORK/union.txt" <<'EOF'
import collections, json, subprocess, sys
binary, whole, da, db = sys.argv[1:5]
whole = json.load(open(whole))
def units(t):
    w, _, f = t.partition(".")
    return (-1 if w.startswith("-") else 1) * (abs(int(w)) * 10000 + int((f + "0000")[:4]))
days = sorted(whole["days"])
statuses = sorted({s for v in whole["days"].values() for s in v["by_status"]})
def node_counts(d):
    out = collections.Counter()
    for status in [None] + statuses:
        args = [binary, "count", "--data", d, "--day", days[0], "--to", days[-1], "--by", "day", "--json"]
        if status is not None:
            args += ["--status", status]
        for g in json.loads(subprocess.run(args, check=True, capture_output=True).stdout)["groups"]:
            out[(g["key"], status, "count")] += g["count"]
            if status is None:
                out[(g["key"], status, "amount")] += units(g["amount_sum"])
    return out
union = node_counts(da) + node_counts(db)
want = collections.Counter()
for d, v in whole["days"].items():
    want[(d, None, "count")] += v["count"]
    want[(d, None, "amount")] += units(v["amount_sum"])
    for s, n in v["by_status"].items():
        want[(d, s, "count")] += n
diff = [(k, union[k], want[k]) for k in sorted(set(union) | set(want), key=str) if union[k] != want[k]]
total = lambda c: sum(v for (d, s, w), v in c.items() if s is None and w == "count")
print("union_orders", total(union), "oracle_orders", total(want), "differences", len(diff))
for k, u, w in diff[:6]:
    print("  %s %s %s: A+B %d, oracle %d" % (k[0], "all" if k[1] is None else k[1], k[2], u, w))
EOF
cat "$WORK/union.txt"
read -r _ union_orders _ oracle_orders _ differences < <(head -1 "$WORK/union.txt")
expect_eq "A + B: orders counted = orders in the topic" "$oracle_orders" "$union_orders"
expect_eq "A + B: figures that differ from the oracle of the topic" 0 "$differences"

# 4: A stops; B takes its partitions over from their start while part 3 arrives.
note "node A stops"
stop_node a "$A_PID"
ds_produce "$WORK/part3.jsonl" --rate "$rate" >"$WORK/produce3.out" 2>&1 || fail "produce part 3"
for _ in $(seq 60); do
  (($(wc -w <<<"$(assigned "$B_URL")") == 12)) && break
  sleep 1
done
expect_eq "node B reads every partition" 12 "$(wc -w <<<"$(assigned "$B_URL")")"
expect_eq "node B alone: consistent" 200 "$(consistent "$B_URL")"
topic_records "$WORK/topic.tsv"
expect_eq "messages in the topic" "$events" "$(wc -l <"$WORK/topic.tsv")"
"$PY" - "$WORK/topic.tsv" >"$WORK/keys.txt" <<'EOF'
import collections, json, sys
parts_of = collections.defaultdict(set)
badkey = 0
for line in open(sys.argv[1], "rb"):
    p, o, k, v = line.rstrip(b"\n").split(b"\t", 3)
    oid = json.dumps(json.loads(v)["order_id"])
    parts_of[oid].add(int(p))
    badkey += k.decode() != oid
print("split_keys", sum(1 for s in parts_of.values() if len(s) > 1), "bad_keys", badkey)
EOF
expect_eq "keying: orders in more than one partition, messages not keyed by their order" \
  "split_keys 0 bad_keys 0" "$(cat "$WORK/keys.txt")"
values "$WORK/topic.tsv" >"$WORK/all.jsonl"
compare "node B = the whole topic" "$WORK/all.jsonl" "$WORK/b"
stop_node b "$B_PID"
stop_broker
for d in a b; do
  if "$DAYSHARD" fsck --data "$WORK/$d" >"$WORK/fsck.txt" 2>&1; then ok; else fail "fsck $d: $(head -c 300 "$WORK/fsck.txt")"; fi
done
finish
