#!/bin/bash
# Session 26, device call 3 (issue 18): run 2's ablations put the 16-head verify's extra time in the serial chain of
# a warpgroup (without the softmax, or without the P V MMA, nem d = 5..8 ran at the decode's time), not in one unit
# (exp2 on the FMA pipes was 1.18-1.30x slower). This call tries loop='overlap' (S, then the previous tile's P V;
# the softmax runs while P V is in flight): checks against fp64, GPU tests, then verify at 1M beside the serial
# default (nem B = 1 d = 1..16, B = 4; q122 / q35 where their row blocks change).
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
(cd tests && for a in "112 128 0 2 128 0 0 3 0" "144 128 0 3 192 0 0 3 0" "112 256 0 1 128 0 0 3 0" "16 128 1 1 128 0 0 3 0"; do
   echo "{\"args\": \"$a\", \"probe\": $(timeout -k 5 120 python3 ws_compile_probe.py $a 2>/dev/null | tail -1)}"; done) > $R/regs.jsonl 2> $R/regs.err
grep -o '"args[^,]*\|"wait_groups[^]]*]\|"spill_stores[^,]*' $R/regs.jsonl | paste - - - 
B=measure/scripts/paged_ws_bench.py
for m in nem q122 q35; do
  timeout -k 5 60 python3 $B --out $R/time --phase check --models $m --ds 1,2,5,8,9,12 --variants ws-ov --deadline-s 50 > $R/time/check-$m.log 2>&1 &
done
sleep 1; while pgrep -f "phase check" > /dev/null; do sleep 2; done
echo "checks $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
grep -h "^check" $R/time/check-*.log | grep -v ": ok" | head -10; grep -hc ": ok" $R/time/check-*.log
for spec in "nem 1,2,4,5,6,7,8,9,10,12,13,16 1 100" "nem 5,8,9,12 4 50" "q122 1,4,5,8,9 1 60" "q35 1,8,9 1 45"; do
  set -- $spec
  timeout -k 5 $4 python3 $B --out $R/time --phase time --models $1 --ds $2 --batches $3 --variants ws,ws-ov --deadline-s $(( $4 - 10 )) > $R/time/$1-b$3.log 2>&1
  echo "time $1 B=$3 rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
done
(timeout -k 5 90 python3 -m pytest -q -n 4 -p no:cacheprovider tests/test_kernels_ws.py -k "overlap" > $R/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $R/pytest_gpu.txt)
grep -E "^FAILED" $R/pytest_gpu.txt | head; tail -2 $R/pytest_gpu.txt; echo "tests done $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
kill $CLK
grep -h "ms$" $R/time/*-b*.log | grep -v "^rows\|^default"
date -u +%FT%TZ >> $R/env.txt
gzip -f $R/clocks.csv
tar -C $OUT -czf $OUT/ws5-run3.tgz r && rm -rf $R
