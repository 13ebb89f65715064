#!/usr/bin/env bash
# Heat and adaptive write sharding on real nodes:
# - a busy day written faster than its shards' capacity grows (durably: the map file, the
#   history in shardmap.log), and counts stay exact across the growth; /v1/heat and /metrics
#   show the hottest partitions, days, Kafka partitions, customers and the growths;
# - a second node (another group: a replica) with growth off takes the first node's growths from
#   the shard map topic;
# - kill -9 of a node while days grow, restarted: counts exact, maps only grew;
# - a map write that fails stops growth and loses nothing;
# - `serve` has no heat (501); bad ?top= values are 400.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"
# Each month is a generated stream whose order ids start at 1 again: events, every one counted.
MODEL_X=(--model events)
# Counts over the whole year: the test writes months past January.
DAYS=(--day 2025-12-01 --to 2026-11-30 --by day --json)

expect_exit "--max-shards below --shards" 2 "$DAYSHARD" run --brokers 127.0.0.1:1 \
  --data "$WORK/x" --shards 8 --max-shards 4
expect_exit "bad --shard-capacity" 2 "$DAYSHARD" run --brokers 127.0.0.1:1 --data "$WORK/x" \
  --shard-capacity -1
"$DAYSHARD" run --help >"$WORK/out"
grep -q -- "--shard-capacity R" "$WORK/out" && grep -q -- "--max-shards M" "$WORK/out" && ok ||
  fail "run --help lacks the sharding options"

# map_count DIR DAY: the day's shard count in DIR/shardmap (0 when absent).
map_count() { awk -v d="$2" '$1 == d {print $2; found = 1} END {if (!found) print 0}' "$1/shardmap"; }

# 100,000 events at 25,000/s: the busy day (30%, consecutive in time) is written at ~25,000/s
# for over a second, far above 4 shards x 1,000/s, so it must grow.
start_heat_node 11 "$WORK/month1.jsonl"
expected1=$EXPECTED
# Counts asked while the busy day grows never go backwards (a reader reloads the map after the
# commit that holds events of new shards, and the map was durable before them).
"$PY" - "$URL_A" >"$WORK/polled.txt" 2>&1 <<'PYEOF' &
import sys, time, json, urllib.request
url = sys.argv[1] + "/v1/count?day=2026-01-21"
deadline = time.time() + 12
while time.time() < deadline:
    with urllib.request.urlopen(url, timeout=5) as r:
        print(json.load(r)["count"], flush=True)
    time.sleep(0.02)
PYEOF
poller=$!
ds_produce "$WORK/month1.jsonl" --rate 25000 || fail "produce month 1"
wait_counts "counts across growth" "$expected1" 60 "$WORK/a"
wait "$poller" || fail "the count poller failed: $(tail -n 3 "$WORK/polled.txt")"
expect_eq "counts during growth never went backwards" "" \
  "$(awk 'NR > 1 && $1 < prev {print "line " NR ": " $1 " after " prev} {prev = $1}' "$WORK/polled.txt" | head -n 3)"
(($(sort -u "$WORK/polled.txt" | wc -l) > 5)) && ok ||
  fail "the poller saw too few distinct counts: $(sort -u "$WORK/polled.txt" | head -n 3 | xargs)"

busy=$(map_count "$WORK/a" 2026-01-21)
((busy > 4)) && ok || fail "the busy day did not grow: $busy shards"
((busy <= 256)) && ok || fail "the busy day grew past --max-shards: $busy"
# The day after the busy one (the next latest day of a stream in time order) starts from the
# busy day's rate over the last 5 s (30,000 events: at most 6,000/s, 8 shards), not from its
# peak count; the days after that, ~2,600 events each, start from the base count again, as do
# the days before it, each written for a tenth of a second.
next_day=$(map_count "$WORK/a" 2026-01-22)
# A node that read the burst slowly (a loaded machine) grows the busy day to 8 at most, where its
# peak and its 5 s rate give the same count; the peak is told apart only above that.
if ((busy > 8)); then
  ((next_day < busy)) && ok || fail "the day after the busy day starts at its peak: $next_day of $busy"
fi
((next_day <= 8)) && ok || fail "the day after the busy day starts above its rate: $next_day"
if ((next_day > 4)); then
  grep -q '"day":"2026-01-22","from":4,"to":'"$next_day"',.*a new latest day starts at .* of 2026-01-21 ('"$busy"' shards)' \
    "$WORK/a/shardmap.log" && ok || fail "no start of 2026-01-22 in shardmap.log"
fi
for later in 2026-01-23 2026-01-25 2026-01-28; do
  expect_eq "$later after the burst starts at the base count" 4 "$(map_count "$WORK/a" "$later")"
done
expect_eq "a short quiet day keeps the base count" 4 "$(map_count "$WORK/a" 2026-01-02)"
# Counts stay exact over every shard each day had: by=shard of the day after the burst.
"$DAYSHARD" count --data "$WORK/a" --day 2026-01-22 --by shard --json >"$WORK/byshard22.json"
expect_eq "the next day's by=shard groups = its count" "$next_day" \
  "$(json_get "$WORK/byshard22.json" 'len(d["groups"])')"
expect_eq "the next day's total" "$(grep '^2026-01-22=' <<<"$expected1" | cut -d= -f2)" \
  "$(json_get "$WORK/byshard22.json" 'sum(g["count"] for g in d["groups"])')"
grep -q '"day":"2026-01-21","from":4,' "$WORK/a/shardmap.log" && ok ||
  fail "no growth of the busy day in shardmap.log: $(cat "$WORK/a/shardmap.log" 2>&1)"
log_run_has a "2026-01-21 grew from 4 to" && ok || fail "no growth line in the node's log"
# The count fans out over every shard the day has: by=shard lists them all, and adds up.
"$DAYSHARD" count --data "$WORK/a" --day 2026-01-21 --by shard --json >"$WORK/byshard.json"
expect_eq "by=shard groups = the day's shard count" "$busy" \
  "$(json_get "$WORK/byshard.json" 'len(d["groups"])')"
expect_eq "busy day total" "$(grep '^2026-01-21=' <<<"$expected1" | cut -d= -f2)" \
  "$(json_get "$WORK/byshard.json" 'sum(g["count"] for g in d["groups"])')"

# /v1/heat: the busy day is the hottest day, with its grown count, and every event was seen.
expect_eq "heat" 200 "$(status "$URL_A/v1/heat?top=5")"
expect_eq "heat events" 100000 "$(json_get "$WORK/body" 'd["events"]')"
expect_eq "heat hottest day" "2026-01-21 $busy" \
  "$(json_get "$WORK/body" '"%s %d" % (d["days"][0]["day"], d["days"][0]["shards"])')"
expect_eq "heat rows bounded by top" "True" \
  "$(json_get "$WORK/body" 'len(d["partitions"]) <= 5 and len(d["customers"]) <= 5')"
expect_eq "heat growth record" "2026-01-21" "$(json_get "$WORK/body" 'd["growths"][-1]["day"]')"
expect_eq "heat Kafka partitions" "4 100000" \
  "$(json_get "$WORK/body" '"%d %d" % (len(d["kafka_partitions"]), sum(k["events"] for k in d["kafka_partitions"]))')"
expect_eq "heat throttling measured" "True" \
  "$(json_get "$WORK/body" 'd["would_throttle_events"] > 0 and d["shard_capacity_eps"] == 1000')"
# The generator's Zipf customers: customer 1 is the heaviest.
expect_eq "heat top customer" 1 "$(json_get "$WORK/body" 'd["customers"][0]["customer_id"]')"
# Keyed by order the Kafka partitions share the writes evenly, and the busy day had room to
# grow: no advice (the list is there, empty).
expect_eq "heat advice: none on an even load" "[]" "$(json_get "$WORK/body" 'json.dumps(d["advice"])')"
for bad in "top=0" "top=65" "top=x" "top=5&top=6" "limit=3"; do
  expect_eq "heat ?$bad" 400 "$(status "$URL_A/v1/heat?$bad")"
done
# `dayshard top` against the real node: one frame with the hottest partition and the growth.
"$DAYSHARD" top --server "$URL_A" --once >"$WORK/top.txt" 2>&1 && ok || fail "top --once"
grep -q "^DAY#2026-01-21#" "$WORK/top.txt" && grep -qE "2026-01-21 +[0-9]+ -> $busy " "$WORK/top.txt" &&
  ok || fail "top frame: $(head -c 600 "$WORK/top.txt")"
curl -s --max-time 10 "$URL_A/metrics" >"$WORK/metrics"
grep -q '^dayshard_shard_growths_total [1-9]' "$WORK/metrics" && ok || fail "metrics: growths"
grep -q "^dayshard_day_shards{day=\"2026-01-21\"} $busy\$" "$WORK/metrics" && ok ||
  fail "metrics: day shards"
grep -q '^dayshard_heat_partition_rate{key="DAY#' "$WORK/metrics" && ok || fail "metrics: rates"

# A late event for an older day is not the latest day: it keeps the base count.
printf '{"order_id":%d,"customer_id":5,"ts":"2025-12-01T10:00:00Z"}\n' 9000001 9000002 9000003 \
  >"$WORK/late.jsonl"
ds_produce "$WORK/late.jsonl" || fail "produce a late day"
expected1=$(truth "$WORK/month1.jsonl" "$WORK/late.jsonl")
wait_counts "late day stored" "$expected1" 30 "$WORK/a"
expect_eq "a late older day keeps the base count" 4 "$(map_count "$WORK/a" 2025-12-01)"

# A replica (group g2) with growth off follows the map topic: it takes node a's count.
start_http_node b "$WORK/b" g2 --shard-capacity 0
PID_B=$NODE_PID
wait_counts "replica counts" "$expected1" 90 "$WORK/b"
expect_eq "replica took the growth from the map topic" "$busy" "$(map_count "$WORK/b" 2026-01-21)"
grep -q '"reason":"merged from orders.shardmap"' "$WORK/b/shardmap.log" 2>/dev/null && ok ||
  fail "replica's shardmap.log has no merge: $(cat "$WORK/b/shardmap.log" 2>&1)"
stop_node b "$PID_B"
# --no-shardmap-topic keeps a node to itself: with growth off it stays at the base count.
start_node c "$WORK/c" g3 --shard-capacity 0 --no-shardmap-topic
PID_C=$NODE_PID
wait_counts "a node without the map topic" "$expected1" 90 "$WORK/c"
expect_eq "no map topic, no merge" 4 "$(map_count "$WORK/c" 2026-01-21)"
[[ ! -e $WORK/c/shardmap.log ]] && ok || fail "a node without the topic merged: $(cat "$WORK/c/shardmap.log")"
stop_node c "$PID_C"

# `serve` measures no heat: 501 with the reason.
start_serve "$WORK/a"
expect_eq "serve heat" 501 "$(status "$SERVE_URL/v1/heat")"
grep -q "dayshard run" "$WORK/body" && ok || fail "serve heat body: $(cat "$WORK/body")"
kill "$SERVE_PID"
wait "$SERVE_PID" || true

# kill -9 while new days grow, then restart on the same directory: counts exact, no map shrank.
long=${DS_LONG:-${DS_SOAK:-0}}
rounds=2
[[ $long == 1 ]] && rounds=6
expected_all=$expected1
for round in $(seq "$rounds"); do
  month=$(printf '2026-%02d-01' $((round + 1)))
  "$DAYSHARD" generate --events 100000 --profile busy-day --seed $((20 + round)) \
    --first-day "$month" >"$WORK/m$round.jsonl"
  expected_all=$(truth "$WORK/month1.jsonl" "$WORK/late.jsonl" "$WORK"/m[0-9]*.jsonl)
  ds_produce "$WORK/m$round.jsonl" --rate 25000 &
  producer=$!
  sleep "1.$((RANDOM % 9))"
  crash_node "$PID_A"
  start_http_node a "$WORK/a" g1 --shard-capacity 1000
  PID_A=$NODE_PID
  wait "$producer" || fail "produce round $round"
  wait_counts "round $round: counts after kill -9 mid-growth" "$expected_all" 90 "$WORK/a"
  expect_eq "round $round: the first busy day kept its count" "$busy" \
    "$(map_count "$WORK/a" 2026-01-21)"
  "$DAYSHARD" fsck --data "$WORK/a" >/dev/null 2>&1 && ok || fail "round $round: fsck"
done

# A map write that fails (a directory where the atomic replace's temp file goes) stops growth,
# and no event is lost. The days exist first (a new day needs a map write too: a node that
# cannot record one stops, and resumes from its durable position after a restart).
"$DAYSHARD" generate --events 1000 --profile uniform --seed 98 --first-day 2026-09-01 \
  >"$WORK/sept-days.jsonl"
"$DAYSHARD" generate --events 300000 --profile busy-day --seed 99 --first-day 2026-09-01 \
  >"$WORK/sept-busy.jsonl"
ds_produce "$WORK/sept-days.jsonl" || fail "produce the September days"
expected_all=$(truth "$WORK/month1.jsonl" "$WORK/late.jsonl" "$WORK"/m[0-9]*.jsonl "$WORK/sept-days.jsonl")
wait_counts "September days known" "$expected_all" 60 "$WORK/a"
sept_busy=$(map_count "$WORK/a" 2026-09-21)
mkdir "$WORK/a/shardmap.tmp"
ds_produce "$WORK/sept-busy.jsonl" --rate 80000 || fail "produce the September busy day"
expected_all=$(truth "$WORK/month1.jsonl" "$WORK/late.jsonl" "$WORK"/m[0-9]*.jsonl "$WORK/sept-days.jsonl" \
  "$WORK/sept-busy.jsonl")
wait_counts "counts while the map cannot be written" "$expected_all" 90 "$WORK/a"
kill -0 "$PID_A" 2>/dev/null && ok || fail "the node stopped on a failed growth"
expect_eq "heat after the failed write" 200 "$(status "$URL/v1/heat")"
expect_eq "growth stopped" "True False" \
  "$(json_get "$WORK/body" '"%s %s" % (d["growth_failed"], d["adaptive"])')"
expect_eq "the September busy day kept its count" "$sept_busy" "$(map_count "$WORK/a" 2026-09-21)"
((sept_busy < 256)) && ok || fail "the September busy day had no room to grow: $sept_busy"
log_run_has a "adaptive sharding stops" && ok || fail "no log line for the failed growth"
"$DAYSHARD" top --server "$URL" --once 2>&1 | grep -q "GROWTH STOPPED" && ok ||
  fail "top does not show the stopped growth"
rmdir "$WORK/a/shardmap.tmp"
"$DAYSHARD" fsck --data "$WORK/a" >/dev/null 2>&1 && ok || fail "fsck after the failed write"

stop_node a "$PID_A"
stop_broker
finish
