#!/bin/bash
# session 42, call D (call C's machine, warm; the pack extracted again): the walk A/B in the
# other order (0 then 1), then llama-3.2-1b B = 32 and 64, static, with the LM head split.
G=.gpu; tar xJf $G/pack.tar.xz -C $G; export ET_CACHE_DIR=/tmp/et-cache CUDA_CACHE_PATH=/tmp/nv-cache
for v in 0 1; do ET_NVRTC_OPTIONS="-DET_DYNAMIC_WALK_OUT_OF_LINE=$v" timeout 60 $G/bin/llama_bench --configs llama-3.2-1b --batch 1,8 --kv 1024 --schedules dynamic --no-first-token --steps 20 --warmup 3 > $OUT/walk2-$v.txt 2>&1; echo "rc $?" >> $OUT/walk2-$v.txt; done
timeout 110 $G/bin/llama_bench --configs llama-3.2-1b --batch 32,64 --kv 1024 --schedules static --no-first-token --steps 20 --warmup 3 > $OUT/static-1b-32-64.txt 2>&1; echo "rc $?" >> $OUT/static-1b-32-64.txt
