#!/usr/bin/env bash
# The docs name only what exists, and every flag that exists is documented (docs_check.py):
# the repository's docs pass; then copies with one thing wrong each must fail, naming it: a
# flag renamed in a README command, a flag left out of docs/CONFIGURATION.md, an HTTP path, a
# metric, a fuzz target, an environment variable and link targets that do not exist. Nothing in
# the tree names an issue of the project or a file outside it.
source "$(dirname "$0")/lib.sh"

CHECK=("$PY" "$ROOT/tests/integration/docs_check.py" "$DAYSHARD" "$ROOT")

expect_exit "docs_check on the repository" 0 "${CHECK[@]}"
[[ $(cat "$WORK/err") == "" ]] && ok || fail "docs_check: $(head -c 2000 "$WORK/err")"
grep -qE "checked .*[0-9]{2,} flags" "$WORK/out" && ok || fail "docs_check checked few flags: $(cat "$WORK/out")"

# The present only: no doc, comment or test names one of the project's issues or points at a
# file outside the repository (history is CHANGELOG.md's and the commit messages'). A bug of
# another project ("librdkafka issue #4059") is a fact about that project and may be named.
# no_history DIR: prints each offending line of DIR's tracked-looking text files.
no_history() {
  grep -rnIiE "\bissues? #?[0-9]+|DESIGN\.md|STYLE\.md|\.\./shared/" "$1" \
    --exclude-dir=.git --exclude-dir='build*' --exclude-dir=corpus --exclude=CHANGELOG.md \
    --exclude=test_docs.sh | grep -viE "librdkafka issue|kafka issue" || true
}
expect_eq "no doc, comment or test names an issue or a file outside the repository" "" \
  "$(no_history "$ROOT" | head -n 5)"
mkdir -p "$WORK/history/tests"
printf '#!/bin/sh\n# Waits for the cursor (issue 26).\n' >"$WORK/history/tests/t.sh"
printf '/* the contract: DESIGN.md section 3 */\n' >"$WORK/history/x.c"
printf '/* librdkafka issue #4059 */\n' >"$WORK/history/y.c"
expect_eq "no_history finds an issue number and an outside file, not another project's bug" \
  "2" "$(no_history "$WORK/history" | wc -l)"

# copy_docs NAME: the docs alone under $WORK/NAME, as docs_check reads them.
copy_docs() {
  mkdir -p "$WORK/$1/deploy"
  cp -r "$ROOT/README.md" "$ROOT/docs" "$WORK/$1/"
  cp "$ROOT/deploy/README.md" "$WORK/$1/deploy/"
}

# A flag renamed where the README runs dayshard: the first `dayshard count ... --day` line.
copy_docs renamed
line=$(grep -n -m1 -E '^[^#]*dayshard count .*--day ' "$WORK/renamed/README.md" | cut -d: -f1)
[[ -n $line ]] && ok || fail "README.md runs no 'dayshard count --day': nothing to rename"
sed -i "${line}s/--day /--dday /" "$WORK/renamed/README.md"
expect_exit "docs_check, a README flag renamed" 1 "${CHECK[@]}" "$WORK/renamed"
grep -q "README.md:$line: .dayshard count. has no flag --dday" "$WORK/err" && ok ||
  fail "the renamed flag is not named: $(head -c 600 "$WORK/err")"

# A flag that exists but is missing from CONFIGURATION.md.
copy_docs missing
sed -i 's/--max-shards/--max-shardz/g' "$WORK/missing/docs/CONFIGURATION.md"
expect_exit "docs_check, --max-shards undocumented" 1 "${CHECK[@]}" "$WORK/missing"
grep -q "dayshard run --max-shards. exists but its section does not name it" "$WORK/err" && ok ||
  fail "the undocumented flag is not named: $(head -c 600 "$WORK/err")"
grep -q -- "--max-shardz is not a flag" "$WORK/err" && ok ||
  fail "the misspelt flag is not named: $(head -c 600 "$WORK/err")"

# Names that do not exist, one of each kind.
copy_docs names
cat >> "$WORK/names/docs/HTTP_API.md" <<'MD'

`GET /v1/nosuch`, `dayshard_nosuch_total`, `fuzz_nosuch`, `DS_NOSUCH_KNOB=1`, `dayshard nosuch`,
`dayshard gsi nosuch --data DIR`. See [the nowhere section](OPERATIONS.md#nowhere) and
[a missing file](NOSUCH.md).
MD
expect_exit "docs_check, names that do not exist" 1 "${CHECK[@]}" "$WORK/names"
for want in "HTTP path /v1/nosuch" "metric dayshard_nosuch_total" "fuzz target fuzz_nosuch" \
  "environment variable DS_NOSUCH_KNOB" "no command 'nosuch'" "dayshard gsi nosuch" \
  "link OPERATIONS.md#nowhere: docs/OPERATIONS.md has no heading" "link NOSUCH.md: no such file"; do
  grep -q "$want" "$WORK/err" && ok || fail "not named: $want ($(head -c 600 "$WORK/err"))"
done
finish
