#!/usr/bin/python3
"""Drives the console page in headless Chromium (Debian's chromium, chromium-driver and
python3-selenium) and checks what a person would see. Exit 0 when every check holds, 1 with
the reason otherwise, 77 when the browser stack is missing.

  console_browser.py live  BASE OUTDIR [--token T] [--shot-name F]   a node (or router) with heat:
      #hottest-key shows the key /v1/heat names within 2 s, #frames keeps increasing,
      #heat-second follows the heat, the map has painted cells
  console_browser.py serve BASE OUTDIR --day D --count N [--token T]   `dayshard serve`:
      the page says there is no heat and lists D with N events (polled /v1/count)
  console_browser.py shot  BASE OUT.png [--frames N] [--size WxH]   a screenshot only

With --token the page is opened as /?token=T (303 to /, the cookie then authorizes the page's
own requests); every other request of this script sends the bearer. Screenshots go to OUTDIR.
"""
import argparse
import json
import os
import sys
import time
import urllib.request

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.common.exceptions import StaleElementReferenceException
except ImportError:
    print("console_browser: python3-selenium is not installed", file=sys.stderr)
    sys.exit(77)

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def fail(msg):
    print("console_browser: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def browser(size):
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        print("console_browser: chromium or chromedriver missing", file=sys.stderr)
        sys.exit(77)
    opts = Options()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=" + size.replace("x", ","), "--force-device-scale-factor=1"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def text(drv, element_id):
    return drv.find_element(By.ID, element_id).text.strip()


def wait_for(what, cond, timeout_s):
    """Polls cond() every 50 ms until it returns a true value or timeout_s passes. The page
    repaints its panels every second: an element cond() found may be replaced before it reads
    it (stale), which is "not yet", not a failure."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = cond()
        except StaleElementReferenceException:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            fail("timed out after %.0f s waiting for %s" % (timeout_s, what))
        time.sleep(0.05)


def get_json(base, path, token):
    req = urllib.request.Request(base + path)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


def open_page(drv, base, token):
    drv.get(base + ("/?token=" + token if token else "/"))
    if token and drv.current_url.rstrip("/") != base.rstrip("/"):
        fail("the login did not land on / (at %s)" % drv.current_url)
    if token and "token" in drv.current_url:
        fail("the token stayed in the address bar: " + drv.current_url)


def console_errors(drv):
    """Script errors the page logged. A refused request ("Failed to load resource") is not one:
    the page asks /v1/heat to learn whether there is heat, and statuses are checked apart."""
    try:
        return [e["message"] for e in drv.get_log("browser")
                if e["level"] == "SEVERE" and "Failed to load resource" not in e["message"]]
    except Exception:  # a driver without logs: nothing to report
        return []


def painted_cells(drv):
    """Non-background pixels of the heat canvas (the map painted something)."""
    return drv.execute_script("""
        const c = document.getElementById('heat');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4) {
          if (d[i + 3] > 0 && (d[i] + d[i + 1] + d[i + 2]) > 120) n++;
        }
        return n;""")


def heat_partitions(args):
    """The hottest partition keys /v1/heat names: a node's own, or the router's "merged"."""
    doc = get_json(args.base, "/v1/heat?top=1", args.token)
    return doc.get("merged", doc).get("partitions") or []


def check_live(args):
    drv = browser(args.size)
    try:
        open_page(drv, args.base, args.token)
        wait_for("the first frame (#frames > 0)", lambda: int(text(drv, "frames") or 0) > 0, 15)
        frames0 = int(text(drv, "frames"))
        # For each second /v1/heat names a key that stays on top for 2 s, the page must show
        # that key within those 2 s.
        checked, samples, deadline = 0, [], time.monotonic() + 60
        while checked < 3 and time.monotonic() < deadline:
            parts = heat_partitions(args)
            if not parts:
                time.sleep(0.2)
                continue
            key, t0, seen, stable = parts[0]["key"], time.monotonic(), False, True
            while time.monotonic() - t0 < 2.0:
                seen = seen or text(drv, "hottest-key") == key
                now = heat_partitions(args) or [{}]
                stable = stable and now[0].get("key") == key
                time.sleep(0.1)
            samples.append((key, seen, stable))
            if stable:
                if not seen:
                    fail("/v1/heat named %s for 2 s; the page showed %s" %
                         (key, text(drv, "hottest-key")))
                checked += 1
        if checked < 3:
            fail("the hottest key never stayed put for 2 s: %s" % samples)
        frames1 = int(text(drv, "frames"))
        if frames1 <= frames0:
            fail("#frames did not increase (%d then %d)" % (frames0, frames1))
        second = text(drv, "heat-second")
        if not second or second == "–":
            fail("#heat-second is empty")
        if painted_cells(drv) == 0:
            fail("the heat map painted nothing")
        status = text(drv, "status")
        if status != "live":
            fail("#status is %r" % status)
        shot = os.path.join(args.out, args.shot_name)
        drv.save_screenshot(shot)
        errors = console_errors(drv)
        if errors:
            fail("the page logged errors: %s" % errors)
        print("console_browser: live ok: %d keys checked, frames %d -> %d, second %s, %s"
              % (checked, frames0, frames1, second, shot))
    finally:
        drv.quit()


def check_serve(args):
    drv = browser(args.size)
    try:
        open_page(drv, args.base, args.token)
        wait_for("the no-heat panel", lambda: drv.find_element(By.ID, "no-heat").is_displayed(), 10)
        want = "{:,}".format(args.count)

        def row_shown():
            for tr in drv.find_elements(By.CSS_SELECTOR, "#serve-counts tr"):
                cells = [td.text.strip() for td in tr.find_elements(By.TAG_NAME, "td")]
                if len(cells) >= 2 and cells[0] == args.day:
                    return cells[1] == want and cells
            return False

        wait_for("%s with %s events in the day counts" % (args.day, want), row_shown, 10)
        frames0 = int(text(drv, "frames") or 0)
        wait_for("a second poll (#frames increases)", lambda: int(text(drv, "frames")) > frames0,
                 10)
        if "no heat" not in text(drv, "no-heat").lower():
            fail("the page does not say this server has no heat")
        shot = os.path.join(args.out, "console-serve.png")
        drv.save_screenshot(shot)
        errors = console_errors(drv)
        if errors:
            fail("the page logged errors: %s" % errors)
        print("console_browser: serve ok: %s shows %s events, %s" % (args.day, want, shot))
    finally:
        drv.quit()


def shot(args):
    drv = browser(args.size)
    try:
        open_page(drv, args.base, args.token)
        wait_for("%d frames" % args.frames,
                 lambda: int(text(drv, "frames") or 0) >= args.frames, 30 + args.frames * 2)
        drv.save_screenshot(args.out)
        print("console_browser: %s frames, last frame handled in %s ms" %
              (text(drv, "frames"), drv.execute_script("return document.body.dataset.frameMs")))
        for e in console_errors(drv):
            print("console: " + e, file=sys.stderr)
    finally:
        drv.quit()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("live", "serve", "shot"))
    ap.add_argument("base")
    ap.add_argument("out")
    ap.add_argument("--token")
    ap.add_argument("--day")
    ap.add_argument("--count", type=int)
    ap.add_argument("--frames", type=int, default=2)
    ap.add_argument("--shot-name", default="console-live.png")
    ap.add_argument("--size", default="1600x900")
    args = ap.parse_args()
    args.base = args.base.rstrip("/")
    {"live": check_live, "serve": check_serve, "shot": shot}[args.mode](args)


if __name__ == "__main__":
    main()
