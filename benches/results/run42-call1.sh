#!/bin/bash
# session 32, call 1: GPU tests of the blocked RoPE + append (gpu_ops: rope over blocks of
# sequences, and the attention kernels that rope one sequence a task); ops_bench rope
# (both resident forms, standalone B = 1 and 16) with 4 pieces in flight (the default)
# against 2 and 8 (ET_ROPE_PIECES), and the copy bandwidth; RMSNorm's second pass from
# registers (session 33) against a re-read, at 8 and 16 pieces, and in the 1b steps at
# B = 32 and 64 (norm tasks of one row); then the other et-device GPU tests. Packed with
# scripts/pack-gpu -p et-device -p llama -p et-benches, trimmed, tarred.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/tests.txt 2>&1
export ET_CACHE_DIR=/tmp/et-cache
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
tests() {
  for p in "$@"; do
    for t in $G/tests/$p-*; do
      echo "=== $(basename $t)" >> $OUT/tests.txt
      timeout 300 $t --include-ignored --test-threads=1 >> $OUT/tests.txt 2>&1; stamp $? >> $OUT/tests.txt
    done
  done
}
tests gpu_ops
echo "=== gpu_ops with ET_NVRTC_OPTIONS=-DET_NORM_KEEP" >> $OUT/tests.txt
ET_NVRTC_OPTIONS=-DET_NORM_KEEP timeout 300 $G/tests/gpu_ops-* --include-ignored --test-threads=1 embedding_norms >> $OUT/tests.txt 2>&1; stamp $? >> $OUT/tests.txt
timeout 60 $G/bin/ops_bench --only bw > $OUT/rope.txt 2>&1; stamp $? >> $OUT/rope.txt
for v in 4 2 8; do
  echo "=== ET_ROPE_PIECES=$v" >> $OUT/rope.txt
  ET_NVRTC_OPTIONS=-DET_ROPE_PIECES=$v timeout 120 $G/bin/ops_bench --only rope >> $OUT/rope.txt 2>&1; stamp $? >> $OUT/rope.txt
done
for v in "" "-DET_NORM_KEEP" "-DET_NORM_PIECES=16 -DET_NORM_KEEP" "-DET_NORM_PIECES=16"; do
  echo "=== norm ET_NVRTC_OPTIONS='$v'" >> $OUT/norm.txt
  ET_NVRTC_OPTIONS="$v" timeout 90 $G/bin/ops_bench --only norm >> $OUT/norm.txt 2>&1; stamp $? >> $OUT/norm.txt
done
for v in "" "-DET_NORM_KEEP"; do
  echo "=== steps ET_NVRTC_OPTIONS='$v'" >> $OUT/steps.txt
  ET_NVRTC_OPTIONS="$v" timeout 120 $G/bin/llama_bench --configs llama-3.2-1b --batch 32,64 --kv 1024 --schedules static --no-first-token --steps 30 >> $OUT/steps.txt 2>&1; stamp $? >> $OUT/steps.txt
done
tests gpu gpu_dynamic conditional_producers prefetch symbolic_extents gpu_copies gpu_fault
