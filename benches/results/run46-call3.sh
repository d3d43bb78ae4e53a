#!/bin/bash
# session 38, call 3: the steps at B = 32 and 64 with the baseline's launches given the
# arena's alignment slack (before, its ops had 128 bytes less than they declared, so its
# GEMVs above batch 16 never found room for the wgmma stages; call 2's baseline with the
# wgmma path compiled alone then took the scalar fallback: 8-25x slower).
# Packed with scripts/pack-gpu -p et-benches, trimmed to bin/llama_bench.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name --format=csv > $OUT/steps.txt 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
for c in llama-3.2-1b llama-3.1-8b; do
  echo "=== $c" >> $OUT/steps.txt
  timeout 120 $G/bin/llama_bench --configs $c --batch 32,64 --kv 1024 --schedules static --no-first-token --steps 20 --warmup 2 >> $OUT/steps.txt 2>&1; stamp $? >> $OUT/steps.txt
done
