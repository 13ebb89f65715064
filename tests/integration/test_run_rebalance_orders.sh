#!/usr/bin/env bash
# Two `dayshard run --model orders` nodes in one consumer group, each with its own data
# directory (as test_run_group.sh), on an update stream whose orders have versions spread over
# seconds (`generate --updates 0.4 --duplicates 0.05`; an update follows its order by ~1,800
# lines at the median, some by ~20,000), sent by `dayshard produce` keyed by order id at 2,000 a
# second: node A alone, node B joins while versions of the same orders are in flight (A lets
# half the partitions go), then A stops (its partitions move to B from the offsets A
# committed).
#
# What is checked, from the topic (kcat, offset order per partition) and the nodes' logs (each
# "kafka: assigned P from offset O" line, stamped with the time it was written):
# 1. Keying: every order's messages are in one Kafka partition and keyed by its order id.
# 2. Handover: for each partition the assignments, ordered by start offset, split its offsets
#    into ranges, one owner each; each node's share of the topic is the messages of its ranges.
#    What each node stores is exactly the oracle (orders_oracle.py) of its own share, compared
#    by orders_compare.py (days, sums, statuses, customer views, P2): no message lost or
#    stored twice across the handovers, and the rules applied to what the node read.
# 3. Across the nodes: the two nodes' per-day counts added up equal the oracle of the whole
#    topic only if no order has versions on both sides of a handover: such an order is current
#    on both nodes (its old version on the node that let the partition go, its new one on the
#    node that took it). That is a known limitation (docs/ARCHITECTURE.md section 14): the
#    test prints how many figures differ and checks that the surplus of orders is exactly the
#    orders current on both nodes, nothing else.
# Randomised: prints its seed, DS_TEST_SEED replays it. About 1.5 min on 2 shared cores.
# Skips (77) while the build refuses --model orders.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"
COMPARE="$ROOT/tests/integration/orders_compare.py"
ORACLE="$ROOT/tests/integration/orders_oracle.py"
seed=${DS_TEST_SEED:-$RANDOM}
echo "seed=$seed"
RANDOM=$seed
events=60000
[[ ${DS_LONG:-} == 1 ]] && events=200000

if ! "$DAYSHARD" ingest --data "$WORK/probe" --model orders /dev/null >/dev/null 2>"$WORK/probe.err"; then
  if grep -q "orders model is not implemented yet" "$WORK/probe.err"; then
    echo "SKIP: this build refuses --model orders ($(cat "$WORK/probe.err"))"
    exit 77
  fi
  die "ingest --model orders of nothing: $(cat "$WORK/probe.err")"
fi

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
  for _ in $(seq 100); do
    [[ -s $WORK/$name.out ]] && break
    sleep 0.1
  done
  URL=http://$(head -1 "$WORK/$name.out")
  [[ $URL == http://127.0.0.1:* ]] || die "node $name printed no HTTP address"
}

"$DAYSHARD" generate --events "$events" --customers 5000 --updates 0.4 --duplicates 0.05 \
  --items 0.1 --seed "$seed" >"$WORK/stream.jsonl"
start_broker --partitions 12
start_stamped a "$WORK/a"
A_PID=$NODE_PID
wait_assigned a 30 || fail "node A: no assignment within 30 s"

# 30 s of stream; B joins 3..6 s in (the mock completes the rebalance ~5 s later), A stops
# 17..20 s in.
PRODUCE_SECONDS=120 ds_produce "$WORK/stream.jsonl" --rate 2000 >"$WORK/produce.out" 2>&1 &
producer=$!
sleep "$((3 + RANDOM % 3)).$((RANDOM % 10))"
start_stamped b "$WORK/b"
B_PID=$NODE_PID
B_URL=$URL
wait_assigned b 30 || fail "node B: no assignment within 30 s"
sleep "$((7 + RANDOM % 3)).$((RANDOM % 10))"
note "node A stops"
stop_node a "$A_PID"
wait "$producer" || fail "producer: $(tail -c 300 "$WORK/produce.out")"
cat "$WORK/produce.out"

# B has stored everything once a consistent count answers.
deadline=$(($(now_ms) + 90000))
until code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 15 \
  "$B_URL/v1/count?day=2026-01-01&consistent=true&timeout_ms=10000") && [[ $code == 200 ]]; do
  (($(now_ms) < deadline)) || break
  sleep 1
done
expect_eq "node B: consistent count" 200 "$code"
topic_records "$WORK/topic.tsv"
expect_eq "messages in the topic" "$events" "$(wc -l <"$WORK/topic.tsv")"
stop_node b "$B_PID"
stop_broker

# 1 and 2: keying, and each node's share of the topic from the stamped assignment lines.
"$PY" - "$WORK/topic.tsv" "$WORK/a.log" "$WORK/b.log" "$WORK" >"$WORK/shares.txt" <<'EOF'
import collections, json, re, sys
topic, logs, work = sys.argv[1], {"a": sys.argv[2], "b": sys.argv[3]}, sys.argv[4]
records = collections.defaultdict(list)  # partition -> [(offset, key, value)]
parts_of = collections.defaultdict(set)
badkey = 0
for line in open(topic, "rb"):
    p, o, k, v = line.rstrip(b"\n").split(b"\t", 3)
    records[int(p)].append((int(o), k, v))
    oid = json.dumps(json.loads(v)["order_id"])
    parts_of[oid].add(int(p))
    badkey += k.decode() != oid
print("split_keys", sum(1 for s in parts_of.values() if len(s) > 1))
print("bad_keys", badkey)
assigned = re.compile(r"^(\d+\.\d+) .*kafka: assigned \S+\[(\d+)\] from offset (-?\d+)")
owners = collections.defaultdict(list)  # partition -> [(start, time, node)]
for node, path in logs.items():
    for line in open(path):
        m = assigned.match(line)
        if m:
            start = max(0, int(m.group(3)))
            owners[int(m.group(2))].append((start, float(m.group(1)), node))
shares = {"a": [], "b": []}
handovers = 0
for p in sorted(records):
    rows = sorted(records[p])
    if not owners[p]:
        print("unowned_partition", p)
        continue
    ranges = sorted(owners[p])
    for i, (start, _, node) in enumerate(ranges):
        end = ranges[i + 1][0] if i + 1 < len(ranges) else 1 << 62
        if i > 0 and node != ranges[i - 1][2] and end > start:
            handovers += 1
        shares[node] += [v for o, _, v in rows if start <= o < end]
    if ranges[0][0] != 0:
        print("partition_not_read_from_0", p, ranges[0][0])
for node, values in shares.items():
    with open("%s/share-%s.jsonl" % (work, node), "wb") as f:
        f.write(b"".join(v + b"\n" for v in values))
    print("share", node, len(values))
print("handovers", handovers)
EOF
cat "$WORK/shares.txt"
expect_eq "orders whose messages are in more than one partition" "split_keys 0" "$(grep split_keys "$WORK/shares.txt")"
expect_eq "messages not keyed by their order id" "bad_keys 0" "$(grep bad_keys "$WORK/shares.txt")"
grep -q "unowned_partition\|partition_not_read_from_0" "$WORK/shares.txt" &&
  fail "a partition nobody read from offset 0: $(grep -E 'unowned|not_read' "$WORK/shares.txt" | tr '\n' ' ')" || ok
handovers=$(awk '$1 == "handovers" {print $2}' "$WORK/shares.txt")
((handovers > 0)) && ok || fail "no partition changed hands with messages after the handover"

sort -t$'\t' -k1,1n -k2,2n "$WORK/topic.tsv" | cut -f4 >"$WORK/values.jsonl"
"$PY" "$ORACLE" --model orders --out "$WORK/oracle.json" "$WORK/values.jsonl"
for node in a b; do
  "$PY" "$ORACLE" --model orders --out "$WORK/oracle-$node.json" "$WORK/share-$node.jsonl"
  if "$PY" "$COMPARE" --oracle "$WORK/oracle-$node.json" --data "$WORK/$node" --dayshard "$DAYSHARD" \
    --consistent --seed "$seed" --label "node $node against its share" >"$WORK/compare.out" 2>&1; then ok; else
    fail "node $node's data is not the oracle of its share of the topic: $(head -c 1500 "$WORK/compare.out")"
  fi
  cat "$WORK/compare.out"
done

# 3: the contract: A + B equal the oracle of the whole topic.
"$PY" - "$DAYSHARD" "$WORK/oracle.json" "$WORK/oracle-a.json" "$WORK/oracle-b.json" \
  "$WORK/a" "$WORK/b" >"$WORK/union.txt" <<'EOF'
import collections, json, subprocess, sys
binary, whole, oa, ob, da, db = sys.argv[1:7]
whole, oa, ob = (json.load(open(p)) for p in (whole, oa, ob))
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
both = {json.dumps(o["order_id"]) for o in oa["orders"]} & {json.dumps(o["order_id"]) for o in ob["orders"]}
total = lambda c: sum(v for (d, s, w), v in c.items() if s is None and w == "count")
print("union_orders", total(union), "oracle_orders", total(want), "orders_on_both", len(both),
      "differences", len(diff))
for k, u, w in diff[:6]:
    print("  %s %s %s: A+B %d, oracle %d" % (k[0], "all" if k[1] is None else k[1], k[2], u, w))
EOF
cat "$WORK/union.txt"
read -r _ union_orders _ oracle_orders _ on_both _ differences < <(head -1 "$WORK/union.txt")
# Known limitation (docs/ARCHITECTURE.md section 14, "Orders across a rebalance"): a node that
# takes a partition over does not have that partition's orders, so an order with versions on
# both sides of a handover is current on both nodes and A + B count it twice. Until the
# partition's order state moves with it, this pins the behaviour down: nothing else differs,
# and the surplus is exactly those orders.
echo "NOTE: A + B differ from the oracle of the topic in $differences figures:" \
  "$union_orders orders counted, $oracle_orders in the topic, $on_both current on both nodes"
# The surplus is exactly the orders current on both nodes.
expect_eq "A + B orders minus the topic's: the orders current on both nodes" "$on_both" \
  "$((union_orders - oracle_orders))"
for d in a b; do
  if "$DAYSHARD" fsck --data "$WORK/$d" >"$WORK/fsck.txt" 2>&1; then ok; else fail "fsck $d: $(head -c 300 "$WORK/fsck.txt")"; fi
done
finish
