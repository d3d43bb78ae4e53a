#!/bin/bash
# session 36, call 2: cold NVRTC per stamp on the GPU machine's host with NVRTC's own cache
# off (the nvrtc test: every decode stamp, both schedules, one after another), and process
# start to first token with both caches fresh for the cold child (llama_bench).
G=.gpu
tar xJf $G/pack.tar.xz -C $G
L=$OUT/first-token.txt; N=$OUT/nvrtc.txt
export ET_CACHE_DIR=/tmp/et-cache-call2
( CUDA_CACHE_DISABLE=1 timeout 330 $G/tests/nvrtc --ignored --nocapture --test-threads=1 > $N 2>&1; echo "rc $?" >> $N ) &
# the first token beside it would share the CPU: run it after
wait
for b in 1 8; do
  timeout 120 $G/bin/llama_bench --configs llama-3.2-1b --batch $b --kv 1024 --schedules static --steps 10 >> $L 2>&1; echo "rc $?" >> $L
done
