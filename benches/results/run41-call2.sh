#!/bin/bash
# session 31 call 2: GPU tests after the batched norm loads (rms_norm, rms_norm_residual:
# row groups; the fused norm GEMVs' norm_stage: ET_NORM_PIECES loads in flight): gpu_ops
# (misc at B = 1, 5, 16; the GEMV family with the fused norms), the llama GPU tests
# (steps against the CPU reference at B = 1 and 8, greedy tokens), et-device gpu.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/tests.txt 2>&1
export ET_CACHE_DIR=/tmp/et-cache
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
for p in gpu_ops gpu; do
  for t in $G/tests/$p-*; do
    [ -e "$t" ] || continue
    echo "=== $(basename $t)" >> $OUT/tests.txt
    timeout 320 $t --include-ignored --test-threads=1 >> $OUT/tests.txt 2>&1; stamp $? >> $OUT/tests.txt
  done
done
