#!/bin/bash
# session 27 call 3: the fused GEMVs (norm + QKV, norm + gate/up, merge + O) on the cp.async
# ring (ET_GEMV_SIMT_RING_FUSED=1) against their register loads (0, the default), 1b B = 1,
# alternated; the llama_bench binary of calls 1-2 with the value prefetch off
cd "$(dirname "$0")/../.."
G=.gpu; t0=$(date +%s)
for v in 1 0 1 0; do
  ET_NVRTC_OPTIONS="-DET_ATTN_V_PREFETCH=0 -DET_GEMV_SIMT_RING_FUSED=$v" timeout 80 $G/bin/llama_bench --configs llama-3.2-1b --batch 1 --kv 1024 --schedules static --no-first-token --steps 20 > $OUT/ring$v-$(date +%s).txt 2>&1; echo "v=$v rc $? $(( $(date +%s) - t0 ))s"
done
