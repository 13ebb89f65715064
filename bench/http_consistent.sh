#!/usr/bin/env bash
# Benchmark: what consistent=true costs on /v1/count of a node (`run --http`): sequential
# requests over one keep-alive connection, REQUESTS plain and REQUESTS consistent on an idle
# node (nothing to wait for: the price is asking the broker for the high watermarks of the
# node's partitions), then ROUNDS of "produce one event (acks=all), then a consistent count"
# (the read-your-writes wait: the node's next group commit). Broker: `dayshard broker` with
# 4 partitions on loopback; the client, broker and node share the machine.
#   usage: bench/http_consistent.sh [DAYSHARD=build/dayshard] [REQUESTS=200] [ROUNDS=50]
set -euo pipefail
DAYSHARD=${1:-build/dayshard}
REQUESTS=${2:-200}
ROUNDS=${3:-50}
work=$(mktemp -d /tmp/dayshard-consistent-XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$work"' EXIT
"$DAYSHARD" broker --partitions 4 >"$work/broker.out" 2>/dev/null &
pids+=($!)
for _ in $(seq 100); do [[ -s $work/broker.out ]] && break; sleep 0.05; done
boot=$(head -1 "$work/broker.out")
"$DAYSHARD" run --brokers "$boot" --topic orders --group bench --data "$work/d" \
  --http 127.0.0.1:0 >"$work/addr" 2>"$work/node.log" &
pids+=($!)
for _ in $(seq 100); do [[ -s $work/addr ]] && break; sleep 0.05; done
addr=$(head -1 "$work/addr")
"$DAYSHARD" generate --events 20000 --profile busy-day >"$work/events.jsonl"
"$DAYSHARD" produce --brokers "$boot" --topic orders "$work/events.jsonl" >/dev/null
/usr/bin/python3 - "$boot" "$addr" "$REQUESTS" "$ROUNDS" <<'EOF'
import http.client, json, sys, time
from kafka import KafkaProducer
boot, addr, requests, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
host, port = addr.rsplit(":", 1)
conn = http.client.HTTPConnection(host, int(port), timeout=30)
RANGE = "/v1/count?day=2026-01-01&to=2026-01-28"

def get(path):
    t0 = time.perf_counter()
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    return time.perf_counter() - t0, r.status, json.loads(body)

def report(name, samples):
    s = sorted(samples)
    q = lambda f: s[min(len(s) - 1, int(f * len(s)))] * 1000
    print("  %-34s n=%4d  p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms" % (name, len(s), q(0.5),
                                                                     q(0.99), s[-1] * 1000))

for _ in range(100):  # until the node stored everything produced (then it is idle)
    _, status, doc = get(RANGE + "&consistent=true&timeout_ms=5000")
    if status == 200 and doc["count"] > 0:
        break
    time.sleep(0.1)  # not in its group yet, or nothing stored yet
print("http_consistent: node idle with %d events, 4 partitions" % doc["count"])
for name, path in (("plain count", RANGE), ("consistent=true count", RANGE + "&consistent=true")):
    for _ in range(10):
        get(path)  # warm
    samples = []
    for _ in range(requests):
        dt, status, _ = get(path)
        assert status == 200, status
        samples.append(dt)
    report(name + " (idle)", samples)
p = KafkaProducer(bootstrap_servers=boot, acks="all", linger_ms=0)
samples = []
for i in range(rounds):
    p.send("orders", value=json.dumps({"order_id": "b%d" % i, "customer_id": 1,
                                       "ts": "2026-01-05T10:00:00Z", "amount": 1}).encode())
    p.flush()
    dt, status, doc = get(RANGE + "&consistent=true")
    assert status == 200, (status, doc)
    samples.append(dt)
report("consistent=true right after produce", samples)
EOF
