#!/usr/bin/env bash
# /metrics of `dayshard run --http` carries every bounded resource, and deploy/'s alert rules and
# dashboard name only metrics a node exports. A node with --retention-days 3 takes days
# 2026-01-01..05 (and a bad line): each resource family is present with HELP and TYPE and
# plausible (files and bytes per store, RSS and descriptors within the limit, the retention
# floor and stream day as the days say, days held 3); then a day 2026-01-08 event moves the
# floor past every held day and the partitions held drop. The scrape then feeds
# metric_names.py, which fails on any metric a rule or panel names that the node lacks.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"

"$PY" - >"$WORK/days.jsonl" <<'PYEOF'
import json
for day in range(1, 6):
    for i in range(40):
        print(json.dumps({"order_id": "o-%d-%d" % (day, i), "customer_id": i % 7 + 1,
                          "ts": "2026-01-%02dT10:%02d:00Z" % (day, i), "status": "paid",
                          "amount": 1 + i}))
print("this line is not an event")
PYEOF

# scrape: /metrics into $WORK/metrics.txt.
scrape() { curl -sf "$URL/metrics" >"$WORK/metrics.txt" || die "GET /metrics failed"; }
# value NAME[{LABELS}]: the sample's value in the last scrape ("" when absent).
value() { awk -v n="$1" '$1 == n {print $2}' "$WORK/metrics.txt"; }
# wait_value NAME EXPECTED SECONDS: scrapes until the sample has the value.
wait_value() {
  local deadline=$(($(now_ms) + $3 * 1000))
  while :; do
    scrape
    [[ $(value "$1") == "$2" ]] && return 0
    (($(now_ms) > deadline)) && return 1
    sleep 0.3
  done
}
# expect_family NAME TYPE: HELP and TYPE lines and at least one sample.
expect_family() {
  if grep -q "^# HELP $1 " "$WORK/metrics.txt" && grep -q "^# TYPE $1 $2\$" "$WORK/metrics.txt" &&
    grep -Eq "^$1(\{| )" "$WORK/metrics.txt"; then
    ok
  else
    fail "/metrics lacks the $2 $1 (HELP, TYPE and a sample)"
  fi
}
# expect_range WHAT VALUE LOW HIGH: LOW <= VALUE <= HIGH (integers).
expect_range() {
  if [[ $2 =~ ^[0-9]+$ ]] && (($2 >= $3 && $2 <= $4)); then
    ok
  else
    fail "$1: '$2' not in $3..$4"
  fi
}

start_broker --partitions 1
data="$WORK/data"
start_http_node n1 "$data" met --retention-days 3
wait_assigned n1 30 || die "node n1 got no partitions"
kcat_produce "$WORK/days.jsonl" || fail "kcat produce"
wait_value dayshard_orders 200 30 || die "the node did not store the 200 orders: $(value dayshard_orders)"

for family in dayshard_partitions_held dayshard_segment_fds dayshard_retention_floor_timestamp_seconds \
  dayshard_stream_day_timestamp_seconds dayshard_ids_keydir_bytes dayshard_ids_recent_bytes \
  dayshard_ids_recent_hard_bytes dayshard_ids_memory_bytes dayshard_ids_sealed_files \
  dayshard_ids_sealing dayshard_ids_seal_stall_seconds_max dayshard_disk_bytes dayshard_disk_files \
  dayshard_filesystem_avail_bytes dayshard_filesystem_size_bytes dayshard_process_resident_bytes \
  dayshard_process_open_fds dayshard_process_fds_max dayshard_days_held dayshard_day_shards_max \
  dayshard_shards_total dayshard_gsi_sealing dayshard_gsi_seal_stall_seconds_max \
  dayshard_gsi_log_bytes dayshard_ready dayshard_writer_stall_seconds_max \
  dayshard_compaction_slice_seconds_max dayshard_compacting; do
  expect_family "$family" gauge
done
for family in dayshard_ids_seals_total dayshard_ids_seal_stalls_total \
  dayshard_ids_seal_stall_seconds_total dayshard_gsi_seals_total dayshard_gsi_seal_failures_total \
  dayshard_compactions_total dayshard_compaction_slices_total; do
  expect_family "$family" counter
done

# 2026-01-03 and 2026-01-05 at 00:00 UTC: floor = stream day - 3 + 1
expect_eq "retention floor" 1767398400 "$(value dayshard_retention_floor_timestamp_seconds)"
expect_eq "stream day" 1767571200 "$(value dayshard_stream_day_timestamp_seconds)"
expect_eq "days held" 3 "$(value dayshard_days_held)"
shards_max=$(value dayshard_day_shards_max)
expect_range "most shards of a day" "$shards_max" 1 256
expect_range "shards of the held days" "$(value dayshard_shards_total)" 3 $((3 * shards_max))
held_before=$(value dayshard_partitions_held)
expect_range "partitions held" "$held_before" 3 $((3 * shards_max))
expect_range "segment descriptors" "$(value dayshard_segment_fds)" 0 "$held_before"
expect_range "orders-by-id keydir" "$(value dayshard_ids_keydir_bytes)" 1 $((64 << 20))
expect_range "orders-by-id recent tier" "$(value dayshard_ids_recent_bytes)" 1 $((16 << 20))
expect_eq "orders-by-id hard bound" $((16 << 20)) "$(value dayshard_ids_recent_hard_bytes)"
rss=$(value dayshard_process_resident_bytes)
expect_range "resident memory" "$rss" $((1 << 20)) $((4 << 30))
fds=$(value dayshard_process_open_fds)
expect_range "open descriptors" "$fds" 4 "$(value dayshard_process_fds_max)"
# the process's own view agrees within the sockets and files opened between the two looks
expect_range "open descriptors vs /proc" "$fds" $(($(ls "/proc/$NODE_PID/fd" | wc -l) - 16)) \
  $(($(ls "/proc/$NODE_PID/fd" | wc -l) + 16))
for store in parts ids gsi deadletters; do
  expect_range "bytes on disk of $store" "$(value "dayshard_disk_bytes{store=\"$store\"}")" 1 $((1 << 30))
  expect_range "files of $store" "$(value "dayshard_disk_files{store=\"$store\"}")" 1 100000
done
du_bytes=$(($(du -s --block-size=1 "$data" | cut -f1)))
sum_bytes=$(awk '$1 ~ /^dayshard_disk_bytes\{/ {s += $2} END {print s + 0}' "$WORK/metrics.txt")
expect_range "bytes on disk vs du" "$sum_bytes" $((du_bytes * 3 / 4)) "$du_bytes"
avail=$(value dayshard_filesystem_avail_bytes)
expect_range "filesystem free" "$avail" 1 "$(value dayshard_filesystem_size_bytes)"
expect_eq "ready" 1 "$(value dayshard_ready)"
# the longest commit held the writer a while (an fdatasync at least), and not for a minute
if awk '$1 == "dayshard_writer_stall_seconds_max" {found = 1; exit !($2 > 0 && $2 < 60)}
         END {if (!found) exit 1}' "$WORK/metrics.txt"; then
  ok
else
  fail "writer stall out of (0, 60) s: $(value dayshard_writer_stall_seconds_max)"
fi
expect_eq "compacting (200 new orders: nothing to compact)" 0 "$(value dayshard_compacting)"

# deploy/'s rules and panels name only metrics the node exports
if "$PY" "$ROOT/tests/integration/metric_names.py" "$ROOT/deploy/prometheus/dayshard.rules.yml" \
  "$ROOT/deploy/grafana/dayshard.json" "$WORK/metrics.txt" >"$WORK/names.out" 2>&1; then
  ok
else
  fail "deploy/ names metrics the node lacks: $(cat "$WORK/names.out")"
fi

# a later day moves the floor past every held day: their partitions leave the table
echo '{"order_id":"o-8","customer_id":1,"ts":"2026-01-08T10:00:00Z","status":"paid","amount":1}' >"$WORK/day8.jsonl"
kcat_produce "$WORK/day8.jsonl" || fail "kcat produce (day 8)"
wait_value dayshard_stream_day_timestamp_seconds 1767830400 30 || fail "stream day did not move to 2026-01-08"
expect_eq "retention floor after day 8" 1767657600 "$(value dayshard_retention_floor_timestamp_seconds)"
expect_eq "days held after day 8" 1 "$(value dayshard_days_held)"
held_after=$(value dayshard_partitions_held)
expect_range "partitions held after the drop (before: $held_before)" "$held_after" 1 $((held_before - 1))
stop_node n1 "$NODE_PID"
stop_broker
finish
