#!/usr/bin/env bash
# The live SYN gate (`vantage gate`): verdict throughput on one core against
# a raw-socket SYN flood, and the connect latency it adds per accepted SYN,
# each beside iptables `limit` alone in the same run. See
# bench/gate/README.md for what is measured and the recorded result.
#
# Usage, as root from the repository root:
#   bash bench/gate/run.sh                        # 3 runs, 3 s floods, 3000 connects
#   RUNS=1 bash bench/gate/run.sh --seconds 1 --connects 1000
# Options after the script name go to the benchmark binary
# (crates/live/examples/gate_bench.rs): --seconds --connects --json.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "$(id -u)" -ne 0 ]; then
  echo "bench/gate/run.sh: needs root (network namespace, iptables, NFQUEUE)" >&2
  exit 2
fi
for tool in ip iptables; do
  if ! command -v "$tool" >/dev/null; then
    echo "bench/gate/run.sh: $tool is not installed" >&2
    exit 2
  fi
done

cargo build --release -p vantage-live --example gate_bench

# Busy share of all CPUs over one second, in percent.
busy_percent() {
  local a b
  a=($(head -1 /proc/stat))
  sleep 1
  b=($(head -1 /proc/stat))
  local busy=$(( (b[1]+b[2]+b[3]+b[6]+b[7]+b[8]) - (a[1]+a[2]+a[3]+a[6]+a[7]+a[8]) ))
  local idle=$(( (b[4]+b[5]) - (a[4]+a[5]) ))
  echo $(( 100 * busy / (busy + idle + 1) ))
}

# Other work on these two cores shows up as latency and lost throughput, so
# wait (at most 10 minutes) for the machine to be quiet, and say so if not.
wait_for_quiet() {
  local waited=0 busy
  while busy=$(busy_percent); [ "$busy" -gt 10 ]; do
    if [ "$waited" -ge 600 ]; then
      echo "note: machine still ${busy}% busy after 10 minutes; measuring anyway" >&2
      return
    fi
    waited=$((waited + 1))
  done
  echo "machine quiet (${busy}% busy) after waiting ${waited} s"
}

echo "machine: $(nproc) CPUs,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), kernel $(uname -r), iptables $(iptables -V | cut -d' ' -f2-), $(date -u '+%Y-%m-%d %H:%M UTC')"
runs=${RUNS:-3}
for run in $(seq 1 "$runs"); do
  echo
  echo "## run $run of $runs"
  wait_for_quiet
  ./target/release/examples/gate_bench "$@"
done
