#!/usr/bin/env bash
# The node's back-pressure path (what the GSI builder will drive): while the node is asked to
# pause (here through the test hook DS_TEST_PAUSE_FILE), nothing new is consumed or stored
# although the topic grows; once resumed it catches up exactly, with no loss and no duplicate.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_lib.sh"

start_broker --partitions 4
"$DAYSHARD" generate --events 6000 --profile busy-day --seed 11 >"$WORK/all.jsonl"
head -n 3000 "$WORK/all.jsonl" >"$WORK/first.jsonl"
tail -n 3000 "$WORK/all.jsonl" >"$WORK/second.jsonl"
first=$(truth "$WORK/first.jsonl")
all=$(truth "$WORK/all.jsonl")

# DS_LOG=debug: the node logs each pause and resume of its consumption, which the test waits for.
export DS_TEST_PAUSE_FILE=$WORK/pause DS_LOG=debug
start_node n1 "$WORK/data" pause
unset DS_TEST_PAUSE_FILE DS_LOG
wait_assigned n1 30 || die "the node got no partitions"
kcat_produce "$WORK/first.jsonl" || fail "kcat produce"
wait_counts "before the pause" "$first" 60 "$WORK/data"

touch "$WORK/pause"
wait_paused n1 30 || fail "the node did not pause within 30 s"
kcat_produce "$WORK/second.jsonl" || fail "kcat produce"
sleep 3
expect_eq "nothing stored while paused" "$first" "$(day_counts "$WORK/data")"

rm "$WORK/pause"
wait_counts "after resuming" "$all" 60 "$WORK/data"
stop_node n1 "$NODE_PID"
pauses=$(grep -o '[0-9]* back-pressure pauses' "$WORK/n1.log" | tail -1 | cut -d' ' -f1)
((pauses >= 1)) && ok || fail "the node reported no pause: '$pauses'"
stop_broker
finish
