#!/bin/bash
# session 35, call 2: RoPE + append over blocks of 16 sequences (one task fills
# rope_llama3's table once) beside blocks of 8, at 2 and 4 pieces in flight. Packed by
# hand: the ops_bench binary only.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
export ET_CACHE_DIR=/tmp/et-cache
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
timeout 60 $G/bin/ops_bench --only bw > $OUT/ops.txt 2>&1; stamp $? >> $OUT/ops.txt
for run in 1 2; do
  for rp in 2 4; do
    echo "=== run $run ET_ROPE_PIECES=$rp" >> $OUT/ops.txt
    ET_NVRTC_OPTIONS="-DET_ROPE_PIECES=$rp" timeout 60 $G/bin/ops_bench --only rope >> $OUT/ops.txt 2>&1; stamp $? >> $OUT/ops.txt
  done
done
