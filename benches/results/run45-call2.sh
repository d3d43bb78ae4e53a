#!/bin/bash
# session 37, call 2 (same machine as call 1): the 8b steps at every stamp and PyTorch at 8b.
G=.gpu
[ -x $G/bin/llama_bench ] || tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name --format=csv > $OUT/mk-8b.txt 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
timeout 300 $G/bin/llama_bench --configs llama-3.1-8b --batch 1,8,32,64 --kv 1024 --schedules static --no-first-token --steps 10 --warmup 2 >> $OUT/mk-8b.txt 2>&1; stamp $? >> $OUT/mk-8b.txt
timeout 200 python3 $G/torch_decode.py --model llama-3.1-8b --batch 1,8 --kv 1024 > $OUT/torch-8b.txt 2>&1; stamp $? >> $OUT/torch-8b.txt
