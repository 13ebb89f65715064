#!/usr/bin/env bash
# `dayshard serve` against `count --data` on the same data directory: every /v1/count answer
# equals the CLI's document (plus as_of), `count --server` prints the same table, the probes,
# /v1/partitions, /metrics, orders without an index (503), the bearer token, and a clean SIGTERM.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"

for cmd in serve orders; do
  expect_exit "$cmd --help" 0 "$DAYSHARD" "$cmd" --help
  grep -q "usage: dayshard $cmd" "$WORK/out" && ok || fail "$cmd --help text"
done
grep -q "use it for any bind that is not loopback" <("$DAYSHARD" serve --help) && ok || fail "token wording"
expect_exit "serve without --data" 2 "$DAYSHARD" serve
expect_exit "serve bad listen" 2 "$DAYSHARD" serve --data "$WORK" --http nonsense
expect_exit "serve bad range" 2 "$DAYSHARD" serve --data "$WORK" --max-range-days 0
expect_exit "orders without customer" 2 "$DAYSHARD" orders --server http://127.0.0.1:1
expect_exit "count --server unreachable" 1 "$DAYSHARD" count --server http://127.0.0.1:1 --day 2026-01-21

data="$WORK/data"
cat "$FIXTURES/shop.jsonl" "$FIXTURES/busy-day.jsonl" > "$WORK/in.jsonl"
"$DAYSHARD" generate --events 30000 --profile busy-day --seed 7 >> "$WORK/in.jsonl"
expect_exit "ingest" 0 "$DAYSHARD" ingest --data "$data" --shards 3 "$WORK/in.jsonl"
serve_start "$data"
expect_exit "address in use" 1 "$DAYSHARD" serve --data "$data" --http "$SERVE_ADDR"

# Every form of count, over HTTP and from the CLI, must be the same document (as_of aside).
queries=(
  "day=2026-01-21" "day=2026-01-21&by=shard" "day=2026-01-21&by=hour" "day=2026-01-21&status=paid"
  "day=2026-01-01&to=2026-01-31&by=day" "day=2026-01-01&to=2026-01-31&status=paid&by=shard"
  "day=2025-06-01" "day=2026-01-20&to=2026-01-22&status=no%20such"
)
for q in "${queries[@]}"; do
  args=$("$PY" -c '
import sys, urllib.parse
for k, v in urllib.parse.parse_qsl(sys.argv[1]):
    print("--" + k); print(v)' "$q" | tr '\n' '\0' | xargs -0 printf '%q ')
  expect_eq "GET /v1/count?$q status" 200 "$(get "/v1/count?$q")"
  eval "\"\$DAYSHARD\" count --data \"\$data\" --json $args" > "$WORK/cli.json"
  expect_eq "GET /v1/count?$q equals count --data" "" "$("$PY" -c '
import json, sys
http = json.load(open(sys.argv[1])); cli = json.load(open(sys.argv[2]))
as_of = http.pop("as_of")
assert as_of == {"file": 30010}, as_of
print("" if http == cli else "differs: %s vs %s" % (http, cli))' "$WORK/body" "$WORK/cli.json")"
  eval "\"\$DAYSHARD\" count --data \"\$data\" $args" > "$WORK/cli.txt"
  eval "\"\$DAYSHARD\" count --server \"http://\$SERVE_ADDR\" $args" > "$WORK/server.txt"
  expect_eq "count --server table for $q" "" "$(diff "$WORK/cli.txt" "$WORK/server.txt")"
done
# The contract's example through the service.
get "/v1/count?day=2026-01-21&by=shard" >/dev/null
"$DAYSHARD" count --data "$data" --day 2026-01-21 --json > "$WORK/day.json"
expect_eq "partitions of the busy day" 3 "$(json_get "$WORK/body" 'd["partitions"]')"
expect_eq "amount_sum is a string" "str" "$(json_get "$WORK/body" 'type(d["amount_sum"]).__name__')"

expect_eq "/v1/partitions status" 200 "$(get "/v1/partitions?day=2026-01-21")"
expect_eq "/v1/partitions events add up" "$(json_get "$WORK/day.json" 'd["count"]') 3 null" \
  "$(json_get "$WORK/body" '"%d %d %s" % (sum(p["events"] for p in d["partitions"]), d["shards"], json.dumps(d["partitions"][0]["write_rate_per_s"]))')"
sleep 1.1
get "/v1/partitions?day=2026-01-21" >/dev/null
expect_eq "write rate of an idle day after two observations" "0.0" \
  "$(json_get "$WORK/body" 'd["partitions"][0]["write_rate_per_s"]')"
expect_eq "/healthz" 200 "$(get /healthz)"
expect_eq "/readyz" 200 "$(get /readyz)"
expect_eq "/readyz ready" True "$(json_get "$WORK/body" 'd["ready"]')"
expect_eq "/metrics" 200 "$(get /metrics)"
grep -q '^dayshard_source_next_offset{partition="file"} 30010$' "$WORK/body" && ok || fail "metrics offsets"
grep -q '^dayshard_partition_events{day="2026-01-28",shard="2"} ' "$WORK/body" && ok || fail "metrics recent partition"
grep -q 'day="2026-01-21"' "$WORK/body" && fail "metrics keep only the last 7 days" || ok
grep -q '^# TYPE dayshard_http_requests_total counter$' "$WORK/body" && ok || fail "metrics types"
# `ingest` builds no by-customer index (a node does): orders say so, clearly.
expect_eq "orders without an index" 503 "$(get "/v1/customers/3/orders?limit=5")"
json_get "$WORK/body" 'd["error"]' | grep -q "no by-customer index" && ok ||
  fail "orders 503 message: $(cat "$WORK/body")"
expect_exit "orders --server" 1 "$DAYSHARD" orders --server "http://$SERVE_ADDR" --customer 3
grep -q "no by-customer index" "$WORK/err" && ok || fail "orders --server reason"
expect_exit "orders --data" 1 "$DAYSHARD" orders --data "$data" --customer 3
grep -q "has no by-customer index" "$WORK/err" && ok || fail "orders --data reason"
serve_stop

# With a token: 401 without it or with a wrong one, 200 with it; the probes stay open.
serve_start "$data" --http-token s3cret --max-range-days 31
expect_eq "no token" 401 "$(get "/v1/count?day=2026-01-21")"
expect_eq "401 is JSON" "missing or wrong bearer token" "$(json_get "$WORK/body" 'd["error"]')"
expect_eq "wrong token" 401 "$(get "/v1/count?day=2026-01-21" -H 'Authorization: Bearer s3creT')"
expect_eq "token prefix" 401 "$(get "/v1/count?day=2026-01-21" -H 'Authorization: Bearer s3cre')"
expect_eq "token" 200 "$(get "/v1/count?day=2026-01-21" -H 'Authorization: Bearer s3cret')"
expect_eq "metrics need the token" 401 "$(get /metrics)"
expect_eq "healthz without token" 200 "$(get /healthz)"
expect_eq "--max-range-days" 400 "$(get "/v1/count?day=2026-01-01&to=2026-02-01" -H 'Authorization: Bearer s3cret')"
expect_exit "count --server --http-token" 0 "$DAYSHARD" count --server "http://$SERVE_ADDR" --day 2026-01-21 --http-token s3cret
expect_exit "count --server without token" 1 "$DAYSHARD" count --server "http://$SERVE_ADDR" --day 2026-01-21
grep -q "bearer token" "$WORK/err" && ok || fail "count --server 401 reason"
serve_stop
finish
