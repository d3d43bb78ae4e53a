#!/bin/bash
# session 35, call 5: llama_bench at 1b B = 1 and 8 (KV 1024, static), with process start
# to first token (cold and warm disk cache) for each batch, after the launch's race check
# got faster (27d3b6f). Packed with scripts/pack-gpu -p et-benches, trimmed to llama_bench.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/steps.txt 2>&1
export ET_CACHE_DIR=/tmp/et-cache
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
for b in 1 8; do
  timeout 270 $G/bin/llama_bench --configs llama-3.2-1b --batch $b --kv 1024 --schedules static --steps 20 >> $OUT/steps.txt 2>&1; stamp $? >> $OUT/steps.txt
done
