#!/bin/bash
# session 44, call A: S = 4 against main's S = 8 at 1b B = 1 (KV 1024 and 8192), alternated,
# and the launch's host phases (the experiment binary's temporary marks)
G=.gpu
tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
E=$OUT/env.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $E 2>&1
which perf ltrace gdb >> $E 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
A="--configs llama-3.2-1b --batch 1 --kv 1024,8192 --steps 30 --warmup 3 --no-first-token --schedules static"
for i in 1 2; do
  timeout 100 $G/bin/llama_bench $A > $OUT/main-$i.txt 2>&1; echo "main $i rc $? $(( $(date +%s) - t0 ))s" >> $E
  timeout 100 $G/llama_bench_exp $A > $OUT/s4-$i.txt 2>&1; echo "s4 $i rc $? $(( $(date +%s) - t0 ))s" >> $E
done
timeout 60 $G/llama_bench_exp --configs llama-3.2-1b --batch 8 --kv 1024 --steps 30 --warmup 3 --no-first-token > $OUT/exp-b8.txt 2>&1; echo "b8 rc $? $(( $(date +%s) - t0 ))s" >> $E
