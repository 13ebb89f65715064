#!/usr/bin/env bash
# `dayshard soak` at a small size: a node with --retention-days 2 fed 12 stream days (4,000 new
# orders a day, half updated) with restarts every 4 days passes, and report.json holds what the
# contract names (schema, config, feed, samples per resource over stream day, verdicts with
# their windows, restarts, stalls, the exact count of the last 2 days against `dayshard
# ingest`); --render-only draws the plots again; a node whose retention is overridden to keep
# everything fails with exit 1 naming the growing directory; bad arguments exit 2; the orders
# model (the default) at a size past the orders-by-id store's first seal passes too.
# The pass runs use a small index table and 4 shards a day at most (the index's default 48 MiB
# table is still being touched at these sizes: RSS warms up). The events model's pass run is
# the small one; the orders model's needs 24,000 orders a day (see its case below), about 35 s
# of this test's ~100 s on a loaded 2-core machine.
source "$(dirname "$0")/lib.sh"

expect_exit "--help" 0 "$DAYSHARD" soak --help
grep -q "^usage: dayshard soak" "$WORK/out" && ok || fail "soak --help text"
grep -q "last > first x ratio + slack" "$WORK/out" && ok || fail "--help lacks the growth rule"
expect_exit "days under 4N" 2 "$DAYSHARD" soak --days 10 --retention-days 3 --restart-every 0
grep -q "under 12 = 4 x --retention-days" "$WORK/err" && ok || fail "days under 4N: no reason given"
expect_exit "days under R + 2K, R the first restart from day 2N" 2 "$DAYSHARD" soak --days 23 \
  --retention-days 3 --restart-every 8
grep -q "under 24 = R + 2 x --restart-every" "$WORK/err" && ok || fail "days under R + 2K: no reason"
expect_exit "bad signal" 2 "$DAYSHARD" soak --restart-signal HUP
expect_exit "bad model" 2 "$DAYSHARD" soak --model nope
expect_exit "render-only without a report" 1 "$DAYSHARD" soak --render-only "$WORK/none"

# soak_pass NAME ARGS...: a soak that must pass, into $WORK/NAME (its output in NAME.out and
# NAME.err), with the pass runs' restarts and node settings; checks its exit status. The node's
# Kafka consumer keeps at most 10,000 messages (4 MiB) read ahead: by default it reads up to 64
# MiB ahead of a node that falls behind, so on a busy machine the RSS rule would judge how far
# the consumer ran ahead in each window (seen: 58 -> 79 MiB against a limit of 70.6) rather than
# the node's own memory.
soak_pass() {
  local name=$1
  shift
  set +e
  timeout 300 "$DAYSHARD" soak "$@" --restart-every 4 --node-arg=--max-shards=4 \
    --node-arg=--gsi-slots-log2=12 --node-arg=-Xqueued.min.messages=10000 \
    --node-arg=-Xqueued.max.messages.kbytes=4096 --out "$WORK/$name" >"$WORK/$name.out" \
    2>"$WORK/$name.err"
  local rc=$?
  set -e
  expect_eq "$name soak exit status ($(grep -E 'FAIL|dayshard soak' "$WORK/$name.out" \
    "$WORK/$name.err" | head -3))" 0 "$rc"
}

small=(--days 12 --orders-per-day 4000 --retention-days 2 --rate 4000 --partitions 4)
soak_pass pass "${small[@]}" --model events
out="$WORK/pass"
r=$out/report.json
if [[ -f $r ]]; then
  ok
  expect_eq "schema" 1 "$(json_get "$r" 'd["schema"]')"
  expect_eq "passed" True "$(json_get "$r" 'd["passed"]')"
  expect_eq "config retention" 2 "$(json_get "$r" 'd["config"]["retention_days"]')"
  expect_eq "every line fed" True \
    "$(json_get "$r" 'd["feed"]["lines_acked"] == d["feed"]["lines"] == 72000')"
  expect_eq "feed rate measured" True "$(json_get "$r" 'd["feed"]["feed_eps"] > 0')"
  expect_eq "windows: W = the restart interval, 4 days" "[[4, 8], [8, 12]]" \
    "$(json_get "$r" '[d["windows"]["first"], d["windows"]["last"]]')"
  for s in stream_day rss_bytes hwm_bytes open_fds disk_bytes disk_bytes.parts disk_bytes.gsi \
    partitions_held days_held segment_fds lag_messages events_ingested; do
    expect_eq "series $s has samples" True \
      "$(json_get "$r" "len(d['samples']['$s']) == len(d['samples']['t_s']) > 5 and any(x is not None for x in d['samples']['$s'])")"
  done
  expect_eq "stream day reaches the end" 11 "$(json_get "$r" 'int(max(x for x in d["samples"]["stream_day"] if x is not None))')"
  for v in disk_bytes rss_bytes open_fds partitions_held days_held; do
    expect_eq "verdict $v judged and bounded" "True False" \
      "$(json_get "$r" "' '.join(str(x[k]) for x in d['verdicts'] if x['resource'] == '$v' for k in ('judged', 'grew'))")"
  done
  expect_eq "two restarts timed" True \
    "$(json_get "$r" 'len(d["restarts"]) == 2 and all(x["ready_ms"] > 0 and x["stop_ms"] >= 0 for x in d["restarts"])')"
  expect_eq "stalls reported" True "$(json_get "$r" '"writer_stall_s" in d["stalls"]')"
  expect_eq "last 2 days counted exactly" "True 2" \
    "$(json_get "$r" 'str(d["counts"]["match"]) + " " + str(len(d["counts"]["days"]))')"
  expect_eq "counts are the stream's" True \
    "$(json_get "$r" 'all(0 < x["orders"] == x["orders_ref"] and 0 < x["paid"] == x["paid_ref"] for x in d["counts"]["days"])')"
  grep -q "^soak: PASS" "$WORK/pass.out" && ok || fail "summary lacks PASS"
  grep -q "^disk_bytes " "$WORK/pass.out" && ok || fail "summary lacks the directory's row"
  [[ ! -d $out/data && ! -d $out/ref ]] && ok || fail "data directories kept without --keep-data"
  if command -v gnuplot >/dev/null; then
    for p in bytes memory files held; do
      [[ -s $out/$p.png ]] && ok || fail "no $p.png"
    done
    rm -f "$out"/*.png
    expect_exit "render-only" 0 "$DAYSHARD" soak --render-only "$out"
    [[ -s $out/bytes.png ]] && ok || fail "render-only drew no bytes.png"
  fi
else
  fail "no report.json"
fi

# The orders model past the orders-by-id store's first seal. A commit that leaves the store's
# recent-tier log at 8 MiB or more (IDS_RECENT_BYTES_DEFAULT, storage/ids.h) starts the first
# seal; until then the log keeps every record, dropped days' too (retention's own seal trigger
# looks at sealed files' days, and there are none yet), so below that size the rule would judge
# the log's warm-up, not the store. A new order with its half update takes ~50 bytes of log,
# so 8 MiB is ~170,000 orders: about 21,000 a day reach it on stream day 8, where the last
# window [8, 12) starts; at 24,000 a day the seal comes near day 7, a day before it (at 20,000
# it came on day 8), and the rule judges a sealed store against its unsealed peak. At 12,000
# a day the soak fails, naming the store's bytes (4.4 -> 6.7 MiB: the unsealed log); at 4,000
# it passes without ever sealing (its growth within the 1 MiB slack).
orders=(--days 12 --orders-per-day 24000 --retention-days 2 --rate 24000 --partitions 4)
soak_pass orders "${orders[@]}" --model orders
r=$WORK/orders/report.json
if [[ -f $r ]]; then
  expect_eq "orders: passed, orders model" "True orders" \
    "$(json_get "$r" 'str(d["passed"]) + " " + d["config"]["model"]')"
  expect_eq "orders: every line fed" True \
    "$(json_get "$r" 'd["feed"]["lines_acked"] == d["feed"]["lines"] == 432000')"
  # sealed files in every sample of the last window
  late='[x for x, day in zip(d["samples"]["ids_sealed_files"], d["samples"]["stream_day"])
         if None not in (x, day) and day >= d["windows"]["last"][0]]'
  expect_eq "orders: the store sealed before the last window" True \
    "$(json_get "$r" "len($late) > 3 and min($late) > 0")"
  expect_eq "orders: the seal brought the store below its unsealed peak" True \
    "$(json_get "$r" 'any(v["resource"] == "disk_bytes.ids" and v["last_max"] < v["first_max"] for v in d["verdicts"])')"
  for v in disk_bytes disk_bytes.ids ids_keydir_bytes ids_sealed_files rss_bytes open_fds; do
    expect_eq "orders: verdict $v judged and bounded" "True False" \
      "$(json_get "$r" "' '.join(str(x[k]) for x in d['verdicts'] if x['resource'] == '$v' for k in ('judged', 'grew'))")"
  done
  expect_eq "orders: last 2 days counted exactly" "True 2" \
    "$(json_get "$r" 'str(d["counts"]["match"]) + " " + str(len(d["counts"]["days"]))')"
else
  fail "orders: no report.json"
fi

# Retention overridden to keep every day: the directory grows (12 days held at the end against
# 6 in days [4, 6)) and the soak says so. What it names is the partitions' store, or the whole
# directory when the index's log does not hide it: the index's log is a sawtooth whose peak can
# fall in the first window (seen: directory 15.1 MiB there, the index 12.3 of it, against 12.0
# in the last window, while the partitions' store went 2.8 -> 6.6 MiB).
set +e
timeout 300 "$DAYSHARD" soak --days 12 --orders-per-day 20000 --retention-days 2 --rate 20000 \
  --partitions 4 --restart-every 0 --model events --node-arg=--retention-days=0 \
  --out "$WORK/grow" >"$WORK/grow.out" 2>"$WORK/grow.err"
rc=$?
set -e
expect_eq "growing node exit status" 1 "$rc"
grep -qE "^FAIL: disk_bytes(\.parts)? grew" "$WORK/grow.out" && ok ||
  fail "the growing directory is not named"
grep -q "^FAIL: days_held grew" "$WORK/grow.out" && ok || fail "the growing days held are not named"
expect_eq "report says failed" False "$(json_get "$WORK/grow/report.json" 'd["passed"]')"
finish
