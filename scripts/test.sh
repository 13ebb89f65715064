#!/usr/bin/env bash
# The test run: install what is missing, build with warnings as errors (gcc RelWithDebInfo,
# Release and MinSizeRel, clang Release, Debug and MinSizeRel; the sanitizer passes add gcc Debug
# and clang RelWithDebInfo), run every test (unit and integration) through CTest, then the unit
# tests and a short integration selection under ASan+UBSan, the fuzz targets for 20 s each and
# the ThreadSanitizer run. CI runs it as it is. Each phase prints its time and the total so far.
#   --quick           one build and the tests at their short sizes (DS_SHORT=1, as the sanitizer
#                     passes); no other build, benchmark smoke, sanitizer, fuzz or TSan pass
#                     (DS_TEST_QUICK=1)
#   --long            the long fault suite instead of the default sizes (hours): 100 kill -9
#                     cycles, 1,000 random corruptions, 10M executions per fuzz target (DS_LONG=1)
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  --long) export DS_LONG=1 ;;
  --quick) export DS_TEST_QUICK=1 DS_SHORT=1 ;;
  "") ;;
  -h | --help)
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "usage: scripts/test.sh [--quick | --long]" >&2
    exit 2
    ;;
esac
[[ "${DS_SOAK:-0}" == 1 ]] && export DS_LONG=1   # the old name
# The tests' sizes (each test's header names its sizes per tier).
if [[ "${DS_LONG:-0}" == 1 ]]; then
  tier="long (DS_LONG=1)"
elif [[ "${DS_SHORT:-0}" == 1 ]]; then
  tier="short (DS_SHORT=1)"
else
  tier="default"
fi
started=$SECONDS
# phase TITLE: ends the phase before (its minutes and the total so far) and names the next.
phase() {
  if [[ -n ${phase_name:-} ]]; then
    printf '   (%s: %d:%02d; total %d:%02d)\n' "$phase_name" $(((SECONDS - phase_at) / 60)) \
      $(((SECONDS - phase_at) % 60)) $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60))
  fi
  phase_name=$1
  phase_at=$SECONDS
  echo "== $1"
}
phase "packages (scripts/setup.sh); test sizes: $tier"
scripts/setup.sh
jobs=$(nproc)
# Most integration tests wait on brokers, group joins and rates, not on a core: two per core
# keep both cores busy (a --quick tests phase: 16.7 min at one per core, 12.7 at two).
test_jobs=$((2 * jobs))

phase "include boundaries, formatting (clang-format 14, .clang-format)"
scripts/check-includes.sh
git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror
echo "formatting: ok"

phase "build (RelWithDebInfo, -Werror)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDS_WERROR=ON >/dev/null
cmake --build build -j"$jobs" 2>&1 | grep -Ev '^\[|^-- ' || true
cmake --build build -j"$jobs" >/dev/null   # fails the script if the build failed

if [[ "${DS_TEST_QUICK:-0}" != 1 ]]; then
  phase "the other build types and compilers, warnings as errors (what packagers and users build)"
  # Optimised builds see warnings a debug build does not (maybe-uninitialized, format-truncation).
  # other_build DIR COMPILER TYPE: configure and build with warnings as errors, print the
  # warnings if any, fail if the build does.
  other_build() {
    CC=$2 cmake -S . -B "$1" -DCMAKE_BUILD_TYPE="$3" -DDS_WERROR=ON >/dev/null
    cmake --build "$1" -j"$jobs" 2>&1 | grep -E 'error|warning' || true
    cmake --build "$1" -j"$jobs" >/dev/null
    echo "$2 $3: ok"
  }
  other_build build-release gcc Release
  other_build build-gcc-minsize gcc MinSizeRel
  other_build build-clang clang Release
  other_build build-clang-debug clang Debug
  other_build build-clang-minsize clang MinSizeRel
fi

phase "tests"
(cd build && ctest --output-on-failure -j"$test_jobs")

phase "storage tests and the file-ingest integration tests again with io_uring refused"
(cd build && DS_IO_URING_DISABLE=1 ctest --output-on-failure -j"$test_jobs" -L storage)
(cd build && DS_IO_URING_DISABLE=1 ctest --output-on-failure -j"$test_jobs" \
  -R 'integration\.test_(cli|crash|io_paths)$')

if [[ "${DS_TEST_QUICK:-0}" == 1 ]]; then
  phase "all passed (--quick)"
  exit 0
fi

phase "benchmarks, tiny inputs (smoke test only; real figures: docs/PERFORMANCE.md)"
build/bench/bench_workload 100000 >/dev/null
build/bench/bench_decode 20000 3 >/dev/null
build/bench/bench_ingest_file 20000 1 >/dev/null
build/bench/bench_count_latency 20000 100 >/dev/null
build/bench/bench_row_sources 20000 1 >/dev/null
build/bench/bench_produce 20000 1 >/dev/null
build/bench/bench_kafka_e2e 20000 1 >/dev/null
build/bench/bench_http_count 20000 100 >/dev/null
build/bench/bench_index_e2e 20000 1 50000 >/dev/null
build/bench/bench_index_e2e lag 20000 1 50000 >/dev/null
build/bench/bench_index_store 20000 >/dev/null
build/bench/bench_index_seal 20000 >/dev/null
build/bench/bench_index_cursor 50 >/dev/null
build/bench/bench_heat 20000 1 >/dev/null
build/bench/bench_compact 2000 10000 1 400 >/dev/null
echo "benchmarks ran"

# -O1: the sanitizers' checks are the same, the run is about twice as fast as at -O0.
phase "build (Debug at -O1, ASan+UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g" \
      -DDS_SANITIZE=address,undefined -DDS_BENCH=OFF -DDS_WERROR=ON >/dev/null
cmake --build build-asan -j"$jobs" >/dev/null
# Every unit test, and the integration tests that reach code the unit tests do not: each
# command's argument and error paths, file ingest and its crashes, repair, serve, the router,
# a node with its HTTP, by-customer index, dead letters, retention and heat stream, the load
# test's report and gate, and short corruption sweeps. The long loops, soaks and the browser
# run in the normal pass only; their code is the same code these reach. Left out as well,
# each because another test here runs the same command paths and more:
#   test_run             a node's consume, dead letters and restart: test_run_dlq (the same,
#                        and the dead-letter topic); `dayshard produce`: test_router and
#                        test_run_heat_stream (the rest of test_run is kcat and python3-kafka)
#   test_run_pause       the pause hook and the catch-up: test_run_consistent
#   test_orders_fixtures the fixtures in the orders model over the CLI and serve:
#                        test_order_lookup (the same, and the lookups' error paths)
asan_tests='unit\.|integration\.test_(cli|crash|io_paths|compact|enospc|model|fsck_repair'
asan_tests+='|fsck_orders|order_lookup|corrupt|corrupt_gsi|serve|serve_hostile'
asan_tests+='|serve_live|top|router|router_serve|router_heat|console_serve|broker|run_http'
asan_tests+='|run_metrics|run_consistent|run_retention|run_dlq|deadletter_kill9'
asan_tests+='|run_heat_stream|loadtest_report|loadtest_gate|deploy_rules)$'
phase "unit tests and the integration selection under ASan+UBSan"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 DS_DIFF_CASES=30000 DS_SHORT=1 \
  ctest --output-on-failure -j"$jobs" -R "$asan_tests")

phase "fuzz targets (libFuzzer, clang; scripts/fuzz.sh)"
if [[ "${DS_LONG:-0}" == 1 ]]; then
  scripts/fuzz.sh --runs 10000000 --max-seconds 3600
else
  scripts/fuzz.sh --seconds 20
fi
phase "ThreadSanitizer: everything that starts no librdkafka thread (scripts/tsan.sh)"
scripts/tsan.sh
phase "all passed"
