#!/usr/bin/env python3
"""Instructions per round trip from scripts/layer-ir.sh's profiles.

  scripts/layer-ir.py OUT_DIR TAG [SIZE...]

Session 21's corrected formula (docs/PERF.md): a compiled exchange also
runs the direct pair the bench keeps as its reference, so its direct pumps
are taken out at the direct path's own cost.
  direct   = inclusive Exchange::exchange / its Direct pump calls   (direct profile)
  compiled = (inclusive Exchange::exchange - Nd * direct) / Nc      (compiled profile)
with Nd, Nc the Direct and Pair pump calls listed under `exchange` by
`callgrind_annotate --inclusive=yes --tree=calling`.
"""
import re
import subprocess
import sys

EXCHANGE = re.compile(r"\s*([\d,]+) \([^)]*\)\s+\*\s+\S*:layer::paths::Exchange::exchange \[")
PUMP = re.compile(
    r"\s*[\d,]+ \([^)]*\)\s+>\s+\S*:<layer::paths::(Pair|Direct)\S* as layer::paths::Exchange>::pump \(([\d,]+)x\)"
)


def num(s):
    return int(s.replace(",", ""))


def exchange(profile):
    """Inclusive Ir of Exchange::exchange and the pump calls under it."""
    lines = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--tree=calling", profile],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    for i, line in enumerate(lines):
        m = EXCHANGE.match(line)
        if m:
            calls = {}
            # The callees follow their caller's line in the tree.
            for callee in lines[i + 1:i + 12]:
                c = PUMP.match(callee)
                if c:
                    calls[c.group(1)] = num(c.group(2))
            return num(m.group(1)), calls
    sys.exit(f"{profile}: no Exchange::exchange line (a bench binary without debug info?)")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, tag = sys.argv[1], sys.argv[2]
    for s in sys.argv[3:] or ["10", "1000"]:
        di, dc = exchange(f"{out}/cg.{tag}.direct.{s}")
        d = di / dc["Direct"]
        ci, cc = exchange(f"{out}/cg.{tag}.compiled-contig.{s}")
        c = (ci - cc.get("Direct", 0) * d) / cc["Pair"]
        print(f"{tag} {s:>5} B: direct {d:,.1f}  compiled {c:,.1f}  ratio {c / d:.4f}  gap {c - d:,.1f}"
              f"  (Nd={cc.get('Direct', 0)} Nc={cc['Pair']})")


main()
