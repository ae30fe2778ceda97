#!/bin/bash
# Takes NCCL's own account of its decisions on a device machine, for the
# ground-truth tests of testdata/hw/*/nccl-log (search's
# TestH100MatchesNCCLLogs, exec/sim's TestTunerMatchesMachineLogs): per
# LINK, the topology NCCL dumps (NCCL_TOPO_DUMP_FILE), its graphs
# (NCCL_GRAPH_DUMP_FILE), rank 0's NCCL_DEBUG=INFO log of an AllReduce sweep
# (INIT, GRAPH, TUNING and ENV: the tuning table, channels, rings and trees)
# and the distinct per-call choices NCCL logged over a sweep of the five
# collectives (choices.log: "AllGather: 8 Bytes -> Algo RING proto LL
# channel{Lo..Hi}={0..0}" lines). Run from the repo root after `make build`
# (bin/run; no Go on the device: carry it):
#
#   DIR=OUT [NP=2] [TAR=FILE.tgz] [DRY=1] bash testdata/hw/nccl-log.sh LINK...
#
# LINK: p2p (NVLink), shm (NCCL_P2P_DISABLE=1), net (two ranks, each a host
# of its own over loopback sockets, started as record.sh starts them; NP
# does not apply). NP is the number of GPUs of p2p and shm (2). Sizes 8 B
# x 4 up to 256 MiB (net: 32 MiB), one call per loop (-n 1 -w 1): each
# call is logged at its enqueue. NCCL_NVLS_ENABLE=0 throughout. On the H100
# pair each LINK takes about 20 s, on four H100 40 s. DRY=1 prints the
# commands instead of running them.
set -u
DIR=${DIR:?set DIR to the output directory}
export NCCL_NVLS_ENABLE=0
OPS="allreduce allgather reducescatter broadcast reduce"
port=${PORT:-29960}
failed=0
. testdata/hw/run-ranks.sh
for link in "$@"; do
  case $link in p2p | shm | net) ;; *) echo "unknown link $link (p2p, shm, net)" >&2; exit 2 ;; esac
  out=$DIR/$link tmp=$(mktemp -d)
  mkdir -p "$out"
  env=(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING,ENV NCCL_TOPO_DUMP_FILE=$out/topo.xml NCCL_GRAPH_DUMP_FILE=$out/graph.xml)
  [ "$link" = shm ] && env+=(NCCL_P2P_DISABLE=1)
  max=256M; [ "$link" = net ] && max=32M
  for op in $OPS; do
    run "$link" "$tmp/run-$op" "${env[@]}" NCCL_DEBUG_FILE="$tmp/$op.%p.log" -- --op "$op" -b 8 -e $max -f 4 -c 1 -n 1 -w 1 --passes 1 --retries 0 --baseline nccl
  done
  if [ -n "${DRY:-}" ]; then rm -rf "$tmp"; continue; fi
  # rank 0's log of the AllReduce sweep, its table, and every distinct call
  # that rank 0 logged
  first=$(grep -l "rank 0 nRanks" "$tmp"/allreduce.*.log 2>/dev/null | head -1)
  [ -n "$first" ] && cp "$first" "$out/nccl-rank0.log" || echo "no rank 0 log for $link" >&2
  for f in "$tmp/run-allreduce.txt" "$tmp/run-allreduce.rank0.txt"; do [ -e "$f" ] && cp "$f" "$out/run.txt"; done
  logs=$(grep -l "rank 0 nRanks" "$tmp"/*.log)
  cat $logs | grep "Bytes -> Algo" | sed 's/^[^[]*//' | awk '!s[$0]++' > "$out/choices.log"
  echo "$link: $(wc -l < "$out/choices.log") distinct calls"
  rm -rf "$tmp"
done
if [ -n "${TAR:-}" ] && [ -z "${DRY:-}" ]; then
  tar czf "$TAR" -C "$DIR" .
fi
exit $failed
