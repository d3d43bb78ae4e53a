#!/bin/bash
# session 43, call T1: llama-3.2-1b at KV 1024, every stamp, both schedules, the baselines,
# process start to first token, a layer trace at B = 1, and PyTorch on the same card
# (torch.compile at B = 1 and 8 only: about a minute a batch). main as packed (llama_bench only).
G=.gpu
[ -x $G/bin/llama_bench ] || tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "$2 rc $1 $(( $(date +%s) - t0 ))s"; }
E=$OUT/env.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $E 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
left() { echo $(( $1 - ($(date +%s) - t0) )); }
timeout 150 python3 $G/torch_decode.py --model llama-3.2-1b --batch 1,8 --kv 1024 --compile > $OUT/torch-1b-1k-compile.jsonl 2> $OUT/torch.err; stamp $? torch-compile >> $E
timeout 40 python3 $G/torch_decode.py --model llama-3.2-1b --batch 32,64 --kv 1024 > $OUT/torch-1b-1k.jsonl 2>> $OUT/torch.err; stamp $? torch >> $E
mkdir -p /tmp/tr
timeout $(left 290) $G/bin/llama_bench --configs llama-3.2-1b --kv 1024 --steps 20 --warmup 3 \
    --torch-json $OUT/torch-1b-1k-compile.jsonl --torch-json $OUT/torch-1b-1k.jsonl \
    --json $OUT/llama-1b-1k.jsonl --trace /tmp/tr --trace-layer 5 > $OUT/bench-1b-1k.txt 2>&1; stamp $? bench >> $E
(cd /tmp/tr && tar cJf $OUT/traces-1b.tar.xz *-b1-kv1024-*.json *-b8-kv1024-static.json) 2>> $E
ls -la /tmp/tr >> $E
