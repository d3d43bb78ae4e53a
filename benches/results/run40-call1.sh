#!/bin/bash
# session 30 call 1: GPU tests of 8503c92 + the observed-launch commit (et-device gpu,
# gpu_dynamic; llama gpu), the current Llama steps, and a layer trace of 1b B = 8 (the
# shape where the megakernel trails the baseline graph and torch.compile)
G=.gpu
tar xJf $G/pack.tar.xz -C $G
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/tests.txt 2>&1
export ET_CACHE_DIR=/tmp/et-cache
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
for t in $G/tests/*; do
  echo "=== $(basename $t)" >> $OUT/tests.txt
  timeout 200 $t --include-ignored --test-threads=1 >> $OUT/tests.txt 2>&1; stamp $? >> $OUT/tests.txt
done
timeout 120 $G/bin/llama_bench --configs llama-3.2-1b --batch 1,8 --kv 1024 --schedules static --no-first-token --steps 20 > $OUT/mk-1b.txt 2>&1; stamp $? >> $OUT/mk-1b.txt
timeout 120 $G/bin/llama_bench --configs llama-3.1-8b --batch 1 --kv 1024 --schedules static --no-first-token --steps 10 --warmup 2 > $OUT/mk-8b.txt 2>&1; stamp $? >> $OUT/mk-8b.txt
timeout 150 $G/bin/llama_bench --configs llama-3.2-1b --batch 8 --kv 1024 --schedules static --no-first-token --steps 20 --trace /tmp/tr --trace-layer 5 --stage-profile > $OUT/trace-1b8.txt 2>&1; stamp $? >> $OUT/trace-1b8.txt
