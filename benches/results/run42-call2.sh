#!/bin/bash
# session 34, call 2: the code after run 42's decisions (RMSNorm back to run 41's second
# pass, RoPE with 2 pieces in flight by default): gpu_ops' norm and blocked-RoPE tests,
# ops_bench bw/rope/norm (run 41 timed these norms in the 1b steps). Packed
# with scripts/pack-gpu -p et-device -p et-benches, trimmed to gpu_ops and ops_bench,
# tarred.
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
