#!/bin/bash
# session 11, call 1: GPU tests of every quantized kernel at this commit, then round 7's int4 GEMV benchmark
export PYTHONUNBUFFERED=1
T0=$(date +%s)
mkdir -p $OUT/r
git rev-parse HEAD > $OUT/r/commit.txt 2>&1
python3 -m pip install --no-deps --no-build-isolation . -q > $OUT/r/pip.txt 2>&1 || { echo "pip failed"; cat $OUT/r/pip.txt; exit 1; }
Q="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active"
nvidia-smi --query-gpu=$Q --format=csv -lms 250 > $OUT/r/clocks.csv 2>&1 &
CLK=$!
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.limit --format=csv
  python3 -c "import torch,triton,sys;print('torch',torch.__version__,'cuda',torch.version.cuda,'triton',triton.__version__,'python',sys.version.split()[0])"; } > $OUT/r/env.txt 2>&1
cat $OUT/r/env.txt
(cd /tmp && timeout 260 python3 -m pytest -q -n 6 -p no:cacheprovider $OLDPWD/tests/test_kernels_quant*.py > $OUT/r/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $OUT/r/pytest_gpu.txt) &
PT=$!
PIDS=""
for i in $(seq 0 9); do timeout 200 python3 -m wmtp.measure.scripts.quant_i4il --warm $i/10 > /dev/null 2>&1 & PIDS="$PIDS $!"; done
wait $PIDS; echo "warm done $(( $(date +%s) - T0 )) s" | tee -a $OUT/r/env.txt
wait $PT; tail -3 $OUT/r/pytest_gpu.txt; echo "tests done $(( $(date +%s) - T0 )) s" | tee -a $OUT/r/env.txt
echo "bench start $(date -u +%T)" >> $OUT/r/env.txt
timeout 250 python3 -m wmtp.measure.scripts.quant_i4il --out $OUT/r/bench --procs 0 --budget-s 200 > $OUT/r/bench_log.txt 2>&1; echo "bench rc=$? $(( $(date +%s) - T0 )) s" | tee -a $OUT/r/env.txt
echo "bench end $(date -u +%T)" >> $OUT/r/env.txt
timeout 20 python3 -m wmtp.measure.scripts.quant_asm int4_quad_kernel > $OUT/r/asm.txt 2>&1
kill $CLK
tail -3 $OUT/r/bench_log.txt
date -u +%FT%TZ >> $OUT/r/env.txt
tar -C $OUT -czf $OUT/s11_i4il.tgz r && rm -rf $OUT/r
ls -la $OUT
