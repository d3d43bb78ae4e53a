#!/bin/bash
# session 46, call A. 1) the GPU run owed by run 53: a986aa1 (the ready queue's memset
# queued after each dynamic launch) against main's 4316960 (memset before it): et-device
# gpu and gpu_dynamic, then llama-3.2-1b B = 1 and 8, KV 1024, both schedules, new and old
# alternated twice. 2) the fused GEMVs copying their weight rows into the arena while
# their prologue runs (-DET_GEMV_FUSED_COPIES=1, off by default; one binary, new/):
# gpu_ops' GEMV family and llama's steps against the CPU with the copies on, then 1b B = 1
# and 8 and 8b B = 1, static, copies on and off, alternated. Pack (development machine):
# new/ = llama_bench, et-device's gpu (as gpu-et-device), gpu_dynamic and gpu_ops, llama's
# gpu (as gpu-llama), all of one commit; main's llama_bench of 4316960 as .gpu/llama_bench (old).
G=.gpu
t0=$(date +%s)
tar xJf $G/run54.tar.xz -C $G
stamp() { echo "$2 rc $1 $(( $(date +%s) - t0 ))s"; }
E=$OUT/env.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $E 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
left() { echo $(( $1 - ($(date +%s) - t0) )); }
for t in gpu-et-device gpu_dynamic; do
  timeout $(left 60) $G/new/$t --include-ignored --test-threads=1 > $OUT/tests-new-$t.txt 2>&1; stamp $? "new $t" >> $E
done
export ET_NVRTC_OPTIONS="-DET_GEMV_FUSED_COPIES=1"
timeout $(left 170) $G/new/gpu_ops --include-ignored --test-threads=1 gemv_family > $OUT/tests-copies-gpu_ops.txt 2>&1; stamp $? "copies gpu_ops" >> $E
timeout $(left 240) $G/new/gpu-llama --include-ignored --test-threads=1 steps_match > $OUT/tests-copies-llama.txt 2>&1; stamp $? "copies llama" >> $E
unset ET_NVRTC_OPTIONS
grep -h "^test result\|FAILED\|panicked" $OUT/tests-*.txt >> $E
queue() { # variant run
  b=$G/new/llama_bench; [ $1 = old ] && b=$G/llama_bench
  echo "=== queue $1 run $2" >> $OUT/bench-queue.txt
  timeout $(left $3) $b --configs llama-3.2-1b --batch 1,8 --kv 1024 --steps 20 --warmup 3 --no-first-token \
      --schedules static,dynamic --json $OUT/queue-$1-$2.jsonl >> $OUT/bench-queue.txt 2>&1; stamp $? "queue $1 $2" >> $E
}
copies() { # on|off run config batches limit
  o=""; [ $1 = on ] && o="-DET_GEMV_FUSED_COPIES=1"
  echo "=== copies $1 run $2 $3" >> $OUT/bench-copies.txt
  ET_NVRTC_OPTIONS="$o" timeout $(left $5) $G/new/llama_bench --configs $3 --batch $4 --kv 1024 --steps 20 --warmup 3 \
      --no-first-token --schedules static --json $OUT/copies-$1-$2-$3.jsonl >> $OUT/bench-copies.txt 2>&1; stamp $? "copies $1 $2 $3" >> $E
}
queue new 1 310
queue old 1 340
copies on 1 llama-3.2-1b 1,8 370
copies off 1 llama-3.2-1b 1,8 400
queue new 2 425
queue old 2 450
copies on 2 llama-3.2-1b 1,8 475
copies off 2 llama-3.2-1b 1,8 500
copies on 1 llama-3.1-8b 1 545
copies off 1 llama-3.1-8b 1 590
