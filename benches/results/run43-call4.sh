#!/bin/bash
# session 35, call 4: the committed code after the conditional-signal rule and the faster
# launch-time race check: the llama binary's first step (cold compile, then from the disk
# cache) at batches 8 and 1, llama's GPU tests, et-device's GPU tests. Packed with
# scripts/pack-gpu -p llama -p et-device, trimmed.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/tests.txt 2>&1
export ET_CACHE_DIR=/tmp/et-cache
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
for b in 8 8 1 1; do
  echo "=== llama --batch $b --tokens 8" >> $OUT/llama.txt
  timeout 60 $G/bin/llama --batch $b --tokens 8 >> $OUT/llama.txt 2>&1; stamp $? >> $OUT/llama.txt
done
for t in $G/tests/*; do
  echo "=== $(basename $t)" >> $OUT/tests.txt
  timeout 200 $t --include-ignored --test-threads=1 >> $OUT/tests.txt 2>&1; stamp $? >> $OUT/tests.txt
done
