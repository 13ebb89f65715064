#!/usr/bin/env bash
# The by-customer index under fsck: `dayshard gsi check` (and `dayshard fsck`, which
# calls cli_fsck_gsi) verifies DIR/gsi, and `gsi rebuild` (and `fsck --repair`) repairs it.
# - a file store (generated events ingested twice, so the base holds every event twice and the
#   index once) indexed by `gsi rebuild`: check clean, --json fields, entries = distinct events;
# - damage, each on a fresh copy: a log byte flipped inside the checkpoint, the checkpoint
#   removed and a log byte flipped before intact records, the log cut, the table flipped and
#   cut, FORMAT overwritten, an index copied from another store (only the base comparison can
#   tell): check exits 1 naming the file; `orders --data` exits 1 naming the file and the
#   repair, or answers exactly as before the damage; never a crash, never a hang;
# - a torn tail (garbage after the last apply, no checkpoint) is clean;
# - repair: `gsi rebuild` (and `fsck --repair` when wired) ends clean with every customer's
#   answers equal to the ones before the damage;
# - base data added after the index: clean (the index is behind, not damaged);
# - usage: no --data, unknown option, a directory without data.
source "$(dirname "$0")/lib.sh"

DATA=$WORK/data
"$DAYSHARD" generate --events 6000 --profile busy-day --seed 13 >"$WORK/events.jsonl"
"$DAYSHARD" ingest --data "$DATA" "$WORK/events.jsonl" >/dev/null
"$DAYSHARD" ingest --data "$DATA" "$WORK/events.jsonl" >/dev/null
expect_exit "rebuild" 0 "$DAYSHARD" gsi rebuild --data "$DATA" --slots-log2 10 --json
seq=$(json_get "$WORK/out" 'd["commit_seq"]')

# The customers whose answers are compared: the five busiest and one with a single order.
mapfile -t CUSTOMERS < <("$PY" - "$WORK/events.jsonl" <<'EOF'
import collections, json, sys
counts = collections.Counter(json.loads(line)["customer_id"] for line in open(sys.argv[1]))
busy = [c for c, _ in counts.most_common(5)]
single = [c for c, n in counts.items() if n == 1][:1]
for c in busy + single:
    print(c if isinstance(c, int) else '"%s"' % c)
EOF
)
distinct=$("$PY" -c '
import json, sys
print(len({(json.dumps(d["customer_id"]), d["ts"], json.dumps(d["order_id"]))
           for d in map(json.loads, open(sys.argv[1]))}))' "$WORK/events.jsonl")

# answers DIR OUT: every compared customer's orders (limit 1000) into OUT; returns the first
# non-zero exit, with stderr in OUT.err.
answers() {
  local dir=$1 out=$2 c rc=0 one
  : >"$out"
  : >"$out.err"
  for c in "${CUSTOMERS[@]}"; do
    set +e
    timeout 20 "$DAYSHARD" orders --data "$dir" --customer "$c" --limit 1000 >>"$out" 2>>"$out.err"
    one=$?
    set -e
    ((rc == 0)) && rc=$one
  done
  return "$rc"
}

# ---- clean ----------------------------------------------------------------------------------
expect_exit "check of a clean index" 0 "$DAYSHARD" gsi check --data "$DATA"
grep -q "clean: $distinct entries" "$WORK/out" && ok || fail "clean check: $(cat "$WORK/out")"
expect_exit "check --json" 0 "$DAYSHARD" gsi check --data "$DATA" --json
expect_eq "json damaged" False "$(json_get "$WORK/out" 'd["damaged"]')"
expect_eq "json entries: the distinct events" "$distinct" "$(json_get "$WORK/out" 'd["entries"]')"
expect_eq "json covered_seq" "$seq" "$(json_get "$WORK/out" 'd["covered_seq"]')"
answers "$DATA" "$WORK/before" || fail "orders on the clean index: $(cat "$WORK/before.err")"
(($(wc -l <"$WORK/before") > 50)) && ok || fail "too few answers to compare"
cp -a "$DATA" "$WORK/template"
FSCK_WIRED=false
if "$DAYSHARD" fsck --data "$DATA" 2>&1 | grep -q "gsi"; then FSCK_WIRED=true; fi
note() { echo "$(date +%T) $*"; }
note "fsck calls the index check: $FSCK_WIRED"

# damaged NAME FILE COMMAND: on a fresh copy of the template, COMMAND (with $C the copy) damages
# the index; check must exit 1 naming FILE; orders must exit 1 naming the index and the repair,
# or answer as before; then a rebuild (or fsck --repair) repairs it.
damaged() {
  local name=$1 file=$2 command=$3 rc
  local C=$WORK/copy
  rm -rf "$C"
  cp -a "$WORK/template" "$C"
  eval "$command"
  expect_exit "$name: check" 1 "$DAYSHARD" gsi check --data "$C"
  grep -q "gsi/$file" "$WORK/err" && ok || fail "$name: check names no $file: $(cat "$WORK/err")"
  expect_exit "$name: check --json" 1 "$DAYSHARD" gsi check --data "$C" --json
  grep -q "gsi/$file" <<<"$(json_get "$WORK/out" 'd["reason"]')" && ok ||
    fail "$name: json reason names no $file: $(cat "$WORK/out")"
  if $FSCK_WIRED; then
    expect_exit "$name: fsck" 1 "$DAYSHARD" fsck --data "$C"
    grep -q "gsi/$file" "$WORK/out" "$WORK/err" && ok || fail "$name: fsck names no $file"
  fi
  answers "$C" "$WORK/during" && rc=0 || rc=$?
  if ((rc == 0)); then
    cmp -s "$WORK/before" "$WORK/during" && ok || fail "$name: orders answered differently"
  elif ((rc == 1)); then
    grep -q "gsi/" "$WORK/during.err" && grep -q "gsi rebuild" "$WORK/during.err" && ok ||
      fail "$name: orders failed without naming the file and the repair: $(head -3 "$WORK/during.err")"
  else
    fail "$name: orders exit $rc (crash or hang): $(head -3 "$WORK/during.err")"
  fi
  if $FSCK_WIRED; then
    expect_exit "$name: fsck --repair" 0 "$DAYSHARD" fsck --data "$C" --repair
  else
    expect_exit "$name: rebuild" 0 "$DAYSHARD" gsi rebuild --data "$C"
  fi
  expect_exit "$name: check after the repair" 0 "$DAYSHARD" gsi check --data "$C"
  answers "$C" "$WORK/after" || fail "$name: orders after the repair: $(head -3 "$WORK/after.err")"
  cmp -s "$WORK/before" "$WORK/after" && ok || fail "$name: answers after the repair differ"
}

flip() { # flip FILE OFFSET
  "$PY" -c '
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0x5a]))' "$1" "$2"
}
size() { stat -c %s "$1"; }
log_size=$(size "$DATA/gsi/log")
table_size=$(size "$DATA/gsi/table")

damaged "log byte inside the checkpoint" log 'flip "$C/gsi/log" $((log_size / 2))'
damaged "log byte before intact records" log 'rm "$C/gsi/table"; flip "$C/gsi/log" 100'
damaged "log header" log 'flip "$C/gsi/log" 3'
damaged "log cut" table 'truncate -s $((log_size - 777)) "$C/gsi/log"'
damaged "table byte" table 'flip "$C/gsi/table" $((table_size - 5))'
damaged "table cut" table 'truncate -s $((table_size / 2)) "$C/gsi/table"'
damaged "FORMAT" FORMAT 'echo "dayshard-gsi 9" >"$C/gsi/FORMAT"'

# An index intact in itself but of another store: only the comparison with the base tells.
"$DAYSHARD" generate --events 3000 --profile busy-day --seed 14 >"$WORK/other.jsonl"
for i in 1 2 3; do "$DAYSHARD" ingest --data "$WORK/other" "$WORK/other.jsonl" >/dev/null; done
"$DAYSHARD" gsi rebuild --data "$WORK/other" --slots-log2 10 >/dev/null 2>&1
rm -rf "$WORK/other/gsi"
cp -a "$DATA/gsi" "$WORK/other/gsi"
expect_exit "an index of another store" 1 "$DAYSHARD" gsi check --data "$WORK/other"
grep -q "base data" "$WORK/err" && ok || fail "another store's index: $(cat "$WORK/err")"

# ---- not damage -------------------------------------------------------------------------------
C=$WORK/torn
cp -a "$WORK/template" "$C"
rm "$C/gsi/table"
head -c 300 /dev/urandom >>"$C/gsi/log"
expect_exit "a torn tail" 0 "$DAYSHARD" gsi check --data "$C"
grep -q "300 bytes of torn tail" "$WORK/out" && ok || fail "torn tail: $(cat "$WORK/out")"
answers "$C" "$WORK/torn-answers" || fail "orders on a torn tail: $(head -3 "$WORK/torn-answers.err")"
cmp -s "$WORK/before" "$WORK/torn-answers" && ok || fail "orders on a torn tail differ"

C=$WORK/behind
cp -a "$WORK/template" "$C"
"$DAYSHARD" ingest --data "$C" "$WORK/other.jsonl" >/dev/null
expect_exit "an index behind its base" 0 "$DAYSHARD" gsi check --data "$C" --json
expect_eq "behind: covered_seq" "$seq" "$(json_get "$WORK/out" 'd["covered_seq"]')"

rm -rf "$C/gsi"
expect_exit "no index" 0 "$DAYSHARD" gsi check --data "$C" --json
expect_eq "no index: present" False "$(json_get "$WORK/out" 'd["present"]')"

# ---- usage -----------------------------------------------------------------------------------
expect_exit "check without --data" 2 "$DAYSHARD" gsi check
expect_exit "check with an unknown option" 2 "$DAYSHARD" gsi check --data "$DATA" --fast
expect_exit "check of a directory without data" 1 "$DAYSHARD" gsi check --data "$WORK/nothing"
grep -q "no data" "$WORK/err" && ok || fail "no clear message: $(cat "$WORK/err")"
expect_exit "gsi --help" 0 "$DAYSHARD" gsi --help
grep -q "gsi check --data" "$WORK/out" && ok || fail "gsi --help lists no check"

finish
