#!/usr/bin/env bash
# compute-sanitizer over one call of every case of benchmarks/check_one_gpu.py, ranks on one GPU.
#
# Every torch allocation is its own cudaMalloc (PYTORCH_NO_CUDA_MEMORY_CACHING=1): each rank's
# buffer, signal pad, scratch and address table (W entries, nothing after them) is an allocation
# of its own, so a kernel that touches a padded or masked-off peer entry, or the buffer behind
# one, makes an out-of-bounds access that memcheck reports.  --phased keeps every free (which
# then synchronises the device) out of the calls.  Logs go to $1 (default /tmp/sanitize), one
# per tool and W; the summary lines are printed.
#
#     bash benchmarks/sanitize_one_gpu.sh OUT_DIR "memcheck:2 memcheck:4 synccheck:2 racecheck:2"
set -u
out=${1:-/tmp/sanitize}
runs=${2:-"memcheck:2 memcheck:4 synccheck:2 racecheck:2"}
limit=${SANITIZE_LIMIT:-300}
mkdir -p "$out"
export PYTORCH_NO_CUDA_MEMORY_CACHING=1 CUDA_MODULE_LOADING=EAGER
for run in $runs; do
  tool=${run%%:*}
  world=${run##*:}
  log="$out/sanitize-$tool-w$world.log"
  timeout "$limit" compute-sanitizer --tool "$tool" --print-limit 50 \
    python3 benchmarks/check_one_gpu.py --child "$world" --iters 1 --phased ${SANITIZE_CASES:+--cases $SANITIZE_CASES} \
    >"$log" 2>&1
  echo "$tool W=$world exit $? : $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1)"
done
