#!/bin/bash
# session 11, call 4: the fp8 GEMV's elementwise-accumulating step ('ew') against today's step and swap-AB; GPU tests
export PYTHONUNBUFFERED=1
T0=$(date +%s)
mkdir -p $OUT/r
python3 -m pip install --no-deps --no-build-isolation . -q > $OUT/r/pip.txt 2>&1 || { echo "pip failed"; cat $OUT/r/pip.txt; exit 1; }
Q="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active"
nvidia-smi --query-gpu=$Q --format=csv -lms 250 > $OUT/r/clocks.csv 2>&1 &
CLK=$!
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.limit --format=csv
  python3 -c "import torch,triton,sys;print('torch',torch.__version__,'cuda',torch.version.cuda,'triton',triton.__version__,'python',sys.version.split()[0])"; } > $OUT/r/env.txt 2>&1
(cd /tmp && timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider $OLDPWD/tests/test_kernels_quant_gemv.py > $OUT/r/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $OUT/r/pytest_gpu.txt)
tail -2 $OUT/r/pytest_gpu.txt; echo "tests done $(( $(date +%s) - T0 )) s" | tee -a $OUT/r/env.txt
K="wmtp_fp8_block_gemv,wmtp_fp8_block_gemv[ew],wmtp_fp8_block_swap[pre]"
echo "bench start $(date -u +%T)" >> $OUT/r/env.txt
timeout 330 python3 -m wmtp.measure.scripts.quant_sw --out $OUT/r/bench --procs 0 --budget-s 280 --kernels "$K" > $OUT/r/bench_log.txt 2>&1; echo "bench rc=$? $(( $(date +%s) - T0 )) s" | tee -a $OUT/r/env.txt
echo "bench end $(date -u +%T)" >> $OUT/r/env.txt
kill $CLK
grep -v "check " $OUT/r/bench_log.txt | tail -4
date -u +%FT%TZ >> $OUT/r/env.txt
tar -C $OUT -czf $OUT/s11_fp8ew.tgz r && rm -rf $OUT/r
ls -la $OUT
