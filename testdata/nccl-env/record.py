"""Record NCCL's own decisions on this machine under several NCCL_* settings.

Run on a machine with GPUs and PyTorch (its bundled NCCL is what gets
recorded):  python3 record.py OUTDIR
For every configuration below it starts one process per visible GPU (RECORD_NGPUS to use fewer), runs a
sweep of all_reduce / all_gather / reduce_scatter sizes and keeps NCCL's
INFO log (INIT, GRAPH, TUNING, ENV) in OUTDIR/<name>.log, and the topology NCCL saw in OUTDIR/topo.xml. The search tests
(search/envlog_test.go) replay the same settings and compare.
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

CONFIGS = {
    "default": {},
    "max-nchannels-4": {"NCCL_MAX_NCHANNELS": "4"},
    "min-nchannels-32": {"NCCL_MIN_NCHANNELS": "32"},
    "proto-ll128": {"NCCL_PROTO": "LL128"},
    "algo-ring-proto-not-ll": {"NCCL_ALGO": "Ring", "NCCL_PROTO": "^LL"},
    "nthreads-256": {"NCCL_NTHREADS": "256"},
    "ll128-nthreads-320": {"NCCL_LL128_NTHREADS": "320"},
    "p2p-level-loc": {"NCCL_P2P_LEVEL": "LOC"},
    "thread-thresholds": {"NCCL_THREAD_THRESHOLDS": "16 16 128 4 16 128"},
    "allreduce-tree-only": {"NCCL_ALGO": "allreduce:tree;allgather:ring"},
}

SIZES = [1 << k for k in range(2, 29, 3)]  # 4 B .. 256 MiB, in bytes


def worker(rank, world, name, env, outdir):
    os.environ.update(env)
    os.environ.update({
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29517",
        "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,GRAPH,TUNING,ENV",
        "NCCL_DEBUG_FILE": os.path.join(outdir, f"{name}.%h.%p.log"),
        "NCCL_NVLS_ENABLE": "0",
        "NCCL_TOPO_DUMP_FILE": os.path.join(outdir, "topo.xml"),
    })
    if rank == 0:
        os.environ["NCCL_GRAPH_DUMP_FILE"] = os.path.join(outdir, f"{name}.graph.xml")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    for size in SIZES:
        n = max(size // 4, 2)
        x = torch.ones(n, dtype=torch.float32, device="cuda")
        dist.all_reduce(x)
        out = torch.empty(n * world, dtype=torch.float32, device="cuda")
        dist.all_gather_into_tensor(out, x)
        dist.reduce_scatter_tensor(x, out)
    torch.cuda.synchronize()
    dist.destroy_process_group()


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    only = sys.argv[2:] or list(CONFIGS)
    world = int(os.environ.get("RECORD_NGPUS", "0")) or torch.cuda.device_count()
    for name in only:
        mp.spawn(worker, args=(world, name, CONFIGS[name], outdir), nprocs=world, join=True)
        parts = sorted(f for f in os.listdir(outdir) if f.startswith(name + ".") and f.endswith(".log") and f != name + ".log")
        with open(os.path.join(outdir, name + ".log"), "w") as out:
            out.write("# NCCL settings: " + " ".join(f"{k}={v}" for k, v in sorted(CONFIGS[name].items())) + "\n")
            for part in parts:
                with open(os.path.join(outdir, part)) as f:
                    out.write(f.read())
                os.remove(os.path.join(outdir, part))
        print("recorded", name, flush=True)


if __name__ == "__main__":
    main()
