#!/usr/bin/env bash
# The test run: install what is missing, build with warnings as errors, run every test (unit and
# integration) through CTest, then again under ASan+UBSan, the fuzz targets for 35 s each and
# the ThreadSanitizer run. CI runs it as it is. Each phase prints its time and the total so far
# (about an hour on a fresh 2-core machine, packages included).
#   --long            the long fault suite instead of the short one (hours): 100 kill -9 cycles,
#                     1,000 random corruptions, 10M executions per fuzz target (sets DS_LONG=1)
#   DS_TEST_QUICK=1   skip the sanitizer, fuzz and TSan passes
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  --long) export DS_LONG=1 ;;
  "") ;;
  -h | --help)
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "usage: scripts/test.sh [--long]" >&2
    exit 2
    ;;
esac
[[ "${DS_SOAK:-0}" == 1 ]] && export DS_LONG=1   # the old name
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
phase "packages (scripts/setup.sh)"
scripts/setup.sh
jobs=$(nproc)

phase "include boundaries, formatting (clang-format 14, .clang-format)"
scripts/check-includes.sh
git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror
echo "formatting: ok"

phase "build (RelWithDebInfo, -Werror)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDS_WERROR=ON >/dev/null
cmake --build build -j"$jobs" 2>&1 | grep -Ev '^\[|^-- ' || true
cmake --build build -j"$jobs" >/dev/null   # fails the script if the build failed

phase "the other build types and compilers, warnings as errors (what packagers and users build)"
# Optimised builds see warnings a debug build does not (maybe-uninitialized, format-truncation).
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DDS_WERROR=ON >/dev/null
cmake --build build-release -j"$jobs" 2>&1 | grep -E 'error|warning' || true
cmake --build build-release -j"$jobs" >/dev/null
echo "gcc Release: ok"
CC=clang cmake -S . -B build-clang -DCMAKE_BUILD_TYPE=Release -DDS_WERROR=ON >/dev/null
cmake --build build-clang -j"$jobs" 2>&1 | grep -E 'error|warning' || true
cmake --build build-clang -j"$jobs" >/dev/null
echo "clang Release: ok"

phase "tests"
(cd build && ctest --output-on-failure -j"$jobs")

phase "storage tests and the file-ingest integration tests again with io_uring refused"
(cd build && DS_IO_URING_DISABLE=1 ctest --output-on-failure -j"$jobs" -L storage)
(cd build && DS_IO_URING_DISABLE=1 ctest --output-on-failure -j"$jobs" \
  -R 'integration\.test_(cli|crash|io_paths)$')

phase "benchmarks, tiny inputs (smoke test only; real figures: docs/ARCHITECTURE.md)"
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

if [[ "${DS_TEST_QUICK:-0}" != 1 ]]; then
  phase "build (Debug, ASan+UBSan)"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DDS_SANITIZE=address,undefined \
        -DDS_BENCH=OFF >/dev/null
  cmake --build build-asan -j"$jobs" >/dev/null
  # The longest loops run in the normal pass only (the 30-minute budget): the Kafka kill and
  # rebalance loops (the router's three-node fault schedule too) and the 200k-line orders
  # stream; their code runs under ASan in the unit tests and the shorter integration tests
  # (test_orders_fixtures, test_order_lookup, test_router_serve, ...).
  # test_gsi_many_partitions is mostly 7,168 partitions of mkdir; its builder code runs under
  # ASan in test_gsi_rebuild and unit.index.*. test_console is mostly the browser's time; the
  # console's server side runs under ASan in test_console_serve and test_run_heat_stream.
  phase "tests under ASan+UBSan (the longest loops run in the normal pass only)"
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j"$jobs" \
    -E 'test_run_crash|test_run_group|test_kill9|test_router_kill9|test_no_double_count|test_run_rebalance_orders|test_orders_stream$|test_gsi_many_partitions|test_console$')

  phase "fuzz targets (libFuzzer, clang; scripts/fuzz.sh)"
  if [[ "${DS_LONG:-0}" == 1 ]]; then
    scripts/fuzz.sh --runs 10000000 --max-seconds 3600
  else
    scripts/fuzz.sh --seconds 35
  fi
  phase "ThreadSanitizer: everything that starts no librdkafka thread (scripts/tsan.sh)"
  scripts/tsan.sh
fi
phase "all passed"
