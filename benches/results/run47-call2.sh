#!/bin/bash
# session 39, call 2: a matvec_prefetch also warms in L2 the rows that do not fit its arena
# (up to 128 KB a task, ET_GEMV_L2_PREFETCH; 0 is the old code, from the same binaries).
# The GPU tests of the prefetch and the decode ops first, then the prefetched GEMV chain and
# the batch-1 GEMVs' prefetch column, new and old alternated.
# Packed with scripts/pack-gpu -p et-device -p et-benches, trimmed to the binaries below.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
export ET_CACHE_DIR=/tmp/et-cache
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/tests.txt 2>&1
for t in prefetch gpu_ops; do
  f=$(ls $G/tests/$t-* | head -1)
  echo "=== $f" >> $OUT/tests.txt
  timeout 120 $f --include-ignored --test-threads=1 >> $OUT/tests.txt 2>&1; stamp $? >> $OUT/tests.txt
done
for run in 1 2; do
  for v in 131072 0; do
    echo "=== run $run ET_GEMV_L2_PREFETCH=$v" >> $OUT/chain.txt
    ET_NVRTC_OPTIONS=-DET_GEMV_L2_PREFETCH=$v timeout 100 $G/bin/ops_bench --only bw,chain >> $OUT/chain.txt 2>&1; stamp $? >> $OUT/chain.txt
  done
done
for v in 131072 0; do
  [ $(( $(date +%s) - t0 )) -gt 400 ] && { echo "out of time" >> $OUT/gemv.txt; break; }
  echo "=== ET_GEMV_L2_PREFETCH=$v" >> $OUT/gemv.txt
  ET_NVRTC_OPTIONS=-DET_GEMV_L2_PREFETCH=$v timeout 90 $G/bin/ops_bench --only gemv --batches 1 >> $OUT/gemv.txt 2>&1; stamp $? >> $OUT/gemv.txt
done
