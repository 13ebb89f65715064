#!/usr/bin/env bash
# One settings file for every command: --config FILE in Java-properties form, keys
# read from each command's usage text, DAYSHARD_* overrides, `dayshard config check`, and
# --log-format json. Checks: every long option of every command is a key (and nothing else);
# a file alone drives ingest and count; a prefixed key reaches only its command; the
# environment beats the file and the command line beats both; booleans and the old
# "gsi = off" form; unknown keys and bad values fail at startup naming file and line;
# `config check` lists every error with its line and exits 1 (0 when clean, 2 on usage);
# kafka.* keys (file and DAYSHARD_KAFKA_*) reach librdkafka; JSON log lines parse, with a
# message holding quotes, a newline, a control character and invalid UTF-8; a node and a
# producer run from one shared file.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"

# Nothing from the caller's environment may leak into the commands under test.
for v in $(env | sed -n 's/^\(DAYSHARD_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done

# ---- keys: every command's long options, from its usage text ---------------------------------
commands=$("$DAYSHARD" help | sed -n 's/^  \([a-z]*\)  .*/\1/p' | grep -v -x -e help -e config)
[[ $(wc -w <<<"$commands") -ge 15 ]] && ok || fail "dayshard help lists too few commands: $commands"
for c in $commands; do
  src="$ROOT/cli/cmd_$c.c"
  [[ -f $src ]] || { note "no $src: keys of $c not compared"; continue; }
  # The getopt table's long options (but --help; --config is main's).
  opts=$(grep -oE '\{"[a-z0-9-]+", (required|no|optional)_argument' "$src" |
    sed -E 's/\{"([^"]+)".*/\1/' | grep -v -x -e help -e config | sort -u)
  keys=$("$DAYSHARD" config keys "$c" |
    awk '$3 != "(on|off)" && $2 != "log-format" && $2 != "kafka.*" {print $2}' | sort -u)
  expect_eq "keys of $c = its long options" "$opts" "$keys"
done
expect_exit "config keys run" 0 "$DAYSHARD" config keys run
grep -q -x "run gsi (on|off)" "$WORK/out" && ok || fail "run has no 'gsi' alias of --no-gsi"
grep -q -x "run kafka.\* PROPERTY" "$WORK/out" && ok || fail "run takes no kafka.* keys"
grep -q -x "run commit-interval-ms N" "$WORK/out" && ok || fail "run commit-interval-ms N"
expect_exit "config keys nosuch" 2 "$DAYSHARD" config keys nosuch
expect_exit "help" 0 "$DAYSHARD" help
grep -q -- "--config FILE" "$WORK/out" && grep -q -- "--log-format text|json" "$WORK/out" &&
  ok || fail "dayshard help does not mention --config and --log-format"
expect_exit "count --help" 0 "$DAYSHARD" count --help
expect_eq "count --help mentions --config once" 1 "$(grep -c -- '--config FILE' "$WORK/out")"
expect_exit "help config" 0 "$DAYSHARD" help config
grep -q "DAYSHARD_KAFKA_" "$WORK/out" && ok || fail "help config does not explain kafka env"

# ---- a file alone drives ingest and count -----------------------------------------------------
cat "$FIXTURES/shop.jsonl" "$FIXTURES/busy-day.jsonl" >"$WORK/in.jsonl"
cat >"$WORK/shop.properties" <<EOF
# the shop's data, for ingest and count
data = $WORK/a
ingest.shards: 3
count.day = 2026-01-21
json = true
EOF
expect_exit "ingest with only --config" 0 "$DAYSHARD" ingest --config "$WORK/shop.properties" "$WORK/in.jsonl"
expect_eq "ingest --config: accepted" 9 "$(json_get "$WORK/out" 'd["accepted"]')"
[[ -f $WORK/a/MANIFEST ]] && ok || fail "ingest --config did not write into the file's data"
expect_exit "count with only --config" 0 "$DAYSHARD" count --config "$WORK/shop.properties"
# ingest.shards reached ingest (3 partitions on the busy day); count.day reached count only
# (ingest has no --day: it would have refused to start).
expect_eq "count --config: count, partitions" "4 3" "$(json_get "$WORK/out" '"%d %d" % (d["count"], d["partitions"])')"
expect_exit "--config=FILE form" 0 "$DAYSHARD" count --config="$WORK/shop.properties"
expect_exit "DAYSHARD_CONFIG names the file" 0 env DAYSHARD_CONFIG="$WORK/shop.properties" "$DAYSHARD" count
expect_eq "DAYSHARD_CONFIG count" 4 "$(json_get "$WORK/out" 'd["count"]')"
expect_exit "--config twice" 2 "$DAYSHARD" count --config "$WORK/shop.properties" --config "$WORK/shop.properties"
expect_exit "--config missing file" 1 "$DAYSHARD" count --config "$WORK/nope.properties"
grep -q "nope.properties" "$WORK/err" && ok || fail "missing config file not named: $(cat "$WORK/err")"

# A second data dir with the shop only: 1 order on 2026-01-21.
expect_exit "ingest shop only" 0 "$DAYSHARD" ingest --data "$WORK/b" "$FIXTURES/shop.jsonl"
expect_exit "count b" 0 "$DAYSHARD" count --data "$WORK/b" --day 2026-01-21 --json
b_count=$(json_get "$WORK/out" 'd["count"]')
[[ $b_count != 4 ]] && ok || fail "the two data dirs must differ on 2026-01-21"

# ---- precedence: file < environment < command line ---------------------------------------------
expect_exit "env overrides file" 0 env DAYSHARD_DATA="$WORK/b" "$DAYSHARD" count --config "$WORK/shop.properties"
expect_eq "env overrides file: count of b" "$b_count" "$(json_get "$WORK/out" 'd["count"]')"
expect_exit "command line overrides env" 0 env DAYSHARD_DATA="$WORK/b" "$DAYSHARD" count \
  --config "$WORK/shop.properties" --data "$WORK/a"
expect_eq "command line overrides env: count of a" 4 "$(json_get "$WORK/out" 'd["count"]')"
expect_exit "env alone, no file" 0 env DAYSHARD_DATA="$WORK/a" DAYSHARD_DAY=2026-01-21 DAYSHARD_JSON=on "$DAYSHARD" count
expect_eq "env alone: count" 4 "$(json_get "$WORK/out" 'd["count"]')"
expect_exit "empty env counts as unset" 0 env DAYSHARD_DATA= "$DAYSHARD" count --config "$WORK/shop.properties"
expect_eq "empty env: file's data" 4 "$(json_get "$WORK/out" 'd["count"]')"
# A variable naming no option of this command is ignored (a router's, say) ...
expect_exit "foreign DAYSHARD_ variable ignored" 0 env DAYSHARD_NODE=x DAYSHARD_BROKERS=y "$DAYSHARD" count --config "$WORK/shop.properties"
# ... but a bad value for one of its options is an error naming the variable.
expect_exit "bad env value" 2 env DAYSHARD_JSON=maybe "$DAYSHARD" count --config "$WORK/shop.properties"
grep -q "DAYSHARD_JSON" "$WORK/err" && ok || fail "bad env value not named: $(cat "$WORK/err")"
# A prefixed key beats an unprefixed one wherever it stands.
printf 'count.data = %s\ndata = %s\nday = 2026-01-21\njson = 1\n' "$WORK/a" "$WORK/b" >"$WORK/prefix.properties"
expect_exit "prefixed beats unprefixed" 0 "$DAYSHARD" count --config "$WORK/prefix.properties"
expect_eq "prefixed key wins" 4 "$(json_get "$WORK/out" 'd["count"]')"

# ---- booleans ----------------------------------------------------------------------------------
printf 'data = %s\nday = 2026-01-21\njson = off\n' "$WORK/a" >"$WORK/bool.properties"
expect_exit "json = off" 0 "$DAYSHARD" count --config "$WORK/bool.properties"
grep -q "^day 2026-01-21: 4 orders" "$WORK/out" && ok || fail "json = off printed JSON: $(cat "$WORK/out")"
expect_exit "json = off, command line --json" 0 "$DAYSHARD" count --config "$WORK/bool.properties" --json
expect_eq "command line flag wins" 4 "$(json_get "$WORK/out" 'd["count"]')"
expect_exit "DAYSHARD_JSON=false beats json = true" 0 env DAYSHARD_JSON=false "$DAYSHARD" count --config "$WORK/shop.properties"
grep -q "^day 2026-01-21: 4 orders" "$WORK/out" && ok || fail "DAYSHARD_JSON=false ignored"
# The subcommand's options come after its word: gsi check with the file's data.
printf 'data = %s\ngsi.json = yes\n' "$WORK/a" >"$WORK/gsi.properties"
expect_exit "gsi check --config" 0 "$DAYSHARD" gsi check --config "$WORK/gsi.properties"
expect_eq "gsi check --config: JSON of a" False "$(json_get "$WORK/out" 'd["damaged"]')"

# ---- bad files fail at startup, naming file and line -------------------------------------------
printf 'data = %s\nshard = 3\n' "$WORK/c" >"$WORK/typo.properties"
expect_exit "unknown key at startup" 2 "$DAYSHARD" ingest --config "$WORK/typo.properties" "$WORK/in.jsonl"
grep -q "typo.properties:2: unknown key 'shard'.*did you mean 'shards'" "$WORK/err" && ok ||
  fail "unknown key not named with its line: $(cat "$WORK/err")"
[[ ! -e $WORK/c ]] && ok || fail "a refused config still created the data directory"
printf 'data = %s\nday = 2026-01-21\nbrokers = x:1\n' "$WORK/a" >"$WORK/other.properties"
expect_exit "a key of another command, unprefixed" 2 "$DAYSHARD" count --config "$WORK/other.properties"
grep -q "other.properties:3: unknown key 'brokers' (not an option of \`dayshard count\`)" "$WORK/err" &&
  ok || fail "unprefixed foreign key: $(cat "$WORK/err")"
printf 'data = %s\nday = 2026-01-21\nrun.brokers = x:1\nrun.kafka.linger.ms = 5\n' "$WORK/a" >"$WORK/shared.properties"
expect_exit "a key of another command, prefixed" 0 "$DAYSHARD" count --config "$WORK/shared.properties"
printf 'data = %s\n\nshards = three\n' "$WORK/c" >"$WORK/typed.properties"
expect_exit "bad typed value at startup" 2 "$DAYSHARD" ingest --config "$WORK/typed.properties" "$WORK/in.jsonl"
grep -q "typed.properties:3: bad value 'three' for 'shards': a non-negative integer" "$WORK/err" &&
  ok || fail "bad value not named with its line: $(cat "$WORK/err")"
printf 'data = %s\nio = fast\n' "$WORK/d" >"$WORK/io.properties"
expect_exit "a value the command refuses" 2 "$DAYSHARD" ingest --config "$WORK/io.properties" "$WORK/in.jsonl"
grep -q "'--io=fast' came from .*io.properties:2" "$WORK/err" && ok ||
  fail "refused value not traced to its line: $(cat "$WORK/err")"
printf 'data =\n' >"$WORK/empty.properties"
expect_exit "empty value" 2 "$DAYSHARD" count --config "$WORK/empty.properties" --day 2026-01-21
grep -q "empty.properties:1: bad value '' for 'data'" "$WORK/err" && ok || fail "empty value: $(cat "$WORK/err")"
# --help works whatever the file says.
expect_exit "--help with a bad DAYSHARD_CONFIG" 0 env DAYSHARD_CONFIG="$WORK/typo.properties" "$DAYSHARD" ingest --help

# ---- dayshard config check ---------------------------------------------------------------------
cat >"$WORK/bad.properties" <<'EOF'
# line 1: a comment
data = /tmp/x
shard = 3
count.dy = 2026-01-21
ingest.shards = three
this line has no separator
run.gsi = maybe
run.http = localhost:99999
nosuch.data = /x
produce.shards = 4
produce.shards = 5
count.day = 2026-02-30
run.commit-interval-ms = -1
ingest.kafka.linger.ms = 1
path = C:\dir\
EOF
expect_exit "config check bad" 1 "$DAYSHARD" config check "$WORK/bad.properties"
for want in \
  ":3: unknown key 'shard'.*did you mean 'shards'" \
  ":4: unknown key 'count.dy'.*did you mean 'count.day'" \
  ":5: bad value 'three' for 'shards': a non-negative integer" \
  ":6: not a 'key = value' line" \
  ":7: bad value 'maybe' for 'gsi': true or false" \
  ":8: bad value 'localhost:99999' for 'http': HOST:PORT" \
  ":9: unknown key 'nosuch.data' ('nosuch' is no command)" \
  ":11: warning: 'shards' is also set on line 10; line 11 wins" \
  ":12: bad value '2026-02-30' for 'day': a day" \
  ":13: bad value '-1' for 'commit-interval-ms'" \
  ":14: 'kafka.linger.ms': \`dayshard ingest\` takes no librdkafka properties" \
  ":15: continuation lines"; do
  grep -q -- "bad.properties$want" "$WORK/out" && ok || fail "config check misses [$want]: $(cat "$WORK/out")"
done
grep -q "bad.properties: 12 settings, 11 errors" "$WORK/out" && ok ||
  fail "config check summary: $(tail -n 1 "$WORK/out")"
expect_exit "config check clean" 0 "$DAYSHARD" config check "$WORK/shop.properties"
grep -q "shop.properties: 4 settings, 0 errors" "$WORK/out" && ok || fail "clean summary: $(cat "$WORK/out")"
expect_exit "config check --command count: ingest.shards is fine" 0 \
  "$DAYSHARD" config check "$WORK/shop.properties" --command count
expect_exit "config check --command run: json is not run's" 1 \
  "$DAYSHARD" config check "$WORK/shop.properties" --command run
grep -q "shop.properties:5: unknown key 'json' (not an option of \`dayshard run\`)" "$WORK/out" &&
  ok || fail "config check --command run: $(cat "$WORK/out")"
expect_exit "config check no file" 2 "$DAYSHARD" config check
expect_exit "config check missing file" 2 "$DAYSHARD" config check "$WORK/nope"
expect_exit "config check unknown command" 2 "$DAYSHARD" config check "$WORK/shop.properties" --command nosuch
expect_exit "config unknown subcommand" 2 "$DAYSHARD" config frobnicate

# ---- --log-format json -------------------------------------------------------------------------
# A message with a quote, a backslash, a newline, a control byte and invalid UTF-8 (a path the
# count cannot open is logged with the path in it).
odd=$'q"u\\o\nte\x01 caf\xc3\xa9 \xff\x80'
cat >"$WORK/json_lines.py" <<'EOF'
import json, os, sys
want = os.fsencode(sys.argv[2]).decode("utf-8", "replace") if len(sys.argv) > 2 else None
n = 0
for raw in open(sys.argv[1], "rb").read().splitlines():
    if not raw.startswith(b"{"):
        sys.exit("a text line among JSON ones: %r" % raw)
    d = json.loads(raw.decode("utf-8"))  # a JSON line is valid UTF-8 whatever it logs
    assert set(d) == {"ts", "level", "msg"}, d
    assert d["level"] in ("error", "warn", "info", "debug"), d
    assert len(d["ts"]) == 24 and d["ts"].endswith("Z") and d["ts"][10] == "T", d
    if want is not None:
        assert want in d["msg"], (want, d["msg"])
    n += 1
print(n)
EOF
expect_exit "log-format json, odd path" 1 "$DAYSHARD" count --log-format json --data "$WORK/$odd" --day 2026-01-21
# The store's error and the command's own one-line reason, both JSON, both naming the path.
expect_eq "JSON log lines with the odd message" 2 "$("$PY" "$WORK/json_lines.py" "$WORK/err" "$WORK/$odd")"
expect_exit "DAYSHARD_LOG_FORMAT=json" 1 env DAYSHARD_LOG_FORMAT=json "$DAYSHARD" count --data "$WORK/nope" --day 2026-01-21
expect_eq "JSON log lines from the environment" 2 "$("$PY" "$WORK/json_lines.py" "$WORK/err")"
expect_exit "a usage error under --log-format json" 2 "$DAYSHARD" count --log-format json --data "$WORK/a" --day 2026-13-01
expect_eq "the usage error is a JSON line too" 1 "$("$PY" "$WORK/json_lines.py" "$WORK/err" "--day")"
expect_exit "--log-format text beats DAYSHARD_LOG_FORMAT" 1 env DAYSHARD_LOG_FORMAT=json "$DAYSHARD" count --log-format text --data "$WORK/nope" --day 2026-01-21
grep -q "^dayshard: error: .*nope" "$WORK/err" && ok || fail "text log line: $(cat "$WORK/err")"
expect_exit "bad --log-format" 2 "$DAYSHARD" count --log-format xml --data "$WORK/a" --day 2026-01-21
expect_exit "--log-format without value" 2 "$DAYSHARD" count --data "$WORK/a" --day 2026-01-21 --log-format

# ---- the settings are the typed command's, not its children's ---------------------------------
# loadtest starts `dayshard run` nodes; DAYSHARD_CONFIG (a loadtest file, whose keys run would
# refuse) and the other DAYSHARD_* variables must not reach them.
printf 'events = 3000\nrate = 3000\nqueries = 0\nout = %s\n' "$WORK/lt" >"$WORK/lt.properties"
expect_exit "loadtest from DAYSHARD_CONFIG" 0 env DAYSHARD_CONFIG="$WORK/lt.properties" DAYSHARD_JSON=1 \
  timeout 120 "$DAYSHARD" loadtest
expect_eq "loadtest stored what it produced" "3000 3000" \
  "$(json_get "$WORK/lt/report.json" '"%d %d" % (d["runs"][0]["events_produced"], d["runs"][0]["events_stored"])' 2>&1)"

# ---- Kafka: a node and a producer from one shared file -----------------------------------------
"$PY" -c 'import kafka' 2>/dev/null || { echo "SKIP (Kafka part): python3-kafka is not installed"; finish; exit $?; }
start_broker --partitions 4
cat >"$WORK/node.properties" <<EOF
# one file for the node and its producer
brokers = $BOOT
topic = orders
kafka.client.id = dayshard-config-test
log-format = json
run.group = config-test
run.data = $WORK/node
run.gsi = off
run.shardmap-topic = off
run.http = 127.0.0.1:0
run.commit-interval-ms = 50
run.kafka.session.timeout.ms = 6000
run.kafka.heartbeat.interval.ms = 1000
produce.kafka.linger.ms = 5
produce.events = 500
produce.json = yes
EOF
expect_exit "config check node.properties" 0 "$DAYSHARD" config check "$WORK/node.properties"
# kafka.* keys reach librdkafka: an unknown property is refused with librdkafka's own words,
# from the file and from DAYSHARD_KAFKA_*; the environment beats the file for a property too.
printf 'kafka.no.such.property = 1\n' >"$WORK/kbad.properties"
expect_exit "kafka.* unknown property" 2 "$DAYSHARD" produce --config "$WORK/kbad.properties" --brokers "$BOOT" --topic orders --events 1
grep -q 'No such configuration property: "no.such.property"' "$WORK/err" && ok ||
  fail "librdkafka's message missing: $(cat "$WORK/err")"
expect_exit "DAYSHARD_KAFKA_ bad value" 2 env DAYSHARD_KAFKA_LINGER_MS=abc "$DAYSHARD" produce --brokers "$BOOT" --topic orders --events 1
grep -q "Invalid value for configuration property" "$WORK/err" && ok || fail "env kafka property: $(cat "$WORK/err")"
printf 'kafka.linger.ms = abc\n' >"$WORK/klinger.properties"
expect_exit "DAYSHARD_KAFKA_ beats the file" 0 env DAYSHARD_KAFKA_LINGER_MS=2 "$DAYSHARD" produce \
  --config "$WORK/klinger.properties" --brokers "$BOOT" --topic warmup --events 10 --json
expect_eq "warm-up acked" 10 "$(json_get "$WORK/out" 'd["acked"]')"

: >"$WORK/node.out"
"$DAYSHARD" run --config "$WORK/node.properties" </dev/null >"$WORK/node.out" 2>"$WORK/node.log" 3>&- &
node_pid=$!
wait_printed "$WORK/node.out" "$node_pid"
[[ $(head -n 1 "$WORK/node.out") == 127.0.0.1:* ]] && ok || fail "run.http: no address printed"
expect_exit "produce from the shared file" 0 "$DAYSHARD" produce --config "$WORK/node.properties"
expect_eq "produce: acked" 500 "$(json_get "$WORK/out" 'd["acked"]')"
"$DAYSHARD" generate --events 500 >"$WORK/gen.jsonl"
wait_counts "node from the shared file" "$(truth "$WORK/gen.jsonl")" 60 "$WORK/node"
[[ ! -e $WORK/node/gsi ]] && ok || fail "run.gsi = off: the node built an index"
stop_node node "$node_pid"
lines=$("$PY" "$WORK/json_lines.py" "$WORK/node.log" || echo 0)
((lines >= 3)) && ok || fail "the node wrote $lines JSON log lines"
# Every line the node wrote is JSON, its final summary too.
expect_eq "node log: non-JSON lines" 0 "$(grep -c -v '^{' "$WORK/node.log")"
grep -q '"msg":"run: stopped: ' "$WORK/node.log" && ok || fail "node log: no JSON summary line"
stop_broker

finish
