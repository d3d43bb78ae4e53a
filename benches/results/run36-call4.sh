#!/bin/bash
# session 24 call 4: 8b B = 64 with the transposed fold beside the baseline at 512 and 384 threads
cd "$(dirname "$0")/.."
t0=$(date +%s)
timeout 330 .gpu/bin/llama_bench --configs llama-3.1-8b --batch 64 --kv 1024,8192 --schedules static --no-first-token --steps 20 --baseline-threads 512,384 > $OUT/llama-8b-T1-b64.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/llama-8b-T1-b64.txt
