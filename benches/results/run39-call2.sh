#!/bin/bash
# session 29: the GPU tests of 04a5baa + run38-abort-record.diff + run39-gemv-consume-record.diff
# + the prologue changes (ET_NORM_FIRST_PIECE, ET_RESIDUAL_PREFETCH, ET_PROLOGUE_WARM_KB, on
# by default): the GPU tests (gpu_ops: its GEMV family only), the Hugging Face peer on the
# GPU, the prefetch chain
G=.gpu
tar xJf $G/pack.tar.xz -C $G
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
export ET_CACHE_DIR=/tmp/et-cache
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
for t in $G/tests/*; do
  case $(basename $t) in gpu_ops-*) f=gemv_family ;; *) f= ;; esac
  echo "=== $(basename $t) $f" >> $OUT/tests.txt
  timeout 200 $t --include-ignored --test-threads=1 $f >> $OUT/tests.txt 2>&1; stamp $? >> $OUT/tests.txt
done
python3 -c "import numpy; print('numpy', numpy.__version__)" > $OUT/hf-peer.txt 2>&1
timeout 150 python3 examples/llama/peer/hf_peer.py --gpu --shapes all --llama $G/bin/llama >> $OUT/hf-peer.txt 2>&1; stamp $? >> $OUT/hf-peer.txt
timeout 60 $G/bin/ops_bench --only chain > $OUT/chain.txt 2>&1; stamp $? >> $OUT/chain.txt
