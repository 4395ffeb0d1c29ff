# Shell functions sourced by the live benchmarks' run.sh scripts (gate,
# wan): the root and tool checks, and waiting for the machine to be quiet
# before each run. Source it from the repository root:
#   . bench/quiet.sh

# require_root SCRIPT WHY: exit 2 with a note unless running as root.
require_root() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "$1: needs root ($2)" >&2
    exit 2
  fi
}

# require_tools SCRIPT TOOL…: exit 2 naming the first tool not installed.
require_tools() {
  local script=$1 tool
  shift
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null; then
      echo "$script: $tool is not installed" >&2
      exit 2
    fi
  done
}

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

# Other work on the machine's cores shows up in what the benchmarks measure
# (latency, lost throughput, late releases), so wait (at most 10 minutes)
# for the machine to be quiet, and say so if not.
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
