#!/bin/bash
# session 39, call 1: the GPU tests owed by session 38 (llama_baseline and moe_baseline
# after the launches' arena slack; the MoE baseline now defines ET_CTA_THREADS), then the
# megakernel's layer trace beside the baseline's stage profile where the megakernel
# trails (1b B = 8 and 64, 8b B = 8 and 64, KV 1024, static schedule).
# Packed with scripts/pack-gpu -p et-benches.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $OUT/tests.txt 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
for t in llama_baseline moe_baseline; do
  f=$(ls $G/tests/$t-* | head -1)
  echo "=== $f" >> $OUT/tests.txt
  timeout 150 $f --include-ignored --test-threads=1 >> $OUT/tests.txt 2>&1; stamp $? >> $OUT/tests.txt
done
mkdir -p /tmp/tr
for cb in "llama-3.2-1b 8" "llama-3.2-1b 64" "llama-3.1-8b 64" "llama-3.1-8b 8"; do
  set -- $cb
  echo "=== $1 B = $2" >> $OUT/trace.txt
  timeout 150 $G/bin/llama_bench --configs $1 --batch $2 --kv 1024 --schedules static --no-first-token --steps 10 --warmup 2 \
      --trace /tmp/tr/$1-$2 --trace-layer 5 --stage-profile --stage-profile-megakernel-smem >> $OUT/trace.txt 2>&1; stamp $? >> $OUT/trace.txt
  [ $(( $(date +%s) - t0 )) -gt 520 ] && { echo "out of time" >> $OUT/trace.txt; break; }
done
cd /tmp/tr && tar cJf $OUT/traces.tar.xz . 2>/dev/null; ls -la $OUT
