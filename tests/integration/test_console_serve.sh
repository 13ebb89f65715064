#!/usr/bin/env bash
# The console (GET /) of `dayshard serve` and of the router, and its token flow:
# - with --http-token, / without the token is a 401 HTML page (no cookie), /?token=<wrong> a 401
#   without a cookie, /?token=<right> a 303 to / setting dayshard_token (HttpOnly,
#   SameSite=Strict, Path=/); the cookie then opens the page and the data paths, as the bearer
#   does; the script and style sheet are public; the token never reaches a log line;
# - the page is compiled in (a Content-Security-Policy confines it to the server);
# - the router serves the page itself, with no node up;
# - in headless Chromium (Debian's chromium + chromedriver + python3-selenium): the login lands
#   on / with the token gone from the address bar, the page says this server has no heat and
#   lists the stored events per day as /v1/count counts them, polled again and again. A
#   screenshot is kept in the test's directory (and copied to DS_SCREENSHOT_DIR when set).
# Without the browser stack the HTTP checks run and the test then exits 77 (skipped).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"

TOKEN="c0ns0le-t0ken_x"
# Events on the last three days (UTC), the page's default range: 40, 25 and 12 a day.
"$PY" - >"$WORK/in.jsonl" <<'PYEOF'
import datetime, json
today = datetime.datetime.now(datetime.timezone.utc).replace(hour=12, minute=0, second=0,
                                                             microsecond=0)
oid = 1
for back, n in ((0, 40), (1, 25), (2, 12)):
    day = today - datetime.timedelta(days=back)
    for i in range(n):
        ts = (day + datetime.timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        print(json.dumps({"order_id": oid, "customer_id": 1 + oid % 5, "ts": ts,
                          "status": "paid", "amount": 10}))
        oid += 1
PYEOF
today=$("$PY" -c 'import datetime; print(datetime.datetime.now(datetime.timezone.utc).date())')
expect_exit "ingest" 0 "$DAYSHARD" ingest --data "$WORK/data" "$WORK/in.jsonl"
serve_start "$WORK/data" --http-token "$TOKEN"

# head PATH [curl options...]: status, then the response headers, into $WORK/head.
head_of() {
  local path=$1
  shift
  curl -s -o "$WORK/body" -D "$WORK/head" -w '%{http_code}' "$@" "http://$SERVE_ADDR$path"
}
has_header() { tr -d '\r' <"$WORK/head" | grep -qi "^$1"; }

expect_eq "/ without the token" 401 "$(head_of /)"
has_header "content-type: text/html" && ok || fail "the 401 page is not HTML"
grep -q '/?token=' "$WORK/body" && ok || fail "the 401 page does not say to open /?token="
has_header "set-cookie" && fail "a 401 set a cookie" || ok
expect_eq "/?token=<wrong>" 401 "$(head_of "/?token=not-it")"
has_header "set-cookie" && fail "a wrong token set a cookie" || ok
expect_eq "/?token=<a prefix of it>" 401 "$(head_of "/?token=${TOKEN:0:8}")"
has_header "set-cookie" && fail "a prefix of the token set a cookie" || ok
expect_eq "/?token=<right>" 303 "$(head_of "/?token=$TOKEN")"
has_header "location: /$" && ok || fail "the login does not send to /: $(cat "$WORK/head")"
has_header "set-cookie: dayshard_token=$TOKEN; HttpOnly; SameSite=Strict; Path=/$" && ok ||
  fail "the login's cookie: $(grep -i set-cookie "$WORK/head")"
expect_eq "/?token= (empty)" 400 "$(head_of "/?token=")"

cookie=(-H "Cookie: dayshard_token=$TOKEN")
expect_eq "/ with the cookie" 200 "$(head_of / "${cookie[@]}")"
has_header "content-type: text/html; charset=utf-8" && ok || fail "the page's content type"
has_header "content-security-policy: default-src 'self'" && ok || fail "the page has no CSP"
grep -q '<script src="/console.js">' "$WORK/body" && ok || fail "the page does not load its script"
cmp -s "$WORK/body" "$ROOT/query/console/console.html" && ok ||
  fail "the page served is not query/console/console.html"
expect_eq "/ with the bearer" 200 "$(head_of / -H "Authorization: Bearer $TOKEN")"
expect_eq "/ with a wrong cookie" 401 "$(head_of / -H "Cookie: dayshard_token=nope")"
expect_eq "HEAD / with the cookie" 200 "$(head_of / -I "${cookie[@]}")"
for asset in console.js console.css; do
  expect_eq "/$asset without the token (public)" 200 "$(head_of "/$asset")"
  cmp -s "$WORK/body" "$ROOT/query/console/$asset" && ok || fail "/$asset differs from the source"
done
has_header "content-type: text/css; charset=utf-8" && ok || fail "the style sheet's content type"
expect_eq "/%63onsole.js (an escaped asset name)" 404 "$(head_of "/%63onsole.js" "${cookie[@]}")"
expect_eq "still serving after it" 200 "$(head_of /console.css)"
q="/v1/count?day=$today&by=day"
expect_eq "$q with the cookie" 200 "$(head_of "$q" "${cookie[@]}")"
expect_eq "$q with the cookie: its count" 40 "$(json_get "$WORK/body" 'd["count"]')"
expect_eq "$q with a wrong cookie" 401 "$(head_of "$q" -H "Cookie: dayshard_token=x$TOKEN")"
expect_eq "$q with neither" 401 "$(head_of "$q")"

# The router serves the same page itself: no node is up, and it answers at once.
"$DAYSHARD" router --node http://127.0.0.1:1 --http 127.0.0.1:0 --http-token "$TOKEN" \
  </dev/null >"$WORK/router.out" 2>"$WORK/router.log" &
router_pid=$!
wait_printed "$WORK/router.out" "$router_pid"
R=http://$(head -1 "$WORK/router.out")
expect_eq "router: / with the cookie" 200 \
  "$(curl -s -o "$WORK/rbody" -w '%{http_code}' --max-time 5 "${cookie[@]}" "$R/")"
cmp -s "$WORK/rbody" "$ROOT/query/console/console.html" && ok || fail "the router's page differs"
expect_eq "router: /?token=<right>" 303 \
  "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$R/?token=$TOKEN")"
expect_eq "router: / without the token" 401 \
  "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$R/")"
kill -TERM "$router_pid"
wait "$router_pid" || fail "router exit status"

# The browser: the login, then the page's own requests ride on the cookie.
shots="$WORK/screenshots"
mkdir -p "$shots"
rc=0
"$PY" "$ROOT/tests/integration/console_browser.py" serve "http://$SERVE_ADDR" "$shots" \
  --token "$TOKEN" --day "$today" --count 40 || rc=$?
browser_skipped=false
case $rc in
  0) ok ;;
  77) browser_skipped=true; echo "console_browser: no browser stack, browser checks skipped" ;;
  *) fail "the serve console in the browser (exit $rc)" ;;
esac
if [[ -n ${DS_SCREENSHOT_DIR:-} ]] && compgen -G "$shots/*.png" >/dev/null; then
  mkdir -p "$DS_SCREENSHOT_DIR"
  cp "$shots"/*.png "$DS_SCREENSHOT_DIR/"
fi

serve_stop
for log in "$WORK/serve.err" "$WORK/router.log"; do
  grep -q -- "$TOKEN" "$log" && fail "the token is in $(basename "$log")" || ok
done
finish
$browser_skipped && exit 77
exit 0
