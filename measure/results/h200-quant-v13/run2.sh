#!/bin/bash
# Session 25, device call 2 (issue 17): path=auto after the one-wave plan of the 4-warp int4 kernel (AUTO_FIT_CTAS = 9), the fit
# input, beside its earlier plan by name; the sm_90 builds' registers under this Triton; GPU tests of every quantized kernel.
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
(cd tests && for a in "dense 4 1 0" "dense 1 0 0" "moe 1 0 0" "dense 4 1 1"; do timeout -k 5 120 python3 i4_compile_probe.py $a; done) > $R/regs.jsonl 2> $R/regs.err
cat $R/regs.jsonl
(timeout -k 5 240 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_kernels_quant*.py tests/test_quant_fit_regimes.py > $R/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $R/pytest_gpu.txt)
tail -3 $R/pytest_gpu.txt; echo "tests done $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
D='wmtp_int4_group_auto,wmtp_int4_mma[sub-w4-c8],wmtp_int4_mma[sub-w4-c9f],wmtp_int4_mma[fma-w1-c16],torch_int4pack_mm,torch_bf16'
timeout -k 5 240 python3 -m wmtp.measure.scripts.quant_i4mma --out $R/mma --budget-s 200 --procs 4 --kernels "$D" > $R/mma.log 2>&1; echo "mma rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
kill $CLK
grep -hE "check|error" $R/mma.log | grep -v "ok=True" | head -20; tail -n 3 $R/mma.log
date -u +%FT%TZ >> $R/env.txt
gzip -f $R/clocks.csv
tar -C $OUT -czf $OUT/run2.tgz r && rm -rf $R
ls -la $OUT
