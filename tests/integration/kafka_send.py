"""The resending Kafka producer of the Python test producers (py_producer.py, double_count.py),
run by Debian's /usr/bin/python3, whose python3-kafka is another Kafka client than the node's
librdkafka.

acks=all and retries=0: the retry loop is ours (a retry inside the client can reorder and, on a
timeout, duplicate as well; ours is visible in the counts). A send that fails (a broker error, a
timeout) is kept and sent again by resend_failed, however many times it takes: the topic may
then hold it twice (when the failed attempt had in fact been appended). Short timeouts, so a
failed send comes back quickly to be sent again.
"""
import sys
import threading
import time

from kafka import KafkaProducer


class Resender:
    """Sends (key, value) messages to one topic; on_ack(key, meta), when given, is called under
    the lock for every acknowledged message. With times=True, attempt_ms lists the wall time
    (ms) at which each attempt began, resends included, in increasing order."""

    def __init__(self, boot, topic, linger_ms, on_ack=None, times=False):
        self.kafka = KafkaProducer(bootstrap_servers=boot, acks="all", linger_ms=linger_ms,
                                   retries=0, max_block_ms=10000, request_timeout_ms=10000,
                                   reconnect_backoff_max_ms=1000)
        self.topic, self.acked_hook, self.times = topic, on_ack, times
        self.lock = threading.Lock()
        self.failed = []  # (key, value) to send again
        self.attempt_ms = []
        self.in_flight = 0
        self.attempts = self.acked = self.retried = 0

    def send(self, key, value):
        with self.lock:
            self.in_flight += 1
            self.attempts += 1
            if self.times:
                self.attempt_ms.append(time.time() * 1000.0)
        while True:
            try:
                future = self.kafka.send(self.topic, key=key, value=value)
                break
            except Exception as e:  # the buffer is full or metadata is missing: wait, retry
                print("producer: send: %s; retrying" % e, file=sys.stderr)
                time.sleep(0.2)
        future.add_callback(self._on_ack, key)
        future.add_errback(self._on_error, key, value)

    def _on_ack(self, key, meta):
        with self.lock:
            self.in_flight -= 1
            self.acked += 1
            if self.acked_hook is not None:
                self.acked_hook(key, meta)

    def _on_error(self, key, value, exc):
        with self.lock:
            self.in_flight -= 1
            self.failed.append((key, value))
            if len(self.failed) == 1:
                print("producer: %s; sending again" % exc, file=sys.stderr)

    def resend_failed(self):
        with self.lock:
            again, self.failed = self.failed, []
            self.retried += len(again)
        for key, value in again:
            self.send(key, value)

    def pending(self):
        with self.lock:
            return self.in_flight + len(self.failed)

    def distinct_sent(self):
        """Messages sent, each counted once however often it was sent again."""
        with self.lock:
            return self.attempts - self.retried

    def drain(self, wait_s):
        """Sends again what failed until every message is acknowledged or wait_s pass, then
        closes the client. Returns the messages still not acknowledged."""
        deadline = time.monotonic() + wait_s
        while self.pending() > 0 and time.monotonic() < deadline:
            self.resend_failed()
            try:
                self.kafka.flush(timeout=min(10, wait_s))
            except Exception as e:  # a timeout: what failed is sent again on the next turn
                print("producer: flush: %s" % e, file=sys.stderr)
            time.sleep(0.05)
        self.kafka.close(timeout=10)
        return self.pending()
