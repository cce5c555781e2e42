#!/usr/bin/env bash
# Forwarding capacity of `xpress emulate` without impairments (issue #5):
# `xpress bench relay` starts the relay as its own process pinned to CPU 1,
# blasts 64-byte datagrams at it with sendmmsg from CPU 0 and counts what comes
# out. Loopback only; bounded in time (SECONDS, default 3) and count.
# Usage: scripts/bench-relay.sh [SECONDS] [BASELINE_XPRESS_BINARY]
# With a second argument, the same run first measures that build's relay.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p xpress
SECS=${1:-3}
X=target/release/xpress
PIN=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then PIN=(--relay-cpu 1); X="taskset -c 0 $X"; fi
if [ $# -ge 2 ]; then
  echo "baseline relay: $2"
  $X bench relay --seconds "$SECS" "${PIN[@]}" --relay-exe "$2"
fi
$X bench relay --seconds "$SECS" "${PIN[@]}"
