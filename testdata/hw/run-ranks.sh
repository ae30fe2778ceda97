# Sourced by record.sh and nccl-log.sh (from the repo root): run, which
# runs bin/run gpu once on this host (-np ${NP:-2}), or, for LINK net, both
# ranks of a split-host run, one process per rank, each a "host" of its own
# over loopback sockets (TWINCCL_HOSTID=split:1 for ours, a NCCL_HOSTID per
# rank for NCCL), on a fresh MASTER_PORT from $port each time. Each run has
# 240 s; one that fails (or, over sockets, whose rank 0 printed no row) is
# reported and sets failed=1. DRY=1 prints the commands instead.
#
#   run LINK OUT ENV... -- ARGS...   (OUT.txt, or OUT.rank0.txt and OUT.rank1.txt)
run() { # ENV... -- ARGS...: one run gpu, or both ranks of a split-host run
  local env=() link=$1 out=$2; shift 2
  while [ "$1" != -- ]; do env+=("$1"); shift; done
  shift
  if [ "$link" = net ]; then
    port=$((port + 1))
    for r in 0 1; do
      local e=("${env[@]}" RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port
        TWINCCL_HOSTID=split:1 NCCL_HOSTID=host$r NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1)
      if [ -n "${DRY:-}" ]; then
        echo "env ${e[*]} bin/run gpu $* > $out.rank$r.txt"
      else
        env "${e[@]}" timeout 240 bin/run gpu "$@" > "$out.rank$r.txt" 2>&1 &
      fi
    done
    [ -n "${DRY:-}" ] || wait || true
    [ -n "${DRY:-}" ] || grep -q "^ *[0-9]" "$out.rank0.txt" || { echo "FAILED $out"; failed=1; }
  else
    if [ -n "${DRY:-}" ]; then
      echo "env ${env[*]} bin/run gpu -np ${NP:-2} $* > $out.txt"
    else
      env "${env[@]}" timeout 240 bin/run gpu -np "${NP:-2}" "$@" > "$out.txt" 2>&1 || { echo "FAILED $out"; failed=1; }
    fi
  fi
}
