#!/usr/bin/env bash
# Runs testdata/jobs/pg_job.py under NCCL with twinccl's profiler plugin,
# merges the per-rank call traces and replays the job with bin/replay run
# on the topology NCCL itself dumped for the job's GPUs.
#
# usage: testdata/jobs/run-profiled.sh [pg_job.py flags...]
#
#   NPROC   ranks (GPUs) on this host; default: every GPU nvidia-smi lists
#   OUT     output directory; default /tmp/twinccl-pg-job (emptied first)
#   LAUNCH  the launcher; default "torchrun --standalone --nproc_per_node=$NPROC"
#           (plain "python3" when NPROC is 1 and torchrun is missing)
#   TWINCCL_PROFILER_PROXY=1 also records proxy steps (event traces)
#
# Writes OUT/topo.xml (NCCL_TOPO_DUMP_FILE of a first, unprofiled run),
# OUT/ranks/*.parquet (one call trace per process), OUT/job.parquet (merged),
# OUT/job.sim.calls.parquet and OUT/job.sim.events.parquet (replayed), the
# job's own per-group timings (OUT/job.jsonl) and NCCL's logs (OUT/nccl.*.log).
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
PLUGIN=$ROOT/bin/libnccl-profiler-twinccl.so
if [[ ! -x $ROOT/bin/replay || ! -f $PLUGIN ]]; then
  make build plugins
fi
if [[ -z ${NPROC:-} ]]; then
  NPROC=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  [[ $NPROC -ge 1 ]] || { echo "run-profiled: no GPU found (nvidia-smi -L); set NPROC" >&2; exit 1; }
fi
OUT=${OUT:-/tmp/twinccl-pg-job}
if [[ -z ${LAUNCH:-} ]]; then
  if command -v torchrun >/dev/null; then
    LAUNCH="torchrun --standalone --nproc_per_node=$NPROC"
  elif [[ $NPROC -eq 1 ]]; then
    LAUNCH=python3
  else
    echo "run-profiled: torchrun not found: set LAUNCH" >&2; exit 1
  fi
fi
JOB=$ROOT/testdata/jobs/pg_job.py
rm -rf "$OUT"
mkdir -p "$OUT/ranks"

echo "== topology: $NPROC rank(s), NCCL_TOPO_DUMP_FILE=$OUT/topo.xml"
NCCL_PROFILER_PLUGIN=none NCCL_TOPO_DUMP_FILE=$OUT/topo.xml $LAUNCH "$JOB" --topo-only

echo "== profiled run: NCCL_PROFILER_PLUGIN=$PLUGIN"
NCCL_PROFILER_PLUGIN=$PLUGIN NCCL_NVLS_ENABLE=0 TWINCCL_PROFILER_DIR=$OUT/ranks \
  NCCL_DEBUG=${NCCL_DEBUG:-INFO} NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,ENV} \
  NCCL_DEBUG_FILE=$OUT/nccl.%h.%p.log \
  $LAUNCH "$JOB" "$@" | tee "$OUT/job.jsonl"

if ! grep -qh 'PROFILER/Plugin: Loaded twinccl' "$OUT"/nccl.*.log; then
  echo "run-profiled: NCCL did not load the plugin (see $OUT/nccl.*.log)" >&2
  exit 1
fi
grep -h 'PROFILER/Plugin: Loaded twinccl' "$OUT"/nccl.*.log | sort -u | head -1
if grep -qh 'twinccl profiler' "$OUT"/nccl.*.log; then
  grep -h 'twinccl profiler' "$OUT"/nccl.*.log | sed 's/^/  /' | sort -u | head -20
fi

shopt -s nullglob
parts=("$OUT"/ranks/*[0-9].parquet)
[[ ${#parts[@]} -ge 1 ]] || { echo "run-profiled: no trace in $OUT/ranks" >&2; exit 1; }
echo "== merge: ${#parts[@]} part(s)"
"$ROOT/bin/replay" trace merge -o "$OUT/job.parquet" "${parts[@]}"
"$ROOT/bin/replay" trace info "$OUT/job.parquet"
rows=$("$ROOT/bin/replay" trace info "$OUT/job.parquet" | awk '$1 == "rows:" {print $2; exit}')
if [[ ${rows:-0} -eq 0 ]]; then
  echo "run-profiled: the trace has no calls: NCCL runs a single-rank communicator's collectives as a copy" \
    "without a task, and the profiler API reports none of them (every communicator of a one-GPU job)." >&2
  exit 2
fi
"$ROOT/bin/replay" trace export "$OUT/job.parquet" --format summary

echo "== replay: bin/replay run $OUT/job.parquet --topo $OUT/topo.xml"
"$ROOT/bin/replay" run "$OUT/job.parquet" --topo "$OUT/topo.xml" --out "$OUT/job.sim"
