#!/usr/bin/env bash
# kill -9 of `dayshard run --http` (index on) in a loop, against an independent producer
# (py_producer.py: python3-kafka, acks=all, keyed by order id, its own retries) that streams a
# generated busy-day month at a steady rate through the whole test. Each cycle starts the node on
# the same data directory, waits 0.2-3 s (after its assignment; now and then after its start,
# while it joins and its index builder catches up) and kills it -9. Every second cycle kills
# while the by-customer index lags: the builder is slowed (test hook DS_TEST_GSI_SLOW_MS, a
# sleep after each apply; --max-gsi-lag-ms high, so back-pressure does not stop the data), the
# producer adds a burst of orders of the heaviest customer, and the kill waits until /metrics
# shows the index behind a durable commit. Printed: kills with dayshard_gsi_lag_ms > 0, kills
# /metrics showed behind, and restarts whose index cursor was behind the data's commit (their
# log). Every third cycle the broker fails a few of the producer's requests (it sends them
# again). At the end, the producer stopped and the node settled:
# - the ground truth is the topic's contents (read back with kcat); every ack the producer got
#   is in it, and it holds no order the producer did not send;
# - per-day counts and amount sums, and per-status counts and sums, equal the truth's exactly
#   (0 lost, 0 twice);
# - the by-customer index holds exactly the truth's orders of the two heaviest customers and of
#   three light ones, paged to the end;
# - no committed Kafka offset ran ahead of durable data; no dead letters; fsck is clean.
# Randomised: prints its seed, DS_TEST_SEED replays it. Sizes: 6 cycles (3 index cycles; the
# broker's NOT_LEADER_FOR_PARTITION at cycle 1, _TRANSPORT at cycle 4); DS_SHORT=1 4 cycles (2
# index cycles, the same two broker errors); DS_LONG=1 (or the older DS_SOAK=1) 100, about
# 16 min (more than CTest's 600 s: run it by hand or raise its TIMEOUT). Ends with one summary
# line.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"
started_ms=$(now_ms)
long=${DS_LONG:-${DS_SOAK:-0}}
if [[ $long == 1 ]]; then
  cycles=100 rate=500 burst=1000 partitions=24
elif [[ ${DS_SHORT:-} == 1 ]]; then
  cycles=4 rate=1500 burst=3000 partitions=12
else
  cycles=6 rate=1500 burst=3000 partitions=12
fi
seed=${DS_TEST_SEED:-$RANDOM}
echo "seed=$seed cycles=$cycles (DS_TEST_SEED=$seed replays it)"
RANDOM=$seed
# As in test_run_crash.sh: a killed member stays in the group for session.timeout.ms, and the
# mock makes the next join wait session.timeout.ms - 1000: 4 s keeps a cycle near 6-8 s.
NODE_X=(-X session.timeout.ms=4000 -X heartbeat.interval.ms=500)
DATA=$WORK/data

# The stream: more than the cycles can take (at most ~12 s each); the producer stops when told.
# 20,000 Zipf customers: the heaviest have thousands of orders, most a handful. Each partition
# stays well under the mock broker's ~5 MiB retention (checked: every ack must be in the topic).
"$DAYSHARD" generate --events $((rate * (cycles * 12 + 60))) --profile busy-day \
  --customers 20000 --seed "$seed" >"$WORK/stream.jsonl"
heavy=$("$PY" -c '
import collections, json, sys
c = collections.Counter(json.loads(l)["customer_id"] for l in open(sys.argv[1]))
print(c.most_common(1)[0][0])' "$WORK/stream.jsonl")

start_broker --partitions "$partitions"
"$PY" "$PY_PRODUCER" "$BOOT" orders "$WORK/stream.jsonl" "$rate" "$WORK/acks.txt" "$WORK/stop" \
  "$WORK/burst" >"$WORK/producer.out" 2>"$WORK/producer.log" 3>&- &
producer=$!

lag_kills=0
proven_kills=0
for ((cycle = 1; cycle <= cycles; cycle++)); do
  slow=0
  if ((cycle % 2 == 0)); then
    # An index cycle: a slowed builder (150-450 ms after each apply) and a burst to index.
    slow=$((150 + RANDOM % 300))
    echo "$heavy $burst" >"$WORK/burst.tmp"
    mv "$WORK/burst.tmp" "$WORK/burst"
  fi
  if ((cycle % 3 == 1)); then
    # Broker errors on the producer's side: its failed sends go again (its own retry loop).
    code=NOT_LEADER_FOR_PARTITION
    ((cycle % 2)) || code=_TRANSPORT
    control "errors Produce 3 $code"
  fi
  # In an index cycle a high lag bound keeps back-pressure off: the node goes on committing while
  # the builder sleeps, so the index on disk stays behind its data (with the default bound the
  # node pauses and the builder catches up on disk, while the gauge still shows a lag).
  DS_TEST_GSI_SLOW_MS=$slow start_http_node node "$DATA" k9 \
    --max-gsi-lag-ms $((slow > 0 ? 30000 : 1000))
  started=$(now_ms)
  delay_ms=$((200 + RANDOM % 2800))
  if ((slow == 0 && RANDOM % 4 == 0)); then
    when="$delay_ms ms after its start" # while it joins, its builder catching up
  else
    wait_assigned node 30 || fail "cycle $cycle: no assignment within 30 s"
    when="$delay_ms ms after its assignment, $(($(now_ms) - started)) ms after its start"
  fi
  sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  state=$(gsi_state "$URL")
  proven=0
  if ((slow > 0)); then
    # Until /metrics shows the index behind its data (at most 3 s more): the lag is above 0, a
    # commit became durable since the previous sample and none became queryable, so no round of
    # the builder has read that commit yet (a round marks what it applied queryable as it ends).
    for _ in $(seq 60); do
      sleep 0.05
      next=$(gsi_state "$URL")
      read -r seq_a _ queryable_a <<<"$state"
      read -r seq_b lag_b queryable_b <<<"$next"
      state=$next
      if [[ -n $seq_a && -n $seq_b ]] &&
        ((lag_b > 0 && seq_b > seq_a && queryable_b == queryable_a)); then
        proven=1
        break
      fi
    done
  fi
  crash_node "$NODE_PID"
  read -r seq lag _ <<<"$state"
  [[ -n $lag && $lag -gt 0 ]] && lag_kills=$((lag_kills + 1))
  proven_kills=$((proven_kills + proven))
  echo "cycle $cycle: killed $when; index lag ${lag:-?} ms$( ((proven)) && echo ", behind commit $seq")" \
    "(builder slowed ${slow} ms); $(day_counts "$DATA" | total_of) events stored"
done
touch "$WORK/stop"

start_http_node node "$DATA" k9
py_producer_finished "$producer"

# The ground truth: the topic's contents. The producer's acks must all be in it (a retried send
# may have landed twice: both copies are truth, as the node must store what the topic holds).
topic_records "$WORK/topic.tsv"
cut -f4 "$WORK/topic.tsv" >"$WORK/values.jsonl"
read -r produced acked missing foreign duplicates < <("$PY" - "$WORK/topic.tsv" "$WORK/acks.txt" <<'EOF'
import collections, sys
topic = set()
keys = collections.Counter()
for line in open(sys.argv[1], "rb"):
    p, o, k, _ = line.split(b"\t", 3)
    topic.add((int(p), int(o), k.decode()))
    keys[k.decode()] += 1
acks = [tuple(l.split(" ", 2)) for l in open(sys.argv[2]).read().splitlines()]
acks = [(int(p), int(o), k) for p, o, k in acks]
ack_keys = set(k for _, _, k in acks)
missing = sum(1 for a in acks if a not in topic)
foreign = sum(1 for k in keys if k not in ack_keys)
print(len(topic), len(acks), missing, foreign, sum(n - 1 for n in keys.values()))
EOF
)
note "topic: $produced messages ($duplicates duplicates of a retried send); producer acks: $acked"
expect_eq "producer acks missing from the topic" 0 "$missing"
expect_eq "topic messages the producer never sent" 0 "$foreign"
expect_eq "producer acks (distinct) against the producer's own count" \
  "$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["acked"])' "$WORK/producer.out")" \
  "$(sort -u "$WORK/acks.txt" | wc -l)"

# The truth's counts, from file ingest of the topic's values.
"$DAYSHARD" ingest --data "$WORK/truth" --json "$WORK/values.jsonl" >"$WORK/truth.json"
expected=$(day_counts "$WORK/truth")
wait_counts "after $cycles kills" "$expected" $((cycles > 60 ? cycles * 2 : 120)) "$DATA"

# count_lines DIR: per-day and per-status counts with their exact amount sums.
count_lines() {
  "$DAYSHARD" count --data "$1" "${DAYS[@]}" |
    "$PY" -c 'import json,sys
for g in json.load(sys.stdin)["groups"]: print("day", g["key"], g["count"], g["amount_sum"])'
  local status
  for status in paid shipped pending cancelled refunded; do
    "$DAYSHARD" count --data "$1" --day 2026-01-01 --to 2026-01-28 --status "$status" --json |
      "$PY" -c 'import json,sys; d=json.load(sys.stdin); print("status", d["status"], d["count"], d["amount_sum"])'
  done
}
count_lines "$WORK/truth" >"$WORK/want-counts.txt"
count_lines "$DATA" >"$WORK/got-counts.txt"
if cmp -s "$WORK/want-counts.txt" "$WORK/got-counts.txt"; then ok; else
  fail "counts and sums differ: $(diff "$WORK/want-counts.txt" "$WORK/got-counts.txt" | grep '^[<>]' | head -6 | tr '\n' ' ')"
fi
grep -q '^status paid [1-9]' "$WORK/want-counts.txt" && ok || fail "no paid orders in the truth"
read -r stored lost twice < <("$PY" - "$WORK/want-counts.txt" "$WORK/got-counts.txt" <<'EOF'
import sys
def days(path):
    return {f[1]: int(f[2]) for f in (l.split() for l in open(path)) if f[0] == "day"}
want, got = days(sys.argv[1]), days(sys.argv[2])
lost = sum(max(0, n - got.get(d, 0)) for d, n in want.items())
twice = sum(max(0, n - want.get(d, 0)) for d, n in got.items())
print(sum(got.values()), lost, twice)
EOF
)

# The by-customer index: exactly the truth's orders (a duplicate message is one order there).
awk '!seen[$0]++' "$WORK/values.jsonl" >"$WORK/distinct.jsonl"
curl -s --max-time 60 "$URL/v1/customers/$heavy/orders?consistent=true" >/dev/null || true
customers=$("$PY" - "$WORK/distinct.jsonl" "$seed" <<'EOF'
import collections, json, random, sys
c = collections.Counter(json.loads(l)["customer_id"] for l in open(sys.argv[1]))
light = sorted(k for k, n in c.items() if n <= 5)
print(" ".join(str(k) for k, _ in c.most_common(2)),
      " ".join(str(k) for k in random.Random(int(sys.argv[2])).sample(light, 3)))
EOF
)
for customer in $customers; do
  "$PY" "$GSI_LIB" truth "$customer" "$WORK/distinct.jsonl" >"$WORK/want.txt"
  "$PY" "$GSI_LIB" pages "$URL/v1/customers/$customer/orders" 1000 >"$WORK/got.txt" ||
    fail "pages of customer $customer failed"
  if cmp -s "$WORK/want.txt" "$WORK/got.txt"; then ok; else
    fail "customer $customer's orders ($(wc -l <"$WORK/want.txt") in the truth): $(diff "$WORK/want.txt" "$WORK/got.txt" | head -4 | tr '\n' ' ')"
  fi
done
heavy_orders=$("$PY" "$GSI_LIB" truth "$heavy" "$WORK/distinct.jsonl" | wc -l)
((heavy_orders > 2000)) && ok || fail "the heaviest customer has only $heavy_orders orders"
note "index checked for customers $customers (customer $heavy: $heavy_orders orders)"
stop_node node "$NODE_PID"

# Kafka's offsets never ahead of storage, on every assignment of every run.
ahead=$(grep -h 'kafka: assigned' "$WORK/node.log" |
  sed -E 's/.*\(durable here (-?[0-9]+), group (-?[0-9]+), positions (-?[0-9]+)\).*/\1 \2 \3/' |
  awk '$2 > $1 || $3 > $1' | wc -l)
expect_eq "assignments where a committed offset ran ahead of durable data" 0 "$ahead"
if [[ -n $(deadletters "$DATA") ]]; then fail "dead letters: $(head -c 300 <(deadletters "$DATA"))"; else ok; fi
if "$DAYSHARD" fsck --data "$DATA" >"$WORK/fsck.txt" 2>&1; then ok; else fail "fsck: $(head -c 300 "$WORK/fsck.txt")"; fi
((lag_kills >= cycles / 2)) && ok || fail "only $lag_kills of $cycles kills landed while the index lagged"
# The same from durable state: each restart logs the data's commit ("opened at commit N") and the
# index cursor's ("gsi: following ... from commit M"); M < N means the kill before it left the
# index behind its data, to be caught up from the cursor.
behind=$(awk 'function out() { if (run > 1 && m >= 0 && m < n) behind++ }
  /^==== run / { out(); run = $3; n = -1; m = -1 }
  /opened at commit/ && n < 0 { match($0, /opened at commit [0-9]+/); n = substr($0, RSTART + 17, RLENGTH - 17) + 0 }
  /gsi: following/ { match($0, /from commit [0-9]+/); m = substr($0, RSTART + 12, RLENGTH - 12) + 0 }
  END { out(); print behind + 0 }' "$WORK/node.log")
((behind >= cycles / 4)) && ok || fail "only $behind of $cycles kills left the index behind its data"
((proven_kills >= cycles / 4)) && ok || fail "/metrics showed the index behind at only $proven_kills kills"
stop_broker
echo "kill9 summary: cycles $cycles, kills during index lag $lag_kills (index behind its data:" \
  "by /metrics $proven_kills, by the restart's log $behind), events produced $produced, stored ${stored:-?}, lost ${lost:-?}," \
  "duplicated ${twice:-?}, producer retries $retried, elapsed $((($(now_ms) - started_ms) / 1000)) s (seed $seed)"
finish
