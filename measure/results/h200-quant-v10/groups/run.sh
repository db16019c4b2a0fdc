#!/bin/bash
# session 11, call 7: the fp8 GEMV with 8 / 2 groups per step against 4, at M = 1, the 15 shapes and held-out models
export PYTHONUNBUFFERED=1
T0=$(date +%s)
mkdir -p $OUT/r
python3 -m pip install --no-deps --no-build-isolation . -q > $OUT/r/pip.txt 2>&1 || { echo "pip failed"; cat $OUT/r/pip.txt; exit 1; }
Q="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active"
nvidia-smi --query-gpu=$Q --format=csv -lms 250 > $OUT/r/clocks.csv 2>&1 &
CLK=$!
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.limit --format=csv
  python3 -c "import torch,triton,sys;print('torch',torch.__version__,'cuda',torch.version.cuda,'triton',triton.__version__,'python',sys.version.split()[0])"; } > $OUT/r/env.txt 2>&1
K="wmtp_fp8_block_gemv,wmtp_fp8_block_gemv[g8],wmtp_fp8_block_gemv[g2]"
echo "bench start $(date -u +%T)" >> $OUT/r/env.txt
timeout 300 python3 .devcarry/s11_gemvbn.py --out $OUT/r/bench --procs 0 --budget-s 250 --kernels "$K" --models q35,q122,nem,qnext,glm45,dsv3 > $OUT/r/bench_log.txt 2>&1; echo "bench rc=$? $(( $(date +%s) - T0 )) s" | tee -a $OUT/r/env.txt
echo "bench end $(date -u +%T)" >> $OUT/r/env.txt
kill $CLK
grep -v "check " $OUT/r/bench_log.txt | tail -4
date -u +%FT%TZ >> $OUT/r/env.txt
tar -C $OUT -czf $OUT/s11_g8.tgz r && rm -rf $OUT/r
ls -la $OUT
