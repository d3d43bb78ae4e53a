#!/bin/bash
# session 24 call 3: the transposed fold at 8b B = 32 / 64 (KV 1024 and 8192, the baseline at 512 and 384 threads), the llama CPU-reference test
cd "$(dirname "$0")/.."
G=.gpu
t0=$(date +%s)
timeout 290 $G/bin/llama_bench --configs llama-3.1-8b --batch 32,64 --kv 1024,8192 --schedules static --no-first-token --steps 20 --baseline-threads 512,384 > $OUT/llama-8b-T1-b32-64.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/llama-8b-T1-b32-64.txt
timeout 200 $G/tests/gpu-llama --ignored --test-threads 1 llama_3_2_1b_steps_match > $OUT/test-llama-gpu.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/test-llama-gpu.txt
