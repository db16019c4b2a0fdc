#!/bin/bash
# Session 18, device call 2 (issue 18): the adopted merge (v0 = before) and the producer's page-table lookahead
# (pf1 / pf2) at B = 1, 4, 16; then the GPU tests of the attention kernels with the new defaults.
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
timeout 330 python3 measure/scripts/merge_bench.py --out $R/merge --deadline-s 290 --variants v0,default,nopdl,pf1,pf2 --batch-cases 4:1048576,16:1048576 > $R/merge.log 2>&1; echo "merge rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
kill $CLK
grep -E "check|FAILED|error|deadline" $R/merge.log | grep -v ": ok " | head -20; tail -3 $R/merge.log
(timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_kernels_ws.py tests/test_kernel_merge.py tests/test_kernel_sets.py tests/test_kernel_plan.py tests/test_kernels.py > $R/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $R/pytest_gpu.txt)
tail -3 $R/pytest_gpu.txt; echo "tests done $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
date -u +%FT%TZ >> $R/env.txt
gzip -f $R/clocks.csv $R/merge/*.csv
tar -C $OUT -czf $OUT/run2.tgz r && rm -rf $R
ls -la $OUT
