#!/bin/bash
# Session 24, device call 1 (issue 18): the ws kernel's consumer loop in the paired and ping-pong orders
# (measure/kernels/paged_ws_loop.py) beside the serial default: checks against fp64 torch per (model, order) in
# processes of their own under a timeout (a hang costs one process), the GPU tests of the new orders, then verify
# d = 1..16 at 1M, B = 1 for the orders that passed (and nem at B = 4, d = 5, 8, 9, 12).
export PYTHONUNBUFFERED=1
T0=$(date +%s)
R=$OUT/r; mkdir -p $R/chk $R/time
python3 -m pip install --no-deps --no-build-isolation -e . -q > $R/pip.txt 2>&1 || { echo "pip failed"; cat $R/pip.txt; exit 1; }
export TRITON_CACHE_DIR=$PWD/.tcache; mkdir -p $TRITON_CACHE_DIR
Q="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active"
nvidia-smi --query-gpu=$Q --format=csv > /dev/null 2>&1 || Q="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active"
nvidia-smi --query-gpu=$Q --format=csv -lms 250 > $R/clocks.csv 2>&1 &
CLK=$!
{ date -u +%FT%TZ; echo "commit $WMTP_GIT_SHA"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.limit --format=csv
  python3 -c "import torch,triton,sys;print('torch',torch.__version__,'cuda',torch.version.cuda,'triton',triton.__version__,'python',sys.version.split()[0])"; } > $R/env.txt 2>&1
cat $R/env.txt
B=measure/scripts/paged_ws_bench.py
for m in nem q122 q35; do for v in ws-paired ws-pp; do
  (timeout 170 python3 $B --out $R/chk/$m-$v --phase check --models $m --ds 1,2,5,8,9,12,13 --variants $v > $R/chk/$m-$v.log 2>&1; echo "rc=$?" >> $R/chk/$m-$v.log) &
done; done
(timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_ws.py -k "paired or pingpong" > $R/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $R/pytest_gpu.txt) &
wait
tail -2 $R/pytest_gpu.txt; grep -h "FAILED\|rc=" $R/chk/*.log | sort | uniq -c
echo "checks done $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
good() {  # the orders whose checks all passed for model $1 (and whose process ended by itself)
  for v in ws-paired ws-pp; do
    if grep -q "^rc=0" $R/chk/$1-$v.log && ! grep -q FAILED $R/chk/$1-$v.log; then printf ",%s" $v; fi
  done
}
for spec in "nem 1,2,3,4,5,6,7,8,9,10,11,12,13,14,16" "q122 1,4,5,6,8,9,12,16" "q35 1,8,9,16"; do
  set -- $spec
  V="ws$(good $1)"; echo "time $1: $V"
  timeout 150 python3 $B --out $R/time --phase time --models $1 --ds $2 --variants $V --deadline-s 130 > $R/time/$1.log 2>&1
  echo "time $1 rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
done
V="ws$(good nem)"
timeout 90 python3 $B --out $R/time --phase time --models nem --ds 5,8,9,12 --batches 4 --variants $V --deadline-s 70 > $R/time/nem-b4.log 2>&1
echo "time nem B=4 rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
kill $CLK
date -u +%FT%TZ >> $R/env.txt
gzip -f $R/clocks.csv
tar -C $OUT -czf $OUT/run1.tgz r && rm -rf $R
ls -la $OUT
