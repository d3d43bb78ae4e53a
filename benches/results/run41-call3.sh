#!/bin/bash
# session 31 call 3: the batched norm loads, measured. ops_bench norm (row groups with 4
# pieces in flight; row at a time; 2 and 8 pieces), then the Llama steps with the fused
# norms' 4 pieces in flight (default) and one piece at a time (-DET_NORM_PIECES=1, the
# old order), alternating, in the same binary: 1b B = 1 and 8 twice each, 8b B = 8 once.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/norm.txt 2>&1
export ET_CACHE_DIR=/tmp/et-cache
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
for v in "" "-DET_NORM_ROW_AT_A_TIME" "-DET_NORM_PIECES=2" "-DET_NORM_PIECES=8" "" "-DET_NORM_ROW_AT_A_TIME"; do
  export ET_NVRTC_OPTIONS="$v"
  echo "=== variant '$v'" >> $OUT/norm.txt
  timeout 60 $G/bin/ops_bench --only bw,norm >> $OUT/norm.txt 2>&1; stamp $? >> $OUT/norm.txt
done
for round in 1 2; do
  for v in "" "-DET_NORM_PIECES=1"; do
    export ET_NVRTC_OPTIONS="$v"
    echo "=== round $round variant '$v'" >> $OUT/steps.txt
    timeout 100 $G/bin/llama_bench --configs llama-3.2-1b --batch 1,8 --kv 1024 --schedules static --no-first-token --steps 30 >> $OUT/steps.txt 2>&1; stamp $? >> $OUT/steps.txt
  done
done
for v in "" "-DET_NORM_PIECES=1"; do
  export ET_NVRTC_OPTIONS="$v"
  echo "=== 8b variant '$v'" >> $OUT/steps.txt
  timeout 100 $G/bin/llama_bench --configs llama-3.1-8b --batch 8 --kv 1024 --schedules static --no-first-token --steps 10 --warmup 2 >> $OUT/steps.txt 2>&1; stamp $? >> $OUT/steps.txt
done
