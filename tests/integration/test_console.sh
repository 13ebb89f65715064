#!/usr/bin/env bash
# The live console of a node under load, in headless Chromium (Debian's chromium +
# chromedriver + python3-selenium):
# - a node with --http-token takes a load whose hottest partition key is known and moves: 45 s
#   of a day's orders all on shard 0 (order ids that are multiples of 256, so shard 0 at any
#   shard count up to 256), then 45 s all on shard 1, beside a light load on other days; the
#   load stops once both pages below are checked (it need not run to its end);
# - the page is opened at /?token=T (303 to /, the cookie then carries the token on the
#   page's EventSource); it must show the key /v1/heat names within 2 s of /v1/heat naming it,
#   each time the key stays put for 2 s, its frame counter must keep increasing and its map
#   must have painted; a screenshot is kept in the test's directory (and copied to
#   DS_SCREENSHOT_DIR when set);
# - through the router, the same across two nodes: a second node b in a's consumer group (the
#   two split the topic's partitions), a router over both (--http-token and --node-token T);
#   the page loaded from the router shows the key the router's merged /v1/heat names within
#   2 s, as above (its screenshot console-router.png beside the node's).
# Needs the node's /v1/heat/stream: exits 77 (skipped) while the node answers it 404, and
# without the browser stack.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"

TOKEN="live-c0ns0le"
RATE=2000
PHASE_S=45 # long enough for the node's check and then the router's
"$PY" - "$RATE" "$PHASE_S" >"$WORK/load.jsonl" <<'PYEOF'
import datetime, json, random, sys
rate, phase_s = int(sys.argv[1]), int(sys.argv[2])
rnd = random.Random(7)
hot = "2026-03-14"
quiet = ["2026-03-%02d" % d for d in range(1, 14)]
n = 0
for phase in (0, 1):
    for i in range(rate * phase_s):
        n += 1
        if i % 10 == 9:  # a tenth on quiet days, any shard
            day, oid = rnd.choice(quiet), 10**9 + n
        else:            # the rest on the hot day's shard 0, then 1
            day, oid = hot, 256 * n + phase
        print(json.dumps({"order_id": oid, "customer_id": 1 + n % 977,
                          "ts": "%sT10:%02d:%02dZ" % (day, (n // 60) % 60, n % 60),
                          "amount": 5}))
PYEOF

start_broker --partitions 4
start_http_node a "$WORK/a" g1 --shard-capacity 1000 --http-token "$TOKEN"
URL_A=$URL
start_http_node b "$WORK/b" g1 --shard-capacity 1000 --http-token "$TOKEN"
URL_B=$URL
URL=$URL_A
wait_assigned a 30 || die "node a got no partitions"
wait_assigned b 30 || die "node b got no partitions"
start_router --node "$URL_A,$URL_B" --http-token "$TOKEN" --node-token "$TOKEN"

stream=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 -H "Authorization: Bearer $TOKEN" \
  "$URL/v1/heat/stream" || true)
if [[ $stream == 404 ]]; then
  echo "SKIP: this node has no /v1/heat/stream (the console's stream); nothing to show live"
  exit 77
fi

ds_produce "$WORK/load.jsonl" --rate "$RATE" >"$WORK/produce.out" 2>&1 &
producer=$!
# The check starts once /v1/heat names the hot day's shard 0.
for _ in $(seq 300); do
  curl -s --max-time 2 -H "Authorization: Bearer $TOKEN" "$URL/v1/heat?top=1" >"$WORK/heat.json" || true
  grep -q '"key":"DAY#2026-03-14#0"' "$WORK/heat.json" && break
  sleep 0.1
done
grep -q '"key":"DAY#2026-03-14#0"' "$WORK/heat.json" && ok ||
  die "/v1/heat never named DAY#2026-03-14#0: $(head -c 300 "$WORK/heat.json")"

shots="$WORK/screenshots"
mkdir -p "$shots"
rc=0
"$PY" "$ROOT/tests/integration/console_browser.py" live "$URL" "$shots" --token "$TOKEN" || rc=$?
case $rc in
  0) ok ;;
  77) echo "SKIP: no browser stack"; kill_tree "$producer"; exit 77 ;;
  *) fail "the live console in the browser (exit $rc)" ;;
esac
# The router's page: the same checks against the router's merged /v1/heat.
rc=0
"$PY" "$ROOT/tests/integration/console_browser.py" live "$R" "$shots" --token "$TOKEN" \
  --shot-name console-router.png || rc=$?
case $rc in
  0) ok ;;
  *) fail "the live console through the router in the browser (exit $rc)" ;;
esac
if [[ -n ${DS_SCREENSHOT_DIR:-} ]] && compgen -G "$shots/*.png" >/dev/null; then
  mkdir -p "$DS_SCREENSHOT_DIR"
  cp "$shots"/*.png "$DS_SCREENSHOT_DIR/"
fi
# The checks are done: the load has served its purpose. A producer that already ended must
# have ended well; one still sending is stopped.
if kill -0 "$producer" 2>/dev/null; then
  kill_tree "$producer"
  wait "$producer" 2>/dev/null || true
else
  wait "$producer" || fail "produce: $(tail -n 3 "$WORK/produce.out")"
fi
grep -q -- "$TOKEN" "$WORK/a.log" && fail "the token is in the node's log" || ok
grep -q -- "$TOKEN" "$WORK/router.log" && fail "the token is in the router's log" || ok
stop_router "console"
finish
