#!/bin/bash
# session 42, call C (device time nearly spent; calls A and B never returned): (1) the
# batch-1 GEMV probe in llama-3.2-1b B = 1 (run50-gemv-probe.diff, -DET_GEMV_PROBE: thread
# 0 prints the cycles of a task's norm / merge prologue, of its GEMV body, and when its
# first and last warps finished, layer 5 of the third launch); (2) the dynamic module's
# consumer walk out of line (1) against inlined (0, main), one binary, 1b B = 1 and 8.
G=.gpu
[ -x $G/bin/llama_bench ] || tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
E=$OUT/env.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $E 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
ET_NVRTC_OPTIONS="-DET_GEMV_PROBE" timeout 90 $G/bin/llama_bench --configs llama-3.2-1b --batch 1 --kv 1024 --schedules static \
    --no-first-token --steps 3 --warmup 1 > $OUT/probe-all.txt 2>&1; stamp $? >> $E
grep -v "^gprobe" $OUT/probe-all.txt > $OUT/probe-bench.txt; grep "^gprobe" $OUT/probe-all.txt > $OUT/probe.txt; rm $OUT/probe-all.txt
for v in 1 0; do
  [ $(( $(date +%s) - t0 )) -gt 200 ] && break
  ET_NVRTC_OPTIONS="-DET_DYNAMIC_WALK_OUT_OF_LINE=$v" timeout 90 $G/bin/llama_bench --configs llama-3.2-1b --batch 1,8 --kv 1024 \
      --schedules dynamic --no-first-token --steps 20 --warmup 3 > $OUT/walk-$v.txt 2>&1; stamp $? >> $E
done
