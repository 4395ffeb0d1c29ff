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
work=$(mktemp -d /tmp/vantage-proxy-syscalls.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

BACKEND=127.0.0.1:18180
PROXY=127.0.0.1:18181
NGINX=127.0.0.1:18183
HAPROXY=127.0.0.1:18184
mkdir -p "$work/backend" "$work/nginx"
cat > "$work/backend/nginx.conf" <<CONF
worker_processes 1;
error_log $work/backend/error.log;
pid $work/backend/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  server { listen $BACKEND; location / { return 200 "hello, world\n"; } }
}
CONF
cat > "$work/nginx/nginx.conf" <<CONF
worker_processes 1;
error_log $work/nginx/error.log;
pid $work/nginx/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  upstream backend { server $BACKEND; keepalive 64; }
  server {
    listen $NGINX;
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
CONF
cat > "$work/haproxy.cfg" <<CONF
global
  nbthread 1
  maxconn 4096
defaults
  mode http
  timeout connect 1s
  timeout client 30s
  timeout server 30s
  http-reuse always
frontend in
  bind $HAPROXY
  default_backend out
backend out
  server b1 $BACKEND
CONF
key=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
for name in plain sbac; do
  extra=""
  [ "$name" = sbac ] && extra="[sbac]
strategy = \"hybrid\"
keys = [\"$key\"]"
  cat > "$work/$name.toml" <<CONF
listen = "$PROXY"
upstreams = ["$BACKEND"]
workers = 1
[utilization]
concurrency = 1000
$extra
CONF
done

wait_for() {
  for _ in $(seq 100); do curl -fs "http://$1/" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "nothing answers on $1" >&2; exit 1
}
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
