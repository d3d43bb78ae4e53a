#!/bin/bash
# session 40, call 1: the LM head in two tile sizes (432 of 240 rows, 96 of 256: four
# whole waves of 132 SMs). The llama GPU tests and the baseline's, then the steps at
# B = 1 and 8 beside the baseline graph with layer 5's trace (the head's span).
# Packed with scripts/pack-gpu -p llama -p et-benches, trimmed.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
left() { [ $(( $(date +%s) - t0 )) -lt $1 ]; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $OUT/tests.txt 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
for t in gpu llama_baseline; do
  f=$(ls $G/tests/$t-* | head -1)
  echo "=== $f" >> $OUT/tests.txt
  timeout 200 $f --include-ignored --test-threads=1 >> $OUT/tests.txt 2>&1; stamp $? >> $OUT/tests.txt
done
mkdir -p /tmp/tr
for cb in "llama-3.2-1b 1,8 --stage-profile" "llama-3.1-8b 8" "llama-3.1-8b 1"; do
  set -- $cb
  left 430 || { echo "out of time before $1 $2" >> $OUT/bench.txt; break; }
  echo "=== $1 B = $2" >> $OUT/bench.txt
  timeout 150 $G/bin/llama_bench --configs $1 --batch $2 --kv 1024 --schedules static --no-first-token --steps 10 --warmup 2 \
      --trace /tmp/tr/$1 --trace-layer 5 $3 >> $OUT/bench.txt 2>&1; stamp $? >> $OUT/bench.txt
done
ls -la $OUT
