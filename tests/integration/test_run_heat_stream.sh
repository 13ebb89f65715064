#!/usr/bin/env bash
# The heat console's live data on a real node under a busy-day load (one run, the default
# orders model: heat counts writes before storage, whatever the model):
# - GET /v1/heat/history: the newest column is the second /v1/heat reports, its cells add up to
#   that second's rate_now, and the hottest partition's cell is its rate_now; bad ?seconds= 400;
# - the history holds every event (a late event, read after its second completed, re-takes
#   its column), so its per-second sums add up to what the node read;
# - GET /v1/heat/stream (curl -N): frames with increasing revisions, each history only the
#   columns taken (appended or amended) after the previous frame's revision, the first one the
#   whole history; the frames' columns, a later one replacing an earlier one of its second, are
#   the history;
# - 16 streams at once, the 17th answers 503; closing one makes room again;
# - `serve` has no heat (501);
# - SIGTERM with streams open: the node exits 0 within its 10 s bound and the streams end.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"
STOP_BOUND_MS=10000
STREAMS_MAX=16

# frames FILE: the JSON of each frame of an event stream, one a line.
frames() { sed -n 's/^data: //p' "$1"; }
# frame_count FILE
frame_count() { grep -c '^event: heat$' "$1" 2>/dev/null || true; }
# wait_frames FILE N SECONDS: until FILE holds N frames (whole: the data line after the event).
wait_frames() {
  local deadline=$(($(now_ms) + $3 * 1000))
  while (($(now_ms) < deadline)); do
    (($(frames "$1" | wc -l) >= $2)) && return 0
    sleep 0.1
  done
  return 1
}

start_heat_node 28 "$WORK/load.jsonl"
expected=$EXPECTED

# A stream open before the load: it sees every second of it.
curl -s -N --max-time 120 "$URL_A/v1/heat/stream" >"$WORK/stream1.txt" 2>/dev/null &
CURL1=$!

# While the load runs, compare /v1/heat with the history's newest column of the same second
# (asked until both answered for one second with writes in it).
"$PY" - "$URL_A" >"$WORK/compare.txt" 2>&1 <<'PYEOF' &
import calendar, json, sys, time, urllib.request
url = sys.argv[1]
def get(path):
    with urllib.request.urlopen(url + path, timeout=5) as r:
        return json.load(r)
deadline = time.time() + 60
matched = 0
while time.time() < deadline and matched < 3:
    heat = get("/v1/heat?top=1")
    hist = get("/v1/heat/history?seconds=5")
    again = get("/v1/heat?top=1")
    if heat["second"] is None or heat["second"] != again["second"] or heat["rate_now"] == 0:
        time.sleep(0.05)
        continue
    second = calendar.timegm(time.strptime(heat["second"], "%Y-%m-%dT%H:%M:%SZ"))
    if hist["second"] != second:
        time.sleep(0.05)
        continue
    newest = hist["columns"][-1]
    cells = sum(sum(v) for v in newest["days"].values())
    p = heat["partitions"][0]
    cell = newest["days"].get(p["day"], [])
    hot = cell[p["shard"]] if p["shard"] < len(cell) else 0
    print("second", newest["t"] == second, "sum", cells, heat["rate_now"], "hottest", hot,
          p["rate_now"], flush=True)
    matched += 1
    time.sleep(0.3)
print("matched", matched)
PYEOF
comparer=$!
# 8,000/s: 12.5 s of writes, so that the comparer finds its three seconds with writes on a busy
# machine too (at 25,000/s, 4 s of writes, it found two beside a busy loop per core). The busy day
# still takes 8,000/s in its turn, over its 4 shards' capacity.
ds_produce "$WORK/load.jsonl" --rate 8000 || fail "produce the load"
wait_counts "counts" "$expected" 60 "$WORK/a"
wait "$comparer" || fail "the comparer failed: $(tail -n 3 "$WORK/compare.txt")"
expect_eq "history and heat compared in seconds with writes" "matched 3" "$(tail -n 1 "$WORK/compare.txt")"
bad=$(awk '$1 == "second" && !($2 == "True" && $4 == $5 && $7 == $8)' "$WORK/compare.txt")
expect_eq "the newest column is /v1/heat's second: cells add up to rate_now, hottest cell = its rate_now" "" "$bad"

# The history: the busy day's seconds, the growth of the busy day with its heat second.
expect_eq "history" 200 "$(status "$URL_A/v1/heat/history")"
cp "$WORK/body" "$WORK/history.json"
expect_eq "history shape" "1 300 1000" \
  "$(json_get "$WORK/history.json" '"%d %d %d" % (d["version"], d["seconds"], d["shard_capacity_eps"])')"
# A column is taken when its second completes and taken again when a late event of it comes
# (one Kafka partition read behind the others, inside the heat's 60 s window), so once the
# node has read everything the history holds every event. The re-take follows the next heat
# second: wait for it.
history_sum='sum(sum(sum(v) for v in c["days"].values()) for c in d["columns"])'
deadline=$(($(now_ms) + 15000))
in_history=0
while ((in_history != 100000 && $(now_ms) < deadline)); do
  [[ $(status "$URL_A/v1/heat/history") == 200 ]] || fail "history: $(cat "$WORK/body")"
  cp "$WORK/body" "$WORK/history.json"
  in_history=$(json_get "$WORK/history.json" "$history_sum")
  ((in_history == 100000)) || sleep 0.2
done
expect_eq "history: every event in its second's column, late ones too" 100000 "$in_history"
expect_eq "history: a revision, and one per column at most the document's" "True" \
  "$(json_get "$WORK/history.json" 'd["revision"] > 0 and all(0 < c["revision"] <= d["revision"] for c in d["columns"])')"
expect_eq "history: every column's cells are positive counts" "True" \
  "$(json_get "$WORK/history.json" 'all(sum(v) > 0 and min(v) >= 0 for c in d["columns"] for v in c["days"].values())')"
expect_eq "columns oldest first, within the window" "True" \
  "$(json_get "$WORK/history.json" 'all(a["t"] < b["t"] for a, b in zip(d["columns"], d["columns"][1:])) and d["columns"][0]["t"] > d["second"] - 300')"
expect_eq "a growth of the busy day, at a second of the window" "True" \
  "$(json_get "$WORK/history.json" 'any(g["day"] == "2026-01-21" and d["second"] - 300 < g["t"] <= d["second"] and g["to"] > g["from"] for g in d["growths"])')"
expect_eq "history ?seconds=1" 200 "$(status "$URL_A/v1/heat/history?seconds=1")"
expect_eq "history ?seconds=1 holds at most one column" "True" \
  "$(json_get "$WORK/body" 'len(d["columns"]) <= 1 and d["seconds"] == 1')"
for bad in "seconds=0" "seconds=301" "seconds=x" "top=3"; do
  expect_eq "history ?$bad" 400 "$(status "$URL_A/v1/heat/history?$bad")"
done

# The first stream: frames with increasing revisions, each history only what was taken after the
# previous frame (new seconds, and seconds amended by late events), so together, a later column
# replacing an earlier one of the same second, they hold the whole history.
wait_frames "$WORK/stream1.txt" 3 30 || fail "stream 1: fewer than 3 frames"
# Until its frames reach the history's revision (a frame follows a revision within a tick).
revision=$(json_get "$WORK/history.json" 'd["revision"]')
deadline=$(($(now_ms) + 10000))
last_revision() {
  frames "$1" | "$PY" -c '
import json, sys
r = 0
for line in sys.stdin:
    try:
        r = json.loads(line)["history"]["revision"]
    except ValueError:
        pass  # the line being written
print(r)'
}
while (($(last_revision "$WORK/stream1.txt") < revision)); do
  if (($(now_ms) >= deadline)); then
    fail "stream 1: no frame of revision $revision"
    break
  fi
  sleep 0.1
done
frames "$WORK/stream1.txt" >"$WORK/frames1.jsonl"
"$PY" - "$WORK/frames1.jsonl" >"$WORK/frames1.txt" 2>&1 <<'PYEOF' || fail "stream 1 frames: $(cat "$WORK/frames1.txt")"
import json, sys
frames = [json.loads(line) for line in open(sys.argv[1])]
revisions = [f["history"]["revision"] for f in frames]
assert all(a < b for a, b in zip(revisions, revisions[1:])), revisions
seconds = [f["history"]["second"] for f in frames]
assert all(a <= b for a, b in zip(seconds, seconds[1:])), seconds
for prev, f in zip(frames, frames[1:]):
    assert all(c["revision"] > prev["history"]["revision"] for c in f["history"]["columns"]), f["history"]
    assert all(c["t"] <= f["history"]["second"] for c in f["history"]["columns"])
assert all("partitions" in f["heat"] and "counts" in f for f in frames)
columns = {}
amended = 0
for f in frames:
    for c in f["history"]["columns"]:
        amended += 1 if c["t"] in columns else 0
        columns[c["t"]] = c
print(len(frames), sum(sum(sum(v) for v in c["days"].values()) for c in columns.values()), amended)
PYEOF
echo "stream 1: $(cut -d' ' -f1 "$WORK/frames1.txt") frames, $(cut -d' ' -f3 "$WORK/frames1.txt") amended columns"
expect_eq "stream 1: the frames' histories together hold the history" "$in_history" "$(cut -d' ' -f2 "$WORK/frames1.txt")"

# A stream opened now: its first frame carries the whole history, as /v1/heat/history. Its
# headers are checked on this stream: a probe closed early would hold a stream's place until the
# node notices it gone (at its next writes), and the count of 16 below would race that.
curl -s -N -D "$WORK/headers.txt" --max-time 120 "$URL_A/v1/heat/stream" >"$WORK/stream2.txt" 2>/dev/null &
CURL2=$!
wait_frames "$WORK/stream2.txt" 1 10 || fail "stream 2: no frame"
grep -qi '^content-type: text/event-stream' "$WORK/headers.txt" && grep -qi '^cache-control: no-cache' "$WORK/headers.txt" &&
  ok || fail "stream headers: $(cat "$WORK/headers.txt")"
# sed -n 1p, not head: head exits at the first line and, with a frame or two more already in the
# file, sed dies of SIGPIPE, which pipefail and set -e turn into the script's exit (status 141).
frames "$WORK/stream2.txt" | sed -n 1p >"$WORK/first2.json"
expect_eq "stream 2: the first frame holds the whole history" "$in_history" \
  "$(json_get "$WORK/first2.json" 'sum(sum(sum(v) for v in c["days"].values()) for c in d["history"]["columns"])')"
days_held=$(grep -c = <<<"$expected")
((days_held > 31)) && days_held=31
expect_eq "stream 2: counts of the newest days held (at most 31), oldest first" "$days_held True" \
  "$(json_get "$WORK/first2.json" '"%d %s" % (len(d["counts"]), all(a["day"] < b["day"] for a, b in zip(d["counts"], d["counts"][1:])))')"
last_day=$(json_get "$WORK/first2.json" 'd["counts"][-1]["day"]')
expect_eq "stream 2: the newest day's count" "$(grep "^$last_day=" <<<"$expected" | cut -d= -f2)" \
  "$(json_get "$WORK/first2.json" 'd["counts"][-1]["count"]')"

# 16 streams at once (two open already); the 17th is refused; closing one makes room.
pids=()
for ((i = 3; i <= STREAMS_MAX; i++)); do
  curl -s -N --max-time 120 "$URL_A/v1/heat/stream" >"$WORK/stream$i.txt" 2>/dev/null &
  pids+=($!)
done
for ((i = 3; i <= STREAMS_MAX; i++)); do
  wait_frames "$WORK/stream$i.txt" 1 15 || fail "stream $i: no frame"
done
expect_eq "the 17th stream" 503 "$(status "$URL_A/v1/heat/stream")"
grep -q "too many event streams" "$WORK/body" && ok || fail "17th stream's body: $(cat "$WORK/body")"
kill "${pids[0]}" 2>/dev/null
wait "${pids[0]}" 2>/dev/null || true
# The node notices the closed stream at its next frame (within a second or two).
deadline=$(($(now_ms) + 10000))
code=503
while ((code != 200 && $(now_ms) < deadline)); do
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$URL_A/v1/heat/stream" 2>/dev/null || true)
  ((code == 200)) || sleep 0.2
done
expect_eq "a stream again once one closed" 200 "$code"
# /v1/heat still answers with 16 streams open: they hold no worker.
expect_eq "heat beside 16 streams" 200 "$(status "$URL_A/v1/heat?top=1")"

# SIGTERM with the streams open: exit 0 within the bound, and the streams end.
started=$(now_ms)
kill -TERM "$PID_A"
(sleep 60 && kill -KILL "$PID_A") </dev/null >/dev/null 2>&1 &
watchdog=$!
set +e
wait "$PID_A"
rc=$?
set -e
stop_ms=$(($(now_ms) - started))
{ kill_tree "$watchdog"; wait "$watchdog"; } 2>/dev/null || true
expect_eq "node exit status after SIGTERM with streams open" 0 "$rc"
((stop_ms <= STOP_BOUND_MS)) && ok || fail "stopped in $stop_ms ms with streams open (bound $STOP_BOUND_MS ms)"
echo "stop with $STREAMS_MAX streams open: $stop_ms ms"
ended=0
for pid in "$CURL1" "$CURL2" "${pids[@]:1}"; do
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null || ended=$((ended + 1))
done
expect_eq "every stream ended with the node" $((STREAMS_MAX - 1)) "$ended"

# `serve` measures no heat: no history, no stream.
start_serve "$WORK/a"
expect_eq "serve history" 501 "$(status "$SERVE_URL/v1/heat/history")"
expect_eq "serve stream" 501 "$(status "$SERVE_URL/v1/heat/stream")"
kill -TERM "$SERVE_PID"
wait "$SERVE_PID" || true

finish
