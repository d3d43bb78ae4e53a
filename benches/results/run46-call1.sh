#!/bin/bash
# session 38, call 1: the GPU tests after the GEMV's wgmma path compiled alone (and the
# et-device launch path of session 37, whose call 4 never ran), with the cold NVRTC time
# of every Llama stamp, new (default) and old (-DET_GEMV_WG_ONLY=0), run beside them.
# Packed with scripts/pack-gpu -p et-device -p llama -p et-benches (untrimmed).
G=.gpu
tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $OUT/gpu.txt 2>&1; nproc >> $OUT/gpu.txt
# cold NVRTC per stamp, NVRTC's own cache off, both variants at once (16 host cores)
( CUDA_CACHE_DISABLE=1 timeout 400 $G/tests/nvrtc-* --ignored --nocapture > $OUT/nvrtc-new.txt 2>&1; stamp $? >> $OUT/nvrtc-new.txt ) &
( CUDA_CACHE_DISABLE=1 ET_NVRTC_OPTIONS=-DET_GEMV_WG_ONLY=0 timeout 400 $G/tests/nvrtc-* --ignored --nocapture > $OUT/nvrtc-old.txt 2>&1; stamp $? >> $OUT/nvrtc-old.txt ) &
export ET_CACHE_DIR=/tmp/et-cache
for t in gpu_ops gpu-786e prefetch gpu_dynamic conditional_producers gpu_copies gpu_fault symbolic_extents decode_extents_compile nvrtc_errors et_device llama_baseline moe_baseline gpu-6ce; do
  f=$(ls $G/tests/$t* | head -1)
  echo "=== $f" >> $OUT/tests.txt
  timeout 240 $f --include-ignored --test-threads=1 >> $OUT/tests.txt 2>&1; stamp $? >> $OUT/tests.txt
  [ $(( $(date +%s) - t0 )) -gt 540 ] && { echo "out of time" >> $OUT/tests.txt; break; }
done
wait
