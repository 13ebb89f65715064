#!/usr/bin/env bash
# `dayshard run` end to end against `dayshard broker`, with the ground truth from file ingest
# (`dayshard ingest` of the same lines): one node consumes what Python's kafka package, kcat and
# `dayshard produce` send, bad events mixed in (each in DIR/deadletter.*.jsonl once, with its
# reason, partition and offset, and the raw bytes Kafka holds at that offset); then a clean
# restart (SIGTERM, exit 0, start again, more events) resumes without duplicates.
# Randomised: prints its seed, DS_TEST_SEED replays it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"
seed=${DS_TEST_SEED:-$RANDOM}
echo "seed=$seed"
RANDOM=$seed

# ---- input: 60k events with bad lines mixed in, in four parts ---------------------------------
"$DAYSHARD" generate --events 60000 --profile busy-day --seed "$seed" >"$WORK/events.jsonl"
"$PY" - "$WORK/events.jsonl" "$WORK/part" "$seed" <<'EOF'
import random, sys
src, prefix, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rnd = random.Random(seed)
ts = '"ts":"2026-01-05T10:00:00Z"'
bad = [
    b"this is not json",
    b'{"order_id":9000001,"customer_id":5,"status":"paid"}',                # missing ts
    b'{"order_id":"' + b"x" * 70 + b'","customer_id":5,' + ts.encode() + b"}",  # 70-byte id
    b'{"order_id":9000002,"customer_id":5,' + ts.encode() + b"} trailing",
    b"[1,2,3]",
    b'{"order_id":9000003,"customer_id":5,' + ts.encode() + b',"amount":1.23456}',
    b'{"order_id":-4,"customer_id":5,' + ts.encode() + b"}",
    b'{"order_id":9000005,"customer_id":"\xff\xfe",' + ts.encode() + b"}",  # not UTF-8
    b'{"order_id":9000006,"customer_id":5,"ts":"yesterday"}',
    b'{"order_id":9000007,"customer_id":5,' + ts.encode() + b',"order_id":9000008}',
    b'{"order_id":9000009,"customer_id":5,' + ts.encode() + b',"status":"a\x01b\\"q"}',
    b'{"order_id":9000010,"customer_id":5,"order_date":"2026-02-30"}',
]
# Good events of unusual shapes: they count like any other.
good = [
    b'{"order_id":"A-1","customer_id":"c-1","order_date":"2026-01-09","amount":0.0001}',
    b'{"customer_id":7,"ts":1767960000000,"order_id":9000011,"extra":{"a":[1,{"b":null}]}}',
]
lines = open(src, "rb").read().splitlines()
for extra in bad * 3 + good:
    lines.insert(rnd.randrange(len(lines) + 1), extra)
cuts = [0, len(lines) * 3 // 10, len(lines) * 5 // 10, len(lines) * 7 // 10, len(lines)]
for i in range(4):
    with open("%s%d.jsonl" % (prefix, i + 1), "wb") as out:
        out.write(b"".join(l + b"\n" for l in lines[cuts[i]:cuts[i + 1]]))
EOF
P1=$WORK/part1.jsonl P2=$WORK/part2.jsonl P3=$WORK/part3.jsonl P4=$WORK/part4.jsonl
truth_123=$(truth "$P1" "$P2" "$P3")
truth_all=$(truth "$P1" "$P2" "$P3" "$P4")
# The dead letters file ingest writes for the same lines: the reasons to expect.
cat "$P1" "$P2" "$P3" | "$DAYSHARD" ingest --data "$WORK/ref" - >/dev/null
"$DAYSHARD" ingest --data "$WORK/ref4" "$P4" >/dev/null
bad_123=$(deadletters "$WORK/ref" | wc -l)
bad_4=$(deadletters "$WORK/ref4" | wc -l)
echo "truth: $(total_of <<<"$truth_123") + $(($(total_of <<<"$truth_all") - $(total_of <<<"$truth_123"))) events, $bad_123 + $bad_4 bad lines"

# wait_deadletters N SECONDS: waits until the node's dead-letter files hold N whole lines. The
# counts reaching the truth says nothing of the two bad messages sent last, and a record is
# whole only once its newline is written (the 70 KiB one takes more than one write).
wait_deadletters() {
  local deadline=$(($(now_ms) + $2 * 1000)) f torn
  while (($(now_ms) < deadline)); do
    torn=0
    for f in "$DATA"/deadletter.*.jsonl; do
      [[ -s $f && -n $(tail -c 1 "$f") ]] && torn=1
    done
    ((torn == 0 && $(deadletters "$DATA" | wc -l) >= $1)) && return 0
    sleep 0.2
  done
  return 1
}

# check_deadletters WHAT EXPECTED-COUNT REFERENCE-DEADLETTERS...: the node's dead letters
# are EXPECTED-COUNT records with a reason, a partition and an offset, each pair once; their
# reasons are the reference's plus the two Python-only messages (an empty value, a 70 KiB one);
# the bytes Kafka holds at each (partition, offset), fetched with kcat, are the raw text.
check_deadletters() {
  local what=$1 want=$2 verdict
  shift 2
  wait_deadletters "$want" 60 ||
    fail "$what: $(deadletters "$DATA" | wc -l) whole dead letters after 60 s, expected $want"
  verdict=$(timeout 120 "$PY" - "$BOOT" <(deadletters "$DATA") "$want" "$@" <<'EOF'
import collections, json, subprocess, sys
boot, path, want, refs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
records = [json.loads(l) for l in open(path, "rb")]
problems = []
if len(records) != want:
    problems.append("%d dead letters, expected %d" % (len(records), want))
keys = [(r.get("partition"), r.get("offset")) for r in records]
if any(p is None or o is None or "reason" not in r for r, (p, o) in zip(records, keys)):
    problems.append("a record without reason, partition or offset")
if len(set(keys)) != len(keys):
    dup = [k for k, n in collections.Counter(keys).items() if n > 1]
    problems.append("partition/offset pairs repeated: %s" % dup[:5])
reasons = collections.Counter(r["reason"] for r in records)
expected = collections.Counter()
for ref in refs:
    expected.update(json.loads(l)["reason"] for l in open(ref, "rb"))
expected["too_large"] += 1
empty = [r for r in records if r.get("raw") == ""]
if len(empty) != 1:
    problems.append("%d dead letters of the empty message, expected 1" % len(empty))
else:
    expected[empty[0]["reason"]] += 1
if reasons != expected:
    problems.append("reasons %s, expected %s" % (dict(reasons), dict(expected)))
for r in records:
    if "raw" in r:
        raw = r["raw"].encode("utf-8")
    else:
        raw = bytes.fromhex(r.get("raw_hex", ""))
    got = subprocess.run(["kcat", "-b", boot, "-C", "-t", "orders", "-p", str(r["partition"]),
                          "-o", str(r["offset"]), "-c", "1", "-e", "-q", "-f", "%s"],
                         capture_output=True, timeout=20).stdout
    if r.get("truncated"):
        ok = len(got) > len(raw) and got.startswith(raw) and r["reason"] == "too_large"
    else:
        ok = got == raw
    if not ok:
        problems.append("kcat at %d/%d gives %r, the dead letter says %r" %
                        (r["partition"], r["offset"], got[:60], raw[:60]))
        break
print("ok" if not problems else "; ".join(problems))
EOF
  )
  expect_eq "$what: dead letters" ok "$verdict"
}

# ---- 1 and 2: one node, three producers, bad events ------------------------------------------
start_broker --partitions 12
DATA=$WORK/data
start_node a "$DATA" it-run
py_produce "$P1" || fail "python producer"
kcat_produce "$P2" || fail "kcat producer"
if ds_produce_works; then
  ds_produce "$P3" || fail "dayshard produce"
else
  echo "dayshard produce not available: kcat sends part 3"
  kcat_produce "$P3" || fail "kcat producer (part 3)"
fi
# Two bad messages only a client can send: an empty value (a tombstone) and one over 64 KiB.
timeout 60 "$PY" - "$BOOT" <<'EOF' || fail "python: the empty and the large message"
import sys
from kafka import KafkaProducer
p = KafkaProducer(bootstrap_servers=sys.argv[1], acks="all", max_request_size=200000)
p.send("orders", key=b"t", value=None).get(timeout=20)
p.send("orders", value=b'{"order_id":1,"pad":"' + b"p" * 70000 + b'"}').get(timeout=20)
p.close(timeout=5)
EOF
wait_counts "parts 1-3 (python, kcat, dayshard produce)" "$truth_123" 60 "$DATA"
check_deadletters "parts 1-3" $((bad_123 + 2)) <(deadletters "$WORK/ref")

# ---- 3: a clean restart resumes where the data ends ------------------------------------------
stop_node a "$NODE_PID"
expect_eq "first run's summary" 1 \
  "$(grep -c "stopped: $(total_of <<<"$truth_123") events durable, $((bad_123 + 2)) dead letters" "$WORK/a.log")"
start_node a "$DATA" it-run
wait_log a "kafka: assigned" 30 12 || fail "restarted node: not all 12 partitions assigned within 30 s"
# Every partition resumes at its durable position, which both committed offsets match.
resumed=$(awk '/^==== run /{n++} n == 2 && /kafka: assigned/' "$WORK/a.log" |
  sed -E 's/.*from offset (-?[0-9]+) \(durable here (-?[0-9]+), group (-?[0-9]+), positions (-?[0-9]+)\).*/\1 \2 \3 \4/' |
  awk '$1 != $2 || $2 != $3 || $3 != $4 || $1 < 0 {bad++} END {print NR, bad + 0}')
expect_eq "restart: partitions assigned, resumed elsewhere than durable == group == positions" \
  "12 0" "$resumed"
if ds_produce_works; then ds_produce "$P4" || fail "dayshard produce (part 4)"; else py_produce "$P4" || fail "python producer (part 4)"; fi
wait_counts "after a clean restart" "$truth_all" 60 "$DATA"
check_deadletters "after the restart" $((bad_123 + bad_4 + 2)) <(deadletters "$WORK/ref") \
  <(deadletters "$WORK/ref4")
stop_node a "$NODE_PID"
expect_eq "second run's summary" 1 \
  "$(grep -c "stopped: $(($(total_of <<<"$truth_all") - $(total_of <<<"$truth_123"))) events durable, $bad_4 dead letters" "$WORK/a.log")"
if "$DAYSHARD" fsck --data "$DATA" >"$WORK/fsck.txt" 2>&1; then ok; else fail "fsck: $(head -c 300 "$WORK/fsck.txt")"; fi
finish
