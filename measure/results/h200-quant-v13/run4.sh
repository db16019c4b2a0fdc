#!/bin/bash
# Session 25, device call 4 (issue 17): fp8 path='auto' after the swap-AB one-wave plan (SWAP_CTAS = 2, fit), the fit input, beside
# the plan before by name ([pre-c4]) and torch's per-tensor / rowwise _scaled_mm, on the 15 dense shapes at M = 1..64; GPU tests.
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
(cd tests && for a in "128 16 4"; do timeout -k 5 120 python3 swap_compile_probe.py $a; done) > $R/regs.jsonl 2> $R/regs.err
cat $R/regs.jsonl
(timeout -k 5 150 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_kernels_quant_swap.py tests/test_kernels_quant.py > $R/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $R/pytest_gpu.txt)
tail -3 $R/pytest_gpu.txt; echo "tests done $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
F='wmtp_fp8_block_auto,wmtp_fp8_block_swap[pre],wmtp_fp8_block_swap[pre-c4],torch_scaled_mm_rowwise,torch_scaled_mm_tensor'

timeout -k 5 200 python3 -m wmtp.measure.scripts.quant_sw --out $R/fp8 --budget-s 150 --procs 4 --kernels "$F" > $R/fp8.log 2>&1; echo "fp8 rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
kill $CLK
grep -hE "check|error" $R/fp8.log | grep -v "ok=True" | head -20; tail -n 3 $R/fp8.log
date -u +%FT%TZ >> $R/env.txt
gzip -f $R/clocks.csv
tar -C $OUT -czf $OUT/run4.tgz r && rm -rf $R
ls -la $OUT
