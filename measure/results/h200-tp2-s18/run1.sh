#!/bin/bash
# Session 18 (nvidia-h200-x2): the TP2 composed-step validation of 2026-11-29 (calibrate/validation/h200-tp2.md) again,
# priced by today's shipped single-GPU profile (kernel set v1+rows+ws3+m2) and a fresh all-reduce fit.
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
R=$OUT/r; mkdir -p $R
python3 -m pip install --no-deps --no-build-isolation -e . -q > $R/pip.txt 2>&1 || { echo "pip failed"; cat $R/pip.txt; exit 1; }
export TRITON_CACHE_DIR=$PWD/.tcache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=index,timestamp,clocks.sm,power.draw,clocks_event_reasons.active --format=csv -lms 500 > $R/clocks.csv 2>&1 &
CLK=$!
{ date -u +%FT%TZ; echo "commit $WMTP_GIT_SHA"; nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv; nvidia-smi topo -m
  python3 -c "import torch,triton,sys;print('torch',torch.__version__,'cuda',torch.version.cuda,'triton',triton.__version__,'nccl',torch.cuda.nccl.version(),'python',sys.version.split()[0])"; } > $R/env.txt 2>&1
cat $R/env.txt
timeout 480 torchrun --nproc-per-node 2 -m wmtp.measure.tp_bench --out $R/tp --models q35 --ctx 256K,1M --depths 3,7 > $R/tp.log 2>&1; echo "tp_bench rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
kill $CLK
tail -5 $R/tp.log; cat $R/tp/tp_validation.csv 2>/dev/null | head -20
date -u +%FT%TZ >> $R/env.txt
gzip -f $R/clocks.csv $R/tp/tp_raw.csv 2>/dev/null
tar -C $OUT -czf $OUT/tp.tgz r && rm -rf $R
ls -la $OUT
