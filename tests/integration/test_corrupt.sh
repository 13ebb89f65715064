#!/usr/bin/env bash
# Randomised corruption, in both models: on a fresh copy of a small ingested store, one random
# corruption of a random segment or the MANIFEST (flip bits, cut the file, or overwrite a byte
# range). Then: fsck exits 1, or the bytes hit held nothing committed (fsck 0 and the count
# exact); count and orders readers end with 0 or 1 and a message, never a crash (exit >= 128)
# or a hang (20 s); fsck --repair, then fsck exits 0. Events model: the count is the truth
# minus the events repair reports quarantined and rolled back (a damaged MANIFEST rolls back
# the commits after its valid prefix whole); at most that when a range's events were unknown.
# Orders model (the default; a stream with updates, some moving the day): the count is the
# truth minus the orders repair reports lost (reverted ones still count), rolled back included.
# Events model 24 corruptions, orders model 18 (12 each with DS_SHORT=1, the sanitizer pass),
# the first three of each a flip, a cut and an overwrite, the rest drawn;
# with DS_LONG=1 1,000 in each;
# DS_TEST_SEED replays a run (printed); DS_CORRUPT_MODELS=orders runs one model.
# Hook: a file named by DS_CORRUPT_TARGETS_HOOK, when set, is sourced and may define
# corrupt_extra_targets DIR, printing more paths (index files) to choose from.
source "$(dirname "$0")/lib.sh"

note() { echo "test_corrupt: $*"; }
seed=${DS_TEST_SEED:-$(( $(date +%s%N) % 1000000007 ))}
corrupt_extra_targets() { :; }
if [[ -n ${DS_CORRUPT_TARGETS_HOOK:-} ]]; then
  # shellcheck disable=SC1090
  source "$DS_CORRUPT_TARGETS_HOOK"
fi

# build_template DIR MODEL: the busy-day fixture and three generated chunks, one ingest each.
build_template() {
  local dir=$1 model=$2 stream="$WORK/stream-$2.jsonl" updates=()
  [[ $model == orders ]] && updates=(--updates 0.3)
  cp "$FIXTURES/busy-day.jsonl" "$stream"
  "$DAYSHARD" ingest --model "$model" --data "$dir" --shards 2 "$stream" > /dev/null
  for s in 1 2 3; do
    "$DAYSHARD" generate --events 400 --profile busy-day --seed "$s" --days 3 \
      --first-day 2026-01-20 "${updates[@]}" >> "$stream"
    "$DAYSHARD" ingest --data "$dir" --resume "$stream" > /dev/null
  done
}
count_of() {
  timeout 20 "$DAYSHARD" count --data "$1" --day 2026-01-19 --to 2026-01-23 --json 2>/dev/null |
    "$PY" -c 'import json,sys; print(json.load(sys.stdin)["count"])'
}

# corrupt DIR SEED RUN: one corruption, described on stdout (RUN: the run's index in its model).
corrupt() {
  "$PY" - "$1" "$2" "$(corrupt_extra_targets "$1" | tr '\n' ' ')" "$3" <<'PY'
import glob, os, random, sys
d, seed, extra, run = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), int(sys.argv[4])
rng = random.Random(seed)
targets = sorted(glob.glob(d + "/parts/*/*/*.seg")) + [d + "/MANIFEST"] + extra
path = rng.choice(targets)
size = os.path.getsize(path)
# The first three runs of a model take each kind once; the rest draw it.
op = ["flip", "cut", "overwrite"][run] if run < 3 else rng.choice(["flip", "cut", "overwrite"])
data = bytearray(open(path, "rb").read())
if op == "flip":
    at = rng.randrange(size); n = rng.randint(1, 16)
    for i in range(at, min(size, at + n)):
        data[i] ^= 1 << rng.randrange(8)
    what = "flip %d bytes at %d" % (min(size, at + n) - at, at)
elif op == "cut":
    at = rng.randrange(size); data = data[:at]; what = "cut at %d" % at
else:
    at = rng.randrange(size); n = rng.randint(1, 512)
    data[at:at + n] = bytes(rng.randrange(256) for _ in range(n))
    what = "overwrite %d bytes at %d" % (n, at)
open(path, "wb").write(data)
print("%s of %s (%d bytes)" % (what, os.path.relpath(path, d), size))
PY
}

# reader_ok WHAT command...: exit 0 or 1 (with a message when 1), within 20 s.
reader_ok() {
  local what=$1
  shift
  set +e
  timeout 20 "$@" > "$WORK/rout" 2> "$WORK/rerr"
  local rc=$?
  set -e
  if [[ $rc == 0 ]] || { [[ $rc == 1 ]] && [[ -s $WORK/rerr ]]; }; then ok; else
    fail "$what: exit $rc ($(head -c 200 "$WORK/rerr"))"; return 1
  fi
}

# run_model MODEL RUNS: RUNS corruptions of copies of a template of MODEL.
run_model() {
  local model=$1 runs=$2 template="$WORK/template-$1"
  build_template "$template" "$model"
  truth=$(count_of "$template")
  if [[ $model == events ]]; then
    expect_eq "template count" "$(wc -l < "$WORK/stream-events.jsonl")" "$truth"
  else
    expect_exit "template fsck (orders)" 0 "$DAYSHARD" fsck --data "$template" --json
    expect_eq "template: every order counted" "$(json_get "$WORK/out" 'd["orders"]')" "$truth"
  fi
  caught=0 repaired=0 harmless=0 manifest_runs=0
  start=$(date +%s)
  for ((i = 0; i < runs; i++)); do
    dir="$WORK/run"
    rm -rf "$dir"
    cp -a "$template" "$dir"
    what=$(corrupt "$dir" $((seed + i)) "$i")
    ctx="run $i ($what; DS_TEST_SEED=$seed)"
    set +e
    timeout 20 "$DAYSHARD" fsck --data "$dir" --json > "$WORK/f1" 2> /dev/null
    rc=$?
    set -e
    if [[ $rc == 1 ]]; then
      caught=$((caught + 1)); ok
    elif [[ $rc == 0 ]]; then
      harmless=$((harmless + 1))
      expect_eq "$ctx: fsck clean means an exact count" "$truth" "$(count_of "$dir")"
    else
      fail "$ctx: fsck exit $rc"
      continue
    fi
    reader_ok "$ctx: count" "$DAYSHARD" count --data "$dir" --day 2026-01-19 --to 2026-01-23 || continue
    reader_ok "$ctx: orders" "$DAYSHARD" orders --data "$dir" --customer 1 || continue
    set +e
    timeout 20 "$DAYSHARD" fsck --data "$dir" --repair --json > "$WORK/f2" 2> "$WORK/f2err"
    rc=$?
    set -e
    if [[ $rc != 0 ]]; then
      fail "$ctx: fsck --repair exit $rc ($(head -c 300 "$WORK/f2err"))"
      continue
    fi
    expect_exit "$ctx: fsck after repair" 0 timeout 20 "$DAYSHARD" fsck --data "$dir"
    after=$(count_of "$dir" || echo "none")
    if [[ $model == orders ]]; then
      lost=$(json_get "$WORK/f2" 'd["orders_lost"]')
      expect_eq "$ctx: balanced after repair" "0 0" \
        "$(json_get "$WORK/f2" '"%d %d" % (d["retractions_unmatched"], d["orders_mismatched"])')"
      unknown=$(json_get "$WORK/f2" 'd["events_unknown_ranges"]')
      if [[ $what == *MANIFEST* ]]; then
        manifest_runs=$((manifest_runs + 1))
        note "$ctx: orders: truth $truth, lost $lost, reverted $(json_get "$WORK/f2" 'd["orders_reverted"]'), after $after"
      fi
      # A range of unknown events (an unreadable header) hides which orders it held.
      if [[ $unknown == 0 ]]; then
        expect_eq "$ctx: count after repair = truth - lost orders" $((truth - lost)) "$after"
      elif [[ $after =~ ^[0-9]+$ ]] && ((after <= truth - lost)); then
        ok
      else
        fail "$ctx: count after repair $after, want <= $((truth - lost))"
      fi
      [[ $rc == 0 ]] && repaired=$((repaired + 1))
      continue
    fi
    q=$(json_get "$WORK/f2" 'd["quarantined_events"] + d["events_rolled_back"]')
    unknown=$(json_get "$WORK/f2" 'd["events_unknown_ranges"]')
    if [[ $what == *MANIFEST* ]]; then
      manifest_runs=$((manifest_runs + 1))
      note "$ctx: events: truth $truth, quarantined $(json_get "$WORK/f2" 'd["quarantined_events"]'), rolled back $(json_get "$WORK/f2" 'd["events_rolled_back"]'), after $after"
    fi
    if [[ $unknown == 0 ]]; then
      expect_eq "$ctx: count after repair = truth - quarantined - rolled back" $((truth - q)) "$after"
    elif [[ $after =~ ^[0-9]+$ ]] && ((after <= truth - q)); then
      ok
    else
      fail "$ctx: count after repair $after, want <= $((truth - q))"
    fi
    [[ $rc == 0 ]] && repaired=$((repaired + 1))
  done
  echo "test_corrupt: $model model, seed $seed: $runs corruptions, $caught caught by fsck, $harmless harmless," \
    "$repaired repaired, $manifest_runs of the MANIFEST, $(( $(date +%s) - start )) s"
}

events_runs=24 orders_runs=18
# DS_SHORT=1 (the sanitizer pass, several times slower per run): a sweep of each model still.
[[ ${DS_SHORT:-} == 1 ]] && events_runs=12 orders_runs=12
[[ ${DS_LONG:-} == 1 ]] && events_runs=1000 orders_runs=1000
# DS_CORRUPT_MODELS: the models to run, "events orders" unless set (a long run of one model).
models=${DS_CORRUPT_MODELS:-events orders}
echo "test_corrupt: seed $seed, $events_runs corruptions (events model), $orders_runs (orders model)," \
  "models: $models (replay with DS_TEST_SEED=$seed)"
for model in $models; do
  case $model in
    events) run_model events "$events_runs" ;;
    orders) run_model orders "$orders_runs" ;;
    *) fail "DS_CORRUPT_MODELS: unknown model $model" ;;
  esac
done
finish
