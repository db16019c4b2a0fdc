#!/bin/bash
# Session 21, device call 1: composed steps over fp8 (e4m3) KV pools against the shipped H200 profile's @fp8 fits
# (`wmtp validate --kv-dtype fp8`), the same grid in bf16 (today's re-check of the shipped gate), and the ws kernel's
# fp8 verify beside the rows kernel's at B = 9 / 16 (unmeasured so far; the default takes rows there).
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
(timeout 90 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_validate_kv8.py tests/test_kernels_ws_fp8.py > $R/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $R/pytest_gpu.txt)
tail -3 $R/pytest_gpu.txt; echo "tests done $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
P=wmtp_model/data/profiles/h200.json
timeout 200 wmtp validate --profile $P --kv-dtype fp8 --models q35,q122,nem --ctx 64K,256K,1M --depths 3,5,7,9 --out $R/val-fp8 > $R/val-fp8.log 2>&1; echo "validate fp8 rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
head -12 $R/val-fp8/validation.md
timeout 120 python3 measure/scripts/ws_fp8_bench.py --out $R/ws8 --impls ws8,rows8 --batches 9,16 --ds 2,5,7,9 --decode-batch 0 --ctx 262144 --deadline-s 100 > $R/ws8.log 2>&1; echo "ws8 bench rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
timeout 180 wmtp validate --profile $P --kv-dtype bf16 --models q35,q122,nem --ctx 64K,256K,1M --depths 3,5,7,9 --out $R/val-bf16 > $R/val-bf16.log 2>&1; echo "validate bf16 rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
head -12 $R/val-bf16/validation.md
kill $CLK
date -u +%FT%TZ >> $R/env.txt
gzip -f $R/clocks.csv 2>/dev/null
tar -C $OUT -czf $OUT/run1.tgz r && rm -rf $R
ls -la $OUT
