#!/bin/bash
# session 45, call W: the ready queue zeroed on the device by an out-of-line function (new)
# against main's host memset (4316960's llama_bench): GPU tests of et-device (gpu,
# gpu_dynamic), then llama-3.2-1b B = 1, 8, 64 at KV 1024, both schedules, new and old
# alternated twice; llama-3.1-8b B = 1 new then old.
G=.gpu
t0=$(date +%s)
stamp() { echo "$2 rc $1 $(( $(date +%s) - t0 ))s"; }
E=$OUT/env.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $E 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
left() { echo $(( $1 - ($(date +%s) - t0) )); }
for t in $G/new/gpu-* $G/new/gpu_dynamic-*; do
  timeout $(left 150) $t --include-ignored --test-threads=1 >> $OUT/tests.txt 2>&1; stamp $? "$(basename $t)" >> $E
done
bench() { # variant run configs batches
  b=$G/new/llama_bench; [ $1 = old ] && b=$G/llama_bench
  echo "=== $1 run $2 $3 $4" >> $OUT/bench.txt
  timeout $(left $5) $b --configs $3 --batch $4 --kv 1024 --steps 20 --warmup 3 --no-first-token \
      --schedules static,dynamic --json $OUT/llama-$1-$2-$3.jsonl >> $OUT/bench.txt 2>&1; stamp $? "bench $1 $2 $3" >> $E
}
bench new 1 llama-3.2-1b 1,8,64 470
bench old 1 llama-3.2-1b 1,8,64 470
bench new 2 llama-3.2-1b 1,8,64 470
bench old 2 llama-3.2-1b 1,8,64 470
bench new 1 llama-3.1-8b 1 530
bench old 1 llama-3.1-8b 1 585
