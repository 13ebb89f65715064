#!/usr/bin/python3
"""An independent oracle for order streams: what dayshard must answer.

Reads JSON lines (one event each, docs/EVENTS.md) from the files given, in that order, as
their arrival order, and prints the answers as one JSON document, for --model orders (the
default) or --model events:

  days       per UTC day: count, amount_sum (exact, 4 places), by_status counts
  customers  per customer: the customer view, newest first (see "Customer views")
  orders     per order: the P2 record (see "P2")
  totals     lines, bad lines by reason, and in the orders model the fate of every event

It shares no code with dayshard (Debian's python3 and its standard library only), so a bug in
the C code cannot hide in the oracle too.

Orders model rules (docs/EVENTS.md)
---------------------------------------------------
An event is a version of its order (order ids 5 and "5" are two orders: an integer and a
string id never compare equal). Each order keeps its current content (customer, ts, status,
amount, items) and `floor`, the greatest version any applied event carried (none until one
did). An arriving event of a known order is, in this order of tests:

  1. stale, when it carries a version below the floor, or equal to the floor with different
     content (two different versions under one number: the first to arrive stays). Ignored,
     counted (`stale`).
  2. unchanged, when its content equals the current content and it carries no version or the
     floor's version: a producer's retry. A no-op, counted (`unchanged`).
  3. applied otherwise: it replaces the order whole (day, status, amount, customer, items);
     the order leaves its old day and customer. A version it carries becomes the floor (it is
     above it by 1. and 2.); without a version the floor stays.

Mixed streams, decided here (the node follows this): an event WITHOUT a version that arrives
after versioned ones is newer by arrival and applies (rule 3), and the floor stays, so a late
versioned event still needs a version above the greatest seen. Why: the rule is "greatest
version, else arrival order", and arrival order per order is total (producers key by order_id,
so one order stays in one Kafka partition); an event without a version claims no place among
the versions, and arrival is the only order it has. The alternative, ignoring unversioned
events once an order has a version, would freeze an order for good whenever one producer of
it (a cancellation service, say) does not set versions, and no metric would show why. Keeping
the floor means a versioned event delayed behind the unversioned one (a retry of version 5
arriving after it) does not undo it. A versioned event after unversioned ones applies (its
version is above the absent floor) and sets the floor.

A version equal to the floor with the same content is an unchanged repeat (rule 2), and a
higher version with the same content applies (rule 3: only the version moves, no count
changes). Bad events (not JSON, a missing or malformed required field, an out-of-range value,
bad version or items) are skipped and counted by reason; they never touch an order.

P2 (`orders`): per order its current version: order_id, customer_id, ts (epoch ms), day,
status, amount, version (the floor, or null), items (null when the current version has no
`items` field, else a list of {product, quantity}), versions_seen (the events that applied:
the first one and every rule-3 one), stale and unchanged (its events under rules 1 and 2).
In the events model a P2 record is the order's last event, with versions_seen counting every
event of the order (provisional: the events model's P2 is the lead's to define).

Retention (--retention-days N, as dayshard's): stream time is the greatest day of the valid
events so far; the floor is stream time - N + 1 (it only rises). An event whose day is below
the floor when it arrives is bad (reason too_late) and touches nothing; in the orders model an
order whose current version lies below the floor when an event of it arrives is gone, and the
event makes a new order. At the end everything below the floor is gone: days, views, P2.

Customer views: a customer's orders newest first: ts descending, then order id descending,
with string order ids before integer ones at equal ts (strings compared as UTF-8 bytes), as
index/key.c orders its tail keys. Orders model: each order once, with its current version,
under its current customer. Events model: one entry per distinct (ts, order id) of the
customer, the last event to arrive with that key (the by-customer index keeps one entry per
key, the newest applied).

Usage: orders_oracle.py [--model orders|events] [--out FILE] FILE [FILE...]
"""

import argparse
import decimal
import json
import re
import sys

ID_MAX = 2**63 - 1
ID_BYTES_MAX = 64
STATUS_BYTES_MAX = 32
TS_MS_MIN = 0
TS_MS_MAX = 253402300799999
DAY_MS = 86400000
ITEMS_COUNT_MAX = 100
ITEMS_JSON_BYTES_MAX = 8192
PRODUCT_BYTES_MAX = 64
QUANTITY_MAX = 2**31 - 1
EVENT_BYTES_MAX = 64 * 1024
AMOUNT_UNITS_MAX = 2**63 - 1
FOUR_PLACES = decimal.Decimal("0.0001")

TS_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|z|[+-]\d{2}:\d{2})$"
)
DATE_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")

KNOWN = ("order_id", "customer_id", "ts", "order_date", "status", "amount", "version", "items")


class Bad(Exception):
    """A bad event; args[0] is the reason, named as dayshard names it where it can be."""


def days_from_civil(y, m, d):
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(z):
    z += 719468
    era = (z if z >= 0 else z - 146096) // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return y + (m <= 2), m, d


def day_text(day):
    return "%04d-%02d-%02d" % civil_from_days(day)


def date_valid(y, m, d):
    if not 1 <= m <= 12 or d < 1:
        return False
    leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    days = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][m - 1]
    return d <= days


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def parse_id(v, what):
    """An id as a hashable, ordered key: (0, int) or (1, bytes)."""
    if is_int(v):
        if not 1 <= v <= ID_MAX:
            raise Bad(what + "_range")
        return (0, v)
    if isinstance(v, str):
        b = v.encode("utf-8")
        if len(b) == 0:
            raise Bad("bad_" + what)
        if len(b) > ID_BYTES_MAX:
            raise Bad("string_too_long")
        return (1, b)
    raise Bad("bad_" + what)


def id_json(key):
    return key[1] if key[0] == 0 else key[1].decode("utf-8")


def parse_ts(v):
    if is_int(v):
        if not TS_MS_MIN <= v <= TS_MS_MAX:
            raise Bad("ts_range")
        return v
    if not isinstance(v, str):
        raise Bad("bad_ts")
    m = TS_RE.match(v)
    if not m:
        raise Bad("bad_ts")
    y, mo, d, hh, mi, ss = (int(m.group(i)) for i in range(1, 7))
    if not date_valid(y, mo, d) or hh > 23 or mi > 59 or ss > 59:
        raise Bad("bad_ts")
    frac = m.group(7) or ""
    ms = int((frac + "000")[:3])  # truncated to milliseconds, as the decoder does
    zone = m.group(8)
    zone_min = 0
    if zone not in ("Z", "z"):
        zh, zm = int(zone[1:3]), int(zone[4:6])
        if zh > 23 or zm > 59:
            raise Bad("bad_ts")
        zone_min = (zh * 60 + zm) * (-1 if zone[0] == "-" else 1)
    t = days_from_civil(y, mo, d) * DAY_MS + hh * 3600000 + mi * 60000 + ss * 1000 + ms
    t -= zone_min * 60000
    if not TS_MS_MIN <= t <= TS_MS_MAX:
        raise Bad("ts_range")
    return t


def parse_order_date(v):
    m = DATE_RE.match(v) if isinstance(v, str) else None
    if not m:
        raise Bad("bad_order_date")
    y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if not date_valid(y, mo, d):
        raise Bad("bad_order_date")
    return days_from_civil(y, mo, d) * DAY_MS


def parse_amount(v):
    """Exact amount units (1/10000)."""
    if isinstance(v, bool) or not isinstance(v, (int, decimal.Decimal)):
        raise Bad("bad_amount")
    units = decimal.Decimal(v) * 10000
    if units != units.to_integral_value():
        raise Bad("amount_precision")
    units = int(units)
    if abs(units) > AMOUNT_UNITS_MAX:
        raise Bad("amount_range")
    return units


def parse_items(v):
    """A tuple of (product, quantity), or Bad."""
    if not isinstance(v, list):
        raise Bad("bad_items")
    if len(v) > ITEMS_COUNT_MAX:
        raise Bad("items_too_large")
    # The 8 KiB rule is on the JSON text of the value; the compact re-encoding is what the
    # generator writes and a lower bound of any other spelling.
    text = json.dumps(v, separators=(",", ":"), ensure_ascii=False, default=str)
    if len(text.encode("utf-8")) > ITEMS_JSON_BYTES_MAX:
        raise Bad("items_too_large")
    items = []
    for item in v:
        if not isinstance(item, dict) or "product" not in item or "quantity" not in item:
            raise Bad("bad_items")
        product, quantity = item["product"], item["quantity"]
        if not isinstance(product, str) or not 1 <= len(product.encode("utf-8")) <= PRODUCT_BYTES_MAX:
            raise Bad("bad_items")
        if "\0" in product or not is_int(quantity) or not 1 <= quantity <= QUANTITY_MAX:
            raise Bad("bad_items")
        items.append((product, quantity))
    return tuple(items)


def no_duplicate_known(pairs):
    seen = set()
    for k, _ in pairs:
        if k in KNOWN and k in seen:
            raise Bad("duplicate_field")
        seen.add(k)
    return dict(pairs)


def decode(line):
    """One line into an event dict, or Bad."""
    if len(line) > EVENT_BYTES_MAX:
        raise Bad("too_large")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise Bad("bad_utf8")
    try:
        obj = json.loads(text, parse_float=decimal.Decimal, object_pairs_hook=no_duplicate_known)
    except ValueError:
        raise Bad("not_json")
    if not isinstance(obj, dict):
        raise Bad("not_object")
    if "order_id" not in obj:
        raise Bad("missing_order_id")
    order_id = parse_id(obj["order_id"], "order_id")
    if "customer_id" not in obj:
        raise Bad("missing_customer_id")
    customer_id = parse_id(obj["customer_id"], "customer_id")
    if "ts" in obj:
        ts = parse_ts(obj["ts"])
        if "order_date" in obj:
            parse_order_date(obj["order_date"])
    elif "order_date" in obj:
        ts = parse_order_date(obj["order_date"])
    else:
        raise Bad("missing_ts")
    status = obj.get("status", "")
    if not isinstance(status, str):
        raise Bad("bad_status")
    if len(status.encode("utf-8")) > STATUS_BYTES_MAX:
        raise Bad("string_too_long")
    amount = parse_amount(obj["amount"]) if "amount" in obj else 0
    version = None
    if "version" in obj:
        version = obj["version"]
        if not is_int(version) or not 0 <= version <= ID_MAX:
            raise Bad("bad_version")
    items = parse_items(obj["items"]) if "items" in obj else None
    return {
        "order_id": order_id,
        "customer_id": customer_id,
        "ts": ts,
        "status": status,
        "amount": amount,
        "version": version,
        "items": items,
    }


def content(e):
    return (e["customer_id"], e["ts"], e["status"], e["amount"], e["items"])


def amount_text(units):
    return str((decimal.Decimal(units) / 10000).quantize(FOUR_PLACES))


class Orders:
    """The orders model: one current version per order."""

    def __init__(self):
        self.orders = {}
        self.fate = {"created": 0, "applied": 0, "stale": 0, "unchanged": 0}

    def add(self, e):
        o = self.orders.get(e["order_id"])
        if o is None:
            o = dict(e, floor=e["version"], versions_seen=1, stale=0, unchanged=0, events=1)
            self.orders[e["order_id"]] = o
            self.fate["created"] += 1
            return
        o["events"] += 1
        v, floor = e["version"], o["floor"]
        same = content(e) == content(o)
        if v is not None and floor is not None and (v < floor or (v == floor and not same)):
            o["stale"] += 1
            self.fate["stale"] += 1
        elif same and (v is None or v == floor):
            o["unchanged"] += 1
            self.fate["unchanged"] += 1
        else:
            for k in ("customer_id", "ts", "status", "amount", "items"):
                o[k] = e[k]
            if v is not None:
                o["floor"] = v
            o["versions_seen"] += 1
            self.fate["applied"] += 1

    def current(self):
        return self.orders.values()


class Events:
    """The events model: every event counts; P2 is the last event of an order."""

    def __init__(self):
        self.events = []
        self.last = {}

    def add(self, e):
        self.events.append(e)
        o = self.last.get(e["order_id"])
        seen = o["versions_seen"] + 1 if o else 1
        self.last[e["order_id"]] = dict(e, floor=e["version"], versions_seen=seen, stale=0,
                                        unchanged=0, events=seen)

    def current(self):
        return self.events


def retention_drop(source, model, floor):
    """Retention: what is below the final floor is gone (days, views, P2)."""
    if model == "orders":
        source.orders = {k: o for k, o in source.orders.items() if o["ts"] // DAY_MS >= floor}
    else:
        source.events = [e for e in source.events if e["ts"] // DAY_MS >= floor]
        source.last = {k: o for k, o in source.last.items() if o["ts"] // DAY_MS >= floor}


def answers(model, source, lines, bad, bad_by_reason):
    days = {}
    customers = {}
    for o in source.current():
        day = days.setdefault(o["ts"] // DAY_MS, {"count": 0, "amount": 0, "by_status": {}})
        day["count"] += 1
        day["amount"] += o["amount"]
        day["by_status"][o["status"]] = day["by_status"].get(o["status"], 0) + 1
        entries = customers.setdefault(o["customer_id"], {})
        entries[(o["ts"], o["order_id"])] = o  # events model: the last with a key stays
    out_days = {}
    for day in sorted(days):
        d = days[day]
        out_days[day_text(day)] = {
            "count": d["count"],
            "amount_sum": amount_text(d["amount"]),
            "by_status": dict(sorted(d["by_status"].items())),
        }
    out_customers = []
    for cid in sorted(customers):
        view = sorted(customers[cid].values(), key=view_key_desc)
        out_customers.append({
            "customer_id": id_json(cid),
            "orders": [{
                "order_id": id_json(o["order_id"]),
                "ts": o["ts"],
                "status": o["status"],
                "amount": amount_text(o["amount"]),
            } for o in view],
        })
    p2 = source.orders if model == "orders" else source.last
    out_orders = []
    for oid in sorted(p2):
        o = p2[oid]
        out_orders.append({
            "order_id": id_json(oid),
            "customer_id": id_json(o["customer_id"]),
            "ts": o["ts"],
            "day": day_text(o["ts"] // DAY_MS),
            "status": o["status"],
            "amount": amount_text(o["amount"]),
            "version": o["floor"],
            "items": None if o["items"] is None else
            [{"product": p, "quantity": q} for p, q in o["items"]],
            "versions_seen": o["versions_seen"],
            "stale": o["stale"],
            "unchanged": o["unchanged"],
        })
    totals = {"lines": lines, "events": lines - bad, "bad": bad,
              "bad_by_reason": dict(sorted(bad_by_reason.items())), "orders": len(p2)}
    if model == "orders":
        totals.update(source.fate)
    return {"model": model, "totals": totals, "days": out_days, "customers": out_customers,
            "orders": out_orders}


def view_key_desc(o):
    """Sort key giving newest first: ts descending; at equal ts string ids (kind 1) before
    integers (kind 0), each descending (bytes for strings)."""
    kind, value = o["order_id"]
    if kind == 0:
        return (-o["ts"], 1, -value)
    return (-o["ts"], 0, Desc(value))


class Desc:
    """Orders bytes descending."""

    __slots__ = ("b",)

    def __init__(self, b):
        self.b = b

    def __lt__(self, other):
        return self.b > other.b

    def __eq__(self, other):
        return self.b == other.b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=("orders", "events"), default="orders")
    ap.add_argument("--out", help="write the answers here instead of standard output")
    ap.add_argument("--retention-days", type=int, default=0,
                    help="as dayshard's: see Retention in this docstring")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    source = Orders() if args.model == "orders" else Events()
    keep = args.retention_days
    stream_day = None
    floor = 0
    lines = bad = 0
    bad_by_reason = {}
    for path in args.files:
        with open(path, "rb") as f:
            for raw in f:
                raw = raw.rstrip(b"\n").rstrip(b"\r")
                if raw.strip() == b"":
                    continue  # blank lines are skipped, not events (dayshard ingest)
                lines += 1
                try:
                    e = decode(raw)
                except Bad as why:
                    bad += 1
                    bad_by_reason[why.args[0]] = bad_by_reason.get(why.args[0], 0) + 1
                    continue
                day = e["ts"] // DAY_MS
                if keep > 0 and day < floor:
                    bad += 1
                    bad_by_reason["too_late"] = bad_by_reason.get("too_late", 0) + 1
                    continue
                if keep > 0 and args.model == "orders":
                    o = source.orders.get(e["order_id"])
                    if o is not None and o["ts"] // DAY_MS < floor:
                        del source.orders[e["order_id"]]  # its day went: a new order
                source.add(e)
                if keep > 0 and (stream_day is None or day > stream_day):
                    stream_day = day
                    floor = max(floor, stream_day - keep + 1)
    if keep > 0:
        retention_drop(source, args.model, floor)
    doc = answers(args.model, source, lines, bad, bad_by_reason)
    text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False) + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
