#!/bin/bash
# Session 25, device call 1 (issue 17): the 4-bit tensor-core GEMM with a register prefetch of the next group (-pf) and a
# one-wave split-K plan (cNf), against path='auto' and its plans by name, on every dense and MoE shape at M = 1..16; fp8
# path='auto' (GEMV / swap-AB / tiles by M) beside the tensor-core kernel the shipped fit prices; GPU tests first.
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
(timeout -k 5 120 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_kernels_quant_mma_i4.py tests/test_quant_fit_regimes.py > $R/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $R/pytest_gpu.txt)
tail -3 $R/pytest_gpu.txt; echo "tests done $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
D='wmtp_int4_group_auto,wmtp_int4_mma[sub-w4-c8],wmtp_int4_mma[fma-w1-c16],wmtp_int4_mma[fma-w1-c16-pf],wmtp_int4_mma[sub-w4-c8-pf]'
D="$D,wmtp_int4_mma[fma-w4-c8-pf],wmtp_int4_mma[fma-w4-c10f-pf],wmtp_int4_mma[sub-w4-c9f],wmtp_int4_mma[sub-w4-c9f-pf]"
D="$D,wmtp_int4_mma[fma-w2-c16-pf],wmtp_int4_mma[fma-w1-c16f-pf],wmtp_int4_mma[fma-w1-c24f-pf],torch_int4pack_mm,torch_bf16"
D="$D,wmtp_int4_moe_auto,wmtp_int4_moe_mma[fma-w1-c16],wmtp_int4_moe_mma[fma-w1-c16-pf],wmtp_int4_moe_mma[fma-w1-c16f-pf]"
D="$D,wmtp_int4_moe_mma[fma-w4-c8-pf]"
timeout -k 5 240 python3 -m wmtp.measure.scripts.quant_i4mma --out $R/mma --budget-s 200 --procs 8 --kernels "$D" > $R/mma.log 2>&1; echo "mma rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
F='wmtp_fp8_block,wmtp_fp8_block_auto,wmtp_fp8_block_gemv,wmtp_fp8_block_swap[pre],torch_scaled_mm_rowwise,torch_bf16'
timeout -k 5 200 python3 -m wmtp.measure.scripts.quant_sw --out $R/fp8 --budget-s 150 --procs 8 --kernels "$F" > $R/fp8.log 2>&1; echo "fp8 rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
kill $CLK
grep -hE "check|error" $R/mma.log $R/fp8.log | grep -v "ok=True" | head -20; tail -3 $R/mma.log $R/fp8.log
date -u +%FT%TZ >> $R/env.txt
gzip -f $R/clocks.csv
tar -C $OUT -czf $OUT/run1.tgz r && rm -rf $R
ls -la $OUT
