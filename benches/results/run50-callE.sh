#!/bin/bash
# session 42, call E: the batch-1 GEMV with (row, k piece) units dealt over the warps
# (run50-gemv-balance.diff applied; -DET_GEMV_SIMT_BALANCE=0 compiles main's whole rows):
# llama-3.2-1b B = 1 static, alternated 1, 0, 1, 0; then the GEMV family's GPU test (72-row
# tiles: 8 rows past 4 x 16 warps, k = 4104) and the llama step against the CPU reference.
# Packed with scripts/pack-gpu -p et-device -p llama -p et-benches, trimmed.
G=.gpu
[ -x $G/bin/llama_bench ] || tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
E=$OUT/env.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $E 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
for v in 1 0 1 0; do
  [ $(( $(date +%s) - t0 )) -gt 80 ] && break
  ET_NVRTC_OPTIONS="-DET_GEMV_SIMT_BALANCE=$v" timeout 45 $G/bin/llama_bench --configs llama-3.2-1b --batch 1 --kv 1024 \
      --schedules static --no-first-token --steps 20 --warmup 3 >> $OUT/balance-$v.txt 2>&1; stamp $? >> $OUT/balance-$v.txt
done
timeout 50 $G/tests/gpu_ops-* --include-ignored --test-threads=1 gemv_family > $OUT/test-gpu_ops.txt 2>&1; stamp $? >> $OUT/test-gpu_ops.txt
timeout 60 $G/tests/gpu-llama --include-ignored --test-threads=1 steps_match > $OUT/test-llama.txt 2>&1; stamp $? >> $OUT/test-llama.txt
