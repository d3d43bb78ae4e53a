#!/bin/bash
# session 25 call 4: llama-3.1-8b B = 64, the new combine against the old, twice each, then traced (layer 5)
cd "$(dirname "$0")/.."
G=.gpu
t0=$(date +%s)
for v in 0 1 0 1; do
  ET_NVRTC_OPTIONS=-DET_ATTN_OLD_COMBINE=$v timeout 100 $G/bin/llama_bench --configs llama-3.1-8b --batch 64 --kv 1024 --schedules static --no-first-token --steps 10 --warmup 2 >> $OUT/llama-8b-b64-old$v.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/llama-8b-b64-old$v.txt
done
for v in 0 1; do
  mkdir -p /tmp/tr$v
  ET_NVRTC_OPTIONS=-DET_ATTN_OLD_COMBINE=$v timeout 100 $G/bin/llama_bench --configs llama-3.1-8b --batch 64 --kv 1024 --schedules static --no-first-token --steps 5 --warmup 1 --trace /tmp/tr$v --trace-layer 5 > $OUT/trace-8b-b64-old$v.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/trace-8b-b64-old$v.txt
done
