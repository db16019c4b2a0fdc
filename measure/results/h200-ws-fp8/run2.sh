#!/bin/bash
# Session 19, device call 2 (issue 18): the fp8 ws kernel with a page-table lookahead of 1 / 2 / 3 tiles (run 1: about 1 us a tile), checked and timed
# beside the rows kernel's fp8 path and the bf16 ws kernel (lookahead 1 and 2) at 1M; then the GPU tests of the ws kernel, fp8 and bf16
# (both with lookahead cases).
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
timeout 290 python3 measure/scripts/ws_fp8_bench.py --out $R/bench --deadline-s 260 --ds 1,2,5,8,9 > $R/bench.log 2>&1; echo "bench rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
kill $CLK
grep -E "check|FAILED|rror|deadline" $R/bench.log | grep -v ": ok " | head -20; grep -c ": ok " $R/bench.log; grep -v "^check" $R/bench.log | tail -90
(timeout 170 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_kernels_ws_fp8.py tests/test_kernels_ws.py > $R/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $R/pytest_gpu.txt)
grep -E "FAILED|Error" $R/pytest_gpu.txt | head -10; tail -3 $R/pytest_gpu.txt; echo "tests done $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
date -u +%FT%TZ >> $R/env.txt
gzip -f $R/clocks.csv $R/bench/*.csv
tar -C $OUT -czf $OUT/run2.tgz r && rm -rf $R
ls -la $OUT
