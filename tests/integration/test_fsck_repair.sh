#!/usr/bin/env bash
# fsck --repair that ends clean. A store built from the busy-day fixture plus a
# generated stream (one ingest per chunk, so partitions hold several blocks) is damaged as in
# the issue (a segment cut 37 bytes short, then 5 KB of garbage appended) and by a byte flipped
# in a block mid-segment. fsck finds both (exit 1, JSON), counts say damaged_blocks, repair
# quarantines the two blocks with records naming their source lines, fsck is clean after
# (exit 0), counts drop by exactly the quarantined events, the named source range holds those
# events, and the store takes new data.
# Then the default (orders) model, a stream without updates, so that every quarantined row is a
# lost order: the same torn tail of the busy day's largest segment; fsck --repair --json exits
# 0 with the quarantined events, as many lost orders, the next fsck is clean, and the busy day
# counts exactly that many fewer.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/fsck_lib.sh"

data="$WORK/data"
stream="$WORK/stream.jsonl"
cp "$FIXTURES/busy-day.jsonl" "$stream"
expect_exit "ingest fixture" 0 "$DAYSHARD" ingest --model events --data "$data" --shards 4 "$stream"
for seed in 1 2 3 4 5; do
  "$DAYSHARD" generate --events 3000 --profile busy-day --seed "$seed" >> "$stream"
  expect_exit "ingest chunk $seed" 0 "$DAYSHARD" ingest --data "$data" --resume "$stream"
done
count_json() { "$DAYSHARD" count --data "$data" --day 2026-01-01 --to 2026-01-31 --json; }
count_json > "$WORK/truth.json"
truth=$(json_get "$WORK/truth.json" 'd["count"]')
expect_eq "events stored" "$(wc -l < "$stream")" "$truth"
expect_eq "damaged_blocks is always there" 0 "$(json_get "$WORK/truth.json" 'd["damaged_blocks"]')"
expect_exit "fsck clean before" 0 "$DAYSHARD" fsck --data "$data" --json
expect_eq "fsck ok" True "$(json_get "$WORK/out" 'd["ok"]')"

# Usage errors with --json are usage errors (2).
expect_exit "fsck --json without --data" 2 "$DAYSHARD" fsck --json
expect_exit "fsck --json extra argument" 2 "$DAYSHARD" fsck --data "$data" --json extra
expect_exit "fsck --repair --json bad option" 2 "$DAYSHARD" fsck --data "$data" --repair --json --force

# The damage.
seg_a="$data/parts/2026-01-21/0/00000001.seg"
seg_b="$data/parts/2026-01-21/1/00000001.seg"
[[ $(segment_blocks "$seg_a" | wc -l) -ge 3 ]] && ok || fail "partition 0 has fewer than 3 blocks"
[[ $(segment_blocks "$seg_b" | wc -l) -ge 3 ]] && ok || fail "partition 1 has fewer than 3 blocks"
size_a=$(stat -c %s "$seg_a")
torn_tail "$seg_a" 5120
read -r mid_at mid_len < <(segment_blocks "$seg_b" | sed -n 2p)
flip_byte "$seg_b" $((mid_at + mid_len - 10))

expect_exit "fsck finds the damage" 1 "$DAYSHARD" fsck --data "$data"
grep -q "damaged" "$WORK/out" && ok || fail "fsck text says damaged: $(cat "$WORK/out")"
grep -q "00000001.seg: block at byte" "$WORK/out" && ok || fail "fsck names the block"
expect_exit "fsck --json finds the damage" 1 "$DAYSHARD" fsck --data "$data" --json
cp "$WORK/out" "$WORK/fsck1.json"
expect_eq "fsck json ok" False "$(json_get "$WORK/fsck1.json" 'd["ok"]')"
expect_eq "fsck json damaged_blocks" 2 "$(json_get "$WORK/fsck1.json" 'd["damaged_blocks"]')"
expect_eq "fsck json torn bytes" $((5120 - 37)) "$(json_get "$WORK/fsck1.json" 'd["torn_bytes"]')"
expect_eq "fsck json fields" "True" "$(json_get "$WORK/fsck1.json" 'all(k in d for k in ("quarantined_blocks","quarantined_events","quarantined_bytes","partitions","segments","blocks_ok","events_ok","orphan_segments","index"))')"

# Until repaired, a count touching the damage says so (the headers are intact: same number).
expect_exit "count --json over damage" 0 count_json
expect_eq "count damaged_blocks" 2 "$(json_get "$WORK/out" 'd["damaged_blocks"]')"
expect_eq "count before repair" "$truth" "$(json_get "$WORK/out" 'd["count"]')"
expect_exit "count text over damage" 0 "$DAYSHARD" count --data "$data" --day 2026-01-21
grep -q "touches 2 damaged blocks" "$WORK/err" && grep -q "fsck --data DIR --repair" "$WORK/err" \
  && ok || fail "count warning: $(cat "$WORK/err")"
expect_exit "count elsewhere is quiet" 0 "$DAYSHARD" count --data "$data" --day 2026-01-02
[[ ! -s "$WORK/err" ]] && ok || fail "count of an intact day warned: $(cat "$WORK/err")"

expect_exit "fsck --repair --json" 0 "$DAYSHARD" fsck --data "$data" --repair --json
cp "$WORK/out" "$WORK/repair.json"
expect_eq "repair ok" True "$(json_get "$WORK/repair.json" 'd["ok"]')"
expect_eq "repair quarantined blocks" 2 "$(json_get "$WORK/repair.json" 'd["quarantined_blocks"]')"
expect_eq "repair damaged after" 0 "$(json_get "$WORK/repair.json" 'd["damaged_blocks"]')"
quarantined=$(json_get "$WORK/repair.json" 'd["quarantined_events"]')
[[ $quarantined -gt 0 ]] && ok || fail "no events quarantined"
expect_exit "fsck after repair" 0 "$DAYSHARD" fsck --data "$data" --json
expect_eq "fsck after repair ok" True "$(json_get "$WORK/out" 'd["ok"]')"
expect_eq "fsck after: skipped ranges" 2 "$(json_get "$WORK/out" 'd["quarantined_total"]')"
expect_exit "count after repair" 0 count_json
expect_eq "count = truth - quarantined" $((truth - quarantined)) "$(json_get "$WORK/out" 'd["count"]')"
expect_eq "count damaged after" 0 "$(json_get "$WORK/out" 'd["damaged_blocks"]')"
expect_eq "segment keeps its committed length" "$size_a" "$(stat -c %s "$seg_a")"
expect_exit "repair again does nothing" 0 "$DAYSHARD" fsck --data "$data" --repair --json
expect_eq "second repair quarantines nothing" 0 "$(json_get "$WORK/out" 'd["quarantined_blocks"]')"

# quarantine/ holds the bytes and a record per block; together they account for every event.
records=("$data"/quarantine/*.json)
expect_eq "quarantine records" 2 "${#records[@]}"
expect_eq "quarantine bins" 2 "$(ls "$data"/quarantine/*.bin | wc -l)"
"$PY" - "$quarantined" "${records[@]}" > "$WORK/records.txt" <<'PY'
import json, os, sys
want = int(sys.argv[1]); total = 0
for path in sys.argv[2:]:
    r = json.load(open(path))
    assert r["committed"] is True and r["events"] > 0, r
    assert r["source_partition"] == -1 and r["source_offset_min"] <= r["source_offset_max"], r
    assert r["partition"] == "DAY#%s#%d" % (r["day"], r["shard"]), r
    assert os.path.getsize(os.path.join(os.path.dirname(path), r["bytes_file"])) == r["bytes_saved"]
    total += r["events"]
    print(r["day"], r["shard"], r["events"], r["source_offset_min"], r["source_offset_max"])
assert total == want, (total, want)
PY
[[ $? == 0 ]] && ok || fail "quarantine records"
expect_eq "records name both partitions" "0 1" "$(awk '{print $2}' "$WORK/records.txt" | sort | xargs)"

# The record names the source lines: fed into a fresh store, that range holds exactly the
# quarantined block's events in its partition.
read -r day shard events first last < <(grep " 1 " "$WORK/records.txt" | head -1)
sed -n "${first},${last}p" "$stream" > "$WORK/refeed.jsonl"
expect_exit "re-ingest the named range" 0 "$DAYSHARD" ingest --model events --data "$WORK/refeed" --shards 4 "$WORK/refeed.jsonl"
expect_exit "count the re-fed partition" 0 "$DAYSHARD" count --data "$WORK/refeed" --day "$day" --by shard --json
expect_eq "re-fed events of the partition" "$events" \
  "$(json_get "$WORK/out" "[g['count'] for g in d['groups'] if g['key'] == $shard][0]")"

# The store takes new data after the repair.
"$DAYSHARD" generate --events 500 --profile busy-day --seed 99 >> "$stream"
expect_exit "ingest after repair" 0 "$DAYSHARD" ingest --data "$data" --resume "$stream"
expect_exit "count after new data" 0 count_json
expect_eq "count grows by the new events" $((truth - quarantined + 500)) "$(json_get "$WORK/out" 'd["count"]')"
expect_exit "fsck after new data" 0 "$DAYSHARD" fsck --data "$data"

# ---- the default model ------------------------------------------------------------------------

odata="$WORK/orders"
"$DAYSHARD" generate --events 40000 --profile busy-day --seed 26 > "$WORK/orders.jsonl"
expect_exit "ingest (default model)" 0 "$DAYSHARD" ingest --data "$odata" --shards 2 "$WORK/orders.jsonl"
oseg=$(find "$odata/parts" -name '*.seg' -printf '%s %p\n' | sort -n | tail -n 1 | cut -d' ' -f2-)
oday=$(basename "$(dirname "$(dirname "$oseg")")")
expect_exit "count the busy day before" 0 "$DAYSHARD" count --data "$odata" --day "$oday" --json
obefore=$(json_get "$WORK/out" 'd["count"]')
torn_tail "$oseg" 5000
expect_exit "orders: fsck finds the torn tail" 1 "$DAYSHARD" fsck --data "$odata" --json
expect_exit "orders: fsck --repair ends clean" 0 "$DAYSHARD" fsck --data "$odata" --repair --json
cp "$WORK/out" "$WORK/orepair.json"
oq=$(json_get "$WORK/orepair.json" 'd["quarantined_events"]')
expect_eq "orders: quarantined events > 0, each a lost order, none reverted" "True $oq 0" \
  "$(json_get "$WORK/orepair.json" '"%s %d %d" % (d["quarantined_events"] > 0, d["orders_lost"], d["orders_reverted"])')"
expect_exit "orders: fsck after repair" 0 "$DAYSHARD" fsck --data "$odata" --json
expect_exit "orders: count the busy day after" 0 "$DAYSHARD" count --data "$odata" --day "$oday" --json
oafter=$(json_get "$WORK/out" 'd["count"]')
expect_eq "orders: the busy day drops by the quarantined events" $((obefore - oq)) "$oafter"
echo "orders: busy day $oday: $obefore orders before, fsck --repair quarantined $oq events" \
  "($(json_get "$WORK/orepair.json" '"%d blocks, %d orders lost, %d reverted" % (d["quarantined_blocks"], d["orders_lost"], d["orders_reverted"])')), $oafter after"
finish
