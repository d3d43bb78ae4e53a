#!/bin/bash
# session 39, call 2 (as run: the device budget left room for this much only): a
# matvec_prefetch also warming in L2 the rows that do not fit its arena (up to 128 KB a
# task, ET_GEMV_L2_PREFETCH; 0 is the old code, from the same binaries; not kept, the
# change is run47-l2-warm-experiment.patch). The prefetch GPU tests, then the prefetched
# GEMV chains, new and old alternated twice.
# Packed with scripts/pack-gpu -p et-device -p et-benches at 1b93b74, trimmed to
# tests/prefetch-* and bin/ops_bench.
G=.gpu; tar xJf $G/pack.tar.xz -C $G; export ET_CACHE_DIR=/tmp/et-cache
f=$(ls $G/tests/prefetch-* | head -1); timeout 60 $f --include-ignored --test-threads=1 2>&1 | grep -E "test result|FAILED|panicked"
for v in 131072 0 131072 0; do
  echo "=== L2 $v"
  ET_NVRTC_OPTIONS=-DET_GEMV_L2_PREFETCH=$v timeout 50 $G/bin/ops_bench --only chain --quick 2>&1 | grep -iE "chain|error"
done 2>&1 | tee $OUT/chain.txt
