#!/usr/bin/env bash
# System calls per request of `vantage proxy` builds beside nginx and
# HAProxy, counted by `strace -c -f` attached to each proxy's one worker:
# a count, so it does not depend on what else the machine runs (only the
# batching of `epoll_wait` does, a little, with the request rate).
# Same backend and proxy settings as run.sh (nginx answering a 13-byte
# body; one worker each). Two loads per proxy: N requests over one
# keep-alive connection (`h2load --h1 -c1`), then wrk -t1 -c32 for D
# seconds (its request count from wrk's own summary). SBAC (hybrid, a
# fresh session cookie) is run for each vantage build as well.
#
# Usage: bash bench/proxy/syscalls.sh BINARY [BINARY...]
#   N=5000 D=3 bash bench/proxy/syscalls.sh target/release/vantage
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }
for tool in nginx haproxy strace h2load wrk curl taskset; do
  command -v "$tool" >/dev/null || { echo "$0: $tool is not installed" >&2; exit 1; }
done
n=${N:-5000}
duration=${D:-3}
. "$(dirname "$0")/peers.sh"
bench_scratch syscalls

BACKEND=127.0.0.1:18180
PROXY=127.0.0.1:18181
NGINX=127.0.0.1:18183
HAPROXY=127.0.0.1:18184
write_backend "$work/backend" $BACKEND 'hello, world\n'
write_nginx_proxy "$work/nginx" $NGINX $BACKEND
write_haproxy "$work/haproxy.cfg" $HAPROXY $BACKEND
write_vantage "$work/plain.toml" $PROXY $BACKEND
write_vantage "$work/sbac.toml" $PROXY $BACKEND "$(session_key)"

taskset -c 1 nginx -c "$work/backend/nginx.conf" -p "$work/backend" -g 'daemon off;' & pids+=($!)
taskset -c 0 nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" -g 'daemon off;' & pids+=($!)
taskset -c 0 haproxy -f "$work/haproxy.cfg" -q & pids+=($!)
haproxy_pid=$!
wait_for $BACKEND; wait_for $NGINX; wait_for $HAPROXY
nginx_worker=$(pgrep -P "$(cat "$work/nginx/nginx.pid")" | head -1)

# measure NAME PID ADDRESS [CURL HEADER...]: syscalls per request, both loads.
measure() {
  local name=$1 pid=$2 address=$3; shift 3
  local load requests out
  for load in c1 c32; do
    out="$work/strace.${name//\//-}.$load"
    strace -c -f -q -p "$pid" -o "$out" & local tracer=$!
    sleep 0.5
    if [ $load = c1 ]; then
      timeout 120 h2load --h1 -n "$n" -c 1 "$@" "http://$address/" | grep -q "$n succeeded" \
        || { echo "h2load through $name: not every request succeeded" >&2; exit 1; }
      requests=$n
    else
      requests=$(timeout 60 taskset -c 1 wrk -t1 -c32 -d"${duration}s" "$@" "http://$address/" \
        | awk '/requests in/ { print $1 }')
    fi
    kill -INT $tracer; wait $tracer 2>/dev/null || true
    awk -v r="$requests" -v name="$name" -v load="$load" '
      $NF ~ /^[a-z_0-9]+$/ && $(NF-1) ~ /^[0-9]+$/ && $NF != "total" {
        if (NF == 6) { calls = $4; errors = $5 } else { calls = $4; errors = 0 }
        per[$NF] = calls / r; err[$NF] = errors / r; total += calls / r
      }
      END {
        printf "%-22s %-4s %7d req  %6.2f syscalls/request:", name, load, r, total
        for (s in per) if (per[s] >= 0.005) printf " %s %.2f%s", s, per[s], (err[s] > 0 ? sprintf(" (%.2f failed)", err[s]) : "")
        printf "\n"
      }' "$out"
  done
}

echo "machine: $(nproc) CPUs, kernel $(uname -r), $(date -u '+%Y-%m-%d %H:%M UTC'); strace $(strace -V | head -1 | awk '{print $NF}'); c1: h2load --h1 -c1 -n $n; c32: wrk -t1 -c32 -d${duration}s"
measure nginx "$nginx_worker" $NGINX
measure haproxy "$haproxy_pid" $HAPROXY
for binary in "$@"; do
  for mode in plain sbac; do
    taskset -c 0 "$binary" proxy run "$work/$mode.toml" 2>"$work/vantage.log" & vantage_pid=$!
    wait_for $PROXY
    header=()
    if [ $mode = sbac ]; then
      cookie=$(curl -fs -D - -o /dev/null "http://$PROXY/" | sed -n 's/^[Ss]et-[Cc]ookie: \([^;]*\);.*/\1/p')
      [ -n "$cookie" ] || { echo "the SBAC proxy set no cookie" >&2; exit 1; }
      header=(-H "Cookie: $cookie")
    fi
    measure "$(basename "$(dirname "$binary")")/$mode" $vantage_pid $PROXY "${header[@]}"
    kill $vantage_pid; wait $vantage_pid 2>/dev/null || true
  done
done
