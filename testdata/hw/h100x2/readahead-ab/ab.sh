#!/bin/bash
# A/B of TWINCCL_SOCKET_READAHEAD (AHEAD bytes, default 4096, against none) on split-host
# sockets of two GPUs, our executor alone: AllReduce, Broadcast and AllGather LL of 8 B-32 KiB,
# ABBA three times, one pass a run; prints the median time per row of either side and their
# ratio, and packs the files into $OUT/ab.tgz. From the repo root after `make build`, with
# `go test -c -o bin/transport.test ./exec/hw/transport` for BENCH=1 (the plugin's round-trip
# benchmark): AHEAD=256 bash testdata/hw/h100x2/readahead-ab/ab.sh
export NCCL_NVLS_ENABLE=0; mkdir -p /tmp/ab
p=29980
one() { # tag ahead op proto
  p=$((p+1))
  for r in 0 1; do
    env TWINCCL_SOCKET_READAHEAD=$2 RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$p TWINCCL_HOSTID=split:1 NCCL_HOSTID=host$r NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 \
      timeout 120 bin/run gpu --op $3 -b 8 -e 32K -f 8 --proto $4 --passes 1 --json /tmp/ab/$1-$3-$4.json > /tmp/ab/$1-$3-$4.rank$r.txt 2>&1 &
  done
  wait
}
for round in 1 2 3; do
  for op in allreduce broadcast allgather; do
    one a$round-1 0 $op ll; one b$round-1 ${AHEAD:-4096} $op ll; one b$round-2 ${AHEAD:-4096} $op ll; one a$round-2 0 $op ll
  done
done
[ -n "${BENCH:-}" ] && bin/transport.test -test.run XXX -test.bench InlineCommRoundTrip -test.benchtime 50000x -test.count 3 2>&1 | grep Benchmark
tar czf $OUT/ab.tgz -C /tmp/ab .
python3 - <<'PY'
import json,glob,statistics,collections
t=collections.defaultdict(list)
for f in glob.glob('/tmp/ab/*.json'):
  tag=f.split('/')[-1].split('-')[0][0]; op=f.split('-',2)[2]
  for r in json.load(open(f))['rows']:
    t[(op,r['bytes'],tag)].append(statistics.median(r['reps_us']))
for k in sorted(set((a,b) for a,b,_ in t)):
  a=statistics.median(t[k+('a',)]); b=statistics.median(t[k+('b',)])
  print("%-22s %8d  off %8.2f  readahead %8.2f  ratio %.3f"%(k[0],k[1],a,b,b/a))
PY
