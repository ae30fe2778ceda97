#!/usr/bin/env python3
"""Median and maximum |err| of the simulation over the recordings of each
start named, per protocol, as the closing notes report them. Run from the
repo root after `make build`:

    python3 testdata/hw/start-errors.py [--transport net|p2p|shm] [--max-bytes B] [--undisturbed] [--bias] [--worst N] COLUMN CALIB START...

--transport net (the default) takes every socket recording of a start
(net-*.json, proto/net-*.json, heldout/net-*.json), simulated on its
machine's topo-1gpu.xml (or the start's own, as h100x4/sockets has) with
two nodes; p2p and shm take its recordings at the held-out sizes
(heldout/p2p-*.json, heldout/shm-*.json) on the
machine's topo.xml (or the start's own, where the machine has none, as
h200x4/ and h100x4/). --max-bytes leaves out rows larger than B bytes (e.g.
2097152 where a fit took a start's rows from 12 MiB, as fit-ours.sh's
LARGE does). COLUMN is nccl (NCCL's column) or ours (our executor's);
CALIB a calibration file or embedded:NAME.json, which simulates that
column (ours: --calib-ours); a START is a directory under testdata/hw
(e.g. h100x2/rerun12). Every row counts, disturbed ones too, unless
--undisturbed leaves out, as the regression tests do, the rows whose
measured time (the median of their repetitions; in a recording that kept
none, their mean) exceeds their best repetition by 25%; it also prints
how many it left out and the median spread of the repetitions
((max-min)/median), a measure of how much the host disturbed the start.

Each start's line also gives its bias, the median signed error (positive:
the simulation is slower than the hardware), and for sockets the medians
of its loopback probes (net_probe: one-way latency, throughput per
direction both ways at once), which the socket constants scale by: a bias
that follows the probes from start to start is the host's, not the
model's. --bias then prints, per protocol and op, the median signed error
of every size over all the starts named (what is left systematic once
the starts' noise averages out), and --worst N the N rows furthest off,
with the median, best and worst of their repetitions.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor


def main():
    ap = argparse.ArgumentParser(description=__doc__.replace("%", "%%"), formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--transport", choices=("net", "p2p", "shm"), default="net")
    ap.add_argument("--max-bytes", type=int, default=0)
    ap.add_argument("--undisturbed", action="store_true")
    ap.add_argument("--bias", action="store_true")
    ap.add_argument("--worst", type=int, default=0)
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
            # a start on another kind of machine keeps its own (h100x4/sockets)
            own = "testdata/hw/%s/topo-1gpu.xml" % s
            args += ["--topo", own if os.path.exists(own) else machine + "/topo-1gpu.xml", "--nodes", "2"]
        else:
            # a machine of more GPUs keeps a topology per start (h200x4/DATE)
            own = "testdata/hw/%s/topo.xml" % s
            args += ["--topo", own if not os.path.exists(machine + "/topo.xml") and os.path.exists(own) else machine + "/topo.xml"]
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode:
            sys.exit("%s: %s" % (f, r.stderr.strip()))
        with open(f) as fh:
            doc = json.load(fh)
        reps = {row["bytes"]: timing(row) for row in doc["rows"]}
        probes = doc.get("net_probe") or []
        probes = probes + [row["net_probe"] for row in doc["rows"] if row.get("net_probe")]
        return s, f, json.loads(r.stdout)["calls"], reps, probes

    reps_key, time_key, best_key = ("nccl_reps_us", "nccl_time_us", "nccl_best_us") if a.column == "nccl" else ("reps_us", "time_us", "best_us")

    def timing(row):
        """The row's measured time, best and worst repetition and its
        repetitions (None: a recording that kept only its mean and best,
        whose worst is unknown), or None where it has neither."""
        rr = row.get(reps_key)
        if rr:
            return statistics.median(rr), min(rr), max(rr), rr
        if row.get(time_key) and row.get(best_key):
            return row[time_key], row[best_key], None, None
        return None

    errs, signed, left, spread, lat, bw, cells, rows = {}, {}, {}, {}, {}, {}, {}, []
    for s, f, calls, reps, probes in ThreadPoolExecutor(4).map(compare, jobs):
        for p in probes:
            lat.setdefault(s, []).append(p["latency_us"])
            if p.get("both_ways_GBps"):
                bw.setdefault(s, []).append(p["both_ways_GBps"])
        for c in calls:
            if a.max_bytes and c["bytes"] > a.max_bytes:
                continue
            tm = reps.get(c["bytes"])
            if tm:
                med, best, worst, rr = tm
                if rr and len(rr) > 1:
                    spread.setdefault((s, c["proto"]), []).append((worst - best) / med * 100)
                if a.undisturbed and med > 1.25 * best:
                    left[(s, c["proto"])] = left.get((s, c["proto"]), 0) + 1
                    continue
            e = c["nccl_err"] if a.column == "nccl" else c["err"]
            if e is not None:
                errs.setdefault((s, c["proto"]), []).append(abs(e) * 100)
                signed.setdefault((s, c["proto"]), []).append(e * 100)
                cells.setdefault((c["proto"], c["op"], c["bytes"]), []).append(e * 100)
                if tm:
                    rows.append((abs(e) * 100, e * 100, s, f.split(s + "/", 1)[-1], c["op"], c["bytes"], c["proto"], med, best, "%9.1f" % worst if worst else "        -"))
    for (s, proto), v in sorted(errs.items()):
        line = "%-16s %-4s %-7s rows %3d  median %5.1f%%  max %5.1f%%" % (s, a.transport, proto, len(v), statistics.median(v), max(v))
        if a.undisturbed:
            sp = spread.get((s, proto))
            line += "  disturbed %3d  rep spread %s" % (left.get((s, proto), 0), "%5.1f%%" % statistics.median(sp) if sp else "   - ")
        line += "  bias %+5.1f%%" % statistics.median(signed[(s, proto)])
        if a.transport == "net" and s in lat:
            line += "  probe %.2f us %s GB/s" % (statistics.median(lat[s]), "%.2f" % statistics.median(bw[s]) if s in bw else "-")
        print(line)
    if a.bias:
        print("\nmedian signed error per size over %d start(s) (positive: the simulation is slower):" % len(a.starts))
        for proto, op in sorted({k[:2] for k in cells}):
            sizes = sorted(k[2] for k in cells if k[:2] == (proto, op))
            print("%-7s %-14s %s" % (proto, op, " ".join("%d:%+.0f" % (b, statistics.median(cells[(proto, op, b)])) for b in sizes)))
    if a.worst:
        print("\nthe %d rows furthest off (err, start, file, op, bytes, protocol; repetitions: median, best, worst, in us):" % a.worst)
        for r in sorted(rows, reverse=True)[: a.worst]:
            print("%+6.1f%%  %-16s %-32s %-13s %10d %-6s  %9.1f %9.1f %s" % r[1:])


if __name__ == "__main__":
    main()
