#!/usr/bin/env bash
# deploy/ against the built binary: scripts/check-deploy.sh passes on the real files, and fails,
# naming the file and the culprit, on copies broken one way each (a flag or command the binary
# does not have, a unit warning, YAML that does not parse, a compose file missing a node, a
# health check or its start-up order, an apt package Debian 12 lacks, a runtime stage without a
# library the binary links, a sample settings file with a bad key, a hardening regression).
source "$(dirname "$0")/lib.sh"

CHECK="$ROOT/scripts/check-deploy.sh"

expect_exit "usage: no binary" 2 "$CHECK"
expect_exit "usage: not a directory" 2 "$CHECK" "$DAYSHARD" "$WORK/nowhere"

# The real deploy/.
expect_exit "deploy/ passes" 0 "$CHECK" "$DAYSHARD" "$ROOT/deploy"
cp "$WORK/out" "$WORK/real.out"
grep -q "systemd-analyze verify: 3 units clean" "$WORK/out" && ok || fail "verify line: $(cat "$WORK/out")"
grep -q "apt packages: .* exist in Debian 12\|apt packages: .*skipped" "$WORK/out" && ok \
  || fail "apt line: $(cat "$WORK/out")"

# The cases below break one thing each; only the apt case needs apt's slow lookup.
export DS_DEPLOY_SKIP_APT=1

# broken NAME: a fresh copy of deploy/ in $WORK/NAME, to be broken by the caller.
broken() {
  rm -rf "${WORK:?}/$1"
  cp -r "$ROOT/deploy" "$WORK/$1"
  echo "$WORK/$1"
}
# expect_failure WHAT DIR TEXT...: the check exits 1 and one FAIL line holds every TEXT.
expect_failure() {
  local what=$1 dir=$2
  shift 2
  expect_exit "$what: exit" 1 "$CHECK" "$DAYSHARD" "$dir"
  local lines
  lines=$(grep "FAIL:" "$WORK/err" || true)
  for text in "$@"; do
    lines=$(grep -F -- "$text" <<<"$lines" || true)
  done
  [[ -n $lines ]] && ok || fail "$what: no FAIL line with [$*] in: $(cat "$WORK/err")"
}

# (c) a unit naming a flag `dayshard help run` does not print.
d=$(broken bad-flag)
cat > "$d/systemd/dayshard-bad.service" <<'EOF'
[Service]
ExecStart=/usr/bin/dayshard run --data /var/lib/dayshard/x --no-such-flag 1
EOF
expect_failure "unit with --no-such-flag" "$d" "systemd/dayshard-bad.service" "dayshard run" "--no-such-flag"

# (c) a compose command naming a command `dayshard help` does not list.
d=$(broken bad-command)
sed -i 's/command: \["run", "--brokers", "kafka:9092", "--topic", "orders", "--group", "dayshard-b"/command: ["frobnicate", "--brokers", "kafka:9092", "--topic", "orders", "--group", "dayshard-b"/' \
  "$d/compose.yaml"
expect_failure "compose command frobnicate" "$d" "compose.yaml" "node-b1" "frobnicate"

# (c) the Dockerfile's CMD with a misspelt flag.
d=$(broken bad-cmd)
sed -i 's/"--http", "0.0.0.0:8080"\]/"--htttp", "0.0.0.0:8080"]/' "$d/Dockerfile"
expect_failure "Dockerfile CMD --htttp" "$d" "Dockerfile" "ENTRYPOINT + CMD" "--htttp"

# (c) a README code line with a flag the command lacks.
d=$(broken bad-readme)
printf '\n```sh\ndayshard count --server http://127.0.0.1:8080 --dya 2026-01-21\n```\n' >> "$d/README.md"
expect_failure "README --dya" "$d" "README.md" "dayshard count" "--dya"

# (e) a sample settings file with a misspelt key.
d=$(broken bad-properties)
sed -i 's/^partitions = 8$/partitons = 8/' "$d/config/router.properties"
expect_failure "router.properties partitons" "$d" "config/router.properties" "config check" "partitons"

# (a) a unit systemd warns about (an unknown key only warns; the check fails on it).
d=$(broken unit-warning)
sed -i 's/^RestartSec=5$/RestartSec=5\nRestartFrobnicate=yes/' "$d/systemd/dayshard-node@.service"
expect_failure "unit unknown key" "$d" "dayshard-node@.service" "RestartFrobnicate"

# (a) hardening below the bar.
d=$(broken exposure)
sed -i '/^ProtectSystem=\|^SystemCallFilter=\|^PrivateUsers=\|^RestrictNamespaces=/d' "$d/systemd/dayshard-router.service"
expect_failure "router exposure" "$d" "dayshard-router.service" "exposure"

# (b) YAML that does not parse.
d=$(broken bad-yaml)
printf 'services: [unclosed\n' > "$d/extra.yaml"
expect_failure "bad YAML" "$d" "extra.yaml" "not valid YAML"

# (b) compose.yaml with three nodes, one without a health check, a router not waiting.
d=$(broken compose-shape)
"$PY" - "$d/compose.yaml" <<'EOF'
import sys, yaml
path = sys.argv[1]
d = yaml.safe_load(open(path))
del d["services"]["node-b2"]
del d["services"]["node-a2"]["healthcheck"]
d["services"]["router"]["depends_on"].pop("node-a1")
d["services"]["router"]["command"] = [w.replace(",http://node-b2:8080", "") for w in d["services"]["router"]["command"]]
yaml.safe_dump(d, open(path, "w"))
EOF
expect_exit "compose shape: exit" 1 "$CHECK" "$DAYSHARD" "$d"
grep -q "FAIL: compose.yaml: expected two node groups of two nodes" "$WORK/err" && ok || fail "three nodes: $(cat "$WORK/err")"
grep -q "FAIL: compose.yaml: service 'node-a2' has no health check" "$WORK/err" && ok || fail "no health check: $(cat "$WORK/err")"
grep -q "FAIL: compose.yaml: service 'router' does not wait for 'node-a1'" "$WORK/err" && ok || fail "depends_on: $(cat "$WORK/err")"

# (b) the router's replica is the same consumer group as its nodes.
d=$(broken same-group)
sed -i 's#"--replica", "http://node-b1:8080,http://node-b2:8080"#"--replica", "http://node-a1:8080,http://node-a2:8080"#' "$d/compose.yaml"
expect_failure "replica same group" "$d" "compose.yaml" "router" "same consumer group"

# (d) an apt package Debian 12 does not have (skipped where the check cannot look it up).
d=$(broken apt)
sed -i 's/ liburing2 / liburing9 /' "$d/Dockerfile"
if grep -q "apt packages: .* exist in Debian 12" "$WORK/real.out"; then
  DS_DEPLOY_SKIP_APT=0 expect_failure "apt liburing9" "$d" "Dockerfile" "liburing9" "does not exist in Debian 12"
else
  echo "test_deploy: no Debian 12 apt lists here: the apt package case is not run"
fi

# (d) a runtime stage without a library the binary links (where dpkg knows the owners).
d=$(broken runtime-lib)
sed -i 's/ libjansson4 / /' "$d/Dockerfile"
if grep -q "runtime libraries: the .* come from" "$WORK/real.out"; then
  expect_failure "runtime without libjansson4" "$d" "Dockerfile" "libjansson.so.4" "libjansson4"
else
  echo "test_deploy: no Debian 12 dpkg database for the binary's libraries: that case is not run"
fi

finish
