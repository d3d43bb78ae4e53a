#!/bin/bash
# session 43, call T3: KV 8192 for both models (8b beyond B = 8 only where the card holds its
# cache), both schedules, the baselines and PyTorch (CUDA graphs, eager) on the same card; no
# first-token runs. main as packed (llama_bench only).
G=.gpu
[ -x $G/bin/llama_bench ] || tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "$2 rc $1 $(( $(date +%s) - t0 ))s"; }
E=$OUT/env.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $E 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
left() { echo $(( $1 - ($(date +%s) - t0) )); }
MEM=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
B8K=1,8,32,64; [ "$MEM" -lt 100000 ] && B8K=1,8
timeout 40 python3 $G/torch_decode.py --model llama-3.2-1b --batch 1,8,32,64 --kv 8192 > $OUT/torch-1b-8k.jsonl 2> $OUT/torch.err; stamp $? torch-1b >> $E
timeout 50 python3 $G/torch_decode.py --model llama-3.1-8b --batch $B8K --kv 8192 > $OUT/torch-8b-8k.jsonl 2>> $OUT/torch.err; stamp $? torch-8b >> $E
timeout $(left 170) $G/bin/llama_bench --configs llama-3.2-1b --kv 8192 --steps 10 --warmup 2 --no-first-token \
    --torch-json $OUT/torch-1b-8k.jsonl --json $OUT/llama-1b-8k.jsonl > $OUT/bench-1b-8k.txt 2>&1; stamp $? bench-1b >> $E
timeout $(left 295) $G/bin/llama_bench --configs llama-3.1-8b --kv 8192 --batch $B8K --steps 10 --warmup 2 --no-first-token \
    --torch-json $OUT/torch-8b-8k.jsonl --json $OUT/llama-8b-8k.jsonl > $OUT/bench-8b-8k.txt 2>&1; stamp $? bench-8b >> $E
