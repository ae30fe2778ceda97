#!/bin/bash
# Refits a calibration's socket constants (net_socket.*: NCCL's socket
# plugin over the host's loopback, ranks split into hosts of their own) on
# every recording of some starts of a machine, and predicts the recordings
# of other starts, which it never sees (cross-validation across starts:
# the host's sockets move from one start to the next more than within one).
# Run from the repo root after `make build` (needs python3 for the start):
#
#   [EVALS=2500] [STARTS=0] [LOSS=squares|abs] [SET='KEY=VALUE ...'] bash testdata/hw/fit-sockets.sh START.json OUT.json COL FIT-STARTS -- HELD-STARTS
#
# SET overrides constants of the start's net_socket block before the fit
# (a new constant's starting value, e.g. SET='payload_send_op_us=4'; a
# switch takes true or false, e.g. SET='host_fixed_recv=true').
# PARAMS narrows the constants fitted to those its regular expression
# matches (replay calibrate --params; default: every net_socket constant
# below), keeping the start's host_exp: e.g. PARAMS='^net_socket\.
# (duplex_cost|flag_check_GBps|post_fence_us)$' refits the constants of
# LL slices alone and leaves every Simple row's prediction as it was.
# STARTS=N searches N further starting points as well (replay calibrate
# --starts) and keeps the lowest loss.
# LOSS=abs fits the mean absolute log error instead of squares with the
# worst row (replay calibrate --loss): on NCCL's three fitting starts it
# moved the held-out medians by -1.3 to +0.3 points; the embedded files
# use squares. COL is nccl (NCCL's column) or ours (our executor's); a start is a
# directory under testdata/hw (e.g. h200x2/rerun4), whose net-*.json,
# proto/net-*.json and heldout/net-*.json all count, on that machine's
# topo-1gpu.xml. Every start named must carry loopback probes (net_probe,
# "run gpu" records them since 2026-11-26): each recording is simulated
# with the proxies' costs scaled by its probe's latency over
# net_socket.host_latency_us (4.6 us, the median probe of the five probed
# starts) to the power net_socket.host_exp (fitted).
#
# The start gets, before the fit: inline_bytes 128 for NCCL (its plugin
# sends a payload of up to NCCL_SOCKET_INLINE bytes in the header's system
# call; payload_op_us is what a larger one costs each proxy) and 0 for
# ours (our executor always sends the payload apart); serial_calls for
# NCCL (its proxy runs one connection's operations one call after the
# other, and a receive ends when the GPU released its last slice; our
# proxy moves steps across calls as credits allow); host_latency_us 4.6
# and host_exp 1. NCCL's net_proxy_us and nogdr_penalty_us stay: they are
# InfiniBand's too.
#
# The calibrations, 2026-11-26 (seventh session):
#   h200.json:         bash testdata/hw/fit-sockets.sh <(git show 0ed1fa4:exec/sim/calib/h200.json) OUT.json nccl \
#                        h200x2/rerun4 h200x2/rerun3 h100x2/leader -- h200x2/rerun5 h100x2/rerun h100x2/rerun2
#   h100.json:         bash testdata/hw/fit-sockets.sh <(git show 57e05af:exec/sim/calib/h100.json) OUT.json nccl \
#                        h100x2/leader h200x2/rerun4 h200x2/rerun3 -- h100x2/rerun h100x2/rerun2 h200x2/rerun5
#   ../h200-twinccl-no-gather.json (sixth session):
#                      bash testdata/hw/fit-sockets.sh <(git show 0ed1fa4:exec/sim/calib/h200-twinccl.json) OUT.json ours \
#                        h200x2/rerun4 h200x2/rerun3 -- h200x2/rerun5
#   ../h100-twinccl-no-gather.json:
#                      bash testdata/hw/fit-sockets.sh <(git show 57e05af:exec/sim/calib/h100-twinccl.json) OUT.json ours \
#                        h100x2/leader h200x2/rerun4 h200x2/rerun3 -- h100x2/rerun2 h100x2/rerun3 h200x2/rerun5
#   h200.json, h100.json (eighth session, with payload_send_op_us):
#                      SET='payload_op_us=0 payload_send_op_us=4' bash testdata/hw/fit-sockets.sh \
#                        <(git show a0dfb41:exec/sim/calib/h200.json) OUT.json nccl \
#                        h200x2/rerun4 h200x2/rerun3 h100x2/leader -- h200x2/rerun5 h100x2/rerun h100x2/rerun2
#                      (h100.json: its own a0dfb41 file, h100x2/leader h200x2/rerun4
#                       h200x2/rerun3 -- h100x2/rerun h100x2/rerun2 h200x2/rerun5)
#   h200-twinccl.json, h100-twinccl.json (eighth session, the proxy that
#   allocates nothing per message and naps on its wake-ups):
#                      bash testdata/hw/fit-sockets.sh <(git show a03b9d2:exec/sim/calib/h200-twinccl.json) OUT.json ours \
#                        h100x2/rerun5 -- h100x2/rerun6
#                      (h100-twinccl.json the same from its own a03b9d2 file)
#   h200.json, h100.json (ninth session, with recv_post_us and PAT's
#   AllGather and ReduceScatter on two ranks no longer run as a ring):
#                      SET='recv_post_us=1.5' bash testdata/hw/fit-sockets.sh exec/sim/calib/h200.json OUT.json nccl \
#                        h200x2/rerun4 h200x2/rerun3 h100x2/leader -- h200x2/rerun5 h100x2/rerun h100x2/rerun2
#                      (h100.json: from itself, on its own starts as above),
#                      then both from themselves on five starts:
#                      bash testdata/hw/fit-sockets.sh exec/sim/calib/h200.json OUT.json nccl \
#                        h200x2/rerun4 h200x2/rerun3 h100x2/leader h100x2/rerun5 h100x2/rerun7 -- h200x2/rerun5
#                      (h100.json: h100x2/leader h200x2/rerun4 h200x2/rerun3
#                       h100x2/rerun5 h100x2/rerun7 -- h200x2/rerun5)
#                      Our calibrations keep recv_post_us 0: fitted on
#                      h100x2/rerun5 it came out at 1.0 and 1.5 us, and the
#                      held-out LL medians of h100x2/rerun6-9 rose by 1.4-2.3
#                      points under the first, by at most 0.1 under the second.
#   h100-twinccl.json (eleventh session, post_fence_us: our kernel's fence
#   before it publishes an LL step to its proxy; fitted on our LL rows
#   only), on the starts of the current build with three passes a socket
#   row, LOSS=abs:
#                      LOSS=abs SET='post_fence_us=1.5' bash testdata/hw/fit-sockets.sh \
#                        <(git show 9a91d21:exec/sim/calib/h100-twinccl.json) OUT.json ours \
#                        h100x2/rerun18 h100x2/rerun19 -- h100x2/rerun20 h100x2/rerun17
#                      (h200-twinccl.json the same from its own 0d1b464 file)
#                      h100.json the same session, LOSS=abs across eight starts:
#                      LOSS=abs bash testdata/hw/fit-sockets.sh <(git show a7e2acb:exec/sim/calib/h100.json) \
#                        OUT.json nccl h100x2/leader h200x2/rerun4 h200x2/rerun3 h100x2/rerun5 h100x2/rerun7 \
#                        h100x2/rerun9 h100x2/rerun11 h100x2/rerun14 -- h100x2/rerun6 h100x2/rerun8 \
#                        h100x2/rerun10 h100x2/rerun12 h100x2/rerun15 h100x2/rerun17
#   h100-twinccl.json, h200-twinccl.json (twelfth session, with
#   duplex_cost and simple_duplex_cost, a proxy's slower copies while its
#   rank both sends and receives, and recv_conn_us, the end of a receive
#   that holds its connection but not its proxy; simple_duplex_cost starts
#   at 1):
#                      LOSS=abs SET='duplex_cost=1.33 recv_conn_us=3' bash testdata/hw/fit-sockets.sh \
#                        <(git show 5b8683d:exec/sim/calib/h100-twinccl.json) OUT.json ours \
#                        h100x2/rerun18 h100x2/rerun19 -- h100x2/rerun20 h100x2/rerun17
#                      (h200-twinccl.json the same from its own 5b8683d file).
#                      NCCL's column, fitted with them from h100.json on
#                      seven H100 starts (SET='duplex_cost=1.2
#                      simple_duplex_cost=1.2 recv_conn_us=3', h100x2/rerun5
#                      rerun7 rerun9 rerun11 rerun14 rerun18 rerun19 --
#                      rerun20), leaves both factors at 1 and recv_conn_us
#                      at 0, and its held-out medians within 0.7 points of
#                      h100.json's: h100.json stays.
#                      Only the LL constants (PARAMS='^net_socket\.
#                      (duplex_cost|flag_check_GBps|post_fence_us)$'):
#                      rerun20/ LL 6.1 -> 4.6% median, its maximum 25.5%
#                      unchanged (two channels' receives, recv_conn_us).
#   h200-twinccl.json, h100.json (thirteenth session; h100-twinccl.json
#   too at first, then refitted as below; host_GBps: the host's scaling also takes the probe's throughput both
#   ways, its base the geometric mean of latency/host_latency_us and
#   host_GBps/both_ways_GBps), across five starts of different host
#   states, two of them slow (rerun17, rerun24: 6.1 us, 2.3 GB/s):
#                      LOSS=abs SET='host_GBps=2.6' bash testdata/hw/fit-sockets.sh \
#                        <(git show 0c31993:exec/sim/calib/h100-twinccl.json) OUT.json ours \
#                        h100x2/rerun17 h100x2/rerun18 h100x2/rerun19 h100x2/rerun22 h100x2/rerun24 -- h100x2/rerun20
#                      (h200-twinccl.json the same from its own 0c31993
#                      file; h100.json the same with nccl). Held out:
#                      rerun20, rerun23, rerun25, rerun26 (docs/perf.md).
#                      Without SET (latency alone) the same fit left the
#                      slowest held-out start, rerun26 (6.2 us, 2.0 GB/s),
#                      at 10.7% median (ours, Simple); with it, 4.4%.
#                      The search stops at a local minimum; replay calibrate
#                      prints the loss it reached ("loss (abs)"), and fits
#                      of the same starts from other SET values compare by
#                      it. From proxy_GBps, duplex_cost and
#                      simple_duplex_cost all scaled by 0.94, 0.88 and 0.82
#                      (which keeps AllGather's copy time and slows the
#                      one-way Broadcast's): 0.06219, 0.06319, 0.06374
#                      against 0.06176 from the file's own values, which
#                      that fit kept (h200-twinccl.json the
#                      same way: 0.06249, 0.06238, 0.06318 against
#                      0.06216).
#   h100-twinccl.json (thirteenth session, after the fit above): the same, with
#   post_fence_us fixed at the kernel traces' 3.3 us and host_fixed_recv
#   (the receive operation left out of the host scaling), which lowered
#   its loss to 0.06098 (h200-twinccl.json's rose: it keeps the fit above):
#                      PARAMS='^net_socket\.(proxy_GBps|latency_us|send_op_us|recv_op_us|recv_post_us|recv_conn_us|flag_check_GBps|payload_op_us|payload_send_op_us|simple_us|host_exp|duplex_cost|simple_duplex_cost)$' \
#                      LOSS=abs SET='host_GBps=2.6 post_fence_us=3.3 host_fixed_recv=true' bash testdata/hw/fit-sockets.sh \
#                        <(git show 0c31993:exec/sim/calib/h100-twinccl.json) OUT.json ours \
#                        h100x2/rerun17 h100x2/rerun18 h100x2/rerun19 h100x2/rerun22 h100x2/rerun24 -- h100x2/rerun20
#                      With STARTS=2 (two further starting points, 7503
#                      evaluations) the same fit ends at the same loss
#                      and constants: the first start's search wins.
#   h200-twinccl.json (fifteenth session, on the H200 host itself: the
#   first H200 starts of the current build, after its Simple refit), from
#   its own file with h100-twinccl.json's socket block:
#                      the PARAMS and SET above, with START.json = this
#                      file with h100-twinccl.json's net_socket, ours,
#                        h200x2/rerun8 -- h200x2/rerun7
#                      (with the five H100 starts as well, the H200
#                      starts stayed 4-6% slow: the probes do not carry
#                      the H100 host's sockets over to the H200 host's).
#   h200.json (fifteenth session):
#                      LOSS=abs bash testdata/hw/fit-sockets.sh exec/sim/calib/h200.json OUT.json nccl \
#                        h200x2/rerun3 h200x2/rerun4 h200x2/rerun5 h200x2/rerun6 h200x2/rerun7 \
#                        h100x2/leader h100x2/rerun5 h100x2/rerun7 -- h200x2/rerun8
# testdata/hw/start-errors.py gives each start's median and maximum |err|
# per protocol under a calibration, as the closing notes report them.
# (each then merged into the file: its net_socket block, its source text
# extended; the fit reports stay those of the last full fit). The
# calibrations of the gathering plugin before (fitted on h100x2/rerun4)
# were testdata/hw/*-twinccl-gather.json, and those of the sixth session
# ../h*-twinccl-no-gather.json above; all are deleted (git show
# 5af611c:testdata/hw/h100-twinccl-gather.json).
set -eu
shopt -s nullglob
start=${1:?START.json} out=${2:?OUT.json} col=${3:?nccl|ours}
shift 3
fit=() held=() side=fit
for s in "$@"; do
  if [ "$s" = -- ]; then side=held; continue; fi
  [ -d "testdata/hw/$s" ] || { echo "fit-sockets.sh: no start testdata/hw/$s" >&2; exit 2; }
  topo=testdata/hw/${s%%/*}/topo-1gpu.xml
  for f in testdata/hw/$s/net-*.json testdata/hw/$s/proto/net-*.json testdata/hw/$s/heldout/net-*.json; do
    if [ $side = fit ]; then fit+=("$f,topo=$topo"); else held+=(--heldout "$f,topo=$topo"); fi
  done
done
[ ${#fit[@]} -gt 0 ] || { echo "fit-sockets.sh: no recordings to fit" >&2; exit 2; }
inline=0
[ "$col" = nccl ] && inline=128
python3 - "$start" "$out.start.json" "$inline" "${SET:-}" "${PARAMS:-}" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
ns = c.setdefault("net_socket", {})
if not sys.argv[5] or "host_exp" not in ns:
    ns.update(host_latency_us=4.6, host_exp=1)
if int(sys.argv[3]):
    ns["inline_bytes"] = int(sys.argv[3])
    ns["serial_calls"] = True
for kv in sys.argv[4].split():
    k, _, v = kv.partition("=")
    if not v:
        sys.exit("fit-sockets.sh: SET wants KEY=VALUE pairs of net_socket, got %r" % kv)
    ns[k] = {"true": True, "false": False}.get(v) if v in ("true", "false") else float(v)
json.dump(c, open(sys.argv[2], "w"), indent=2)
EOF
${REPLAY:-bin/replay} calibrate --nodes 2 --start "$out.start.json" --column "$col" \
  --params "${PARAMS:-^net_socket\.(proxy_GBps|latency_us|send_op_us|recv_op_us|recv_post_us|recv_conn_us|flag_check_GBps|payload_op_us|payload_send_op_us|simple_us|host_exp|post_fence_us|duplex_cost|simple_duplex_cost)\$}" \
  --max-evals "${EVALS:-2500}" --starts "${STARTS:-0}" --loss "${LOSS:-squares}" --out "$out" "${fit[@]}" "${held[@]}" > "$out.txt"
grep -E '^# median' "$out.txt"
