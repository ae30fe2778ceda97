#!/bin/bash
# Fits NCCL's calibration of another machine with the H200 pair's GPUs and
# NVLink (exec/sim/calib/h100.json for testdata/hw/h100x2): the embedded
# h200.json with the host's own constants refitted on NCCL's column of the
# machine's forced-protocol recordings, in two stages, each reporting the
# held-out files' errors. Run from the repo root after `make build`:
#
#   bash testdata/hw/fit-nccl-host.sh DIR OUT.json NAME [TABLES]
#
#   1  SHM: host memory, SHM and PCI constants on DIR/proto/shm-*.json
#      (with TABLES/shm-simple.tsv and shm.tsv from 16 MiB, PyTorch on the
#      same machine, for the bandwidth of large calls, when TABLES is given)
#   2  sockets between split hosts on DIR/topo-1gpu.xml: NCCL's socket
#      proxy constants and its reading of LL lines (net_, nogdr), on
#      NETDIR/proto/net-*.json (NETDIR: DIR unless set; the H100 pair's
#      were fitted on its sockets-helpers/ recordings)
# Held out: DIR/heldout, NETDIR/heldout and the tuner's-choice
# DIR/shm-*.json and NETDIR/net-*.json.
# The embedded h100.json's SHM constants were refitted after these stages
# by testdata/hw/fit-nccl-shm.sh (the PyTorch tables of one channel, and
# the SHM read leg; 2026-11-27).
set -eu
dir=${1:?DIR} out=${2:?OUT.json} name=${3:?NAME} tables=${4:-}
replay=${REPLAY:-bin/replay}
start=${START:-exec/sim/calib/h200.json}
harness=${HARNESS:-pytorch@h100}
large=()
if [ -n "$tables" ]; then
  for t in shm-simple shm; do large+=("$tables/$t.tsv,minbytes=16M,harness=$harness"); done
fi
held=()
for f in "$dir"/heldout/shm-*.json "$dir"/shm-*.json; do held+=(--heldout "$f"); done
"$replay" calibrate --topo "$dir/topo.xml" --start "$start" --column nccl --params '(host_|shm_|links\.PCI)' \
  --name "$name" --out "$out.stage1.json" "$dir"/proto/shm-*.json "${large[@]}" "${held[@]}" > "$out.stage1.txt"
netdir=${NETDIR:-$dir}
held=()
for f in "$netdir"/heldout/net-*.json "$netdir"/net-*.json; do held+=(--heldout "$f"); done
"$replay" calibrate --topo "$dir/topo-1gpu.xml" --nodes 2 --start "$out.stage1.json" --column nccl --params '(net_|nogdr)' \
  --name "$name" --out "$out.stage2.json" "$netdir"/proto/net-*.json "${held[@]}" > "$out.stage2.txt"
for s in 1 2; do
  echo "stage $s:"; grep -E '^# .*(fitted|heldout)' "$out.stage$s.txt" | awk '{printf "  %-36s %-8s %3s %8s %8s\n", $2, $3, $4, $5, $6}'
done
cp "$out.stage2.json" "$out"
