"""An independent producer for the kill -9 tests (run by Debian's /usr/bin/python3, whose
python3-kafka is another Kafka client than the node's librdkafka).

  py_producer.py BOOTSTRAP TOPIC EVENTS RATE ACKS STOP [BURST]

Sends the JSON lines of EVENTS to TOPIC at about RATE a second, keyed by the order id (its JSON
text: 17 or "b-3"), with acks=all, until the file ends or the file STOP exists. Every
acknowledged message is appended to ACKS as "partition offset order_id" the moment its ack
arrives. A send that fails (a broker error, a timeout) is sent again, however many times it
takes: the topic may then hold it twice (when the failed attempt had in fact been appended),
which is why the tests take the topic's contents, not this file, as the ground truth, and check
that every ack is in it. When the file BURST exists (optional), its one line "CUSTOMER N" asks
for N extra orders of that customer sent at once (order ids "burst-K-I", string ids), on top of
the rate; the file is removed when they are queued.

At the end it waits (up to 120 s) until every message is acknowledged and prints one JSON line:
{"sent":..,"acked":..,"retried":..,"burst":..,"ran_out":true|false}; exit 0 when everything
was acknowledged, 1 otherwise.
"""
import json
import os
import re
import sys
import threading
import time

from kafka import KafkaProducer

ORDER_ID = re.compile(rb'"order_id":\s*("(?:[^"\\]|\\.)*"|-?[0-9]+)')
FINAL_WAIT_S = 120


class Producer:
    def __init__(self, boot, topic, acks_path):
        # retries=0: the retry loop is ours (a retry inside the client can reorder and, on a
        # timeout, duplicate as well; ours is visible in the counts). Short timeouts so a failed
        # send comes back quickly to be sent again.
        self.kafka = KafkaProducer(bootstrap_servers=boot, acks="all", linger_ms=20,
                                   retries=0, max_block_ms=10000, request_timeout_ms=10000,
                                   reconnect_backoff_max_ms=1000)
        self.topic = topic
        self.lock = threading.Lock()
        self.acks = open(acks_path, "w", buffering=1)
        self.failed = []  # (key, value) to send again
        self.in_flight = 0
        self.sent = self.acked = self.retried = 0

    def send(self, key, value):
        with self.lock:
            self.in_flight += 1
            self.sent += 1
        while True:
            try:
                future = self.kafka.send(self.topic, key=key, value=value)
                break
            except Exception as e:  # the buffer is full or metadata is missing: wait, retry
                print("producer: send: %s; retrying" % e, file=sys.stderr)
                time.sleep(0.2)
        future.add_callback(self.on_ack, key)
        future.add_errback(self.on_error, key, value)

    def on_ack(self, key, meta):
        with self.lock:
            self.in_flight -= 1
            self.acked += 1
            self.acks.write("%d %d %s\n" % (meta.partition, meta.offset, key.decode()))

    def on_error(self, key, value, exc):
        with self.lock:
            self.in_flight -= 1
            self.failed.append((key, value))
            if len(self.failed) == 1:
                print("producer: %s; sending again" % exc, file=sys.stderr)

    def resend_failed(self):
        with self.lock:
            again, self.failed = self.failed, []
            self.retried += len(again)
            self.sent -= len(again)  # counted again by send
        for key, value in again:
            self.send(key, value)

    def pending(self):
        with self.lock:
            return self.in_flight + len(self.failed)


def burst(producer, path, number):
    try:
        with open(path) as f:
            customer, count = f.read().split()
        os.unlink(path)
    except (OSError, ValueError):
        return 0
    count = int(count)
    for i in range(count):
        order = "burst-%d-%d" % (number, i)
        day = 1 + (i * 7 + number) % 28
        event = {"order_id": order, "customer_id": int(customer),
                 "ts": "2026-01-%02dT%02d:%02d:%02d.%03dZ" % (day, i % 24, i % 60, number % 60,
                                                              i % 1000),
                 "status": "paid", "amount": round(1 + (i % 500) / 10, 2)}
        producer.send(json.dumps(order).encode(), json.dumps(event, separators=(",", ":")).encode())
    return count


def main():
    if len(sys.argv) not in (7, 8):
        sys.exit("usage: py_producer.py BOOTSTRAP TOPIC EVENTS RATE ACKS STOP [BURST]")
    boot, topic, events, rate, acks_path, stop_path = sys.argv[1:7]
    burst_path = sys.argv[7] if len(sys.argv) == 8 else None
    rate = float(rate)
    if rate <= 0:
        sys.exit("py_producer.py: RATE must be positive, got %s" % sys.argv[4])
    producer = Producer(boot, topic, acks_path)
    bursts = burst_events = 0
    ran_out = True
    start = time.monotonic()
    sent_paced = 0
    with open(events, "rb") as f:
        for line in f:
            line = line.rstrip(b"\n")
            match = ORDER_ID.search(line)
            producer.send(match.group(1) if match else b"null", line)
            sent_paced += 1
            if sent_paced % 64 == 0:
                producer.resend_failed()
                if os.path.exists(stop_path):
                    ran_out = False
                    break
                if burst_path is not None and os.path.exists(burst_path):
                    bursts += 1
                    burst_events += burst(producer, burst_path, bursts)
                ahead = sent_paced / rate - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
    deadline = time.monotonic() + FINAL_WAIT_S
    while producer.pending() > 0 and time.monotonic() < deadline:
        producer.resend_failed()
        try:
            producer.kafka.flush(timeout=10)
        except Exception as e:  # a timeout: what failed is sent again on the next turn
            print("producer: flush: %s" % e, file=sys.stderr)
        time.sleep(0.05)
    producer.kafka.close(timeout=10)
    producer.acks.close()
    print(json.dumps({"sent": producer.sent, "acked": producer.acked,
                      "retried": producer.retried, "burst": burst_events,
                      "ran_out": ran_out}))
    sys.exit(0 if producer.pending() == 0 and producer.acked == producer.sent else 1)


if __name__ == "__main__":
    main()
