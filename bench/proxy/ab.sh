#!/usr/bin/env bash
# A/B of `vantage proxy` builds by the proxy's CPU time per request: the
# builds given take turns on the same backend and pinning as run.sh
# (proxy on CPU 0; backend and wrk on CPU 1), ROUNDS rounds of
# `wrk -t1 -c32 -dSECONDS` each, with and without SBAC (hybrid, a valid
# session cookie on every request). CPU time per request depends much less
# than the request rate on what else runs on the machine; the load average
# is printed before each round.
#
# Usage: bash bench/proxy/ab.sh BINARY_A BINARY_B [...]
#   ROUNDS=3 SECONDS_PER_RUN=6 SBAC=1 bash bench/proxy/ab.sh old/vantage new/vantage
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }
for tool in nginx wrk taskset curl; do
  command -v "$tool" >/dev/null || { echo "$0: $tool is not installed" >&2; exit 1; }
done
rounds=${ROUNDS:-3}
duration=${SECONDS_PER_RUN:-6}
sbac=${SBAC:-1}
. "$(dirname "$0")/peers.sh"
bench_scratch ab

BACKEND=127.0.0.1:18090
PROXY=127.0.0.1:18091
write_backend "$work/backend" $BACKEND 'hello, world\n'
write_vantage "$work/plain.toml" $PROXY $BACKEND
write_vantage "$work/sbac.toml" $PROXY $BACKEND "$(session_key)"
taskset -c 1 nginx -c "$work/backend/nginx.conf" -p "$work/backend" -g 'daemon off;' & pids+=($!)

# one BINARY CONFIG: µs of proxy CPU per request and requests per second.
one() {
  local binary=$1 config=$2
  taskset -c 0 "$binary" proxy run "$config" 2>"$work/proxy.log" &
  local pid=$!
  wait_for $PROXY
  local header=()
  if [ "$config" = "$work/sbac.toml" ]; then
    local cookie
    cookie=$(curl -fs -D - -o /dev/null "http://$PROXY/" | sed -n 's/^[Ss]et-[Cc]ookie: \([^;]*\);.*/\1/p')
    header=(-H "Cookie: $cookie")
  fi
  local before after out rps
  before=$(cpu_seconds "$pid")
  out=$(taskset -c 1 wrk -t1 -c32 "-d${duration}s" "${header[@]}" "http://$PROXY/")
  after=$(cpu_seconds "$pid")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rps=$(awk '/^Requests\/sec/ { print $2 }' <<<"$out")
  grep -E 'Non-2xx|Socket errors' <<<"$out" | tr '\n' ' ' >&2 || true
  awk -v a="$before" -v b="$after" -v r="$rps" -v d="$duration" 'BEGIN { printf "%5.1f us/request (%6.0f req/s, %3.0f %% CPU)", 1e6 * (b - a) / (r * d), r, 100 * (b - a) / d }'
}

sleep 0.5
for round in $(seq 1 "$rounds"); do
  echo "round $round; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  for binary in "$@"; do
    line="  $binary: $(one "$binary" "$work/plain.toml")"
    [ "$sbac" = 1 ] && line="$line; SBAC $(one "$binary" "$work/sbac.toml")"
    echo "$line"
  done
done
