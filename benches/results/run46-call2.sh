#!/bin/bash
# session 38, call 2 (the machine of call 1): the steps of the stamps the change touches
# (B = 32 and 64), new (default) and old (-DET_GEMV_WG_ONLY=0), alternated.
G=.gpu
[ -x $G/bin/llama_bench ] || tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
for c in llama-3.2-1b llama-3.1-8b; do
  vs="new old new"; [ $c = llama-3.1-8b ] && vs="new old"
  for v in $vs; do
    o=""; [ $v = old ] && o=-DET_GEMV_WG_ONLY=0
    echo "=== $c $v" >> $OUT/steps.txt
    ET_NVRTC_OPTIONS="$o" timeout 170 $G/bin/llama_bench --configs $c --batch 32,64 --kv 1024 --schedules static --no-first-token --steps 20 --warmup 2 >> $OUT/steps.txt 2>&1; stamp $? >> $OUT/steps.txt
    [ $(( $(date +%s) - t0 )) -gt 420 ] && break 2
  done
done
