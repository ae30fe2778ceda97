#!/usr/bin/env python3
"""Median and maximum |err| of the simulation over every socket recording
(net-*.json, proto/net-*.json, heldout/net-*.json) of each start named,
per protocol, as the closing notes report them. Run from the repo root
after `make build`:

    python3 testdata/hw/socket-errors.py COLUMN CALIB START...

COLUMN is nccl (NCCL's column) or ours (our executor's); CALIB a
calibration file or embedded:NAME.json, which simulates that column; a
START is a directory under testdata/hw (e.g. h100x2/rerun12), simulated
on its machine's topo-1gpu.xml with two nodes, as "replay compare" does.
Every row counts, disturbed ones too (the regression tests leave out rows
whose mean exceeds their best repetition by 25%).
"""
import glob
import json
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor


def main():
    if len(sys.argv) < 4 or sys.argv[1] not in ("nccl", "ours"):
        sys.exit(__doc__)
    col, calib, starts = sys.argv[1], sys.argv[2], sys.argv[3:]
    flag = "--calib" if col == "nccl" else "--calib-ours"
    jobs = []
    for s in starts:
        files = [f for sub in ("", "proto/", "heldout/") for f in sorted(glob.glob("testdata/hw/%s/%snet-*.json" % (s, sub)))]
        if not files:
            sys.exit("socket-errors.py: no socket recordings under testdata/hw/%s" % s)
        jobs += [(s, f) for f in files]

    def compare(job):
        s, f = job
        topo = "testdata/hw/%s/topo-1gpu.xml" % s.split("/")[0]
        r = subprocess.run(["bin/replay", "compare", f, "--json", "-", "--topo", topo, "--nodes", "2", flag, calib],
                           capture_output=True, text=True)
        if r.returncode:
            sys.exit("%s: %s" % (f, r.stderr.strip()))
        return s, json.loads(r.stdout)["calls"]

    errs = {}
    for s, calls in ThreadPoolExecutor(4).map(compare, jobs):
        for c in calls:
            e = c["nccl_err"] if col == "nccl" else c["err"]
            if e is not None:
                errs.setdefault((s, c["proto"]), []).append(abs(e) * 100)
    for (s, proto), v in sorted(errs.items()):
        print("%-16s %-7s rows %3d  median %5.1f%%  max %5.1f%%" % (s, proto, len(v), statistics.median(v), max(v)))


if __name__ == "__main__":
    main()
