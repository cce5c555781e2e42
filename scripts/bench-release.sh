#!/usr/bin/env bash
# Release error of both link-model drivers at the E2 operating point
# (45 Mbit/s, 100 ms each way), with real traffic through each:
#   netns: iperf3 (kernel TCP) between the two namespaces (needs root, iperf3)
#   relay: `xpress emulate` + `xpress serve` + `xpress bulk` (XTP paced at 45 Mbit/s)
# Optionally with LOAD busy loops running beside them (nice 0), standing in for
# the builds and simulations that share this 2-core machine.
#
# usage: scripts/bench-release.sh [XPRESS] [RUNS] [LOAD] [SECONDS]
#   XPRESS   the binary to measure (default target/release/xpress)
#   RUNS     repetitions per driver (default 3)
#   LOAD     busy loops started beside each run (default 0)
#   SECONDS  traffic time per run (default 15)
# EMU_FLAGS (environment) is passed to both `xpress netns` and `xpress emulate`,
# e.g. EMU_FLAGS="--no-realtime --spin-us 0" to measure what each remedy is worth.
# One line per run: driver, load, p50/p99/max release error per direction (µs),
# the run's own validity verdict, and what the traffic achieved.
set -euo pipefail
X=${1:-target/release/xpress}
RUNS=${2:-3}
LOAD=${3:-0}
SECS=${4:-15}
read -r -a FLAGS <<<"${EMU_FLAGS:-}"
LINK="delay 100ms rate 45mbit limit 10000"
TMP=$(mktemp -d)
LOADERS=()
stop_load() {
    # End only the busy loops this script started, by their PIDs.
    for p in "${LOADERS[@]}"; do kill "$p" 2>/dev/null || true; done
    LOADERS=()
}
cleanup() {
    stop_load
    rm -rf "$TMP"
}
trap cleanup EXIT
start_load() {
    for _ in $(seq 1 "$LOAD"); do
        sh -c 'while :; do :; done' &
        LOADERS+=($!)
    done
}
summary() { # $1 driver, $2 report JSON, $3 traffic summary
    python3 - "$1" "$2" "$3" "$LOAD" <<'EOF'
import json, sys
drv, path, traffic, load = sys.argv[1:5]
r = json.load(open(path))
def d(k):
    x = r[k]
    return "%7.1f %7.1f %8.1f" % (x["release_error_p50_us"], x["release_error_p99_us"], x["release_error_max_us"])
t = r.get("timing")
loop = ("wake p99/max %5.1f/%7.1f found/handover/write p99 %5.1f/%5.1f/%5.1f cpu %4.1f%% spin %4.1f%% %s" % (
    t["wake_late_p99_us"], t["wake_late_max_us"], t.get("found_late_p99_us", -1), t.get("handover_p99_us", -1),
    t.get("write_p99_us", -1),
    100 * t.get("thread_cpu_fraction", 0), 100 * t["spin_cpu_fraction"],
    "fifo" if (t["scheduling"] or "").startswith("SCHED_FIFO") else "normal")) if t else "-"
print("%-5s load %s | fwd %s | rev %s | valid %-5s kdrops %s | %s | %s" %
      (drv, load, d("forward"), d("reverse"), r["valid"], r.get("kernel_drops"), traffic, loop))
EOF
}
echo "$(date -u +%FT%TZ) $(uptime | sed 's/.*load/load/') binary $X flags: ${EMU_FLAGS:-none}"
echo "                 p50     p99      max (µs)"
for i in $(seq 1 "$RUNS"); do
    if [ "$(id -u)" = 0 ] && command -v iperf3 >/dev/null; then
        start_load
        "$X" netns "${FLAGS[@]}" --link "$LINK" --a "iperf3 -s -1 >/dev/null" --b "iperf3 -c \$XPRESS_PEER -t $SECS -J" \
            --report "$TMP/ns.json" >"$TMP/iperf.json" 2>"$TMP/ns.err" || true
        stop_load
        mbit=$(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('%.1f Mbit/s' % (j['end']['sum_received']['bits_per_second']/1e6))" "$TMP/iperf.json" 2>/dev/null || echo "iperf3 failed")
        summary netns "$TMP/ns.json" "iperf3 $mbit"
    elif [ "$i" = 1 ]; then
        echo "netns: skipped (needs root and iperf3)"
    fi
    # `serve` also takes port+1 (UDP echo): the relay listens below it.
    port=$((20000 + RANDOM % 20000))
    "$X" serve --listen "127.0.0.1:$port" --duration $((SECS + 30)) >/dev/null 2>&1 &
    SP=$!
    start_load
    "$X" emulate "${FLAGS[@]}" --listen "127.0.0.1:$((port - 1))" --server "127.0.0.1:$port" --link "$LINK" \
        --duration $((SECS + 3)) >"$TMP/relay.json" 2>"$TMP/relay.err" &
    EP=$!
    sleep 0.3
    "$X" bulk --to "127.0.0.1:$port" --via "127.0.0.1:$((port - 1))" -t "$SECS" --rate 45mbit -J \
        >"$TMP/bulk.json" 2>&1 || true
    wait "$EP" || true
    stop_load
    kill "$SP" 2>/dev/null || true
    wait "$SP" 2>/dev/null || true
    mbit=$(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('%.1f Mbit/s' % (j['gbit_per_s']*1e3))" "$TMP/bulk.json" 2>/dev/null || echo "bulk failed")
    summary relay "$TMP/relay.json" "xpress bulk $mbit"
done
