#!/bin/bash
# Session 20, device call 2: which kernel should run fp8-KV verifies at B > 1 and at d = 9? run1's sweep (rows kernel
# at B > 1) had fp8 verifies 1.07-1.98x slower than bf16 ones. ws8 / rows8 / ws16 (bf16) side by side, checked first.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
R=$OUT/r; mkdir -p $R
python3 -m pip install --no-deps --no-build-isolation -e . -q > $R/pip.txt 2>&1 || { echo "pip failed"; cat $R/pip.txt; exit 1; }
export TRITON_CACHE_DIR=$PWD/.tcache; mkdir -p $TRITON_CACHE_DIR
Q="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active"
nvidia-smi --query-gpu=$Q --format=csv > /dev/null 2>&1 || Q="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active"
nvidia-smi --query-gpu=$Q --format=csv -lms 250 > $R/clocks.csv 2>&1 &
CLK=$!
{ date -u +%FT%TZ; echo "commit $WMTP_GIT_SHA"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.limit --format=csv
  python3 -c "import torch,triton,sys;print('torch',torch.__version__,'cuda',torch.version.cuda,'triton',triton.__version__,'python',sys.version.split()[0])"; } > $R/env.txt 2>&1
cat $R/env.txt
timeout 260 python3 measure/scripts/ws_fp8_bench.py --out $R/b1m --ctx 1048576 --ds 5,7,9 --batches 2,4,8 --decode-batch 0 --impls ws8,rows8,ws16 --deadline-s 230 > $R/b1m.log 2>&1; echo "1M rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
timeout 200 python3 measure/scripts/ws_fp8_bench.py --out $R/b64k --ctx 65536 --ds 2,7,9 --batches 1,2,4,8 --decode-batch 0 --impls ws8,rows8,ws16 --deadline-s 170 > $R/b64k.log 2>&1; echo "64K rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
kill $CLK
grep -c ": ok " $R/b1m.log; grep -E "FAILED|deadline" $R/b1m.log $R/b64k.log | head; grep -v "^check" $R/b1m.log | tail -85; grep -v "^check" $R/b64k.log | tail -110
date -u +%FT%TZ >> $R/env.txt
gzip -f $R/clocks.csv $R/b1m/*.csv $R/b64k/*.csv
tar -C $OUT -czf $OUT/run2.tgz r && rm -rf $R
