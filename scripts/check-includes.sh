#!/usr/bin/env bash
# STYLE.md section 1: a folder's files may include another folder's public header only
# ("storage/storage.h"), never its private ones, and the dependency DAG holds:
#   common <- shard <- storage <- ingest;  storage <- query <- cli
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A allowed=(
  [common]="common"
  [shard]="common shard"
  [storage]="common shard storage"
  [ingest]="common shard storage ingest"
  [query]="common shard storage query"
  [cli]="common shard storage ingest query cli"
  [bench]="common shard storage ingest query bench"
  [tests]="common shard storage ingest query tests"
)
status=0
for folder in "${!allowed[@]}"; do
  [[ -d $folder ]] || continue
  while IFS= read -r -d '' file; do
    while IFS= read -r inc; do
      target=${inc%%/*}
      header=${inc#*/}
      if [[ " ${allowed[$folder]} " != *" $target "* ]]; then
        echo "$file: includes $inc: $folder may not depend on $target" >&2
        status=1
      elif [[ $target != "$folder" && $target != tests && "$header" != "$target.h" ]]; then
        # Tests may reach private headers of the unit they test; nobody else may.
        if [[ $folder != tests ]]; then
          echo "$file: includes $inc: only $target/$target.h is public" >&2
          status=1
        fi
      fi
    done < <(grep -oE '^#include "[a-z_]+/[a-z_./]+"' "$file" | sed -E 's/#include "(.*)"/\1/')
  done < <(find "$folder" -name '*.[ch]' -print0)
done
if [[ $status == 0 ]]; then
  echo "include boundaries: ok"
fi
exit $status
