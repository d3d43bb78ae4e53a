#!/bin/bash
# session 30 call 2: the PyTorch anchors on the card of call 1
G=.gpu
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name --format=csv > $OUT/torch-1b.txt 2>&1
timeout 300 python3 $G/torch_decode.py --model llama-3.2-1b --batch 1,8 --kv 1024 --compile >> $OUT/torch-1b.txt 2>&1; stamp $? >> $OUT/torch-1b.txt
timeout 200 python3 $G/torch_decode.py --model llama-3.1-8b --batch 1 --kv 1024 > $OUT/torch-8b.txt 2>&1; stamp $? >> $OUT/torch-8b.txt
