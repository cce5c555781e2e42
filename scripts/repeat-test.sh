#!/bin/sh
# Runs one test binary's filtered tests N times and counts the failing runs
# (each failing run's output kept as OUTDIR/fail-I.log): how flaky a test
# is. Build the test binary first (its path, trace-HASH, is printed as
# "Executable"), then run it under the build lock, e.g.
#   CARGO_INCREMENTAL=0 flock /tmp/xpress-build.lock cargo test --release -p xk-driver --features trace --test trace --no-run
#   flock /tmp/xpress-build.lock scripts/repeat-test.sh target/release/deps/trace-HASH 200 journeys /tmp/rt
# and, for the loaded case, with two bounded spinners beside it
# (`timeout 60 sh -c 'while :; do :; done' &`, twice).
set -u
if [ $# -ne 4 ]; then
  echo "usage: $0 TEST-BINARY RUNS FILTER OUTDIR" >&2
  echo "  TEST-BINARY from e.g.: cargo test --release -p xk-driver --features trace --test trace --no-run" >&2
  exit 2
fi
bin=$1 runs=$2 filter=$3 out=$4
mkdir -p "$out"
fails=0
i=1
while [ "$i" -le "$runs" ]; do
  if ! "$bin" --test-threads 1 "$filter" >"$out/run.log" 2>&1; then
    fails=$((fails + 1))
    cp "$out/run.log" "$out/fail-$i.log"
  fi
  i=$((i + 1))
done
echo "runs=$runs fails=$fails"
