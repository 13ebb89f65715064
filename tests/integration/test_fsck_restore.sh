#!/usr/bin/env bash
# fsck --repair --brokers B --topic T: the quarantined ranges come back from the topic. A known
# stream with updates (busy day, 30% new versions, some stale) goes to the embedded broker (4
# partitions, so every damaged block holds events of several), a node writes it into a
# directory of each model, and each directory, stopped, is damaged as test_fsck_repair does it
# (the busy day's largest segment cut 37 bytes short with 5 KB of garbage appended, and a byte
# flipped in a block of another partition). On copies of it:
# - repair with the topic at hand: exit 0, ok, the restore complete; the next fsck is clean;
#   per-day counts, and in orders_compare.py per-day counts and sums, statuses, customer views
#   and orders by id, equal the truth (`dayshard ingest` of the same lines, orders_oracle.py);
# - a second repair applies nothing (every range done before), and a restore that died after
#   its commit but before its marker (the marker put back to "started") applies nothing twice;
# - repair against a topic recreated since (other events at other offsets): the restore is not
#   complete and names what stays lost (orders: the reconcile's reverted and lost orders, ids in
#   the .unrestored.jsonl; events: the quarantined events), counts drop by exactly that;
# - the node's --restore-quarantine after a plain repair restores the same at start-up.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"
source "$(dirname "$0")/fsck_lib.sh"
ORACLE="$ROOT/tests/integration/orders_oracle.py"
COMPARE="$ROOT/tests/integration/orders_compare.py"
seed=${DS_TEST_SEED:-$RANDOM}
echo "seed=$seed (DS_TEST_SEED=$seed replays it)"

start_broker --partitions 4
# The orders model's stream has updates; the events model's has none (topic "events"): its
# customer view keeps, of events with one (ts, order id), the last to arrive, and a restore
# makes the restored events arrive again, after the others.
"$DAYSHARD" generate --events 12000 --profile busy-day --updates 0.3 --seed "$seed" \
  >"$WORK/stream-orders.jsonl"
ds_produce "$WORK/stream-orders.jsonl" >/dev/null || die "producing the orders stream"
"$DAYSHARD" generate --events 12000 --profile busy-day --seed "$seed" >"$WORK/stream-events.jsonl"
timeout 60 "$DAYSHARD" produce --brokers "$BOOT" --topic events --json "$WORK/stream-events.jsonl" \
  >/dev/null || die "producing the events stream"
# A topic "recreated" since: other events (another day, ids the stream never has) at offsets
# 0..9 of each partition.
for i in $(seq 40); do
  echo "{\"order_id\":\"recreated-$i\",\"customer_id\":1,\"ts\":\"2026-03-02T10:00:00Z\",\"amount\":1}"
done >"$WORK/recreated.jsonl"
timeout 60 "$DAYSHARD" produce --brokers "$BOOT" --topic recreated --json "$WORK/recreated.jsonl" \
  >/dev/null || die "producing the recreated topic"

# damage DIR: the torn tail of the busy day's largest segment, a flipped byte mid-block in the
# busy day's next largest.
damage() {
  local segs a b at len
  segs=$(find "$1/parts/2026-01-21" -name '*.seg' -printf '%s %p\n' | sort -n | tail -n 2)
  a=$(sed -n 2p <<<"$segs" | cut -d' ' -f2)
  b=$(sed -n 1p <<<"$segs" | cut -d' ' -f2)
  torn_tail "$a" 5120
  read -r at len < <(segment_blocks "$b" | sed -n 1p)
  flip_byte "$b" $((at + len - 10))
}

# compare WHAT DIR MODEL: orders_compare.py of DIR against the oracle of the stream, every field
# of the orders by id included (versions_seen: a restored order counts each version once).
compare() {
  if "$PY" "$COMPARE" --oracle "$WORK/oracle-$3.json" --data "$2" --dayshard "$DAYSHARD" \
    --stream "$stream" --seed "$seed" --customers 60 --orders 120 --max-diffs 100000 \
    --label "$1" >"$WORK/compare.out" 2>&1; then ok; else
    fail "$1: orders_compare: $(grep '^DIFF' "$WORK/compare.out" | head -c 1500)"
  fi
}

# restored WHAT DIR: the orders the repair reverted (all) and lost (the first 40), as the repair
# listed them in DIR/quarantine/*.orders.jsonl, each asked by id and held against the oracle's
# record: status, version and versions_seen (a sample of orders_compare.py may miss them). How
# many the damage reverts depends on the seed (0 to a few dozen); test_fsck_reconcile's restore
# case has one for certain.
restored() {
  local out
  out=$("$PY" - "$2" "$WORK/oracle-orders.json" "$DAYSHARD" <<'PY'
import glob, json, subprocess, sys
data, oracle, binary = sys.argv[1:4]
want = {json.dumps(o["order_id"]): o for o in json.load(open(oracle))["orders"]}
lines = [json.loads(l) for f in sorted(glob.glob(data + "/quarantine/*.orders.jsonl"))
         for l in open(f)]
chosen = [l for l in lines if l["outcome"] == "reverted"]
chosen += [l for l in lines if l["outcome"] == "lost"][:40]
diffs = []
for l in chosen:
    i = l["order"]
    arg = str(i) if isinstance(i, int) else '"%s"' % i
    p = subprocess.run([binary, "order", arg, "--json", "--data", data], capture_output=True)
    got = json.loads(p.stdout) if p.returncode == 0 else {}
    w = want[json.dumps(i)]
    for f in ("status", "version", "versions_seen"):
        if got.get(f) != w[f]:
            diffs.append("order %s (%s): %s %r, oracle %r" % (arg, l["outcome"], f, got.get(f), w[f]))
print(len([l for l in chosen if l["outcome"] == "reverted"]), len(chosen), len(diffs))
for d in diffs[:10]:
    print(d)
PY
  ) || fail "$1: cannot check the restored orders"
  note "$1: restored orders checked by id (reverted, checked, differing): $(head -n 1 <<<"$out")"
  expect_eq "$1: the restored orders equal the oracle's, versions_seen included" 0 \
    "$(head -n 1 <<<"$out" | cut -d' ' -f3)"
  sed -n '2,$p' <<<"$out" | head -n 10 >&2
}

# repair WHAT DIR TOPIC CODE: fsck --repair --brokers --topic --json into $WORK/WHAT.json.
repair() {
  expect_exit "$1: fsck --repair --brokers" "$4" "$DAYSHARD" fsck --data "$2" --repair \
    --brokers "$BOOT" --topic "$3" --json
  cp "$WORK/out" "$WORK/$1.json"
  cp "$WORK/err" "$WORK/$1.err"
}

# check_model MODEL: the whole sequence for one data model.
check_model() {
  local model=$1 data=$WORK/$1 expected q lost got topic
  MODEL_X=(--model "$model")
  stream=$WORK/stream-$model.jsonl
  topic=$([[ $model == orders ]] && echo orders || echo events)
  "$PY" "$ORACLE" --model "$model" --out "$WORK/oracle-$model.json" "$stream"
  expected=$(truth "$stream")
  start_node "node-$model" "$data" "g-$model" --topic "$topic"
  local pid=$NODE_PID
  wait_counts "$model: the node stored the stream" "$expected" 120 "$data"
  stop_node "node-$model" "$pid"
  compare "$model: the node before any damage" "$data" "$model"
  expect_exit "$model: fsck clean before" 0 "$DAYSHARD" fsck --data "$data"

  # The topic at hand: nothing lost.
  cp -a "$data" "$WORK/a-$model"
  damage "$WORK/a-$model"
  repair "$model-a" "$WORK/a-$model" "$topic" 0
  local j=$WORK/$model-a.json
  note "$model: $(json_get "$j" '"quarantined %d blocks, %d events; reconcile: %d reverted, %d lost; restore: %s" % (d["quarantined_blocks"], d["quarantined_events"], d["orders_reverted"], d["orders_lost"], d["restore"])')"
  expect_eq "$model-a: ok" True "$(json_get "$j" 'd["ok"]')"
  expect_eq "$model-a: two blocks quarantined" 2 "$(json_get "$j" 'd["quarantined_blocks"]')"
  expect_eq "$model-a: restore complete" True "$(json_get "$j" 'd["restore"]["complete"]')"
  expect_eq "$model-a: both ranges restored" "2 2" "$(json_get "$j" '"%d %d" % (d["restore"]["ranges"], d["restore"]["ranges_restored"])')"
  [[ $(json_get "$j" 'd["restore"]["events_applied"]') -gt 0 ]] && ok || fail "$model-a: nothing applied"
  if [[ $model == orders ]]; then
    # The reconcile lost orders that the restore brought back, all of them.
    q=$(json_get "$j" 'd["orders_reverted"] + d["orders_lost"]')
    [[ $q -gt 0 ]] && ok || fail "$model-a: the damage reverted or lost no order"
    expect_eq "$model-a: every order back" "$q $q 0 0" "$(json_get "$j" '"%d %d %d %d" % (d["restore"]["orders"], d["restore"]["orders_restored"], d["restore"]["orders_reverted"], d["restore"]["orders_lost"])')"
  else
    expect_eq "$model-a: every event back" "$(json_get "$j" 'd["quarantined_events"]') 0" "$(json_get "$j" '"%d %d" % (d["restore"]["events_applied"], d["restore"]["events_lost"])')"
  fi
  expect_exit "$model-a: fsck clean after" 0 "$DAYSHARD" fsck --data "$WORK/a-$model"
  expect_eq "$model-a: per-day counts" "$expected" "$(day_counts "$WORK/a-$model")"
  compare "$model-a: after the restore" "$WORK/a-$model" "$model"
  if [[ $model == orders ]]; then restored "$model-a" "$WORK/a-$model"; fi

  # Twice: nothing applied again.
  repair "$model-a2" "$WORK/a-$model" "$topic" 0
  expect_eq "$model-a2: every range done before, nothing applied" "2 0 0" "$(json_get "$WORK/$model-a2.json" '"%d %d %d" % (d["restore"]["ranges_done_before"], d["restore"]["ranges_restored"], d["restore"]["events_applied"])')"
  expect_eq "$model-a2: per-day counts" "$expected" "$(day_counts "$WORK/a-$model")"
  # A restore that died after its commit, before its marker said done.
  for m in "$WORK/a-$model"/quarantine/*.restore; do
    echo '{"state":"started","commit_seq":1}' >"$m"
  done
  rm -f "$WORK/a-$model"/quarantine/*.orders.jsonl.restored
  repair "$model-a3" "$WORK/a-$model" "$topic" 0
  expect_eq "$model-a3: nothing applied twice" 0 "$(json_get "$WORK/$model-a3.json" 'd["restore"]["events_applied"]')"
  expect_exit "$model-a3: fsck clean" 0 "$DAYSHARD" fsck --data "$WORK/a-$model"
  expect_eq "$model-a3: per-day counts" "$expected" "$(day_counts "$WORK/a-$model")"

  # A topic that no longer holds the offsets: what stays lost is said, and is exactly it.
  cp -a "$data" "$WORK/b-$model"
  damage "$WORK/b-$model"
  repair "$model-b" "$WORK/b-$model" recreated 0
  j=$WORK/$model-b.json
  note "$model-b: restore: $(json_get "$j" 'd["restore"]')"
  expect_eq "$model-b: ok (the directory is clean)" True "$(json_get "$j" 'd["ok"]')"
  expect_eq "$model-b: restore not complete" False "$(json_get "$j" 'd["restore"]["complete"]')"
  expect_eq "$model-b: nothing applied" 0 "$(json_get "$j" 'd["restore"]["events_applied"]')"
  [[ $(json_get "$j" 'd["restore"]["offsets_missing"]') -gt 0 ]] && ok || fail "$model-b: no offset missing"
  if [[ $model == orders ]]; then
    expect_eq "$model-b: the reconcile's reverted and lost orders stay so" \
      "$(json_get "$j" '"%d %d" % (d["orders_reverted"], d["orders_lost"])')" \
      "$(json_get "$j" '"%d %d" % (d["restore"]["orders_reverted"], d["restore"]["orders_lost"])')"
    local file
    file=$(json_get "$j" 'd["restore"]["unrestored_file"]')
    expect_eq "$model-b: one line per order in $file" "$(json_get "$j" 'd["orders_reverted"] + d["orders_lost"]')" "$(wc -l <"$file")"
    lost=$(json_get "$j" 'd["orders_lost"]')
  else
    expect_eq "$model-b: the quarantined events stay lost" "$(json_get "$j" 'd["quarantined_events"]')" "$(json_get "$j" 'd["restore"]["events_lost"]')"
    lost=$(json_get "$j" 'd["quarantined_events"]')
  fi
  got=$(day_counts "$WORK/b-$model" | total_of)
  expect_eq "$model-b: the total drops by exactly what stays lost" $(($(total_of <<<"$expected") - lost)) "$got"
  expect_exit "$model-b: fsck clean after" 0 "$DAYSHARD" fsck --data "$WORK/b-$model"

  # The node restores at start-up after a plain repair.
  cp -a "$data" "$WORK/c-$model"
  damage "$WORK/c-$model"
  expect_exit "$model-c: fsck --repair" 0 "$DAYSHARD" fsck --data "$WORK/c-$model" --repair
  start_node "node-$model-c" "$WORK/c-$model" "g-$model" --topic "$topic" --restore-quarantine
  pid=$NODE_PID
  wait_counts "$model-c: the node restored at start-up" "$expected" 60 "$WORK/c-$model"
  stop_node "node-$model-c" "$pid"
  log_run_has "node-$model-c" "restore from $topic: 2 of 2 quarantined ranges restored" && ok ||
    fail "$model-c: the node's log does not say it restored both ranges"
  expect_exit "$model-c: fsck clean after" 0 "$DAYSHARD" fsck --data "$WORK/c-$model"
  compare "$model-c: after the node's restore" "$WORK/c-$model" "$model"
  if [[ $model == orders ]]; then restored "$model-c" "$WORK/c-$model"; fi
}

check_model orders
check_model events
expect_exit "--brokers without --repair is a usage error" 2 "$DAYSHARD" fsck --data "$WORK/orders" \
  --brokers "$BOOT"
stop_broker
finish
