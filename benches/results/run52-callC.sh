#!/bin/bash
# session 44, call C: main after the host-time commit (4316960), both models at KV 1024, every
# stamp, both schedules and the baselines: the host time of every batch
G=.gpu
t0=$(date +%s)
E=$OUT/env.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $E 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
timeout 560 $G/llama_bench --configs llama-3.2-1b,llama-3.1-8b --kv 1024 --steps 20 --warmup 3 --no-first-token \
    --json $OUT/llama-1k.jsonl > $OUT/bench-1k.txt 2>&1; echo "bench rc $? $(( $(date +%s) - t0 ))s" >> $E
