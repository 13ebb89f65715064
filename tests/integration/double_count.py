"""The producer and the client of test_no_double_count.sh (run by Debian's /usr/bin/python3, whose
python3-kafka is another Kafka client than the node's librdkafka).

  double_count.py MODEL BOOTSTRAP TOPIC ROUTER NODES RATE SEED STOP SETTLE_S REPORT

MODEL is the nodes' data model, orders or events: what a count counts (distinct orders, or
every message).

Producer (a thread): about RATE messages a second to TOPIC, keyed by the order id, until the
file STOP exists: new orders (integer ids 1, 2, ..., each once; ts on one of 28 days) and, about
30% of the lines, status updates of one of the last 2000 orders sent, with that order's ts
(pending -> paid -> shipped: an update keeps its order's day). Each send's time is taken before
it is handed to the client library, so "orders (or messages) sent by time t" is an upper bound
of what any node can hold at t. A send that fails is sent again (kafka_send.py; the orders model
takes a repeated line as unchanged, the events model counts what the topic holds).

Client (a thread, one request at a time): the unfiltered total (every day of the stream)
through ROUTER, about 20 times a second, every 4th with consistent=true; and every 10th round
one of NODES (comma-separated URLs) directly. Each answer is kept with its send and receive
times.

Once STOP exists and every message is acknowledged, the client asks ROUTER consistent=true until
it answers the truth (at most SETTLE_S seconds): the distinct orders sent (orders model) or the
messages the topic holds (events model: each counted exactly once). Then the checks, for every
answer through the router that is complete (200, not partial):
  - count <= the distinct orders (events: send attempts) begun before the answer arrived;
  - count >= every complete answer received before its request was sent (consistent=true or
    not: a group's answers never go back);
and for every node's own 200: count <= what was sent before it arrived. The final consistent
answer must equal the truth, and every message must have been acknowledged. REPORT gets one
JSON line of figures (answers by kind, the final counts) and the first violations; exit 0 when
every check held, 1 otherwise.
"""
import bisect
import http.client
import json
import os
import random
import sys
import threading
import time
import urllib.parse

from kafka import KafkaConsumer, TopicPartition
from kafka_send import Resender

DAYS = 28
PATH = "/v1/count?day=2026-01-01&to=2026-01-28"
CLIENT_PAUSE_S = 0.05
FINAL_WAIT_S = 60


def now_ms():
    return time.time() * 1000.0


class Producer(threading.Thread):
    def __init__(self, boot, topic, rate, seed, stop_path):
        super().__init__(daemon=True)
        self.out = Resender(boot, topic, 10, times=True)
        self.rate, self.stop_path = rate, stop_path
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.order_sent_ms = []  # send time of order i + 1, increasing
        self.orders = []  # (ts text, status index) of order i + 1
        self.messages = self.updates = 0
        self.unacknowledged = None  # after run: what was never acknowledged

    def send(self, order, event):
        self.out.send(str(order).encode(), json.dumps(event, separators=(",", ":")).encode())

    def sent_before(self, t_ms, model):
        """Orders model: distinct orders whose first send began before t_ms. Events model:
        send attempts (each a message the topic may hold) begun before t_ms."""
        if model == "events":
            with self.out.lock:
                return bisect.bisect_left(self.out.attempt_ms, t_ms)
        with self.lock:
            return bisect.bisect_left(self.order_sent_ms, t_ms)

    def one(self):
        statuses = ("pending", "paid", "shipped")
        i = -1
        if self.orders and self.rng.random() < 0.3:
            i = len(self.orders) - 1 - self.rng.randrange(min(2000, len(self.orders)))
        if i >= 0 and self.orders[i][1] < 2:
            ts, step = self.orders[i]
            self.orders[i] = (ts, step + 1)
            self.updates += 1
            self.send(i + 1, {"order_id": i + 1, "customer_id": 1 + (i * 7919) % 5000, "ts": ts,
                              "status": statuses[step + 1], "amount": 10 + i % 90})
            return
        order = len(self.orders) + 1
        day = 1 + self.rng.randrange(DAYS)
        ts = "2026-01-%02dT%02d:%02d:%02d.%03dZ" % (day, self.rng.randrange(24),
                                                    self.rng.randrange(60),
                                                    self.rng.randrange(60), order % 1000)
        self.orders.append((ts, 0))
        with self.lock:
            self.order_sent_ms.append(now_ms())
        self.send(order, {"order_id": order, "customer_id": 1 + ((order - 1) * 7919) % 5000,
                          "ts": ts, "status": "pending", "amount": 10 + (order - 1) % 90})

    def run(self):
        start = time.monotonic()
        while not os.path.exists(self.stop_path):
            self.one()
            self.messages += 1
            if self.messages % 32 == 0:
                self.out.resend_failed()
                ahead = self.messages / self.rate - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
        self.unacknowledged = self.out.drain(FINAL_WAIT_S)


def topic_messages(boot, topic):
    """The messages TOPIC holds (the sum of its partitions' end offsets: the mock's offsets
    start at 0 and have no gaps), or None when the broker does not say."""
    try:
        c = KafkaConsumer(bootstrap_servers=boot, request_timeout_ms=20000)
        parts = [TopicPartition(topic, p) for p in c.partitions_for_topic(topic)]
        low, high = c.beginning_offsets(parts), c.end_offsets(parts)
        c.close()
    except Exception as e:  # noqa: BLE001: reported as no figure, the check then fails
        print("topic_messages: %s" % e, file=sys.stderr)
        return None
    return sum(high[p] - low[p] for p in parts) if all(low[p] == 0 for p in parts) else None


class Client:
    def __init__(self, base):
        u = urllib.parse.urlparse(base)
        self.host, self.port = u.hostname, u.port
        self.conn = None

    def get(self, path, timeout_s=10):
        """(status, document or None); status 0 when there was no answer."""
        for _ in range(2):  # a kept-alive connection the server closed: once more
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout_s)
                self.conn.request("GET", path)
                r = self.conn.getresponse()
                body = r.read()
                try:
                    doc = json.loads(body)
                except ValueError:
                    doc = None
                return r.status, doc
            except (OSError, http.client.HTTPException):
                if self.conn is not None:
                    self.conn.close()
                self.conn = None
        return 0, None


def main():
    if len(sys.argv) != 11:
        sys.exit("usage: double_count.py MODEL BOOTSTRAP TOPIC ROUTER NODES RATE SEED STOP "
                 "SETTLE_S REPORT")
    model, boot, topic, router, nodes, rate, seed, stop_path, settle_s, report = sys.argv[1:]
    if model not in ("orders", "events"):
        sys.exit("double_count.py: MODEL must be orders or events, got %s" % model)
    producer = Producer(boot, topic, float(rate), int(seed), stop_path)
    producer.start()
    client = Client(router)
    node_urls = nodes.split(",")
    node_clients = [Client(u) for u in node_urls]
    answers = []  # (t_send, t_recv, status, count, consistent, partial)
    node_answers = []  # (url index, t_recv, status, count)
    missing = {}  # what the router's 503s named: "node nK", "partition P ...": how often
    # The longest stretch (ms) of 503s naming a partition held twice / behind.
    spans, spans_open = {}, {}
    rounds = 0
    while producer.is_alive():
        rounds += 1
        consistent = rounds % 4 == 0
        path = PATH + ("&consistent=true&timeout_ms=2000" if consistent else "")
        t_send = now_ms()
        status, doc = client.get(path)
        t_recv = now_ms()
        count = doc.get("count") if status == 200 and doc else None
        partial = bool(doc.get("partial")) if doc else False
        answers.append((t_send, t_recv, status, count, consistent, partial))
        kinds = set()
        for m in (doc.get("missing") or []) if status == 503 and isinstance(doc, dict) else []:
            why = (("node n%d" % (node_urls.index(m) + 1) if m in node_urls else "node " + m)
                   if m.startswith("http") else m.split(" (")[0])
            missing[why] = missing.get(why, 0) + 1
            kinds.add("held twice" if "two members" in why else "behind" if "behind" in why
                      else "other")
        for kind in ("held twice", "behind"):
            if kind in kinds:
                start = spans_open.setdefault(kind, t_recv)
                spans[kind] = max(spans.get(kind, 0), t_recv - start)
            else:
                spans_open.pop(kind, None)
        if rounds % 10 == 0:
            k = (rounds // 10) % len(node_clients)
            status, doc = node_clients[k].get(PATH, timeout_s=2)
            node_answers.append((k, now_ms(), status,
                                 doc.get("count") if status == 200 and doc else None))
        time.sleep(CLIENT_PAUSE_S)
    # The truth: the distinct orders sent; or every message the topic holds (a send that
    # failed after the broker had appended it is there twice, and counted twice rightly).
    topic_total = topic_messages(boot, topic)
    truth = len(producer.orders) if model == "orders" else topic_total
    final = None
    deadline = time.monotonic() + float(settle_s)
    while time.monotonic() < deadline:
        t_send = now_ms()
        status, doc = client.get(PATH + "&consistent=true&timeout_ms=5000", timeout_s=20)
        t_recv = now_ms()
        count = doc.get("count") if status == 200 and doc else None
        partial = bool(doc.get("partial")) if doc else False
        answers.append((t_send, t_recv, status, count, True, partial))
        if status == 200 and not partial:
            final = count
            if count == truth:
                break
        time.sleep(0.5)

    violations = []
    by_check = {}  # violations by check: "above sent", "below earlier", "final", ...

    def violation(check, text):
        by_check[check] = by_check.get(check, 0) + 1
        violations.append(text)

    best = []  # (t_recv, count) of complete answers, in order of arrival
    complete = consistent_complete = 0
    for t_send, t_recv, status, count, consistent, partial in sorted(answers,
                                                                     key=lambda a: a[1]):
        if status != 200 or partial:
            continue
        complete += 1
        consistent_complete += 1 if consistent else 0
        sent = producer.sent_before(t_recv, model)
        if count > sent:
            violation("above sent", "router: %d > %d %s sent by then (at %+.0f ms)"
                      % (count, sent, model, t_recv - answers[0][0]))
        # Only answers that arrived before this request left bind it.
        floor = max((c for r, c in best if r < t_send), default=0)
        if count < floor:
            violation("below earlier",
                      "router: %d < %d, an earlier complete answer (at %+.0f ms%s)"
                      % (count, floor, t_recv - answers[0][0],
                         ", consistent" if consistent else ""))
        best.append((t_recv, count))
    node_ok = 0
    for k, t_recv, status, count in node_answers:
        if status != 200:
            continue
        node_ok += 1
        sent = producer.sent_before(t_recv, model)
        if count > sent:
            violation("node above sent",
                      "node %d: %d > %d %s sent by then" % (k, count, sent, model))
    if final is None or final != truth:
        violation("final", "final consistent answer %s, want %s (the %s)"
                  % (final, truth, "distinct orders sent" if model == "orders"
                     else "messages the topic holds"))
    if producer.unacknowledged != 0:
        violation("unacknowledged", "%s messages never acknowledged" % producer.unacknowledged)
    codes = {}
    for a in answers:
        codes[str(a[2])] = codes.get(str(a[2]), 0) + 1
    out = {"model": model, "orders": len(producer.orders), "messages": producer.messages,
           "updates": producer.updates, "acked": producer.out.acked,
           "retried": producer.out.retried, "topic": topic_total, "truth": truth,
           "answers": len(answers), "complete": complete,
           "consistent_complete": consistent_complete,
           "unavailable": sum(1 for a in answers if a[2] == 503 or a[5]),
           "statuses": codes, "missing": missing,
           "longest_ms": {k: round(v) for k, v in spans.items()},
           "node_answers": len(node_answers), "node_answers_ok": node_ok, "final": final,
           "violations": len(violations), "violations_by_check": by_check,
           "first_violations": violations[:8]}
    with open(report, "w") as f:
        f.write(json.dumps(out) + "\n")
    sys.exit(0 if not violations else 1)


if __name__ == "__main__":
    main()
