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
import time

from kafka_send import Resender

ORDER_ID = re.compile(rb'"order_id":\s*("(?:[^"\\]|\\.)*"|-?[0-9]+)')
FINAL_WAIT_S = 120


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
    acks = open(acks_path, "w", buffering=1)
    producer = Resender(boot, topic, 20, on_ack=lambda key, meta: acks.write(
        "%d %d %s\n" % (meta.partition, meta.offset, key.decode())))
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
    left = producer.drain(FINAL_WAIT_S)
    acks.close()
    sent = producer.distinct_sent()
    print(json.dumps({"sent": sent, "acked": producer.acked, "retried": producer.retried,
                      "burst": burst_events, "ran_out": ran_out}))
    sys.exit(0 if left == 0 and producer.acked == sent else 1)


if __name__ == "__main__":
    main()
