#!/bin/bash
# session 45, call V: the dynamic ready queue zeroed on the device (new) against main's
# host memset (4316960's llama_bench): GPU tests of et-device (gpu, gpu_dynamic), then
# llama-3.2-1b B = 1 and 8 at KV 1024 under both schedules, new and old alternated twice.
G=.gpu
t0=$(date +%s)
stamp() { echo "$2 rc $1 $(( $(date +%s) - t0 ))s"; }
E=$OUT/env.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $E 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
left() { echo $(( $1 - ($(date +%s) - t0) )); }
for t in $G/new/gpu-* $G/new/gpu_dynamic-*; do
  timeout $(left 200) $t --include-ignored --test-threads=1 >> $OUT/tests.txt 2>&1; stamp $? "$(basename $t)" >> $E
done
for i in 1 2; do
  for v in new old; do
    b=$G/new/llama_bench; [ $v = old ] && b=$G/llama_bench
    echo "=== $v run $i" >> $OUT/bench.txt
    timeout $(left 560) $b --configs llama-3.2-1b --batch 1,8 --kv 1024 --steps 20 --warmup 3 --no-first-token \
        --schedules static,dynamic --json $OUT/llama-$v-$i.jsonl >> $OUT/bench.txt 2>&1; stamp $? "bench $v $i" >> $E
  done
done
