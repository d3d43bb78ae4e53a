#!/bin/bash
# session 35, call 3: the prefetched GEMV chain, 4096 wide, in 128 tasks of 32 rows a step
# (partial prefetch) beside 256 of 16; the batch-1 GEMVs on this card. Packed by hand: the
# ops_bench binary only.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
export ET_CACHE_DIR=/tmp/et-cache
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
for run in 1 2; do
  echo "=== run $run" >> $OUT/ops.txt
  timeout 120 $G/bin/ops_bench --only bw,chain >> $OUT/ops.txt 2>&1; stamp $? >> $OUT/ops.txt
done
timeout 200 $G/bin/ops_bench --only bw,gemv --batches 1 >> $OUT/ops.txt 2>&1; stamp $? >> $OUT/ops.txt
