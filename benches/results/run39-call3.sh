#!/bin/bash
# session 29: the prologue changes (ET_NORM_FIRST_PIECE, ET_RESIDUAL_PREFETCH,
# ET_PROLOGUE_WARM_KB, on by default) against their off switches in one llama_bench binary
# (alternated), then one change at a time, then 1b B = 8 and 8b B = 1
G=.gpu
tar xJf $G/pack.tar.xz -C $G
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
export ET_CACHE_DIR=/tmp/et-cache
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
OFF="-DET_NORM_FIRST_PIECE=0 -DET_RESIDUAL_PREFETCH=0 -DET_PROLOGUE_WARM_KB=0"
B1="--configs llama-3.2-1b --batch 1 --kv 1024 --schedules static --no-first-token --steps 20"
for r in a b; do
  for v in on off; do
    opts=""; [ $v = off ] && opts="$OFF"
    ET_NVRTC_OPTIONS="$opts" timeout 60 $G/bin/llama_bench $B1 > $OUT/b1-$v-$r.txt 2>&1; stamp $? >> $OUT/b1-$v-$r.txt
  done
done
# one change at a time (the others off)
for one in "-DET_NORM_FIRST_PIECE=0 -DET_RESIDUAL_PREFETCH=0" "-DET_PROLOGUE_WARM_KB=0 -DET_RESIDUAL_PREFETCH=0" "-DET_NORM_FIRST_PIECE=0 -DET_PROLOGUE_WARM_KB=0" "-DET_RESIDUAL_PREFETCH=2" "-DET_PROLOGUE_WARM_KB=64"; do
  n=$(echo "$one" | tr -c 'A-Za-z0-9' '_')
  ET_NVRTC_OPTIONS="$one" timeout 60 $G/bin/llama_bench $B1 > $OUT/b1-only$n.txt 2>&1; stamp $? >> $OUT/b1-only$n.txt
done
for v in on off; do
  opts=""; [ $v = off ] && opts="$OFF"
  ET_NVRTC_OPTIONS="$opts" timeout 100 $G/bin/llama_bench --configs llama-3.2-1b --batch 8 --kv 1024 --schedules static --no-first-token --steps 20 > $OUT/b8-$v.txt 2>&1; stamp $? >> $OUT/b8-$v.txt
  ET_NVRTC_OPTIONS="$opts" timeout 120 $G/bin/llama_bench --configs llama-3.1-8b --batch 1 --kv 1024 --schedules static --no-first-token --steps 10 --warmup 2 > $OUT/8b-$v.txt 2>&1; stamp $? >> $OUT/8b-$v.txt
done
