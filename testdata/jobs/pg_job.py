#!/usr/bin/env python3
"""A small PyTorch job with several NCCL process groups, for twinccl's profiler.

Every rank runs all_reduce, all_gather_into_tensor, reduce_scatter_tensor and
broadcast at a few sizes on each of its process groups, checks every result, and
prints the time each group's calls took (CUDA events, summed per group) as JSON
lines, one per rank and group, to compare with the traces the profiler plugin
writes (docs/guide/profiler.md; testdata/jobs/run-profiled.sh runs it so).

The groups, for a world of N ranks and --tp T (T divides N, else 1):
  world   all N ranks (the default process group)
  tp      consecutive blocks of T ranks       (dist.new_group, one per block)
  dp      ranks equal modulo T                 (dist.new_group, one per class)
  half    even ranks and odd ranks            (dist.split_group where PyTorch
          has it, which NCCL does with ncclCommSplit; else dist.new_group)
With one rank every group is a single-rank communicator.

Runs under torchrun (torchrun --nproc_per_node=N pg_job.py), under Slurm
(srun python pg_job.py, with MASTER_ADDR and MASTER_PORT set) or as a plain
`python pg_job.py`, which is one rank (env:// with RANK=0, WORLD_SIZE=1 and a
free local port).

--topo-only initialises the world group, runs one all_reduce and exits: with
NCCL_TOPO_DUMP_FILE set, NCCL writes the topology of the job's GPUs.
"""

import argparse
import json
import os
import socket
import sys

import torch
import torch.distributed as dist


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_defaults():
    """One rank on this host when no launcher set the env:// variables."""
    if "RANK" not in os.environ and "SLURM_PROCID" in os.environ:
        os.environ["RANK"] = os.environ["SLURM_PROCID"]
        os.environ.setdefault("WORLD_SIZE", os.environ.get("SLURM_NTASKS", "1"))
        os.environ.setdefault("LOCAL_RANK", os.environ.get("SLURM_LOCALID", "0"))
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))


def layout(world, tp):
    """The rank lists of every group kind, in the order all ranks create them."""
    if tp < 1 or world % tp != 0:
        tp = 1
    return {
        "tp": [list(range(b, b + tp)) for b in range(0, world, tp)],
        "dp": [list(range(c, world, tp)) for c in range(tp)],
        "half": [r for r in ([list(range(0, world, 2))] + [list(range(1, world, 2))]) if r],
    }


def make_groups(world, rank, tp):
    """Creates every group on every rank (PyTorch requires it) and returns
    this rank's: name -> (group, global ranks)."""
    mine = {"world": (dist.group.WORLD, list(range(world)))}
    lay = layout(world, tp)
    for kind in ("tp", "dp"):
        for ranks in lay[kind]:
            g = dist.new_group(ranks)
            if rank in ranks:
                mine[kind] = (g, ranks)
    ranks = next(r for r in lay["half"] if rank in r)
    g = None
    if hasattr(dist, "split_group"):
        try:
            g = dist.split_group(split_ranks=lay["half"])
        except (RuntimeError, ValueError, TypeError, NotImplementedError) as e:
            print(f"pg_job: rank {rank}: split_group failed ({e}); using new_group", file=sys.stderr)
            g = None
    if g is None:
        for r in lay["half"]:
            made = dist.new_group(r)
            if rank in r:
                g = made
    mine["half"] = (g, ranks)
    return mine


def fill(n, value, dtype, device):
    return torch.full((n,), float(value), dtype=dtype, device=device)


def check(name, got, want):
    if not torch.equal(got, want):
        bad = (got != want).nonzero()
        i = int(bad[0]) if len(bad) else -1
        raise SystemExit(f"{name}: wrong result at element {i}: got {got[i].item()} want {want[i].item()}")


def run_group(name, group, ranks, rank, sizes, iters, device, timings):
    """Runs the four collectives on one group, checks them, adds their
    CUDA-event times to timings[name]."""
    n = len(ranks)
    me = ranks.index(rank)
    root = ranks[0]
    for count in sizes:
        for dtype in (torch.float32, torch.bfloat16):
            # Values stay small integers: exact in bfloat16.
            for it in range(iters):
                calls = []

                def timed(label, fn):
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    fn()
                    end.record()
                    calls.append((label, start, end))

                x = fill(count, me + 1, dtype, device)
                timed("all_reduce", lambda: dist.all_reduce(x, group=group))
                check(f"{name} all_reduce {count} {dtype}", x, fill(count, n * (n + 1) // 2, dtype, device))

                part = fill(count, me, dtype, device)
                out = torch.empty(count * n, dtype=dtype, device=device)
                timed("all_gather", lambda: dist.all_gather_into_tensor(out, part, group=group))
                want = torch.cat([fill(count, r, dtype, device) for r in range(n)])
                check(f"{name} all_gather {count} {dtype}", out, want)

                full = torch.cat([fill(count, r + me, dtype, device) for r in range(n)])
                red = torch.empty(count, dtype=dtype, device=device)
                timed("reduce_scatter", lambda: dist.reduce_scatter_tensor(red, full, group=group))
                check(f"{name} reduce_scatter {count} {dtype}", red, fill(count, n * me + n * (n - 1) // 2, dtype, device))

                b = fill(count, 7 + it if rank == root else -1, dtype, device)
                timed("broadcast", lambda: dist.broadcast(b, src=root, group=group))
                check(f"{name} broadcast {count} {dtype}", b, fill(count, 7 + it, dtype, device))

                torch.cuda.synchronize(device)
                t = timings.setdefault(name, {"calls": 0, "ms": 0.0})
                for _, s, e in calls:
                    t["calls"] += 1
                    t["ms"] += s.elapsed_time(e)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tp", type=int, default=2, help="tensor-parallel group size (default 2; 1 if it does not divide the world)")
    ap.add_argument("--sizes", default="1024,65536,4194304", help="element counts, comma-separated")
    ap.add_argument("--iters", type=int, default=2, help="iterations per size and datatype")
    ap.add_argument("--topo-only", action="store_true", help="initialise the world group, one all_reduce, exit")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]

    env_defaults()
    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    if not torch.cuda.is_available():
        raise SystemExit("pg_job: no CUDA device: this job runs NCCL on GPUs")
    torch.cuda.set_device(local)
    device = torch.device("cuda", local)
    # device_id makes the world communicator eager, so that split_group can
    # split it (ncclCommSplit); PyTorch before 2.3 has no device_id.
    try:
        dist.init_process_group("nccl", init_method="env://", rank=rank, world_size=world, device_id=device)
    except TypeError:
        dist.init_process_group("nccl", init_method="env://", rank=rank, world_size=world)
    try:
        if args.topo_only:
            x = torch.ones(1, device=device)
            dist.all_reduce(x)
            torch.cuda.synchronize(device)
            return
        groups = make_groups(world, rank, args.tp)
        timings = {}
        for name in ("world", "tp", "dp", "half"):
            group, ranks = groups[name]
            run_group(name, group, ranks, rank, sizes, args.iters, device, timings)
        for name in ("world", "tp", "dp", "half"):
            _, ranks = groups[name]
            t = timings[name]
            print(json.dumps({"rank": rank, "group": name, "ranks": ranks, "calls": t["calls"],
                              "ms": round(t["ms"], 3)}), flush=True)
        dist.barrier()
    finally:
        # Destroying the groups finalizes their NCCL communicators: the
        # profiler plugin writes its trace then.
        dist.destroy_process_group()
    if rank == 0:
        print("pg_job: all results correct", file=sys.stderr)


if __name__ == "__main__":
    main()
