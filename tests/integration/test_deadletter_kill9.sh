#!/usr/bin/env bash
# kill -9 of `dayshard ingest --resume` at random moments over paced input with many bad lines,
# the dead letters rotating at about every commit (hundreds of files, kills landing around
# rotations):
# after each restart the dead-letter files hold exactly the bad lines before the committed next
# line (the acknowledged ones), each once, in order; at the end every bad line is there once
# and fsck is clean. Randomised: prints its seed, DS_TEST_SEED replays it; DS_LONG=1 kills 40
# times instead of 8.
source "$(dirname "$0")/lib.sh"
rounds=8
[[ ${DS_LONG:-0} == 1 ]] && rounds=40
seed=${DS_TEST_SEED:-$RANDOM}
echo "seed=$seed rounds=$rounds"
RANDOM=$seed
DATA=$WORK/data
ROTATE=(--deadletter-file-bytes 2048 --commit-interval-ms 20)

"$DAYSHARD" generate --events 150000 --profile busy-day --seed "$seed" >"$WORK/good.jsonl"
# One line in five is bad and names itself, so a dead letter says which line it was.
"$PY" - "$WORK/good.jsonl" "$seed" >"$WORK/input.jsonl" <<'EOF'
import random, sys
rnd = random.Random(int(sys.argv[2]))
out = sys.stdout.buffer
n = 0
for line in open(sys.argv[1], "rb"):
    if rnd.random() < 0.2:
        n += 1
        out.write(b"not json %d\n" % (n + 1))
    n += 1
    out.write(line)
EOF

# check_acknowledged WHAT: recovery runs (an ingest of nothing), then the dead letters must be
# exactly the bad lines below the committed next line it reports.
check_acknowledged() {
  "$DAYSHARD" ingest --data "$DATA" --resume "${ROTATE[@]}" /dev/null >/dev/null 2>"$WORK/err" ||
    fail "$1: recovery: $(head -c 300 "$WORK/err")"
  next=$(sed -nE 's/.*resuming at line ([0-9]+).*/\1/p' "$WORK/err")
  local verdict
  verdict=$("$PY" - "$WORK/input.jsonl" "${next:-1}" <(deadletters "$DATA") <<'EOF'
import json, sys
below = int(sys.argv[2])
want = [i + 1 for i, l in enumerate(open(sys.argv[1], "rb")) if l.startswith(b"not json") and i + 1 < below]
got = [json.loads(l)["line"] for l in open(sys.argv[3], "rb")]
raws = [json.loads(l)["raw"] for l in open(sys.argv[3], "rb")]
if got != want:
    extra = sorted(set(got) - set(want))[:5]
    missing = sorted(set(want) - set(got))[:5]
    dup = len(got) - len(set(got))
    print("%d dead letters, %d expected: missing %s, extra %s, %d repeated" % (len(got), len(want), missing, extra, dup))
elif any(r != "not json %d" % n for r, n in zip(raws, got)):
    print("a dead letter's raw text is not its line")
else:
    print("ok %d" % len(got))
EOF
)
  if [[ $verdict == ok* ]]; then ok; else fail "$1: $verdict"; fi
  next=${next:-1}
  echo "$1: next line $next, ${verdict#ok } dead letters in $(find "$DATA" -maxdepth 1 -name 'deadletter.*.jsonl' | wc -l) files"
}

# feed FROM: the input on stdout, the lines from FROM on at 20,000 a second (the ones before
# it, which --resume skips, at once), so a run lasts long enough to be killed mid-way.
feed() {
  "$PY" - "$WORK/input.jsonl" "$1" <<'EOF'
import sys, time
start, out, t0 = int(sys.argv[2]), sys.stdout.buffer, time.monotonic()
for i, line in enumerate(open(sys.argv[1], "rb")):
    out.write(line)
    if i + 1 >= start and (i + 1 - start) % 200 == 0:
        out.flush()
        time.sleep(max(0.0, t0 + (i + 1 - start) / 20000.0 - time.monotonic()))
EOF
}

killed=0
next=1
for ((round = 1; round <= rounds; round++)); do
  feed "$next" 2>/dev/null | "$DAYSHARD" ingest --data "$DATA" --resume "${ROTATE[@]}" - \
    >/dev/null 2>>"$WORK/ingest.log" &
  pid=$!
  delay_ms=$((100 + RANDOM % 1500))
  sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  if kill -9 "$pid" 2>/dev/null; then killed=$((killed + 1)); fi
  wait "$pid" 2>/dev/null || true
  check_acknowledged "round $round (killed after $delay_ms ms)"
done
# The test means nothing unless most kills landed while ingest ran.
if ((killed * 2 > rounds)); then ok; else fail "only $killed of $rounds kills hit a running ingest"; fi

expect_exit "the last run" 0 "$DAYSHARD" ingest --data "$DATA" --resume "${ROTATE[@]}" "$WORK/input.jsonl"
check_acknowledged "at the end"
total_bad=$(grep -c '^not json' "$WORK/input.jsonl")
expect_eq "every bad line once" "$total_bad" "$(deadletters "$DATA" | wc -l)"
files=$(find "$DATA" -maxdepth 1 -name 'deadletter.*.jsonl' | wc -l)
if ((files > 10)); then ok; else fail "dead letters in $files files: the test rotates too rarely"; fi
if "$DAYSHARD" fsck --data "$DATA" >"$WORK/fsck.txt" 2>&1; then ok; else fail "fsck: $(head -c 300 "$WORK/fsck.txt")"; fi
finish
