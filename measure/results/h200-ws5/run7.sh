#!/bin/bash
# Session 26, device call 7 (issue 18): after `ws_loop` was split into its serial and pipelined orders (the sm_90 PTX
# has the same instruction mix; labels and one shuffle's place differ): the GPU tests of the default, overlapped and
# serial orders against fp64, and nem's verify at 1M (B = 1, d = 1, 5, 8) through the default path and the serial
# order, to see that the split changed neither the results nor the times.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
R=$OUT/r; mkdir -p $R/time
python3 -m pip install --no-deps --no-build-isolation -e . -q > $R/pip.txt 2>&1 || { echo "pip failed"; cat $R/pip.txt; exit 1; }
export TRITON_CACHE_DIR=$PWD/.tcache; mkdir -p $TRITON_CACHE_DIR
{ date -u +%FT%TZ; echo "commit $WMTP_GIT_SHA"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.limit --format=csv
  python3 -c "import torch,triton,sys;print('torch',torch.__version__,'cuda',torch.version.cuda,'triton',triton.__version__,'python',sys.version.split()[0])"; } > $R/env.txt 2>&1
cat $R/env.txt
B=measure/scripts/paged_ws_bench.py
timeout -k 5 70 python3 $B --out $R/time --phase time --models nem --ds 1,5,8 --batches 1 --variants ws,ws-serial --deadline-s 60 > $R/time/nem-b1.log 2>&1
echo "time rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
(timeout -k 5 100 python3 -m pytest -q -n 4 -p no:cacheprovider tests/test_kernels_ws.py -k "(test_ws_against_fp64 and (kw0- or kw16 or kw13)) or lazy" > $R/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $R/pytest_gpu.txt)
grep -E "^FAILED" $R/pytest_gpu.txt | head; tail -2 $R/pytest_gpu.txt; echo "tests done $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
grep -h "ms$" $R/time/nem-b1.log | grep -v "^rows"
date -u +%FT%TZ >> $R/env.txt
tar -C $OUT -czf $OUT/ws5-run7.tgz r && rm -rf $R
