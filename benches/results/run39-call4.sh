#!/bin/bash
# session 29 call 4 (H100): the shipped code's steps (the prologue switches off, which
# compiles what the code without them compiles) and the PyTorch anchors, on one card
G=.gpu
tar xJf $G/pack.tar.xz -C $G
export ET_CACHE_DIR=/tmp/et-cache
export ET_NVRTC_OPTIONS="-DET_NORM_FIRST_PIECE=0 -DET_RESIDUAL_PREFETCH=0 -DET_PROLOGUE_WARM_KB=0"
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
timeout 120 $G/bin/llama_bench --configs llama-3.2-1b --batch 1,8 --kv 1024 --schedules static --no-first-token --steps 20 > $OUT/mk-1b.txt 2>&1; stamp $? >> $OUT/mk-1b.txt
timeout 120 $G/bin/llama_bench --configs llama-3.1-8b --batch 1 --kv 1024 --schedules static --no-first-token --steps 10 --warmup 2 > $OUT/mk-8b.txt 2>&1; stamp $? >> $OUT/mk-8b.txt
timeout 280 python3 $G/torch_decode.py --model llama-3.2-1b --batch 1,8 --kv 1024 --compile > $OUT/torch-1b.txt 2>&1; stamp $? >> $OUT/torch-1b.txt
timeout 90 python3 $G/torch_decode.py --model llama-3.1-8b --batch 1 --kv 1024 > $OUT/torch-8b.txt 2>&1; stamp $? >> $OUT/torch-8b.txt
