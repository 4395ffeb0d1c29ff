#!/usr/bin/env bash
# Times `vantage cpa` against tcptrace and tshark on one ~1 GB trace of
# ~6,000 HTTP transfers made by the testbed, and records peak memory.
# Usage, as root, from the repository root: bash bench/cpa/run.sh
# (TRACE=path.pcap skips making the trace.)
set -euo pipefail
cd "$(dirname "$0")/../.."
for tool in tcptrace tshark; do
  command -v "$tool" >/dev/null || { echo "install $tool (apt-get install $tool)"; exit 1; }
done
cargo build --release -q -p vantage
vantage=target/release/vantage
work=${WORK:-/tmp/vantage-cpa-bench}
mkdir -p "$work"
if [ -z "${TRACE:-}" ]; then
  rm -rf "$work/run"
  "$vantage" testbed run bench/cpa/trace.toml --out "$work/run" >/dev/null
  TRACE=$(ls -d "$work"/run/*/)server.pcap
fi
packets=$(capinfos -c -M "$TRACE" 2>/dev/null | awk '/Number of packets/ {print $NF}')
bytes=$(stat -c %s "$TRACE")
echo "trace: $TRACE, $bytes bytes, $packets packets"
sync; cat "$TRACE" >/dev/null   # all tools read from the page cache

measure() { # name, command…
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$work/time" "$@" >"$work/$name.out" 2>"$work/$name.err"
  read -r seconds kib <"$work/time"
  printf '%-34s %8.2f s %10.0f packets/s %8.0f MiB peak\n' "$name" "$seconds" \
    "$(echo "$packets / $seconds" | bc -l)" "$(echo "$kib / 1024" | bc -l)"
  echo "$name $seconds $kib" >>"$work/results"
}
: >"$work/results"
measure "vantage cpa --server (full CPA)" "$vantage" cpa --server "$TRACE" --json
measure "tcptrace -n -l -r" tcptrace -n -l -r "$TRACE"
measure "tshark -T fields tcp.analysis.*" tshark -r "$TRACE" -T fields -e frame.number \
  -e tcp.stream -e tcp.analysis.ack_rtt -e tcp.analysis.retransmission \
  -e tcp.analysis.fast_retransmission -e tcp.analysis.bytes_in_flight
v=$(awk '/^vantage/ {print $(NF-1)}' "$work/results")
t=$(awk '/^tcptrace/ {print $(NF-1)}' "$work/results")
s=$(awk '/^tshark/ {print $(NF-1)}' "$work/results")
printf 'vantage cpa is %.1f× the speed of tcptrace and %.1f× that of tshark\n' \
  "$(echo "$t / $v" | bc -l)" "$(echo "$s / $v" | bc -l)"
