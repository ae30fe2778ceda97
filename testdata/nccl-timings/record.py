"""Time NCCL collectives on this machine under several transports and protocols.

Run on a machine with GPUs and PyTorch (its bundled NCCL is what gets
timed):  python3 record.py OUTDIR [CONFIG...]

For every configuration below it starts one process per visible GPU (set
RECORD_NGPUS to use fewer) and, for
every collective and size, times CUDA-graph-captured loops the way
shared/baselines/h200x2-nvswitch/nccl-2.28.9-p2p.tsv was recorded (50 calls
per graph, 10 from 64 MiB on, 5 repetitions; the mean and the best
repetition), plus one eager loop. float32, sum, default algorithm choice
unless the configuration pins one. Sizes follow nccl-tests: AllGather's
output buffer, ReduceScatter's input buffer, else the buffer.

Output: OUTDIR/<config>.tsv with rows "coll bytes mean_us best_us eager_us
busbw_GBps" (exec/sim.ReadMeasurements reads it) and OUTDIR/<config>.log
with NCCL's INFO log (INIT, TUNING) of rank 0.
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

# name -> (environment, largest size in bytes[, smallest size in bytes])
CONFIGS = {
    "p2p-simple": ({"NCCL_PROTO": "Simple"}, 1 << 29),
    "p2p-ll": ({"NCCL_PROTO": "LL"}, 1 << 25),
    "p2p-ll128": ({"NCCL_PROTO": "LL128"}, 1 << 29),
    "shm": ({"NCCL_P2P_DISABLE": "1"}, 1 << 29),
    "shm-simple": ({"NCCL_P2P_DISABLE": "1", "NCCL_PROTO": "Simple"}, 1 << 27),
    "net-socket": ({"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_NET": "Socket",
                    "NCCL_SOCKET_IFNAME": "lo"}, 1 << 27),
    # Simple at 8 KiB - 8 MiB under NCCL's knobs: threads per block, buffer
    # size (slice size) and channel count, to tell per-slice costs from
    # per-byte costs and per-block rates from per-link rates.
    "simple-nthreads-128": ({"NCCL_PROTO": "Simple", "NCCL_NTHREADS": "128"}, 1 << 23, 1 << 13),
    "simple-nthreads-256": ({"NCCL_PROTO": "Simple", "NCCL_NTHREADS": "256"}, 1 << 23, 1 << 13),
    "simple-nthreads-512": ({"NCCL_PROTO": "Simple", "NCCL_NTHREADS": "512"}, 1 << 23, 1 << 13),
    "simple-buffsize-1m": ({"NCCL_PROTO": "Simple", "NCCL_BUFFSIZE": str(1 << 20)}, 1 << 23, 1 << 13),
    "simple-buffsize-16m": ({"NCCL_PROTO": "Simple", "NCCL_BUFFSIZE": str(1 << 24)}, 1 << 23, 1 << 13),
    "simple-nch-1": ({"NCCL_PROTO": "Simple", "NCCL_MIN_NCHANNELS": "1", "NCCL_MAX_NCHANNELS": "1"}, 1 << 23, 1 << 13),
    "simple-nch-4": ({"NCCL_PROTO": "Simple", "NCCL_MIN_NCHANNELS": "4", "NCCL_MAX_NCHANNELS": "4"}, 1 << 23, 1 << 13),
    "simple-nch-12": ({"NCCL_PROTO": "Simple", "NCCL_MIN_NCHANNELS": "12", "NCCL_MAX_NCHANNELS": "12"}, 1 << 25, 1 << 13),
    # Channel counts no fit uses: held out for the copy throughput a GPU's
    # blocks share (exec/sim's gpu_copy_GBps).
    "simple-nch-2": ({"NCCL_PROTO": "Simple", "NCCL_MIN_NCHANNELS": "2", "NCCL_MAX_NCHANNELS": "2"}, 1 << 25, 1 << 13),
    "simple-nch-8": ({"NCCL_PROTO": "Simple", "NCCL_MIN_NCHANNELS": "8", "NCCL_MAX_NCHANNELS": "8"}, 1 << 25, 1 << 13),
    "simple-nch-16": ({"NCCL_PROTO": "Simple", "NCCL_MIN_NCHANNELS": "16", "NCCL_MAX_NCHANNELS": "16"}, 1 << 25, 1 << 13),
    # The same for LL and LL128: per-block rates at 1 and 4 channels.
    "ll-nch-1": ({"NCCL_PROTO": "LL", "NCCL_MIN_NCHANNELS": "1", "NCCL_MAX_NCHANNELS": "1"}, 1 << 23, 1 << 13),
    "ll-nch-4": ({"NCCL_PROTO": "LL", "NCCL_MIN_NCHANNELS": "4", "NCCL_MAX_NCHANNELS": "4"}, 1 << 23, 1 << 13),
    "ll128-nch-1": ({"NCCL_PROTO": "LL128", "NCCL_MIN_NCHANNELS": "1", "NCCL_MAX_NCHANNELS": "1"}, 1 << 23, 1 << 13),
    "ll128-nch-4": ({"NCCL_PROTO": "LL128", "NCCL_MIN_NCHANNELS": "4", "NCCL_MAX_NCHANNELS": "4"}, 1 << 23, 1 << 13),
    # Simple on one channel under other buffer sizes (slice sizes) and
    # thread counts: per-slice costs against per-byte costs, and whether a
    # block's rate scales with its threads.
    "simple-nch-1-buffsize-1m": ({"NCCL_PROTO": "Simple", "NCCL_MIN_NCHANNELS": "1", "NCCL_MAX_NCHANNELS": "1",
                                  "NCCL_BUFFSIZE": str(1 << 20)}, 1 << 25, 1 << 13),
    "simple-nch-1-buffsize-16m": ({"NCCL_PROTO": "Simple", "NCCL_MIN_NCHANNELS": "1", "NCCL_MAX_NCHANNELS": "1",
                                   "NCCL_BUFFSIZE": str(1 << 24)}, 1 << 25, 1 << 13),
    "simple-nch-1-nthreads-128": ({"NCCL_PROTO": "Simple", "NCCL_MIN_NCHANNELS": "1", "NCCL_MAX_NCHANNELS": "1",
                                   "NCCL_NTHREADS": "128"}, 1 << 25, 1 << 13),
    "simple-nch-1-nthreads-256": ({"NCCL_PROTO": "Simple", "NCCL_MIN_NCHANNELS": "1", "NCCL_MAX_NCHANNELS": "1",
                                   "NCCL_NTHREADS": "256"}, 1 << 25, 1 << 13),
    # LL through host memory (SHM) and every protocol over sockets: the
    # per-slice round trip of a GPU's loads from host memory, and the socket
    # proxies' costs per protocol.
    "shm-ll": ({"NCCL_P2P_DISABLE": "1", "NCCL_PROTO": "LL"}, 1 << 25),
    "shm-ll-nch-1": ({"NCCL_P2P_DISABLE": "1", "NCCL_PROTO": "LL", "NCCL_MIN_NCHANNELS": "1",
                      "NCCL_MAX_NCHANNELS": "1"}, 1 << 23, 1 << 13),
    "net-socket-ll": ({"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_NET": "Socket",
                       "NCCL_SOCKET_IFNAME": "lo", "NCCL_PROTO": "LL"}, 1 << 23),
    "net-socket-simple": ({"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_NET": "Socket",
                           "NCCL_SOCKET_IFNAME": "lo", "NCCL_PROTO": "Simple"}, 1 << 27),
    # SHM Simple on one channel: the per-block rate through host memory.
    "shm-simple-nch-1": ({"NCCL_P2P_DISABLE": "1", "NCCL_PROTO": "Simple", "NCCL_MIN_NCHANNELS": "1",
                          "NCCL_MAX_NCHANNELS": "1"}, 1 << 23, 1 << 13),
}

COLLS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"]


def bus_factor(coll, n):
    if coll == "all_reduce":
        return 2 * (n - 1) / n
    if coll in ("all_gather", "reduce_scatter"):
        return (n - 1) / n
    return 1.0


def call(coll, a, b, n):
    if coll == "all_reduce":
        dist.all_reduce(a)
    elif coll == "all_gather":
        dist.all_gather_into_tensor(b, a)
    elif coll == "reduce_scatter":
        dist.reduce_scatter_tensor(b, a)
    elif coll == "broadcast":
        dist.broadcast(a, 0)
    elif coll == "reduce":
        dist.reduce(a, 0)


def buffers(coll, nbytes, n, dev):
    elems = max(nbytes // 4, 1)
    if coll == "all_gather":
        per = max(elems // n, 1)
        return torch.ones(per, device=dev), torch.empty(per * n, device=dev)
    if coll == "reduce_scatter":
        per = max(elems // n, 1)
        return torch.ones(per * n, device=dev), torch.empty(per, device=dev)
    return torch.ones(elems, device=dev), None


def worker(rank, n, name, env, maxbytes, minbytes, outdir, port):
    os.environ.update(env)
    os.environ.update({
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
        "NCCL_NVLS_ENABLE": "0",
        "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,TUNING",
        "NCCL_DEBUG_FILE": os.path.join(outdir, f"{name}.rank%p.log.tmp") if rank == 0 else "/dev/null",
    })
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=n, device_id=dev)
    rows = []
    sizes = [8 << (2 * k) for k in range(15) if minbytes <= (8 << (2 * k)) <= maxbytes]
    stream = torch.cuda.Stream(device=dev)
    for coll in COLLS:
        for nbytes in sizes:
            a, b = buffers(coll, nbytes, n, dev)
            iters = 10 if nbytes >= (64 << 20) else 50
            with torch.cuda.stream(stream):
                for _ in range(3):
                    call(coll, a, b, n)
            stream.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=stream):
                for _ in range(iters):
                    call(coll, a, b, n)
            times = []
            for _ in range(5):
                dist.barrier()
                torch.cuda.synchronize()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(stream)
                with torch.cuda.stream(stream):
                    g.replay()
                e.record(stream)
                e.synchronize()
                times.append(s.elapsed_time(e) * 1000 / iters)
            del g
            dist.barrier()
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(stream)
            with torch.cuda.stream(stream):
                for _ in range(iters):
                    call(coll, a, b, n)
            e.record(stream)
            e.synchronize()
            eager = s.elapsed_time(e) * 1000 / iters
            mean = sum(times) / len(times)
            busbw = nbytes / (mean * 1e3) * bus_factor(coll, n)
            rows.append(f"{coll} {nbytes} {mean:.2f} {min(times):.2f} {eager:.2f} {busbw:.2f}")
    dist.destroy_process_group()
    if rank == 0:
        envtxt = " ".join(f"{k}={v}" for k, v in sorted(env.items()))
        tmp = os.path.join(outdir, f"{name}.tsv.tmp")
        with open(tmp, "w") as f:
            f.write(f"# NCCL {torch.cuda.nccl.version()} on {n}x {torch.cuda.get_device_name(0)}, one process per GPU, "
                    f"PyTorch {torch.__version__}; settings: {envtxt or '(default)'} NCCL_NVLS_ENABLE=0\n")
            f.write("# float32, sum, CUDA-graph captured loops (50 iters; 10 for >=64MiB), 5 reps; recorded by testdata/nccl-timings/record.py\n")
            f.write("# columns: coll bytes mean_us best_us eager_us(no graph) busbw_GBps(nccl-tests formula)\n")
            f.write("\n".join(rows) + "\n")
        os.replace(tmp, os.path.join(outdir, f"{name}.tsv"))


def main():
    outdir = sys.argv[1]
    names = sys.argv[2:] or list(CONFIGS)
    n = int(os.environ.get("RECORD_NGPUS", "0")) or torch.cuda.device_count()
    os.makedirs(outdir, exist_ok=True)
    for i, name in enumerate(names):
        env, maxbytes, *rest = CONFIGS[name]
        minbytes = rest[0] if rest else 0
        t0 = time.time()
        mp.spawn(worker, args=(n, name, env, maxbytes, minbytes, outdir, 29600 + i), nprocs=n, join=True)
        for f in os.listdir(outdir):
            if f.startswith(name + ".rank") and f.endswith(".log.tmp"):
                os.replace(os.path.join(outdir, f), os.path.join(outdir, name + ".log"))
        print(f"{name}: {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
