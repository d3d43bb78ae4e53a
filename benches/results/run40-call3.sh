#!/bin/bash
# session 30 call 3: the llama GPU tests again, alone (call 1 gave the binary 200 s, and
# its CPU reference at B = 8 ran past it)
G=.gpu
tar xJf $G/pack.tar.xz -C $G
export ET_CACHE_DIR=/tmp/et-cache
t0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv > $OUT/llama-gpu.txt 2>&1
timeout 540 $G/tests/gpu-6ce47005f5447a4d --include-ignored --test-threads=1 --nocapture >> $OUT/llama-gpu.txt 2>&1
echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/llama-gpu.txt
