#!/bin/bash
# session 25 call 2: the attention combine by shuffles (new) against the loops over the warps (ET_ATTN_OLD_COMBINE=1)
cd "$(dirname "$0")/.."
G=.gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
t0=$(date +%s)
timeout 150 $G/tests/gpu_ops-* --ignored --test-threads 1 rope_append > $OUT/tests.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/tests.txt
timeout 200 $G/tests/gpu-llama --ignored --test-threads 1 >> $OUT/tests.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/tests.txt
for v in 0 1; do
  ET_NVRTC_OPTIONS=-DET_ATTN_OLD_COMBINE=$v timeout 120 $G/bin/llama_bench --configs llama-3.2-1b --batch 1,8,32,64 --kv 1024 --schedules static --no-first-token --steps 20 > $OUT/llama-1b-old$v.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/llama-1b-old$v.txt
done
for v in 0 1; do
  ET_NVRTC_OPTIONS="-DET_ATTN_OLD_COMBINE=$v -DET_ATTN_PROBE -DET_ATTN_PROBE_START=5440" timeout 60 $G/bin/llama_bench --configs llama-3.2-1b --batch 1 --kv 1024 --schedules static --no-first-token --steps 10 --warmup 2 > $OUT/probe-1b-old$v.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/probe-1b-old$v.txt
done
