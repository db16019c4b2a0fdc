#!/bin/bash
# Session 19, device call 3 (issue 18): the fp8 ws kernel with tiles of twice the keys (64 at head dim 256, 128 at 128: two fp8 stages), checked and timed
# beside the default tiles and the rows kernel's fp8 path at 1M (run 2: one tile took about 1 us whatever its bytes).
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
timeout 290 python3 measure/scripts/ws_fp8_bench.py --out $R/bench --deadline-s 260 --ds 1,2,5,8 --impls ws8,ws8-bn64,ws8-bn128,rows8 > $R/bench.log 2>&1; echo "bench rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
kill $CLK
grep -E "check|FAILED|rror|deadline" $R/bench.log | grep -v ": ok " | head -20; grep -c ": ok " $R/bench.log; grep -v "^check" $R/bench.log | tail -90
date -u +%FT%TZ >> $R/env.txt
gzip -f $R/clocks.csv $R/bench/*.csv
tar -C $OUT -czf $OUT/run3.tgz r && rm -rf $R
ls -la $OUT
