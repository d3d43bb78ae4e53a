#!/bin/bash
# session 25 call 1: where the batch-1 attention piece's time goes (clock64 probe, ncu stall sampling)
cd "$(dirname "$0")/.."
G=.gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
t0=$(date +%s)
L1="--configs llama-3.2-1b --batch 1 --kv 1024 --schedules static --no-first-token --steps 10 --warmup 2"
L8="--configs llama-3.1-8b --batch 1 --kv 1024 --schedules static --no-first-token --steps 10 --warmup 2"
P=$OUT/probe.txt
for reps in 1 2; do
  echo "== 1b reps $reps" >> $P
  ET_NVRTC_OPTIONS="-DET_ATTN_PROBE -DET_ATTN_PROBE_REPS=$reps -DET_ATTN_PROBE_START=5440" timeout 100 $G/bin/llama_bench $L1 >> $P 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $P
  echo "== 8b reps $reps" >> $P
  ET_NVRTC_OPTIONS="-DET_ATTN_PROBE -DET_ATTN_PROBE_REPS=$reps -DET_ATTN_PROBE_START=21120 -DET_ATTN_PROBE_COUNT=128" timeout 150 $G/bin/llama_bench $L8 >> $P 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $P
done
# stall reasons of the whole 1b B = 1 step, sampled per SASS instruction
timeout 240 ncu --section WarpStateStats --section SourceCounters --section LaunchStats --section Occupancy -k regex:et_main --launch-skip 3 --launch-count 1 -o $OUT/b1 \
  $G/bin/llama_bench --configs llama-3.2-1b --batch 1 --kv 1024 --schedules static --no-first-token --steps 2 --warmup 1 > $OUT/ncu-log.txt 2>&1; echo "rc $? $(( $(date +%s) - t0 ))s" >> $OUT/ncu-log.txt
timeout 60 ncu -i $OUT/b1.ncu-rep --page details > $OUT/ncu-details.txt 2>&1
timeout 120 ncu -i $OUT/b1.ncu-rep --page source --print-source sass --csv 2>&1 | gzip > $OUT/ncu-source.csv.gz; echo "rc $?" >> $OUT/ncu-log.txt
gzip $OUT/b1.ncu-rep
ls -la $OUT >> $OUT/ncu-log.txt
