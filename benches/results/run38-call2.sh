#!/bin/bash
# session 27 call 2: the value-row prefetch A/B at 8b B = 1, and 1b B = 1 again (alternated)
G=.gpu
t0=$(date +%s)
for v in 1 0; do
  ET_NVRTC_OPTIONS=-DET_ATTN_V_PREFETCH=$v timeout 130 $G/bin/llama_bench --configs llama-3.1-8b --batch 1 --kv 1024 --schedules static --no-first-token --steps 20 > $OUT/llama-8b-pf$v.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/llama-8b-pf$v.txt
done
for v in 0 1; do
  ET_NVRTC_OPTIONS=-DET_ATTN_V_PREFETCH=$v timeout 60 $G/bin/llama_bench --configs llama-3.2-1b --batch 1 --kv 1024 --schedules static --no-first-token --steps 20 > $OUT/llama-1b-b1-pf$v.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/llama-1b-b1-pf$v.txt
done
