#!/usr/bin/env bash
# User-space instructions per request of `vantage proxy` builds, counted by
# callgrind (valgrind): repeatable whatever else the machine runs, unlike
# CPU seconds. For each build, with and without SBAC (hybrid; one session
# cookie taken just before the run, so every request is a session in
# progress), N1 and then N2 requests over one keep-alive connection
# (h2load --h1 -c1) to a local nginx backend; per request is the
# difference of the two runs' totals over N2 − N1, so start-up cancels.
# Also "cookie": the proxy without SBAC sent the same `Cookie` header, so
# SBAC's own cost is told from that of a longer request.
# Last, nginx as the same reverse proxy, for comparison. Also per request:
# SHA-256 compressions' instructions, the SBAC layer (`Sbac::on_request`;
# 0 in builds where it is inlined into the request handler: then the
# "sbac" line less the "cookie" line is SBAC's own cost) and hop-by-hop
# header stripping.
#
# Caveat: valgrind does not emulate the SHA extensions, so under it the
# sha2 crate takes its software path; natively a compression is a few
# hundred cycles, not ~2,300 instructions. The SHA column says how much of
# the count that is.
#
# Usage: bash bench/proxy/instructions.sh BINARY [BINARY...]
#   N1=1000 N2=3000 bash bench/proxy/instructions.sh target/release/vantage
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }
for tool in nginx valgrind callgrind_annotate h2load curl; do
  command -v "$tool" >/dev/null || { echo "$0: $tool is not installed" >&2; exit 1; }
done
n1=${N1:-1000}
n2=${N2:-3000}
. "$(dirname "$0")/peers.sh"
bench_scratch instructions

BACKEND=127.0.0.1:18095
PROXY=127.0.0.1:18096
write_backend "$work/backend" $BACKEND 'a small response body of 35 bytes\n'
nginx -c "$work/backend/nginx.conf" -p "$work/backend" -g 'daemon off;' & pids+=($!)
write_vantage "$work/plain.toml" $PROXY $BACKEND
write_vantage "$work/sbac.toml" $PROXY $BACKEND "$(session_key)"
wait_for $BACKEND

# count BINARY MODE N: the callgrind output file of one run.
count() {
  local binary=$1 mode=$2 n=$3 out="$work/cg.$RANDOM$RANDOM" config=$2
  [ "$mode" = cookie ] && config=plain
  valgrind --tool=callgrind --callgrind-out-file="$out" "$binary" proxy run "$work/$config.toml" 2>"$out.log" &
  local pid=$!
  for _ in $(seq 200); do curl -fs "http://$PROXY/" >/dev/null 2>&1 && break; sleep 0.1; done
  local header=()
  if [ "$mode" = cookie ]; then
    # The length of a session cookie: the default name and 76 characters.
    header=(-H "Cookie: vantage_session=$(head -c 57 /dev/urandom | base64 -w0 | tr '+/' '-_')")
  elif [ "$mode" = sbac ]; then
    local cookie
    cookie=$(curl -fs -D - -o /dev/null "http://$PROXY/" | sed -n 's/^[Ss]et-[Cc]ookie: \([^;]*\);.*/\1/p')
    [ -n "$cookie" ] || { echo "the SBAC proxy set no cookie" >&2; exit 1; }
    header=(-H "Cookie: $cookie")
  fi
  h2load --h1 -n "$n" -c 1 "${header[@]}" "http://$PROXY/" | grep -q "$n succeeded" \
    || { echo "h2load: not every request succeeded" >&2; exit 1; }
  kill -INT "$pid"; wait "$pid" || true
  echo "$out"
}

# inclusive FILE PATTERN: the inclusive instruction count of the functions matching PATTERN.
inclusive() {
  callgrind_annotate --inclusive=yes "$1" 2>/dev/null | awk -v p="$2" '$0 ~ p { gsub(",", "", $1); s += $1 } END { print s + 0 }'
}

echo "machine: $(nproc) CPUs,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(valgrind --version), $(date -u '+%Y-%m-%d %H:%M UTC'); requests $n1 and $n2 over one connection"
printf '%-40s %-6s %14s %10s %12s %14s\n' build mode instr/request "SHA-256" "SBAC layer" "hop-by-hop"
for binary in "$@"; do
  for mode in plain cookie sbac; do
    a=$(count "$binary" $mode "$n1"); b=$(count "$binary" $mode "$n2")
    per() { awk -v x="$1" -v y="$2" -v d=$((n2 - n1)) 'BEGIN { printf "%.0f", (y - x) / d }'; }
    total=$(per "$(inclusive "$a" 'PROGRAM TOTALS')" "$(inclusive "$b" 'PROGRAM TOTALS')")
    sha=$(per "$(inclusive "$a" 'sha256.rs:sha2::sha256::compress256 \\[')" "$(inclusive "$b" 'sha256.rs:sha2::sha256::compress256 \\[')")
    layer=$(per "$(inclusive "$a" 'Sbac::on_request \\[')" "$(inclusive "$b" 'Sbac::on_request \\[')")
    hop=$(per "$(inclusive "$a" 'strip_hop_by_hop \\[')" "$(inclusive "$b" 'strip_hop_by_hop \\[')")
    printf '%-40s %-6s %14s %10s %12s %14s\n' "$binary" $mode "$total" "$sha" "$layer" "$hop"
  done
done

# nginx as the same reverse proxy (one worker, upstream keepalive), counted
# the same way, for comparison.
NGINX_PROXY=127.0.0.1:18097
write_nginx_proxy "$work/nginx" $NGINX_PROXY $BACKEND 'master_process off;'
count_nginx() {
  local n=$1 out="$work/cg.nginx.$1"
  valgrind --tool=callgrind --callgrind-out-file="$out" nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" -g 'daemon off;' 2>"$out.log" &
  local pid=$!
  for _ in $(seq 200); do curl -fs "http://$NGINX_PROXY/" >/dev/null 2>&1 && break; sleep 0.1; done
  h2load --h1 -n "$n" -c 1 "http://$NGINX_PROXY/" | grep -q "$n succeeded" \
    || { echo "h2load through nginx: not every request succeeded" >&2; exit 1; }
  kill -QUIT "$pid"; wait "$pid" || true
  echo "$out"
}
a=$(count_nginx "$n1"); b=$(count_nginx "$n2")
printf '%-40s %-6s %14s\n' nginx proxy "$(awk -v x="$(inclusive "$a" 'PROGRAM TOTALS')" -v y="$(inclusive "$b" 'PROGRAM TOTALS')" -v d=$((n2 - n1)) 'BEGIN { printf "%.0f", (y - x) / d }')"
