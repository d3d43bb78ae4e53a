#!/bin/bash
# session 44, call B: the packed-argument sets (with the phase marks) against main, 1b B = 1 and 8,
# alternated; then the GPU tests of et-device and llama with the change
G=.gpu
tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
E=$OUT/env.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $E 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
A="--configs llama-3.2-1b --batch 1,8 --kv 1024 --steps 30 --warmup 3 --no-first-token"
for i in 1 2; do
  timeout 100 $G/bin/llama_bench $A > $OUT/main-$i.txt 2>&1; echo "main $i rc $? $(( $(date +%s) - t0 ))s" >> $E
  timeout 100 $G/llama_bench_exp $A > $OUT/new-$i.txt 2>&1; echo "new $i rc $? $(( $(date +%s) - t0 ))s" >> $E
done
timeout 120 $G/gpu-et-device --include-ignored --test-threads=1 > $OUT/test-et-device.txt 2>&1; echo "et-device tests rc $? $(( $(date +%s) - t0 ))s" >> $E
timeout 200 $G/gpu-llama --include-ignored --test-threads=1 > $OUT/test-llama.txt 2>&1; echo "llama tests rc $? $(( $(date +%s) - t0 ))s" >> $E
