#!/usr/bin/env bash
# `dayshard top` against canned heat documents (GET /v1/heat) served by a small python3 HTTP
# server on a free loopback port, so the view is tested apart from a node: a full document, one
# with nulls, one with whole sections missing, a node answering 503, 500, 404 and non-JSON, a
# dead node; the live mode (frames one after another off a terminal, a clean exit on SIGTERM and
# SIGINT, an error frame while the node is away); usage errors and --help.
source "$(dirname "$0")/lib.sh"

HEAT_PID=""
TOP_PID=""
cleanup() {
  local pid
  for pid in $TOP_PID $HEAT_PID; do
    kill -KILL "$pid" 2> /dev/null || true
    wait "$pid" 2> /dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

docs="$WORK/docs"
mkdir -p "$docs"

# /NAME/v1/heat answers docs/NAME.json; e503, e500 and text answer what their names say; any
# other NAME is a 404. Every request is logged as "PATH AUTHORIZATION". The server prints its
# port, and exits by itself after 60 s should the trap never run.
cat > "$WORK/heat_server.py" <<'PYEOF'
import http.server, os, re, sys, threading

root = sys.argv[1]
threading.Timer(60, lambda: os._exit(0)).start()

class Heat(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(os.path.join(root, "requests.log"), "a") as log:
            log.write("%s %s\n" % (self.path, self.headers.get("Authorization", "-")))
        name = self.path.split("/")[1]
        status, body, kind = 200, b"", "application/json"
        if name == "e503":
            status, body = 503, b'{"error": "heat view warming up"}'
        elif name == "e500":
            status, body, kind = 500, b"<html>boom</html>", "text/html"
        elif name == "text":
            body, kind = b"hello", "text/plain"
        elif re.fullmatch(r"[a-z0-9_]+", name) and os.path.exists(os.path.join(root, name + ".json")):
            body = open(os.path.join(root, name + ".json"), "rb").read()
        else:
            status, body = 404, b'{"error": "no such endpoint"}'
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

server = http.server.HTTPServer(("127.0.0.1", 0), Heat)
print(server.server_address[1], flush=True)
server.serve_forever()
PYEOF

cat > "$docs/full.json" <<'EOF'
{"second": "2026-12-01T23:00:05Z", "window_s": 60, "shard_capacity_eps": 1000, "max_shards": 256,
 "events": 123456, "rate_now": 5000, "untracked_events": 0,
 "over_capacity_seconds": 12, "would_throttle_events": 3456,
 "partitions": [
   {"key": "DAY#2026-01-21#2", "day": "2026-01-21", "shard": 2, "day_shards": 4,
    "rate_now": 1200, "rate_avg": 1100.5, "rate_peak": 1500, "events": 50000,
    "share": 0.24, "over_capacity_seconds": 3, "would_throttle_events": 700},
   {"key": "DAY#2026-01-21#0", "day": "2026-01-21", "shard": 0, "day_shards": 4,
    "rate_now": 900, "rate_avg": 880.0, "rate_peak": 990, "events": 40000,
    "share": 0.18, "over_capacity_seconds": 0, "would_throttle_events": 0},
   {"key": "DAY#2026-01-20#0", "day": "2026-01-20", "shard": 0, "day_shards": 1,
    "rate_now": 200, "rate_avg": 210.25, "rate_peak": 400, "events": 9000,
    "share": 0.04, "over_capacity_seconds": 0, "would_throttle_events": 0}],
 "days": [{"day": "2026-01-21", "shards": 4, "rate_now": 4800, "rate_avg": 4500.0,
           "rate_peak": 5100, "events": 200000, "share": 0.96},
          {"day": "2026-01-20", "shards": 1, "rate_now": 200, "rate_avg": 210.0,
           "rate_peak": 400, "events": 9000, "share": 0.04}],
 "kafka_partitions": [
   {"partition": 0, "rate_now": 100, "rate_peak": 1000, "events": 40000, "lag": 123},
   {"partition": 1, "rate_now": 900, "rate_peak": 950, "events": 41000, "lag": null},
   {"partition": 2, "rate_now": 300, "rate_peak": 950, "events": 1000, "lag": 0},
   {"partition": 3, "rate_now": 400, "rate_peak": 950, "events": 1000, "lag": 0},
   {"partition": 4, "rate_now": 500, "rate_peak": 950, "events": 1000, "lag": 0},
   {"partition": 5, "rate_now": 600, "rate_peak": 950, "events": 1000, "lag": 0},
   {"partition": 6, "rate_now": 700, "rate_peak": 950, "events": 1000, "lag": 0},
   {"partition": 7, "rate_now": 800, "rate_peak": 950, "events": 1000, "lag": 0},
   {"partition": 8, "rate_now": 50, "rate_peak": 950, "events": 1000, "lag": 0},
   {"partition": 9, "rate_now": 950, "rate_peak": 990, "events": 1000, "lag": 77}],
 "customers": [{"customer_id": 1, "rate_eps": 812.3, "error_eps": 2.1, "share": 0.2},
               {"customer_id": "cust-7", "rate_eps": 400.0, "error_eps": 0.5, "share": 0.1},
               {"customer_id": "42", "rate_eps": 100.0, "error_eps": null, "share": 0.025},
               {"customer_id": "evil\u001b[2J\u0007x", "rate_eps": 10.0, "error_eps": 0, "share": 0.0025}],
 "growths": [{"day": "2026-01-21", "from": 2, "to": 4, "at": "2026-12-01T22:59:01Z", "reason": "first busy minute"},
             {"day": "2026-01-21", "from": 4, "to": 8, "at": "2026-12-01T23:00:03Z", "reason": "5 s over capacity"},
             {"day": "2026-01-19", "from": 1, "to": 2, "at": "2026-12-01T22:58:00Z", "reason": "r3"},
             {"day": "2026-01-18", "from": 1, "to": 2, "at": "2026-12-01T22:57:00Z", "reason": "r4"},
             {"day": "2026-01-17", "from": 1, "to": 2, "at": "2026-12-01T22:56:00Z", "reason": "r5"},
             {"day": "2026-01-16", "from": 1, "to": 2, "at": "2026-12-01T22:55:00Z", "reason": "oldest"}],
 "advice": [{"case": "kafka_partition_skew", "subject": "partition 3",
             "evidence": "Kafka partition 3 took 91% of this node's writes over the last 60 s (54000 events; fair share 25.0% of 4 partitions): one consumer reads it",
             "remedy": "key messages by order_id (dayshard produce --key order)"},
            {"case": "hot_customer", "subject": "customer evil\u001b[2J",
             "evidence": "customer evil wrote 50%", "remedy": "rate-limit this customer"}],
 "gsi_lag_ms": 12}
EOF

# Before any event, from a node without the index: nulls everywhere they may be.
cat > "$docs/nulls.json" <<'EOF'
{"second": null, "window_s": 60, "shard_capacity_eps": null, "max_shards": null,
 "events": 0, "rate_now": null, "untracked_events": null,
 "over_capacity_seconds": null, "would_throttle_events": null,
 "partitions": [{"key": "DAY#2026-01-22#0", "day": null, "shard": 0, "day_shards": null,
                 "rate_now": null, "rate_avg": null, "rate_peak": null, "events": null,
                 "share": null, "over_capacity_seconds": null, "would_throttle_events": null}],
 "days": [], "kafka_partitions": [{"partition": 3, "rate_now": 0, "rate_peak": 0, "events": 0, "lag": null}],
 "customers": [], "growths": [], "advice": [], "gsi_lag_ms": null}
EOF

# An older node: a few totals, no lists at all. Fixed shard counts (capacity 0).
cat > "$docs/sparse.json" <<'EOF'
{"events": 5, "shard_capacity_eps": 0}
EOF
echo '[1, 2, 3]' > "$docs/array.json"

"$PY" "$WORK/heat_server.py" "$docs" > "$WORK/heat.out" 2> "$WORK/heat.err" &
HEAT_PID=$!
wait_printed "$WORK/heat.out" "$HEAT_PID"
port=$(head -1 "$WORK/heat.out" 2>/dev/null || true)
[[ -n $port ]] || { echo "the heat server did not start: $(cat "$WORK/heat.err")" >&2; exit 1; }
base="http://127.0.0.1:$port"

# A full document: every section, the hottest partition first with its share, bar, shards,
# throttled events and OVER (1200/s > 1000/s); customer ids as integer, string and quoted digits.
expect_exit "top once" 0 "$DAYSHARD" top --server "$base/full" --once
cp "$WORK/out" "$WORK/full.txt"
line() { grep -m1 -- "$1" "$WORK/full.txt" || true; }
expect_eq "header server and second" 1 \
  "$(grep -c "dayshard top  $base/full  second 2026-12-01T23:00:05Z  window 60 s" "$WORK/full.txt")"
expect_eq "header totals" "rate 5000/s  events 123456  untracked 0  GSI lag 12 ms" "$(sed -n 2p "$WORK/full.txt")"
expect_eq "header capacity" \
  "capacity 1000/s per partition, max 256 shards  over capacity 12 s  would throttle 3456" \
  "$(sed -n 3p "$WORK/full.txt")"
expect_eq "hottest partition first" "DAY#2026-01-21#2" \
  "$(grep -A1 '^PARTITION' "$WORK/full.txt" | tail -1 | awk '{print $1}')"
expect_eq "hottest partition row" \
  "DAY#2026-01-21#2              1200    1100.5      1500   24.0% ##              4        700  OVER" \
  "$(line 'DAY#2026-01-21#2')"
expect_eq "a partition under capacity has no marker" 0 "$(line 'DAY#2026-01-21#0' | grep -c OVER || true)"
expect_eq "partition rows" 3 "$(grep -c '^DAY#' "$WORK/full.txt")"
expect_eq "day row" "4 200000" "$(line '^2026-01-21 ' | awk '{print $(NF-1), $NF}')"
expect_eq "day share" 1 "$(line '^2026-01-21 ' | grep -c ' 96.0% ##########')"
expect_eq "kafka: the 8 hottest, hottest first" "9 1 7 6 5 4 3 2" \
  "$(sed -n '/^KAFKA PARTITION/,/^$/p' "$WORK/full.txt" | awk 'NR > 1 && $1 ~ /^[0-9]+$/ {printf "%s ", $1}' | sed 's/ $//')"
expect_eq "kafka: the colder ones counted" 1 "$(grep -c '(2 more, colder)' "$WORK/full.txt")"
expect_eq "kafka: null lag" "-" "$(grep -E '^1 +900 ' "$WORK/full.txt" | awk '{print $NF}')"
expect_eq "customer: integer id" "1 812.3 +-2.1 20.0% ##" "$(grep -E '^1 +812' "$WORK/full.txt" | xargs)"
expect_eq "customer: string id" "cust-7 400.0 +-0.5 10.0% #" "$(line '^cust-7' | xargs)"
expect_eq "customer: digits as a string, null error" '"42" 100.0 - 2.5% #' "$(line '^"42"' | tr -s ' ')"
expect_eq "customer: control bytes replaced" 1 "$(grep -c '^evil?\[2J?x ' "$WORK/full.txt")"
expect_eq "no escape byte reaches the terminal" 0 "$(tr -d '\n' < "$WORK/full.txt" | tr -cd '\000-\037\177' | wc -c)"
expect_eq "growths: newest first, 5 of 6" "2026-12-01T23:00:03Z 2026-12-01T22:59:01Z 2026-12-01T22:58:00Z 2026-12-01T22:57:00Z 2026-12-01T22:56:00Z" \
  "$(grep -E '^2026-12-01T' "$WORK/full.txt" | awk '{printf "%s ", $1}' | sed 's/ $//')"
expect_eq "growth line" "2026-12-01T23:00:03Z  2026-01-21     4 -> 8     5 s over capacity" \
  "$(line '^2026-12-01T23:00:03Z')"
# Advice under the tables: the case and subject, then the evidence folded to the width (it
# reads back whole) and the remedy; control bytes replaced here too.
expect_eq "advice header" 1 "$(grep -c '^ADVICE: MORE SHARDS CANNOT HELP$' "$WORK/full.txt")"
expect_eq "advice: case and subject" "kafka_partition_skew  partition 3" \
  "$(grep -A1 '^ADVICE' "$WORK/full.txt" | tail -1)"
expect_eq "advice: evidence folded and whole" \
  "Kafka partition 3 took 91% of this node's writes over the last 60 s (54000 events; fair share 25.0% of 4 partitions): one consumer reads it" \
  "$(sed -n '/^kafka_partition_skew/,/^  fix/p' "$WORK/full.txt" | sed -n '/^  why/,/^  fix/p' | sed '$d' | cut -c8- | tr -d '\n')"
expect_eq "advice: evidence takes two lines" 2 \
  "$(sed -n '/^kafka_partition_skew/,/^  fix/p' "$WORK/full.txt" | sed -n '/^  why/,/^  fix/p' | sed '$d' | wc -l)"
expect_eq "advice: remedy" "  fix  key messages by order_id (dayshard produce --key order)" \
  "$(grep -m1 '^  fix' "$WORK/full.txt")"
expect_eq "advice: second row, control bytes replaced" "hot_customer  customer evil?[2J" \
  "$(grep '^hot_customer' "$WORK/full.txt")"
expect_eq "widest line" 1 "$(awk '{ if (length($0) > m) m = length($0) } END { print (m <= 100) }' "$WORK/full.txt")"
expect_eq "request: top and no token" "/full/v1/heat?top=10 -" "$(tail -1 "$docs/requests.log")"

# --top limits the rows (and is asked of the node); --http-token is sent.
expect_exit "top --top 1" 0 "$DAYSHARD" top --server "$base/full/" --top 1 --once --http-token s3cret
expect_eq "one partition row" 1 "$(grep -c '^DAY#' "$WORK/out")"
expect_eq "one kafka row" 1 "$(sed -n '/^KAFKA PARTITION/,/^$/p' "$WORK/out" | grep -cE '^[0-9]+ ')"
expect_eq "request: top=1 and the token" "/full/v1/heat?top=1 Bearer s3cret" "$(tail -1 "$docs/requests.log")"
DAYSHARD_HTTP_TOKEN=fromenv "$DAYSHARD" top --server "$base/full" --once > /dev/null
expect_eq "token from the environment" "Bearer fromenv" "$(tail -1 "$docs/requests.log" | cut -d' ' -f2-)"

# Nulls show as "-".
expect_exit "top nulls" 0 "$DAYSHARD" top --server "$base/nulls" --once
expect_eq "null second" 1 "$(grep -c "second -  window 60 s" "$WORK/out")"
expect_eq "null totals" "rate -  events 0  untracked -  GSI lag -" "$(sed -n 2p "$WORK/out")"
expect_eq "null capacity" "capacity - per partition, max - shards  over capacity -  would throttle -" \
  "$(sed -n 3p "$WORK/out")"
expect_eq "null partition fields" "DAY#2026-01-22#0 - - - - - -" "$(grep '^DAY#' "$WORK/out" | xargs)"
expect_eq "null lag" "3 0 0 0 -" "$(grep -E '^3 ' "$WORK/out" | xargs)"
expect_eq "empty lists" 3 "$(grep -c '^  (none)$' "$WORK/out")"
expect_eq "no advice, no advice section" 0 "$(grep -c '^ADVICE' "$WORK/out" || true)"

# Missing sections still render, each saying so.
expect_exit "top sparse" 0 "$DAYSHARD" top --server "$base/sparse" --once
expect_eq "sparse sections" 5 "$(grep -c '(not reported by this node)' "$WORK/out")"
expect_eq "sparse capacity off" 1 "$(grep -c '^capacity off (fixed shard counts)$' "$WORK/out")"
expect_eq "sparse events" 1 "$(grep -c '^rate -  events 5 ' "$WORK/out")"

# A node that does not answer a heat document: exit 1, one line naming the URL and the cause.
expect_exit "top 503" 1 "$DAYSHARD" top --server "$base/e503" --once
expect_eq "503 message" "dayshard top: $base/e503/v1/heat?top=10 answered 503: heat view warming up" "$(cat "$WORK/err")"
expect_exit "top 500" 1 "$DAYSHARD" top --server "$base/e500" --once
grep -q "^dayshard top: $base/e500/v1/heat?top=10 answered 500: " "$WORK/err" && ok || fail "500 message: $(cat "$WORK/err")"
expect_exit "top 404" 1 "$DAYSHARD" top --server "$base/old" --once
grep -q "answered 404: no such endpoint (a node older than the heat view?)" "$WORK/err" && ok || fail "404 message: $(cat "$WORK/err")"
expect_exit "top not JSON" 1 "$DAYSHARD" top --server "$base/text" --once
grep -q "^dayshard top: $base/text/v1/heat?top=10: not a heat document" "$WORK/err" && ok || fail "not JSON message: $(cat "$WORK/err")"
expect_exit "top JSON array" 1 "$DAYSHARD" top --server "$base/array" --once
grep -q "not a heat document (not a JSON object)" "$WORK/err" && ok || fail "array message: $(cat "$WORK/err")"
expect_eq "one line on stderr" 1 "$(wc -l < "$WORK/err")"
expect_eq "nothing on stdout" 0 "$(wc -c < "$WORK/out")"

# Live, off a terminal: frames one after another, a blank line between them; SIGTERM and SIGINT
# end it with exit 0.
# start_top NAME ARGS...: the live view in the background, to $WORK/NAME.out, once it has shown
# 3 frames (at most 5 s). A new file each run, so frames of an earlier run never count: a signal
# sent before the view blocks it would find SIGINT ignored, as in any background job of a script.
start_top() {
  local name=$1 n
  shift
  "$DAYSHARD" top "$@" > "$WORK/$name.out" 2> "$WORK/$name.err" &
  TOP_PID=$!
  for _ in $(seq 100); do
    n=$(grep -c '^dayshard top ' "$WORK/$name.out" 2> /dev/null || true)
    (( ${n:-0} >= 3 )) && { ok; return 0; }
    sleep 0.05
  done
  fail "$name: no 3 frames within 5 s"
}
# stop_top SIG: signals the live view, its exit status to STOP_RC; one still running after 5 s
# is killed (status 137), so a view that ignores the signal fails the test instead of hanging it.
stop_top() {
  kill -"$1" "$TOP_PID"
  for _ in $(seq 100); do
    [[ $(cut -d' ' -f3 "/proc/$TOP_PID/stat" 2> /dev/null || echo Z) == Z ]] && break
    sleep 0.05
  done
  kill -KILL "$TOP_PID" 2> /dev/null || true
  STOP_RC=0
  wait "$TOP_PID" || STOP_RC=$?
  TOP_PID=""
}
lines=$(wc -l < "$WORK/full.txt")
for sig in TERM INT; do
  start_top "live_$sig" --server "$base/full" --interval-ms 100
  stop_top "$sig"
  expect_eq "live exit status after SIG$sig" 0 "$STOP_RC"
  out="$WORK/live_$sig.out"
  frames=$(grep -c '^dayshard top ' "$out")
  # Each frame is the --once frame; frames after the first begin with a blank line.
  expect_eq "live frames are whole frames" $((frames * lines + frames - 1)) "$(wc -l < "$out")"
  expect_eq "live frame" "$(cat "$WORK/full.txt")" "$(head -n "$lines" "$out")"
  expect_eq "blank line between frames" "" "$(sed -n "$((lines + 1))p" "$out")"
  expect_eq "next frame" "dayshard top  $base/full" "$(sed -n "$((lines + 2))p" "$out" | cut -c1-$((14 + ${#base} + 5)))"
  expect_eq "live stderr" "" "$(cat "$WORK/live_$sig.err")"
done

# Live against an error: the frame says why (the whole cause, folded), and the view keeps trying.
start_top live_error --server "$base/e503" --interval-ms 100
stop_top TERM
expect_eq "live error exit status" 0 "$STOP_RC"
grep -q "^  $base/e503/v1/heat?top=10 answered 503: heat view warming up$" "$WORK/live_error.out" &&
  ok || fail "live error frame: $(head -5 "$WORK/live_error.out")"
grep -q "^trying again every 100 ms$" "$WORK/live_error.out" && ok || fail "live error retry line"
expect_eq "live error stderr" "" "$(cat "$WORK/live_error.err")"

# On a terminal (a pty from script(1), 12 rows of 60 columns): "home, clear" before each frame,
# and each frame cut to the window (11 lines, so the redraw never scrolls; 60 columns).
if command -v script > /dev/null; then
  script -q -c "stty rows 12 cols 60; timeout --preserve-status -s INT 0.35 '$DAYSHARD' top \
    --server '$base/full' --interval-ms 100; echo \"exit \$?\"" /dev/null < /dev/null > "$WORK/tty.out"
  tr -d '\r' < "$WORK/tty.out" > "$WORK/tty.txt"
  frames=$(grep -c $'^\033\\[H\033\\[2Jdayshard top ' "$WORK/tty.txt" || true)
  (( frames >= 1 )) && ok || fail "tty frames: $(head -c 300 "$WORK/tty.txt")"
  expect_eq "tty exit status after SIGINT" "exit 0" "$(tail -1 "$WORK/tty.txt")"
  expect_eq "tty lines" $((frames * 11 + 1)) "$(wc -l < "$WORK/tty.txt")"
  expect_eq "tty columns" 60 \
    "$(sed 's/\x1b\[H\x1b\[2J//' "$WORK/tty.txt" | awk '{ if (length($0) > m) m = length($0) } END { print m }')"
else
  echo "script(1) not found: the terminal checks are skipped"
fi

# Usage errors exit 2; --help lists exactly the options that exist.
expect_exit "no --server" 2 "$DAYSHARD" top --once
expect_exit "unknown option" 2 "$DAYSHARD" top --server "$base/full" --once --bogus
grep -q "unknown or incomplete option '--bogus'" "$WORK/err" && ok || fail "unknown option message"
expect_exit "missing value" 2 "$DAYSHARD" top --server
expect_exit "--top 0" 2 "$DAYSHARD" top --server "$base/full" --once --top 0
expect_exit "--top 65" 2 "$DAYSHARD" top --server "$base/full" --once --top 65
expect_exit "--interval-ms 99" 2 "$DAYSHARD" top --server "$base/full" --interval-ms 99
expect_exit "--interval-ms x" 2 "$DAYSHARD" top --server "$base/full" --interval-ms x
expect_exit "extra argument" 2 "$DAYSHARD" top --server "$base/full" --once extra
expect_exit "--help" 0 "$DAYSHARD" top --help
grep -q "^usage: dayshard top --server URL" "$WORK/out" && ok || fail "--help text"
expect_eq "--help options" "--help --http-token --interval-ms --once --server --top" \
  "$(sed -n '/^options:/,/^$/p' "$WORK/out" | grep -oE '^  --[a-z-]+' | sort | xargs)"
expect_exit "help top" 0 "$DAYSHARD" help top
expect_exit "top in the command list" 0 "$DAYSHARD" help
grep -qE '^  top +live view of write heat' "$WORK/out" && ok || fail "top in help"
# Each option the help lists is accepted.
expect_exit "every option" 0 "$DAYSHARD" top --server "$base/full" --interval-ms 100 --top 2 --once --http-token t

# A dead node: exit 1 at once, naming the URL.
kill -KILL "$HEAT_PID"
wait "$HEAT_PID" 2>/dev/null || true
HEAT_PID=""
expect_exit "dead node" 1 "$DAYSHARD" top --server "$base" --once
grep -q "^dayshard top: $base/v1/heat?top=10: " "$WORK/err" && ok || fail "dead node message: $(cat "$WORK/err")"

finish
