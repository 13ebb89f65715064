# Helpers for the query service scripts, sourced after lib.sh: start `dayshard serve` on a free
# port and stop it. Not a test itself: CTest registers test_*.sh only.
SERVE_PID=""
SERVE_ADDR=""

# serve_start DIR [extra serve options...]: starts the service, waits for its address line.
serve_start() {
  local dir=$1
  shift
  # Empty the file first: the shell truncates it only once the child runs, and reading it
  # before then would give the address of the service stopped last.
  : >"$WORK/serve.out"
  SERVE_ADDR=""
  "$DAYSHARD" serve --data "$dir" --http 127.0.0.1:0 "$@" >"$WORK/serve.out" 2>"$WORK/serve.err" &
  SERVE_PID=$!
  wait_printed "$WORK/serve.out" "$SERVE_PID"
  SERVE_ADDR=$(head -1 "$WORK/serve.out" 2>/dev/null || true)
  [[ -z $SERVE_ADDR ]] || return 0
  echo "serve did not start: $(cat "$WORK/serve.err")" >&2
  exit 1
}

# serve_stop: SIGTERM, and the exit status must be 0.
serve_stop() {
  [[ -n $SERVE_PID ]] || return 0
  kill -TERM "$SERVE_PID"
  local rc=0
  wait "$SERVE_PID" || rc=$?
  expect_eq "serve exit status after SIGTERM" 0 "$rc"
  SERVE_PID=""
}

serve_cleanup() {
  [[ -n $SERVE_PID ]] && kill -KILL "$SERVE_PID" 2>/dev/null || true
  for pid in $(jobs -p); do kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap serve_cleanup EXIT

# get PATH [curl options...]: body to $WORK/body, prints the status code.
get() {
  local path=$1
  shift
  curl -s -o "$WORK/body" -w '%{http_code}' "$@" "http://$SERVE_ADDR$path"
}
