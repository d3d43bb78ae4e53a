#!/bin/bash
# session 27 call 1: the GPU tests of 6f8bfcc + c22332d (trimmed pack), then the value-row
# prefetch A/B (run37-v-prefetch.diff, built into bin/llama_bench only)
G=.gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
t0=$(date +%s)
timeout 330 bash $G/run.sh tests > $OUT/tests.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/tests.txt
for v in 1 0; do
  ET_NVRTC_OPTIONS=-DET_ATTN_V_PREFETCH=$v timeout 110 $G/bin/llama_bench --configs llama-3.2-1b --batch 1,8,32 --kv 1024 --schedules static --no-first-token --steps 20 > $OUT/llama-1b-pf$v.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/llama-1b-pf$v.txt
done
