#!/usr/bin/env bash
# The independent oracle (orders_oracle.py) and `dayshard generate
# --updates F --duplicates F --items F`.
#
# 1. The oracle against every number tests/fixtures/README.md states for updates.jsonl read
#    after shop.jsonl and busy-day.jsonl, in both models, and against hand-made streams for
#    the rules it decides (mixed versioned and unversioned events, stale, unchanged, bad events,
#    the customer view's order).
# 2. generate: flags 0 give the bytes of before (sha256 recorded before the change), same seed
#    same bytes, and the measured shares of updates, duplicates, stale versions, versioned
#    updates and items are near the requested ones, with updates close to their orders and
#    some much later.
# 3. `dayshard ingest --model events` accepts every generated line and its per-day counts,
#    amount sums and per-status counts equal the oracle's events-model answer.
# The oracle's orders-model answers (and the stream) are written to $DS_ORACLE_OUT when set
# (else to the work dir) for the node's orders-model test to compare against.
source "$(dirname "$0")/lib.sh"

ORACLE="$ROOT/tests/integration/orders_oracle.py"
OUT=${DS_ORACLE_OUT:-$WORK/oracle}
mkdir -p "$OUT"
EVENTS=${DS_ORACLE_EVENTS:-40000}
if [[ ${DS_LONG:-} == 1 ]]; then EVENTS=400000; fi

# ---- 1. the oracle against the fixtures' README ---------------------------------------------

fx=("$FIXTURES/shop.jsonl" "$FIXTURES/busy-day.jsonl" "$FIXTURES/updates.jsonl")
"$PY" "$ORACLE" --model orders --out "$OUT/fixtures-orders.json" "${fx[@]}"
"$PY" "$ORACLE" --model events --out "$OUT/fixtures-events.json" "${fx[@]}"
o="$OUT/fixtures-orders.json"
e="$OUT/fixtures-events.json"
day() { echo "[x for x in [d['days'].get('$1')] if x]"; }
view() { echo "[(o['order_id'], o['status']) for c in d['customers'] if c['customer_id'] == $1 for o in c['orders']]"; }
order() { echo "[o for o in d['orders'] if o['order_id'] == $1][0]"; }

expect_eq "orders: 2026-01-21 count" 5 "$(json_get "$o" "d['days']['2026-01-21']['count']")"
expect_eq "orders: 2026-01-21 all paid" "{'paid': 5}" "$(json_get "$o" "d['days']['2026-01-21']['by_status']")"
expect_eq "orders: 2026-01-21 amount" 141.2400 "$(json_get "$o" "d['days']['2026-01-21']['amount_sum']")"
expect_eq "orders: 2026-01-21 orders" "[106, 107, 340, 341, 342]" \
  "$(json_get "$o" "sorted(x['order_id'] for x in d['orders'] if x['day'] == '2026-01-21')")"
expect_eq "orders: 2026-01-20" "1 {'paid': 1} 30.0000" \
  "$(json_get "$o" "'%d %s %s' % (d['days']['2026-01-20']['count'], d['days']['2026-01-20']['by_status'], d['days']['2026-01-20']['amount_sum'])")"
expect_eq "orders: 105 is paid 30" "paid 30.0000 2026-01-20" \
  "$(json_get "$o" "'%s %s %s' % ($(order 105)['status'], $(order 105)['amount'], $(order 105)['day'])")"
expect_eq "orders: 2026-01-15 has none" "[]" "$(json_get "$o" "$(day 2026-01-15)")"
expect_eq "orders: 2026-01-16 has 104" "[104]" \
  "$(json_get "$o" "[x['order_id'] for x in d['orders'] if x['day'] == '2026-01-16']")"
expect_eq "orders: January" 11 \
  "$(json_get "$o" "sum(v['count'] for k, v in d['days'].items() if k.startswith('2026-01-'))")"
expect_eq "orders: customer 3" "[(342, 'paid'), (105, 'paid'), (103, 'paid')]" "$(json_get "$o" "$(view 3)")"
expect_eq "orders: customer 4" "[(107, 'paid'), (104, 'shipped')]" "$(json_get "$o" "$(view 4)")"
expect_eq "orders: 108 items" "[{'product': 'Pen', 'quantity': 2}, {'product': 'Notebook', 'quantity': 1}]" \
  "$(json_get "$o" "$(order 108)['items']")"
expect_eq "orders: 341 paid" paid "$(json_get "$o" "$(order 341)['status']")"
expect_eq "orders: 107 version 2, 1 stale" "2 1 paid" \
  "$(json_get "$o" "'%s %s %s' % ($(order 107)['version'], $(order 107)['stale'], $(order 107)['status'])")"
expect_eq "orders: 340 once, a no-op repeat" "1 1" \
  "$(json_get "$o" "'%s %s' % ($(order 340)['versions_seen'], $(order 340)['unchanged'])")"
expect_eq "orders: fates" "16 11 3 1 1" \
  "$(json_get "$o" "' '.join(str(d['totals'][k]) for k in ('events', 'created', 'applied', 'stale', 'unchanged'))")"
expect_eq "events: 16 lines" 16 "$(json_get "$e" "d['totals']['events']")"
expect_eq "events: 2026-01-21 count" 8 "$(json_get "$e" "d['days']['2026-01-21']['count']")"
expect_eq "events: 2026-01-15 and 16" "1 1" \
  "$(json_get "$e" "'%d %d' % (d['days']['2026-01-15']['count'], d['days']['2026-01-16']['count'])")"
expect_eq "events: customer 3 keeps 105 pending and paid" \
  "[(342, 'paid'), (105, 'paid'), (103, 'paid')]" "$(json_get "$e" "$(view 3)")"
# The contract example (shop + busy day, no updates): the same in both models.
for m in orders events; do
  "$PY" "$ORACLE" --model $m --out "$WORK/shop-$m.json" "$FIXTURES/shop.jsonl" "$FIXTURES/busy-day.jsonl"
  expect_eq "$m: contract example" "4 133.7400" \
    "$(json_get "$WORK/shop-$m.json" "'%d %s' % (d['days']['2026-01-21']['count'], d['days']['2026-01-21']['amount_sum'])")"
done

# ---- 1b. the oracle's own rules on hand-made streams ----------------------------------------

cat > "$WORK/mixed.jsonl" <<'EOF'
{"order_id": 1, "customer_id": 9, "ts": "2026-01-05T10:00:00Z", "status": "pending", "amount": 1, "version": 5}
{"order_id": 1, "customer_id": 9, "ts": "2026-01-05T10:00:00Z", "status": "paid", "amount": 1}
{"order_id": 1, "customer_id": 9, "ts": "2026-01-05T10:00:00Z", "status": "pending", "amount": 1, "version": 5}
{"order_id": 1, "customer_id": 9, "ts": "2026-01-05T10:00:00Z", "status": "cancelled", "amount": 1, "version": 4}
{"order_id": 2, "customer_id": 9, "ts": "2026-01-05T10:00:00Z", "status": "paid", "amount": 2.5}
{"order_id": 2, "customer_id": 9, "ts": "2026-01-06T10:00:00Z", "status": "paid", "amount": 2.5, "version": 0}
{"order_id": 2, "customer_id": 9, "ts": "2026-01-06T10:00:00Z", "status": "paid", "amount": 2.5, "version": 0}
{"order_id": 2, "customer_id": 9, "ts": "2026-01-06T10:00:00Z", "status": "paid", "amount": 2.5, "version": 3}
{"order_id": 3, "customer_id": 9, "ts": "2026-01-05T10:00:00Z", "status": "paid", "amount": 3, "version": 7}
{"order_id": 3, "customer_id": 8, "ts": "2026-01-05T10:00:00Z", "status": "paid", "amount": 3, "version": 7}
{"order_id": "3", "customer_id": 9, "ts": "2026-01-05T10:00:00Z", "status": "paid", "amount": 4}
{"order_id": "b", "customer_id": 9, "ts": "2026-01-05T10:00:00Z", "status": "paid", "amount": 5}
{"order_id": 4, "customer_id": 9, "ts": "2026-01-05T10:00:00Z", "version": 1.5}
{"order_id": 4, "customer_id": 9, "ts": "2026-01-05T10:00:00Z", "items": [{"product": "", "quantity": 1}]}
{"order_id": 4, "customer_id": 9, "ts": "2026-01-05T10:00:00Z", "amount": 0.00001}
{"order_id": 4, "customer_id": 9}
not json
EOF
"$PY" "$ORACLE" --model orders --out "$WORK/mixed.json" "$WORK/mixed.jsonl"
m="$WORK/mixed.json"
# Order 1: v5 pending; unversioned paid applies by arrival (floor stays 5); a late v5 retry with
# other content is stale (it does not undo the unversioned one); v4 is stale.
expect_eq "mixed: unversioned after versioned applies" "paid 5 2 2" \
  "$(json_get "$m" "'%s %s %s %s' % ($(order 1)['status'], $(order 1)['version'], $(order 1)['versions_seen'], $(order 1)['stale'])")"
# Order 2: version 0 applies over an unversioned one (moves the day), its repeat is a no-op,
# a higher version with the same content applies (only the version moves).
expect_eq "mixed: version 0, repeat, bump" "2026-01-06 3 3 1" \
  "$(json_get "$m" "'%s %s %s %s' % ($(order 2)['day'], $(order 2)['version'], $(order 2)['versions_seen'], $(order 2)['unchanged'])")"
# Order 3: the same version with another customer is stale: the first stays.
expect_eq "mixed: equal version, other content" "9 1" \
  "$(json_get "$m" "'%s %s' % ($(order 3)['customer_id'], $(order 3)['stale'])")"
expect_eq "mixed: bad events by reason" "{'amount_precision': 1, 'bad_items': 1, 'bad_version': 1, 'missing_ts': 1, 'not_json': 1}" \
  "$(json_get "$m" "d['totals']['bad_by_reason']")"
# Newest first (order 2 moved to the 6th); at equal ts string ids first, each descending; 3
# and "3" are two orders, and order 3 stays with customer 9.
expect_eq "mixed: customer view order" "[2, 'b', '3', 3, 1]" \
  "$(json_get "$m" "[o['order_id'] for c in d['customers'] if c['customer_id'] == 9 for o in c['orders']]")"
expect_eq "mixed: 2026-01-05" "4 13.0000" \
  "$(json_get "$m" "'%d %s' % (d['days']['2026-01-05']['count'], d['days']['2026-01-05']['amount_sum'])")"

# ---- 2. generate: old bytes, determinism, usage errors --------------------------------------

# sha256 of the output before --updates/--duplicates/--items existed (glibc's libm; see
# loadgen/workload.c on other libms).
while read -r want args; do
  # shellcheck disable=SC2086
  got=$("$DAYSHARD" generate $args | sha256sum | cut -c1-64)
  expect_eq "generate $args: bytes of before" "$want" "$got"
done <<'EOF'
a2a342c4df02ca51cd2aee28f0d6540766ca9c3134a5f4392e51117361254020 --events 20000
be5fca389fdd436316922df9029566de99efdbb17aea86dfc23fc2622d0d588d --events 20000 --profile busy-day --seed 7
fba3c95ea68df244b7911f4dce45e8cf474b6784e4e0f11eafa36251c3ace5db --events 20000 --profile hot-customer --seed 3 --updates 0 --duplicates 0 --items 0
0a9ef6393f1ef0cb7528cd7b471f47e6087baac3f1299384f46d8e19222ee0c4 --events 200000 --profile flash-sale --rate 1000 --seed 5
EOF
expect_exit "--updates over 1" 2 "$DAYSHARD" generate --events 10 --updates 1.5
expect_exit "--updates and --duplicates over 0.9" 2 "$DAYSHARD" generate --events 10 --updates 0.6 --duplicates 0.4
grep -q "leave no room for new orders" "$WORK/err" && ok || fail "repeat share reason: $(cat "$WORK/err")"
expect_exit "--items negative" 2 "$DAYSHARD" generate --events 10 --items -0.1
expect_exit "--duplicates not a number" 2 "$DAYSHARD" generate --events 10 --duplicates lots

gen=(generate --events "$EVENTS" --updates 0.3 --duplicates 0.05 --items 0.2 --seed 14)
"$DAYSHARD" "${gen[@]}" > "$OUT/gen.jsonl"
expect_eq "generated lines" "$EVENTS" "$(wc -l < "$OUT/gen.jsonl")"
expect_eq "same seed, same bytes" "$(sha256sum < "$OUT/gen.jsonl")" "$("$DAYSHARD" "${gen[@]}" | sha256sum)"
expect_eq "another seed, other bytes" different \
  "$(cmp -s "$OUT/gen.jsonl" <("$DAYSHARD" "${gen[@]:0:9}" --seed 15) && echo same || echo different)"

# The shares, measured on the bytes: a duplicate is a line equal to an earlier one; an update a
# line of a known order that is not; a stale update carries a version below one its order had.
"$PY" - "$OUT/gen.jsonl" > "$WORK/shares.json" <<'EOF'
import json, statistics, sys
seen_lines, first, top = set(), {}, {}
n = dup = upd = stale = versioned = orders = with_items = 0
gaps = []
for i, raw in enumerate(open(sys.argv[1], 'rb')):
    n += 1
    e = json.loads(raw)
    key = (type(e['order_id']).__name__, e['order_id'])
    if raw in seen_lines:
        dup += 1
        continue
    seen_lines.add(raw)
    if key not in first:
        first[key] = i
        orders += 1
        with_items += 'items' in e
        if 'version' in e:
            top[key] = e['version']
        continue
    upd += 1
    gaps.append(i - first[key])
    if 'version' in e:
        versioned += 1
        if e['version'] < top.get(key, -1):
            stale += 1
        top[key] = max(top.get(key, -1), e['version'])
gaps.sort()
print(json.dumps({'dup': dup / n, 'upd': upd / n, 'stale': stale / max(versioned, 1),
                  'versioned': versioned / max(upd, 1), 'items': with_items / orders,
                  'gap_median': gaps[len(gaps) // 2], 'gap_p90': gaps[len(gaps) * 9 // 10],
                  'late': sum(g > 10000 for g in gaps) / len(gaps)}))
EOF
echo "generated $EVENTS lines: $(cat "$WORK/shares.json")"
near() { json_get "$WORK/shares.json" "'ok' if $2 <= d['$1'] <= $3 else d['$1']"; }
expect_eq "duplicates share ~0.05" ok "$(near dup 0.045 0.055)"
expect_eq "updates share ~0.30" ok "$(near upd 0.29 0.31)"
expect_eq "stale share of versioned updates ~0.05" ok "$(near stale 0.02 0.08)"
expect_eq "versioned share of updates ~0.5" ok "$(near versioned 0.4 0.6)"
expect_eq "items share of new orders ~0.2" ok "$(near items 0.18 0.22)"
expect_eq "updates follow their order (median gap)" ok "$(near gap_median 1 3000)"
expect_eq "some updates much later" ok "$(near late 0.03 0.2)"

# ---- 3. ingest (events model) against the oracle --------------------------------------------

"$PY" "$ORACLE" --model events --out "$OUT/events.json" "$OUT/gen.jsonl"
"$PY" "$ORACLE" --model orders --out "$OUT/orders.json" "$OUT/gen.jsonl"
data="$WORK/data"
expect_exit "ingest generated" 0 "$DAYSHARD" ingest --data "$data" --model events --json "$OUT/gen.jsonl"
cp "$WORK/out" "$WORK/ingest.json"
expect_eq "ingest accepted every line" "$EVENTS 0" \
  "$(json_get "$WORK/ingest.json" "'%d %d' % (d['accepted'], d['rejected'])")"
expect_eq "oracle: no bad lines" 0 "$(json_get "$OUT/events.json" "d['totals']['bad']")"
first=$(json_get "$OUT/events.json" "min(d['days'])")
last=$(json_get "$OUT/events.json" "max(d['days'])")
expect_exit "count by day" 0 "$DAYSHARD" count --data "$data" --day "$first" --to "$last" --by day --json
cp "$WORK/out" "$WORK/count.json"
"$PY" - "$WORK/count.json" "$OUT/events.json" > "$WORK/diff.txt" <<'EOF'
import json, sys
got = json.load(open(sys.argv[1]))
want = json.load(open(sys.argv[2]))['days']
have = {g['key']: (g['count'], g['amount_sum']) for g in got['groups'] if g['count']}
need = {k: (v['count'], v['amount_sum']) for k, v in want.items()}
for k in sorted(set(have) | set(need)):
    if have.get(k) != need.get(k):
        print(k, 'node', have.get(k), 'oracle', need.get(k))
EOF
expect_eq "per-day counts and sums equal the oracle's" "" "$(head -5 "$WORK/diff.txt")"
for status in pending paid shipped cancelled refunded; do
  expect_exit "count $status" 0 "$DAYSHARD" count --data "$data" --day "$first" --to "$last" --status "$status" --by day --json
  expect_eq "per-day $status counts equal the oracle's" \
    "$(json_get "$OUT/events.json" "sorted((k, v['by_status']['$status']) for k, v in d['days'].items() if v['by_status'].get('$status'))")" \
    "$(json_get "$WORK/out" "sorted((g['key'], g['count']) for g in d['groups'] if g['count'])")"
done

# The orders model, for the node's test to compare against: consistent with itself.
expect_eq "orders model: every event has a fate" "$EVENTS" \
  "$(json_get "$OUT/orders.json" "sum(d['totals'][k] for k in ('created', 'applied', 'stale', 'unchanged'))")"
expect_eq "orders model: days count each order once" "$(json_get "$OUT/orders.json" "d['totals']['orders']")" \
  "$(json_get "$OUT/orders.json" "sum(v['count'] for v in d['days'].values())")"
expect_eq "orders model: customer views list each order once" "$(json_get "$OUT/orders.json" "d['totals']['orders']")" \
  "$(json_get "$OUT/orders.json" "sum(len(c['orders']) for c in d['customers'])")"
echo "orders model: $(json_get "$OUT/orders.json" "d['totals']") (answers in $OUT/orders.json)"

finish
