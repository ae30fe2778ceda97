"""PyTorch on twinccl's libnccl (run by testdata/lib/run-gpu.sh with
LD_PRELOAD=bin/libnccl.so.2): torch.distributed with backend nccl, world
size 1 on GPU 0, a DistributedDataParallel step and every collective, each
checked against its definition. Exits non-zero on the first wrong result."""
import ctypes
import os
import sys

import torch
import torch.distributed as dist


def lib_in_use():
    """The libnccl this process mapped (so that a run on NCCL's own is seen)."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "libnccl" in line}
    return sorted(paths)


def serving_library():
    """Which library answers the process's ncclGetUniqueId, as PyTorch's
    calls resolve it: twinccl's ids start with the tag TWID."""
    uid = ctypes.create_string_buffer(128)
    fn = ctypes.CDLL(None).ncclGetUniqueId
    if fn(uid) != 0:
        return "unknown (ncclGetUniqueId failed)"
    return "twinccl" if uid.raw[:4] == b"TWID" else "not twinccl"


def check(name, got, want):
    if not torch.equal(got.cpu(), want.cpu()):
        print(f"FAIL {name}: got {got.flatten()[:8].tolist()} want {want.flatten()[:8].tolist()}")
        sys.exit(1)
    print(f"ok   {name}")


def main():
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 0)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=dev)
    print("libnccl mapped:", lib_in_use())
    served = serving_library()
    print("NCCL calls served by:", served)
    if served != "twinccl" and os.environ.get("TWINCCL_EXPECT", "twinccl") == "twinccl":
        print("FAIL: the process's NCCL symbols are not twinccl's (set LD_PRELOAD=bin/libnccl.so.2)")
        sys.exit(1)
    n = 4099

    # A DDP step: with one rank the averaged gradients are the local ones.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)).to(dev)
    ref = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)).to(dev)
    ref.load_state_dict(model.state_dict())
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
    x = torch.randn(32, 64, device=dev)
    ddp(x).square().sum().backward()
    ref(x).square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        check(f"DDP gradient {name}", p.grad, q.grad)

    base = torch.arange(n, device=dev, dtype=torch.float32) % 97
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT):
        t = base.clone()
        dist.all_reduce(t, op=op)
        check(f"all_reduce {op}", t, base)
    for dt in (torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.uint8, torch.float64):
        t = base.to(dt)
        dist.all_reduce(t)
        check(f"all_reduce {dt}", t, base.to(dt))
    out = torch.empty(n, device=dev)
    dist.all_gather_into_tensor(out, base)
    check("all_gather_into_tensor", out, base)
    lst = [torch.empty(n, device=dev)]
    dist.all_gather(lst, base)
    check("all_gather", lst[0], base)
    out = torch.empty(n, device=dev)
    dist.reduce_scatter_tensor(out, base)
    check("reduce_scatter_tensor", out, base)
    t = base.clone()
    dist.broadcast(t, src=0)
    check("broadcast", t, base)
    t = base.clone()
    dist.reduce(t, dst=0)
    check("reduce", t, base)
    out = torch.empty(n, device=dev)
    dist.all_to_all_single(out, base)
    check("all_to_all_single", out, base)
    dist.barrier()
    print("ok   barrier")

    # A subgroup of the one rank (ncclCommSplit, or a new communicator).
    g = dist.new_group([0])
    t = base.clone()
    dist.all_reduce(t, group=g)
    check("all_reduce on a new group", t, base)

    # Asynchronous work and a CUDA graph capture of an all_reduce.
    t = base.clone()
    dist.all_reduce(t, async_op=True).wait()
    check("async all_reduce", t, base)
    s = torch.cuda.Stream()
    t = base.clone()
    with torch.cuda.stream(s):
        dist.all_reduce(t)  # warm-up outside the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=s):
            dist.all_reduce(t)
    graph.replay()
    torch.cuda.synchronize()
    check("all_reduce in a CUDA graph", t, base)

    dist.destroy_process_group()
    print("all checks passed")


if __name__ == "__main__":
    main()
