#!/bin/bash
# session 25 call 3: llama-3.1-8b, the attention combine by shuffles (new) against the loops over the warps (ET_ATTN_OLD_COMBINE=1)
cd "$(dirname "$0")/.."
G=.gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
t0=$(date +%s)
for v in 0 1; do
  ET_NVRTC_OPTIONS=-DET_ATTN_OLD_COMBINE=$v timeout 200 $G/bin/llama_bench --configs llama-3.1-8b --batch 1,8,32,64 --kv 1024 --schedules static --no-first-token --steps 10 --warmup 2 > $OUT/llama-8b-old$v.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/llama-8b-old$v.txt
done
