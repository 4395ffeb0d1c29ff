#!/usr/bin/env bash
# The watch daemon's lag under overload: how long after an interval ends
# its line appears in the JSON Lines stream, while clients whose SYNs the
# server drops give up. See bench/watch/README.md for the recorded result.
#
# Usage, from the repository root, as root (one network namespace):
#   bash bench/watch/lag.sh
#   VANTAGE=/path/to/vantage CLIENTS=20 bash bench/watch/lag.sh
#
# In a namespace of its own: a listener on 127.0.0.1:8080 with an accept
# queue of one that never accepts, filled by two connections opened before
# the daemon starts, so the kernel drops every later SYN (ListenOverflows);
# CLIENTS curl clients 0.5 s apart, each giving up after 21 s
# (--connect-timeout 21, the model's frustration timeout); the daemon
# (`listeners = ["127.0.0.1:8080"]`, interval 250 ms, linux-6.5, FTO 21 s)
# on the namespace's loopback. Each line is stamped with the wall clock
# when it is read from the file (polled every 50 ms). Bounded: the run
# lasts the clients' 0.5 s × CLIENTS + 21 s plus WAIT_S (default 25 s).
set -euo pipefail
cd "$(dirname "$0")/../.."

. bench/quiet.sh
require_root bench/watch/lag.sh "a network namespace"
require_tools bench/watch/lag.sh ip python3 curl timeout

clients=${CLIENTS:-20}
wait_s=${WAIT_S:-25}
target=${CARGO_TARGET_DIR:-target}
vantage=$(realpath "${VANTAGE:-$target/release/vantage}")

ns=vantage-wlag-$$
work=$(mktemp -d /tmp/vantage-watch-lag.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

ip netns add "$ns"
ip -n "$ns" link set lo up

# The listener, and two connections that fill its queue of one.
timeout $((clients + wait_s + 60)) ip netns exec "$ns" python3 -c '
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8080))
s.listen(1)
held = [socket.create_connection(("127.0.0.1", 8080)) for _ in range(2)]
open(sys.argv[1], "w").close()
time.sleep(3600)
' "$work/listening" & pids+=($!)
for _ in $(seq 50); do [ -e "$work/listening" ] && break; sleep 0.1; done
[ -e "$work/listening" ] || { echo "the listener did not start" >&2; exit 1; }

cat > "$work/watch.toml" <<CONF
listeners = ["127.0.0.1:8080"]
interface = "lo"
interval = "250ms"
profile = "linux-6.5"
frustration_timeout = "21s"
jsonl = "$work/lines.jsonl"
CONF
ip netns exec "$ns" "$vantage" certes watch --config "$work/watch.toml" \
  --ready-file "$work/ready" > "$work/summary.json" 2> "$work/watch.log" & pids+=($!)
daemon=$!
for _ in $(seq 100); do [ -e "$work/ready" ] && break; sleep 0.1; done
[ -e "$work/ready" ] || { cat "$work/watch.log" >&2; echo "the daemon did not start" >&2; exit 1; }

# Stamp each line with the wall clock when it is read.
python3 -c '
import sys, time
path, out = sys.argv[1], open(sys.argv[2], "w")
f = None
while True:
    if f is None:
        try:
            f = open(path)
        except FileNotFoundError:
            time.sleep(0.05)
            continue
    line = f.readline()
    if line.endswith("\n"):
        out.write("%.3f %s" % (time.time(), line))
        out.flush()
    else:
        time.sleep(0.05)
' "$work/lines.jsonl" "$work/stamped" & pids+=($!)

load_start=$(date +%s.%N)
for _ in $(seq "$clients"); do
  ip netns exec "$ns" curl -s -o /dev/null --connect-timeout 21 http://127.0.0.1:8080/ &
  sleep 0.5
done
wait_clients_until=$((clients / 2 + 25))
sleep "$wait_clients_until"
sleep "$wait_s"
load_end=$(date +%s.%N)
echo "kernel: $(ip netns exec "$ns" nstat -az TcpExtListenOverflows 2>/dev/null | awk '/ListenOverflows/ {print $1, $2}')"

python3 - "$work/stamped" "$load_start" <<'PY'
import json, sys
start = float(sys.argv[2])
rows = []
for line in open(sys.argv[1]):
    stamp, text = line.split(" ", 1)
    row = json.loads(text)
    end = row["t_start_unix_s"] + 0.25
    rows.append((end, float(stamp) - end, row))
during = [r for r in rows if r[0] >= start]
if not during:
    sys.exit("no interval closed after the load started")
lags = sorted(lag for _, lag, _ in during)
def q(p):
    return lags[min(len(lags) - 1, int(p * len(lags)))]
dropped = sum(r["dropped"] for _, _, r in during)
gave_up = sum(r["exact_gave_up"] for _, _, r in during)
print(f"intervals closed after the load started: {len(during)}")
print(f"SYNs dropped in them: {dropped}, clients that gave up (exact): {gave_up}")
print(f"lag (line read - interval end), s: min {lags[0]:.2f}  median {q(0.5):.2f}  "
      f"p90 {q(0.9):.2f}  max {lags[-1]:.2f}")
PY
