#!/bin/bash
# session 31 call 4: the final norm code. rms_norm and rms_norm_residual in row groups
# with 8 pieces in flight a thread, one row with the whole CTA and one piece as before;
# the fused norm GEMVs as on main. gpu_ops (misc at B = 1, 5, 16 against the CPU), ops_bench
# norm (default and -DET_NORM_ROW_AT_A_TIME, alternating), the 1b steps at B = 1, 8, 32, 64.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/tests.txt 2>&1
export ET_CACHE_DIR=/tmp/et-cache
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
for t in $G/tests/gpu_ops-*; do
  echo "=== $(basename $t)" >> $OUT/tests.txt
  timeout 250 $t --include-ignored --test-threads=1 >> $OUT/tests.txt 2>&1; stamp $? >> $OUT/tests.txt
done
for v in "" "-DET_NORM_ROW_AT_A_TIME" "" "-DET_NORM_ROW_AT_A_TIME"; do
  export ET_NVRTC_OPTIONS="$v"
  echo "=== variant '$v'" >> $OUT/norm.txt
  timeout 60 $G/bin/ops_bench --only bw,norm >> $OUT/norm.txt 2>&1; stamp $? >> $OUT/norm.txt
done
unset ET_NVRTC_OPTIONS
timeout 150 $G/bin/llama_bench --configs llama-3.2-1b --batch 1,8,32,64 --kv 1024 --schedules static --no-first-token --steps 30 > $OUT/steps.txt 2>&1; stamp $? >> $OUT/steps.txt
