#!/bin/bash
# session 35, call 1: a batch on the stamp of a larger one (idle slots): llama's GPU test
# of batches 3 and 20 against batch 8's rows, the Hugging Face peer at 1b shapes (batch 3
# on the batch-8 stamp among them), the llama binary's step time at batches 3, 8, 20, 32;
# the RoPE + append sweep of ET_ROPE_PIECES x ET_APPEND_PIECES and RMSNorm's
# ET_NORM_PIECES; then llama's other GPU tests while time lasts. Packed with
# scripts/pack-gpu -p llama -p et-benches, trimmed to llama's gpu test, llama, ops_bench.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/tests.txt 2>&1
export ET_CACHE_DIR=/tmp/et-cache
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
stamp() { echo "rc $1 $(el)s"; }
T=$(ls $G/tests/gpu-* | head -1)
echo "=== $(basename $T) every_batch" >> $OUT/tests.txt
timeout 150 $T --include-ignored --test-threads=1 --nocapture every_batch >> $OUT/tests.txt 2>&1; stamp $? >> $OUT/tests.txt
timeout 60 $G/bin/ops_bench --only bw > $OUT/ops.txt 2>&1; stamp $? >> $OUT/ops.txt
for rp in 2 1; do
  for ap in 4 2 8; do
    echo "=== ET_ROPE_PIECES=$rp ET_APPEND_PIECES=$ap" >> $OUT/ops.txt
    ET_NVRTC_OPTIONS="-DET_ROPE_PIECES=$rp -DET_APPEND_PIECES=$ap" timeout 40 $G/bin/ops_bench --only rope >> $OUT/ops.txt 2>&1; stamp $? >> $OUT/ops.txt
  done
done
for np in 8 4 12; do
  echo "=== ET_NORM_PIECES=$np" >> $OUT/ops.txt
  ET_NVRTC_OPTIONS="-DET_NORM_PIECES=$np" timeout 40 $G/bin/ops_bench --only norm >> $OUT/ops.txt 2>&1; stamp $? >> $OUT/ops.txt
done
for b in 8 3 32 20; do
  echo "=== llama --batch $b --tokens 40" >> $OUT/llama.txt
  timeout 60 $G/bin/llama --batch $b --tokens 40 >> $OUT/llama.txt 2>&1; stamp $? >> $OUT/llama.txt
done
timeout 170 python3 examples/llama/peer/hf_peer.py --gpu --shapes llama-3.2-1b --llama $G/bin/llama > $OUT/hf-peer.txt 2>&1; stamp $? >> $OUT/hf-peer.txt
left=$(( 585 - $(el) ))
if [ $left -gt 30 ]; then
  echo "=== $(basename $T) the others (${left}s)" >> $OUT/tests.txt
  timeout $left $T --include-ignored --test-threads=1 --skip every_batch >> $OUT/tests.txt 2>&1; stamp $? >> $OUT/tests.txt
fi
