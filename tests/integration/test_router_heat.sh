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
#   serve /v1/heat/history, the merged columns hold every event (the stream was produced within
#   the window) and "second" is the oldest member's; a node without it answers 404, copied.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"
MODEL_X=(--model events)

"$DAYSHARD" generate --events 20000 --days 5 --customers 50 --seed 7 >"$WORK/events.jsonl"
events=$(wc -l <"$WORK/events.jsonl")

start_broker --partitions 4
declare -A URLS
for n in a1 a2 b1; do
  start_http_node "$n" "$WORK/$n" "g${n:0:1}"
  URLS[$n]=$URL
done
for n in a1 a2 b1; do
  wait_assigned "$n" 30 || die "node $n: no assignment within 30 s"
done
start_router --node "${URLS[a1]},${URLS[a2]}" --replica "${URLS[b1]}"
ds_produce "$WORK/events.jsonl" || die "producer"

get() { curl -s -o "$WORK/body" -w '%{http_code}' --max-time 10 "$R$1"; }
merged_events() {
  [[ $(get "/v1/heat?top=64") == 200 ]] && json_get "$WORK/body" 'd["merged"]["events"]'
}
deadline=$(($(now_ms) + 90000))
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
check("partition shares at most 1", sum(p["share"] for p in m["partitions"]) <= 1.0001)
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
  expect_eq "history through the router" 200 "$(get "/v1/heat/history?seconds=300")"
  cp "$WORK/body" "$WORK/history.json"
  for n in a1 a2; do
    curl -s --max-time 10 "${URLS[$n]}/v1/heat/history?seconds=300" >"$WORK/history-$n.json"
  done
  "$PY" - "$WORK/history.json" "$events" "$WORK/history-a1.json" "$WORK/history-a2.json" <<'EOF' ||
import json, sys
m = json.load(open(sys.argv[1]))
events = int(sys.argv[2])
members = [json.load(open(p)) for p in sys.argv[3:]]
errors = []
# A node's column is taken when its second completes (events read later are not in it), so
# the merged history is checked against its members' columns, not against the events sent.
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
for h in members:
    for key, n in cells(h, m["second"]).items():
        summed[key] = summed.get(key, 0) + n
if merged != summed:
    diff = [k for k in set(merged) | set(summed) if merged.get(k) != summed.get(k)]
    errors.append("%d cells differ from the members' sums, e.g. %s" % (len(diff), sorted(diff)[:3]))
if sum(merged.values()) == 0 or sum(merged.values()) > events:
    errors.append("columns hold %d events of %d sent" % (sum(merged.values()), events))
seconds = [h["second"] for h in members if h["second"] is not None]
if m["second"] != min(seconds):
    errors.append("second %s is not the oldest member's %s" % (m["second"], seconds))
ts = [c["t"] for c in m["columns"]]
if ts != sorted(set(ts)) or (ts and ts[-1] > m["second"]):
    errors.append("columns out of order or past second")
for e in errors:
    print("merged history:", e, file=sys.stderr)
sys.exit(1 if errors else 0)
EOF
    fail "merged history does not add up"
fi

stop_router "heat"
finish
