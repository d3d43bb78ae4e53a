#!/bin/bash
# session 42, prepared (never started): the llama-3.1-8b table of main (pack main as it is:
# scripts/pack-gpu -p et-benches -p llama, trimmed to bin/llama_bench) at every stamp, KV 1024 and
# 8192, both schedules, the baselines and PyTorch on the same card (torch.compile only at
# B = 1: it takes a minute and a half a batch at 8b); no first-token runs (run 45 has them).
G=.gpu
tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
E=$OUT/env.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $E 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
# an H100's 80 GB cannot hold 8b's cache at KV 8192 beyond B = 8 (B = 64: 69 GB) beside the weights
MEM=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
B8K=1,8,32,64; [ "$MEM" -lt 100000 ] && B8K=1,8
timeout 150 python3 $G/torch_decode.py --model llama-3.1-8b --batch 1 --kv 1024 --compile > $OUT/torch-8b-1k-compile.jsonl 2> $OUT/torch.err; stamp $? >> $E
timeout 60 python3 $G/torch_decode.py --model llama-3.1-8b --batch 8,32,64 --kv 1024 > $OUT/torch-8b-1k.jsonl 2>> $OUT/torch.err; stamp $? >> $E
timeout 60 python3 $G/torch_decode.py --model llama-3.1-8b --batch $B8K --kv 8192 > $OUT/torch-8b-8k.jsonl 2>> $OUT/torch.err; stamp $? >> $E
mkdir -p /tmp/tr
timeout $(( 400 - ($(date +%s) - t0) )) $G/bin/llama_bench --configs llama-3.1-8b --kv 1024 --steps 20 --warmup 3 --no-first-token \
    --torch-json $OUT/torch-8b-1k-compile.jsonl --torch-json $OUT/torch-8b-1k.jsonl \
    --json $OUT/llama-8b-1k.jsonl --trace /tmp/tr --trace-layer 5 > $OUT/bench-8b-1k.txt 2>&1; stamp $? >> $E
timeout $(( 585 - ($(date +%s) - t0) )) $G/bin/llama_bench --configs llama-3.1-8b --kv 8192 --batch $B8K --steps 10 --warmup 2 --no-first-token \
    --torch-json $OUT/torch-8b-8k.jsonl --json $OUT/llama-8b-8k.jsonl > $OUT/bench-8b-8k.txt 2>&1; stamp $? >> $E
(cd /tmp/tr && tar cJf $OUT/traces-b1.tar.xz *-b1-kv1024-static.json) 2>> $E
ls -la /tmp/tr >> $E
