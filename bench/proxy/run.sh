#!/usr/bin/env bash
# `vantage proxy` beside nginx and HAProxy as reverse proxies in front of
# the same backend (nginx answering a 13-byte body), each proxy with one
# worker thread, small responses over keep-alive (wrk). See
# bench/proxy/README.md for what is measured and the recorded result.
#
# Usage, from the repository root (root only for taskset on some systems):
#   bash bench/proxy/run.sh                 # 10 s per throughput run, 5 s per latency run
#   SECONDS_PER_RUN=5 RUNS=1 bash bench/proxy/run.sh
#   VANTAGE_BINARY=/path/to/vantage bash bench/proxy/run.sh   # that build, none made
#
# Core pinning on this 2-CPU machine: every proxy on CPU 0; the backend
# and wrk on CPU 1. "wrk direct to the backend" runs the same wrk and
# backend work on CPU 1 without a proxy: when it is faster than every
# proxied run, CPU 1 (load generator and backend) was not the bottleneck.
set -euo pipefail
cd "$(dirname "$0")/../.."

. bench/quiet.sh
require_tools bench/proxy/run.sh nginx haproxy wrk taskset curl

duration=${SECONDS_PER_RUN:-10}
runs=${RUNS:-1}
connections=${CONNECTIONS:-32}
target=${CARGO_TARGET_DIR:-target}
# VANTAGE_BINARY=path/to/vantage: that binary, not built here (an A/B of builds).
if [ -n "${VANTAGE_BINARY:-}" ]; then
  vantage=$VANTAGE_BINARY
else
  cargo build --release -p vantage
  vantage="$target/release/vantage"
fi

. bench/proxy/peers.sh
bench_scratch bench

BACKEND=127.0.0.1:18080
VANTAGE=127.0.0.1:18081
VANTAGE_SBAC=127.0.0.1:18082
NGINX=127.0.0.1:18083
HAPROXY=127.0.0.1:18084

write_backend "$work/backend" $BACKEND 'hello, world\n'
write_nginx_proxy "$work/nginx" $NGINX $BACKEND
write_haproxy "$work/haproxy.cfg" $HAPROXY $BACKEND
write_vantage "$work/vantage-plain.toml" $VANTAGE $BACKEND
write_vantage "$work/vantage-sbac.toml" $VANTAGE_SBAC $BACKEND "$(session_key)"

taskset -c 1 nginx -c "$work/backend/nginx.conf" -p "$work/backend" -g 'daemon off;' & pids+=($!)
taskset -c 0 nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" -g 'daemon off;' & pids+=($!)
taskset -c 0 haproxy -f "$work/haproxy.cfg" -q & pids+=($!)
taskset -c 0 "$vantage" proxy run "$work/vantage-plain.toml" 2>"$work/vantage-plain.log" & pids+=($!); vantage_plain=$!
taskset -c 0 "$vantage" proxy run "$work/vantage-sbac.toml" 2>"$work/vantage-sbac.log" & pids+=($!); vantage_sbac=$!
for address in $BACKEND $VANTAGE $VANTAGE_SBAC $NGINX $HAPROXY; do
  wait_for "$address"
done
# A session cookie, so the SBAC runs measure sessions in progress (a
# verification per request), not one new session per request. wrk keeps
# the cookie it starts with and ignores Set-Cookie, so each SBAC run takes
# a fresh one, as a browser holds the latest (a cookie older than T/16 is
# re-issued on every request: a client that never stores cookies).
fresh_cookie() {
  cookie=$(curl -fs -D - -o /dev/null "http://$VANTAGE_SBAC/" | sed -n 's/^[Ss]et-[Cc]ookie: \([^;]*\);.*/\1/p')
  [ -n "$cookie" ] || { echo "the SBAC proxy set no cookie" >&2; exit 1; }
}
fresh_cookie

# open_loop NAME ADDRESS RATE [HEADER]: p99 latency in µs of `oha -q
# RATE` (open loop: requests sent on schedule, latency counted from when
# each was due), pinned with the load generator on CPU 1.
open_loop() {
  local name=$1 address=$2 rate=$3 header=${4:-}
  local args=(--no-tui --output-format json -z "${duration}s" -q "$rate" -c "$connections" --latency-correction)
  [ -n "$header" ] && args+=(-H "$header")
  taskset -c 1 oha "${args[@]}" "http://$address/" > "$work/oha-$name.json"
  python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
codes = r.get("statusCodeDistribution", {})
# Requests still open when the run ends are not failures.
errors = {e: n for e, n in r.get("errorDistribution", {}).items() if e != "aborted due to deadline"}
bad = sum(n for c, n in codes.items() if c != "200") + sum(errors.values())
p99 = (r.get("latencyPercentiles") or {}).get("p99")
print("%.0f %d %.0f" % (p99 * 1e6 if p99 is not None else float("nan"), bad, r["summary"]["requestsPerSec"]))
' "$work/oha-$name.json"
}

# run NAME ADDRESS PID [HEADER]: one throughput run and one latency run.
run() {
  local name=$1 address=$2 pid=$3 header=${4:-}
  local args=(-t1 "-c$connections" "-d${duration}s" --latency)
  [ -n "$header" ] && args+=(-H "$header")
  local before after
  [ "$pid" != - ] && before=$(cpu_seconds "$pid")
  local out
  out=$(taskset -c 1 wrk "${args[@]}" "http://$address/")
  [ "$pid" != - ] && after=$(cpu_seconds "$pid")
  local rps errors
  rps=$(awk '/^Requests\/sec/ { print $2 }' <<<"$out")
  errors=$(awk '/Non-2xx|Socket errors/ { print }' <<<"$out" | tr '\n' ' ')
  local cpu=-
  [ "$pid" != - ] && cpu=$(awk -v a="$before" -v b="$after" -v d="$duration" 'BEGIN { printf "%.0f", 100 * (b - a) / d }')
  # Latency: one connection, closed loop.
  local lat_args=(-t1 -c1 "-d$(( duration / 2 > 0 ? duration / 2 : 1 ))s" --latency)
  [ -n "$header" ] && lat_args+=(-H "$header")
  local lat p50 p99
  lat=$(taskset -c 1 wrk "${lat_args[@]}" "http://$address/")
  p50=$(awk '$1 == "50%" { print $2 }' <<<"$lat")
  p99=$(awk '$1 == "99%" { print $2 }' <<<"$lat")
  # CPU time the proxy spent per request, in µs: less sensitive to other
  # work on the machine than the request rate.
  local per_request=-
  [ "$pid" != - ] && per_request=$(awk -v a="$before" -v b="$after" -v r="$rps" -v d="$duration" 'BEGIN { printf "%.1f", 1e6 * (b - a) / (r * d) }')
  printf '%-22s %12s req/s  proxy CPU %4s %% (%5s us/request)  1-conn p50 %8s  p99 %8s  %s\n' "$name" "$rps" "$cpu" "$per_request" "$p50" "$p99" "$errors"
  echo "${name// /} $rps $p50 $p99" >> "$work/results"
}

nginx_proxy_pid=$(cat "$work/nginx/nginx.pid" 2>/dev/null || echo -)
nginx_worker=$(pgrep -P "$nginx_proxy_pid" | head -1 || echo -)
haproxy_pid=${pids[2]}

echo "machine: $(nproc) CPUs,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), kernel $(uname -r), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "$(nginx -v 2>&1), $(haproxy -v | head -1 | cut -d' ' -f1-3), wrk $(wrk --version 2>&1 | head -1 | cut -d' ' -f2); wrk -t1 -c$connections -d${duration}s; proxies on CPU 0, backend and wrk on CPU 1"
for run_number in $(seq 1 "$runs"); do
  echo
  echo "## run $run_number of $runs"
  # Others share this machine: say how busy it was rather than wait.
  echo "machine $(busy_percent)% busy just before the run"
  : > "$work/results"
  run "direct (no proxy)" $BACKEND -
  run "vantage proxy" $VANTAGE "$vantage_plain"
  fresh_cookie
  run "vantage proxy + SBAC" $VANTAGE_SBAC "$vantage_sbac" "Cookie: $cookie"
  run "nginx" $NGINX "${nginx_worker:--}"
  run "haproxy" $HAPROXY "$haproxy_pid"
  awk '
    function us(v) { if (v ~ /us$/) return v + 0; if (v ~ /ms$/) return 1000 * v; if (v ~ /s$/) return 1e6 * v; return v }
    { name = $1; rps[NR] = $(NF-2); p99[NR] = us($NF); }
    END {
      printf "ratios: vantage/nginx %.3f  vantage/haproxy %.3f  SBAC on/off %.3f\n", rps[2] / rps[4], rps[2] / rps[5], rps[3] / rps[2];
      printf "added p99 over direct (1 connection): vantage %.0f us, SBAC %.0f us, nginx %.0f us, haproxy %.0f us\n", p99[2] - p99[1], p99[3] - p99[1], p99[4] - p99[1], p99[5] - p99[1];
    }' "$work/results"

  # Open loop at 50 % of each proxy's own maximum just measured, and
  # direct to the backend at the same rate: the p99 each proxy adds.
  if ! command -v oha >/dev/null; then
    echo "open-loop phase skipped: oha is not installed (cargo install oha)"
    continue
  fi
  echo "open loop (oha -q, ${duration} s, -c$connections, latency corrected): p99 at 50 % of each proxy's maximum, and direct at the same rate"
  while read -r name rps _; do
    case $name in direct*) continue ;; esac
    rate=$(awk -v r="$rps" 'BEGIN { printf "%d", r / 2 }')
    case $name in
      vantageproxy) address=$VANTAGE; header="" ;;
      vantageproxy+SBAC) address=$VANTAGE_SBAC; fresh_cookie; header="Cookie: $cookie" ;;
      nginx) address=$NGINX; header="" ;;
      haproxy) address=$HAPROXY; header="" ;;
    esac
    read -r proxy_p99 proxy_bad proxy_rate < <(open_loop "$name" "$address" "$rate" "$header")
    read -r direct_p99 direct_bad direct_rate < <(open_loop "direct-$name" $BACKEND "$rate")
    printf '%-22s rate %7d/s (achieved %7.0f, direct %7.0f)  p99 %7s us, direct %7s us: added %7s us  (non-200 or errors: %s, direct %s)\n' \
      "$name" "$rate" "$proxy_rate" "$direct_rate" "$proxy_p99" "$direct_p99" \
      "$(awk -v a="$proxy_p99" -v b="$direct_p99" 'BEGIN { printf "%.0f", a - b }')" "$proxy_bad" "$direct_bad"
  done < "$work/results"
done
