#!/bin/bash
# session 31 call 5: the committed norm code after moving its second pass into a helper
# shared by both ops (`norm_scale_row`, the same CUDA inlined): gpu_ops' misc test (B = 1,
# 5, 16 against the CPU) and ops_bench norm, default and -DET_NORM_ROW_AT_A_TIME.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/tests.txt 2>&1
export ET_CACHE_DIR=/tmp/et-cache
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
for t in $G/tests/gpu_ops-*; do
  echo "=== $(basename $t)" >> $OUT/tests.txt
  timeout 250 $t --include-ignored --test-threads=1 embedding_norms >> $OUT/tests.txt 2>&1; stamp $? >> $OUT/tests.txt
done
for v in "" "-DET_NORM_ROW_AT_A_TIME" "" "-DET_NORM_ROW_AT_A_TIME"; do
  export ET_NVRTC_OPTIONS="$v"
  echo "=== variant '$v'" >> $OUT/norm.txt
  timeout 60 $G/bin/ops_bench --only bw,norm >> $OUT/norm.txt 2>&1; stamp $? >> $OUT/norm.txt
done
