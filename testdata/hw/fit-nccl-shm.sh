#!/bin/bash
# Refits the SHM constants of NCCL's calibration of the H100 pair
# (exec/sim/calib/h100.json) with the PyTorch tables of one channel, in
# which one thread block moves host memory about three times as fast as
# the 4-channel rows let the constants say (SHM Simple Broadcast of 8 MiB
# on one channel: 34 GB/s measured, 12 GB/s simulated before). Run from
# the repo root after `make build`:
#
#   bash testdata/hw/fit-nccl-shm.sh START.json OUT.json
#
# The start gets the SHM read leg (Calib.SHMReadLeg: a slice's loads cross
# host memory and the receiver's PCIe link while the receiver receives),
# then two stages on the same tables (testdata/hw/h100x2/proto/shm-*.json;
# testdata/nccl-timings/h100x2 shm-simple.tsv and shm.tsv from 16 MiB,
# shm-simple-nch-1.tsv and shm-ll-nch-1.tsv, all with PyTorch's cost on
# the H100 pair):
#   A  Simple's host-memory constants and the shared ones (shm_*,
#      host_mem_GBps, the PCI links)
#   B  LL's host-memory constants under them
# Held out (predicted only): every heldout/ of the H100 pair's starts.
# exec/sim/calib/h100.json of 2026-11-27 is this script's output from the
# h100.json before it (git show 61286ba:exec/sim/calib/h100.json), but for
# its source text.
set -eu
start=${1:?START.json} out=${2:?OUT.json}
replay=${REPLAY:-bin/replay}
d=testdata/hw/h100x2 t=testdata/nccl-timings/h100x2
python3 - "$start" "$out.start.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["shm_read_leg"] = True
json.dump(c, open(sys.argv[2], "w"), indent=2)
PY
tables=("$d"/proto/shm-*.json "$t/shm-simple.tsv,minbytes=16M,harness=pytorch@h100" "$t/shm.tsv,minbytes=16M,harness=pytorch@h100"
  "$t/shm-simple-nch-1.tsv,harness=pytorch@h100" "$t/shm-ll-nch-1.tsv,harness=pytorch@h100")
held=()
for f in "$d"/heldout/shm-*.json "$d"/*/heldout/shm-*.json; do held+=(--heldout "$f"); done
prev=$out.start.json
for stage in A B; do
  params='(simple\.host_|shm_|host_mem|links\.PCI)'
  [ $stage = A ] || params='^ll\.host_'
  "$replay" calibrate --topo "$d/topo.xml" --start "$prev" --column nccl --env NCCL_P2P_DISABLE=1 --params "$params" \
    --out "$out.stage$stage.json" "${tables[@]}" "${held[@]}" > "$out.stage$stage.txt"
  echo "stage $stage:"; grep -E '^# .*(fitted|heldout|median)' "$out.stage$stage.txt" | head -20
  prev=$out.stage$stage.json
done
cp "$prev" "$out"
