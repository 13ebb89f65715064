#!/bin/sh
# Alternates two bench_heat binaries (the same bench/heat.c built against two versions of
# shard/heat.c) and prints each figure's median over the runs, old and new side by side, with
# the ratio new/old. The machine is shared: alternating keeps both under the same load, and the
# thread-CPU figures leave out time spent waiting for a core.
#
# Usage: bench/heat_compare.sh OLD_BINARY NEW_BINARY [events=2000000] [rounds=3]
# e.g. (old tree: a worktree or `git archive` of the base commit, with this bench/heat.c copied in)
#   cmake -S old -B old/build -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build old/build --target bench_heat
#   bench/heat_compare.sh old/build/bench/bench_heat build/bench/bench_heat 2000000 5
set -eu
old=$1
new=$2
events=${3:-2000000}
rounds=${4:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
i=1
while [ "$i" -le "$rounds" ]; do
    "$old" "$events" 3 >"$out/old.$i"
    "$new" "$events" 3 >"$out/new.$i"
    i=$((i + 1))
done
# One figure per line: "<label>: <number> ns/event" (the first number after the colon).
python3 - "$out" "$rounds" <<'PY'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def figures(path):
    got = {}
    for line in open(path):
        m = re.match(r"\s+(thread CPU, [^:]*|observe|routing \+ observe|snapshot[^:]*):\s+([0-9.]+)", line)
        if m:
            got[m.group(1)] = float(m.group(2))
        m = re.match(r"\s+(thread CPU, the consumer thread's per-event work|the consumer thread's per-event work): decode \+ route ([0-9.]+).*with heat ([0-9.]+)", line)
        if m:
            got[m.group(1) + ": decode + route"] = float(m.group(2))
            got[m.group(1) + ": heat added (with - without)"] = float(m.group(3)) - float(m.group(2))
    return got
old = [figures(f"{out}/old.{i}") for i in range(1, rounds + 1)]
new = [figures(f"{out}/new.{i}") for i in range(1, rounds + 1)]
print(f"bench_heat old vs new, {rounds} alternated rounds (each a median of 3 runs); medians:")
for key in old[0]:
    o = statistics.median(r[key] for r in old)
    n = statistics.median(r[key] for r in new)
    print(f"  {key}: old {o:.1f}  new {n:.1f}  new/old {n / o:.3f}")
PY
