#!/bin/bash
# session 43, call G: the GPU tests of the batch-1 GEMV change: the GEMV family (batch 1 to
# 64, K = 4104 with its tail pieces, rows that cannot take 16-byte loads, both schedules),
# the prefetched chain (rows read from the arena), and llama-3.2-1b's steps against the CPU.
G=.gpu
[ -x $G/bin/llama_bench ] || tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "$2 rc $1 $(( $(date +%s) - t0 ))s"; }
E=$OUT/env.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $E 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
timeout 170 $G/tests/gpu_ops-* --include-ignored --test-threads=1 gemv_family > $OUT/test-gpu_ops.txt 2>&1; stamp $? gpu_ops >> $E
timeout 60 $G/tests/prefetch-* --include-ignored --test-threads=1 > $OUT/test-prefetch.txt 2>&1; stamp $? prefetch >> $E
timeout 90 $G/tests/gpu-llama --include-ignored --test-threads=1 steps_match > $OUT/test-llama.txt 2>&1; stamp $? llama >> $E
grep -h "^test \|test result" $OUT/test-*.txt >> $E
