#!/usr/bin/env bash
# ThreadSanitizer run: builds the project with clang and
# -DDS_SANITIZE=thread in build-tsan/ and runs, with ctest, the tests that start threads of
# ours and none of librdkafka's: unit tests whose code runs on one thread give TSan nothing to
# check and are left out (listed below). librdkafka is not built with TSan here (Debian's
# package), so its own threads and their locks are invisible to the sanitizer: tests that start
# a consumer or a producer report its internals, or our code racing against frames TSan cannot
# see, and say nothing true about our code. Those are left to the ASan/UBSan and the plain runs.
#
#   scripts/tsan.sh               configure, build, run the selection below
#   scripts/tsan.sh --no-build    run again on the existing build-tsan/
#
# Exits non-zero when a test fails or TSan reports a race (halt_on_error=1 makes the first
# report fail its test). Suppressions (scripts/tsan.supp) cover third-party code only, each with
# its reason.
set -euo pipefail
cd "$(dirname "$0")/.."

build=true
build_dir=build-tsan
while [[ $# -gt 0 ]]; do
  case $1 in
    --no-build) build=false; shift ;;
    --build-dir) build_dir=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    *) echo "tsan.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done

# Unit tests (label unit): those whose code starts a thread and that create no Kafka handle.
# They drive one unit through its interfaces and fakes (rd_kafka_new is only called from
# ingest/kafka_*.c, ingest/shardmap_topic.c and loadgen/kafka_*.c, which only the tests in
# kafka_clients below reach).
unit_label=unit
# Left out for librdkafka's threads (see above): the unit tests that run a node in-process on
# the mock cluster.
kafka_clients=(ingest.node_pause)
# Left out: the unit tests whose code runs on one thread (a run with pthread_create counted
# starts none, at the sizes of this pass), so TSan has nothing to check there; they run in the
# plain and the ASan+UBSan passes. A unit test not named here runs under TSan, so a new one, or
# one that starts a thread later, is not missed.
single_threaded=(
  common.log common.varint                    # formatting and varints
  shard.route shard.shardmap shard.heat shard.grow shard.heat_history shard.heat_advice
  ingest.decode ingest.decode_diff ingest.deadletter ingest.kafka_props ingest.restore_select
  ingest.tenure                               # decoders, dead-letter files, tenures: pure
  loadgen.produce_key loadgen.workload loadgen.soak_prom loadgen.soak_verdict
  loadgen.loadtest_gate loadgen.loadtest_hist loadgen.loadtest_html  # report arithmetic
  storage.block storage.manifest              # one file at a time, the caller's thread
  storage.storage storage.io storage.release storage.retention storage.segment_compact
                                              # the events model's store: no thread of its own
  storage.ids storage.orders                  # the orders-by-id store, its seal not started
                                              # (the seal's thread: storage.ids_seal, kept)
  storage.fsck_orders storage.fsck_reconcile storage.fsck_restore storage.fsck_rollback
                                              # fsck and repair run on the caller's thread
  index.index_cursor                          # cursor arithmetic
  query.count query.count_days query.serve_request query.metrics query.heat_render query.render
  query.heat_history_render                   # a query on the caller's thread, renderers
  router.router_merge router.router_owner router.router_heat  # the router's pure parts
)
# test_index_oracle: only its tests of the online seal (the one thread it starts; see
# DS_GSI_ORACLE_FILTER there).
export DS_GSI_ORACLE_FILTER='*seal*'
# Integration tests that run only file ingest, count, serve, orders --data, fsck and top (an
# HTTP client): none of them starts a broker, `dayshard run` or `dayshard produce`.
integration=(
  test_cli           # ingest from files, count, fsck, orders --data, serve's argument checks
  test_crash         # kill -9 of a file ingest, then recovery and fsck
  test_io_paths      # file ingest through both I/O backends, count and fsck
  test_serve         # serve (libmicrohttpd threads, the count fan-out, the index reader)
  test_serve_hostile # serve under slow, oversized and malformed clients
  test_serve_live    # serve reading a store while a file ingest appends to it
  test_top           # top against a scripted HTTP server
  test_router_serve  # the router (libmicrohttpd workers, libcurl clients, the prober) over serve
)
# Left out, each because it starts librdkafka (a broker, `run`, `produce` or `loadtest`):
# test_broker test_gsi_rebuild test_kill9 test_loadtest test_loadtest_report test_produce test_run
# test_run_crash test_run_dlq test_run_faults test_run_group test_run_gsi test_run_gsi_lag
# test_run_heat test_run_http test_run_pause. (`gsi rebuild` runs in test_gsi_rebuild only,
# which fills the store through a broker; the index itself is covered by unit.index.*.)

# Builds and tests run at the caller's priority, as every other phase of scripts/test.sh does:
# under nice, a machine with other work on it gives them a sliver of a core (beside a busy loop
# per core, this pass took over 30 minutes). `nice scripts/tsan.sh` yields for the whole run.
if $build; then
  CC=clang cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDS_WERROR=ON \
    -DDS_SANITIZE=thread -DDS_BENCH=OFF -DDS_FUZZ=OFF > /dev/null
  cmake --build "$build_dir" -j2
fi

# halt_on_error: the first report fails the test. second_deadlock_stack: both stacks of a lock
# order inversion. history_size=4: longer access history, fewer "failed to restore the stack".
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 history_size=4"
TSAN_OPTIONS+=" suppressions=$PWD/scripts/tsan.supp"
export TSAN_OPTIONS
# The sanitizer passes' sizes: fewer decoder cases (fuzz_decode covers the decoder too), shorter
# corruption sweeps.
export DS_DIFF_CASES=30000 DS_SHORT=1
jobs=$(nproc)

regex="^integration\\.($(IFS='|'; echo "${integration[*]}"))\$"
log=$(mktemp "${TMPDIR:-/tmp}/dayshard-tsan.XXXXXX")
rc=0
skip="^unit\\.($(IFS='|'; echo "${single_threaded[*]}|${kafka_clients[*]}" | sed 's/\./\\./g'))\$"
(cd "$build_dir" && ctest --output-on-failure -j"$jobs" -L "$unit_label" -E "$skip") 2>&1 |
  tee -a "$log" || rc=1
(cd "$build_dir" && ctest --output-on-failure -j"$jobs" -R "$regex") 2>&1 | tee -a "$log" || rc=1
# ctest prints "N% tests passed, F tests failed out of T" once per call.
total=0
failed=0
while read -r f t; do
  failed=$((failed + f))
  total=$((total + t))
done < <(sed -nE 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1 \2/p' "$log")
races=$(grep -c 'WARNING: ThreadSanitizer' "$log" || true)
echo "tsan.sh: $total tests ran under ThreadSanitizer, $failed failed, $races TSan report(s)"
rm -f "$log"
exit "$rc"
