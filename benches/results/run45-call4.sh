#!/bin/bash
# session 37, call 4: every et-device GPU test binary on the final code (the launch path's
# options check, Launch::new and the shape check moved in this session). Packed with
# scripts/pack-gpu -p et-device, untrimmed.
# NOT RUN in session 37: no machine was lent for it (three tries after 15:13).
G=.gpu
tar xJf $G/pack.tar.xz -C $G
timeout 560 bash $G/run.sh tests > $OUT/tests.txt 2>&1; echo "rc $?" >> $OUT/tests.txt
