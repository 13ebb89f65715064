#!/usr/bin/env bash
# Both I/O paths write the same data: io_uring, plain pwrite/fdatasync chosen with --io sync,
# and the automatic fallback when io_uring is refused (forced with DS_IO_URING_DISABLE=1, as a
# container's seccomp filter would). Answers and fsck are identical whichever path wrote.
source "$(dirname "$0")/lib.sh"
"$DAYSHARD" generate --events 200000 --profile busy-day --seed 11 > "$WORK/events.jsonl"
query="--day 2026-01-01 --to 2026-01-28 --by shard --json"

expect_exit "ingest --io sync" 0 "$DAYSHARD" ingest --data "$WORK/sync" --io sync "$WORK/events.jsonl"
grep -q "I/O sync" "$WORK/out" && ok || fail "--io sync did not use sync: $(cat "$WORK/out")"
DS_IO_URING_DISABLE=1 DS_LOG=info "$DAYSHARD" ingest --data "$WORK/fallback" "$WORK/events.jsonl" \
  > "$WORK/out" 2> "$WORK/err" && ok || fail "fallback ingest failed"
grep -q "I/O sync" "$WORK/out" && ok || fail "fallback did not use sync: $(cat "$WORK/out")"
grep -qi "io_uring unavailable" "$WORK/err" && ok || fail "fallback not logged: $(cat "$WORK/err")"
expect_exit "forced uring refused" 1 env DS_IO_URING_DISABLE=1 "$DAYSHARD" ingest --data "$WORK/never" --io uring "$WORK/events.jsonl"

"$DAYSHARD" count --data "$WORK/sync" $query | sed -E "s/\"(bytes|blocks)\":[0-9]*,//g" > "$WORK/sync.json"
"$DAYSHARD" count --data "$WORK/fallback" $query | sed -E "s/\"(bytes|blocks)\":[0-9]*,//g" > "$WORK/fallback.json"
cmp -s "$WORK/sync.json" "$WORK/fallback.json" && ok || fail "sync and fallback answers differ"

if "$DAYSHARD" ingest --data "$WORK/uring" --io uring "$WORK/events.jsonl" > "$WORK/out" 2> "$WORK/err"; then
  grep -q "I/O uring" "$WORK/out" && ok || fail "--io uring did not use uring"
  "$DAYSHARD" count --data "$WORK/uring" $query | sed -E "s/\"(bytes|blocks)\":[0-9]*,//g" > "$WORK/uring.json"
  cmp -s "$WORK/sync.json" "$WORK/uring.json" && ok || fail "uring and sync answers differ"
  expect_exit "fsck uring" 0 "$DAYSHARD" fsck --data "$WORK/uring"
else
  echo "io_uring refused here ($(head -c 200 "$WORK/err")): uring half skipped"
fi
expect_exit "fsck sync" 0 "$DAYSHARD" fsck --data "$WORK/sync"
expect_exit "fsck fallback" 0 "$DAYSHARD" fsck --data "$WORK/fallback"
finish
