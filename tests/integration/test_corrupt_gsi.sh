#!/usr/bin/env bash
# Random corruption of the by-customer index: 40 corruptions (20 with DS_SHORT=1, the sanitizer
# pass; 1000 with DS_LONG=1), each on a fresh copy of a small store whose index a rebuild wrote
# and closed (so DIR/table covers the whole log): a random byte range of a random file of
# DIR/gsi (FORMAT, lock, log, table) flipped, cut or overwritten with random bytes. The first
# 12 rounds take each (file, kind) pair once, so every tier injects every kind into every file;
# the rest draw both at random. For each:
# - `gsi check` exits 1 for every corruption that changed FORMAT, log or table (it exits 0 for
#   the invisible ones, and nothing exits >= 124: no crash, no hang under timeout 20);
# - `orders --data` for a few customers never crashes or hangs; it answers exactly as before
#   the damage or exits 1 naming the index's file and the repair;
# - the repair (`gsi rebuild`, or `fsck --repair` on every other one when fsck checks the
#   index) ends with `gsi check` clean and the answers equal to the ones before the damage.
# Invisible corruptions, and how the test tells them apart without asking the checker: on this
# template every byte of FORMAT, log and table is covered by a checksum, a size or an exact
# comparison (a torn tail only exists in a log a crash left without a checkpoint over it; the
# unit tests and test_fsck_gsi cover those), so a corruption is invisible exactly when the file
# is byte-for-byte unchanged (a cut at or past its end, bytes overwritten with equal ones) or it
# is `lock`, which holds no content (flock only). The test compares each damaged file with the
# template's copy (cmp) and knows the file's name.
# Prints the seed (DS_TEST_SEED replays it) and a summary line.
source "$(dirname "$0")/lib.sh"

ROUNDS=40
# DS_SHORT=1 (the sanitizer pass, several times slower per round): a sweep still.
[[ ${DS_SHORT:-} == 1 ]] && ROUNDS=20
[[ ${DS_LONG:-} == 1 ]] && ROUNDS=1000
SEED=${DS_TEST_SEED:-$(((RANDOM << 15) | RANDOM))}
echo "test_corrupt_gsi: seed $SEED (DS_TEST_SEED=$SEED replays), $ROUNDS corruptions"
start=$(date +%s)

TEMPLATE=$WORK/template
"$DAYSHARD" generate --events 3000 --profile busy-day --seed 21 >"$WORK/events.jsonl"
"$DAYSHARD" ingest --model events --data "$TEMPLATE" "$WORK/events.jsonl" >/dev/null
"$DAYSHARD" ingest --data "$TEMPLATE" "$WORK/events.jsonl" >/dev/null
expect_exit "template rebuild" 0 "$DAYSHARD" gsi rebuild --data "$TEMPLATE" --slots-log2 8
[[ -f $TEMPLATE/gsi/table && -f $TEMPLATE/gsi/lock ]] || { fail "template: no table or lock"; finish; }
mapfile -t CUSTOMERS < <("$PY" - "$WORK/events.jsonl" <<'EOF'
import collections, json, sys
counts = collections.Counter(json.loads(line)["customer_id"] for line in open(sys.argv[1]))
for c, _ in counts.most_common(3):
    print(c if isinstance(c, int) else '"%s"' % c)
EOF
)

FSCK_WIRED=false
if "$DAYSHARD" fsck --data "$TEMPLATE" 2>&1 | grep -q "gsi"; then FSCK_WIRED=true; fi

# answers DIR OUT: the customers' orders into OUT (stderr in OUT.err); returns the worst exit.
answers() {
  local dir=$1 out=$2 c rc=0 one
  : >"$out"
  : >"$out.err"
  for c in "${CUSTOMERS[@]}"; do
    timeout 20 "$DAYSHARD" orders --data "$dir" --customer "$c" --limit 1000 >>"$out" \
      2>>"$out.err" && one=0 || one=$?
    ((one > rc)) && rc=$one
  done
  return "$rc"
}
answers "$TEMPLATE" "$WORK/before" || die "orders on the template: $(cat "$WORK/before.err")"
(($(wc -l <"$WORK/before") > 20)) || die "too few answers to compare"

# corrupt DIR SEED ROUND: one corruption of DIR/gsi; prints "file mode offset length".
corrupt() {
  "$PY" - "$@" <<'EOF'
import os, random, sys
d, seed, round_ = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed * 1000003 + round_)
FILES, MODES = ["FORMAT", "lock", "log", "table"], ["flip", "cut", "overwrite"]
if round_ < len(FILES) * len(MODES):  # every pair once first
    name, mode = FILES[round_ % len(FILES)], MODES[round_ // len(FILES)]
else:
    name = rng.choice(["FORMAT", "lock", "log", "log", "log", "table", "table"])
    mode = rng.choice(MODES)
path = os.path.join(d, "gsi", name)
size = os.path.getsize(path)
offset = rng.randrange(size + 1) if size > 0 else 0
length = rng.choice([1, 1, 2, 4, 8, 64, 4096])
if mode == "cut":
    os.truncate(path, offset)
    length = size - offset
else:
    with open(path, "r+b") as f:
        f.seek(offset)
        old = f.read(length)
        if mode == "flip":
            new = bytes(b ^ (1 + rng.randrange(255)) for b in old)
        else:
            new = bytes(rng.randrange(256) for _ in range(length))
        f.seek(offset)
        f.write(new)
print(name, mode, offset, length)
EOF
}

caught=0
invisible=0
repaired=0
C=$WORK/copy
for ((round = 0; round < ROUNDS; round++)); do
  rm -rf "$C"
  cp -a "$TEMPLATE" "$C"
  read -r file mode offset length < <(corrupt "$C" "$SEED" "$round")
  what="round $round ($file $mode at $offset, $length bytes)"
  visible=true
  if [[ $file == lock ]] || cmp -s "$TEMPLATE/gsi/$file" "$C/gsi/$file"; then visible=false; fi
  timeout 20 "$DAYSHARD" gsi check --data "$C" >"$WORK/out" 2>"$WORK/err" && rc=0 || rc=$?
  if ((rc >= 124)); then
    fail "$what: gsi check exit $rc (crash or hang): $(head -c 300 "$WORK/err")"
  elif $visible && ((rc == 1)); then
    caught=$((caught + 1))
    ok
  elif ! $visible && ((rc == 0)); then
    invisible=$((invisible + 1))
    ok
  else
    fail "$what: gsi check exit $rc for a $($visible && echo visible || echo invisible) corruption: $(head -c 300 "$WORK/err")"
  fi
  answers "$C" "$WORK/during" && rc=0 || rc=$?
  if ((rc == 0)); then
    cmp -s "$WORK/before" "$WORK/during" && ok || fail "$what: orders answered differently"
  elif ((rc == 1)); then
    grep -q "gsi" "$WORK/during.err" && grep -q "gsi rebuild" "$WORK/during.err" && ok ||
      fail "$what: orders failed without naming the index and the repair: $(head -3 "$WORK/during.err")"
  else
    fail "$what: orders exit $rc (crash or hang): $(head -3 "$WORK/during.err")"
  fi
  if $FSCK_WIRED && ((round % 2 == 1)); then
    repair=("$DAYSHARD" fsck --data "$C" --repair)
  else
    repair=("$DAYSHARD" gsi rebuild --data "$C")
  fi
  timeout 60 "${repair[@]}" >"$WORK/out" 2>"$WORK/err" && rc=0 || rc=$?
  ((rc == 0)) || fail "$what: ${repair[*]:1:2} exit $rc: $(head -c 300 "$WORK/err")"
  timeout 20 "$DAYSHARD" gsi check --data "$C" >"$WORK/out" 2>"$WORK/err" && rc=0 || rc=$?
  ((rc == 0)) || fail "$what: not clean after ${repair[*]:1:2}: $(head -c 300 "$WORK/err")"
  answers "$C" "$WORK/after" && rc=0 || rc=$?
  if ((rc == 0)) && cmp -s "$WORK/before" "$WORK/after"; then
    repaired=$((repaired + 1))
    ok
  else
    fail "$what: answers after ${repair[*]:1:2} differ (exit $rc)"
  fi
done
((caught > ROUNDS / 2)) && ok || fail "only $caught of $ROUNDS corruptions were visible: the test corrupts too little"
echo "test_corrupt_gsi: seed $SEED: $ROUNDS corruptions, $caught caught, $invisible invisible," \
  "$repaired repaired, $(($(date +%s) - start)) s (fsck --repair used: $FSCK_WIRED)"
finish
