#!/bin/bash
# session 41, call 1: Hopper's instruction caches (run49-icache.cu, nvcc), then one traced
# llama-3.2-1b step at B = 1 and 8 (static, KV 1024) whose traces come back whole, to
# compare each group's tasks that ran after a task of another group on their CTA (code
# cold) against those that ran after one of their own (code warm).
# Packed with scripts/pack-gpu -p et-benches, trimmed to bin/llama_bench.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $OUT/icache.txt 2>&1
(cd /tmp && nvcc -O3 -arch=sm_90a -std=c++17 $OLDPWD/$G/run49-icache.cu -o icache) >> $OUT/icache.txt 2>&1; stamp $? >> $OUT/icache.txt
timeout 120 /tmp/icache >> $OUT/icache.txt 2>&1; stamp $? >> $OUT/icache.txt
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
mkdir -p /tmp/tr
timeout 240 $G/bin/llama_bench --configs llama-3.2-1b --batch 1,8 --kv 1024 --schedules static --no-first-token --steps 10 --warmup 2 \
    --trace /tmp/tr/1b --trace-layer 5 >> $OUT/bench.txt 2>&1; stamp $? >> $OUT/bench.txt
(cd /tmp/tr && tar cJf $OUT/traces.tar.xz .) ; ls -la /tmp/tr/* >> $OUT/bench.txt
ls -la $OUT
