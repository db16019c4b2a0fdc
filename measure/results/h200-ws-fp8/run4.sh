#!/bin/bash
# Session 19, device call 4 (issue 18): the final tree (fp8 tiles of 64 keys at head dim 256, 128 below, by default; no page-table lookahead)
# checked and timed beside 32- and 64-key tiles (run 1-3's defaults: 32 at head dim 256, 64 at 128), the rows kernel's fp8 path and the bf16 ws kernel; then the GPU tests.
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
timeout 240 python3 measure/scripts/ws_fp8_bench.py --out $R/bench --ds 1,2,5,8 --deadline-s 200 --impls ws8,ws8-bn32,ws8-bn64,rows8,ws16 > $R/bench.log 2>&1; echo "bench rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
kill $CLK
(timeout 150 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_kernels_ws_fp8.py tests/test_kernels_ws.py > $R/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $R/pytest_gpu.txt)
grep -E "FAILED|Error" $R/pytest_gpu.txt | head -10; tail -3 $R/pytest_gpu.txt; echo "tests done $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
grep -E "check|FAILED|rror|deadline" $R/bench.log | grep -v ": ok " | head -20; grep -c ": ok " $R/bench.log; grep -v "^check" $R/bench.log | tail -90
date -u +%FT%TZ >> $R/env.txt
gzip -f $R/clocks.csv $R/bench/*.csv
tar -C $OUT -czf $OUT/run4.tgz r && rm -rf $R
ls -la $OUT
