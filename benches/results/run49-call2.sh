#!/bin/bash
# Run in session 41 as run 49 call 2.
# session 40 wrote it as call 3 (run 48): the LM head in two tile sizes (new, 645810a) against one size (old,
# 9a5c5ea: llama_bench_old, built from that commit's llama sources), alternated on one
# machine: call 1 ran on another H100 than run 47 and showed the GEMV groups faster while
# the head was not, so only a same-machine A/B can say what the change did.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
left() { [ $(( $(date +%s) - t0 )) -lt $1 ]; }
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/ab.txt 2>&1
mkdir -p /tmp/tr
run() { # variant config batches
  local bin=$G/bin/llama_bench; [ $1 = old ] && bin=$G/bin/llama_bench_old
  echo "=== $1 $2 B = $3" >> $OUT/ab.txt
  timeout 150 $bin --configs $2 --batch $3 --kv 1024 --schedules static --no-first-token --steps 15 --warmup 3 \
      --trace /tmp/tr/$1-$2 --trace-layer 5 >> $OUT/ab.txt 2>&1; stamp $? >> $OUT/ab.txt
}
for r in 1 2; do
  for v in old new; do left 250 && run $v llama-3.2-1b 1,8; done
done
for v in new old; do left 100 && run $v llama-3.1-8b 1,8; done
ls -la $OUT
