#!/bin/bash
# Session 26, device call 6 (issue 18): the lazy rescale (lazy=True: a row's maximum moves only by more than 2^8, the
# accumulator rescaled only on tiles where one moved: FA4's conditional rescale) in the overlapped loop, beside the
# default (overlap) and the serial order, nem at 1M (B = 1, d = 1, 5..13; B = 4, d = 5, 8); checks, GPU tests.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
R=$OUT/r; mkdir -p $R/time
python3 -m pip install --no-deps --no-build-isolation -e . -q > $R/pip.txt 2>&1 || { echo "pip failed"; cat $R/pip.txt; exit 1; }
export TRITON_CACHE_DIR=$PWD/.tcache; mkdir -p $TRITON_CACHE_DIR
Q="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active"
nvidia-smi --query-gpu=$Q --format=csv > /dev/null 2>&1 || Q="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active"
nvidia-smi --query-gpu=$Q --format=csv -lms 250 > $R/clocks.csv 2>&1 &
CLK=$!
{ date -u +%FT%TZ; echo "commit $WMTP_GIT_SHA"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.limit --format=csv
  python3 -c "import torch,triton,sys;print('torch',torch.__version__,'cuda',torch.version.cuda,'triton',triton.__version__,'python',sys.version.split()[0])"; } > $R/env.txt 2>&1
cat $R/env.txt
B=measure/scripts/paged_ws_bench.py
timeout -k 5 60 python3 $B --out $R/time --phase check --models nem --ds 5,9,13 --variants ws-lazy --deadline-s 50 > $R/time/check-nem.log 2>&1
echo "check rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
grep -h "^check" $R/time/check-*.log | grep -v ": ok" | head -10; grep -hc ": ok" $R/time/check-*.log
timeout -k 5 40 python3 $B --out $R/time --phase time --models nem --ds 1 --batches 1 --variants ws --deadline-s 30 > $R/time/nem-decode.log 2>&1
for spec in "5,6,7,8,9,12,13 1 100" "5,8 4 50"; do  # ws-lazy takes two or three consumer partitions (d >= 5)
  set -- $spec
  timeout -k 5 $3 python3 $B --out $R/time --phase time --models nem --ds $1 --batches $2 --variants ws,ws-serial,ws-lazy --deadline-s $(( $3 - 10 )) > $R/time/nem-b$2.log 2>&1
  echo "time nem B=$2 rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
done
(timeout -k 5 60 python3 -m pytest -q -n 4 -p no:cacheprovider tests/test_kernels_ws.py -k "lazy" > $R/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $R/pytest_gpu.txt)
grep -E "^FAILED" $R/pytest_gpu.txt | head; tail -2 $R/pytest_gpu.txt; echo "tests done $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
kill $CLK
grep -h "ms$" $R/time/nem-*.log | grep -v "^rows\|^default"
date -u +%FT%TZ >> $R/env.txt
gzip -f $R/clocks.csv
tar -C $OUT -czf $OUT/ws5-run6.tgz r && rm -rf $R
