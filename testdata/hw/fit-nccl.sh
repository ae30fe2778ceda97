#!/bin/bash
# Fits the last stages of NCCL's calibration of the H200 pair (the
# embedded exec/sim/calib/h200.json, stages 7-12 of its source note) on
# NCCL's column of the recordings of one machine, from a calibration
# holding the earlier stages, and reports the held-out files' errors at
# every stage. Run from the repo root after `make build`:
#
#   bash testdata/hw/fit-nccl.sh DIR START.json OUT.json [X4DIR X4TOPO]
#
# Stages (each starts from the last; only the named constants move):
#   7   SHM LL: the host loads' round trip, rounds and per-byte cost on
#       DIR/proto/shm-*-ll
#   8   P2P Simple: the per-call and per-primitive constants, the cost of
#       NCCL's direct primitives and of its block size (first_op_us,
#       thread_op_us, rate_threads) on DIR/proto/p2p-*-simple and
#       DIR/threads/p2p-*-ntN.json (2-96 KiB, NCCL_NTHREADS forced: block
#       sizes NCCL's own choices do not give those sizes), with the 4-GPU
#       recordings X4DIR/*.json from 2 MiB (many chunks per call) when
#       given; DIR/threads/*-large.json (256 KiB-64 MiB on 96-288 threads,
#       which NCCL itself never runs) are held out: the model does not
#       follow a small block's copy rate at those sizes
#   9   SHM Simple: host memory constants, the send-to-receive turn
#       (host_turn_us) and host_mem_GBps on DIR/proto/shm-*-simple,
#       DIR/threads/shm-*-ntN.json and the tuner's-choice DIR/shm-*.json
#       from 2 MiB
#   10  P2P LL128: per-call, per-slice and block-size constants on
#       DIR/proto/p2p-*-ll128
#   11  the same with each collective's own per-call cost (coll_us: NCCL's
#       ReduceScatter is 1.5 us slower than its AllGather under LL128
#       alone), from stage 10 (fitted together from stage 9, the search
#       stops in a worse minimum: 5.0% median against 2.7%)
#   12  LL128's copy rate per block and per GPU (gpu_copy_GBps: what its
#       blocks share) and remote store cost, on DIR/proto/p2p-*-ll128,
#       DIR/rerun3/ll128-large (16-64 MiB, where proto/ stops at 8 MiB: the
#       copy rate of large calls, recorded on another start of the machine)
#       and the H100 pair's PyTorch LL128 tables (from 16 MiB to 512 MiB,
#       and on one and four channels)
# Held out at every stage: DIR/heldout (sizes no fit uses) of the stage's
# transport and protocol. Each stage's table goes to OUT.stageN.txt.
# The embedded file's socket constants (net_socket.*) come after this
# chain, from testdata/hw/fit-sockets.sh (fitted across starts of the
# machine, with the recordings' loopback probes); see its header.
set -eu
dir=${1:?DIR} start=${2:?START.json} out=${3:?OUT.json} x4=${4:-} x4topo=${5:-}
replay=${REPLAY:-bin/replay}
cal() { # STAGE FROM PARAMS FITTED... -- HELDOUT...
  local stage=$1 from=$2 params=$3; shift 3
  local args=()
  while [ "$1" != -- ]; do args+=("$1"); shift; done
  shift
  for h in "$@"; do args+=(--heldout "$h"); done
  "$replay" calibrate --topo "$dir/topo.xml" --start "$from" --column nccl --params "$params" --max-evals "${EVALS:-3000}" \
    --out "$out.stage$stage.json" "${args[@]}" > "$out.stage$stage.txt"
  echo "stage $stage:"; grep -E '^# .*(fitted|heldout)' "$out.stage$stage.txt" | awk '{printf "  %-36s %-8s %3s %8s %8s\n", $2, $3, $4, $5, $6}'
}
cal 7 "$start" '^ll\.(host_round_us|host_load_us|host_load_cost|host_start_us)$' "$dir"/proto/shm-*-ll.json -- "$dir"/heldout/shm-*-ll.json
x4rows=()
if [ -n "$x4" ]; then for f in "$x4"/*.json; do x4rows+=("$f,topo=$x4topo,minbytes=2M"); done; fi
cal 8 "$out.stage7.json" '^simple\.(direct_us|thread_op_us|first_op_us|rate_threads|start_us|op_overhead_us|slice_overhead_us)$' \
  "$dir"/proto/p2p-*-simple.json "$dir"/threads/p2p-*-nt{64,128,256,default}.json "${x4rows[@]}" -- \
  "$dir"/heldout/p2p-*-simple.json "$dir"/threads/p2p-*-large.json
large=()
for f in "$dir"/shm-*.json; do large+=("$f,minbytes=2M"); done
cal 9 "$out.stage8.json" '^simple\.(host_load_us|host_load_cost|host_store_cost|host_fence_us|host_turn_us|host_start_us)$|^host_mem_GBps$' \
  "$dir"/proto/shm-*-simple.json "$dir"/threads/shm-*-nt{64,128,256,default}.json "${large[@]}" -- \
  "$dir"/heldout/shm-*-simple.json "$dir"/threads/shm-*-large.json
cal 10 "$out.stage9.json" '^ll128\.(first_op_us|thread_op_us|start_us|op_overhead_us|slice_overhead_us)$' \
  "$dir"/proto/p2p-*-ll128.json -- "$dir"/heldout/p2p-*-ll128.json
cal 11 "$out.stage10.json" '^ll128\.(first_op_us|thread_op_us|start_us|op_overhead_us|slice_overhead_us|coll_us\..*)$' \
  "$dir"/proto/p2p-*-ll128.json -- "$dir"/heldout/p2p-*-ll128.json
h100="harness=pytorch@h100,topo=testdata/hw/h100x2/topo.xml"
EVALS=4000 cal 12 "$out.stage11.json" '^ll128\.(copy_GBps|remote_store_cost|gpu_copy_GBps)$' \
  "$dir"/proto/p2p-*-ll128.json "$dir"/rerun3/ll128-large/p2p-*-ll128.json \
  "testdata/nccl-timings/h100x2/p2p-ll128.tsv,$h100,minbytes=16M" \
  "testdata/nccl-timings/h100x2/ll128-nch-1.tsv,$h100" "testdata/nccl-timings/h100x2/ll128-nch-4.tsv,$h100" -- \
  "$dir"/heldout/p2p-*-ll128.json
cp "$out.stage12.json" "$out"
