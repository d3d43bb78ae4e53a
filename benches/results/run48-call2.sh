#!/bin/bash
# session 40, call 2 (same machine as call 1 where it is still held): the PyTorch anchors
# for the table (torch_decode.py from ../shared/bench: eager, CUDA graph, torch.compile +
# graph) at the batches of call 1, then ncu on the baseline's batch-8 qkv / o_proj / mlp
# stage kernels (llama-3.2-1b): where a short GEMV task's fixed time goes.
G=.gpu
[ -x $G/bin/llama_bench ] || tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
left() { [ $(( $(date +%s) - t0 )) -lt $1 ]; }
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/torch-1b.txt 2>&1
timeout 240 python3 $G/torch_decode.py --model llama-3.2-1b --batch 1,8 --kv 1024 --compile >> $OUT/torch-1b.txt 2>&1; stamp $? >> $OUT/torch-1b.txt
left 300 && { timeout 180 python3 $G/torch_decode.py --model llama-3.1-8b --batch 1,8 --kv 1024 > $OUT/torch-8b.txt 2>&1; stamp $? >> $OUT/torch-8b.txt; }
if left 480; then
  timeout 100 ncu --kernel-name regex:'^bl_(qkv_proj|o_proj|mlp)$' --launch-skip 3 --launch-count 3 --set full \
      -f -o $OUT/ncu-1b-b8 $G/bin/llama_bench --configs llama-3.2-1b --batch 8 --kv 1024 --schedules static \
      --no-first-token --steps 1 --warmup 0 > $OUT/ncu-run.txt 2>&1; stamp $? >> $OUT/ncu-run.txt
  ncu -i $OUT/ncu-1b-b8.ncu-rep --page details > $OUT/ncu-1b-b8-details.txt 2>&1
  ncu -i $OUT/ncu-1b-b8.ncu-rep --page source --csv --print-source sass > $OUT/ncu-1b-b8-sass.csv 2>&1
fi
ls -la $OUT
