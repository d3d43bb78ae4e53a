#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after scripts/pack-gpu:
# every test binary (GPU tests included), the splitk example, compute-sanitizer on it,
# the llama binary against the Hugging Face peer, and the benchmarks. Logs go to $OUT
# (or ./gpu-out).
set -u
out=${OUT:-gpu-out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
export ET_CACHE_DIR=/tmp/et-cache
status=0
bash .gpu/run.sh tests > "$out/tests.log" 2>&1 || status=1
grep -E "^(test result|=== |run.sh)|FAILED|panicked" "$out/tests.log" | tail -40
echo "--- splitk example"
bash .gpu/run.sh exec splitk --m 16 --n 16 --rows 64 2>&1 | tee "$out/splitk.log" || status=1
echo "--- compute-sanitizer"
for tool in memcheck racecheck; do
  ET_WATCHDOG_MS=60000 compute-sanitizer --tool $tool --error-exitcode 9 .gpu/bin/splitk --m 2 --n 2 --rows 4 > "$out/sanitizer-$tool.log" 2>&1
  rc=$?
  echo "$tool: exit $rc; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer-$tool.log" | tr '\n' ' ')"
  [ $rc = 0 ] || status=1
done
echo "--- llama against the Hugging Face peer, on the GPU (tiny and Llama-3.2-1B shapes)"
if ! python3 -c "import numpy" 2>/dev/null; then
  echo "no numpy on this machine: the peer needs it (carry .tools/py and set PYTHONPATH)"; status=1
elif [ -x .gpu/bin/llama ]; then
  python3 examples/llama/peer/hf_peer.py --gpu --shapes all --llama .gpu/bin/llama 2>&1 | tee "$out/hf-peer.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
else
  echo "no .gpu/bin/llama (pack with -p llama)"; status=1
fi
echo "--- benchmarks"
bash .gpu/run.sh exec gpu_bench --json "$out/bench.jsonl" 2>&1 | tee "$out/bench.log" || status=1
exit $status
