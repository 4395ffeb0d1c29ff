#!/usr/bin/env bash
# Times `vantage cpa` against tcptrace and tshark on three trace shapes and
# records wall time and peak memory of each (see README.md):
#   bulk  ~6,000 HTTP/1.0 transfers of 170 KB made by the testbed (~1.1 GB,
#         needs root; BULK=path.pcap reuses one, TRACE= is the old name)
#   http  many short HTTP connections: five shared HTTP traces, 190 copies
#   loss  a loss-heavy trace: tcptrace's dsack trace, 40 copies
# Usage, from the repository root: bash bench/cpa/run.sh
#   SHAPES="http loss" to pick shapes, RUNS=3 to repeat each shape,
#   WORK=dir for the traces and results, SHARED=dir for the shared traces,
#   BEFORE=path of an earlier vantage binary to time beside this one.
set -euo pipefail
cd "$(dirname "$0")/../.."
for tool in tcptrace tshark capinfos; do
  command -v "$tool" >/dev/null || { echo "install $tool (apt-get install $tool tshark)"; exit 1; }
done
cargo build --release -q -p vantage
cargo build --release -q -p vantage-trace --example replicate
bin=${CARGO_TARGET_DIR:-target}/release
vantage=$bin/vantage
work=${WORK:-/tmp/vantage-cpa-bench}
shared=${SHARED:-../shared/traces}
shapes=${SHAPES:-bulk http loss}
runs=${RUNS:-1}
mkdir -p "$work"

make_shape() { # shape → path of its trace
  case $1 in
    bulk)
      local bulk=${BULK:-${TRACE:-}}
      if [ -z "$bulk" ]; then
        rm -rf "$work/run"
        "$vantage" testbed run bench/cpa/trace.toml --out "$work/run" >/dev/null
        bulk=$(ls -d "$work"/run/*/)server.pcap
      fi
      echo "$bulk" ;;
    http)
      # Copy k starts k × 100 ms after the first; each copy's addresses
      # are moved so its connections stay distinct (see replicate.rs).
      [ -f "$work/http.pcap" ] || "$bin/examples/replicate" --copies 190 --spacing-ms 100 \
        --out "$work/http.pcap" "$shared/tcptrace/http.dmp.gz" "$shared/zeek/http_bro.org.pcap" \
        "$shared/zeek/http_m57-long-49600-80.pcap" "$shared/zeek/http_get.pcap" \
        "$shared/zeek/http_pipelined-requests.pcap" 2>/dev/null
      echo "$work/http.pcap" ;;
    loss)
      [ -f "$work/loss.pcap" ] || "$bin/examples/replicate" --copies 40 --spacing-ms 1000 \
        --out "$work/loss.pcap" "$shared/tcptrace/dsack.dmp.gz" 2>/dev/null
      echo "$work/loss.pcap" ;;
    *) echo "unknown shape $1 (bulk, http, loss)" >&2; exit 1 ;;
  esac
}

measure() { # shape, name, command…
  local shape=$1 name=$2; shift 2
  /usr/bin/time -f "%e %M %U %S" -o "$work/time" "$@" >"$work/out" 2>"$work/err" || true
  read -r seconds kib user system <"$work/time"
  # CPU time (user + system, all threads) says what the work costs when
  # other jobs share the cores and wall times are inflated.
  local cpu; cpu=$(echo "$user + $system" | bc -l)
  printf '  %-34s %8.2f s %10.0f packets/s %8.0f MiB peak %6.2f s CPU\n' "$name" "$seconds" \
    "$(echo "$packets / $seconds" | bc -l)" "$(echo "$kib / 1024" | bc -l)" "$cpu"
  echo "$shape $name $seconds $kib $cpu" >>"$work/results"
}

: >"$work/results"
uptime
for shape in $shapes; do
  trace=$(make_shape "$shape")
  packets=$(capinfos -c -M "$trace" 2>/dev/null | awk '/Number of packets/ {print $NF}')
  echo "$shape: $trace, $(stat -L -c %s "$trace") bytes, $packets packets"
  cat "$trace" >/dev/null   # every tool reads from the page cache
  # One untimed run of each build first: without it the first one timed
  # after the `cat` took about a third more CPU time than the same binary
  # timed next (bench/cpa/README.md, 2026-11-25, 18:05–19:05 UTC).
  "$vantage" cpa --server "$trace" --json >/dev/null 2>&1 || true
  [ -z "${BEFORE:-}" ] || "$BEFORE" cpa --server "$trace" --json >/dev/null 2>&1 || true
  for run in $(seq "$runs"); do
    # Even runs time the tools in the reverse order, so that a position
    # bias (the first tool timed after another's run) falls on each in turn.
    tools="vantage before tcptrace tshark"
    [ $((run % 2)) -eq 1 ] || tools="tshark tcptrace before vantage"
    for tool in $tools; do
      case $tool in
        vantage) measure "$shape" vantage "$vantage" cpa --server "$trace" --json ;;
        before)
          if [ -n "${BEFORE:-}" ]; then
            measure "$shape" before "$BEFORE" cpa --server "$trace" --json
            cmp -s "$work/out" <("$vantage" cpa --server "$trace" --json 2>/dev/null) ||
              echo "  note: the earlier binary's output differs"
          fi ;;
        tcptrace) measure "$shape" tcptrace tcptrace -n -l -r "$trace" ;;
        tshark) measure "$shape" tshark tshark -r "$trace" -T fields -e frame.number \
          -e tcp.stream -e tcp.analysis.ack_rtt -e tcp.analysis.retransmission \
          -e tcp.analysis.fast_retransmission -e tcp.analysis.bytes_in_flight ;;
      esac
    done
    awk -v s="$shape" '$1 == s {t[$2] = $3; c[$2] = $5} END {
      printf "  run: vantage cpa is %.2f× the speed of tcptrace and %.1f× that of tshark",
        t["tcptrace"] / t["vantage"], t["tshark"] / t["vantage"]
      if ("before" in t) printf " (before: %.2f× and %.1f×)",
        t["tcptrace"] / t["before"], t["tshark"] / t["before"]
      printf "; CPU time %.2f× tcptrace'"'"'s", c["vantage"] / c["tcptrace"]
      if ("before" in c) printf " (before: %.2f×)", c["before"] / c["tcptrace"]
      printf "\n" }' "$work/results"
  done
  # Over all runs: the ratio of the medians, steadier than any one run's.
  [ "$runs" -lt 2 ] || awk -v s="$shape" '$1 == s {n[$2]++; v[$2, n[$2]] = $3} END {
    for (name in n) {
      k = n[name]
      for (i = 1; i <= k; i++) a[i] = v[name, i]
      for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { x = a[j]; a[j] = a[j - 1]; a[j - 1] = x }
      m[name] = (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
    }
    printf "  median of %d runs: vantage cpa is %.2f× the speed of tcptrace and %.1f× that of tshark",
      n["vantage"], m["tcptrace"] / m["vantage"], m["tshark"] / m["vantage"]
    if ("before" in m) printf " (before: %.2f× and %.1f×)", m["tcptrace"] / m["before"], m["tshark"] / m["before"]
    printf "\n" }' "$work/results"
done
uptime
