#!/usr/bin/env bash
# `dayshard gsi rebuild --data DIR`: the by-customer index rebuilt from the base segments
# equals the one a node built incrementally, line for line:
# - after DIR/gsi is deleted;
# - after it is damaged: a foreign FORMAT file (a node refuses to start, the rebuild repairs
#   it); the log cut in half with the table checkpoint deleted (the node repairs that itself:
#   it cuts the log back and replays from the cursor); a byte of the log flipped (rebuilt);
# - after a rebuild was killed -9 midway (the old index stays in DIR/gsi.old-PID);
# - rebuilt with a 64-slot table (--slots-log2 6), so most customers share chains;
# - refused (exit 1) while a node runs on DIR, and on a directory without data;
# - usage errors exit 2.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"

DATA=$WORK/data
REBUILD_ARGS=()
start_broker --partitions 4
gsi_events 11 "$WORK/events.jsonl"
expected=$(truth "$WORK/events.jsonl")
total=$(total_of <<<"$expected")

# Customers viewed: two heavy ones (thousands of orders), a light one (one order), string ids
# and an integer id that looks like one of them.
CUSTOMERS=(2 1 999999999 '"42"' 42 '"cust é"')

# save_views NAME: every customer's full pagination (limits 97 and 1000) into $WORK/NAME/.
save_views() {
  local name=$1 customer path limit i=0
  mkdir -p "$WORK/$name"
  curl -s "$URL/v1/customers/1/orders?consistent=true" >/dev/null
  for customer in "${CUSTOMERS[@]}"; do
    i=$((i + 1))
    path=$(customer_path "$customer")
    for limit in 97 1000; do
      "$PY" "$GSI_LIB" pages "$URL/v1/customers/$path/orders" "$limit" --full >"$WORK/$name/$i-$limit" ||
        fail "$name: pages of $customer (limit $limit) failed"
    done
  done
}

# check_views NAME: the views saved as NAME equal the incremental ones, line for line.
check_views() {
  local name=$1 f
  save_views "$name"
  for f in "$WORK"/incremental/*; do
    if cmp -s "$f" "$WORK/$name/$(basename "$f")"; then ok; else
      fail "$name: view $(basename "$f") differs: $(diff "$f" "$WORK/$name/$(basename "$f")" | head -4)"
    fi
  done
}

# rebuild NAME [ENV...]: `gsi rebuild --json ${REBUILD_ARGS[@]}` must exit 0, index every event and leave no
# gsi.old-PID of its own behind.
rebuild() {
  local name=$1
  shift
  expect_exit "$name: rebuild" 0 env "$@" "$DAYSHARD" gsi rebuild --data "$DATA" --json \
    "${REBUILD_ARGS[@]}"
  cp "$WORK/out" "$WORK/$name.json"
  expect_eq "$name: events indexed" "$total" "$(json_get "$WORK/$name.json" 'd["events"]')"
  expect_eq "$name: status" rebuilt "$(json_get "$WORK/$name.json" 'd["status"]')"
  [[ -f $DATA/gsi/FORMAT ]] && ok || fail "$name: no index after the rebuild"
  note "$name: $(cat "$WORK/$name.json")"
}

# ---- the incremental view, built by a node --------------------------------------------------
start_http_node n1 "$DATA" rebuild
wait_assigned n1 30 || die "the node got no partitions"
ds_produce "$WORK/events.jsonl" || fail "produce"
wait_counts "counts" "$expected" 60 "$DATA"
save_views incremental
for customer in 1 3 4 5; do # the views are right to begin with (limit 1000 against the truth)
  "$PY" "$GSI_LIB" truth "${CUSTOMERS[customer - 1]}" "$WORK/events.jsonl" >"$WORK/want"
  cut -d' ' -f1-3 "$WORK/incremental/$customer-1000" >"$WORK/got"
  cmp -s "$WORK/want" "$WORK/got" && ok || fail "incremental view of ${CUSTOMERS[customer - 1]} is wrong"
done
(($(wc -l <"$WORK/incremental/1-1000") > 2000)) && ok || fail "the heavy customer is not heavy"
expect_eq "the light customer has one order" 1 "$(wc -l <"$WORK/incremental/3-1000")"

# (c) refused while the node runs, and the index left alone.
expect_exit "rebuild while a node runs" 1 "$DAYSHARD" gsi rebuild --data "$DATA"
grep -q "a node is running" "$WORK/err" && ok || fail "no clear message: $(cat "$WORK/err")"
compgen -G "$DATA/gsi.old-*" >/dev/null && fail "a refused rebuild moved the index" || ok
stop_node n1 "$NODE_PID"

# (d) usage errors and refusals.
expect_exit "gsi without a subcommand" 2 "$DAYSHARD" gsi
expect_exit "gsi with an unknown subcommand" 2 "$DAYSHARD" gsi frobnicate
expect_exit "rebuild without --data" 2 "$DAYSHARD" gsi rebuild
expect_exit "rebuild with an unknown option" 2 "$DAYSHARD" gsi rebuild --data "$DATA" --fast
expect_exit "rebuild with an extra argument" 2 "$DAYSHARD" gsi rebuild --data "$DATA" extra
expect_exit "rebuild --data without a value" 2 "$DAYSHARD" gsi rebuild --data
expect_exit "rebuild with a table too small" 2 "$DAYSHARD" gsi rebuild --data "$DATA" --slots-log2 4
expect_exit "rebuild with a table too large" 2 "$DAYSHARD" gsi rebuild --data "$DATA" --slots-log2 31
expect_exit "gsi --help" 0 "$DAYSHARD" gsi --help
grep -q "usage: dayshard gsi rebuild" "$WORK/out" && ok || fail "gsi --help prints no usage"
expect_exit "gsi rebuild --help" 0 "$DAYSHARD" gsi rebuild --help
grep -q "usage: dayshard gsi rebuild" "$WORK/out" && ok || fail "gsi rebuild --help prints no usage"
"$DAYSHARD" help | grep -q "^  gsi " && ok || fail "gsi missing from dayshard help"
expect_exit "rebuild of a directory without data" 1 "$DAYSHARD" gsi rebuild --data "$WORK/nothing"
grep -q "no data" "$WORK/err" && ok || fail "no clear message: $(cat "$WORK/err")"
[[ ! -e $WORK/nothing ]] && ok || fail "a refused rebuild created the directory"

# ---- (a) DIR/gsi deleted ---------------------------------------------------------------------
rm -rf "$DATA/gsi"
rebuild "after rm -rf gsi"
compgen -G "$DATA/gsi.old-*" >/dev/null && fail "gsi.old-* left behind" || ok
start_http_node n1 "$DATA" rebuild
check_views "after rm -rf gsi"
# The node resumed from the rebuilt index's cursor instead of indexing everything again.
seq=$(json_get "$WORK/after rm -rf gsi.json" 'd["commit_seq"]')
log_run_has n1 "gsi: following .* from commit $seq " && ok || fail "the node did not resume at commit $seq"
stop_node n1 "$NODE_PID"

# ---- (b) damage: a foreign FORMAT file; the node refuses to start, the rebuild repairs ------
echo "not a gsi" >"$DATA/gsi/FORMAT"
expect_exit "a node on a damaged index" 1 timeout 30 "$DAYSHARD" run --brokers "$BOOT" \
  --topic orders --group rebuild --data "$DATA" "${NODE_X[@]}"
grep -q "by-customer index" "$WORK/err" && ok || fail "the node's refusal names no index: $(tail -c 300 "$WORK/err")"
rebuild "after a bad FORMAT"
start_http_node n1 "$DATA" rebuild
check_views "after a bad FORMAT"
stop_node n1 "$NODE_PID"

# ---- (b) damage: the log cut in half and the table checkpoint deleted: the node repairs it ---
# itself (cuts the log back to its last complete apply, rebuilds the table from the log, and
# replays the rest from the cursor it found); a rebuild gives the same views again.
log_bytes=$(stat -c %s "$DATA/gsi/log")
((log_bytes > 100000)) && ok || fail "the index log is only $log_bytes bytes"
truncate -s $((log_bytes / 2)) "$DATA/gsi/log"
rm -f "$DATA/gsi/table"
start_http_node n1 "$DATA" rebuild
check_views "after a cut log"
log_run_has n1 "cutting [0-9]* bytes after the last complete apply" && ok ||
  fail "the node did not report the cut"
stop_node n1 "$NODE_PID"
# A byte flipped in the middle of the log (inside what the table checkpoint covers, so nothing
# cuts it: a query reading that run fails with a damage error, test_gsi covers it): the rebuild
# repairs it.
printf '\xff' | dd of="$DATA/gsi/log" bs=1 seek=$((log_bytes / 3)) conv=notrunc status=none
rebuild "after a damaged log"
start_http_node n1 "$DATA" rebuild
check_views "after a damaged log"

# ---- crash: a rebuild killed -9 midway keeps the old index aside; the next one finishes -----
expect_exit "rebuild with the node running again" 1 "$DAYSHARD" gsi rebuild --data "$DATA"
stop_node n1 "$NODE_PID"
DS_TEST_GSI_SLOW_MS=5000 "$DAYSHARD" gsi rebuild --data "$DATA" >/dev/null 2>"$WORK/slow.err" &
slow=$!
for _ in $(seq 100); do
  grep -q "indexing" "$WORK/slow.err" && break
  sleep 0.05
done
sleep 0.5
crash_node "$slow"
[[ -f $DATA/gsi.old-$slow/FORMAT ]] && ok || fail "the killed rebuild left no gsi.old-$slow"
rebuild "after a killed rebuild"
grep -q "gsi.old-$slow is left" "$WORK/err" && ok || fail "the leftover was not named"
[[ -d $DATA/gsi.old-$slow ]] && ok || fail "the leftover was removed"
rm -rf "$DATA/gsi.old-$slow"
start_http_node n1 "$DATA" rebuild
check_views "after a killed rebuild"
stop_node n1 "$NODE_PID"

# ---- a table of 2^6 slots for thousands of customers: most share chains, same views --------
REBUILD_ARGS=(--slots-log2 6)
rebuild "with a 64-slot table"
REBUILD_ARGS=()
start_http_node n1 "$DATA" rebuild
check_views "with a 64-slot table"
log_run_has n1 "keeps its table of 2^6 slots" && ok || fail "the node did not open the index with its own table"
stop_node n1 "$NODE_PID"

stop_broker
finish
