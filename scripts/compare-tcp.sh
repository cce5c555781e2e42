#!/usr/bin/env bash
# XTP against kernel TCP on the links of issue #12's table, both through the
# same `xpress netns` emulator (root, iperf3): XTP with CUBIC and BBR
# (`xpress bulk -t`, goodput = bytes acknowledged within the time) and kernel
# TCP with CUBIC and BBR named explicitly (`iperf3 -C`, goodput = bytes the
# receiver got). One line per link and sender: Mbit/s, the emulator's own
# verdict on its timing, and the sender's retransmissions.
#
# usage: scripts/compare-tcp.sh [XPRESS] [SECONDS] [REPETITIONS] [OMIT]
#   OMIT: whole seconds run first and left out of the count (bulk -O,
#         iperf3 -O, which reads whole seconds); XTP's retransmissions
#         column covers the whole run, iperf3's the counted part
#   LINK="delay 15ms rate 45mbit limit 1000 loss 0.3%"  one link instead of the table
#   CCS="cubic newreno"  controllers (default cubic bbr; XTP's newreno runs
#                        against the kernel's reno)
set -euo pipefail
X=$(realpath "${1:-target/release/xpress}")
SECS=${2:-15}
REPS=${3:-1}
OMIT=${4:-0}
[ "$(id -u)" = 0 ] || { echo "compare-tcp.sh: needs root (xpress netns creates network namespaces)" >&2; exit 2; }
command -v iperf3 >/dev/null || { echo "compare-tcp.sh: needs iperf3" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
LINKS=(
  "delay 100ms rate 45mbit limit 1000"
  "delay 75ms rate 45mbit limit 1000"
  "delay 15ms rate 45mbit limit 1000 loss 0.3%"
  "delay 5ms rate 45mbit limit 1000 loss 0.5%"
  "delay 10ms rate 45mbit limit 1000 reorder 3%"
)
if [ -n "${LINK:-}" ]; then LINKS=("$LINK"); fi
printf '%-46s %-12s %9s %6s %s\n' "link (each direction)" "sender" "Mbit/s" "valid" "retransmitted"
for link in "${LINKS[@]}"; do
  for cc in ${CCS:-cubic bbr}; do
  tcp_cc=$cc
  [ "$cc" = newreno ] && tcp_cc=reno
  for _rep in $(seq "$REPS"); do
    "$X" netns --link "$link" --report "$TMP/emu.json" \
      --a "exec $X serve --listen 10.200.0.1:3636 --duration $((SECS + ${OMIT%.*} + 60))" \
      --b "$X bulk --to 10.200.0.1:3636 -t $SECS -O $OMIT -J --cc $cc" >"$TMP/out" 2>/dev/null || true
    python3 - "$link" "XTP $cc" "$TMP/out" "$TMP/emu.json" <<'PY'
import json, sys
link, who, out, emu = sys.argv[1:5]
r = next((json.loads(l) for l in open(out) if l.startswith("{")), None)
e = json.load(open(emu))
if r is None:
    print(f"{link:46} {who:12} {'failed':>9}")
else:
    c = r.get("context") or {}
    print(f"{link:46} {who:12} {r['gbit_per_s']*1e3:9.1f} {str(e['valid']):>6} {c.get('retransmitted', '?')} B, {c.get('timeouts', '?')} timeouts")
PY
    "$X" netns --link "$link" --report "$TMP/emu.json" --a "exec iperf3 -s -1" \
      --b "iperf3 -c \$XPRESS_PEER -t $SECS -O $OMIT -J -C $tcp_cc" >"$TMP/out" 2>/dev/null || true
    python3 - "$link" "TCP $tcp_cc" "$TMP/out" "$TMP/emu.json" <<'PY'
import json, sys
link, who, out, emu = sys.argv[1:5]
text = open(out).read()
start, end = text.find("\n{") + 1, text.rfind("\n}") + 2
e = json.load(open(emu))
try:
    r = json.loads(text[start:end])
    s = r["end"]["sum_received"]
    print(f"{link:46} {who:12} {s['bits_per_second']/1e6:9.1f} {str(e['valid']):>6} {r['end']['sum_sent'].get('retransmits', '?')} segments")
except Exception:
    print(f"{link:46} {who:12} {'failed':>9}")
PY
  done
  done
done
