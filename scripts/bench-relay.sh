#!/usr/bin/env bash
# Forwarding capacity of `xpress emulate` without impairments: a sender blasts
# 64-byte UDP datagrams at the relay for a few seconds, a receiver counts what
# arrives. Loopback only; bounded in time and count.
# Usage: scripts/bench-relay.sh [SECONDS]   (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p xpress
SECS=${1:-3}
python3 - "$SECS" <<'PY'
import socket, subprocess, sys, time, threading
secs = float(sys.argv[1])
rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); rx.bind(("127.0.0.1", 0))
rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); probe.bind(("127.0.0.1", 0)); rport = probe.getsockname()[1]; probe.close()
relay = subprocess.Popen(["target/release/xpress", "emulate", "--listen", f"127.0.0.1:{rport}",
    "--server", f"127.0.0.1:{rx.getsockname()[1]}", "--link", "", "--duration", str(secs + 2), "--seed", "1"],
    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
time.sleep(0.5)
got = [0]
def count():
    rx.settimeout(1.0)
    try:
        while True:
            rx.recv(2048); got[0] += 1
    except socket.timeout:
        pass
t = threading.Thread(target=count); t.start()
tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
payload = b"x" * 64
sent = 0; t0 = time.time()
while time.time() - t0 < secs and sent < 50_000_000:
    for _ in range(1000):
        tx.sendto(payload, ("127.0.0.1", rport))
    sent += 1000
elapsed = time.time() - t0
t.join(); relay.wait(timeout=30)
report = relay.stdout.read().decode()
print(f"offered {sent/elapsed:,.0f} pkt/s for {elapsed:.1f} s; delivered {got[0]/elapsed:,.0f} pkt/s ({got[0]:,} of {sent:,})")
import json
r = json.loads(report)
print("relay saw", r["forward"]["offered"], "datagrams; release error p50/p99 us:", round(r["forward"]["release_error_p50_us"],1), round(r["forward"]["release_error_p99_us"],1))
PY
