#!/usr/bin/env bash
# A node that hangs is not a node that is slow: a router (--timeout-ms 1000) over group A (A1,
# A2) and group B (B1, B2), each a consumer group of two nodes holding every order of the
# stream. Two clients ask the total count through the router (16 workers) without pause, and a
# third sends one request every 100 ms whatever the others wait for, while one node stops
# answering without closing its connections (SIGSTOP):
# - a node of the preferred group frozen (the group that answered last), once in each group in
#   turn: every answer is 200 and exact; the slowest takes at most the timeout plus 0.5 s; each
#   closed-loop client has at most one answer slower than 0.8 x the timeout (the one on its way
#   when the node froze); no answer slower than a quarter of the timeout ends later than the
#   timeout plus 0.5 s after the freeze (the hang costs one timeout in all, not one per request
#   on its way). SIGCONT brings the node back: the router's prober marks it ready again and
#   answers stay exact.
# - a node of each group frozen at once: no complete replica, 503 at most the timeout plus
#   0.5 s after the freeze and at once afterwards; partial=true answers 200 marked partial,
#   naming both frozen nodes.
# Every phase prints its latencies (median before, first after the freeze, median and max
# after, in ms).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"
RANGE="day=2026-01-01&to=2026-01-28"
TIMEOUT_MS=1000
CLIENTS=2

"$DAYSHARD" generate --events 20000 --seed 26 >"$WORK/events.jsonl"
want=$(truth "$WORK/events.jsonl" | total_of)
note "orders: $want"

start_broker --partitions 4
declare -A URLS PIDS
for n in a1 a2 b1 b2; do
  start_http_node "$n" "$WORK/$n" "g${n:0:1}"
  URLS[$n]=$URL
  PIDS[$n]=$NODE_PID
done
for n in a1 a2 b1 b2; do
  wait_assigned "$n" 30 || die "node $n: no assignment within 30 s"
done
ds_produce "$WORK/events.jsonl" || die "producer"

# group_total NODE...: the members' counts added up.
group_total() {
  local n total=0 c
  for n in "$@"; do
    c=$(curl -s --max-time 5 "${URLS[$n]}/v1/count?$RANGE" |
      "$PY" -c 'import json,sys; print(json.load(sys.stdin)["count"])' 2>/dev/null || echo 0)
    total=$((total + c))
  done
  echo "$total"
}
deadline=$(($(now_ms) + 90000))
while (($(now_ms) < deadline)); do
  [[ $(group_total a1 a2) == "$want" && $(group_total b1 b2) == "$want" ]] && break
  sleep 0.5
done
expect_eq "group A holds every order" "$want" "$(group_total a1 a2)"
expect_eq "group B holds every order" "$want" "$(group_total b1 b2)"

start_router --node "${URLS[a1]},${URLS[a2]}" --replica "${URLS[b1]},${URLS[b2]}" \
  --partitions 4 --probe-ms 200 --timeout-ms "$TIMEOUT_MS" --threads 16

get() { curl -s --max-time 20 -o "$WORK/body" -w '%{http_code}' "$R$1" || echo 000; }

# clients SECONDS OUT [partial]: CLIENTS threads asking the total count without pause for
# SECONDS; one line per answer in OUT: client, start (epoch ms), latency ms, status, count,
# node_group, partial, missing.
clients() {
  "$PY" - "$R/v1/count?$RANGE${3:+&partial=true}" "$1" "$CLIENTS" "$2" <<'EOF'
import json, sys, threading, time, urllib.error, urllib.request
url, seconds, clients, out = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
lines, lock = [], threading.Lock()
def record(k, t0, code, body):
    ms = (time.time() - t0) * 1000
    try:
        d = json.loads(body)
    except ValueError:
        d = {}
    with lock:
        lines.append("%d %d %.1f %d %s %s %s %s" % (
            k, t0 * 1000, ms, code, d.get("count", -1), d.get("node_group", 0),
            d.get("partial", False), ",".join(sorted(d.get("missing", []))) or "-"))
def run(k):
    end = time.time() + seconds
    while time.time() < end:
        one(k)
def one(k):
    t0 = time.time()
    try:
        with urllib.request.urlopen(url, timeout=20) as r:
            code, body = r.status, r.read()
    except urllib.error.HTTPError as e:
        code, body = e.code, e.read()
    except Exception as e:
        code, body = 0, b"{}"
    record(k, t0, code, body)
def spaced():
    # open loop: a request every 100 ms whatever the others wait for
    end, sent = time.time() + seconds, []
    while time.time() < end:
        t = threading.Thread(target=one, args=(clients + len(sent),))
        t.start()
        sent.append(t)
        time.sleep(0.1)
    for t in sent: t.join()
threads = [threading.Thread(target=run, args=(k,)) for k in range(clients)]
threads.append(threading.Thread(target=spaced))
for t in threads: t.start()
for t in threads: t.join()
open(out, "w").write("\n".join(lines) + "\n")
EOF
}

# judge WHAT OUT FREEZE_MS WANT_STATUS WANT_COUNT WANT_MISSING: the answers of clients against
# the freeze at FREEZE_MS (epoch ms, taken once the signal was sent; 0: frozen before the
# clients started). Prints the latencies;
# checks the status, count and missing list of every request that started after the freeze,
# the slowest answer that ended after it, and at most one slow answer per client.
judge() {
  "$PY" - "$@" "$TIMEOUT_MS" <<'EOF'
import statistics, sys
what, out, freeze, status, count, missing, timeout = sys.argv[1:8]
freeze, timeout = int(freeze), int(timeout)
rows = sorted((int(r[1]), float(r[2]), r) for r in (l.split() for l in open(out) if l.strip()))
before = [ms for t0, ms, _ in rows if t0 + ms < freeze]
after = [(t0, ms, r) for t0, ms, r in rows if t0 + ms >= freeze]
started = [(t0, ms, r) for t0, ms, r in after if t0 >= freeze]
bad = []
if len(started) < 10:
    bad.append("only %d requests started after the freeze" % len(started))
wrong = [r for _, _, r in started if r[3] != status or (count != "-" and r[4] != count) or r[7] != missing]
if wrong:
    bad.append("%d answers not %s count %s missing %s, e.g. %s" % (len(wrong), status, count, missing, " ".join(wrong[0])))
lat = [ms for _, ms, _ in after]
slowest = max(lat) if lat else -1
if slowest > timeout + 500:
    bad.append("the slowest took %.0f ms, over the timeout + 500 ms" % slowest)
# The hang costs one timeout in all: a request that came while the first one waited ends
# with it, not a timeout after its own start; no answer that waited on the frozen node (most of
# a timeout) ends later. Shorter ones are the machine's: with a busy loop per core an answer 2 s
# after the freeze took 360 ms (median 2.6 ms).
late = [(t0 - freeze, ms) for t0, ms, _ in after
        if freeze > 0 and ms > 0.8 * timeout and t0 + ms > freeze + timeout + 500]
if late:
    bad.append("%d answers ended over the timeout + 500 ms after the freeze, e.g. started "
               "%+d ms after it, took %.0f ms" % (len(late), late[0][0], late[0][1]))
for k in sorted({r[0] for _, _, r in after}):
    slow = [ms for _, ms, r in after if r[0] == k and ms > 0.8 * timeout]
    if freeze > 0 and len(slow) > 1:
        bad.append("client %s: %d answers slower than %.0f ms: %s" % (k, len(slow), 0.8 * timeout, slow))
waited = [t0 + ms - freeze for t0, ms, _ in after if t0 < freeze]
print("%s: before the freeze %d answers, median %.1f ms; after: %d answers, median %.1f ms, "
      "max %.1f ms; the last in flight at the freeze ended %.0f ms after it; the first started "
      "after it took %.1f ms" % (
    what, len(before), statistics.median(before) if before else -1, len(after),
    statistics.median(lat) if lat else -1, slowest, max(waited) if waited else -1,
    started[0][1] if started else -1))
if bad:
    sys.exit("FAIL: %s: %s" % (what, "; ".join(bad)))
EOF
}

# preferred: the group that answered the last count (1 or 2).
preferred() {
  expect_eq "a count before the freeze" 200 "$(get "/v1/count?$RANGE")" >&2
  json_get "$WORK/body" 'd["node_group"]'
}

# wait_ready NODE...: until the router's /metrics says each is ready (10 s).
wait_ready() {
  local n deadline=$(($(now_ms) + 10000)) all
  while (($(now_ms) < deadline)); do
    get /metrics >/dev/null
    all=1
    for n in "$@"; do
      grep -q "^dayshard_router_node_ready{node=\"${URLS[$n]}\",group=\"[12]\"} 1" "$WORK/body" || all=0
    done
    ((all)) && return 0
    sleep 0.1
  done
  fail "the router did not see $* ready again within 10 s"
}

# One node of the preferred group frozen, each group in turn.
for turn in 1 2; do
  g=$(preferred)
  [[ $g == 1 ]] && victim=a$turn || victim=b$turn
  note "turn $turn: group $g preferred; freezing $victim"
  clients 5 "$WORK/c$turn" &
  cpid=$!
  sleep 1.5
  kill -STOP "${PIDS[$victim]}"
  freeze=$(now_ms)
  wait "$cpid" || fail "turn $turn: clients"
  # shellcheck disable=SC2015
  judge "turn $turn ($victim frozen)" "$WORK/c$turn" "$freeze" 200 "$want" - && ok ||
    fail "turn $turn: see above"
  kill -CONT "${PIDS[$victim]}"
  wait_ready "$victim"
  expect_eq "turn $turn: thawed, exact" "200 $want" "$(get "/v1/count?$RANGE") $(json_get "$WORK/body" 'd["count"]')"
done

# A node of each group frozen at once: 503 naming both; partial=true marked partial.
both=$("$PY" -c 'import sys; print(",".join(sorted(sys.argv[1:])))' "${URLS[a2]}" "${URLS[b2]}")
clients 4 "$WORK/c3" &
cpid=$!
sleep 1.5
kill -STOP "${PIDS[a2]}" "${PIDS[b2]}"
freeze=$(now_ms)
wait "$cpid" || fail "both: clients"
# shellcheck disable=SC2015
judge "both frozen" "$WORK/c3" "$freeze" 503 - "$both" && ok || fail "both frozen: see above"
clients 2 "$WORK/c4" partial
# shellcheck disable=SC2015
judge "both frozen, partial=true" "$WORK/c4" 0 200 - "$both" && ok || fail "both frozen, partial: see above"
partial=$(awk 'NR == 1 {print $5}' "$WORK/c4")
((partial > 0 && partial < want)) && ok || fail "partial count $partial of $want"
expect_eq "partial answers say so" True "$(awk '{print $7}' "$WORK/c4" | sort -u)"
kill -CONT "${PIDS[a2]}" "${PIDS[b2]}"
wait_ready a2 b2
expect_eq "both thawed, exact" "200 $want" "$(get "/v1/count?$RANGE") $(json_get "$WORK/body" 'd["count"]')"

kill -TERM "$ROUTER_PID"
set +e
wait "$ROUTER_PID"
rc=$?
set -e
expect_eq "router: exit status after SIGTERM" 0 "$rc"
for n in a1 a2 b1 b2; do stop_node "$n" "${PIDS[$n]}"; done
stop_broker
finish
