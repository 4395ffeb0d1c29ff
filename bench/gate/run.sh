#!/usr/bin/env bash
# The live SYN gate (`vantage gate`): verdict throughput on one core against
# a raw-socket SYN flood, and the connect latency it adds per accepted SYN,
# each beside iptables `limit` alone in the same run. See
# bench/gate/README.md for what is measured and the recorded result.
#
# Usage, as root from the repository root:
#   bash bench/gate/run.sh                        # 3 runs, 3 s floods, 3000 connects
#   RUNS=1 bash bench/gate/run.sh --seconds 1 --connects 1000
#   WAIT_FOR_QUIET=0 bash bench/gate/run.sh       # measure at once; the load is printed
# Options after the script name go to the benchmark binary
# (crates/live/examples/gate_bench.rs): --seconds --connects --json.
set -euo pipefail
cd "$(dirname "$0")/../.."

. bench/quiet.sh
require_root bench/gate/run.sh "network namespace, iptables, NFQUEUE"
require_tools bench/gate/run.sh ip iptables

cargo build --release -p vantage-live --example gate_bench
bench=${CARGO_TARGET_DIR:-target}/release/examples/gate_bench

echo "machine: $(nproc) CPUs,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), kernel $(uname -r), iptables $(iptables -V | cut -d' ' -f2-), $(date -u '+%Y-%m-%d %H:%M UTC')"
runs=${RUNS:-3}
for run in $(seq 1 "$runs"); do
  echo
  echo "## run $run of $runs"
  if [ "${WAIT_FOR_QUIET:-1}" = 0 ]; then
    echo "machine $(busy_percent)% busy (not waited for)"
  else
    wait_for_quiet
  fi
  "$bench" "$@"
  echo "machine $(busy_percent)% busy after the run"
done
