#!/usr/bin/env bash
# deploy/prometheus/dayshard.rules.yml passes `promtool check rules` (Debian's prometheus
# package; scripts/setup.sh installs it), has each alert deploy/README.md describes, and the
# dashboard deploy/grafana/dayshard.json is JSON with a query in every panel. Whether the
# metrics they name exist is test_run_metrics.sh's check (it needs a running node). Without
# promtool: exit 77 (skipped).
source "$(dirname "$0")/lib.sh"

command -v promtool >/dev/null || { echo "promtool missing (apt-get install prometheus): skipped"; exit 77; }
RULES="$ROOT/deploy/prometheus/dayshard.rules.yml"
if promtool check rules "$RULES" >"$WORK/promtool.out" 2>&1; then
  ok
else
  fail "promtool check rules: $(cat "$WORK/promtool.out")"
fi
# a broken rule fails the check: the test is not vacuous
sed 's/expr: dayshard_ready == 0/expr: dayshard_ready ==/' "$RULES" >"$WORK/broken.yml"
expect_exit "promtool on a broken rule" 1 promtool check rules "$WORK/broken.yml"
for alert in DayshardNodeDown DayshardNotReady DayshardConsumerLagHigh DayshardIngestStopped \
  DayshardDiskFillingIn24h DayshardDiskAlmostFull DayshardOpenFilesHigh \
  DayshardIdsRecentTierNearHardBound DayshardIdsSealStalls DayshardGsiSealFailing DayshardGsiLagHigh; do
  if grep -q "alert: $alert\$" "$RULES" && grep -q "$alert" "$ROOT/deploy/README.md"; then
    ok
  else
    fail "alert $alert: missing from the rules or from deploy/README.md"
  fi
done
if "$PY" - "$ROOT/deploy/grafana/dayshard.json" >"$WORK/dash.out" 2>&1 <<'PYEOF'; then
import json, sys
d = json.load(open(sys.argv[1]))
bad = [p.get("title") for p in d["panels"] if not p.get("targets") or not all(t.get("expr") for t in p["targets"])]
assert d["panels"], "no panels"
assert not bad, "panels without a query: %s" % bad
PYEOF
  ok
else
  fail "deploy/grafana/dayshard.json: $(cat "$WORK/dash.out")"
fi
finish
