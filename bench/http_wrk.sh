#!/usr/bin/env bash
# Benchmark: count requests/s at saturation over HTTP keep-alive (target: >= 20,000/s
# on the project's 2-core machine while ingest is idle), with wrk (Debian package) against
# `dayshard serve`. Events are generated and ingested first (busy-day profile, 4 shards); wrk
# and the service share the machine, so the figure includes the client's CPU.
#   usage: bench/http_wrk.sh [DAYSHARD=build/dayshard] [EVENTS=1000000] [SECONDS=10]
set -euo pipefail
DAYSHARD=${1:-build/dayshard}
EVENTS=${2:-1000000}
SECONDS_RUN=${3:-10}
command -v wrk >/dev/null || { echo "http_wrk: wrk is not installed (scripts/setup.sh)"; exit 0; }
work=$(mktemp -d /tmp/dayshard-wrk-XXXXXX)
pid=""
trap '[[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
"$DAYSHARD" generate --events "$EVENTS" --profile busy-day | "$DAYSHARD" ingest --data "$work/d" --shards 4 - >/dev/null
"$DAYSHARD" serve --data "$work/d" --http 127.0.0.1:0 > "$work/addr" &
pid=$!
for _ in $(seq 100); do [[ -s $work/addr ]] && break; sleep 0.05; done
addr=$(head -1 "$work/addr")
echo "http_wrk: $EVENTS busy-day events, 4 shards, dayshard serve with 2 threads, ${SECONDS_RUN}s per run"
for spec in "1 16 /v1/count?day=2026-01-01" "2 64 /v1/count?day=2026-01-01" \
            "2 64 /v1/count?day=2026-01-21" "2 64 /v1/count?day=2026-01-01&to=2026-01-28"; do
  read -r threads conns path <<<"$spec"
  out=$(wrk -t"$threads" -c"$conns" -d"${SECONDS_RUN}s" --latency "http://$addr$path")
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  errors=$(grep -E "Non-2xx|Socket errors" <<<"$out" || true)
  printf '  wrk -t%s -c%-3s %-45s %10s req/s  p50 %8s  p99 %8s %s\n' "$threads" "$conns" "$path" \
    "$rps" "$p50" "$p99" "${errors:+($errors)}"
done
