#!/bin/bash
# Session 23, device call 3 (issue 17): the grouped experts at 1 token, fairly (variants with cached split-K counters):
# path=auto (4 warps at 1 token) against path=auto with one warp from 1 token ([w1-all]) and the named plans,
# on the 6 MoE shapes at 1..16 tokens.
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
(timeout 100 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_kernels_quant_mma_i4.py -k moe > $R/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $R/pytest_gpu.txt)
tail -3 $R/pytest_gpu.txt; echo "tests done $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
D='wmtp_int4_moe_auto,wmtp_int4_moe_auto[w1-all],wmtp_int4_moe_mma[fma-w4-c8],wmtp_int4_moe_mma[fma-w1-c16],wmtp_int4_moe_mma[fma-w1-c8]'
timeout 400 python3 -m wmtp.measure.scripts.quant_i4mma --out $R/mma --budget-s 300 --procs 8 --kernels "$D" > $R/mma.log 2>&1; echo "mma rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
kill $CLK
grep -E "check|error" $R/mma.log | grep -v "ok=True" | head -20; tail -5 $R/mma.log
date -u +%FT%TZ >> $R/env.txt
gzip -f $R/clocks.csv
tar -C $OUT -czf $OUT/run3.tgz r && rm -rf $R
ls -la $OUT
