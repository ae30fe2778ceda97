#!/bin/bash
# A/B of two run builds over split-host sockets, ours only: bin/ab/run.old, bin/ab/run.new (ABBA x3)
set -u
cd bin/ab && tar xJf ab.tar.xz && cd ../..
export NCCL_NVLS_ENABLE=0
OUTD=/tmp/ab; rm -rf $OUTD; mkdir -p $OUTD
port=29500
for round in 1 2 3; do
for b in old new new old; do
  for op in allreduce allgather broadcast reduce reducescatter; do
    port=$((port+1))
    for r in 0 1; do
      env RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        TWINCCL_HOSTID=split:1 NCCL_HOSTID=host$r NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 \
        timeout 120 bin/ab/run.$b gpu --op $op -b 8 -e 32K -f 4 -c 0 --json $OUTD/$b-$op-$round-$port.r0.json > $OUTD/$b-$op-$round-$port.rank$r.txt 2>&1 &
    done
    wait
  done
  echo "round $round $b done"
done
done
ls $OUTD | wc -l; tar czf ${OUT:-/tmp}/ab.tgz -C $OUTD .
