#!/bin/bash
# Refits the GPU side of NCCL's calibration of the H100 pair
# (exec/sim/calib/h100.json), whose P2P constants had been the H200 pair's
# (h200.json): on every start of the H100 pair the simulation ran 2-5%
# fast for NCCL's P2P LL and 3-5% fast for its P2P Simple, at every size.
# Run from the repo root after `make build`:
#
#   bash testdata/hw/fit-nccl-h100.sh START.json OUT.json
#
# Stages, each from the last, on NCCL's column of two starts of the
# machine (testdata/hw/h100x2/rerun13 and rerun16: proto/p2p-*, every
# protocol forced, 8 B x 16 up to 64 MiB, LL up to 8 MiB):
#   1  LL: per-call, per-slice and copy constants, load, store and
#      reduction costs
#   2  Simple: the same and NCCL's first primitive's and direct
#      primitives' costs, with the tuner's-choice files p2p-*.json of
#      both starts from 16 MiB (proto/ stops at 8 MiB)
#   3  SHM: testdata/hw/fit-nccl-shm.sh from stage 2 (Simple's constants
#      are SHM's too)
# Held out at stages 1 and 2: rerun14/ and rerun17/ heldout/p2p-* of the
# stage's protocol (sizes and starts no fit uses); every other start's
# heldout/ is never seen either. Each stage's table goes to
# OUT.stageN.txt.
set -eu
start=${1:?START.json} out=${2:?OUT.json}
replay=${REPLAY:-bin/replay}
h=testdata/hw/h100x2
cal() { # STAGE FROM PROTO PARAMS
  local stage=$1 from=$2 p=$3 params=$4
  local args=()
  for s in rerun13 rerun16; do
    for f in "$h/$s"/proto/p2p-*-"$p".json; do args+=("$f,col=nccl"); done
    if [ "$p" = simple ]; then
      for f in "$h/$s"/p2p-*.json; do args+=("$f,col=nccl,minbytes=16M"); done
    fi
  done
  for s in rerun14 rerun17; do
    for f in "$h/$s"/heldout/p2p-*-"$p".json; do args+=(--heldout "$f,col=nccl"); done
  done
  "$replay" calibrate --topo "$h/topo.xml" --start "$from" --column nccl --params "$params" --max-evals "${EVALS:-3000}" \
    --out "$out.stage$stage.json" "${args[@]}" > "$out.stage$stage.txt"
  echo "stage $stage:"; grep -E '^# .*(fitted|heldout)' "$out.stage$stage.txt" | awk '{printf "  %-36s %-8s %3s %8s %8s\n", $2, $3, $4, $5, $6}'
}
cal 1 "$start" ll '^ll\.(start_us|op_overhead_us|slice_overhead_us|copy_GBps|remote_store_cost|load_cost|reduce_cost)$'
cal 2 "$out.stage1.json" simple '^simple\.(start_us|op_overhead_us|slice_overhead_us|copy_GBps|remote_store_cost|load_cost|first_op_us|direct_us)$'
bash testdata/hw/fit-nccl-shm.sh "$out.stage2.json" "$out"
