#!/bin/bash
# GPU ranks over the ib plugin (run gpu --net ib: an RDMA device through
# libibverbs where one exists, else the software verbs provider, TCP on
# loopback), beside the socket plugin's path, on one GPU: the two ranks
# share it (CUDA_VISIBLE_DEVICES=0) and each is a host of its own
# (TWINCCL_HOSTID=split:1), so every connection is a net one.
#
# Build on the Go machine (no Go on the device: carry bin/):
#
#   make build
#   go test -c -o bin/gpudev.test ./exec/hw/gpudev
#   go test -c -o bin/cuda.test ./exec/hw/cuda
#
# then on the device, from the repo root:
#
#   bash testdata/hw/ib-gpu.sh OUTDIR
#
# 1. conformance.log: gpudev's TestConformanceIB (every collective,
#    algorithm and protocol the net transport takes: LL and Simple, LL128
#    being refused over host staging; LocalJobs of up to 4 ranks over the
#    ib plugin and the soft provider), TestGDRSoftGPU (1 MiB GPU to GPU
#    through the plugin's GPUDirect path and the flush, the soft provider
#    reaching GPU memory by cuMemcpyDtoH/HtoD) and cuda's
#    TestMemGetDmaBufFd (dma-buf export, or a typed not-supported skip),
#    all with TWINCCL_REQUIRE_GPU=1 (a missing GPU fails them).
# 2. NET-OP.txt / NET-OP.json: run gpu -np 2 sweeps, NET socket and ib,
#    OP allreduce, allgather, reducescatter, 8 B to 64 MiB (x4), one pass:
#    the busbw columns of ib beside socket's.
set -u
OUT=${1:?usage: bash testdata/hw/ib-gpu.sh OUTDIR}
mkdir -p "$OUT"
failed=0
export TWINCCL_REQUIRE_GPU=1
bin/gpudev.test -test.run '^(TestConformanceIB|TestGDRSoftGPU)$' -test.v -test.timeout 15m > "$OUT/conformance.log" 2>&1 || { echo "FAILED gpudev tests (see $OUT/conformance.log)"; failed=1; }
bin/cuda.test -test.run '^TestMemGetDmaBufFd$' -test.v >> "$OUT/conformance.log" 2>&1 || { echo "FAILED cuda dma-buf test"; failed=1; }
for op in allreduce allgather reducescatter; do
  for net in socket ib; do
    CUDA_VISIBLE_DEVICES=0 TWINCCL_HOSTID=split:1 timeout 300 bin/run gpu -np 2 --net $net --op $op \
      -b 8 -e 64M -f 4 --passes 1 --retries 0 --json "$OUT/$net-$op.json" > "$OUT/$net-$op.txt" 2>&1 ||
      { echo "FAILED $net $op (see $OUT/$net-$op.txt)"; failed=1; }
  done
done
grep -h -- "--- \(PASS\|FAIL\|SKIP\)" "$OUT/conformance.log"
exit $failed
