#!/bin/bash
# Records the hardware files of testdata/hw/<machine>/ on a device machine
# with two GPUs: run gpu sweeps with --baseline nccl (our executor and
# NCCL side by side, NCCL forced to the same protocol through NCCL_PROTO),
# group by group, then packs them into one tarball, since a device call
# returns few files. Run from the repo root after `make build`.
#
#   DIR=OUT [TAR=FILE.tgz] [PROTOS="ll simple"] [PASSES=N] [FLAT=1] [DRY=1] [NP=4] bash testdata/hw/record.sh GROUP...
#
# GROUP is KIND:LINK. LINK: p2p (NVLink), shm (NCCL_P2P_DISABLE=1), net
# (split hosts over loopback sockets: one process per rank; always two
# ranks). NP is the number of GPUs of p2p and shm groups (2). KIND:
#   tuner    the tuner's choice, every op, with call and event traces
#            (net: each rank's parts, merged when bin/replay is here);
#            8 B x 4 up to 256 MiB (shm 64, net 32)
#   proto    every protocol forced, 8 B x 16 up to 64 MiB (LL 8 MiB;
#            net: 16 MiB, LL 4 MiB); p2p traced
#   heldout  every protocol forced at sizes no other group has: 48 B x 8
#            up to 96 MiB (LL and net 12 MiB)
# net runs AllReduce, AllGather and Broadcast when a protocol is forced
# (our net proxy carries no LL128), the five ops otherwise; shm and net
# carry no LL128. PROTOS narrows the protocols of proto and heldout
# groups. PASSES is run gpu's --passes (default 3: a busy spell of the
# shared host held whole socket rows 1.5-2.5x slow, and one P2P row of
# 2026-11-27 repeated at 8.5-15.2 us; the net groups take 2-2.5x as long,
# 2026-11-27: heldout:net 118-125 s, proto:net 34-38 s, tuner:net
# 116-137 s on the H100 pair; over sockets run gpu then times the sizes
# whose repetitions still disagree again, --retries, twice by default).
# proto and heldout files go to OUT/proto and OUT/heldout (FLAT=1:
# OUT itself), the others to OUT. DRY=1 prints the commands instead of
# running them.
#
# Each group prints its device time; the machine's nvidia-smi goes to
# OUT/nvidia-smi.txt, its lscpu to OUT/lscpu.txt, and NCCL's topology dump, written during the first
# group unless it is a net one, to OUT/topo.xml (unless one is there). Device time on the H200 pair (2026-11-26): proto:p2p 37 s, heldout:p2p
# 49 s, proto:shm 25 s, heldout:shm 36 s, tuner:p2p 23 s, tuner:shm 16 s,
# proto:net 19 s, heldout:net 46 s, tuner:net 45 s (H100 pair, 2026-11-25:
# the net groups 60-70 s each); keep a call under its 600 s limit.
set -u
DIR=${DIR:?set DIR to the output directory}
export NCCL_NVLS_ENABLE=0
OPS5="allreduce allgather reducescatter broadcast reduce"
OPS3="allreduce allgather broadcast"
port=${PORT:-29900}
failed=0

. testdata/hw/run-ranks.sh

mkdir -p "$DIR"
if [ -z "${DRY:-}" ]; then
  # The machine, and NCCL's dump of its topology (written during the first
  # group, unless there is one already; a split-host group's would hold
  # one GPU).
  { nvidia-smi; nvidia-smi topo -m; } 2>&1 | sed 's/\x1b\[[0-9;]*m//g' > "$DIR/nvidia-smi.txt"
  lscpu > "$DIR/lscpu.txt" 2>&1 || true
  [ -e "$DIR/topo.xml" ] || [ "${1#*:}" = net ] || export NCCL_TOPO_DUMP_FILE=$DIR/topo.xml
fi
for group in "$@"; do
  started=$(date +%s)
  kind=${group%%:*} link=${group#*:}
  env=(); [ "$link" = shm ] && env=(NCCL_P2P_DISABLE=1)
  passes=${PASSES:-3}
  case $link in p2p | shm | net) ;; *) echo "unknown link in $group (p2p, shm, net)" >&2; exit 2 ;; esac
  protos=${PROTOS:-ll ll128 simple}
  [ "$link" = p2p ] || protos=${protos//ll128/}
  case $kind in
  tuner)
    max=256M; [ "$link" = shm ] && max=64M; [ "$link" = net ] && max=32M
    mkdir -p "$DIR"
    for op in $OPS5; do
      run "$link" "$DIR/$link-$op" "${env[@]}" -- --op "$op" -b 8 -e $max -f 4 -c 1 --passes "$passes" --baseline nccl \
        --json "$DIR/$link-$op.json" --trace "$DIR/$link-$op.parquet"
      if [ "$link" = net ] && [ -x bin/replay ] && [ -z "${DRY:-}" ]; then
        bin/replay trace merge -o "$DIR/$link-$op.parquet" "$DIR/$link-$op.rank0.parquet" "$DIR/$link-$op.rank1.parquet" &&
          rm -f "$DIR/$link-$op".rank[01].parquet "$DIR/$link-$op".rank[01].events.parquet
      fi
    done ;;
  proto | heldout)
    out=$DIR/$kind; [ -n "${FLAT:-}" ] && out=$DIR
    mkdir -p "$out"
    ops=$OPS5; [ "$link" = net ] && ops=$OPS3
    for p in $protos; do for op in $ops; do
      if [ "$kind" = proto ]; then
        e=64M; [ "$p" = ll ] && e=8M; [ "$link" = net ] && { e=16M; [ "$p" = ll ] && e=4M; }
        sizes=(-b 8 -e $e -f 16)
      else
        e=96M; { [ "$p" = ll ] || [ "$link" = net ]; } && e=12M
        sizes=(-b 48 -e $e -f 8)
      fi
      trace=(); [ "$kind$link" = protop2p ] && trace=(--trace "$out/$link-$op-$p.parquet")
      run "$link" "$out/$link-$op-$p" "${env[@]}" -- --op "$op" --proto "$p" "${sizes[@]}" -c 1 --passes "$passes" --baseline nccl \
        --json "$out/$link-$op-$p.json" "${trace[@]}"
    done; done ;;
  *) echo "unknown kind in $group (tuner, proto, heldout)" >&2; exit 2 ;;
  esac
  [ -n "${DRY:-}" ] || echo "group $group: $(($(date +%s) - started)) s"
  unset NCCL_TOPO_DUMP_FILE
done
if [ -n "${TAR:-}" ] && [ -z "${DRY:-}" ]; then
  tar czf "$TAR" -C "$DIR" .
fi
exit $failed
