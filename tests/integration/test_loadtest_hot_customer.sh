#!/usr/bin/env bash
# `dayshard loadtest --profile hot-customer --key customer`, end to end: customer 1 places 20% of
# the orders and, keyed by customer, every one of them goes to one Kafka partition, which takes
# far more than its fair share of the 8; more shards cannot spread it, so the node advises
# hot_customer naming customer 1 with the remedy (key by order_id, or rate-limit the customer),
# once for that partition (not also as a plain skew), and logs it once though it holds for
# seconds. report.json's run records the advice and its summary counts it; the console table and
# report.md say it; the gate `--fail-if 'advice_hot_customer>0'` exits 3 naming the run and the
# threshold, while a threshold on a case that did not apply passes; --baseline shows the advice
# appear; an unknown --fail-if field is answered with the field list, the advice fields in it.
source "$(dirname "$0")/lib.sh"

expect_exit "unknown field" 2 "$DAYSHARD" loadtest --out "$WORK/never" --fail-if 'advice_hot>0'
expect_grep "unknown field lists the advice fields" "$WORK/err" \
  "advice_count advice_kafka_partition_skew advice_hot_customer advice_day_at_max_shards"
[[ ! -e $WORK/never ]] && ok || fail "a usage error still ran the load test"

# 40,000 events at 5,000/s: 8 s, past the advice's 3 s of writes on the skewed partition.
out="$WORK/hc"
set +e
timeout 300 "$DAYSHARD" loadtest --profile hot-customer --key customer --events 40000 \
  --rate 5000 --queries 5 --out "$out" --fail-if 'advice_hot_customer>0' \
  --fail-if 'advice_day_at_max_shards>0' >"$WORK/hc.out" 2>"$WORK/hc.err"
rc=$?
set -e
expect_eq "hot customer breaches the gate: exit 3 ($(tail -n 2 "$WORK/hc.err"))" 3 "$rc"
expect_grep "breach named on stderr" "$WORK/hc.err" \
  "dayshard loadtest: run 1 (adaptive, key customer) breached --fail-if 'advice_hot_customer>0': advice_hot_customer = 1"
expect_grep "a case that did not apply passes" "$WORK/hc.out" \
  "'advice_day_at_max_shards>0': advice_day_at_max_shards = 0: passed"
expect_grep "gate failed on stdout" "$WORK/hc.out" "gate: FAILED (1 of 2 checks"
r=$out/report.json
if [[ -f $r ]]; then
  expect_eq "stored = produced" True \
    "$(json_get "$r" 'd["runs"][0]["events_stored"] == d["runs"][0]["events_produced"] == 40000')"
  hc='[a for a in d["runs"][0]["advice"] if a["case"] == "hot_customer"]'
  expect_eq "advice: hot_customer names customer 1, once" "customer 1" \
    "$(json_get "$r" "' | '.join(a['subject'] for a in $hc)")"
  expect_eq "advice: the remedy keys by order or rate-limits the customer" True \
    "$(json_get "$r" "all('--key order' in a['remedy'] and 'rate-limit this customer' in a['remedy'] and 'more shards cannot help' in a['remedy'] for a in $hc)")"
  # The evidence: the customer's share of the writes, and its Kafka partition's, far past the
  # fair 12.5% (customer 1's 20% plus its eighth of the rest: about 30%).
  evidence=$(json_get "$r" "$hc[0]['evidence'] if $hc else ''")
  partition=$(sed -n 's/.* and Kafka partition \([0-9]*\) took \([0-9]*\)% .*/\1/p' <<<"$evidence")
  share=$(sed -n 's/.* and Kafka partition \([0-9]*\) took \([0-9]*\)% .*/\2/p' <<<"$evidence")
  [[ $evidence == "customer 1 wrote "* && $evidence == *"fair share 12.5% of 8 partitions"* ]] &&
    ok || fail "advice evidence: not customer 1's writes: [$evidence]"
  [[ -n $share ]] && ((share >= 25)) && ok ||
    fail "advice evidence: the partition's share is not past 2x fair: [$evidence]"
  expect_eq "advice: partition ${partition:-?} advised once, as the customer's (not also a skew)" 0 \
    "$(json_get "$r" "sum(1 for a in d['runs'][0]['advice'] if a['subject'] == 'partition ${partition:-x}')")"
  expect_eq "summary counts the advice" "1 1 0" \
    "$(json_get "$r" '"%d %d %d" % (d["runs"][0]["summary"]["advice_hot_customer"], d["runs"][0]["summary"]["advice_count"] >= 1, d["runs"][0]["summary"]["advice_day_at_max_shards"])')"
  expect_eq "gate in report.json" "False breached passed" \
    "$(json_get "$r" '"%s %s %s" % (d["gate"]["passed"], d["gate"]["verdicts"][0]["state"], d["gate"]["verdicts"][1]["state"])')"
  expect_grep "advice under the summary table" "$WORK/hc.out" \
    "adaptive, key customer: advice hot_customer (customer 1): customer 1 wrote "
  expect_grep "advice in report.md" "$out/report.md" "**hot\\_customer** (customer 1, from "
  expect_grep "gate in report.md" "$out/report.md" \
    "| adaptive, key customer | \`advice_hot_customer>0\` | **breached** |"
  # Logged when the case starts, not every second it holds: it holds from the advice's 3 s of
  # writes to the end of the run, several of the load test's 1 s samples, and starts once.
  expect_eq "advice: the case held several samples" True \
    "$(json_get "$r" "all(a['samples'] >= 2 for a in $hc) and len($hc) == 1")"
  expect_eq "advice: logged once when it starts" 1 \
    "$(grep -c 'warn: advice: hot_customer (customer 1): ' "$out/run-1/node-0.log" || true)"

  # Against a baseline without the advice (the same run, nothing advised): the comparison shows
  # it appear, and a relative threshold reads it.
  "$PY" - "$r" "$WORK/base.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
for run in d["runs"]:
    run["advice"] = []
    run.pop("summary", None)
json.dump(d, open(sys.argv[2], "w"))
PYEOF
  cp -r "$out" "$WORK/again"
  expect_exit "render-only against the baseline" 3 "$DAYSHARD" loadtest --render-only \
    "$WORK/again" --baseline "$WORK/base.json" --fail-if 'advice_count>0%'
  if grep -qE '^  advice_hot_customer +0 +1  \+1$' "$WORK/out"; then ok
  else fail "no advice_hot_customer change line: $(grep advice_ "$WORK/out")"; fi
  expect_grep "relative threshold on the advice" "$WORK/err" \
    "breached --fail-if 'advice_count>0%': advice_count = "
  expect_exit "a threshold above the advice passes" 0 "$DAYSHARD" loadtest --render-only \
    "$WORK/again" --fail-if 'advice_hot_customer>1'
else
  fail "no report.json ($(tail -n 5 "$WORK/hc.err"))"
fi
finish
