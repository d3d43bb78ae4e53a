#!/bin/bash
# session 36, call 3: after the review (host_module zero on a hit, fault check before
# NVRTC, the batch checked before the weights): et-device's GPU tests and the llama binary.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
T=$OUT/tests.txt
timeout 200 $G/tests/gpu_device --include-ignored --test-threads=1 > $T 2>&1; echo "rc $?" >> $T
export ET_CACHE_DIR=/tmp/et-cache-call3 CUDA_CACHE_PATH=/tmp/nv-cache-call3
for label in cold warm; do
  echo "== llama --batch 3 --tokens 6, $label" >> $T
  timeout 120 $G/bin/llama --batch 3 --tokens 6 >> $T 2>&1; echo "rc $?" >> $T
done
timeout 60 $G/bin/llama --batch 65 >> $T 2>&1; echo "rc $? (batch 65: an error before the weights)" >> $T
