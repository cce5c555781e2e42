#!/bin/bash
# Callgrind profiles of the framework bench (crates/xtp-proto/benches/layer.rs)
# for the instruction counts per round trip in docs/PERF.md (issue #16,
# sessions 21-22): the direct and compiled-contig ping-pong at each SIZE,
# one profile each, written to OUT as cg.TAG.PATH.SIZE (+ .log). Each
# valgrind run holds the build lock (the machine is shared). Then
# `scripts/layer-ir.py OUT TAG SIZE...` turns them into Ir per round trip.
#   CARGO_INCREMENTAL=0 flock /tmp/xpress-build.lock cargo bench -p xtp-proto --bench layer --no-run
#   cp "$(ls -t target/release/deps/layer-* | grep -v '\.d$' | head -1)" /tmp/layer.new
#   scripts/layer-ir.sh /tmp/layer.new new /tmp/ir 10 1000
set -euo pipefail
bin=${1:?usage: scripts/layer-ir.sh BENCH_BINARY TAG OUT_DIR [SIZE...]}
tag=${2:?TAG}
out=${3:?OUT_DIR}
shift 3
[ $# -gt 0 ] && sizes=("$@") || sizes=(10 1000)
mkdir -p "$out"
for s in "${sizes[@]}"; do
  for p in direct compiled-contig; do
    # --profile-time: criterion runs the routine for 1 s without analysis,
    # so the profile holds the exchanges and little of criterion.
    flock /tmp/xpress-build.lock valgrind --tool=callgrind \
      --callgrind-out-file="$out/cg.$tag.$p.$s" \
      "$bin" --bench --profile-time 1 "framework/pingpong/$p/$s\$" >"$out/cg.$tag.$p.$s.log" 2>&1
  done
done
