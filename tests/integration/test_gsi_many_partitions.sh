#!/usr/bin/env bash
# The by-customer index follows a data directory of 7,168 partitions (28 days at 256 shards, as
# adaptive sharding makes of a busy month), more than one fixed-size cursor record could list
# (3,276). Checked: `gsi rebuild` indexes every event, fsck finds the index equal to the base data,
# a heavy customer's pages list exactly its orders in the file, and `gsi compact` keeps them.
source "$(dirname "$0")/lib.sh"

DATA=$WORK/data
"$DAYSHARD" generate --events 60000 --customers 2000 --seed 7 >"$WORK/events.jsonl"
"$DAYSHARD" ingest --data "$DATA" --model events --shards 256 <"$WORK/events.jsonl" >/dev/null
segments=$(find "$DATA/parts" -name '*.seg' | wc -l)
[[ $segments -gt 3276 ]] && ok || fail "only $segments partitions written"

expect_exit "gsi rebuild over $segments partitions" 0 "$DAYSHARD" gsi rebuild --data "$DATA"
"$DAYSHARD" fsck --data "$DATA" >"$WORK/fsck" 2>&1 || fail "fsck: $(tail -3 "$WORK/fsck")"
grep -q 'gsi: .*clean: 60000 entries' "$WORK/fsck" && ok || fail "index not clean: $(cat "$WORK/fsck")"

# The customer with the most orders in the file, and how many.
read -r customer expected < <("$PY" - "$WORK/events.jsonl" <<'EOF'
import collections, json, sys
c = collections.Counter(json.loads(line)["customer_id"] for line in open(sys.argv[1]))
customer, n = c.most_common(1)[0]
print(customer, n)
EOF
)

# count_pages: every page of the customer's orders, 100 at a time, through --cursor.
count_pages() {
  local cursor="" n=0 page
  while :; do
    page=$("$DAYSHARD" orders --data "$DATA" --customer "$customer" --limit 100 \
      ${cursor:+--cursor "$cursor"}) || { fail "orders --cursor $cursor"; break; }
    n=$((n + $(grep -cE ' [0-9]{4}-[0-9]{2}-[0-9]{2}T' <<<"$page" || true)))
    cursor=$(sed -n 's/.*next: \([0-9a-f]*\).*/\1/p' <<<"$page")
    [[ -n $cursor ]] || break
  done
  echo "$n"
}
expect_eq "customer $customer's orders, paged" "$expected" "$(count_pages)"
expect_exit "gsi compact" 0 "$DAYSHARD" gsi compact --data "$DATA"
expect_eq "customer $customer's orders, paged after compaction" "$expected" "$(count_pages)"
finish
