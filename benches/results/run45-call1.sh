#!/bin/bash
# session 37, call 1: the H200 re-measurement of main (842dea0) at 1b, and the llama binary's
# compile beside the weights on the GPU (842dea0 moved that scaffold into the library).
# Packed with scripts/pack-gpu -p et-device -p llama -p et-benches, trimmed.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
L=$OUT/llama.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $L 2>&1
nproc >> $L; lscpu | grep "Model name" >> $L
# 0. the GPU tests of compiling and preparing ahead (Backend::prepare is new)
timeout 120 $G/tests/gpu_device --include-ignored --test-threads=1 prepare precompile > $OUT/tests.txt 2>&1; stamp $? >> $OUT/tests.txt
timeout 120 $G/tests/gpu_llama --include-ignored --test-threads=1 beside >> $OUT/tests.txt 2>&1; stamp $? >> $OUT/tests.txt
# 1. the llama binary, both caches fresh, then warm: the first step should resolve no graph
export ET_CACHE_DIR=/tmp/et-cache-llama CUDA_CACHE_PATH=/tmp/nv-cache-llama
for label in cold warm; do
  echo "== llama --batch 1 --tokens 6, $label" >> $L
  timeout 90 $G/bin/llama --batch 1 --tokens 6 >> $L 2>&1; stamp $? >> $L
done
# 1b. llama_bench's first-token child at B = 8, both caches fresh, then warm
export ET_CACHE_DIR=/tmp/et-cache-child CUDA_CACHE_PATH=/tmp/nv-cache-child
for label in cold warm; do
  echo "== first-token child B = 8, $label" >> $L
  timeout 90 $G/bin/llama_bench --first-token-child llama-3.2-1b --first-token-batch 8 >> $L 2>&1; stamp $? >> $L
done
# 2. the 1b steps at every stamp, KV 1024, static; then the PyTorch anchors on this card
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
timeout 150 $G/bin/llama_bench --configs llama-3.2-1b --batch 1,8,32,64 --kv 1024 --schedules static --no-first-token --steps 20 > $OUT/mk-1b.txt 2>&1; stamp $? >> $OUT/mk-1b.txt
timeout 300 python3 $G/torch_decode.py --model llama-3.2-1b --batch 1,8 --kv 1024 --compile > $OUT/torch-1b.txt 2>&1; stamp $? >> $OUT/torch-1b.txt
# 3. the step with NVRTC's fast-compile levels (run 44 section 4 measured their compile
#    time here, 3.0-3.1 s against 4.8 s at 1b B = 32, but not the step)
for lvl in mid min; do
  ET_NVRTC_OPTIONS="--Ofast-compile=$lvl" timeout 120 $G/bin/llama_bench --configs llama-3.2-1b --batch 1,64 --kv 1024 --schedules static --no-first-token --steps 20 > $OUT/mk-1b-ofast-$lvl.txt 2>&1; stamp $? >> $OUT/mk-1b-ofast-$lvl.txt
done
