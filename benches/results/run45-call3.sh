#!/bin/bash
# session 37, call 3: the steps and the PyTorch anchors on an H200, if one is lent (the
# last H200 figures are run 37/38's; the CUDA of the step has not changed since).
# NOT RUN in session 37: no H200 was lent (five tries). Ready for the next session: pack as
# for calls 1-2, then run it with kind nvidia-h200.
G=.gpu
[ -x $G/bin/llama_bench ] || tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
timeout 120 $G/bin/llama_bench --configs llama-3.2-1b --batch 1,8,32,64 --kv 1024 --schedules static --no-first-token --steps 20 > $OUT/mk-1b.txt 2>&1; stamp $? >> $OUT/mk-1b.txt
timeout 170 $G/bin/llama_bench --configs llama-3.1-8b --batch 1,8,32,64 --kv 1024 --schedules static --no-first-token --steps 10 --warmup 2 > $OUT/mk-8b.txt 2>&1; stamp $? >> $OUT/mk-8b.txt
timeout 240 python3 $G/torch_decode.py --model llama-3.2-1b --batch 1,8 --kv 1024 --compile > $OUT/torch-1b.txt 2>&1; stamp $? >> $OUT/torch-1b.txt
timeout 50 python3 $G/torch_decode.py --model llama-3.1-8b --batch 1,8 --kv 1024 > $OUT/torch-8b.txt 2>&1; stamp $? >> $OUT/torch-8b.txt
