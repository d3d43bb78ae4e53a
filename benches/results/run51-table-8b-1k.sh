#!/bin/bash
# session 43, call T2: llama-3.1-8b at KV 1024, every stamp, both schedules, the baselines and
# PyTorch on the same card (torch.compile at B = 1 only: a minute and a half), no first-token
# runs. main as packed (llama_bench only).
G=.gpu
[ -x $G/bin/llama_bench ] || tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "$2 rc $1 $(( $(date +%s) - t0 ))s"; }
E=$OUT/env.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $E 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
left() { echo $(( $1 - ($(date +%s) - t0) )); }
timeout 130 python3 $G/torch_decode.py --model llama-3.1-8b --batch 1 --kv 1024 --compile > $OUT/torch-8b-1k-compile.jsonl 2> $OUT/torch.err; stamp $? torch-compile >> $E
timeout 50 python3 $G/torch_decode.py --model llama-3.1-8b --batch 8,32,64 --kv 1024 > $OUT/torch-8b-1k.jsonl 2>> $OUT/torch.err; stamp $? torch >> $E
timeout $(left 290) $G/bin/llama_bench --configs llama-3.1-8b --kv 1024 --steps 20 --warmup 3 --no-first-token \
    --torch-json $OUT/torch-8b-1k-compile.jsonl --torch-json $OUT/torch-8b-1k.jsonl \
    --json $OUT/llama-8b-1k.jsonl > $OUT/bench-8b-1k.txt 2>&1; stamp $? bench >> $E
