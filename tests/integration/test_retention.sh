#!/usr/bin/env bash
# Retention (`--retention-days N`): a generated 28-day stream, its first 82% (to
# about 2026-01-23) loaded with --retention-days 7 and indexed, then the rest. In both models:
# - counts of the kept days equal the oracle's (orders_oracle.py --retention-days 7, which
#   applies the same stream-time rule), every dropped day counts 0, and a range reaching below
#   the floor says "retention_floor"; the too_late dead letters equal the oracle's;
# - the directory's bytes shrink (du before/after) and the dropped days' directories are gone;
# - customer views from the index built before the drop list no order of a dropped day (and
#   did list such orders before it, so the check can fail), each listed order is the oracle's;
#   after `gsi rebuild`, orders_compare finds no difference at all (days, statuses, views, P2);
# - a dropped order's P2 is "not found"; fsck is clean (index included);
# - a later event of a dropped day is a too_late dead letter and changes no count; a restart
#   without --retention-days keeps the floor;
# - bad inputs: --retention-days -1, 0x, 99999999999 exit 2 naming the flag (ingest, run), and
#   `config check` names a bad retention-days with its line.
source "$(dirname "$0")/lib.sh"

ORACLE="$ROOT/tests/integration/orders_oracle.py"
COMPARE="$ROOT/tests/integration/orders_compare.py"
EVENTS=12000
if [[ ${DS_LONG:-} == 1 ]]; then EVENTS=200000; fi
FLOOR=2026-01-22 # stream time 2026-01-28 (the generator's last day), N = 7

"$DAYSHARD" generate --events "$EVENTS" --customers 40 --updates 0.25 --duplicates 0.02 \
  --items 0.1 --seed 15 >"$WORK/all.jsonl"
head_lines=$((EVENTS * 82 / 100))
head -n "$head_lines" "$WORK/all.jsonl" >"$WORK/p1.jsonl"
tail -n +"$((head_lines + 1))" "$WORK/all.jsonl" >"$WORK/p2.jsonl"

# view_check DIR MODEL ORACLE WANT: every customer's whole view (CLI, --data) lists no order
# below the floor and only orders the oracle lists for that customer (same ts, status,
# amount; in the events model (order id, ts) only: a stale index keeps the status and amount an
# entry had when indexed). WANT=below prints how many listed orders are below the floor.
view_check() {
  "$PY" - "$DAYSHARD" "$1" "$2" "$3" "$FLOOR" "$4" <<'EOF'
import json, subprocess, sys
binary, data, model, oracle_path, floor, want = sys.argv[1:]
oracle = json.load(open(oracle_path))
def key(o, ts):
    k = (json.dumps(o["order_id"]), ts)
    return k + (o["status"], o["amount"]) if model == "orders" else k
views = {json.dumps(c["customer_id"]): {key(o, o["ts"]) for o in c["orders"]}
         for c in oracle["customers"]}
below = bad = listed = 0
for cid in range(1, 41):
    cursor = None
    while True:
        cmd = [binary, "orders", "--customer", str(cid), "--data", data, "--json", "--limit", "1000"]
        if cursor:
            cmd += ["--cursor", cursor]
        page = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        for o in page["orders"]:
            listed += 1
            if o["day"] < floor:
                below += 1
            import datetime
            ts = int(datetime.datetime.strptime(o["ts"], "%Y-%m-%dT%H:%M:%S.%fZ")
                     .replace(tzinfo=datetime.timezone.utc).timestamp() * 1000 + 0.5)
            k = key(o, ts)
            if want != "below" and k not in views.get(str(cid), set()):
                bad += 1
                if bad <= 3:
                    print("customer %d lists %s, not in the oracle's view" % (cid, k), file=sys.stderr)
        cursor = page.get("next")
        if not cursor:
            break
if want == "below":
    print(below)
else:
    print("%d %d" % (below, bad) if listed > 0 else "nothing listed")
EOF
}

for model in orders events; do
  data="$WORK/$model"
  expect_exit "$model: ingest the first part" 0 \
    "$DAYSHARD" ingest --data "$data" --model $model --retention-days 7 "$WORK/p1.jsonl"
  expect_exit "$model: gsi rebuild" 0 "$DAYSHARD" gsi rebuild --data "$data"
  "$PY" "$ORACLE" --model $model --retention-days 7 --out "$WORK/$model.oracle.json" \
    "$WORK/p1.jsonl" "$WORK/p2.jsonl"
  before_below=$(view_check "$data" $model "$WORK/$model.oracle.json" below)
  ((before_below > 0)) && ok || fail "$model: the views listed no order below $FLOOR before the drop"

  expect_exit "$model: ingest the rest, --retention-days 7" 0 \
    "$DAYSHARD" ingest --data "$data" --retention-days 7 --json "$WORK/p2.jsonl"
  expect_eq "$model: too_late dead letters" \
    "$(json_get "$WORK/$model.oracle.json" "d['totals']['bad_by_reason'].get('too_late', 0)")" \
    "$(grep -c '"reason":"too_late"' <(deadletters "$data") || true)"
  expect_eq "$model: days left" "2026-01-22 2026-01-23 2026-01-24 2026-01-25 2026-01-26 2026-01-27 2026-01-28" \
    "$(ls "$data/parts" | tr '\n' ' ' | sed 's/ $//')"

  # counts: the kept days equal the oracle's, the dropped ones 0, the floor said
  "$DAYSHARD" count --data "$data" --day 2026-01-01 --to 2026-01-31 --by day --json >"$WORK/count.json"
  expect_eq "$model: counts by day" \
    "$(json_get "$WORK/$model.oracle.json" "' '.join('%s=%d' % ('2026-01-%02d' % i, d['days'].get('2026-01-%02d' % i, {'count': 0})['count']) for i in range(1, 32))")" \
    "$(json_get "$WORK/count.json" "' '.join('%s=%d' % (g['key'], g['count']) for g in d['groups'])")"
  expect_eq "$model: retention_floor" "$FLOOR" "$(json_get "$WORK/count.json" "d.get('retention_floor')")"
  expect_eq "$model: no floor for kept days" None \
    "$("$DAYSHARD" count --data "$data" --day 2026-01-23 --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin).get("retention_floor"))')"

  # the index built before the drop: no order of a dropped day, only the oracle's orders
  expect_eq "$model: views from the old index (below, not the oracle's)" "0 0" \
    "$(view_check "$data" $model "$WORK/$model.oracle.json" check)"
  expect_exit "$model: fsck with the old index" 0 "$DAYSHARD" fsck --data "$data"

  # a dropped order's P2 is gone
  if [[ $model == orders ]]; then
    gone=$("$PY" - "$WORK/p1.jsonl" "$WORK/$model.oracle.json" <<'EOF'
import json, sys
kept = {json.dumps(o["order_id"]) for o in json.load(open(sys.argv[2]))["orders"]}
for line in open(sys.argv[1]):
    oid = json.dumps(json.loads(line)["order_id"])
    if oid not in kept:
        print(json.loads(oid))
        break
EOF
)
    expect_exit "orders: P2 of dropped order $gone" 1 "$DAYSHARD" order "$gone" --data "$data"
  fi

  # a late event of a dropped day; a restart without the flag keeps the floor
  before=$("$DAYSHARD" count --data "$data" --day 2026-01-01 --to 2026-01-31 --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["count"])')
  printf '%s\n' '{"order_id":"late-1","customer_id":3,"ts":"2026-01-10T10:00:00Z","status":"paid","amount":5}' \
    '{"order_id":"kept-1","customer_id":3,"ts":"2026-01-27T10:00:00Z","status":"paid","amount":5}' >"$WORK/late.jsonl"
  expect_exit "$model: ingest a late event, no flag" 0 "$DAYSHARD" ingest --data "$data" "$WORK/late.jsonl"
  expect_eq "$model: late event dead-lettered" "too_late 1" \
    "$(tail -n 2 <(deadletters "$data") | "$PY" -c 'import json,sys; r=[json.loads(l) for l in sys.stdin][-1]; print(r["reason"], r["line"])')"
  expect_eq "$model: only the kept-day event counted" "$((before + 1))" \
    "$("$DAYSHARD" count --data "$data" --day 2026-01-01 --to 2026-01-31 --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["count"])')"
  expect_eq "$model: 2026-01-10 still 0" 0 \
    "$("$DAYSHARD" count --data "$data" --day 2026-01-10 --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["count"])')"

  # a fresh index from the base equals the oracle everywhere
  "$PY" "$ORACLE" --model $model --retention-days 7 --out "$WORK/$model.oracle2.json" \
    "$WORK/p1.jsonl" "$WORK/p2.jsonl" "$WORK/late.jsonl"
  expect_exit "$model: gsi rebuild after the drop" 0 "$DAYSHARD" gsi rebuild --data "$data"
  if "$PY" "$COMPARE" --oracle "$WORK/$model.oracle2.json" --data "$data" --dayshard "$DAYSHARD" \
    --stream "$WORK/all.jsonl" --customers 40 --orders 200 >"$WORK/compare.out" 2>&1; then
    ok
  else
    fail "$model: orders_compare: $(head -c 1500 "$WORK/compare.out")"
  fi
  expect_exit "$model: fsck after the rebuild" 0 "$DAYSHARD" fsck --data "$data"
done

# ---- disk space comes back: the whole stream without retention, then an empty run with it ------
for model in orders events; do
  data="$WORK/$model-all"
  expect_exit "$model: ingest all, no retention" 0 "$DAYSHARD" ingest --data "$data" --model $model "$WORK/all.jsonl"
  bytes_before=$(du -sk "$data" | cut -f1)
  days_before=$(ls "$data/parts" | wc -l)
  expect_exit "$model: --retention-days 7 on no input" 0 \
    "$DAYSHARD" ingest --data "$data" --retention-days 7 /dev/null
  bytes_after=$(du -sk "$data" | cut -f1)
  echo "$model: du $bytes_before KiB ($days_before days) -> $bytes_after KiB ($(ls "$data/parts" | wc -l) days)"
  ((bytes_after * 2 < bytes_before)) && ok || fail "$model: du did not shrink by half: $bytes_before -> $bytes_after KiB"
  expect_eq "$model: days left" 7 "$(ls "$data/parts" | wc -l)"
  expect_eq "$model: dropped day counts 0" "0 2026-01-22" \
    "$("$DAYSHARD" count --data "$data" --day 2026-01-21 --to 2026-01-22 --by day --json | "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(d["groups"][0]["count"], d["retention_floor"])')"
  expect_exit "$model: fsck" 0 "$DAYSHARD" fsck --data "$data"
done

# ---- bad inputs ----------------------------------------------------------------------------------
for v in -1 0x 99999999999; do
  expect_exit "ingest --retention-days $v" 2 "$DAYSHARD" ingest --data "$WORK/bad" --retention-days "$v" /dev/null
  grep -q -- "--retention-days" "$WORK/err" && ok || fail "ingest --retention-days $v: the error does not name the flag: $(cat "$WORK/err")"
  expect_exit "run --retention-days $v" 2 "$DAYSHARD" run --brokers 127.0.0.1:1 --data "$WORK/bad" --retention-days "$v"
  grep -q -- "--retention-days" "$WORK/err" && ok || fail "run --retention-days $v: the error does not name the flag: $(cat "$WORK/err")"
done
[[ ! -e "$WORK/bad" ]] && ok || fail "a refused command created its data directory"
printf 'data=%s\nretention-days=-1\n' "$WORK/bad" >"$WORK/bad.properties"
expect_exit "config check retention-days=-1" 1 "$DAYSHARD" config check "$WORK/bad.properties" --command ingest
grep -q 'bad.properties:2' "$WORK/out" && grep -q 'retention-days' "$WORK/out" && ok ||
  fail "config check does not name line 2's retention-days: $(cat "$WORK/out" "$WORK/err")"

finish
