#!/usr/bin/env bash
# The order lookup (P2) and the customer view of the orders model, over the CLI
# (`dayshard order ID --data`, `orders --data`) and over HTTP (`dayshard serve`: GET
# /v1/orders/{id}, `order --server`), against the independent oracle (orders_oracle.py):
#
# 1. shop.jsonl, busy-day.jsonl and updates.jsonl, then a few orders of our own (string ids
#    with bytes to escape, [] items, the greatest version, orders that move in time and to
#    another customer), ingested with --model orders: every P2 record the oracle prints equals
#    the node's, field by field (and the shard the contract's shard function gives), from
#    --data and over HTTP; 108 has its two items, 107 is paid at version 2 with one version
#    seen.
# 2. Customer views: 3 reads 342, 105 (paid), 103, each once; 4 reads 107 (paid), 104; and a
#    customer whose orders moved pages through limit=2 in pages of 2, 2, 1 with the oracle's
#    order, though the index holds every superseded entry.
# 3. A missing order: exit 1 naming it, HTTP 404 naming it; bad ids: 400 naming the problem;
#    usage errors: exit 2; consistent=true (durable, on `serve`), the bearer token.
# 4. A directory of the events model: `order` exits 2 and HTTP answers 409, both saying the
#    lookup needs the orders model (documented choice: the question is valid, the directory
#    cannot answer it, and scripts can tell it from "not found").
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"

ORACLE="$ROOT/tests/integration/orders_oracle.py"

# ---- usage ----------------------------------------------------------------------------------

expect_exit "order --help" 0 "$DAYSHARD" order --help
grep -q "usage: dayshard order ID" "$WORK/out" && ok || fail "order --help text"
"$DAYSHARD" help | grep -q "^  order " && ok || fail "dayshard help lists order"
expect_exit "order without an id" 2 "$DAYSHARD" order --data "$WORK/none"
grep -q "the order ID is required" "$WORK/err" && ok || fail "missing id reason: $(cat "$WORK/err")"
expect_exit "order with two ids" 2 "$DAYSHARD" order 1 2 --data "$WORK/none"
expect_exit "order without a source" 2 "$DAYSHARD" order 1
expect_exit "order with both sources" 2 "$DAYSHARD" order 1 --data "$WORK/none" --server http://127.0.0.1:1
expect_exit "order --timeout-ms alone" 2 "$DAYSHARD" order 1 --server http://127.0.0.1:1 --timeout-ms 5
expect_exit "order --timeout-ms 0" 2 "$DAYSHARD" order 1 --server http://127.0.0.1:1 --consistent --timeout-ms 0
expect_exit "order empty quoted id" 2 "$DAYSHARD" order '""' --data "$WORK/none"
grep -q "bad order ID" "$WORK/err" && ok || fail "bad id reason: $(cat "$WORK/err")"
expect_exit "order, no such directory" 1 "$DAYSHARD" order 1 --data "$WORK/none"
expect_exit "order, server unreachable" 1 "$DAYSHARD" order 1 --server http://127.0.0.1:1

# ---- the orders model: data, index and the oracle -------------------------------------------

cat > "$WORK/extra.jsonl" <<'EOF'
{"order_id": "A/1%\"x", "customer_id": "c 9", "status": "new", "amount": 1.5, "ts": "2026-02-01T10:00:00Z", "version": 0, "items": [{"product": "B\u00fc \"q\" \\ /\t", "quantity": 3}, {"product": "x", "quantity": 2147483647}]}
{"order_id": "A/1%\"x", "customer_id": "c 9", "status": "paid", "amount": 1.5, "ts": "2026-02-01T10:00:00Z", "version": 9223372036854775807, "items": []}
{"order_id": 9001, "customer_id": 20, "status": "pending", "amount": 1, "ts": "2026-04-01T08:00:00Z"}
{"order_id": 9002, "customer_id": 20, "status": "pending", "amount": 2, "ts": "2026-04-02T08:00:00Z"}
{"order_id": 9003, "customer_id": 20, "status": "pending", "amount": 3, "ts": "2026-04-03T08:00:00Z"}
{"order_id": 9004, "customer_id": 20, "status": "pending", "amount": 4, "ts": "2026-04-04T08:00:00Z"}
{"order_id": 9005, "customer_id": 20, "status": "pending", "amount": 5, "ts": "2026-04-05T08:00:00Z"}
{"order_id": 9006, "customer_id": 20, "status": "pending", "amount": 6, "ts": "2026-04-06T08:00:00Z"}
{"order_id": 9001, "customer_id": 20, "status": "paid", "amount": 1, "ts": "2026-02-01T08:00:00Z"}
{"order_id": 9003, "customer_id": 20, "status": "paid", "amount": 3, "ts": "2026-02-03T08:00:00Z"}
{"order_id": 9005, "customer_id": 20, "status": "paid", "amount": 5, "ts": "2026-02-05T08:00:00Z"}
{"order_id": 9002, "customer_id": 21, "status": "paid", "amount": 2, "ts": "2026-04-02T08:00:00Z"}
{"order_id": 9004, "customer_id": 20, "status": "shipped", "amount": 4.25, "ts": "2026-04-04T08:00:00Z"}
EOF
files=("$FIXTURES/shop.jsonl" "$FIXTURES/busy-day.jsonl" "$FIXTURES/updates.jsonl" "$WORK/extra.jsonl")
cat "${files[@]}" > "$WORK/in.jsonl"
"$PY" "$ORACLE" --model orders --out "$WORK/oracle.json" "${files[@]}"
data="$WORK/data"
expect_exit "ingest --model orders" 0 "$DAYSHARD" ingest --data "$data" --model orders --shards 3 "$WORK/in.jsonl"
expect_exit "gsi rebuild" 0 "$DAYSHARD" gsi rebuild --data "$data"

# check_order DOC ORACLE_RECORD_JSON: "" when the document is the oracle's record (ts in the
# customer view's form; shard by the contract's function with 3 shards), else the differences.
check_order() {
  "$PY" - "$1" "$2" <<'EOF'
import datetime, json, sys
doc = json.load(open(sys.argv[1]))
want = json.loads(sys.argv[2])
def fnv1a(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) % 2**64
    return h
oid = want["order_id"]
ts = datetime.datetime.fromtimestamp(want["ts"] / 1000, datetime.timezone.utc)
expect = dict(want)
expect["ts"] = ts.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (want["ts"] % 1000)
expect["shard"] = (fnv1a(oid.encode()) if isinstance(oid, str) else oid) % 3
expect["model"] = "orders"
for k in ("stale", "unchanged"):
    expect.pop(k)
doc.pop("as_of", None)
doc.pop("consistency", None)
bad = ["%s: node %r, oracle %r" % (k, doc.get(k), expect.get(k))
       for k in sorted(set(doc) | set(expect)) if doc.get(k) != expect.get(k)
       or type(doc.get(k)) != type(expect.get(k))]
print("; ".join(bad))
EOF
}
# The id as the command line and the path take it: integers bare, strings between quotes (the
# bytes between them as they are, so "42" stays a string); the path percent-encodes it.
cli_id() { "$PY" -c 'import json,sys; v=json.loads(sys.argv[1]); print(chr(34) + v + chr(34) if isinstance(v, str) else v)' "$1"; }
url_id() { "$PY" -c 'import json,sys,urllib.parse; v=json.loads(sys.argv[1]); print(urllib.parse.quote(chr(34) + v + chr(34) if isinstance(v, str) else str(v), safe=""))' "$1"; }

mapfile -t records < <(json_get "$WORK/oracle.json" "'\n'.join(json.dumps(o, ensure_ascii=False) for o in d['orders'])")
expect_eq "oracle orders" 18 "${#records[@]}"
for rec in "${records[@]}"; do
  id=$(json_get <(echo "$rec") "json.dumps(d['order_id'], ensure_ascii=False)")
  expect_exit "order $id --data --json" 0 "$DAYSHARD" order "$(cli_id "$id")" --data "$data" --json
  expect_eq "order $id --data equals the oracle's P2 record" "" "$(check_order "$WORK/out" "$rec")"
done
expect_exit "order 108 --data (text)" 0 "$DAYSHARD" order 108 --data "$data"
grep -q "items     2" "$WORK/out" && grep -q "2 x Pen" "$WORK/out" && grep -q "1 x Notebook" "$WORK/out" &&
  ok || fail "108 text items: $(cat "$WORK/out")"
expect_exit "order 107 --data (text)" 0 "$DAYSHARD" order 107 --data "$data"
grep -q "status    paid" "$WORK/out" && grep -q "version   2" "$WORK/out" && grep -q "versions  1 seen" "$WORK/out" &&
  ok || fail "107 text: $(cat "$WORK/out")"
expect_exit "order 999 --data" 1 "$DAYSHARD" order 999 --data "$data"
grep -q "no order 999" "$WORK/err" && ok || fail "missing order reason: $(cat "$WORK/err")"
expect_exit "order \"108\" (the string) --data" 1 "$DAYSHARD" order '"108"' --data "$data"

# Customer views from --data: each order once, current status, the oracle's order.
view() { json_get "$WORK/oracle.json" "[[o['order_id'], o['status'], o['amount']] for c in d['customers'] if c['customer_id'] == $1 for o in c['orders']]"; }
got_view() { json_get "$1" "[[o['order_id'], o['status'], o['amount']] for o in d['orders']]"; }
expect_eq "oracle: customer 3" "[[342, 'paid', '100.0000'], [105, 'paid', '30.0000'], [103, 'paid', '12.0000']]" "$(view 3)"
expect_eq "oracle: customer 4" "[[107, 'paid', '7.5000'], [104, 'shipped', '60.2500']]" "$(view 4)"
for c in 3 4 20 21; do
  expect_exit "orders --customer $c --data" 0 "$DAYSHARD" orders --customer $c --data "$data" --json
  expect_eq "customer $c from --data" "$(view $c)" "$(got_view "$WORK/out")"
done
expect_exit "orders --customer 4 --data" 0 "$DAYSHARD" orders --customer 4 --data "$data" --json
expect_eq "customer 4's days (104 moved to 2026-01-16)" "['2026-01-21', '2026-01-16']" \
  "$(json_get "$WORK/out" "[o['day'] for o in d['orders']]")"

# pages_of C PAGER: pages of 2 through C's view with PAGER (prints a page's document for a
# cursor, "" first); prints the page sizes and the orders in sequence.
pages_of() {
  local c=$1 cursor="" sizes="" ids="" n
  shift
  for n in 1 2 3 4 5 6; do
    "$@" "$c" "$cursor" > "$WORK/page.json" || { echo "page $n failed"; return; }
    sizes+="$(json_get "$WORK/page.json" "len(d['orders'])") "
    ids+="$(json_get "$WORK/page.json" "' '.join(str(o['order_id']) for o in d['orders'])") "
    cursor=$(json_get "$WORK/page.json" "d['next'] or ''")
    [[ -n $cursor ]] || break
  done
  echo "${sizes% }|$(echo $ids)"
}
cli_page() { "$DAYSHARD" orders --customer "$1" --data "$data" --json --limit 2 ${2:+--cursor "$2"}; }
want20="$(json_get "$WORK/oracle.json" "' '.join(str(o['order_id']) for c in d['customers'] if c['customer_id'] == 20 for o in c['orders'])")"
expect_eq "oracle: customer 20" "9006 9004 9005 9003 9001" "$want20"
expect_eq "customer 20 by pages of 2 from --data" "2 2 1|$want20" "$(pages_of 20 cli_page)"

# ---- over HTTP ------------------------------------------------------------------------------

serve_start "$data" --http-token secret
auth=(-H "Authorization: Bearer secret")
for rec in "${records[@]}"; do
  id=$(json_get <(echo "$rec") "json.dumps(d['order_id'], ensure_ascii=False)")
  expect_eq "GET /v1/orders/$id" 200 "$(get "/v1/orders/$(url_id "$id")" "${auth[@]}")"
  expect_eq "GET /v1/orders/$id equals the oracle's P2 record" "" "$(check_order "$WORK/body" "$rec")"
done
expect_eq "108 over HTTP: two items" "[{'product': 'Pen', 'quantity': 2}, {'product': 'Notebook', 'quantity': 1}]" \
  "$(get /v1/orders/108 "${auth[@]}" >/dev/null; json_get "$WORK/body" "d['items']")"
expect_eq "107 over HTTP: paid, version 2, 1 seen" "paid 2 1" \
  "$(get /v1/orders/107 "${auth[@]}" >/dev/null; json_get "$WORK/body" "'%s %s %s' % (d['status'], d['version'], d['versions_seen'])")"
expect_eq "as_of on an order" "{'file': 30}" "$(json_get "$WORK/body" "d['as_of']")"
"$DAYSHARD" order 107 --data "$data" --json > "$WORK/cli.json"
expect_eq "order --data prints the HTTP body (as_of aside)" "" "$("$PY" -c '
import json, sys
http = json.load(open(sys.argv[1])); cli = json.load(open(sys.argv[2])); http.pop("as_of")
print("" if http == cli else "%s vs %s" % (http, cli))' "$WORK/body" "$WORK/cli.json")"
expect_eq "without the token" 401 "$(get /v1/orders/108)"
expect_eq "missing order" 404 "$(get /v1/orders/999 "${auth[@]}")"
expect_eq "404 names the order" "no order 999 999" "$(json_get "$WORK/body" "'%s %s' % (d['error'], d['order_id'])")"
expect_eq "missing string order" 404 "$(get /v1/orders/%22108%22 "${auth[@]}")"
expect_eq "404 names the string order" "no order \"108\" 108 str" \
  "$(json_get "$WORK/body" "'%s %s %s' % (d['error'], d['order_id'], type(d['order_id']).__name__)")"
for bad in "/v1/orders/ missing order id" "/v1/orders/%22%22 order id must be" \
  "/v1/orders/a%00b NUL byte" "/v1/orders/%zz bad percent-encoding" \
  "/v1/orders/$(printf 'x%.0s' $(seq 65)) order id must be 1..64 bytes" "/v1/orders/1?limit=2 unknown parameter" \
  "/v1/orders/1?timeout_ms=10 timeout_ms bounds"; do
  path=${bad%% *}
  expect_eq "GET $path" 400 "$(get "$path" "${auth[@]}")"
  grep -q "${bad#* }" "$WORK/body" && ok || fail "GET $path reason: $(cat "$WORK/body")"
done
expect_eq "consistent=true" 200 "$(get "/v1/orders/105?consistent=true&timeout_ms=500" "${auth[@]}")"
expect_eq "consistent=true on serve: durable" "durable paid" \
  "$(json_get "$WORK/body" "'%s %s' % (d['consistency'], d['status'])")"
expect_exit "order --server" 0 "$DAYSHARD" order 108 --server "http://$SERVE_ADDR" --http-token secret
grep -q "2 x Pen" "$WORK/out" && ok || fail "order --server text: $(cat "$WORK/out")"
expect_exit "order --server --json --consistent" 0 "$DAYSHARD" order '"A/1%"x"' --server "http://$SERVE_ADDR" \
  --http-token secret --json --consistent --timeout-ms 500
expect_eq "string order over the CLI's URL" "A/1%\"x [] 9223372036854775807 durable" \
  "$(json_get "$WORK/out" "'%s %s %s %s' % (d['order_id'], d['items'], d['version'], d['consistency'])")"
expect_exit "order 999 --server" 1 "$DAYSHARD" order 999 --server "http://$SERVE_ADDR" --http-token secret
grep -q "no order 999" "$WORK/err" && ok || fail "order --server missing: $(cat "$WORK/err")"
expect_exit "order --server, wrong token" 1 "$DAYSHARD" order 108 --server "http://$SERVE_ADDR" --http-token nope
for c in 3 4 20 21; do
  expect_eq "GET customer $c" 200 "$(get "/v1/customers/$c/orders" "${auth[@]}")"
  expect_eq "customer $c over HTTP" "$(view $c)" "$(got_view "$WORK/body")"
done
http_page() { get "/v1/customers/$1/orders?limit=2${2:+&cursor=$2}" "${auth[@]}" >/dev/null && cat "$WORK/body"; }
expect_eq "customer 20 by pages of 2 over HTTP" "2 2 1|$want20" "$(pages_of 20 http_page)"
serve_stop

# ---- a directory of the events model --------------------------------------------------------

events="$WORK/events"
expect_exit "ingest --model events" 0 "$DAYSHARD" ingest --data "$events" --model events --shards 3 "$WORK/in.jsonl"
expect_exit "order on an events directory" 2 "$DAYSHARD" order 108 --data "$events"
grep -q "the order lookup needs the orders model" "$WORK/err" && ok || fail "events reason: $(cat "$WORK/err")"
serve_start "$events"
expect_eq "GET /v1/orders/108 on events" 409 "$(get /v1/orders/108)"
grep -q "the order lookup needs the orders model" "$WORK/body" && ok || fail "409 reason: $(cat "$WORK/body")"
expect_exit "order --server on events" 2 "$DAYSHARD" order 108 --server "http://$SERVE_ADDR"
grep -q "the order lookup needs the orders model" "$WORK/err" && ok || fail "--server events reason: $(cat "$WORK/err")"
expect_eq "a count still answers there" 200 "$(get "/v1/count?day=2026-01-21")"
expect_eq "events model counts 8 on 2026-01-21" 8 "$(json_get "$WORK/body" "d['count']")"
serve_stop

finish
