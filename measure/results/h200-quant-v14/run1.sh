#!/bin/bash
# Session 26 (issue 17): torch's block-scaled FP8 GEMM (torch._scaled_mm / F.scaled_mm with 1 x 128 activation groups
# and 128 x 128 weight blocks, cuBLASLt: the checkpoint's own format) as a peer and fit candidate, beside fp8
# path='auto' (the fit input of h200-quant-v13 run4) and torch's per-tensor / rowwise _scaled_mm, on the 15 dense shapes
# at M = 1..64 (checked against fp32 torch on each model's first shape).
export PYTHONUNBUFFERED=1
T0=$(date +%s)
R=$OUT/q; mkdir -p $R
python3 -m pip install --no-deps --no-build-isolation -e . -q > $R/pip.txt 2>&1 || { echo "pip failed"; cat $R/pip.txt; exit 1; }
export TRITON_CACHE_DIR=$PWD/.tcache; mkdir -p $TRITON_CACHE_DIR
Q="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active"
nvidia-smi --query-gpu=$Q --format=csv > /dev/null 2>&1 || Q="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active"
nvidia-smi --query-gpu=$Q --format=csv -lms 250 > $R/clocks.csv 2>&1 &
CLK=$!
{ date -u +%FT%TZ; echo "commit $WMTP_GIT_SHA"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.limit --format=csv
  python3 -c "import torch,triton,sys;print('torch',torch.__version__,'cuda',torch.version.cuda,'triton',triton.__version__,'python',sys.version.split()[0])"; } > $R/env.txt 2>&1
cat $R/env.txt
python3 -c "
from wmtp.measure.scripts import quant_peers as qp
print('block form:', qp._block_form('cuda'))" > $R/form.txt 2>&1; cat $R/form.txt
F='wmtp_fp8_block_auto,torch_scaled_mm_block,torch_scaled_mm_rowwise,torch_scaled_mm_tensor'
timeout -k 5 230 python3 -m wmtp.measure.scripts.quant_sw --out $R/fp8 --budget-s 180 --procs 4 --kernels "$F" > $R/fp8.log 2>&1; echo "fp8 rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
kill $CLK
grep -hE "check|error" $R/fp8.log | grep -v "ok=True" | head -20; tail -n 3 $R/fp8.log
date -u +%FT%TZ >> $R/env.txt
gzip -f $R/clocks.csv
tar -C $OUT -czf $OUT/quant14-run1.tgz q && rm -rf $R
