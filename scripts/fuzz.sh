#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/, clang, -DDS_FUZZ=ON, in build-fuzz/) and runs each
# on a scratch copy of its seed corpus, two at a time (the machine has two cores), then prints
# one table row per target: seconds, executions, exec/s, corpus size at the end, crashes.
#
#   scripts/fuzz.sh                      every target for 60 s (CI: scripts/test.sh)
#   scripts/fuzz.sh --seconds 300        every target for 300 s
#   scripts/fuzz.sh --runs 10000000      every target until 10M executions (the long run), or
#                                        --max-seconds (default 3600) if it comes first: index_log
#                                        does disk I/O per input (~70 exec/s) and reports how far
#                                        it got instead of running for 40 hours
#   scripts/fuzz.sh --targets "block manifest" --jobs 1 --keep
#
# A crash, leak, timeout (one input over --timeout seconds) or out-of-memory of any target makes
# the script exit 1 and print the reproducer's path and the command that replays it; the scratch
# directory is then kept. Fix the parser, then copy the reproducer into tests/fuzz/corpus/<name>/
# as regress_<what> so the CTest replay (fuzz.<name>) keeps it fixed. New inputs the fuzzer
# found stay in the scratch copy: the committed seeds are small on purpose.
#
# Rejected: libFuzzer's own -jobs/-workers (one target at a time, and a crash stops only its
# worker) and -fork (needs a shared corpus per target anyway; two targets side by side keep both
# cores busy with simpler bookkeeping).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
runs=""
jobs=2
timeout=30
max_seconds=3600
keep=false
build_dir=build-fuzz
all_targets="decode index_log block manifest http_request index_cursor ids_record index_sealed varint"
targets=$all_targets

usage() {
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}

while [[ $# -gt 0 ]]; do
  case $1 in
    --seconds) seconds=$2; runs=""; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --max-seconds) max_seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --keep) keep=true; shift ;;
    -h|--help) usage ;;
    *) echo "fuzz.sh: unknown option '$1'" >&2; usage ;;
  esac
done
for n in "$seconds" "$jobs" "$timeout" "$max_seconds" ${runs:+"$runs"}; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: '$n' is not a positive integer" >&2; exit 2; }
done
for t in $targets; do
  [[ " $all_targets " == *" $t "* ]] || { echo "fuzz.sh: no fuzz target '$t' (have: $all_targets)" >&2; exit 2; }
done

if ! command -v clang > /dev/null; then
  echo "fuzz.sh: clang not found (libFuzzer needs it)" >&2
  exit 1
fi
work_logs=$(mktemp -d "${TMPDIR:-/tmp}/dayshard-fuzz-build.XXXXXX")
CC=clang cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDS_WERROR=ON -DDS_FUZZ=ON \
  -DDS_BENCH=OFF > "$work_logs/configure.log" 2>&1 || { cat "$work_logs/configure.log" >&2; exit 1; }
build_targets=()
for t in $targets; do build_targets+=("fuzz_$t"); done
cmake --build "$build_dir" -j"$jobs" --target "${build_targets[@]}" > "$work_logs/build.log" 2>&1 ||
  { tail -n 40 "$work_logs/build.log" >&2; exit 1; }

rm -rf "$work_logs"
work=$(mktemp -d "${TMPDIR:-/tmp}/dayshard-fuzz.XXXXXX")
limit_flag=(-max_total_time="$seconds")
[[ -n $runs ]] && limit_flag=(-runs="$runs" -max_total_time="$max_seconds")
limit="$seconds s"
[[ -n $runs ]] && limit="$runs runs (at most $max_seconds s)"
echo "fuzz.sh: $limit per target, $jobs at a time, scratch in $work"

# Runs one target in the background of the caller; its results land in $work/<name>/.
run_target() {
  local name=$1 dir=$work/$1
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp tests/fuzz/corpus/"$name"/* "$dir/corpus/"
  local dict=()
  [[ -f tests/fuzz/$name.dict ]] && dict=(-dict="tests/fuzz/$name.dict")
  local start=$SECONDS
  set +e
  "$build_dir/tests/fuzz/fuzz_$name" "${limit_flag[@]}" -timeout="$timeout" \
    -print_final_stats=1 -artifact_prefix="$dir/artifacts/" "${dict[@]}" "$dir/corpus" \
    > "$dir/log" 2>&1
  echo $? > "$dir/rc"
  set -e
  echo $((SECONDS - start)) > "$dir/seconds"
}

running=0
for t in $targets; do
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
  run_target "$t" &
  running=$((running + 1))
done
wait || true

# The executions: libFuzzer's final stats, or (after a crash, which skips them) the last
# progress line "#N ...".
executions_of() {
  local log=$1 n
  n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  [[ -z $n ]] && n=$(grep -oE '^#[0-9]+' "$log" | tail -n 1 | tr -d '#')
  echo "${n:-0}"
}

status=0
printf '%-14s %8s %12s %10s %8s %8s\n' target seconds executions exec/s corpus crashes
for t in $targets; do
  dir=$work/$t
  secs=$(cat "$dir/seconds")
  execs=$(executions_of "$dir/log")
  rate=$((execs / (secs > 0 ? secs : 1)))
  corpus=$(find "$dir/corpus" -type f | wc -l)
  crashes=$(find "$dir/artifacts" -type f | wc -l)
  rc=$(cat "$dir/rc")
  if ((rc != 0 && crashes == 0)); then
    crashes=1 # died without a reproducer (killed, or a sanitizer report outside an input)
  fi
  printf '%-14s %8s %12s %10s %8s %8s\n' "$t" "$secs" "$execs" "$rate" "$corpus" "$crashes"
  if ((crashes > 0)); then
    status=1
  fi
done
for t in $targets; do
  dir=$work/$t
  [[ $(cat "$dir/rc") -eq 0 ]] && continue
  echo
  echo "fuzz.sh: $t failed (exit $(cat "$dir/rc")); log: $dir/log"
  grep -E 'ERROR: |runtime error|SUMMARY|Test unit written|deadly signal' "$dir/log" | head -n 8 || true
  for a in "$dir"/artifacts/*; do
    [[ -e $a ]] || continue
    echo "reproducer: $a"
    echo "  replay:   $build_dir/tests/fuzz/fuzz_$t $a"
  done
done
if [[ $status -eq 0 && $keep == false ]]; then
  rm -rf "$work"
else
  echo "fuzz.sh: scratch kept in $work"
fi
exit $status
