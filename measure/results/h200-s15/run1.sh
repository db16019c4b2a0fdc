#!/bin/bash
# Session 15, device call 1: GPU tests of the kernels touched (fp8 bit move, linear state), the linear_state rows
# with intermediate states, the fp8 bit-move decode against conversion instructions, short decodes by split count.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
R=$OUT/r; mkdir -p $R
python3 -m pip install --no-deps --no-build-isolation -e . -q > $R/pip.txt 2>&1 || { echo "pip failed"; cat $R/pip.txt; exit 1; }
Q="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active"
nvidia-smi --query-gpu=$Q --format=csv > /dev/null 2>&1 || Q="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active"
nvidia-smi --query-gpu=$Q --format=csv -lms 250 > $R/clocks.csv 2>&1 &
CLK=$!
{ date -u +%FT%TZ; echo "commit $WMTP_GIT_SHA"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.limit --format=csv
  python3 -c "import torch,triton,sys;print('torch',torch.__version__,'cuda',torch.version.cuda,'triton',triton.__version__,'python',sys.version.split()[0])"; } > $R/env.txt 2>&1
cat $R/env.txt
(timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_kernels.py tests/test_kernels_ffn.py > $R/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $R/pytest_gpu.txt)
tail -3 $R/pytest_gpu.txt; echo "tests done $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
timeout 150 python3 -m wmtp.measure.scripts.state_rows --out $R/state > $R/state.log 2>&1; echo "state rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
timeout 170 python3 measure/scripts/fp8_bits_bench.py --out $R/bits --deadline-s 150 > $R/bits.log 2>&1; echo "bits rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
timeout 130 python3 measure/scripts/short_decode_bench.py --out $R/short --deadline-s 110 > $R/short.log 2>&1; echo "short rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
kill $CLK
grep -E "round 0" $R/bits.log | head -12; grep -E "65536" $R/short.log | head -30
date -u +%FT%TZ >> $R/env.txt
tar -C $OUT -czf $OUT/run1.tgz r && rm -rf $R
ls -la $OUT
