#!/usr/bin/env bash
# Forwarding capacity of the WAN emulator (`vantage_testbed::wan`) with a
# 10 ms one-way delay: a ladder of UDP packet rates from a client namespace
# to a server namespace through the emulating router, then a bisection to
# the highest rate that passes. See bench/wan/README.md for the criteria and
# the recorded result.
#
# Usage, as root from the repository root:
#   bash bench/wan/run.sh                 # 3 runs of the default ladder
#   RUNS=1 bash bench/wan/run.sh --rates 50000,100000 --seconds 2
# Options after the script name go to the benchmark binary
# (crates/testbed/examples/wan_bench.rs): --rates --seconds --delay-ms
# --payload --refine --spin-us --no-pin --no-emulator.
set -euo pipefail
cd "$(dirname "$0")/../.."

. bench/quiet.sh
require_root bench/wan/run.sh "network namespaces, iptables, NFQUEUE"
require_tools bench/wan/run.sh ip iptables ethtool

cargo build --release -p vantage-testbed --example wan_bench

echo "machine: $(nproc) CPUs,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), kernel $(uname -r), $(date -u '+%Y-%m-%d %H:%M UTC')"
runs=${RUNS:-3}
for run in $(seq 1 "$runs"); do
  echo
  echo "## run $run of $runs"
  wait_for_quiet
  ./target/release/examples/wan_bench "$@"
done
