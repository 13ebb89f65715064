#!/usr/bin/env bash
# The fixtures' answers: tests/fixtures (small data sets from the modelling notes) shop.jsonl,
# busy-day.jsonl, then updates.jsonl, ingested with --shards 3, give exactly the answers the
# fixtures' README states, over the CLI (--data) and over HTTP (`dayshard serve`), in both
# models:
#   orders: 2026-01-21 has 5 orders (106, 340, 341, 342, 107), all paid, amount 141.24, read
#           from 3 partitions; 2026-01-20 has 105, paid, 30.00; 2026-01-15 has none and
#           2026-01-16 has 104; January has 11; customer 3 reads 342, 105 (paid), 103, each
#           once; customer 4 reads 107 (paid), 104; order 108 reads back with its two items.
#   events: 2026-01-21 has 8 (16 lines in all).
# The orders model is checked on two directories: the three files in one `ingest` run, and one
# run per file (the updates meet their orders across a restart). Then orders_compare.py checks
# each directory against the oracle (orders_oracle.py) both ways: every day's count and sum,
# every status, every customer view paged with a page size of 1, every P2 record (skipped with
# a notice while `dayshard order` does not exist).
# `ingest` builds no by-customer index: `dayshard gsi rebuild` makes it, as test_serve does.
# Skips (77) while the build still refuses --model orders (STORAGE_ORDERS_WRITABLE 0).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"

ORACLE="$ROOT/tests/integration/orders_oracle.py"
COMPARE="$ROOT/tests/integration/orders_compare.py"
fx=("$FIXTURES/shop.jsonl" "$FIXTURES/busy-day.jsonl" "$FIXTURES/updates.jsonl")
cat "${fx[@]}" >"$WORK/all.jsonl"

# Data directories: orders-one (one ingest run), orders-three (one run per file), events.
set +e
"$DAYSHARD" ingest --data "$WORK/orders-one" --model orders --shards 3 --json "$WORK/all.jsonl" \
  >"$WORK/ingest.json" 2>"$WORK/ingest.err"
rc=$?
set -e
if [[ $rc == 2 ]] && grep -q "orders model is not implemented yet" "$WORK/ingest.err"; then
  echo "SKIP: this build refuses --model orders ($(cat "$WORK/ingest.err"))"
  exit 77
fi
expect_eq "ingest --model orders exit ($(head -c 200 "$WORK/ingest.err"))" 0 "$rc"
expect_eq "orders: accepted" "16 0" "$(json_get "$WORK/ingest.json" '"%d %d" % (d["accepted"], d["rejected"])')"
for f in "${fx[@]}"; do
  expect_exit "ingest --model orders $(basename "$f")" 0 \
    "$DAYSHARD" ingest --data "$WORK/orders-three" --model orders --shards 3 "$f"
done
expect_exit "ingest --model events" 0 \
  "$DAYSHARD" ingest --data "$WORK/events" --model events --shards 3 "$WORK/all.jsonl"
for d in orders-one orders-three events; do
  expect_exit "gsi rebuild $d" 0 "$DAYSHARD" gsi rebuild --data "$WORK/$d"
  expect_eq "$d: MODEL" "${d%%-*}" "$(cat "$WORK/$d/MODEL")"
done
if "$DAYSHARD" order --help >/dev/null 2>&1; then has_p2=1; else
  has_p2=0
  echo "NOTICE: no \`dayshard order\` in this build: order 108's items are not checked"
fi

# answers WAY TARGET: the README's figures as lines of text, asked through the CLI (WAY cli,
# TARGET a data directory) or over HTTP (WAY http, TARGET the base URL).
answers() {
  "$PY" - "$1" "$2" "$DAYSHARD" "$has_p2" <<'EOF'
import json, subprocess, sys, urllib.parse, urllib.request
way, target, binary, has_p2 = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"

def cli(args):
    p = subprocess.run([binary] + args + ["--data", target, "--json"], capture_output=True)
    if p.returncode != 0:
        return {"error": "exit %d: %s" % (p.returncode, p.stderr.decode().strip())}
    return json.loads(p.stdout)

def http(path, params):
    url = target + path + "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        return {"error": "%d: %s" % (e.code, e.read().decode())}

def count(day, to=None, status=None):
    if way == "cli":
        args = ["count", "--day", day] + (["--to", to] if to else []) + \
            (["--status", status] if status is not None else [])
        return cli(args)
    params = {"day": day}
    if to:
        params["to"] = to
    if status is not None:
        params["status"] = status
    return http("/v1/count", params)

def view(customer):
    if way == "cli":
        return cli(["orders", "--customer", str(customer), "--limit", "50"])
    return http("/v1/customers/%d/orders" % customer, {"limit": 50})

def order(order_id):
    if way == "cli":
        return cli(["order", str(order_id)])
    return http("/v1/orders/%d" % order_id, {})

def line(what, doc, fmt):
    if "error" in doc and "the order lookup needs the orders model" in doc["error"]:
        print(what, "needs the orders model")  # the events model's P2: exit 2 or 409
    else:
        print(what, doc["error"] if "error" in doc else fmt(doc))

for day in ("2026-01-21", "2026-01-20", "2026-01-15", "2026-01-16", "2026-01-22"):
    line(day, count(day), lambda d: "%d %s partitions %d" % (d["count"], d["amount_sum"], d["partitions"]))
    line(day + " paid", count(day, status="paid"), lambda d: "%d %s" % (d["count"], d["amount_sum"]))
line("January", count("2026-01-01", to="2026-01-31"), lambda d: "%d %s" % (d["count"], d["amount_sum"]))
for c in (3, 4):
    line("customer %d" % c, view(c),
         lambda d: ", ".join("%s %s %s" % (o["order_id"], o["status"], o["amount"]) for o in d["orders"]))
if has_p2:
    line("order 108", order(108), lambda d: "%s %s %s" % (d["status"], d["amount"], d["items"]))
    line("order 107", order(107), lambda d: "%s v%s seen %s" % (d["status"], d["version"], d["versions_seen"]))
EOF
}

# The README's numbers. 2026-01-22 (order 108 alone) and the paid lines follow from the files.
want_orders="2026-01-21 5 141.2400 partitions 3
2026-01-21 paid 5 141.2400
2026-01-20 1 30.0000 partitions 3
2026-01-20 paid 1 30.0000
2026-01-15 0 0.0000 partitions 3
2026-01-15 paid 0 0.0000
2026-01-16 1 60.2500 partitions 3
2026-01-16 paid 0 0.0000
2026-01-22 1 12.0000 partitions 3
2026-01-22 paid 1 12.0000
January 11 320.9900
customer 3 342 paid 100.0000, 105 paid 30.0000, 103 paid 12.0000
customer 4 107 paid 7.5000, 104 shipped 60.2500"
if ((has_p2)); then
  want_orders+="
order 108 paid 12.0000 [{'product': 'Pen', 'quantity': 2}, {'product': 'Notebook', 'quantity': 1}]
order 107 paid v2 seen 1"
fi
# Events: every line counts (8 on 2026-01-21); the view keeps the last event per (ts, order id):
# 107 as its stale version 1 (pending) arrived last, 104 on both of its days.
want_events="2026-01-21 8 163.7300 partitions 3
2026-01-21 paid 6 151.2300
2026-01-20 2 30.0000 partitions 3
2026-01-20 paid 1 30.0000
2026-01-15 1 60.2500 partitions 3
2026-01-15 paid 0 0.0000
2026-01-16 1 60.2500 partitions 3
2026-01-16 paid 0 0.0000
2026-01-22 1 12.0000 partitions 3
2026-01-22 paid 1 12.0000
January 16 403.7300
customer 3 342 paid 100.0000, 105 paid 30.0000, 103 paid 12.0000
customer 4 107 pending 7.5000, 104 shipped 60.2500, 104 shipped 60.2500"
if ((has_p2)); then
  want_events+="
order 108 needs the orders model
order 107 needs the orders model"
fi

# check DIR WANT LABEL: the README's answers and the oracle's, through the CLI and over HTTP.
check() {
  local dir=$1 want=$2 label=$3 model got
  model=$(cat "$WORK/$dir/MODEL")
  "$PY" "$ORACLE" --model "$model" --out "$WORK/$dir.oracle.json" "${fx[@]}"
  got=$(answers cli "$WORK/$dir")
  expect_eq "$label over the CLI" "$want" "$got"
  serve_start "$WORK/$dir"
  got=$(answers http "http://$SERVE_ADDR")
  expect_eq "$label over HTTP" "$want" "$got"
  for way in "--data $WORK/$dir --dayshard $DAYSHARD" "--server http://$SERVE_ADDR"; do
    # shellcheck disable=SC2086 # way is two options and their values
    if "$PY" "$COMPARE" --oracle "$WORK/$dir.oracle.json" $way --stream "$WORK/all.jsonl" \
      --limit 1 --label "$label ${way%% *}" >"$WORK/compare.out" 2>&1; then ok; else
      fail "$label: orders_compare ${way%% *}: $(cat "$WORK/compare.out")"
    fi
    cat "$WORK/compare.out"
  done
  serve_stop
}
check orders-one "$want_orders" "orders model (one ingest)"
check orders-three "$want_orders" "orders model (an ingest per file)"
check events "$want_events" "events model"

# fsck of every directory: clean. In the orders model order 104 left (2026-01-15, shard 2):
# that partition holds its old version and the retraction, a net count of 0 but not empty.
for d in orders-one orders-three events; do
  expect_exit "fsck $d" 0 "$DAYSHARD" fsck --data "$WORK/$d"
  cat "$WORK/err" "$WORK/out"
done

# The orders model's oracle is not the events model's: comparing the events directory with the
# orders answers must find differences (the comparer can fail).
"$PY" "$ORACLE" --model orders --out "$WORK/orders.oracle.json" "${fx[@]}"
expect_exit "orders_compare of the events directory with the orders oracle" 1 \
  "$PY" "$COMPARE" --oracle "$WORK/orders.oracle.json" --data "$WORK/events" --dayshard "$DAYSHARD"
grep -q "DIFF dayshard's data counts events, the oracle's orders" "$WORK/out" && ok ||
  fail "the comparer's difference: $(head -c 400 "$WORK/out")"
grep -q "DIFF day 2026-01-21: count 8 amount 163.73, oracle count 5 amount 141.24" "$WORK/out" && ok ||
  fail "the comparer's difference: $(head -c 400 "$WORK/out")"

finish
