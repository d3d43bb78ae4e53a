#!/bin/bash
# session 45, call X: the ready queue's memset queued after each dynamic launch (new)
# against main's memset before it (4316960's llama_bench): GPU tests of et-device (gpu,
# gpu_dynamic), then llama-3.2-1b B = 1 and 8 at KV 1024, both schedules, new and old
# alternated twice.
G=.gpu
t0=$(date +%s)
stamp() { echo "$2 rc $1 $(( $(date +%s) - t0 ))s"; }
E=$OUT/env.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $E 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
left() { echo $(( $1 - ($(date +%s) - t0) )); }
for t in $G/new/gpu-* $G/new/gpu_dynamic-*; do
  timeout $(left 60) $t --include-ignored --test-threads=1 > $OUT/tests-$(basename $t | cut -d- -f1).txt 2>&1; stamp $? "$(basename $t)" >> $E
done
bench() { # variant run
  b=$G/new/llama_bench; [ $1 = old ] && b=$G/llama_bench
  echo "=== $1 run $2" >> $OUT/bench.txt
  timeout $(left $3) $b --configs llama-3.2-1b --batch 1,8 --kv 1024 --steps 20 --warmup 3 --no-first-token \
      --schedules static,dynamic --json $OUT/llama-$1-$2.jsonl >> $OUT/bench.txt 2>&1; stamp $? "bench $1 $2" >> $E
}
bench new 1 150
bench old 1 200
#bench new 2 260
#bench old 2 290
