#!/usr/bin/python3
"""Compares what dayshard answers with what the oracle (orders_oracle.py) says it must answer.

  orders_compare.py --oracle ORACLE.json (--data DIR --dayshard BIN | --server URL)
                    [--stream FILE...] [--seed S] [--customers N] [--orders N] [--limit N]
                    [--consistent] [--max-diffs N] [--jobs N] [--label TEXT]

ORACLE.json is `orders_oracle.py --model M --out ORACLE.json FILES...` of the stream dayshard
was given. dayshard is asked through its CLI on a data directory (--data, with the binary
--dayshard: `count --json`, `orders --customer C --json` page by page, `order ID --json`) or
over HTTP (--server: /v1/count, /v1/customers/{id}/orders, /v1/orders/{id}). Checked:

  days       every day of the oracle's range (and one day either side): count and amount_sum,
             one `--by day` query per 366 days; a day the oracle does not list must read 0
  statuses   for every status the oracle names: per-day counts (`--status S --by day`)
  customers  every customer's whole view (all pages, in order: order_id, ts, status, amount)
             for a sample: the 3 with the most orders and up to N (default 300) chosen by the
             seed; with --stream, up to N/5 (at most 50) customers the stream names but whose
             view the oracle says is empty (every order moved away) must read empty
  orders     P2, in the orders model only: up to N (default 300) orders chosen by the seed,
             N/5 (at most 20) with items and N/5 with the most versions: customer_id, ts, day,
             status, amount, version, items, versions_seen; and 5 order ids the stream never
             had must be "not found". Skipped with a notice when dayshard has no order lookup.

Prints a summary line per area, the first differences (--max-diffs, default 10), and exits 1
on any difference, 2 on a usage or transport error (dayshard not answering), 0 when equal.
Standard library only (Debian's /usr/bin/python3).
"""

import argparse
import concurrent.futures
import datetime
import json
import random
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

DAY_MS = 86400000
RANGE_DAYS_MAX = 366
PAGE_GUARD = 100000  # pages per customer before we call it a loop


class Transport(Exception):
    """dayshard could not be asked (not a difference in its answers)."""


def day_number(text):
    return (datetime.date.fromisoformat(text) - datetime.date(1970, 1, 1)).days


def day_text(number):
    return (datetime.date(1970, 1, 1) + datetime.timedelta(days=number)).isoformat()


def ts_ms(value):
    """The customer view's and P2's ts: RFC 3339 text with milliseconds (or an integer)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str):
        raise ValueError("ts is neither text nor an integer: %r" % (value,))
    text = value.replace("Z", "+00:00").replace("z", "+00:00")
    t = datetime.datetime.fromisoformat(text)
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    delta = t - epoch
    return delta.days * DAY_MS + delta.seconds * 1000 + delta.microseconds // 1000


def id_arg(value):
    """An id as the CLI takes it: an integer as digits, a string id always in quotes."""
    return str(value) if isinstance(value, int) else '"%s"' % value


def id_path(value):
    """An id as a path segment: an integer as digits, a string id as JSON, percent-encoded."""
    if isinstance(value, int):
        return str(value)
    return urllib.parse.quote(json.dumps(value, ensure_ascii=False), safe="")


class Cli:
    def __init__(self, binary, data, consistent):
        self.binary, self.data, self.consistent = binary, data, consistent

    def run(self, args):
        """(exit status, stdout, stderr) of one dayshard command."""
        cmd = [self.binary] + args + ["--data", self.data]
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        except subprocess.TimeoutExpired:
            raise Transport("%s: no answer within 120 s" % " ".join(cmd))
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")

    def json_of(self, args):
        rc, out, err = self.run(args)
        if rc != 0:
            raise Transport("dayshard %s: exit %d: %s" % (" ".join(args), rc, err.strip()[:300]))
        try:
            return json.loads(out)
        except ValueError:
            raise Transport("dayshard %s: not JSON: %r" % (" ".join(args), out[:200]))

    def count(self, first, last, status):
        args = ["count", "--day", first, "--to", last, "--by", "day", "--json"]
        if status is not None:
            args += ["--status", status]
        return self.json_of(args)

    def customer_page(self, customer, limit, cursor):
        args = ["orders", "--customer", id_arg(customer), "--limit", str(limit), "--json"]
        if cursor is not None:
            args += ["--cursor", cursor]
        if self.consistent:
            args += ["--consistent"]
        return self.json_of(args)

    def has_order_lookup(self):
        p = subprocess.run([self.binary, "order", "--help"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=30)
        return p.returncode == 0

    def order(self, order_id):
        """(record or None when not found, error text)."""
        rc, out, err = self.run(["order", id_arg(order_id), "--json"])
        if rc == 0:
            return json.loads(out), ""
        if rc == 1:
            return None, err.strip()
        raise Transport("dayshard order %s: exit %d: %s" % (id_arg(order_id), rc, err.strip()[:300]))


class Http:
    def __init__(self, url, consistent):
        self.url, self.consistent = url.rstrip("/"), consistent

    def get(self, path, params):
        if self.consistent:
            params = dict(params, consistent="true")
        query = urllib.parse.urlencode(params)
        full = self.url + path + ("?" + query if query else "")
        try:
            with urllib.request.urlopen(full, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            body = e.read()
            try:
                return e.code, json.loads(body)
            except ValueError:
                return e.code, {"error": body.decode("utf-8", "replace")}
        except (urllib.error.URLError, OSError) as e:
            raise Transport("GET %s: %s" % (full, e))

    def json_of(self, path, params):
        status, doc = self.get(path, params)
        if status != 200:
            raise Transport("GET %s %s: %d %s" % (path, params, status, doc))
        return doc

    def count(self, first, last, status):
        params = {"day": first, "to": last, "by": "day"}
        if status is not None:
            params["status"] = status
        return self.json_of("/v1/count", params)

    def customer_page(self, customer, limit, cursor):
        params = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        return self.json_of("/v1/customers/%s/orders" % id_path(customer), params)

    def has_order_lookup(self):
        status, doc = self.get("/v1/orders/1", {})
        return not (status == 404 and "no such path" in str(doc.get("error", "")))

    def order(self, order_id):
        status, doc = self.get("/v1/orders/%s" % id_path(order_id), {})
        if status == 200:
            return doc, ""
        if status == 404:
            return None, str(doc.get("error", ""))
        raise Transport("GET /v1/orders/%s: %d %s" % (id_path(order_id), status, doc))


class Report:
    def __init__(self, max_diffs, label):
        self.max_diffs, self.label = max_diffs, label
        self.diffs = 0
        self.checked = {}

    def check(self, area):
        self.checked[area] = self.checked.get(area, 0) + 1

    def diff(self, text):
        self.diffs += 1
        if self.diffs <= self.max_diffs:
            print("DIFF %s%s" % (self.label, text))


def sum_text(text):
    """Amount sums compare as numbers of units (the texts have 4 places on both sides)."""
    whole, _, frac = text.partition(".")
    sign = -1 if whole.startswith("-") else 1
    return sign * (abs(int(whole or "0")) * 10000 + int((frac + "0000")[:4]))


def day_windows(first, last):
    start = first
    while start <= last:
        end = min(last, start + RANGE_DAYS_MAX - 1)
        yield day_text(start), day_text(end)
        start = end + 1


def by_day(api, first, last, status, models=None):
    """{day: (count, amount units)} of dayshard, days with count or amount only; the model each
    answer names is added to the set models when given."""
    out = {}
    for a, b in day_windows(first, last):
        doc = api.count(a, b, status)
        if models is not None:
            models.add(doc.get("model"))
        for g in doc.get("groups", []):
            units = sum_text(g["amount_sum"])
            if g["count"] != 0 or units != 0:
                out[g["key"]] = (g["count"], units)
    return out


def check_days(api, oracle, report, first, last):
    want = {d: (v["count"], sum_text(v["amount_sum"])) for d, v in oracle["days"].items()}
    models = set()
    got = by_day(api, first, last, None, models)
    if models != {oracle["model"]}:
        report.diff("dayshard's data counts %s, the oracle's %s" %
                    (" and ".join(sorted(str(m) for m in models)), oracle["model"]))
    for d in sorted(set(want) | set(got)):
        report.check("days")
        w, g = want.get(d, (0, 0)), got.get(d, (0, 0))
        if w != g:
            report.diff("day %s: count %d amount %s, oracle count %d amount %s" %
                        (d, g[0], g[1] / 10000, w[0], w[1] / 10000))
    statuses = sorted({s for v in oracle["days"].values() for s in v["by_status"]})
    for status in statuses:
        want_s = {d: v["by_status"][status] for d, v in oracle["days"].items()
                  if v["by_status"].get(status)}
        got_s = {d: c for d, (c, _) in by_day(api, first, last, status).items() if c}
        for d in sorted(set(want_s) | set(got_s)):
            report.check("statuses")
            if want_s.get(d, 0) != got_s.get(d, 0):
                report.diff("day %s status %r: count %d, oracle %d" %
                            (d, status, got_s.get(d, 0), want_s.get(d, 0)))
    return len(statuses), models == {oracle["model"]}


def customer_view(api, customer, limit):
    entries, cursor, pages = [], None, 0
    while True:
        doc = api.customer_page(customer, limit, cursor)
        pages += 1
        for o in doc["orders"]:
            entries.append((o["order_id"], ts_ms(o["ts"]), o["status"], o["amount"]))
        cursor = doc.get("next")
        if cursor is None:
            return entries, pages
        if not doc["orders"]:
            raise Transport("customer %r: an empty page with a next cursor" % (customer,))
        if pages > PAGE_GUARD:
            raise Transport("customer %r: more than %d pages" % (customer, PAGE_GUARD))


def check_customers(api, oracle, report, args, vanished, pool):
    views = {json.dumps(c["customer_id"]): c for c in oracle["customers"]}
    by_size = sorted(oracle["customers"], key=lambda c: -len(c["orders"]))
    chosen = [c["customer_id"] for c in by_size[:3]]
    rest = [c["customer_id"] for c in oracle["customers"] if c["customer_id"] not in chosen]
    rng = random.Random(args.seed)
    chosen += rng.sample(rest, min(len(rest), args.customers))
    chosen += rng.sample(vanished, min(len(vanished), 50, max(1, args.customers // 5)))

    def one(customer):
        # The three heaviest page through with the largest page; the others with --limit.
        limit = 1000 if customer in chosen[:3] else args.limit
        return customer, customer_view(api, customer, limit)

    pages = 0
    for customer, (got, n) in pool.map(one, chosen):
        pages += n
        report.check("customers")
        entry = views.get(json.dumps(customer))
        want = [] if entry is None else [(o["order_id"], o["ts"], o["status"], o["amount"])
                                        for o in entry["orders"]]
        if got != want:
            first = next((i for i in range(max(len(got), len(want)))
                          if i >= len(got) or i >= len(want) or got[i] != want[i]), None)
            report.diff("customer %r: %d entries, oracle %d; first difference at #%d: got %s, "
                        "oracle %s" % (customer, len(got), len(want), first,
                                       got[first] if first < len(got) else "(end)",
                                       want[first] if first < len(want) else "(end)"))
    return len(chosen), pages


P2_FIELDS = ("customer_id", "day", "status", "amount", "version", "items", "versions_seen")


def check_orders(api, oracle, report, args, pool):
    if not api.has_order_lookup():
        print("NOTICE %sP2 skipped: dayshard has no order lookup (`dayshard order` / "
              "GET /v1/orders/{id}) yet" % report.label)
        return None
    records = oracle["orders"]
    rng = random.Random(args.seed + 1)
    with_items = [o for o in records if o["items"]]
    extra = min(20, max(1, args.orders // 5))
    most_versions = sorted(records, key=lambda o: -o["versions_seen"])[:extra]
    chosen = with_items[:extra] + most_versions
    chosen += rng.sample(records, min(len(records), args.orders))
    chosen = list({json.dumps(o["order_id"]): o for o in chosen}.values())
    known = {json.dumps(o["order_id"]) for o in records}
    missing = []
    probe = (2**62) + rng.randrange(2**40)
    while len(missing) < 5:
        for candidate in (probe, "no-such-order-%d" % probe):
            if json.dumps(candidate) not in known:
                missing.append(candidate)
        probe += 1

    def one(want):
        return want, api.order(want["order_id"])

    for want, (got, why) in pool.map(one, chosen):
        report.check("orders")
        if got is None:
            report.diff("order %r: not found (%s); oracle: %s" % (want["order_id"], why, want))
            continue
        for field in P2_FIELDS:
            if got.get(field) != want[field]:
                report.diff("order %r: %s %r, oracle %r" %
                            (want["order_id"], field, got.get(field), want[field]))
        if got.get("order_id") != want["order_id"]:
            report.diff("order %r: order_id %r" % (want["order_id"], got.get("order_id")))
        try:
            if ts_ms(got.get("ts")) != want["ts"]:
                report.diff("order %r: ts %r, oracle %d ms" % (want["order_id"], got.get("ts"),
                                                               want["ts"]))
        except ValueError as e:
            report.diff("order %r: %s" % (want["order_id"], e))
    for order_id in missing:
        report.check("orders")
        got, _ = api.order(order_id)
        if got is not None:
            report.diff("order %r: the stream never had it, dayshard answers %s" % (order_id, got))
    return len(chosen) + len(missing)


def stream_customers(paths):
    """Every customer id the stream's decodable lines name (bad lines are the oracle's to judge:
    a customer only they name has an empty view, which is what we then expect)."""
    seen = set()
    for path in paths:
        with open(path, "rb") as f:
            for line in f:
                try:
                    c = json.loads(line).get("customer_id")
                except (ValueError, AttributeError):
                    continue
                if (isinstance(c, int) and not isinstance(c, bool) and 1 <= c < 2**63) or \
                        (isinstance(c, str) and 1 <= len(c.encode("utf-8")) <= 64 and '"' not in c):
                    seen.add(json.dumps(c))
    return seen


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--oracle", required=True)
    ap.add_argument("--data")
    ap.add_argument("--dayshard")
    ap.add_argument("--server")
    ap.add_argument("--stream", nargs="+", default=[])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--customers", type=int, default=300)
    ap.add_argument("--orders", type=int, default=300)
    ap.add_argument("--limit", type=int, default=37)
    ap.add_argument("--consistent", action="store_true")
    ap.add_argument("--max-diffs", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    if (args.data is None) == (args.server is None) or (args.data and not args.dayshard):
        ap.error("give --data DIR with --dayshard BIN, or --server URL")
    with open(args.oracle, encoding="utf-8") as f:
        oracle = json.load(f)
    api = Cli(args.dayshard, args.data, args.consistent) if args.data else \
        Http(args.server, args.consistent)
    label = args.label + ": " if args.label else ""
    report = Report(args.max_diffs, label)

    days = [day_number(d) for d in oracle["days"]]
    if args.stream:
        vanished_keys = stream_customers(args.stream) - \
            {json.dumps(c["customer_id"]) for c in oracle["customers"]}
        vanished = sorted((json.loads(k) for k in vanished_keys), key=json.dumps)
    else:
        vanished = []
    if not days:
        days = [day_number("2026-01-01")]
    first, last = min(days) - 1, max(days) + 1
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            statuses, same_model = check_days(api, oracle, report, first, last)
            customers, pages = check_customers(api, oracle, report, args, vanished, pool)
            orders = check_orders(api, oracle, report, args, pool) \
                if oracle["model"] == "orders" and same_model else None
    except Transport as e:
        print("ERROR %s%s" % (label, e))
        return 2
    print("%smodel %s: %d days (%s..%s), %d statuses, %d customers (%d pages; the stream has %d "
          "with no orders left), %s P2 records: %d checks, %d differences" %
          (label, oracle["model"], last - first + 1, day_text(first), day_text(last), statuses,
           customers, pages, len(vanished), "no" if orders is None else orders,
           sum(report.checked.values()), report.diffs))
    return 1 if report.diffs else 0


if __name__ == "__main__":
    sys.exit(main())
