#!/bin/bash
# Refits a calibration's SHM constants (host memory, its cache, the PCI
# links and each protocol's costs of loads from and stores into host
# memory) on SHM recordings of two and of four GPUs at once, for either
# column, and predicts those of other starts. Two GPUs alone leave the
# host memory's share of a call's time unidentified (a two-GPU ring moves
# about 100 GB/s through it, four GPUs' rings 190-260), so a fit on them
# alone put NCCL's four-GPU Simple calls 2.2 times too slow. Run from the
# repo root after `make build`:
#
#   [EVALS=3000] [LARGE="START..."] [SET='KEY=VALUE ...'] [PARAMS=REGEX] [STAGES=...] bash testdata/hw/fit-shm-gpus.sh \
#       START.json OUT.json COL FIT-STARTS -- HELD-STARTS
#
# LARGE names starts of two GPUs whose tuner's-choice recordings
# (shm-<op>.json: 8 and 32 MiB, Simple) join the Simple stages from 8 MiB:
# the forced-protocol ones (proto/) stop at 8 MiB, and a two-GPU ring's
# large calls are what bound the host's costs per byte.
# COL is nccl or ours; a start is a directory under testdata/hw whose
# heldout/shm-*.json count (e.g. h100x2/rerun30, h100x4/shm), or one with
# no heldout/ whose own shm-*.json do (e.g. h100x2/proto), simulated on the
# machine's topo.xml or, where the machine has none, the start's own
# (h100x4/*, h200x4/*). Stages, each from the last:
#   S1  Simple, mean absolute log error (replay calibrate --loss abs), from
#       the start with host_cache_MiB 16, host_cache_GBps 350,
#       host_mem_GBps 200, simple.host_reduce_cost 3 and Simple's host load
#       and store costs 5 where it has none of them (the basin a fit from
#       the two-GPU constants does not leave)
#   S2  Simple again, squares (the mean squared log error plus the worst
#       row's): the abs fit leaves maxima of 20-30% that this trades for
#       about a point of median
#   L   LL's host constants, abs (squares put the held-out two-GPU LL
#       medians a point higher); Broadcast and Reduce LL of four GPUs
#       only up to 1 MiB: from 1.5 MiB NCCL's take 4.4-15 ms for 12 MiB
#       (1.5-2.5 times their best repetition, ours 1.05 ms), which no
#       constant describes
# SET='KEY=VALUE ...' sets constants of the start before the fit (a new
# constant's starting value, e.g. SET='simple.host_post_us=0.9'); PARAMS
# narrows the constants every stage fits to those its regular expression
# matches (replay calibrate --params), e.g. PARAMS='^simple\.host_round_us$'
# (Simple's passes of loads from host memory, which the Simple stages
# leave alone unless PARAMS names them: the calibrations fit it alone).
# STAGES narrows the stages run (default "S1 S2 L"). BASIN=keep leaves
# Simple's host load and store costs of the start as they are (our
# executor's kernel stores into host memory at almost no cost to its
# block: the fit from its own constants holds its two-GPU medians, from
# 5 and 5 it loses a point of them). OUT.json is the last stage's
# calibration; OUT.json.STAGE.txt each stage's rows and table errors.
set -eu
start=${1:?START.json} out=${2:?OUT.json} col=${3:?COL nccl or ours}
shift 3
fit=() held=()
for s in "$@"; do
  [ "$s" = -- ] && { dst=held; continue; }
  [ "${dst:-fit}" = held ] && held+=("$s") || fit+=("$s")
done
[ ${#fit[@]} -gt 0 ] || { echo "fit-shm-gpus.sh: no fitting starts" >&2; exit 2; }
replay=${REPLAY:-bin/replay}
evals=${EVALS:-3000}

# tables PROTO ROLE START...: the --table or --heldout arguments of the
# starts' SHM recordings of a protocol
tables() {
  local proto=$1 role=$2 s f m topo x
  shift 2
  for s in "$@"; do
    d=testdata/hw/$s/heldout m=testdata/hw/${s%%/*} topo=testdata/hw/$s/topo.xml
    [ -d "$d" ] || d=testdata/hw/$s topo=testdata/hw/${s%/*}/topo.xml
    [ -e "$m/topo.xml" ] && topo=$m/topo.xml
    for f in "$d"/shm-*-"$proto".json; do
      [ -e "$f" ] || { echo "fit-shm-gpus.sh: no SHM $proto recordings under testdata/hw/$s" >&2; exit 2; }
      x=
      if [ "$proto" = ll ] && [ "$col" = nccl ] && grep -q '"nranks": *[3-9]' "$f"; then
        case $f in *broadcast-ll.json | *reduce-ll.json) x=,maxbytes=1048576 ;; esac
      fi
      echo "--$role"; echo "$f,topo=$topo$x"
    done
  done
}

python3 - "$start" "$out.start.json" "${BASIN:-}" "${SET:-}" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))  # read once: START may be a pipe, <(git show ...)
for kv in sys.argv[4].split():  # SET: a constant's starting value
    key, _, v = kv.partition("=")
    *path, last = key.split(".")
    d = c
    for k in path:
        d = d.setdefault(k, {})
    d[last] = float(v)
if "host_cache_MiB" not in c:
    c["host_mem_GBps"] = 200
c.setdefault("host_cache_MiB", 16)
c.setdefault("host_cache_GBps", 350)
s = c["simple"]
s.setdefault("host_reduce_cost", 3)
if sys.argv[3] != "keep":
    if s.get("host_store_cost", 0) < 1:
        s["host_store_cost"] = 5
    if s.get("host_load_cost", 0) < 1:
        s["host_load_cost"] = 5
json.dump(c, open(sys.argv[2], "w"), indent=2)
PY

simple='^(simple\.(host_start_us|host_load_us|host_turn_us|host_fence_us|host_post_us|empty_slice_us|host_load_cost|host_store_cost|host_reduce_cost)|host_mem_GBps|host_cache_MiB|host_cache_GBps|shm_copy_GBps|links\.PCI\.eff)$'
ll='^ll\.(host_start_us|host_load_us|host_turn_us|host_round_us|host_load_cost|host_store_cost)$'
prev=$out.start.json
for stage in ${STAGES:-S1 S2 L}; do
  case $stage in
    S1) proto=simple params=$simple loss=abs ;;
    S2) proto=simple params=$simple loss=squares ;;
    L) proto=ll params=$ll loss=abs ;;
  esac
  params=${PARAMS:-$params}
  list=$(tables "$proto" table "${fit[@]}") || exit 2
  if [ "$proto" = simple ]; then
    for s in ${LARGE:-}; do
      for f in testdata/hw/"$s"/shm-{allgather,allreduce,broadcast,reduce,reducescatter}.json; do
        [ -e "$f" ] || { echo "fit-shm-gpus.sh: no $f" >&2; exit 2; }
        list+=$'\n'--table$'\n'$f,topo=testdata/hw/${s%%/*}/topo.xml,minbytes=8388608
      done
    done
  fi
  [ ${#held[@]} -eq 0 ] || list+=$'\n'$(tables "$proto" heldout "${held[@]}") || exit 2
  mapfile -t args <<< "$list"
  "$replay" calibrate --column "$col" --env NCCL_P2P_DISABLE=1 --env NCCL_NVLS_ENABLE=0 --env NCCL_PROTO="${proto^^}" \
    --start "$prev" --params "$params" --loss "$loss" --max-evals "$evals" --out "$out.$stage.json" "${args[@]}" > "$out.$stage.txt"
  echo "stage $stage ($proto, $loss):"
  grep -E '^# .*(fitted|heldout) |loss' "$out.$stage.txt" | sed 's/^#/ /'
  prev=$out.$stage.json
done
cp "$prev" "$out"
