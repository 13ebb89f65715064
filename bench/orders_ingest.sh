#!/usr/bin/env bash
# Benchmark: file ingest throughput (`dayshard ingest`, the same decode/route/append
# path as a node, without Kafka) of the orders model against the events model, on two generated
# streams of EVENTS lines each (default 2,000,000, --customers 1,000,000, --items 0 so the only
# difference is the model's work):
#   updates     --updates 0.3 --duplicates 0.05 (the issue's stream; target ratio >= 0.7)
#   no-updates  every line a new order (target ratio >= 0.9)
# RUNS rounds (default 3), each ingesting every (stream, model) pair into a fresh directory in
# turn, so both models see the same machine state; prints each run, then the medians in
# events/s and the ratio orders/events per stream. Then the bytes per event of the last run's
# directories: base data (everything but ids/ and gsi/), DIR/ids (the orders-by-id store) and
# DIR/gsi (the by-customer index, built by `dayshard gsi rebuild`, which `ingest` does not do),
# apparent and allocated (the index's table file is sparse), per input line and per stored
# order. Directories live under WORKDIR (default a mktemp dir in /tmp; it says which
# filesystem). The stream files are read once before timing (page cache warm for every run).
#   usage: bench/orders_ingest.sh [DAYSHARD=build/dayshard] [EVENTS=2000000] [RUNS=3]
set -euo pipefail
DAYSHARD=${1:-build/dayshard}
EVENTS=${2:-2000000}
RUNS=${3:-3}
((RUNS >= 1)) || { echo "orders_ingest: RUNS must be at least 1" >&2; exit 2; }
work=${WORKDIR:-$(mktemp -d /tmp/dayshard-orders-ingest-XXXXXX)}
mkdir -p "$work"
trap '[[ -n ${DS_KEEP:-} ]] || rm -rf "$work"' EXIT
if ! "$DAYSHARD" ingest --data "$work/probe" --model orders /dev/null >/dev/null 2>"$work/probe.err"; then
  echo "orders_ingest: this build cannot ingest --model orders: $(cat "$work/probe.err")" >&2
  exit 1
fi
rm -rf "$work/probe"

"$DAYSHARD" generate --events "$EVENTS" --customers 1000000 --updates 0.3 --duplicates 0.05 \
  --seed 14 >"$work/updates.jsonl"
"$DAYSHARD" generate --events "$EVENTS" --customers 1000000 --seed 14 >"$work/no-updates.jsonl"
cat "$work/updates.jsonl" "$work/no-updates.jsonl" >/dev/null
echo "orders_ingest: $EVENTS lines per stream ($(du -h "$work/updates.jsonl" | cut -f1) with updates," \
  "$(du -h "$work/no-updates.jsonl" | cut -f1) without), $RUNS runs, $(nproc) cores," \
  "$(df -T "$work" | awk 'NR == 2 {print $2}') at $work"

# one STREAM MODEL: ingests into a fresh directory, prints events/s (accepted lines / wall time).
one() {
  local dir=$work/$1-$2 t0 t1 accepted
  rm -rf "$dir"
  t0=$(date +%s%N)
  "$DAYSHARD" ingest --data "$dir" --model "$2" --json "$work/$1.jsonl" >"$dir.json"
  t1=$(date +%s%N)
  accepted=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["accepted"])' "$dir.json")
  echo $((accepted * 1000000000 / (t1 - t0)))
}

median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }

declare -A rates
for ((run = 1; run <= RUNS; run++)); do
  line="run $run:"
  for stream in updates no-updates; do
    for model in events orders; do
      r=$(one "$stream" "$model")
      rates[$stream-$model]+="$r "
      line+=" $stream/$model $r"
    done
  done
  echo "  $line events/s"
done
for stream in updates no-updates; do
  ev=$(tr ' ' '\n' <<<"${rates[$stream-events]}" | grep . | median)
  or=$(tr ' ' '\n' <<<"${rates[$stream-orders]}" | grep . | median)
  target=0.9
  [[ $stream == updates ]] && target=0.7
  printf '  %-10s median events %9d/s  orders %9d/s  ratio %.3f (target >= %s)\n' "$stream" "$ev" "$or" \
    "$(awk -v a="$or" -v b="$ev" 'BEGIN {print a / b}')" "$target"
done

# bytes DIR SUBPATH: apparent and allocated bytes ("A B").
bytes() {
  if [[ -e $1/$2 ]]; then echo "$(du -sb "$1/$2" | cut -f1) $(du -s -B1 "$1/$2" | cut -f1)"; else echo "0 0"; fi
}
echo "  bytes per input line (apparent/allocated), last run's directories, index rebuilt:"
for stream in updates no-updates; do
  for model in events orders; do
    dir=$work/$stream-$model
    "$DAYSHARD" gsi rebuild --data "$dir" >/dev/null 2>&1 || echo "  (gsi rebuild of $dir failed)"
    read -r all_a all_b <<<"$(bytes "$dir" .)"
    read -r ids_a ids_b <<<"$(bytes "$dir" ids)"
    read -r gsi_a gsi_b <<<"$(bytes "$dir" gsi)"
    # Rows stored (versions and retractions) and current orders, from fsck's figures.
    read -r rows orders < <("$DAYSHARD" fsck --data "$dir" --json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d.get("events_ok", "?"), d.get("orders", "-"))' || echo "? -")
    awk -v s="$stream" -v m="$model" -v n="$EVENTS" -v aa="$all_a" -v ab="$all_b" -v ia="$ids_a" \
      -v ib="$ids_b" -v ga="$gsi_a" -v gb="$gsi_b" 'BEGIN {
        printf "  %-10s %-6s base %6.1f/%6.1f  ids %6.1f/%6.1f  gsi %6.1f/%6.1f  (base %d B)\n", s, m,
          (aa - ia - ga) / n, (ab - ib - gb) / n, ia / n, ib / n, ga / n, gb / n, aa - ia - ga }'
    echo "             fsck: $rows rows, $orders current orders"
  done
done
