#!/bin/bash
# Session 20, device call 3: run1 again with the fp8 rule run2 supports (ws kernel for fp8 verifies at B <= 8): GPU tests, the kv-fp8 sweep part
# (decode / verify over an e4m3 pool through the default kernels) for q35, q122, nem, fitted with the shipped raw.
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
(timeout 120 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_kernels_ws_fp8.py tests/test_kernel_plan.py tests/test_sweep_parts.py > $R/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $R/pytest_gpu.txt)
tail -3 $R/pytest_gpu.txt; echo "tests done $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
timeout 400 wmtp calibrate --models q35,q122,nem --parts kv-fp8 --base-raw wmtp_model/data/profiles/h200.raw.csv.gz --out $R/cal > $R/cal.log 2>&1; echo "calibrate rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
tail -5 $R/cal.log
kill $CLK
date -u +%FT%TZ >> $R/env.txt
gzip -f $R/clocks.csv $R/cal/*.csv 2>/dev/null
tar -C $OUT -czf $OUT/run3.tgz r && rm -rf $R
ls -la $OUT
