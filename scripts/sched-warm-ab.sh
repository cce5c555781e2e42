#!/bin/bash
# SCHED's release rehearsal, A/B in one script (docs/LOADGEN.md, session 14):
# the null adapter's median miss at 10 µs, 1 ms and 3 ms between requests,
# interleaved with and without the rehearsal (`--no-warm`), three pairs each,
# busy-waiting and pinned to CPU 1. Bounded: 18 runs of 3 s.
#   scripts/sched-warm-ab.sh [path/to/xpress]
set -euo pipefail
X=${1:-target/release/xpress}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for g in 10 1000 3000; do
  sed "s/value = 10 }/value = $g }/" models/cbr.toml > "$dir/cbr$g.toml"
  for i in 1 2 3; do
    for flag in "" --no-warm; do
      m=$("$X" loadgen run "$dir/cbr$g.toml" --adapter null --duration 3 --cpu 1 $flag 2>&1 | grep -o "median [0-9]* ns")
      echo "gap ${g} µs ${flag:-warm}: $m"
    done
  done
done
