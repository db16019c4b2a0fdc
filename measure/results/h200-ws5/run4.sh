#!/bin/bash
# Session 26, device call 4 (issue 18): the shipped own-kernel profile's attention and draft-loop rows re-measured with
# the overlapped loop order adopted for two or three consumer partitions (h200-ws5 run 3; kernel set v1+rows+ws3+m2,
# whose tiling and merge did not change), fitted with the shipped rows of the other parts, its composed
# steps validated on the shipped table's grid; then GPU tests of the ws kernel against fp64 under the new default.
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
timeout 300 wmtp calibrate --models q35,q122,nem --parts attention,loop --base-raw wmtp_model/data/profiles/h200.raw.csv.gz --out $R/cal > $R/cal.log 2>&1; echo "calibrate rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
tail -2 $R/cal.log
timeout 220 wmtp validate --profile $R/cal/profile.json --ctx 64K,256K,1M --depths 3,5,7,9 --out $R/val_h200 > $R/val_h200.log 2>&1; echo "validate rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
(timeout -k 5 130 python3 -m pytest -q -n 4 -p no:cacheprovider tests/test_kernels_ws.py -k "(test_ws_against_fp64 and (kw0- or kw16 or kw17 or kw18)) or default_loop" > $R/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $R/pytest_gpu.txt)
grep -E "^FAILED" $R/pytest_gpu.txt | head; tail -2 $R/pytest_gpu.txt; echo "tests done $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
kill $CLK
tail -2 $R/val_h200.log; head -8 $R/val_h200/validation.md 2>/dev/null
date -u +%FT%TZ >> $R/env.txt
gzip -f $R/clocks.csv $R/cal/raw.csv $R/cal/raw.merged.csv 2>/dev/null
tar -C $OUT -czf $OUT/ws5-run4.tgz r && rm -rf $R
ls -la $OUT
