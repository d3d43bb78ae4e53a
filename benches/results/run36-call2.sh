#!/bin/bash
# session 24 call 2: the transposed fold with its values loaded after the scores, 8b side by side
cd "$(dirname "$0")/.."
G=.gpu
t0=$(date +%s)
timeout 100 $G/tests/gpu_ops-* --ignored --test-threads 1 rope_append > $OUT/test-gpu_ops-attn.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/test-gpu_ops-attn.txt
for f in 1 0; do
  ET_NVRTC_OPTIONS=-DET_ATTN_FOLD_T=$f timeout 60 $G/bin/ops_bench --only attn,heads > $OUT/ops-attn-heads-T$f.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/ops-attn-heads-T$f.txt
done
for f in 1 0; do
  ET_NVRTC_OPTIONS=-DET_ATTN_FOLD_T=$f timeout 160 $G/bin/llama_bench --configs llama-3.1-8b --batch 1,8,32,64 --kv 1024 --schedules static --no-first-token --steps 20 > $OUT/llama-8b-T$f.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/llama-8b-T$f.txt
done
timeout 80 $G/bin/llama_bench --configs llama-3.2-1b --batch 1,8,32,64 --kv 1024 --schedules static --no-first-token --steps 20 > $OUT/llama-1b-T1.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/llama-1b-T1.txt
