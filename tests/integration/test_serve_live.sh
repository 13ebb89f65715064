#!/usr/bin/env bash
# `serve` beside a live writer: the service starts on an empty store, `dayshard ingest`
# appends from a slow pipe, and a keep-alive client polls /v1/count. Every answer must be at
# most what was written so far, never lower than the previous answer (count and as_of alike),
# and the service must see the new blocks, new days and the final total without a restart.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"

data="$WORK/data"
# Only a writer makes a store (a reader refuses a directory without one): an empty ingest.
"$DAYSHARD" ingest --data "$data" /dev/null >/dev/null || fail "creating an empty store"
serve_start "$data"
"$DAYSHARD" generate --events 40000 --profile busy-day --seed 11 > "$WORK/in.jsonl"

"$PY" - "$SERVE_ADDR" "$DAYSHARD" "$data" "$WORK/in.jsonl" <<'PYEOF' || fail "live counts"
import http.client, json, subprocess, sys, threading, time

addr, dayshard, data, path = sys.argv[1:5]
lines = open(path, "rb").read().splitlines(keepends=True)
ingest = subprocess.Popen([dayshard, "ingest", "--data", data, "--shards", "4",
                           "--commit-interval-ms", "50", "-"], stdin=subprocess.PIPE)
written = 0
lock = threading.Lock()

# `written` counts a chunk before it enters the pipe, and the bound is read after the answer
# arrives: an event the answer counts went into the pipe before it, so it is in the bound however
# the threads are scheduled.
def writer():
    global written
    for i in range(0, len(lines), 1000):
        chunk = lines[i:i + 1000]
        with lock:
            written += len(chunk)
        ingest.stdin.write(b"".join(chunk))
        ingest.stdin.flush()
        time.sleep(0.05)
    ingest.stdin.close()

t = threading.Thread(target=writer)
t.start()
conn = http.client.HTTPConnection(*addr.rsplit(":", 1), timeout=5)
query = "/v1/count?day=2026-01-01&to=2026-01-31&by=day"
failures, last_count, last_offset, answers, distinct = 0, -1, -1, 0, set()
while True:
    done = not t.is_alive() and ingest.poll() is not None
    conn.request("GET", query)
    resp = conn.getresponse()
    doc = json.loads(resp.read())
    with lock:
        bound = written
    answers += 1
    count, offset = doc["count"], doc["as_of"].get("file", 0)
    distinct.add(count)
    if resp.status != 200 or count > bound or count < last_count or offset < last_offset:
        failures += 1
        print("FAIL: status %d count %d (written %d, previous %d) as_of %d (previous %d)"
              % (resp.status, count, bound, last_count, offset, last_offset))
        break
    if sum(g["count"] for g in doc["groups"]) != count:
        failures += 1
        print("FAIL: groups do not add up to the count")
    last_count, last_offset = count, offset
    if done:
        break
    time.sleep(0.01)
t.join()
if ingest.wait() != 0:
    failures += 1
    print("FAIL: ingest exit %d" % ingest.returncode)
if last_count != len(lines):
    failures += 1
    print("FAIL: final count %d, written %d" % (last_count, len(lines)))
if len(distinct) < 5:
    failures += 1
    print("FAIL: only %d distinct counts seen while ingesting: not live" % len(distinct))
print("live: %d answers, %d distinct counts, final %d of %d" % (answers, len(distinct), last_count, len(lines)))
sys.exit(1 if failures else 0)
PYEOF
ok
"$DAYSHARD" count --data "$data" --day 2026-01-01 --to 2026-01-31 --by day --json > "$WORK/cli.json"
expect_eq "final answer equals count --data" "" "$("$PY" -c '
import json, sys, urllib.request
http = json.load(urllib.request.urlopen("http://%s/v1/count?day=2026-01-01&to=2026-01-31&by=day" % sys.argv[1]))
http.pop("as_of"); cli = json.load(open(sys.argv[2]))
print("" if http == cli else "differs")' "$SERVE_ADDR" "$WORK/cli.json")"
serve_stop
finish
