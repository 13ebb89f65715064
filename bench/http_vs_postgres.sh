#!/usr/bin/env bash
# Benchmark: the same count questions asked of `dayshard serve` over HTTP and of PostgreSQL 15
# (Debian package) in the same run, reported as ratios. PostgreSQL is initialised in a temp
# directory, runs as the `postgres` user on 127.0.0.1 only, gets the same events COPY-loaded and
# an index on the day. Both are asked by one sequential client on one connection: ours by
# bench_http_count --url (HTTP keep-alive), PostgreSQL by pgbench (prepared statements, one
# client, per-transaction latency log). Questions: one quiet day, the busy day (30% of all
# events) and the 28-day range, each as count and exact amount sum.
#   usage: bench/http_vs_postgres.sh [BUILD=build] [EVENTS=1000000] [SECONDS=5]
set -euo pipefail
BUILD=${1:-build}
EVENTS=${2:-1000000}
SECONDS_RUN=${3:-5}
PGBIN=/usr/lib/postgresql/15/bin
[[ -x $PGBIN/postgres ]] || { echo "http_vs_postgres: PostgreSQL 15 is not installed"; exit 0; }
id postgres >/dev/null 2>&1 || { echo "http_vs_postgres: no postgres user"; exit 0; }
PY=/usr/bin/python3
work=$(mktemp -d /tmp/dayshard-pg-XXXXXX)
chmod 755 "$work"
pid=""
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null
  [[ -f $work/pg/postmaster.pid ]] && runuser -u postgres -- "$PGBIN/pg_ctl" -D "$work/pg" -m immediate stop >/dev/null 2>&1
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
as_pg() { (cd "$work" && runuser -u postgres -- "$@"); }

"$BUILD/dayshard" generate --events "$EVENTS" --profile busy-day > "$work/events.jsonl"
"$BUILD/dayshard" ingest --data "$work/d" --shards 4 "$work/events.jsonl" >/dev/null
"$PY" - "$work/events.jsonl" "$work/events.csv" <<'PYEOF'
import csv, json, sys
with open(sys.argv[1]) as src, open(sys.argv[2], "w", newline="") as dst:
    out = csv.writer(dst)
    for line in src:
        e = json.loads(line)
        out.writerow([e["order_id"], e["customer_id"], e["ts"], e["ts"][:10], e.get("status", ""), e.get("amount", 0)])
PYEOF
chmod 644 "$work/events.csv"
port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir "$work/pg" && chown postgres "$work/pg" && chmod 700 "$work/pg"
chown postgres "$work"
as_pg "$PGBIN/initdb" -D "$work/pg" -A trust -U postgres >/dev/null
as_pg "$PGBIN/pg_ctl" -D "$work/pg" -l "$work/pg.log" -w \
  -o "-c listen_addresses=127.0.0.1 -p $port -k $work -c shared_buffers=512MB" start >/dev/null
psql_do() { as_pg "$PGBIN/psql" -h 127.0.0.1 -p "$port" -U postgres -q -v ON_ERROR_STOP=1 "$@"; }
t0=$(date +%s.%N)
psql_do -c "CREATE TABLE orders (order_id text, customer_id text, ts timestamptz, day date,
                                 status text, amount numeric(20,4))" \
        -c "\\copy orders FROM '$work/events.csv' WITH (FORMAT csv)" \
        -c "CREATE INDEX orders_day ON orders (day)" -c "ANALYZE orders"
t1=$(date +%s.%N)

"$BUILD/dayshard" serve --data "$work/d" --http 127.0.0.1:0 > "$work/addr" &
pid=$!
for _ in $(seq 100); do [[ -s $work/addr ]] && break; sleep 0.05; done
addr=$(head -1 "$work/addr")

echo "http_vs_postgres: $EVENTS busy-day events; PostgreSQL 15 load + index + analyze $(printf '%.1f' "$(echo "$t1 - $t0" | bc)") s"
printf '  %-28s %12s %12s %12s %12s %9s %9s\n' question "ours p50 us" "ours p99 us" "pg p50 us" "pg p99 us" "p50 x" "p99 x"
for spec in "quiet-day 2026-01-01 2026-01-01" "busy-day 2026-01-21 2026-01-21" "28-days 2026-01-01 2026-01-28"; do
  read -r name first last <<<"$spec"
  ours=$("$BUILD/bench/bench_http_count" --url "$addr" "/v1/count?day=$first&to=$last" 5000)
  ours_p50=$(awk '{print $5}' <<<"$ours"); ours_p99=$(awk '{print $7}' <<<"$ours")
  echo "SELECT count(*), sum(amount) FROM orders WHERE day BETWEEN '$first' AND '$last';" > "$work/q.sql"
  chmod 644 "$work/q.sql"
  rm -f "$work"/pgbench_log.*
  as_pg "$PGBIN/pgbench" -h 127.0.0.1 -p "$port" -U postgres -n -M prepared -c 1 -T "$SECONDS_RUN" \
    -f "$work/q.sql" --log --log-prefix="$work/pgbench_log" postgres >/dev/null 2>&1
  read -r pg_p50 pg_p99 <<<"$(cat "$work"/pgbench_log.* | "$PY" -c '
import sys
lat = sorted(int(l.split()[2]) for l in sys.stdin if l.strip())
print(lat[len(lat) // 2], lat[len(lat) * 99 // 100])')"
  printf '  %-28s %12s %12s %12s %12s %9.1f %9.1f\n' "$name" "$ours_p50" "$ours_p99" "$pg_p50" "$pg_p99" \
    "$(echo "$pg_p50 / $ours_p50" | bc -l)" "$(echo "$pg_p99 / $ours_p99" | bc -l)"
done
