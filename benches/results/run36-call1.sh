#!/bin/bash
# session 24 call 1: the transposed attention fold (ET_ATTN_FOLD_T) against the paired one
cd "$(dirname "$0")/.."
G=.gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
t0=$(date +%s)
timeout 150 $G/tests/gpu_ops-* --ignored --test-threads 1 rope_append > $OUT/test-gpu_ops-attn.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/test-gpu_ops-attn.txt
for f in 1 0; do
  ET_NVRTC_OPTIONS=-DET_ATTN_FOLD_T=$f timeout 100 $G/bin/ops_bench --only attn,heads > $OUT/ops-attn-heads-T$f.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/ops-attn-heads-T$f.txt
done
for f in 1 0; do
  ET_NVRTC_OPTIONS=-DET_ATTN_FOLD_T=$f timeout 110 $G/bin/llama_bench --configs llama-3.2-1b --batch 1,8,32,64 --kv 1024 --schedules static --no-first-token --steps 20 > $OUT/llama-1b-T$f.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/llama-1b-T$f.txt
done
timeout 120 $G/tests/gpu-* --ignored --test-threads 1 > $OUT/test-llama-gpu.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/test-llama-gpu.txt
