#!/usr/bin/env bash
# The gate of `dayshard loadtest` (loadgen/loadtest_gate.c): bad thresholds and baselines are
# usage errors (2) before anything runs; a real run at --shards 1 breaches
# over_capacity_seconds>0 (exit 3, the run and the threshold named); a second run against the
# first as --baseline prints each field's change and, within its thresholds, exits 0; a
# schema-1 baseline compares, a strategy missing from the baseline is said and its relative
# threshold fails unchecked; every field docs/LOADTEST_REPORT.md names is in a real report.json.
source "$(dirname "$0")/lib.sh"

DOC="$(dirname "$0")/../../docs/LOADTEST_REPORT.md"

# ---- usage errors, before any run --------------------------------------------------------------

lt() { "$DAYSHARD" loadtest --out "$WORK/never" "$@"; }
expect_exit "unknown field" 2 lt --fail-if 'count_p99>5'
expect_grep "unknown field named" "$WORK/err" "unknown field count_p99"
expect_exit "relative without a baseline" 2 lt --fail-if 'count_p99_us>1.2x'
expect_grep "relative named" "$WORK/err" "'count_p99_us>1.2x': count_p99_us compared with a baseline needs --baseline"
expect_exit "bad operator" 2 lt --fail-if 'count_p99_us=>5'
expect_grep "bad operator said" "$WORK/err" "no operator after count_p99_us"
expect_exit "missing baseline" 2 lt --baseline "$WORK/nope.json"
expect_grep "missing baseline named" "$WORK/err" "--baseline $WORK/nope.json:"
echo '{"runs": [' > "$WORK/broken.json"
expect_exit "baseline not JSON" 2 lt --baseline "$WORK/broken.json"
expect_grep "baseline not JSON named" "$WORK/err" "--baseline $WORK/broken.json: not JSON"
echo '{"schema": 99, "runs": []}' > "$WORK/newer.json"
expect_exit "baseline newer" 2 lt --baseline "$WORK/newer.json"
expect_grep "baseline newer named" "$WORK/err" "schema 99, newer than the 3"
[[ ! -e $WORK/never ]] && ok || fail "a usage error still ran the load test"

# ---- a breach: exit 3, the run and the threshold named ----------------------------------------

# 30,000 events at 8,000/s on one shard: about 4 s at 8x the capacity of 1,000/s.
a="$WORK/a"
set +e
timeout 300 "$DAYSHARD" loadtest --shards 1 --events 30000 --rate 8000 --queries 10 --out "$a" \
  --fail-if 'over_capacity_seconds>0' --fail-if 'query_errors>0' >"$WORK/a.out" 2>"$WORK/a.err"
rc=$?
set -e
expect_eq "breach exits 3 ($(tail -n 2 "$WORK/a.err"))" 3 "$rc"
expect_grep "breach named on stderr" "$WORK/a.err" \
  "dayshard loadtest: run 1 (fixed:1, key order) breached --fail-if 'over_capacity_seconds>0': over_capacity_seconds = "
expect_grep "verdict on stdout" "$WORK/a.out" "'query_errors>0': query_errors = 0: passed"
expect_grep "gate failed on stdout" "$WORK/a.out" "gate: FAILED (1 of 2 checks"
r="$a/report.json"
if [[ -f $r ]]; then
  expect_eq "schema" 3 "$(json_get "$r" 'd["schema"]')"
  expect_eq "gate in report.json" "False 1 breached passed" \
    "$(json_get "$r" 'd["gate"]["passed"], d["gate"]["breaches"], d["gate"]["verdicts"][0]["state"], d["gate"]["verdicts"][1]["state"]' | tr -d "(),'")"
  expect_eq "summary agrees with the run" True \
    "$(json_get "$r" 'd["runs"][0]["summary"]["over_capacity_seconds"] == d["runs"][0]["over_capacity_seconds"] > 0')"
  expect_grep "gate in report.md" "$a/report.md" "| fixed:1, key order | \`over_capacity_seconds>0\` | **breached** |"
else
  fail "no report.json ($(tail -n 3 "$WORK/a.err"))"
fi

# ---- against a baseline, within thresholds: the changes printed, exit 0 ------------------------

b="$WORK/b"
set +e
timeout 300 "$DAYSHARD" loadtest --shards 1 --events 30000 --rate 8000 --queries 10 --out "$b" \
  --baseline "$r" --fail-if 'events_stored<-1%' --fail-if 'over_capacity_seconds>100000' \
  --fail-if 'query_errors>0' >"$WORK/b.out" 2>"$WORK/b.err"
rc=$?
set -e
expect_eq "within thresholds exits 0 ($(tail -n 2 "$WORK/b.err"))" 0 "$rc"
expect_grep "baseline named" "$WORK/b.out" "baseline: $r (schema 3, 1 run)"
expect_grep "comparison per strategy" "$WORK/b.out" "run 1 (fixed:1, key order) against the baseline:"
if grep -qE '^  events_stored +30,000 +30,000  0 \(0%\)$' "$WORK/b.out"; then ok
else fail "no events_stored change line in $WORK/b.out"; fi
for f in events_per_s count_p99_us lag_p99_ms over_capacity_seconds; do
  grep -qE "^  $f +[-0-9,.]+ +[-0-9,.]+" "$WORK/b.out" && ok || fail "no $f change line"
done
expect_grep "relative verdict" "$WORK/b.out" "'events_stored<-1%': events_stored = 30,000, baseline 30,000, change 0%: passed"
expect_grep "gate passed" "$WORK/b.out" "gate: passed"
if [[ -f $b/report.json ]]; then
  expect_eq "baseline summary kept" True \
    "$(json_get "$b/report.json" 'd["runs"][0]["baseline_summary"] == json.load(open(sys.argv[1].replace("/b/", "/a/")))["runs"][0]["summary"]')"
  expect_grep "comparison in report.md" "$b/report.md" "| \`events_stored\` | 30,000 | 30,000 | 0 (0%) |"
fi

# ---- every field the docs name is in a real report.json, and the summary has no other --------

docs_fields() { # SECTION: the backquoted names in the first column of that section's table
  awk -v s="$1" '/^## /{on = ($0 == "## " s)} on && /^\| `/' "$DOC" |
    cut -d'|' -f2 | grep -o '`[a-z0-9_]*`' | tr -d '`' | LC_ALL=C sort -u
}
if [[ -f $b/report.json ]]; then
  expect_eq "summary fields = docs" "$(docs_fields "The summary" | tr '\n' ' ')" \
    "$(json_get "$b/report.json" '" ".join(sorted(d["runs"][0]["summary"])) + " "')"
  expect_eq "the docs list 51 summary fields" 51 "$(docs_fields "The summary" | wc -l)"
  for f in $(docs_fields "Top level"); do
    expect_eq "top-level $f in report.json" True "$(json_get "$b/report.json" "'$f' in d")"
  done
  for f in $(docs_fields "A run"); do
    expect_eq "run field $f in report.json" True "$(json_get "$b/report.json" "'$f' in d['runs'][0]")"
  done
  for f in $(docs_fields "The gate"); do
    expect_eq "gate field $f in report.json" True "$(json_get "$b/report.json" "'$f' in d['gate']")"
  done
  (($(docs_fields "A run" | wc -l) >= 25)) && ok || fail "the run table of the docs was not read"
fi

# ---- a schema-1 baseline; a strategy the baseline lacks (--render-only, no run) ---------------

cat > "$WORK/v1.json" <<'EOF'
{"version": 1, "runs": [
 {"strategy": "fixed:1, key order", "events_produced": 30000, "events_stored": 30000,
  "throughput_eps": 5000, "over_capacity_seconds": 2, "count_p99_us": 1000, "growths": [],
  "series": {"hottest_share": [0.5, 0.9]}}]}
EOF
cp -r "$b" "$WORK/c"
expect_exit "schema-1 baseline" 0 "$DAYSHARD" loadtest --render-only "$WORK/c" \
  --baseline "$WORK/v1.json" --fail-if 'events_stored!=30000'
expect_grep "schema-1 baseline read" "$WORK/out" "baseline: $WORK/v1.json (schema 1, 1 run)"
if grep -qE '^  hottest_share_max +0\.9 ' "$WORK/out"; then ok
else fail "schema-1 summary not derived: $(grep hottest_share_max "$WORK/out")"; fi
expect_grep "verdicts written" "$WORK/c/report.json" '"baseline": "'"$WORK/v1.json"'"'
sed -i 's/fixed:1, key order/adaptive, key day/' "$WORK/v1.json"
expect_exit "strategy not in the baseline" 3 "$DAYSHARD" loadtest --render-only "$WORK/c" \
  --baseline "$WORK/v1.json" --fail-if 'count_p99_us>2x'
expect_grep "missing strategy said" "$WORK/out" "run 1 (fixed:1, key order): not in the baseline ($WORK/v1.json has: adaptive, key day)"
expect_grep "unchecked named" "$WORK/err" "could not check --fail-if 'count_p99_us>2x': count_p99_us = "
expect_grep "unchecked why" "$WORK/err" "the baseline has no run of this strategy"
finish
