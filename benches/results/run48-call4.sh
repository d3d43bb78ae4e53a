#!/bin/bash
# NOT RUN: no device machine could be started before the budget ran out (RESULTS run 48).
# session 40, call 4 (the budget's last 260 s): call 3's A/B cut to one round of
# llama-3.2-1b B = 1 and 8, old (9a5c5ea) then new (645810a), one machine.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/ab.txt 2>&1
for v in old new; do
  bin=$G/bin/llama_bench; [ $v = old ] && bin=$G/bin/llama_bench_old
  echo "=== $v llama-3.2-1b B = 1,8" >> $OUT/ab.txt
  timeout 70 $bin --configs llama-3.2-1b --batch 1,8 --kv 1024 --schedules static --no-first-token --steps 10 --warmup 2 \
      >> $OUT/ab.txt 2>&1; stamp $? >> $OUT/ab.txt
done
