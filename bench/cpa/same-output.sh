#!/usr/bin/env bash
# Checks that two builds of `vantage` give the same `cpa --json` bytes on
# every shared trace (as server and as client capture, one and two
# threads) and on any further traces named:
#   bash bench/cpa/same-output.sh BEFORE AFTER [TRACE...]
# SHARED=dir for the shared traces. Prints one line per difference and
# exits 1 if there is any.
set -uo pipefail
before=$1 after=$2; shift 2
shared=${SHARED:-../shared/traces}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
differences=0 compared=0
for trace in $(find "$shared" -type f \( -name '*.pcap*' -o -name '*.dmp*' -o -name '*.cap*' \) | sort) "$@"; do
  for side in server client; do
    for threads in 1 2; do
      "$before" cpa --$side "$trace" --json --threads $threads >"$out/before" 2>"$out/before.err"
      status_before=$?
      "$after" cpa --$side "$trace" --json --threads $threads >"$out/after" 2>"$out/after.err"
      status_after=$?
      compared=$((compared + 1))
      if [ $status_before != $status_after ] || ! cmp -s "$out/before" "$out/after" ||
        ! cmp -s "$out/before.err" "$out/after.err"; then
        echo "differs: --$side $trace --threads $threads (exit $status_before, $status_after)"
        differences=$((differences + 1))
      fi
    done
  done
done
echo "$compared runs compared, $differences differ"
[ $differences = 0 ]
