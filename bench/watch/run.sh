#!/usr/bin/env bash
# The watch daemon's cost: a server answering 10 KB responses to N new
# connections per second, bounded in time, with and without
# `vantage certes watch` capturing its port. See bench/watch/README.md for
# what is measured and the recorded result.
#
# Usage, from the repository root, as root (two network namespaces):
#   bash bench/watch/run.sh
#   RATE=5000 SECONDS_PER_RUN=10 LEARN=true bash bench/watch/run.sh
#   PERF=1 bash bench/watch/run.sh          # and where the daemon's time goes
#   NO_QUIET_WAIT=1 bash bench/watch/run.sh # do not wait for a quiet machine
#
# Topology: namespace "server" (nginx, one worker, and the daemon on the
# veth end) and namespace "client" (h2load, one new HTTP/1.1 connection
# per request, opened at a fixed rate), joined by a veth pair. The load
# is bounded: RATE × SECONDS_PER_RUN connections, each run at most
# SECONDS_PER_RUN + 30 s.
set -euo pipefail
cd "$(dirname "$0")/../.."

. bench/quiet.sh
require_root bench/watch/run.sh "network namespaces"
require_tools bench/watch/run.sh ip nginx h2load curl timeout

rate=${RATE:-10000}
seconds=${SECONDS_PER_RUN:-10}
learn=${LEARN:-false}
target=${CARGO_TARGET_DIR:-target}
if [ -z "${SKIP_BUILD:-}" ]; then cargo build --release -p vantage; fi
vantage="$(realpath "$target/release/vantage")"

tag=$$
srv=vantage-wbench-srv-$tag
cli=vantage-wbench-cli-$tag
work=$(mktemp -d /tmp/vantage-watch-bench.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ip netns del "$srv" 2>/dev/null || true
  ip netns del "$cli" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

ip netns add "$srv"
ip netns add "$cli"
ip link add "vws$tag" type veth peer name "vwc$tag"
ip link set "vws$tag" netns "$srv"
ip link set "vwc$tag" netns "$cli"
ip -n "$srv" addr add 10.77.0.1/24 dev "vws$tag"
ip -n "$cli" addr add 10.77.0.2/24 dev "vwc$tag"
for ns in "$srv" "$cli"; do ip -n "$ns" link set lo up; done
ip -n "$srv" link set "vws$tag" up
ip -n "$cli" link set "vwc$tag" up
ip netns exec "$srv" sysctl -qw net.core.somaxconn=8192 net.ipv4.tcp_max_syn_backlog=16384
ip netns exec "$cli" sysctl -qw net.ipv4.ip_local_port_range="1024 65535" net.ipv4.tcp_tw_reuse=1

mkdir -p "$work/www"
chmod 755 "$work" "$work/www"   # nginx workers run as nobody
head -c 10240 /dev/zero | tr '\0' 'x' > "$work/www/r"
cat > "$work/nginx.conf" <<CONF
worker_processes 1;
error_log $work/error.log;
pid $work/nginx.pid;
worker_rlimit_nofile 65536;
events { worker_connections 65536; }
http {
  access_log off;
  keepalive_timeout 0;
  server { listen 10.77.0.1:80 backlog=8192; root $work/www; }
}
CONF
ip netns exec "$srv" nginx -c "$work/nginx.conf" -p "$work" -g 'daemon off;' & pids+=($!)
for _ in $(seq 50); do
  ip netns exec "$cli" curl -fs -o /dev/null http://10.77.0.1/r && break
  sleep 0.1
done
ip netns exec "$cli" curl -fs -o /dev/null http://10.77.0.1/r

cat > "$work/watch.toml" <<CONF
listeners = ["10.77.0.1:80"]
interface = "vws$tag"
interval = "250ms"
profile = "linux-6.5"
learn = $learn
metrics_listen = "127.0.0.1:9466"
CONF

total=$((rate * seconds))
per_period=$((rate / 10))
# One h2load run: its summary lines and the achieved connection rate.
load() {
  local out=$1
  ulimit -n "$(ulimit -Hn)"
  timeout $((seconds + 30)) ip netns exec "$cli" h2load --h1 -n "$total" -c "$total" \
    -r "$per_period" --rate-period 100ms http://10.77.0.1/r > "$out" 2>&1 || true
  local finished succeeded
  finished=$(sed -n 's/^finished in \([0-9.]*\)s,.*/\1/p' "$out")
  succeeded=$(sed -n 's/^requests: .* \([0-9]*\) succeeded.*/\1/p' "$out")
  echo "$succeeded $finished"
}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
clk=$(getconf CLK_TCK)

if [ -z "${NO_QUIET_WAIT:-}" ]; then wait_for_quiet; fi
echo "load average before: $(cat /proc/loadavg)"
read -r ok_without secs_without < <(load "$work/h2load-without.txt")
grep -E '^(finished|requests|time for connect)' "$work/h2load-without.txt" | sed 's/^/  without: /'

ip netns exec "$srv" "$vantage" certes watch --config "$work/watch.toml" \
  --ready-file "$work/ready" 2>"$work/watch.log" & pids+=($!)
daemon=$!
for _ in $(seq 100); do [ -e "$work/ready" ] && break; sleep 0.1; done
[ -e "$work/ready" ] || { cat "$work/watch.log" >&2; echo "the daemon did not start" >&2; exit 1; }
sleep 1
if [ -n "${PERF:-}" ]; then
  perf record -F 999 -g -p "$daemon" -o "$work/perf.data" -- sleep "$seconds" \
    >/dev/null 2>&1 & perf_pid=$!
fi
t0=$(ticks "$daemon"); w0=$(date +%s.%N)
read -r ok_with secs_with < <(load "$work/h2load-with.txt")
t1=$(ticks "$daemon"); w1=$(date +%s.%N)
if [ -n "${PERF:-}" ]; then
  wait "$perf_pid" || true
  perf report -i "$work/perf.data" --stdio --no-children --percent-limit 2 \
    --sort symbol -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -40 > "$work/perf.txt" || true
  echo "daemon profile (perf, self time, symbols above 2 %):"
  cat "$work/perf.txt"
fi
grep -E '^(finished|requests|time for connect)' "$work/h2load-with.txt" | sed 's/^/  with:    /'
# Let the last intervals close (the table lingers 2 s after a close).
sleep 4
metrics=$(ip netns exec "$srv" curl -fs http://127.0.0.1:9466/metrics)
metric() { echo "$metrics" | awk -v m="$1" '$1 == m {print $2}'; }
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$daemon/status")
echo "load average after: $(cat /proc/loadavg)"

awk -v t0="$t0" -v t1="$t1" -v w0="$w0" -v w1="$w1" -v clk="$clk" \
    -v okw="$ok_without" -v sw="$secs_without" -v okd="$ok_with" -v sd="$secs_with" \
    -v hwm="$hwm" -v drops="$(metric vantage_certes_ring_drops_total)" \
    -v packets="$(metric vantage_certes_packets_total)" \
    -v completed="$(metric 'vantage_certes_completed_total{class="all"}')" \
    -v rate="$rate" -v seconds="$seconds" -v learn="$learn" 'BEGIN {
  printf "offered: %d new connections/s for %d s (learn = %s)\n", rate, seconds, learn
  printf "%-34s %12s %12s\n", "", "no watcher", "watcher"
  printf "%-34s %12.0f %12.0f\n", "connections served per second", okw / sw, okd / sd
  printf "%-34s %12d %12d\n", "connections served", okw, okd
  printf "%-34s %12s %11.2f%%\n", "daemon CPU (utime+stime, 1 core)", "-", 100 * (t1 - t0) / clk / (w1 - w0)
  printf "%-34s %12s %12d\n", "daemon ring drops", "-", drops
  printf "%-34s %12s %12d\n", "daemon packets taken", "-", packets
  printf "%-34s %12s %12d\n", "daemon connections completed", "-", completed
  printf "%-34s %12s %9.1f MiB\n", "daemon peak RSS (VmHWM)", "-", hwm / 1024
}'
