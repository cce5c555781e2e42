#!/usr/bin/env bash
# XTP over real UDP on loopback against its floors, measured in one run with
# the same tools: ping-pong RTT (1 B and 1,000 B) for XTP, raw UDP and kernel
# TCP, and bulk goodput for XTP (checksums / NOCHECK) and kernel TCP.
# Usage: scripts/bench-udp.sh [BYTES_FOR_BULK]   (default 200000000)
# Every process is pinned to one CPU (PIN, default 0): on this kind of virtual
# machine a wake-up across CPUs costs ~50 µs, for raw UDP as much as for XTP,
# and whether the scheduler co-locates client and server would otherwise decide
# the result. Set PIN=none to let the scheduler choose.
# Busy-poll rows use a second server started with --busy-poll; spinning client
# and server must not share a CPU, so there the server runs on CPU 1 and the
# client on CPU 0 (skipped on a one-core machine).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p xpress
X=target/release/xpress
PIN=${PIN:-0}
if [ "$PIN" != none ] && command -v taskset >/dev/null; then X="taskset -c $PIN $X"; fi
BYTES=${1:-200000000}
out=$(mktemp)
$X serve --listen 127.0.0.1:0 --duration 600 > "$out" &
SERVER=$!
BUSY=
trap 'kill $SERVER $BUSY 2>/dev/null; rm -f "$out" "$out.busy"' EXIT
for _ in $(seq 50); do grep -q listening "$out" && break; sleep 0.1; done
ADDR=$(head -1 "$out" | awk '{print $3}')
echo "server $ADDR (pid $SERVER), $(nproc) cores, $(uname -r)"
p50() { local a=$1; shift; $X ping --to "$a" -l "$1" -c 5000 -i 0 --transport "$2" "${@:3}" -J | python3 -c 'import json,sys; r=json.load(sys.stdin)["rtt_us"]; print("%.1f %.1f" % (r["p50"], r["p99"]))'; }
for len in 1 1000; do
  read -r xp50 xp99 <<<"$(p50 "$ADDR" $len xtp)"
  read -r up50 up99 <<<"$(p50 "$ADDR" $len udp)"
  read -r tp50 tp99 <<<"$(p50 "$ADDR" $len tcp)"
  python3 -c "print(f'ping {$len:>5} B blocking   p50/p99 µs: xtp {$xp50}/{$xp99}  udp {$up50}/{$up99}  tcp {$tp50}/{$tp99}   xtp/udp {$xp50/$up50:.2f}  xtp/tcp {$xp50/$tp50:.2f}')"
done
if [ "$(nproc)" -ge 2 ]; then
  B=target/release/xpress
  taskset -c 1 $B serve --listen 127.0.0.1:0 --duration 600 --busy-poll > "$out.busy" &
  BUSY=$!
  for _ in $(seq 50); do grep -q listening "$out.busy" && break; sleep 0.1; done
  BADDR=$(head -1 "$out.busy" | awk '{print $3}')
  bp50() { taskset -c 0 $B ping --to "$BADDR" -l "$1" -c 5000 -i 0 --transport "$2" --busy-poll -J | python3 -c 'import json,sys; r=json.load(sys.stdin)["rtt_us"]; print("%.1f %.1f" % (r["p50"], r["p99"]))'; }
  for len in 1 1000; do
    read -r xp50 xp99 <<<"$(bp50 $len xtp)"
    read -r up50 up99 <<<"$(bp50 $len udp)"
    read -r tp50 tp99 <<<"$(bp50 $len tcp)"
    python3 -c "print(f'ping {$len:>5} B busy-poll  p50/p99 µs: xtp {$xp50}/{$xp99}  udp {$up50}/{$up99}  tcp {$tp50}/{$tp99}   xtp/udp {$xp50/$up50:.2f}  xtp/tcp {$xp50/$tp50:.2f}')"
  done
  kill $BUSY; BUSY=
else
  echo "busy-poll rows skipped: one CPU (client and server would spin on the same core)"
fi
gb() { $X bulk --to "$ADDR" -n "$BYTES" "$@" -J | python3 -c 'import json,sys; print("%.3f" % json.load(sys.stdin)["gbit_per_s"])'; }
xc=$(gb); xn=$(gb --nocheck); tc=$(gb --transport tcp)
python3 -c "print(f'bulk {$BYTES} B Gbit/s: xtp {$xc}  xtp-nocheck {$xn}  tcp {$tc}   xtp/tcp {$xc/$tc:.2f}  nocheck/tcp {$xn/$tc:.2f}')"
