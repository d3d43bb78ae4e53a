#!/bin/bash
# session 34, call 2: the code after run 42's decisions (RMSNorm back to run 41's second
# pass, RoPE with 2 pieces in flight by default): gpu_ops' norm and blocked-RoPE tests,
# ops_bench bw/rope/norm, the 1b steps at B = 32 and 64 (norm tasks of one row). Packed
# with scripts/pack-gpu -p et-device -p et-benches, trimmed to gpu_ops, ops_bench and
# llama_bench, tarred.
G=.gpu
tar xJf $G/pack.tar.xz -C $G
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/tests.txt 2>&1
export ET_CACHE_DIR=/tmp/et-cache
t0=$(date +%s)
stamp() { echo "rc $1 $(( $(date +%s) - t0 ))s"; }
for t in embedding_norms rope_and_kv_append_over_blocks; do
  echo "=== gpu_ops $t" >> $OUT/tests.txt
  timeout 200 $G/tests/gpu_ops-* --include-ignored --test-threads=1 $t >> $OUT/tests.txt 2>&1; stamp $? >> $OUT/tests.txt
done
timeout 150 $G/bin/ops_bench --only bw,rope,norm > $OUT/ops.txt 2>&1; stamp $? >> $OUT/ops.txt
timeout 150 $G/bin/llama_bench --configs llama-3.2-1b --batch 32,64 --kv 1024 --schedules static --no-first-token --steps 30 > $OUT/steps.txt 2>&1; stamp $? >> $OUT/steps.txt
