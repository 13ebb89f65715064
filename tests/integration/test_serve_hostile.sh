#!/usr/bin/env bash
# Hostile input against `dayshard serve`: a corpus of malformed requests, each answered with its
# 4xx status (a JSON {"error": ...} wherever the service answers rather than libmicrohttpd's
# protocol layer), after each of which the service still answers a good request; then hundreds
# of idle and half-sent connections while real requests keep succeeding.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"

data="$WORK/data"
cat "$FIXTURES/shop.jsonl" "$FIXTURES/busy-day.jsonl" > "$WORK/in.jsonl"
expect_exit "ingest" 0 "$DAYSHARD" ingest --data "$data" --shards 3 "$WORK/in.jsonl"
serve_start "$data"

"$PY" - "$SERVE_ADDR" <<'PYEOF' || fail "hostile corpus"
import json, socket, sys, time

host, port = sys.argv[1].rsplit(":", 1)
port = int(port)
GOOD = b"GET /v1/count?day=2026-01-21 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
failures = 0

def exchange(raw, timeout=5.0):
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        s.sendall(raw)
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            data += chunk
            head, sep, body = data.partition(b"\r\n\r\n")
            if sep:
                length = [int(l.split(b":")[1]) for l in head.split(b"\r\n")
                          if l.lower().startswith(b"content-length:")]
                if length and len(body) >= length[0]:
                    break
        return data
    finally:
        s.close()

def parse(data):
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else 0
    headers = {l.split(b":", 1)[0].strip().lower(): l.split(b":", 1)[1].strip() for l in lines[1:] if b":" in l}
    return status, headers, body

def check(name, raw, want, want_json=True, allow=False):
    global failures
    status, headers, body = parse(exchange(raw))
    problems = []
    if status != want and not (want == 400 and status == 0 and not want_json):
        problems.append("status %d, expected %d" % (status, want))
    if want_json:
        try:
            doc = json.loads(body)
            if not isinstance(doc.get("error"), str) or not doc["error"]:
                problems.append("no error message")
        except ValueError:
            problems.append("body is not JSON: %r" % body[:100])
    if allow and headers.get(b"allow") != b"GET, HEAD":
        problems.append("Allow header %r" % headers.get(b"allow"))
    good, _, good_body = parse(exchange(GOOD))
    if good != 200 or json.loads(good_body)["count"] != 4:
        problems.append("a good request afterwards got %d" % good)
    if problems:
        failures += 1
        print("FAIL: %s: %s" % (name, "; ".join(problems)))

def req(target, extra=b"", method=b"GET"):
    return method + b" " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + extra + b"\r\n"

corpus = [
    ("impossible date", req(b"/v1/count?day=2026-02-30"), 400),
    ("bad date", req(b"/v1/count?day=21-01-2026"), 400),
    ("missing day", req(b"/v1/count"), 400),
    ("to before day", req(b"/v1/count?day=2026-01-21&to=2026-01-01"), 400),
    ("range too long", req(b"/v1/count?day=2020-01-01&to=2026-01-01"), 400),
    ("unknown by", req(b"/v1/count?day=2026-01-21&by=week"), 400),
    ("unknown parameter", req(b"/v1/count?day=2026-01-21&limit=3"), 400),
    ("repeated parameter", req(b"/v1/count?day=2026-01-21&day=2026-01-22"), 400),
    ("status too long", req(b"/v1/count?day=2026-01-21&status=" + b"x" * 40), 400),
    ("bad percent-encoding", req(b"/v1/count?day=2026-01-21&status=%G1"), 400),
    ("truncated percent", req(b"/v1/count?day=2026-01-21&status=%"), 400),
    ("NUL percent-encoded", req(b"/v1/count?day=2026-01-21%00&status=paid"), 400),
    ("NUL in path", req(b"/v1/count%00?day=2026-01-21"), 400),
    ("non-ASCII byte", req(b"/v1/count?day=2026-01-21&status=\xff"), 400),
    ("unknown path", req(b"/v2/count?day=2026-01-21"), 404),
    ("the console with a parameter it does not take", req(b"/?day=2026-01-21"), 400),
    ("a file beside the console", req(b"/index.html"), 404),
    ("path traversal", req(b"/../../etc/passwd"), 404),
    ("POST", req(b"/v1/count?day=2026-01-21", method=b"POST"), 405, True, True),
    ("POST with a body", req(b"/v1/count?day=2026-01-21", b"Content-Length: 5\r\n", b"POST") + b"hello", 405, True, True),
    ("DELETE metrics", req(b"/metrics", method=b"DELETE"), 405, True, True),
    ("partitions without day", req(b"/v1/partitions"), 400),
    ("orders bad limit", req(b"/v1/customers/3/orders?limit=-1"), 400),
    ("long target (414, ours)", req(b"/v1/count?day=2026-01-21&status=" + b"a" * 3000), 414),
    ("long headers (431, ours)", req(b"/healthz", b"X-Pad: " + b"p" * 9000 + b"\r\n"), 431),
    ("many headers (431, ours)", req(b"/healthz", b"".join(b"X-%d: %s\r\n" % (i, b"v" * 100) for i in range(100))), 431),
    # Past libmicrohttpd's 32 KiB connection memory its own layer answers (status checked).
    ("huge target (414)", req(b"/v1/count?day=" + b"a" * 40000), 414, False),
    ("huge header (431)", req(b"/healthz", b"X-Pad: " + b"p" * 40000 + b"\r\n"), 431, False),
    # Not HTTP at all: a 400 or a closed connection. (Bytes that never form a request line,
    # such as a lone NUL, are an idle connection to libmicrohttpd: closed at the idle timeout.)
    ("garbage request line", b"nonsense here\r\n\r\n", 400, False),
    ("bad HTTP version", b"GET /healthz HTTP/9.7\r\nHost: x\r\n\r\n", 505, False),
    ("raw NUL in the request line", b"GET /v1/count?day=2026\x00-01-21 HTTP/1.1\r\nHost: x\r\n\r\n", 400, False),
]
for case in corpus:
    check(*case)

# Hundreds of idle connections and half-sent requests must not starve real ones.
idle = []
for i in range(300):
    idle.append(socket.create_connection((host, port), timeout=5))
for i in range(100):
    s = socket.create_connection((host, port), timeout=5)
    s.sendall(b"GET /v1/count?day=2026-01-21 HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    idle.append(s)
time.sleep(0.2)
worst = 0.0
for i in range(50):
    t0 = time.monotonic()
    status, _, body = parse(exchange(GOOD, timeout=3))
    worst = max(worst, time.monotonic() - t0)
    if status != 200:
        failures += 1
        print("FAIL: request %d among 400 idle connections: status %d" % (i, status))
        break
if worst > 1.0:
    failures += 1
    print("FAIL: a request among idle connections took %.3f s" % worst)
for s in idle:
    s.close()
print("hostile corpus: %d cases, 50 requests among 400 idle connections (worst %.1f ms), %d failures"
      % (len(corpus), worst * 1000, failures))
sys.exit(1 if failures else 0)
PYEOF
ok
expect_eq "still serving" 200 "$(get "/v1/count?day=2026-01-21")"
serve_stop
finish
