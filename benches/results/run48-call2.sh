#!/bin/bash
# session 40, call 2 (same machine as call 1 where it is still held): the PyTorch anchors
# for the table (torch_decode.py from ../shared/bench: eager, CUDA graph, torch.compile +
# graph) at the batches of call 1, then ncu on one llama-3.2-1b B = 8 step of the
# megakernel and on the baseline's qkv stage kernel: where a short GEMV task's fixed
# time goes (stall reasons per SASS line; instruction-cache misses of the large module?).
G=.gpu
[ -x $G/bin/llama_bench ] || tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
left() { [ $(( $(date +%s) - t0 )) -lt $1 ]; }
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/torch-1b.txt 2>&1
# the anchors on an H200 only (the H100's are in runs 40 and 45)
if grep -q H200 $OUT/torch-1b.txt; then
  timeout 240 python3 $G/torch_decode.py --model llama-3.2-1b --batch 1,8 --kv 1024 --compile >> $OUT/torch-1b.txt 2>&1; stamp $? >> $OUT/torch-1b.txt
  left 200 && { timeout 150 python3 $G/torch_decode.py --model llama-3.1-8b --batch 1,8 --kv 1024 > $OUT/torch-8b.txt 2>&1; stamp $? >> $OUT/torch-8b.txt; }
fi
# ncu: one whole step of the megakernel (every group's stalls, per SASS line), then the
# baseline's qkv stage kernel (the fused norm + GEMV alone)
L="--configs llama-3.2-1b --batch 8 --kv 1024 --schedules static --no-first-token --steps 4 --warmup 1"
if left 420; then
  timeout 150 ncu --kernel-name et_main --launch-skip 2 --launch-count 1 --set full -f -o $OUT/ncu-mk-1b-b8 \
      $G/bin/llama_bench $L > $OUT/ncu-run.txt 2>&1; stamp $? >> $OUT/ncu-run.txt
fi
if left 520; then
  timeout 60 ncu --kernel-name bl_qkv_proj --launch-skip 3 --launch-count 1 --set full -f -o $OUT/ncu-qkv-1b-b8 \
      $G/bin/llama_bench $L >> $OUT/ncu-run.txt 2>&1; stamp $? >> $OUT/ncu-run.txt
fi
for r in $OUT/ncu-*.ncu-rep; do
  [ -f "$r" ] || continue
  ncu -i $r --page details > ${r%.ncu-rep}-details.txt 2>&1
  ncu -i $r --page source --csv --print-source sass > ${r%.ncu-rep}-sass.csv 2>&1
done
ls -la $OUT
