#!/usr/bin/env bash
# The main job: install what is missing, build, and run `dayshard demo`. Extra arguments go to
# the demo (see ./build/dayshard demo --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target dayshard >/dev/null
exec ./build/dayshard demo "$@"
