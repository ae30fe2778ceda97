#!/usr/bin/env python3
"""Floors of every pair of starts, from the --json document of
"replay compare --starts" (its cells' ratios per start): for each column
and protocol, the distribution over the pairs of each pair's median and
largest floor, and where the pairs named by --pair (two start indices,
from 1, as the text output numbers them) rank among the others. Run from
the repo root:

    bin/replay compare --starts DIR... --json OUT.json [...]
    python3 testdata/hw/pair-floors.py OUT.json [--pair I J] [--min-cells N]

A pair's floor of a row is |a - b| / (a + b) of its two ratios (simulated
over measured): the least largest error over the two starts of the
simulation times one factor for the row. Pairs sharing fewer than
--min-cells rows (default 10) are left out.
"""

import argparse
import itertools
import json
import statistics
import sys


def quantile(v, q):
    return v[int(q * (len(v) - 1))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("doc")
    ap.add_argument("--pair", nargs=2, type=int, metavar=("I", "J"))
    ap.add_argument("--min-cells", type=int, default=10)
    a = ap.parse_args()
    with open(a.doc) as f:
        d = json.load(f)
    n = len(d.get("starts") or [])
    if n < 2 or "cells" not in d:
        sys.exit("pair-floors.py: %s is not the --json document of replay compare --starts" % a.doc)
    pair = None
    if a.pair:
        pair = tuple(sorted(i - 1 for i in a.pair))
        if pair[0] < 0 or pair[1] >= n or pair[0] == pair[1]:
            sys.exit("pair-floors.py: --pair %d %d: want two starts of 1..%d" % (a.pair[0], a.pair[1], n))
    for col, proto in sorted({(c["vs"], c["proto"]) for c in d["cells"]}):
        cells = [c for c in d["cells"] if c["vs"] == col and c["proto"] == proto]
        stats = {}
        for i, j in itertools.combinations(range(n), 2):
            fl = [abs(c["ratios"][i] - c["ratios"][j]) / (c["ratios"][i] + c["ratios"][j])
                  for c in cells if c["ratios"][i] is not None and c["ratios"][j] is not None]
            if len(fl) >= a.min_cells:
                stats[(i, j)] = (statistics.median(fl), max(fl))
        others = [v for k, v in stats.items() if k != pair]
        if not others:
            continue
        med = sorted(v[0] for v in others)
        mx = sorted(v[1] for v in others)
        line = "%-5s %-7s %4d pairs: median floor p10 %4.1f p50 %4.1f p90 %4.1f%%; largest p10 %4.1f p50 %4.1f p90 %4.1f%%" % (
            col, proto, len(others), 100 * quantile(med, .1), 100 * quantile(med, .5), 100 * quantile(med, .9),
            100 * quantile(mx, .1), 100 * quantile(mx, .5), 100 * quantile(mx, .9))
        if pair in stats:
            pm, px = stats[pair]
            line += "; pair %d-%d: %.1f/%.1f%%, largest above %d of %d" % (pair[0] + 1, pair[1] + 1, 100 * pm, 100 * px,
                                                                       sum(m < px for m in mx), len(mx))
        print(line)


if __name__ == "__main__":
    main()
