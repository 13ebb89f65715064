"""Helpers of the by-customer index tests (run by Debian's /usr/bin/python3).

  gsi_lib.py truth CUSTOMER-JSON FILE
      the customer's orders in FILE (JSON lines) newest first: ts descending; among equal ts,
      order ids descending with every string id before every integer id. One
      "order_id ts_ms amount" line each (order_id as JSON, amount with 4 decimals).
  gsi_lib.py pages URL LIMIT [--full]
      follows "next" from URL?limit=LIMIT to the end and prints the same lines (with --full
      also the status and the day); checks page sizes, the lag field and that no page but the
      last is short.
"""
import datetime
import json
import sys
import urllib.error
import urllib.parse
import urllib.request


def ms(ts):
    if isinstance(ts, int):
        return ts
    t = datetime.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return round(t.timestamp() * 1000)


def truth(want_json, path):
    want = json.loads(want_json)
    rows = []
    for line in open(path):
        e = json.loads(line)
        c = e["customer_id"]
        if type(c) is type(want) and c == want:
            rows.append(e)

    def key(e):
        o = e["order_id"]
        # descending: strings (bytewise, a longer one before its own prefix), then integers
        return (-ms(e["ts"]), 0 if isinstance(o, str) else 1,
                [-b for b in o.encode()] + [1] if isinstance(o, str) else -o)

    rows.sort(key=key)
    for e in rows:
        print(json.dumps(e["order_id"], ensure_ascii=False), ms(e["ts"]),
              "%.4f" % e.get("amount", 0))


def pages(base, limit, full):
    cursor = None
    while True:
        url = base + "?limit=" + limit
        if cursor:
            url += "&cursor=" + urllib.parse.quote(cursor)
        try:
            doc = json.load(urllib.request.urlopen(url, timeout=30))
        except urllib.error.HTTPError as e:
            sys.exit("%s: HTTP %d: %s" % (url, e.code, e.read()[:300].decode(errors="replace")))
        assert isinstance(doc["gsi_lag_ms"], int), doc
        assert len(doc["orders"]) <= int(limit)
        for o in doc["orders"]:
            fields = [json.dumps(o["order_id"], ensure_ascii=False), str(ms(o["ts"])),
                      o["amount"]]
            if full:
                fields += [json.dumps(o["status"], ensure_ascii=False), o["day"]]
            print(" ".join(fields))
        cursor = doc["next"]
        if cursor is None:
            break
        assert len(doc["orders"]) == int(limit), "a short page before the end"


if __name__ == "__main__":
    if sys.argv[1] == "truth":
        truth(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "pages":
        pages(sys.argv[2], sys.argv[3], "--full" in sys.argv[4:])
    else:
        sys.exit("usage: gsi_lib.py truth CUSTOMER-JSON FILE | pages URL LIMIT [--full]")
