#!/bin/bash
# Records testdata/hw/h100x2/heldout on a 2-GPU machine: run gpu with
# --baseline nccl at sizes no other recording has (48 B x 8 up to 96 MiB),
# every protocol forced, over P2P, SHM (NCCL_P2P_DISABLE=1) and split-host
# sockets. Usage (repo root, after make build): DIR=DIR record.sh [p2p|shm|net]...
set -u
DIR=${DIR:?set DIR to the output directory}
mkdir -p "$DIR"
export NCCL_NVLS_ENABLE=0
OPS="allreduce allgather reducescatter broadcast reduce"
max() { [ "$1" = ll ] && echo 12M || echo 96M; }
for what in ${@:-p2p shm net}; do
  case $what in
  p2p|shm)
    env=""; [ "$what" = shm ] && env="NCCL_P2P_DISABLE=1"
    protos="ll ll128 simple"; [ "$what" = shm ] && protos="ll simple"
    for p in $protos; do for op in $OPS; do
      env $env timeout 120 bin/run gpu -np 2 --op $op --proto $p -b 48 -e $(max $p) -f 8 -c 1 --baseline nccl \
        --json "$DIR/$what-$op-$p.json" > "$DIR/$what-$op-$p.txt" 2>&1 || echo "FAILED $what $op $p"
    done; done ;;
  net)
    port=29700
    for p in ll simple; do for op in allreduce allgather broadcast; do
      e=$(max $p); [ $p = simple ] && e=12M
      port=$((port + 1))
      for r in 0 1; do
        RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
          TWINCCL_HOSTID=split:1 NCCL_HOSTID=host$r NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 \
          timeout 180 bin/run gpu --op $op --proto $p -b 48 -e $e -f 8 -c 1 --baseline nccl \
          --json "$DIR/net-$op-$p.json" > "$DIR/net-$op-$p.rank$r.txt" 2>&1 &
      done
      wait
    done; done ;;
  esac
done
