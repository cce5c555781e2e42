#!/bin/bash
# SCHED A/B in one script (docs/LOADGEN.md, sessions 14-15): the null
# adapter's median miss at 10 µs, 1 ms, 3 ms and 10 ms between requests,
# interleaved with and without FLAG (e.g. --no-warm: the release rehearsal
# off; --os-clock: CLOCK_MONOTONIC instead of the TSC), three pairs each,
# busy-waiting and pinned to CPU 1. Bounded: 24 runs of 3 s.
#   scripts/sched-ab.sh FLAG [path/to/xpress]
set -euo pipefail
flag=${1:?usage: scripts/sched-ab.sh FLAG [path/to/xpress]}
X=${2:-target/release/xpress}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for g in 10 1000 3000 10000; do
  sed "s/value = 10 }/value = $g }/" models/cbr.toml > "$dir/cbr$g.toml"
  for i in 1 2 3; do
    for f in "" "$flag"; do
      m=$("$X" loadgen run "$dir/cbr$g.toml" --adapter null --duration 3 --cpu 1 $f 2>&1 | grep -o "median [0-9]* ns")
      echo "gap ${g} µs ${f:-default}: $m"
    done
  done
done
