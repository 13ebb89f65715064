#!/usr/bin/env bash
# Heat through the router: a broker with a topic of 4 partitions, group A (nodes a1, a2) and a
# replica group B (node b1) over the same topic, a router with --node a1,a2 --replica b1.
# Once every node has seen every event:
# - /v1/heat keeps "nodes" (one answer per member of the group that answered) and adds
#   "merged": its events are the events produced (one group: not twice), each day's events the
#   sum of the members' rows of that day in the same answer, the days add up to every event,
#   each Kafka partition is listed once, the shares of the partitions add up to at most 1, the
#   customers are hottest first with an estimate of at least the error;
# - /v1/heat/history with a bad seconds is a 400 from the router (no fan-out); when the nodes
#   serve /v1/heat/history, the merged columns hold the members' columns summed (the stream was
#   produced within the window) and "second" is the oldest member's; a node without it answers 404, copied;
# - /v1/heat/stream through the router (curl -N, a light load moving the heat seconds): frames
#   with increasing seconds, the first with the whole 300 s history (the burst's columns as the
#   merged history has them), each later one only the columns after the previous frame's; a
#   frame's newest column sums what the members' histories hold for that second; "counts"
#   holds every event; 16 streams at once, the 17th is 503; with a2 and the replica b1 killed
#   the frames go on from a1 alone, with a "warnings" entry naming a2.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"
MODEL_X=(--model events)

"$DAYSHARD" generate --events 20000 --days 5 --customers 50 --seed 7 >"$WORK/events.jsonl"
events=$(wc -l <"$WORK/events.jsonl")

start_broker --partitions 4
declare -A URLS
declare -A PIDS
for n in a1 a2 b1; do
  start_http_node "$n" "$WORK/$n" "g${n:0:1}"
  URLS[$n]=$URL
  PIDS[$n]=$NODE_PID
done
for n in a1 a2 b1; do
  wait_assigned "$n" 30 || die "node $n: no assignment within 30 s"
done
start_router --node "${URLS[a1]},${URLS[a2]}" --replica "${URLS[b1]}"
ds_produce "$WORK/events.jsonl" || die "producer"

get() { curl -s -o "$WORK/body" -w '%{http_code}' --max-time 10 "$R$1"; }
merged_events() {
  [[ $(get "/v1/heat?top=64") == 200 ]] &&
    json_get "$WORK/body" 'd["merged"]["events"] if d["node_group"] == 1 else -1'
}
# The checks below compare group 1's answer. A router keeps the group that answered last as its
# preferred one, so a first ask while a member of group 1 is not ready yet (readiness follows
# its progress; no heat before its first second) hands every later answer to the replica group
# as well. Before the first ask: each member of group 1 has seen its share of the events, and
# the router's prober sees group 1 ready.
node_heat_events() {
  [[ $(status "${URLS[$1]}/v1/heat") == 200 ]] && json_get "$WORK/body" 'd["events"]' || echo 0
}
deadline=$(($(now_ms) + 90000))
until (($(node_heat_events a1) + $(node_heat_events a2) == events)) || (($(now_ms) > deadline)); do
  sleep 0.2
done
until [[ $(status "$R/readyz") == 200 && $(json_get "$WORK/body" 'd["node_group"]') == 1 ]] ||
  (($(now_ms) > deadline)); do
  sleep 0.2
done
until [[ $(merged_events 2>/dev/null) == "$events" ]] || (($(now_ms) > deadline)); do
  sleep 0.5
done
expect_eq "merged heat: every event once" "$events" "$(merged_events)"
cp "$WORK/body" "$WORK/heat.json"
expect_eq "heat: the group's members under nodes" 2 "$(json_get "$WORK/heat.json" 'len(d["nodes"])')"
expect_eq "heat: group 1 answered" 1 "$(json_get "$WORK/heat.json" 'd["node_group"]')"
"$PY" - "$WORK/heat.json" "$events" <<'EOF' || fail "merged heat does not add up"
import json, sys
d = json.load(open(sys.argv[1]))
events = int(sys.argv[2])
m = d["merged"]
members = [n["heat"] for n in d["nodes"]]
errors = []
def check(what, cond):
    if not cond:
        errors.append(what)
check("events = sum of members'", m["events"] == sum(h["events"] for h in members))
check("rate_now = sum of members'", m["rate_now"] == sum(h["rate_now"] for h in members))
per_day = {}
for h in members:
    for row in h["days"]:
        per_day[row["day"]] = per_day.get(row["day"], 0) + row["events"]
check("days = the members' days", {r["day"]: r["events"] for r in m["days"]} == per_day)
check("days hold every event", sum(r["events"] for r in m["days"]) == events)
sources = [k["partition"] for k in m["kafka_partitions"]]
check("each Kafka partition once: %s" % sources, sorted(sources) == [0, 1, 2, 3])
# each share is rounded to 4 places: at most half a unit of the last place per row over 1
check("partition shares at most 1",
      sum(p["share"] for p in m["partitions"]) <= 1 + 0.00005 * len(m["partitions"]) + 1e-9)
peaks = {}
for h in members:
    for p in h["partitions"]:
        peaks[p["key"]] = max(peaks.get(p["key"], 0), p["rate_peak"])
check("a key's peak is the largest member's",
      all(p["rate_peak"] == peaks[p["key"]] for p in m["partitions"]))
c = m["customers"]
check("customers listed", len(c) > 0)
check("customers hottest first", all(c[i]["rate_eps"] >= c[i + 1]["rate_eps"] for i in range(len(c) - 1)))
check("estimates cover their error", all(r["rate_eps"] >= r["error_eps"] for r in c))
check("members counted", m["members"] == 2)
for e in errors:
    print("merged heat:", e, file=sys.stderr)
sys.exit(1 if errors else 0)
EOF

# History: the router checks seconds itself.
expect_eq "history: seconds=0 is 400" 400 "$(get "/v1/heat/history?seconds=0")"
grep -q "1..300" "$WORK/body" && ok || fail "history 400 names the range: $(cat "$WORK/body")"
expect_eq "history: an unknown parameter is 400" 400 "$(get "/v1/heat/history?top=3")"
node_history=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "${URLS[a1]}/v1/heat/history")
if [[ $node_history == 404 ]]; then
  note "the nodes have no /v1/heat/history: the router copies their 404"
  expect_eq "history: a node's 404 copied" 404 "$(get "/v1/heat/history")"
else
  # The members asked before and after the router: their seconds move with the clock, so the
  # merged second lies between the oldest of the first answers and the oldest of the second.
  for n in a1 a2; do
    curl -s --max-time 10 "${URLS[$n]}/v1/heat/history?seconds=300" >"$WORK/before-$n.json"
  done
  expect_eq "history through the router" 200 "$(get "/v1/heat/history?seconds=300")"
  cp "$WORK/body" "$WORK/history.json"
  for n in a1 a2; do
    curl -s --max-time 10 "${URLS[$n]}/v1/heat/history?seconds=300" >"$WORK/history-$n.json"
  done
  "$PY" - "$WORK/history.json" "$events" "$WORK"/before-a{1,2}.json "$WORK"/history-a{1,2}.json <<'EOF' ||
import json, sys
m = json.load(open(sys.argv[1]))
events = int(sys.argv[2])
before = [json.load(open(p)) for p in sys.argv[3:5]]
after = [json.load(open(p)) for p in sys.argv[5:7]]
errors = []
# A column is taken when its second completes (events read later count in the heat only), so
# the members' columns are what the merge must add up to, cell by cell; complete columns never
# change.
def cells(doc, upto):
    out = {}
    for c in doc["columns"]:
        if c["t"] > upto:
            continue
        for day, counts in c["days"].items():
            for k, n in enumerate(counts):
                if n:
                    out[(c["t"], day, k)] = out.get((c["t"], day, k), 0) + n
    return out
merged = cells(m, m["second"])
summed = {}
for h in after:
    for key, n in cells(h, m["second"]).items():
        summed[key] = summed.get(key, 0) + n
if merged != summed:
    diff = [k for k in set(merged) | set(summed) if merged.get(k) != summed.get(k)]
    errors.append("%d cells differ from the members' sums, e.g. %s" % (len(diff), sorted(diff)[:3]))
if not 0 < sum(merged.values()) <= events:
    errors.append("columns hold %d events of %d sent" % (sum(merged.values()), events))
lo = min(h["second"] for h in before if h["second"] is not None)
hi = min(h["second"] for h in after if h["second"] is not None)
if not lo <= m["second"] <= hi:
    errors.append("second %s is not the oldest member's (%s before, %s after)" % (m["second"], lo, hi))
ts = [c["t"] for c in m["columns"]]
if ts != sorted(set(ts)) or (ts and ts[-1] > m["second"]):
    errors.append("columns out of order or past second")
for e in errors:
    print("merged history:", e, file=sys.stderr)
sys.exit(1 if errors else 0)
EOF
    fail "merged history does not add up"
fi

# ---- /v1/heat/stream through the router ----
frames() { grep -c '^event: heat$' "$1" 2>/dev/null || true; }
# wait_frames FILE N SECONDS: until FILE holds N frames.
wait_frames() {
  local deadline=$(($(now_ms) + $3 * 1000))
  while (($(now_ms) < deadline)); do
    (($(frames "$1") >= $2)) && return 0
    sleep 0.1
  done
  return 1
}
# A light load for the rest of the test: the members' heat seconds keep moving.
"$DAYSHARD" generate --events 4000 --days 2 --customers 20 --seed 8 >"$WORK/live.jsonl"
ds_produce "$WORK/live.jsonl" --rate 50 >"$WORK/live-produce.out" 2>&1 &
curl -s -N --max-time 150 "$R/v1/heat/stream" >"$WORK/stream1.txt" 2>/dev/null &
wait_frames "$WORK/stream1.txt" 4 40 ||
  fail "the router's stream: $(frames "$WORK/stream1.txt") frames in 40 s"
[[ -f $WORK/history.json ]] || echo '{"columns":[]}' >"$WORK/history.json"
"$PY" - "$WORK/stream1.txt" "$WORK/history.json" "$events" "${URLS[a1]},${URLS[a2]}" \
  "${URLS[b1]}" <<'PYEOF' ||
import json, sys, urllib.request
text = open(sys.argv[1]).read()
burst = json.load(open(sys.argv[2]))
events = int(sys.argv[3])
frames = []
for block in text.split("\n\n")[:-1]:  # whole events only
    lines = block.split("\n")
    if lines[0] == "event: heat":
        assert len(lines) == 2 and lines[1].startswith("data: "), block[:200]
        frames.append(json.loads(lines[1][6:]))
errors = []
def check(what, cond):
    if not cond:
        errors.append(what)
def cells(column):
    return sum(sum(a) for a in column["days"].values())
check("at least 3 frames", len(frames) >= 3)
seconds = [f["history"]["second"] for f in frames]
check("seconds increase: %s" % seconds, all(a < b for a, b in zip(seconds, seconds[1:])))
first = frames[0]["history"]
check("the first frame asks 300 s", first["seconds"] == 300)
for c in burst["columns"]:  # the burst's seconds, as the merged history has them
    mine = [x for x in first["columns"] if x["t"] == c["t"]]
    check("the first frame holds column %d as the history does" % c["t"],
          len(mine) == 1 and cells(mine[0]) == cells(c))
# A later frame's columns come after the previous frame's second, but for the seconds a member
# amended since (a late event), which come again, inside the window a turn asks.
for prev, f in zip(frames, frames[1:]):
    ts = [c["t"] for c in f["history"]["columns"]]
    check("a later frame's columns %s come after %s or are amended" % (ts, prev["history"]["second"]),
          all(prev["history"]["second"] - 70 < t <= f["history"]["second"] for t in ts))
# The frames together, a later column replacing an earlier one of its second.
columns = {}
for f in frames:
    for c in f["history"]["columns"]:
        columns[c["t"]] = c
for f in frames:  # group 1's two members, or the replica b1 while group 1 is not all ready
    check("heat merged over a whole group: %s" % f["heat"].get("members"),
          f["heat"].get("members") in (1, 2) and "warnings" not in f)
counted = sum(d["count"] for d in frames[-1]["counts"])
check("counts hold every event (%d < %d)" % (counted, events), counted >= events)
check("counts are 1..31 days", 0 < len(frames[-1]["counts"]) <= 31)
# A settled second of the frames, as they left it (amended columns replacing): the sum of that
# second's columns of the members of the group that gave the frame (each group holds every
# event, but the groups' columns may differ). Settled: 3 s before the newest, so the late
# events of it (a partition read a batch behind the other) came, and the frames carry them
# only if the router re-sent the amended column; the newest may still grow after the last
# frame read here.
last = [f for f in frames if f["history"]["columns"]][-1]
settled = [t for t in columns if t <= max(columns) - 3]
newest = columns[max(settled)] if settled else columns[max(columns)]
sums = []
for group in sys.argv[4:]:
    total = 0
    for url in group.split(","):
        with urllib.request.urlopen(url + "/v1/heat/history?seconds=300", timeout=5) as r:
            h = json.load(r)
        total += sum(cells(c) for c in h["columns"] if c["t"] == newest["t"])
    sums.append((len(group.split(",")), total))
check("newest column %d: %d events over %d members, the groups' %s" % (
          newest["t"], cells(newest), last["heat"]["members"], sums),
      (last["heat"]["members"], cells(newest)) in sums and cells(newest) > 0)
for e in errors:
    print("router stream:", e, file=sys.stderr)
print("router stream: %d frames, seconds %s" % (len(frames), seconds))
sys.exit(1 if errors else 0)
PYEOF
  fail "the router's stream frames"

# 16 streams at once (one open already); the 17th is refused.
for ((i = 2; i <= 16; i++)); do
  curl -s -N --max-time 150 "$R/v1/heat/stream" >"$WORK/stream$i.txt" 2>/dev/null &
done
for ((i = 2; i <= 16; i++)); do
  wait_frames "$WORK/stream$i.txt" 1 20 || fail "router stream $i: no frame"
done
expect_eq "the router's 17th stream" 503 "$(get "/v1/heat/stream")"
grep -q '"error"' "$WORK/body" && ok || fail "17th stream's body: $(cat "$WORK/body")"

# a2 and the replica down: the frames go on from a1, saying a2 is missing.
crash_node "${PIDS[a2]}"
crash_node "${PIDS[b1]}"
before=$(frames "$WORK/stream1.txt")
deadline=$(($(now_ms) + 30000))
until grep -q "warnings.*${URLS[a2]}" "$WORK/stream1.txt" || (($(now_ms) > deadline)); do
  sleep 0.2
done
grep -q "warnings.*${URLS[a2]}" "$WORK/stream1.txt" && ok ||
  fail "no frame warned of a2 in 30 s ($(($(frames "$WORK/stream1.txt") - before)) frames since)"
warned=$(frames "$WORK/stream1.txt")
wait_frames "$WORK/stream1.txt" $((warned + 2)) 20 && ok || fail "the frames stalled with a2 down"

stop_router "heat"
finish
