# Shared helpers for the integration scripts: $1 is the dayshard binary, $2 the source root.
set -euo pipefail
DAYSHARD=${1:?usage: $0 DAYSHARD_BINARY SOURCE_ROOT}
ROOT=${2:?usage: $0 DAYSHARD_BINARY SOURCE_ROOT}
FIXTURES="$ROOT/tests/fixtures"   # small data sets from the modelling notes the project grew out of
PY=/usr/bin/python3
WORK=$(mktemp -d /tmp/dayshard-it-XXXXXX)
trap '[[ -n ${DS_KEEP:-} ]] || rm -rf "$WORK"' EXIT
failures=0
checks=0

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { checks=$((checks + 1)); }

# expect_eq WHAT EXPECTED ACTUAL
expect_eq() {
  if [[ "$2" == "$3" ]]; then ok; else fail "$1: expected [$2], got [$3]"; fi
}

# expect_grep WHAT FILE FIXED-STRING: the file holds the string.
expect_grep() {
  if grep -qF -- "$3" "$2"; then ok; else fail "$1: no [$3] in $2"; fi
}

# expect_exit WHAT CODE command...
expect_exit() {
  local what=$1 code=$2
  shift 2
  set +e
  "$@" >"$WORK/out" 2>"$WORK/err"
  local rc=$?
  set -e
  if [[ $rc == "$code" ]]; then ok; else fail "$what: exit $rc, expected $code ($(head -c 300 "$WORK/err"))"; fi
}

# deadletters DIR: every dead letter of data directory DIR on stdout, oldest first (the numbered
# files' names sort in write order); nothing when there are none.
deadletters() {
  local f
  for f in "$1"/deadletter.*.jsonl; do
    if [[ -e $f ]]; then cat "$f"; fi
  done
}

# wait_printed FILE PID: waits until FILE holds a whole line (a service prints its address first)
# or process PID has exited. A start waits for that state, not for a time: on a busy machine a
# node took over 10 s to print its address. The 120 s limit only keeps a hung start from hanging
# the test; the caller checks what FILE holds.
wait_printed() {
  local limit=$((SECONDS + 120))
  until [[ -s $1 && -z $(tail -c 1 "$1") ]] || ! kill -0 "$2" 2>/dev/null || ((SECONDS > limit)); do
    sleep 0.1
  done
}

# json_get FILE PYTHON-EXPRESSION-ON-d
json_get() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

finish() {
  echo "$checks passed, $failures failed"
  [[ $failures == 0 ]]
}
