#!/bin/bash
# session 36, call 1: the megakernel compiled on its own thread while the weights are made
# and uploaded (Backend::precompile, Decoder::precompile), the first launch's host time
# split (LaunchReport::host_module / host_graph), and an H100 knob sweep at 1b B = 8.
# Packed with scripts/pack-gpu -p et-device -p llama -p et-benches, trimmed.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
T=$OUT/tests.txt; L=$OUT/llama.txt; S=$OUT/sweep.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $L 2>&1
nproc >> $L; lscpu | grep "Model name" >> $L
t0=$(date +%s.%N)
el() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f} s')" $1 $(date +%s.%N); }
# 1. the GPU tests of the changed backend
for t in gpu_device gpu_dynamic conditional_producers; do
  echo "== $t" >> $T; timeout 200 $G/tests/$t --include-ignored --test-threads=1 >> $T 2>&1; echo "rc $?" >> $T
done
# 2. the llama binary, cold then from the disk cache, B = 1 and 8
for b in 1 8; do
  export ET_CACHE_DIR=/tmp/et-cache-llama-$b
  for label in cold warm; do
    echo "== llama --batch $b --tokens 8, $label cache" >> $L
    s=$(date +%s.%N); timeout 120 $G/bin/llama --batch $b --tokens 8 >> $L 2>&1; echo "rc $? wall $(el $s)" >> $L
    ls -la $ET_CACHE_DIR >> $L 2>&1
  done
done
# 3. the first-token child directly, cold then warm
for b in 1 8; do
  export ET_CACHE_DIR=/tmp/et-cache-child-$b
  for label in cold warm; do
    echo "== first-token child B = $b, $label" >> $L
    s=$(date +%s.%N); timeout 120 $G/bin/llama_bench --first-token-child llama-3.2-1b --first-token-batch $b >> $L 2>&1; echo "rc $? wall $(el $s)" >> $L
  done
done
# 4. the knob sweep at 1b B = 8 (and the B = 1 fused ring), KV 1024, static; one cache for all
export ET_CACHE_DIR=/tmp/et-cache-sweep
for opt in "" "-DET_GEMV_MMA_U=2" "-DET_GEMV_MMA_U=8" "-DET_GEMV_X_INFLIGHT=0"; do
  echo "== B = 8 ET_NVRTC_OPTIONS='$opt'" >> $S
  ET_NVRTC_OPTIONS="$opt" timeout 150 $G/bin/llama_bench --configs llama-3.2-1b --batch 8 --kv 1024 --schedules static --steps 20 --no-first-token >> $S 2>&1; echo "rc $?" >> $S
done
for opt in "" "-DET_GEMV_SIMT_RING_FUSED=1"; do
  echo "== B = 1 ET_NVRTC_OPTIONS='$opt'" >> $S
  ET_NVRTC_OPTIONS="$opt" timeout 150 $G/bin/llama_bench --configs llama-3.2-1b --batch 1 --kv 1024 --schedules static --steps 20 --no-first-token >> $S 2>&1; echo "rc $?" >> $S
done
echo "total $(el $t0)" >> $L
