#!/usr/bin/env bash
# kill -9 of `dayshard ingest` at random moments: after each crash, recovery keeps exactly a
# committed prefix of the input (the writer commits in input order), loses nothing committed,
# shows nothing uncommitted, fsck is clean once recovery ran, and the directory keeps working.
# DS_LONG=1 (or the older DS_SOAK=1) runs 50 crashes instead of 6.
source "$(dirname "$0")/lib.sh"
rounds=6
long=${DS_LONG:-${DS_SOAK:-0}}
[[ $long == 1 ]] && rounds=50
seed=${DS_TEST_SEED:-$RANDOM}
echo "seed=$seed rounds=$rounds"
RANDOM=$seed

"$DAYSHARD" generate --events 1500000 --profile busy-day --seed "$seed" > "$WORK/events.jsonl"
days="--day 2026-01-01 --to 2026-01-28 --by day --json"

# Ground truth: per-day counts of the whole file. The generator writes in time order, so the
# first K lines hold min(count_d, max(0, K - start_d)) events of day d.
"$DAYSHARD" ingest --model events --data "$WORK/full" "$WORK/events.jsonl" > /dev/null
"$DAYSHARD" count --data "$WORK/full" $days > "$WORK/full.json"
rm -rf "$WORK/full"

for ((round = 1; round <= rounds; round++)); do
  data="$WORK/data$round"
  delay_ms=$((20 + RANDOM % 1200))
  "$DAYSHARD" ingest --model events --data "$data" --commit-interval-ms 5 "$WORK/events.jsonl" > /dev/null 2>&1 &
  pid=$!
  sleep "$(printf '0.%03d' "$delay_ms")"
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true

  # A reader beside the dead writer sees a committed prefix.
  "$DAYSHARD" count --data "$data" $days > "$WORK/crash.json" 2>/dev/null || echo '{"count":0,"groups":[]}' > "$WORK/crash.json"
  verdict=$("$PY" - "$WORK/full.json" "$WORK/crash.json" <<'PYEOF'
import json, sys
full = json.load(open(sys.argv[1])); got = json.load(open(sys.argv[2]))
k = got["count"]; start = 0; want = {}
for g in full["groups"]:
    want[g["key"]] = min(g["count"], max(0, k - start)); start += g["count"]
have = {g["key"]: g["count"] for g in got.get("groups", [])}
bad = [d for d in want if want[d] != have.get(d, 0)]
print("ok %d" % k if not bad else "prefix mismatch at %s (K=%d)" % (bad[:3], k))
PYEOF
)
  [[ $verdict == ok* ]] && ok || fail "round $round: $verdict"

  # Recovery (a writer opening the directory) cuts the uncommitted tail; then fsck is clean and
  # the same directory takes more events.
  "$DAYSHARD" ingest --data "$data" "$FIXTURES/busy-day.jsonl" > /dev/null || fail "round $round: ingest after crash"
  if "$DAYSHARD" fsck --data "$data" > "$WORK/fsck.txt"; then ok; else fail "round $round: fsck $(cat "$WORK/fsck.txt")"; fi
  after=$("$DAYSHARD" count --data "$data" $days | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["count"])')
  expect_eq "round $round: count after more events" "$(( ${verdict#ok } + 3 ))" "$after"
  echo "round $round: killed after ${delay_ms} ms, committed prefix ${verdict#ok }"
  rm -rf "$data"
done
finish
