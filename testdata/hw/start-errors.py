#!/usr/bin/env python3
"""Median and maximum |err| of the simulation over the recordings of each
start named, per protocol, as the closing notes report them. Run from the
repo root after `make build`:

    python3 testdata/hw/start-errors.py [--transport net|p2p|shm] [--max-bytes B] [--undisturbed] COLUMN CALIB START...

--transport net (the default) takes every socket recording of a start
(net-*.json, proto/net-*.json, heldout/net-*.json), simulated on its
machine's topo-1gpu.xml with two nodes; p2p and shm take its recordings at
the held-out sizes (heldout/p2p-*.json, heldout/shm-*.json) on the
machine's topo.xml. --max-bytes leaves out rows larger than B bytes (e.g.
2097152 where a fit took a start's rows from 12 MiB, as fit-ours.sh's
LARGE does). COLUMN is nccl (NCCL's column) or ours (our executor's);
CALIB a calibration file or embedded:NAME.json, which simulates that
column (ours: --calib-ours); a START is a directory under testdata/hw
(e.g. h100x2/rerun12). Every row counts, disturbed ones too, unless
--undisturbed leaves out, as the regression tests do, the rows whose
measured time (the median of their repetitions) exceeds their best
repetition by 25%; it also prints how many it left out and the median
spread of the repetitions ((max-min)/median), a measure of how much the
host disturbed the start.
"""
import argparse
import glob
import json
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor


def main():
    ap = argparse.ArgumentParser(description=__doc__.replace("%", "%%"), formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--transport", choices=("net", "p2p", "shm"), default="net")
    ap.add_argument("--max-bytes", type=int, default=0)
    ap.add_argument("--undisturbed", action="store_true")
    ap.add_argument("column", choices=("nccl", "ours"))
    ap.add_argument("calib")
    ap.add_argument("starts", nargs="+")
    a = ap.parse_args()
    flag = "--calib" if a.column == "nccl" else "--calib-ours"
    subs = ("", "proto/", "heldout/") if a.transport == "net" else ("heldout/",)
    jobs = []
    for s in a.starts:
        files = [f for sub in subs for f in sorted(glob.glob("testdata/hw/%s/%s%s-*.json" % (s, sub, a.transport)))]
        if not files:
            sys.exit("start-errors.py: no %s recordings under testdata/hw/%s" % (a.transport, s))
        jobs += [(s, f) for f in files]

    def compare(job):
        s, f = job
        machine = "testdata/hw/%s" % s.split("/")[0]
        args = ["bin/replay", "compare", f, "--json", "-", flag, a.calib]
        if a.transport == "net":
            args += ["--topo", machine + "/topo-1gpu.xml", "--nodes", "2"]
        else:
            args += ["--topo", machine + "/topo.xml"]
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode:
            sys.exit("%s: %s" % (f, r.stderr.strip()))
        with open(f) as fh:
            reps = {row["bytes"]: row.get(reps_key) for row in json.load(fh)["rows"]}
        return s, json.loads(r.stdout)["calls"], reps

    reps_key = "nccl_reps_us" if a.column == "nccl" else "reps_us"
    errs, left, spread = {}, {}, {}
    for s, calls, reps in ThreadPoolExecutor(4).map(compare, jobs):
        for c in calls:
            if a.max_bytes and c["bytes"] > a.max_bytes:
                continue
            rr = reps.get(c["bytes"])
            if rr and len(rr) > 1:
                spread.setdefault((s, c["proto"]), []).append((max(rr) - min(rr)) / statistics.median(rr) * 100)
                if a.undisturbed and statistics.median(rr) > 1.25 * min(rr):
                    left[(s, c["proto"])] = left.get((s, c["proto"]), 0) + 1
                    continue
            e = c["nccl_err"] if a.column == "nccl" else c["err"]
            if e is not None:
                errs.setdefault((s, c["proto"]), []).append(abs(e) * 100)
    for (s, proto), v in sorted(errs.items()):
        line = "%-16s %-4s %-7s rows %3d  median %5.1f%%  max %5.1f%%" % (s, a.transport, proto, len(v), statistics.median(v), max(v))
        if a.undisturbed:
            sp = spread.get((s, proto))
            line += "  disturbed %3d  rep spread %s" % (left.get((s, proto), 0), "%5.1f%%" % statistics.median(sp) if sp else "   - ")
        print(line)


if __name__ == "__main__":
    main()
