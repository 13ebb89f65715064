#!/usr/bin/env bash
# The load test's report.html, opened offline in headless Chromium (Debian's chromium,
# chromedriver and python3-selenium):
# - a short `loadtest --compare --profile busy-day` prints each run's live console URL as the run
#   starts, and records each run's heat history (at most 300 columns, zero cells left out);
# - OUT/report.html, opened from file:// with no network request allowed to matter, shows five
#   strategy columns, each with a heat map the console's renderer painted (data-cells > 0), the
#   strategies of report.json in its order, and logs no script error; the page fetched nothing
#   (no resource entries); a screenshot is kept (and copied to DS_SCREENSHOT_DIR when set);
# - `--render-only OUT` writes the same report.html again from report.json alone;
# - `--open-console` runs xdg-open with the console's URL, and warns naming xdg-open when there
#   is none on PATH (the run still succeeds).
# Skips (77) only when the browser stack is missing.
source "$(dirname "$0")/lib.sh"

CHROMIUM=/usr/bin/chromium
if [[ ! -x $CHROMIUM || ! -x /usr/bin/chromedriver ]] || ! "$PY" -c 'import selenium' 2>/dev/null; then
  echo "SKIP: chromium, chromedriver or python3-selenium missing"
  exit 77
fi

# ---- a short comparison -------------------------------------------------------------------------

out="$WORK/lt"
set +e
timeout 300 "$DAYSHARD" loadtest --compare --profile busy-day --events 40000 --rate 8000 \
  --queries 10 --out "$out" >"$WORK/lt.out" 2>"$WORK/lt.err"
rc=$?
set -e
expect_eq "loadtest --compare exit status ($(tail -n 3 "$WORK/lt.err"))" 0 "$rc"
expect_eq "a console URL per run" 5 \
  "$(grep -cE '^dayshard loadtest: watch live: http://127\.0\.0\.1:[0-9]+/ \(run [1-5], ' "$WORK/lt.err")"
[[ -s $out/report.html ]] && ok || fail "no report.html"
expect_eq "report.html named on stdout" 1 "$(grep -c "$out/report.html" "$WORK/lt.out")"
r="$out/report.json"
expect_eq "each run's heat history: columns in 1..300, no zero cells" "True" "$(json_get "$r" '
all(0 < len(run["heat_history"]["columns"]) <= 300 and
    all(any(v for v in c) for col in run["heat_history"]["columns"] for c in col["days"].values())
    for run in d["runs"])')"

# ---- the page, offline --------------------------------------------------------------------------

shots="$WORK/shots"
mkdir -p "$shots"
set +e
"$PY" - "$out/report.html" "$r" "$shots/report.png" >"$WORK/browser.out" 2>&1 <<'PYEOF'
import json, sys, time
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

page, report, shot = sys.argv[1:4]
doc = json.load(open(report))
opts = Options()
opts.binary_location = "/usr/bin/chromium"
for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
          "--window-size=1400,1000", "--force-device-scale-factor=1",
          "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"):  # no network
    opts.add_argument(a)
opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
drv = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
def fail(msg):
    print("FAIL: " + msg)
    drv.quit()
    sys.exit(1)
try:
    drv.get("file://" + page)
    deadline = time.monotonic() + 20
    while drv.execute_script("return document.body && document.body.dataset.ready") != "1":
        if time.monotonic() > deadline:
            fail("the page never finished drawing (body[data-ready])")
        time.sleep(0.05)
    runs = drv.execute_script("""return Array.from(document.querySelectorAll('section.run'))
        .map(s => [s.dataset.strategy, Number(s.querySelector('.map').dataset.cells || 0),
                   s.querySelectorAll('svg.line-chart path.line').length])""")
    if len(runs) != 5:
        fail("%d strategy columns, expected 5: %s" % (len(runs), runs))
    want = [run["strategy"] for run in doc["runs"]]
    if [r[0] for r in runs] != want:
        fail("columns %s, report.json has %s" % ([r[0] for r in runs], want))
    for name, cells, lines in runs:
        if cells <= 0:
            fail("the heat map of %s painted no cell" % name)
        if lines < 3:
            fail("%s has %d chart lines" % (name, lines))
    fetched = drv.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    if fetched:
        fail("the page fetched %s" % fetched)
    errors = [e["message"] for e in drv.get_log("browser") if e["level"] == "SEVERE"]
    if errors:
        fail("the page logged errors: %s" % errors)
    height = drv.execute_script("return document.documentElement.scrollHeight")
    drv.set_window_size(1400, min(height, 2400))
    drv.save_screenshot(shot)
    print("report.html ok: %s" % runs)
finally:
    drv.quit()
PYEOF
rc=$?
set -e
expect_eq "report.html in the browser ($(tail -n 2 "$WORK/browser.out"))" 0 "$rc"
if [[ -n ${DS_SCREENSHOT_DIR:-} ]] && compgen -G "$shots/*.png" >/dev/null; then
  mkdir -p "$DS_SCREENSHOT_DIR"
  cp "$shots"/*.png "$DS_SCREENSHOT_DIR/"
fi

# ---- drawn again from report.json alone ---------------------------------------------------------

cp "$out/report.html" "$WORK/first.html"
rm "$out/report.html"
expect_exit "render-only" 0 "$DAYSHARD" loadtest --render-only "$out"
cmp -s "$WORK/first.html" "$out/report.html" && ok || fail "render-only wrote another report.html"

# ---- --open-console -----------------------------------------------------------------------------

bin="$WORK/bin"
mkdir -p "$bin"
printf '#!/bin/sh\necho "$@" >> %q\n' "$WORK/opened" >"$bin/xdg-open"
chmod +x "$bin/xdg-open"
small=(--shards 1 --events 4000 --rate 4000 --queries 0)
set +e
timeout 120 env PATH="$bin:$PATH" "$DAYSHARD" loadtest "${small[@]}" --open-console \
  --out "$WORK/open" >"$WORK/open.out" 2>"$WORK/open.err"
rc=$?
set -e
expect_eq "--open-console run ($(tail -n 2 "$WORK/open.err"))" 0 "$rc"
url=$(sed -n 's|^dayshard loadtest: watch live: \(http://[^ ]*/\) .*|\1|p' "$WORK/open.err")
expect_eq "xdg-open got the console's URL" "$url" "$(cat "$WORK/opened" 2>/dev/null)"

mkdir -p "$WORK/empty"
set +e
timeout 120 env PATH="$WORK/empty" "$DAYSHARD" loadtest "${small[@]}" --open-console \
  --out "$WORK/noxdg" >"$WORK/noxdg.out" 2>"$WORK/noxdg.err"
rc=$?
set -e
expect_eq "--open-console without xdg-open still runs ($(tail -n 2 "$WORK/noxdg.err"))" 0 "$rc"
expect_eq "the missing xdg-open named" 1 \
  "$(grep -c "warning: --open-console: cannot run xdg-open (not installed); open http://127.0.0.1:[0-9]*/ in a browser by hand" "$WORK/noxdg.err")"
finish
