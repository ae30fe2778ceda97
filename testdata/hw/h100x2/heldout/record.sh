#!/bin/bash
# Records testdata/hw/h100x2/heldout on a 2-GPU machine: run gpu with
# --baseline nccl at sizes no other recording has (48 B x 8 up to 96 MiB),
# every protocol forced, over P2P, SHM (NCCL_P2P_DISABLE=1) and split-host
# sockets: the heldout groups of testdata/hw/record.sh, written into DIR
# itself. Usage (repo root, after make build): DIR=DIR record.sh [p2p|shm|net]...
set -u
: "${DIR:?set DIR to the output directory}"
groups=()
for link in ${@:-p2p shm net}; do groups+=("heldout:$link"); done
FLAT=1 exec bash "$(dirname "$0")/../../record.sh" "${groups[@]}"
