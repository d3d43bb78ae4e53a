#!/bin/bash
# session 24 call 5: llama-3.1-8b B = 1 / 8 with the new tensor-core fold in the `_simt` ops (ET_ATTN_SIMT_TC=1) against the CUDA-core fold
cd "$(dirname "$0")/.."
t0=$(date +%s)
for f in 1 0; do
  ET_NVRTC_OPTIONS=-DET_ATTN_SIMT_TC=$f timeout 110 .gpu/bin/llama_bench --configs llama-3.1-8b --batch 1,8 --kv 1024 --schedules static --no-first-token --steps 20 > $OUT/llama-8b-simt-tc$f.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/llama-8b-simt-tc$f.txt
done
