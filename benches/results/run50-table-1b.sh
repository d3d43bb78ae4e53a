#!/bin/bash
# session 42, prepared (never started; call A, a shorter mix of it, was taken back): the llama-3.2-1b table of main (pack main as it is:
# scripts/pack-gpu -p et-benches -p llama, trimmed to bin/llama_bench) at every stamp, KV 1024 and
# 8192, both schedules, the baselines, process start to first token, and PyTorch on the same
# card (torch.compile only at B = 1 and 8: it takes about a minute a batch).
G=.gpu
tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
E=$OUT/env.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $E 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
timeout 170 python3 $G/torch_decode.py --model llama-3.2-1b --batch 1,8 --kv 1024 --compile > $OUT/torch-1b-1k-compile.jsonl 2> $OUT/torch.err; stamp $? >> $E
timeout 40 python3 $G/torch_decode.py --model llama-3.2-1b --batch 32,64 --kv 1024 > $OUT/torch-1b-1k.jsonl 2>> $OUT/torch.err; stamp $? >> $E
timeout 40 python3 $G/torch_decode.py --model llama-3.2-1b --batch 1,8,32,64 --kv 8192 > $OUT/torch-1b-8k.jsonl 2>> $OUT/torch.err; stamp $? >> $E
mkdir -p /tmp/tr
timeout $(( 585 - ($(date +%s) - t0) )) $G/bin/llama_bench --configs llama-3.2-1b --kv 1024,8192 --steps 20 --warmup 3 \
    --torch-json $OUT/torch-1b-1k-compile.jsonl --torch-json $OUT/torch-1b-1k.jsonl --torch-json $OUT/torch-1b-8k.jsonl \
    --json $OUT/llama-1b.jsonl --trace /tmp/tr --trace-layer 5 > $OUT/bench-1b.txt 2>&1; stamp $? >> $E
(cd /tmp/tr && tar cJf $OUT/traces-b1.tar.xz *-b1-kv1024-static.json) 2>> $E
ls -la /tmp/tr >> $E
