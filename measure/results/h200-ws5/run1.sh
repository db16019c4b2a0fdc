#!/bin/bash
# Session 26, device call 1 (issue 18): Q in registers for the ws kernel's consumers (q_regs; head dim <= 128, one or
# two consumer partitions): the sm_90 build's registers / MMA forms under Triton 3.6, GPU tests, checks against fp64,
# then nem (the 16-head group at head dim 128) verify at 1M (B = 1, d = 1..8; B = 4, d = 5, 8) and decode (64K,
# 4096 keys, 1M B = 16) beside the serial default.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
R=$OUT/r; mkdir -p $R/time
python3 -m pip install --no-deps --no-build-isolation -e . -q > $R/pip.txt 2>&1 || { echo "pip failed"; cat $R/pip.txt; exit 1; }
export TRITON_CACHE_DIR=$PWD/.tcache; mkdir -p $TRITON_CACHE_DIR
Q="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active"
nvidia-smi --query-gpu=$Q --format=csv > /dev/null 2>&1 || Q="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active"
nvidia-smi --query-gpu=$Q --format=csv -lms 250 > $R/clocks.csv 2>&1 &
CLK=$!
{ date -u +%FT%TZ; echo "commit $WMTP_GIT_SHA"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.limit --format=csv
  python3 -c "import torch,triton,sys;print('torch',torch.__version__,'cuda',torch.version.cuda,'triton',triton.__version__,'python',sys.version.split()[0])"; } > $R/env.txt 2>&1
cat $R/env.txt
(cd tests && for a in "112 128 0 2 128 0 0 0 0" "112 128 0 2 128 0 0 0 1" "16 128 1 1 128 0 0 0 0" "16 128 1 1 128 0 0 0 1"; do
   echo "{\"args\": \"$a\", \"probe\": $(timeout -k 5 120 python3 ws_compile_probe.py $a 2>/dev/null | tail -1)}"; done) > $R/regs.jsonl 2> $R/regs.err
cat $R/regs.jsonl
B=measure/scripts/paged_ws_bench.py
timeout -k 5 100 python3 $B --out $R/time --phase check --models nem --ds 1,2,5,8 --variants ws,ws-qreg --deadline-s 90 > $R/time/check.log 2>&1
echo "check rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
for spec in "1,2,4,5,6,7,8 1 110" "5,8 4 50"; do
  set -- $spec
  timeout -k 5 $3 python3 $B --out $R/time --phase time --models nem --ds $1 --batches $2 --variants ws,ws-qreg --deadline-s $(( $3 - 10 )) > $R/time/nem-b$2.log 2>&1
  echo "time nem B=$2 rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
done
timeout -k 5 70 python3 $B --out $R/time --phase decode --models nem --variants ws,ws-qreg --deadline-s 60 > $R/time/decode.log 2>&1
echo "decode rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
(timeout -k 5 150 python3 -m pytest -q -n 4 -p no:cacheprovider tests/test_kernels_ws.py -k "q_regs or q_in_registers" > $R/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $R/pytest_gpu.txt)
tail -3 $R/pytest_gpu.txt; echo "tests done $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
kill $CLK
grep -h "ms$" $R/time/*.log | head -80
date -u +%FT%TZ >> $R/env.txt
gzip -f $R/clocks.csv
tar -C $OUT -czf $OUT/run1.tgz r && rm -rf $R
ls -la $OUT
