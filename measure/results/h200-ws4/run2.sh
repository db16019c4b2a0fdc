#!/bin/bash
# Session 24, device call 2 (issue 18): run 1's checks and GPU tests of the paired / ping-pong orders all passed,
# but its script waited on the clock logger (a bare `wait`) until the call's limit, so nothing was timed. This call
# times them: verify at 1M, B = 1 (nem d = 1..16, q122 and q35 at the d where the row blocks change) and nem at
# B = 4, beside the serial default, the default path and the rows kernel.
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
B=measure/scripts/paged_ws_bench.py
V=ws,ws-paired,ws-pp
for spec in "nem 1,2,4,5,6,7,8,9,10,12,13,16 1" "q122 1,4,5,8,9,16 1" "q35 1,8,9,16 1" "nem 5,8,9,12 4"; do
  set -- $spec
  timeout -k 5 100 python3 $B --out $R/time --phase time --models $1 --ds $2 --batches $3 --variants $V --deadline-s 85 > $R/time/$1-b$3.log 2>&1
  echo "time $1 B=$3 rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
done
kill $CLK
date -u +%FT%TZ >> $R/env.txt
gzip -f $R/clocks.csv
tar -C $OUT -czf $OUT/run2.tgz r && rm -rf $R
ls -la $OUT
