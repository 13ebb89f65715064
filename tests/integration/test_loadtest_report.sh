#!/usr/bin/env bash
# The report of `dayshard loadtest` (loadgen/loadtest_report.c) drawn from canned report.json
# documents with `dayshard loadtest --render-only DIR`, apart from a real load test: one run;
# five runs (a stored/produced mismatch, growths, null samples, an old run without most
# fields); a document with an empty run; malformed documents; gnuplot missing, gnuplot
# failing; a full disk (a file of the report linked to /dev/full). PNG checks run only where
# gnuplot is installed.
source "$(dirname "$0")/lib.sh"

render() { "$DAYSHARD" loadtest --render-only "$1"; }
have_gnuplot=false
if command -v gnuplot >/dev/null; then have_gnuplot=true; fi

# expect_no_grep WHAT FILE FIXED-STRING
expect_no_grep() {
  if grep -qF -- "$3" "$2"; then fail "$1: [$3] in $2"; else ok; fi
}
# expect_png WHAT FILE: a PNG image.
expect_png() {
  if [[ -f $2 && $(head -c 8 "$2" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]]; then ok
  else fail "$1: $2 is not a PNG"; fi
}

# ---- fixtures ----------------------------------------------------------------------------------

one="$WORK/one"
mkdir -p "$one"
cat > "$one/report.json" <<'EOF'
{"version": 1,
 "command": "dayshard loadtest --profile busy-day --events 600000 --rate 10000 --shards fixed:1",
 "profile": "busy-day", "events": 600000, "rate": 10000, "nodes": 1, "queries_per_s": 50,
 "shard_capacity_eps": 1000, "max_shards": 256, "kafka_partitions": 8,
 "started": "2026-12-01T23:00:00Z",
 "machine": {"cores": 2, "kernel": "6.1.0", "cpu": "AMD EPYC 7B13"},
 "runs": [
  {"strategy": "fixed:1", "shards": {"2026-01-20": 1, "2026-01-21": 1}, "key": "order",
   "events_produced": 600000, "events_stored": 600000, "duration_s": 61.2,
   "throughput_eps": 9803.9, "producer_behind_max_s": 0.01,
   "hot_partition": {"key": "DAY#2026-01-21#0", "peak_eps": 10012, "capacity_factor": 10.012},
   "hot_day": "2026-01-21", "hot_day_skew": 1.0,
   "over_capacity_seconds": 58, "would_throttle_events": 540000,
   "lag_p99_ms": 120.0, "lag_max_ms": 300.0, "gsi_lag_p99_ms": 40,
   "count_p50_us": 80, "count_p99_us": 300, "orders_p50_us": 90, "orders_p99_us": 400,
   "queries": 3000, "query_errors": 0, "growths": [],
   "warnings": ["2026-01-21 ran at 10.01x capacity on one shard"],
   "series": {"t_s": [1, 2, 3, 4, 5, 6, 7, 8],
     "produced_eps": [9900, 10012, 9950, 10000, 9980, 10004, 9990, 10001],
     "stored_eps": [9500, 9900, 10100, 10000, 9950, 10010, 9990, 10020],
     "lag_ms": [40, 80, 120, 110, null, 100, 90, 95],
     "gsi_lag_ms": [10, 20, 40, 30, 30, 25, 20, 20],
     "hottest_share": [0.96, 0.97, 0.97, 0.96, 0.97, 0.97, 0.96, 0.97],
     "hottest_eps": [9500, 9712, 9650, 9600, 9680, 9704, 9590, 9701],
     "count_p99_us": [280, 300, 310, 290, 300, 305, 295, 300],
     "orders_p99_us": [390, 400, 420, 380, 400, 410, 395, 400],
     "partitions": {"DAY#2026-01-21#0": [9500, 9712, 9650, 9600, 9680, 9704, 9590, 9701],
                    "DAY#2026-01-20#0": [400, 300, 300, 400, null, 300, 400, 300]}}}
 ]}
EOF

five="$WORK/five"
mkdir -p "$five"
cat > "$five/report.json" <<'EOF'
{"version": 1,
 "command": "dayshard loadtest --profile busy-day --events 600000 --rate 10000 --compare",
 "profile": "busy-day", "events": 600000, "rate": 10000, "nodes": 1, "queries_per_s": 50,
 "shard_capacity_eps": 1000, "max_shards": 256, "kafka_partitions": 8,
 "started": "2026-12-01T23:00:00Z",
 "machine": {"cores": 2, "kernel": "6.1.0", "cpu": "AMD EPYC 7B13"},
 "runs": [
  {"strategy": "fixed:1", "shards": {"2026-01-21": 1}, "key": "order",
   "events_produced": 600000, "events_stored": 600000, "duration_s": 61.2,
   "throughput_eps": 9803.9, "producer_behind_max_s": 0.01,
   "hot_partition": {"key": "DAY#2026-01-21#0", "peak_eps": 10012, "capacity_factor": 10.012},
   "hot_day": "2026-01-21", "hot_day_skew": 1.0,
   "over_capacity_seconds": 58, "would_throttle_events": 540000,
   "lag_p99_ms": 120.0, "lag_max_ms": 300.0, "gsi_lag_p99_ms": 40,
   "count_p50_us": 80, "count_p99_us": 300, "orders_p50_us": 90, "orders_p99_us": 400,
   "queries": 3000, "query_errors": 0, "growths": [], "warnings": [],
   "series": {"t_s": [1, 2, 3, 4, 5, 6],
     "produced_eps": [9900, 10012, 9950, 10000, 9980, 10004],
     "stored_eps": [9500, 9900, 10100, 10000, 9950, 10010],
     "lag_ms": [40, 80, 120, 110, 100, 100], "gsi_lag_ms": [10, 20, 40, 30, 30, 25],
     "hottest_share": [0.96, 0.97, 0.97, 0.96, 0.97, 0.97],
     "hottest_eps": [9500, 9712, 9650, 9600, 9680, 9704],
     "count_p99_us": [280, 300, 310, 290, 300, 305],
     "orders_p99_us": [390, 400, 420, 380, 400, 410],
     "partitions": {"DAY#2026-01-21#0": [9500, 9712, 9650, 9600, 9680, 9704],
                    "DAY#2026-01-20#0": [400, 300, 300, 400, 300, 300]}}},
  {"strategy": "fixed:4", "shards": {"2026-01-21": 4}, "key": "order",
   "events_produced": 600000, "events_stored": 600000, "duration_s": 60.4,
   "throughput_eps": 9933.8, "producer_behind_max_s": 0.02,
   "hot_partition": {"key": "DAY#2026-01-21#2", "peak_eps": 2600, "capacity_factor": 2.6},
   "hot_day": "2026-01-21", "hot_day_skew": 1.04,
   "over_capacity_seconds": 57, "would_throttle_events": 96000,
   "lag_p99_ms": 60.5, "lag_max_ms": 150.0, "gsi_lag_p99_ms": 30,
   "count_p50_us": 120, "count_p99_us": 500, "orders_p50_us": 95, "orders_p99_us": 420,
   "queries": 3000, "query_errors": 0, "growths": [], "warnings": [],
   "series": {"t_s": [1, 2, 3, 4, 5, 6],
     "produced_eps": [9900, 10012, 9950, 10000, 9980, 10004],
     "stored_eps": [9800, 10000, 9990, 10000, 9980, 10000],
     "lag_ms": [20, 40, 60, 50, 50, 45], "gsi_lag_ms": [10, 15, 30, 20, 20, 20],
     "hottest_share": [0.25, 0.26, 0.25, 0.25, 0.26, 0.25],
     "hottest_eps": [2500, 2600, 2480, 2500, 2590, 2510],
     "count_p99_us": [480, 500, 510, 490, 500, 505],
     "orders_p99_us": [400, 420, 430, 410, 420, 415],
     "partitions": {"DAY#2026-01-21#0": [2400, 2500, 2450, 2480, 2390, 2500],
                    "DAY#2026-01-21#1": [2380, 2410, 2460, 2500, 2400, 2490],
                    "DAY#2026-01-21#2": [2500, 2600, 2480, 2500, 2590, 2510],
                    "DAY#2026-01-21#3": [2300, 2400, 2460, 2420, 2500, 2400]}}},
  {"strategy": "adaptive, key order", "shards": {"2026-01-20": 1, "2026-01-21": 16},
   "key": "order", "events_produced": 600000, "events_stored": 599990, "duration_s": 60.1,
   "throughput_eps": 9983.2, "producer_behind_max_s": 0.01,
   "hot_partition": {"key": "DAY#2026-01-21#0", "peak_eps": 2512, "capacity_factor": 2.512},
   "hot_day": "2026-01-21", "hot_day_skew": 1.03,
   "over_capacity_seconds": 3, "would_throttle_events": 4860,
   "lag_p99_ms": 35.25, "lag_max_ms": 90.0, "gsi_lag_p99_ms": 20,
   "count_p50_us": 150, "count_p99_us": 700, "orders_p50_us": 90, "orders_p99_us": 410,
   "queries": 3000, "query_errors": 2,
   "growths": [{"day": "2026-01-21", "from": 1, "to": 4, "at_s": 1.1, "reason": "2,512/s > capacity"},
               {"day": "2026-01-21", "from": 4, "to": 16, "at_s": 3.2, "reason": "1,020/s > capacity | still hot"}],
   "warnings": ["10 events were not stored", "queries failed: 2"],
   "series": {"t_s": [1, 2, 3, 4, 5, 6],
     "produced_eps": [9900, 10012, 9950, 10000, 9980, 10004],
     "stored_eps": [9800, 10000, 9990, 10000, 9980, 9990],
     "lag_ms": [20, 35, 30, 20, 15, 15], "gsi_lag_ms": [10, 20, 20, 15, 15, 10],
     "hottest_share": [0.98, 0.25, 0.25, 0.07, 0.065, 0.066],
     "hottest_eps": [9700, 2512, 2480, 700, 650, 660],
     "count_p99_us": [500, 600, 700, 690, 650, 640],
     "orders_p99_us": [400, 410, 420, 405, 400, 400],
     "partitions": {"DAY#2026-01-21#0": [9700, 2512, 2480, 700, 650, 660],
                    "DAY#2026-01-21#1": [0, 2500, 2450, 650, 640, 620],
                    "DAY#2026-01-21#5": [0, 0, 0, 610, 630, 640],
                    "DAY#2026-01-20#0": [200, 300, 300, 300, 300, 300]}}},
  {"strategy": "adaptive, key customer", "shards": {"2026-01-21": 8}, "key": "customer",
   "events_produced": 600000, "events_stored": 600000, "duration_s": 60.0,
   "throughput_eps": 10000, "producer_behind_max_s": 2.5,
   "hot_partition": {"key": "DAY#2026-01-21#3", "peak_eps": 1800},
   "hot_day": "2026-01-21", "hot_day_skew": 1.8,
   "over_capacity_seconds": 6, "would_throttle_events": 3000,
   "lag_p99_ms": 50, "lag_max_ms": 70.0, "gsi_lag_p99_ms": null,
   "count_p50_us": 140, "count_p99_us": 650, "orders_p50_us": null, "orders_p99_us": null,
   "queries": 3000, "query_errors": 0,
   "growths": [{"day": "2026-01-21", "from": 1, "to": 8, "at_s": 2.0, "reason": "skewed"},
               {"day": "2026-01-22", "from": 1, "to": 2, "at_s": 4.0, "reason": "spill"}],
   "warnings": [],
   "series": {"t_s": [1, 2, 3, 4, 5, 6],
     "produced_eps": [9900, 10012, null, 10000, 9980, 10004],
     "stored_eps": [9800, 10000, null, 10000, 9980, 10000],
     "lag_ms": [25, null, 50, 40, 35, 30], "gsi_lag_ms": [null, null, null, null, null, null],
     "hottest_share": [0.9, 0.18, 0.17, null, 0.18, 0.18],
     "hottest_eps": [9000, 1800, 1700, null, 1790, 1780],
     "count_p99_us": [600, 650, 640, 630, 620, 610],
     "orders_p99_us": [null, null, null, null, null, null],
     "partitions": {"DAY#2026-01-21#3": [9000, 1800, 1700, null, 1790, 1780],
                    "DAY#2026-01-21#0": [0, 1200, 1100, null, 1150, 1160]}}},
  {"strategy": "legacy", "events_produced": 1000, "events_stored": 1000}
 ]}
EOF

# ---- one run -----------------------------------------------------------------------------------

expect_exit "one run renders" 0 render "$one"
cp "$WORK/err" "$WORK/one.err"
md="$one/report.md"
expect_grep "title" "$md" "# Load test: busy-day, 600,000 events at 10,000/s, 1 node"
expect_grep "command" "$md" "dayshard loadtest --profile busy-day --events 600000 --rate 10000 --shards fixed:1"
expect_grep "machine" "$md" "- machine: AMD EPYC 7B13, 2 cores, kernel 6.1.0"
expect_grep "reading: peak" "$md" 'peaked at 10,012 events/s, 10.01x the shard capacity of 1,000/s'
expect_grep "reading: throttle" "$md" "it would have throttled 540,000 events"
expect_grep "reading: integrity" "$md" "The run stored exactly the events it produced."
expect_grep "table row" "$md" '| 1 | fixed:1 | 600,000 | 600,000 | 9,804 | `DAY#2026-01-21#0` | 10,012 | 10.01x | 1.00 | 58 | 540,000 | 120.0 | 300 | 400 | 2026-01-21: 1 |'
expect_grep "warnings listed" "$md" "- 2026-01-21 ran at 10.01x capacity on one shard"
expect_grep "no growths" "$md" "Growths: none."
for name in throughput hottest-share lag latency heat-1; do
  [[ -f $one/plots/$name.gp && -f $one/plots/$name.dat ]] && ok || fail "one: $name.gp/.dat missing"
done
if $have_gnuplot; then
  for name in throughput hottest-share lag latency heat-1; do
    expect_png "one: $name" "$one/plots/$name.png"
    expect_grep "one: $name embedded" "$md" "(plots/$name.png)"
    expect_grep "one: progress for $name" "$WORK/one.err" "$one/plots/$name.png"
  done
  expect_eq "one: no gnuplot log left" "" "$(ls "$one/plots" | grep '\.log$' || true)"
  # A script re-runs by hand from its directory, as its header says.
  rm "$one/plots/heat-1.png"
  (cd "$one/plots" && gnuplot heat-1.gp 2>/dev/null) && ok || fail "heat-1.gp does not re-run"
  expect_png "one: heat-1 re-drawn" "$one/plots/heat-1.png"
else
  echo "gnuplot is not installed: PNG checks skipped"
fi

# ---- five runs ---------------------------------------------------------------------------------

expect_exit "five runs render" 0 render "$five"
md="$five/report.md"
expect_eq "five: table rows" 5 "$(grep -cE '^\| [0-9]+ \| ' "$md")"
expect_grep "five: mismatch marked" "$md" "| **599,990 MISMATCH: 10 missing** |"
expect_grep "five: mismatch in the reading" "$md" "**Run 3 (adaptive, key order) stored 599,990 of the 600,000 events it produced: 10 missing.**"
expect_grep "five: share of run 1" "$md" "| 4,860 (0.9%) |"
expect_grep "five: fixed:4 share" "$md" "| 96,000 (17.8%) |"
expect_grep "five: growth in prose" "$md" "it grew 2026-01-21 from 1 to 16 shards in 2 steps, the last at 3.2 s"
expect_grep "five: throttle in prose" "$md" "it would have throttled 4,860 events, 0.9% of what run 1 (fixed:1) would have"
expect_grep "five: other days" "$md" "it grew other days 1 time"
expect_grep "five: growth row, '|' escaped" "$md" '| 3.2 | 2026-01-21 | 4 | 16 | 1,020/s \> capacity \| still hot |'
expect_grep "five: factor computed" "$md" "| 1,800 | 1.80x | 1.80 |"
expect_grep "five: hot-day shards" "$md" "| 2026-01-21: 16 |"
expect_grep "five: producer behind" "$md" "In run 4 the producer fell up to 2.5 s behind its schedule"
expect_grep "five: query errors" "$md" "In run 3, 2 of 3,000 queries failed."
expect_grep "five: lag range" "$md" "Ingest lag p99 ranged from 35.2 ms (run 3) to 120.0 ms (run 1)."
expect_grep "five: old run" "$md" "| 5 | legacy | 1,000 | 1,000 | - | - | - | - | - | - | - | - | - | - | - |"
expect_grep "five: old run growths" "$md" "Growths: not reported."
expect_grep "five: warnings" "$md" "- queries failed: 2"
expect_grep "five: heat 5 empty" "$md" "Write rate per partition, run 5 (legacy): no samples to plot"
expect_grep "five: final shards" "$md" "Final shards: 2026-01-21: 16; 1 day with one shard."
if $have_gnuplot; then
  for name in throughput hottest-share lag latency heat-1 heat-2 heat-3 heat-4; do
    expect_png "five: $name" "$five/plots/$name.png"
  done
  [[ ! -e $five/plots/heat-5.png ]] && ok || fail "five: heat-5.png drawn without samples"
  # Lines without a single point (run 4's orders p99) are left out, not handed to gnuplot.
  expect_no_grep "five: empty line left out" "$five/plots/latency.gp" "index 3 using 1:3"
  expect_eq "five: heat rows of run 2" 4 "$(grep -c "'DAY#" "$five/plots/heat-2.gp")"
fi

# ---- fields missing: "-" everywhere, still 0 ---------------------------------------------------

bare="$WORK/bare"
mkdir -p "$bare"
echo '{"runs": [{}]}' > "$bare/report.json"
expect_exit "bare document renders" 0 render "$bare"
expect_grep "bare: title" "$bare/report.md" "# Load test: -, - events at -/s, - nodes"
expect_grep "bare: row" "$bare/report.md" "| 1 | - | - | - | - | - | - | - | - | - | - | - | - | - | - |"
expect_grep "bare: reading" "$bare/report.md" "Run 1 reported none of these numbers."

# ---- malformed documents -----------------------------------------------------------------------

bad="$WORK/bad"
mkdir -p "$bad"
for doc in '[1, 2]|not a JSON object' '{"version": 1}|no "runs" array' \
           '{"runs": [{}, 3]}|run 2 is not an object'; do
  echo "${doc%%|*}" > "$bad/report.json"
  expect_exit "malformed ${doc%%|*}" 1 render "$bad"
  expect_grep "malformed ${doc%%|*}: reason" "$WORK/err" "$bad/report.json: ${doc#*|}"
done

# ---- gnuplot missing, gnuplot failing ----------------------------------------------------------

nognu="$WORK/nognu"
mkdir -p "$nognu" "$WORK/emptybin"
cp "$one/report.json" "$nognu/"
expect_exit "no gnuplot: still 0" 0 env PATH="$WORK/emptybin" "$DAYSHARD" loadtest --render-only "$nognu"
expect_grep "no gnuplot: warning" "$WORK/err" "gnuplot is not installed"
expect_grep "no gnuplot: said in report.md" "$nognu/report.md" "gnuplot is not installed, so no plot was drawn"
expect_no_grep "no gnuplot: no image" "$nognu/report.md" "!["
[[ -f $nognu/plots/heat-1.gp && -f $nognu/plots/lag.dat ]] && ok || fail "no gnuplot: scripts missing"

failing="$WORK/failing"
mkdir -p "$failing" "$WORK/fakebin"
cp "$one/report.json" "$failing/"
printf '#!/bin/sh\necho "boom: $1" >&2\nexit 3\n' > "$WORK/fakebin/gnuplot"
chmod +x "$WORK/fakebin/gnuplot"
expect_exit "gnuplot fails: 1" 1 env PATH="$WORK/fakebin:$PATH" "$DAYSHARD" loadtest --render-only "$failing"
expect_grep "gnuplot fails: named" "$WORK/err" "$failing/plots/lag.gp: gnuplot failed (exit 3)"
expect_grep "gnuplot fails: log kept" "$failing/plots/lag.log" "boom: lag.gp"
expect_grep "gnuplot fails: said in report.md" "$failing/report.md" "**gnuplot failed**, see plots/lag.log"

# ---- a full disk is reported with the file -----------------------------------------------------

full="$WORK/full"
mkdir -p "$full/plots"
cp "$one/report.json" "$full/"
ln -s /dev/full "$full/report.md"
expect_exit "full disk: report.md" 1 render "$full"
expect_grep "full disk: report.md named" "$WORK/err" "$full/report.md: No space left on device"
rm "$full/report.md" "$full/plots/lag.dat"
ln -s /dev/full "$full/plots/lag.dat"
expect_exit "full disk: a data file" 1 render "$full"
expect_grep "full disk: lag.dat named" "$WORK/err" "$full/plots/lag.dat: No space left on device"
[[ ! -e $full/report.md ]] && ok || fail "full disk: report.md written after a failed plot"

finish
