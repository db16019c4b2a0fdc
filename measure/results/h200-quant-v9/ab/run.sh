#!/bin/bash
export PYTHONUNBUFFERED=1
T0=$(date +%s)
mkdir -p $OUT/r
python3 -m pip install --no-deps --no-build-isolation . -q > $OUT/r/pip.txt 2>&1 || { echo "pip failed"; exit 1; }
for c in 96e2bbb aac454b e1c3522; do mkdir -p /tmp/old_$c && tar -C /tmp/old_$c -xzf .devcarry/old/$c.tgz; done
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,clocks_event_reasons.active --format=csv -lms 250 > $OUT/r/clocks.csv 2>&1 &
CLK=$!
cd /tmp
for round in 1 2; do
for c in 96e2bbb aac454b e1c3522; do PYTHONPATH=/tmp/old_$c/pkg timeout 100 python3 $OLDPWD/.devcarry/ab.py $c >> $OUT/r/ab.jsonl 2>> $OUT/r/ab_err.txt; echo "$c rc=$? $(( $(date +%s) - T0 )) s"; done
timeout 100 python3 $OLDPWD/.devcarry/ab.py HEAD-191b027 >> $OUT/r/ab.jsonl 2>> $OUT/r/ab_err.txt; echo "HEAD rc=$? $(( $(date +%s) - T0 )) s"
done
kill $CLK
tail -5 $OUT/r/ab_err.txt
tar -C $OUT -czf $OUT/s10_ab.tgz r && rm -rf $OUT/r
