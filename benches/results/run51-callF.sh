#!/bin/bash
# session 43, call F: the batch-1 GEMV's whole rounds unchecked (one binary, bin/llama_bench)
# against main (bin/llama_bench_main, as packed for calls T1-T3), and load8's slow path out of
# line (-DET_LOAD8_SLOW_NOINLINE=1), on one machine: llama-3.2-1b KV 1024 static, B = 1
# alternated main, new, new+noinline twice; B = 8 (where only the noinline switch changes
# the code) main, noinline, main, noinline.
G=.gpu
[ -x $G/bin/llama_bench ] || tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "$2 rc $1 $(( $(date +%s) - t0 ))s"; }
E=$OUT/env.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $E 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
run() { # label binary batch options
  ET_NVRTC_OPTIONS="$4" timeout 45 $G/bin/$2 --configs llama-3.2-1b --batch $3 --kv 1024 --schedules static \
      --no-first-token --steps 20 --warmup 3 >> $OUT/ab-$1-b$3.txt 2>&1; stamp $? "$1 b$3" >> $E
}
for round in 1 2; do
  run main llama_bench_main 1 ""
  run new llama_bench 1 ""
  run newni llama_bench 1 "-DET_LOAD8_SLOW_NOINLINE=1"
done
for round in 1 2; do
  [ $(( $(date +%s) - t0 )) -gt 230 ] && break
  run main llama_bench_main 8 ""
  run newni llama_bench 8 "-DET_LOAD8_SLOW_NOINLINE=1"
done
grep -h "megakernel static\|baseline graph" $OUT/ab-*.txt | grep "this run" >> $E
