#!/usr/bin/env bash
# GPU acceptance of twinccl's drop-in NCCL library (docs/guide/library.md),
# on one machine with N >= 1 GPUs:
#   1. nccl-tests, built here against include/nccl.h and bin/libnccl.so.2,
#      run every collective with -c 1 on -g 1 (one-rank communicators) and
#      on -g N (all GPUs of the process, ncclCommInitAll) when N > 1; each
#      must report "Out of bounds values : 0 OK";
#   2. the same binaries on the system's NCCL (NCCL_LIB_DIR, else found
#      through ldconfig or PyTorch's nvidia-nccl package), busbw side by side
#      (summary.txt);
#   3. testdata/lib/torch_check.py on twinccl (LD_PRELOAD), when PyTorch is
#      installed;
#   4. the tuner plugin: NCCL's busbw with and without
#      NCCL_TUNER_PLUGIN=bin/libnccl-tuner-twinccl.so on -g N (tuner.txt);
#      NCCL does not consult a tuner for a one-rank communicator, so this
#      needs N > 1.
# Usage: testdata/lib/run-gpu.sh [OUTDIR]   (default $OUT, else /tmp/twinccl-lib)
# Sources of nccl-tests: $NCCL_TESTS_SRC, else bin/nccl-tests: NVIDIA/nccl-tests
# at c2cb96f, the last commit before its NCCL 2.28 update, whose tests need
# NCCL's device API (nccl_device.h), which twinccl does not provide.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-${OUT:-/tmp/twinccl-lib}}
mkdir -p "$out"
src=${NCCL_TESTS_SRC:-$repo/bin/nccl-tests}
[ -f "$src/src/Makefile" ] || { echo "run-gpu.sh: no nccl-tests sources in $src (put NVIDIA/nccl-tests c2cb96f there, or set NCCL_TESTS_SRC)" >&2; exit 2; }

if [ ! -f "$repo/bin/libnccl.so.2" ]; then
	make -C "$repo" lib
fi
if [ ! -f "$repo/bin/libnccl-tuner-twinccl.so" ]; then
	make -C "$repo" tuner
fi
ngpu=$(nvidia-smi -L | wc -l)
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
echo "run-gpu.sh: $ngpu GPU(s), sm_$cap; results in $out"

# nccl-tests against our header and library. The library resolves NVML
# lazily, so the link allows undefined symbols in it.
home=$out/ncclhome
mkdir -p "$home"
ln -sfn "$repo/include" "$home/include"
ln -sfn "$repo/bin" "$home/lib"
make -C "$src/src" -j"$(nproc)" BUILDDIR="$out/nccl-tests" NCCL_HOME="$home" \
	NVCC_GENCODE="-gencode=arch=compute_$cap,code=sm_$cap -Xlinker --allow-shlib-undefined" >"$out/nccl-tests-build.log" 2>&1 ||
	{ tail -30 "$out/nccl-tests-build.log"; exit 1; }

# The system's NCCL, for the baseline.
nccl_dir=${NCCL_LIB_DIR:-}
if [ -z "$nccl_dir" ]; then
	nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null ||
		ldconfig -p | awk '/libnccl.so.2 /{print $NF; exit}' | xargs -r dirname || true)
fi
[ -n "$nccl_dir" ] && [ -f "$nccl_dir/libnccl.so.2" ] || { echo "run-gpu.sh: no system NCCL found (set NCCL_LIB_DIR): baseline skipped"; nccl_dir=; }

tests="all_reduce all_gather broadcast reduce_scatter reduce alltoall sendrecv"
gs=1
[ "$ngpu" -gt 1 ] && gs="1 $ngpu"
fail=0
for g in $gs; do
	for t in $tests; do
		bin=$out/nccl-tests/${t}_perf
		log=$out/twinccl-$t-g$g.txt
		if ! LD_LIBRARY_PATH="$repo/bin" timeout 600 "$bin" -b 8 -e 256M -f 4 -g "$g" -c 1 -n 20 -w 5 >"$log" 2>&1 ||
			! grep -q "Out of bounds values : 0 OK" "$log"; then
			echo "FAIL twinccl $t -g $g (see $log)"; tail -5 "$log"; fail=1
		else
			echo "ok   twinccl $t -g $g: $(grep 'Avg bus bandwidth' "$log")"
		fi
		if [ -n "$nccl_dir" ]; then
			LD_LIBRARY_PATH="$nccl_dir" timeout 600 "$bin" -b 8 -e 256M -f 4 -g "$g" -c 1 -n 20 -w 5 >"$out/nccl-$t-g$g.txt" 2>&1 || true
		fi
	done
done

# busbw beside NCCL's: size, then out-of-place time and busbw of each.
python3 - "$out" $gs <<'PY' | tee "$out/summary.txt"
import re, sys, os, glob
out, gs = sys.argv[1], sys.argv[2:]
row = re.compile(r"^\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")
def table(path):
    if not os.path.exists(path): return {}
    return {int(m.group(1)): (float(m.group(3)), float(m.group(5))) for m in map(row.match, open(path)) if m}
for g in gs:
    for t in "all_reduce all_gather broadcast reduce_scatter reduce alltoall sendrecv".split():
        ours, theirs = table(f"{out}/twinccl-{t}-g{g}.txt"), table(f"{out}/nccl-{t}-g{g}.txt")
        if not ours: continue
        print(f"# {t} -g {g}: size, twinccl time (us) and busbw (GB/s), NCCL time and busbw, busbw ratio")
        for size in sorted(ours):
            o = ours[size]; n = theirs.get(size)
            ratio = f"{o[1]/n[1]:.2f}" if n and n[1] > 0 else "-"
            ns = f"{n[0]:10.2f} {n[1]:8.2f}" if n else f"{'-':>10} {'-':>8}"
            print(f"{size:>12} {o[0]:10.2f} {o[1]:8.2f} {ns} {ratio:>6}")
PY

if python3 -c 'import torch' 2>/dev/null; then
	if LD_PRELOAD="$repo/bin/libnccl.so.2" timeout 600 python3 "$repo/testdata/lib/torch_check.py" >"$out/torch.txt" 2>&1; then
		echo "ok   PyTorch on twinccl: $(tail -1 "$out/torch.txt")"
	else
		echo "FAIL PyTorch on twinccl (see $out/torch.txt)"; tail -20 "$out/torch.txt"; fail=1
	fi
else
	echo "run-gpu.sh: no PyTorch: torch_check.py skipped"
fi
# The tuner plugin on NCCL: the same binaries, NCCL with and without it.
if [ -n "$nccl_dir" ] && [ "$ngpu" -gt 1 ]; then
	for t in all_reduce all_gather reduce_scatter broadcast reduce; do
		bin=$out/nccl-tests/${t}_perf
		LD_LIBRARY_PATH="$nccl_dir" timeout 600 "$bin" -b 8 -e 1G -f 2 -g "$ngpu" -c 0 -n 50 -w 10 >"$out/tuner-off-$t.txt" 2>&1 || true
		LD_LIBRARY_PATH="$nccl_dir" NCCL_TUNER_PLUGIN="$repo/bin/libnccl-tuner-twinccl.so" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING \
			timeout 600 "$bin" -b 8 -e 1G -f 2 -g "$ngpu" -c 0 -n 50 -w 10 >"$out/tuner-on-$t.txt" 2>&1 || true
		grep -m1 -i "tuner" "$out/tuner-on-$t.txt" || echo "run-gpu.sh: NCCL did not mention the tuner plugin for $t (see $out/tuner-on-$t.txt)"
	done
	python3 - "$out" <<'PY' | tee "$out/tuner.txt"
import re, sys
out = sys.argv[1]
row = re.compile(r"^\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")
def table(path):
    try: return {int(m.group(1)): float(m.group(5)) for m in map(row.match, open(path)) if m}
    except OSError: return {}
for t in "all_reduce all_gather reduce_scatter broadcast reduce".split():
    off, on = table(f"{out}/tuner-off-{t}.txt"), table(f"{out}/tuner-on-{t}.txt")
    print(f"# {t}: size, NCCL busbw without / with the twinccl tuner (GB/s), ratio")
    for size in sorted(off):
        if size in on:
            print(f"{size:>12} {off[size]:8.2f} {on[size]:8.2f} {on[size]/off[size] if off[size] else 0:6.2f}")
PY
fi
exit $fail
