#!/usr/bin/env python3
"""E8's six-run table for docs/PERF.md, from the reports themselves.

Usage: scripts/e8-table.py DIR...   (each DIR an `xpress report` output with
E8 in it, e.g. after `xpress report --replot DIR`).

Reads DIR/report.html only: for each checked quantity's table (measured,
seed 004's form, extended, extended held out, baseline) the worst
|predicted − measured| / measured in % — the seed's form over every length,
the extended form and the baseline over the held-out lengths — recomputed
from the values printed (to 0.1 %, where the report rounds to whole per
cent); and for each row of the cross-operation table ("Predictions from
another operation") the worst |error| of the prediction from other
operations over every length (and of the rows marked "for comparison",
the same predictions without Session 19's terms). Kind: H_t is a prediction from other
operations; δ, τ_s, τ_a and H_r held out are decompositions (their parts
measured on the operation checked; the report's reading says which).
"""
import html
import re
import sys

nan = float("nan")

QUANTITIES = [
    ("δ", "latency δ"),
    ("τ_s", "synchronous throughput τ_s"),
    ("τ_a", "asynchronous throughput τ_a"),
    ("H_t", "host time per send H_t"),
    ("H_r", "host time per receive H_r"),
]


def cells(row):
    return [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<t[dh]>(.*?)</t[dh]>", row)]


def value(c):
    m = re.match(r"\s*(-?[\d.]+)", c)
    return float(m.group(1)) if m else None


def table(page, caption_start):
    k = page.find("<caption>" + caption_start)
    if k < 0:
        return []
    body = page[k : page.find("</table>", k)]
    return [cells(r) for r in re.findall(r"<tr>(.*?)</tr>", body)][1:]


def worst(pairs):
    e = [abs(p - m) / m * 100 for m, p in pairs if m and p is not None]
    return max(e) if e else float("nan")


def run(d):
    page = open(d + "/report.html").read()
    out = {}
    for short, name in QUANTITIES:
        rows = [r for r in table(page, name + " (") if r and r[0].isdigit()]
        held = [r for r in rows if value(r[4]) is not None]
        out[short] = (
            worst((value(r[1]), value(r[2])) for r in rows),
            worst((value(r[1]), value(r[4])) for r in held),
            worst((value(r[1]), value(r[5])) for r in held),
        )
    cross = {}
    for r in table(page, "Predictions from another operation"):
        cross.setdefault(r[0], []).append((value(r[2]), value(r[3])))
    out["cross"] = {k: worst(v) for k, v in cross.items()}
    # The structural split W_s + R_p(l) + 2κ: signed errors, % (the
    # report's mss is not in the table: one packet taken as ≤ 1,400 B).
    signed = {}
    for r in table(page, "Predictions from another operation"):
        m, p = value(r[2]), value(r[3])
        if "+ 2κ" in r[0] and m and p is not None:
            signed.setdefault(int(r[1]) <= 1400, []).append((p - m) / m * 100)
    out["split"] = {k: (min(v), max(v)) for k, v in signed.items()}
    return out


if __name__ == "__main__":
    # Cross-operation columns: the prediction / the same without Session
    # 19's terms ("for comparison" rows of the table; Session 16's H_r
    # last), worst |error| over every length.
    print(
        "| run | δ | τ_s | τ_a | H_r | H_t | H_r from other operations: S + κ reads / S alone / Session 16's / W_s + R_p + 2κ (signed: ≤ 1,400 B; beyond) | τ_s from the ping-pong / Session 18's form | C(l) from the ping-pong |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for d in sys.argv[1:]:
        r = run(d)
        f = lambda k: "**%.0f** / %.1f / %.1f" % r[k]
        x = r["cross"]
        pick = lambda start: next((v for k, v in x.items() if k.startswith(start)), float("nan"))
        print(
            "| %s | %s | %s | %s | %s | %s | **%.1f** / %.1f / %.1f / %s | **%.1f** / %.1f | %.1f |"
            % (
                d.rstrip("/").split("/")[-1],
                f("δ"),
                f("τ_s"),
                f("τ_a"),
                f("H_r"),
                f("H_t"),
                pick("H_r"),
                pick("for comparison: H_r from the sink"),
                pick("for comparison: H_r from the synchronous sends' wait and the pipelined receiver ("),
                "%+.1f..%+.1f; %+.1f..%+.1f" % (r["split"].get(True, (nan, nan)) + r["split"].get(False, (nan, nan))),
                pick("τ_s"),
                pick("for comparison: τ_s"),
                pick("completion"),
            )
        )
