#!/bin/bash
# session 31 call 1: GPU tests of the checked scalar arguments (et-device gpu: the
# ScalarArg abort, observe on the GPU), the row-group RMSNorm (gpu_ops misc at B = 1, 5,
# 16), the other et-device GPU tests; ops_bench norm with the row groups and with the old
# row-at-a-time order (-DET_NORM_ROW_AT_A_TIME) in the same binary, and rope.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/tests.txt 2>&1
export ET_CACHE_DIR=/tmp/et-cache
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
for p in gpu gpu_dynamic gpu_ops conditional_producers prefetch symbolic_extents gpu_copies gpu_fault; do
  for t in $G/tests/$p-*; do
    echo "=== $(basename $t)" >> $OUT/tests.txt
    timeout 200 $t --include-ignored --test-threads=1 >> $OUT/tests.txt 2>&1; stamp $? >> $OUT/tests.txt
  done
done
for v in new old new old; do
  if [ $v = old ]; then export ET_NVRTC_OPTIONS=-DET_NORM_ROW_AT_A_TIME; else unset ET_NVRTC_OPTIONS; fi
  echo "=== $v" >> $OUT/norm.txt
  timeout 120 $G/bin/ops_bench --only bw,norm >> $OUT/norm.txt 2>&1; stamp $? >> $OUT/norm.txt
done
unset ET_NVRTC_OPTIONS
timeout 120 $G/bin/ops_bench --only rope > $OUT/rope.txt 2>&1; stamp $? >> $OUT/rope.txt
