#!/bin/bash
# session 47, call B. The signals of a task's last statement flushed by the persistent
# loop (one inlined consumer walk in the dynamic module instead of one a group): its GPU
# tests (et-device gpu, gpu_dynamic, conditional_producers, symbolic_extents; the moe
# layer with both schedules against its reference), then llama-3.2-1b B = 1 and 8 and
# llama-3.1-8b B = 1, KV 1024, both schedules, new (r55/) against c215a25 (r54's new/),
# alternated. Pack (development machine): r55/ = llama_bench, et-device's gpu (as
# gpu-et-device), gpu_dynamic, conditional_producers, symbolic_extents, moe, one commit.
G=.gpu
t0=$(date +%s)
tar xJf $G/run55.tar.xz -C $G && mkdir -p $G/r54 && tar xJf $G/run54.tar.xz -C $G/r54
stamp() { echo "$2 rc $1 $(( $(date +%s) - t0 ))s"; }
E=$OUT/env.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $E 2>&1
export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
left() { echo $(( $1 - ($(date +%s) - t0) )); }
T=$OUT/tests.txt
for t in gpu_dynamic conditional_producers symbolic_extents gpu-et-device; do
  echo "=== $t" >> $T
  timeout $(left 120) $G/r55/$t --include-ignored --test-threads=1 >> $T 2>&1; stamp $? "test $t" >> $E
done
for s in dynamic static; do
  echo "=== moe $s" >> $T
  timeout $(left 160) $G/r55/moe --tokens 16 --skew 1 --schedule $s --iters 3 >> $T 2>&1; stamp $? "moe $s" >> $E
done
grep -h "^test result\|FAILED\|panicked\|check: OK" $T >> $E
bench() { # variant run config limit
  b=$G/r55/llama_bench; [ $1 = old ] && b=$G/r54/new/llama_bench
  echo "=== $1 run $2 $3" >> $OUT/bench.txt
  timeout $(left $4) $b --configs $3 --batch $5 --kv 1024 --steps 20 --warmup 3 --no-first-token \
      --schedules static,dynamic >> $OUT/bench.txt 2>&1; stamp $? "$1 $2 $3" >> $E
}
bench new 1 llama-3.2-1b 230 1,8
bench old 1 llama-3.2-1b 290 1,8
bench new 2 llama-3.2-1b 310 1,8
bench old 2 llama-3.2-1b 330 1,8
bench new 1 llama-3.1-8b 390 1
bench old 1 llama-3.1-8b 440 1
grep -E "^=== |megakernel (static|dynamic) +[0-9]|baseline graph +[0-9]" $OUT/bench.txt >> $E
