#!/usr/bin/python3
"""A fake heat server for developing and testing the console page without a node.

Serves the page's assets from the source tree (query/console/) and synthetic heat in the wire
format of /work spec (GET /v1/heat, /v1/heat/history, /v1/heat/stream): DAYS days of BASE shards
with a light load, and today's day hot, growing its shard count as its rate passes capacity,
so the page sees growths, over-capacity cells and a moving hottest key. With --serve it plays
`dayshard serve`: /v1/heat answers 404 and /v1/count?by=day answers day counts.

  console_fake.py --assets DIR [--listen 127.0.0.1:0] [--days 30] [--shards 4]
                  [--max-shards 256] [--serve] [--hot-rate 40000] [--hot-period 1]

Prints "http://HOST:PORT" as its first line, then serves until killed. Standard library only.
"""
import argparse
import datetime
import json
import os
import random
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

WINDOW_S = 300
CAPACITY = 1000


class Model:
    """Deterministic synthetic heat: a column per second, computed from the second alone."""

    def __init__(self, days, base, max_shards, hot_rate, hot_period):
        today = datetime.datetime.now(datetime.timezone.utc).date()
        self.days = [(today - datetime.timedelta(days=i)).isoformat() for i in range(days)][::-1]
        self.hot = self.days[-1]
        self.base = base
        self.max_shards = max_shards
        self.hot_rate = hot_rate
        self.hot_period = hot_period
        self.start = int(time.time()) - WINDOW_S
        self.lock = threading.Lock()
        self.shards = {d: base for d in self.days}
        self.growths = []
        self.columns = {}  # t -> {"t":..., "days":{...}}
        self.total = {d: 1000 * (i + 1) for i, d in enumerate(self.days)}

    def second(self):
        return int(time.time()) - 1

    def _column(self, t):
        rnd = random.Random(t)
        days = {}
        for i, d in enumerate(self.days):
            s = self.shards[d]
            if d == self.hot:
                # the hot day ramps up over a minute, then breathes
                rate = self.hot_rate * min(1.0, (t - self.start) / 60.0) * (0.8 + 0.2 * rnd.random())
                row = [int(rate / s * (0.7 + 0.6 * rnd.random())) for _ in range(s)]
                hot = (t // self.hot_period) % s  # a moving hot shard
                row[hot] = int(row[hot] * 1.8)
            elif rnd.random() < 0.5:
                row = [int(rnd.random() * 40 * (1 + i % 3)) for _ in range(s)]
            else:
                continue
            days[d] = row
            self.total[d] += sum(row)
        return {"t": t, "days": days}

    def _grow(self, t, col):
        row = col["days"].get(self.hot)
        if not row:
            return
        s = self.shards[self.hot]
        total = sum(row)
        if total > s * CAPACITY and s < self.max_shards:
            to = min(self.max_shards, s * 2)
            at = datetime.datetime.fromtimestamp(t + 0.12, datetime.timezone.utc)
            self.growths.append({"t": t, "day": self.hot, "from": s, "to": to,
                                 "at": at.strftime("%Y-%m-%dT%H:%M:%S.120Z"),
                                 "reason": "%d events/s over 5 s > %d shards x %d/s"
                                           % (total, s, CAPACITY)})
            self.shards[self.hot] = to

    def advance(self):
        """Computes every second up to now, in order (growth depends on the past)."""
        with self.lock:
            now = self.second()
            t = max(self.columns) + 1 if self.columns else self.start
            while t <= now:
                col = self._column(t)
                self.columns[t] = col
                self._grow(t, col)
                t += 1
            for old in [k for k in self.columns if k <= now - WINDOW_S - 5]:
                del self.columns[old]
            return now

    def history(self, seconds, after=None):
        now = self.advance()
        with self.lock:
            lo = now - seconds if after is None else max(after, now - seconds)
            cols = [self.columns[t] for t in range(lo + 1, now + 1) if t in self.columns]
            growths = [g for g in self.growths if lo < g["t"] <= now]
        return {"version": 1, "second": now, "seconds": seconds,
                "shard_capacity_eps": CAPACITY, "max_shards": self.max_shards,
                "columns": cols, "growths": growths}

    def heat(self, top):
        now = self.advance()
        with self.lock:
            col = self.columns.get(now, {"days": {}})
            rows = []
            for d, row in col["days"].items():
                for k, v in enumerate(row):
                    rows.append((v, d, k))
            rows.sort(reverse=True)
            total = sum(r[0] for r in rows) or 1
            parts = [{"key": "DAY#%s#%d" % (d, k), "day": d, "shard": k,
                      "day_shards": self.shards[d], "rate_now": v, "rate_avg": v,
                      "rate_peak": v, "events": v, "share": round(v / total, 4),
                      "over_capacity_seconds": 0, "would_throttle_events": 0}
                     for v, d, k in rows[:top]]
            days = [{"day": d, "shards": self.shards[d], "rate_now": sum(col["days"].get(d, [])),
                     "rate_avg": 0, "rate_peak": 0, "events": 0, "share": 0}
                    for d in self.days[::-1][:top]]
            growths = [{k: g[k] for k in ("day", "from", "to", "at", "reason")}
                       for g in self.growths[-8:]]
            counts = [{"day": d, "count": self.total[d]} for d in self.days[::-1][:31]]
        rnd = random.Random(now)
        customers = [{"customer_id": 42 if i == 0 else "cust-%d" % (1000 + i),
                      "rate_eps": round(900.0 / (i + 1), 1), "error_eps": round(3.0 * i, 1),
                      "share": round(0.3 / (i + 1), 4)} for i in range(min(top, 8))]
        kafka = [{"partition": p, "rate_now": int(total / 4 * (0.9 + 0.2 * rnd.random())),
                  "rate_peak": 0, "events": 0, "lag": int(rnd.random() * 500)} for p in range(4)]
        advice = []
        if self.shards[self.hot] >= self.max_shards:
            advice.append({"case": "day_at_max_shards", "subject": self.hot,
                           "evidence": "%s has %d shards, the maximum, and still runs over "
                                       "capacity" % (self.hot, self.max_shards),
                           "remedy": "raise --max-shards or --shard-capacity"})
        heat = {"second": datetime.datetime.fromtimestamp(now, datetime.timezone.utc)
                .strftime("%Y-%m-%dT%H:%M:%SZ"), "window_s": 10,
                "shard_capacity_eps": CAPACITY, "max_shards": self.max_shards,
                "base_shards": self.base, "adaptive": True, "growth_failed": False,
                "growths_total": len(self.growths), "events": total, "rate_now": total,
                "partitions": parts, "days": days, "kafka_partitions": kafka,
                "customers": customers, "growths": growths, "advice": advice}
        return heat, counts


def make_handler(model, assets, serve_mode, stats):
    types = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
             ".css": "text/css; charset=utf-8"}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            pass

        def send(self, status, body, ctype="application/json"):
            data = body.encode() if isinstance(body, str) else body
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            url = urlparse(self.path)
            q = parse_qs(url.query)
            path = url.path
            if path in ("/", "/console.js", "/console.css"):
                name = "console.html" if path == "/" else path[1:]
                with open(os.path.join(assets, name), "rb") as f:
                    return self.send(200, f.read(), types[os.path.splitext(name)[1]])
            if path == "/v1/count" and serve_mode:
                return self.count(q)
            if path.startswith("/v1/heat") and serve_mode:
                return self.send(404, json.dumps({"error": "no such path '%s'" % path}))
            if path == "/v1/heat":
                heat, _ = model.heat(int(q.get("top", ["10"])[0]))
                return self.send(200, json.dumps(heat))
            if path == "/v1/heat/history":
                return self.send(200, json.dumps(model.history(int(q.get("seconds", ["300"])[0]))))
            if path == "/v1/heat/stream":
                return self.stream()
            return self.send(404, json.dumps({"error": "no such path"}))

        def count(self, q):
            day, to = q["day"][0], q.get("to", q["day"])[0]
            d0 = datetime.date.fromisoformat(day)
            d1 = datetime.date.fromisoformat(to)
            if (d1 - d0).days + 1 > 366:
                return self.send(400, json.dumps({"error": "range too long"}))
            groups = [{"key": d, "count": model.total[d], "amount_sum": "%d.0000" % model.total[d]}
                      for d in model.days if day <= d <= to]
            total = sum(g["count"] for g in groups)
            return self.send(200, json.dumps({"count": total, "amount_sum": "0", "partitions": 1,
                                              "groups": groups}))

        def stream(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            stats["streams"] += 1
            last = None
            try:
                while True:
                    second = model.second()
                    if second != last:
                        heat, counts = model.heat(20)
                        hist = model.history(WINDOW_S, after=last)
                        frame = {"heat": heat, "history": hist, "counts": counts}
                        self.wfile.write(b"event: heat\ndata: " + json.dumps(frame).encode()
                                         + b"\n\n")
                        self.wfile.flush()
                        last = second
                    time.sleep(0.1)
            except (BrokenPipeError, ConnectionResetError):
                return

    return Handler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--assets", required=True)
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--max-shards", type=int, default=256)
    ap.add_argument("--hot-rate", type=float, default=40000)
    ap.add_argument("--hot-period", type=int, default=1, help="seconds a hot shard stays hot")
    ap.add_argument("--serve", action="store_true")
    args = ap.parse_args()
    model = Model(args.days, args.shards, args.max_shards, args.hot_rate, args.hot_period)
    model.advance()
    host, port = args.listen.rsplit(":", 1)
    stats = {"streams": 0}
    server = ThreadingHTTPServer((host, int(port)),
                                 make_handler(model, args.assets, args.serve, stats))
    server.daemon_threads = True
    print("http://%s:%d" % server.server_address[:2], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
