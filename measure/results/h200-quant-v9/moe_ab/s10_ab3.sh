#!/bin/bash
export PYTHONUNBUFFERED=1
T0=$(date +%s)
mkdir -p $OUT/r
python3 -m pip install --no-deps --no-build-isolation . -q > $OUT/r/pip.txt 2>&1 || { echo "pip failed"; exit 1; }
V="452ca27 e1c3522"
for c in $V; do mkdir -p /tmp/old_$c && tar -C /tmp/old_$c -xzf .devcarry/old/$c.tgz; done
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,clocks_event_reasons.active --format=csv -lms 250 > $OUT/r/clocks.csv 2>&1 &
CLK=$!
cd /tmp
for round in 1 2; do
for c in $V; do PYTHONPATH=/tmp/old_$c/pkg timeout 120 python3 $OLDPWD/.devcarry/ab_moe.py $c >> $OUT/r/ab_moe.jsonl 2>> $OUT/r/ab_err.txt; echo "$c rc=$? $(( $(date +%s) - T0 )) s"; done
timeout 120 python3 $OLDPWD/.devcarry/ab_moe.py HEAD-3064814 >> $OUT/r/ab_moe.jsonl 2>> $OUT/r/ab_err.txt; echo "HEAD rc=$? $(( $(date +%s) - T0 )) s"
done
kill $CLK
tail -5 $OUT/r/ab_err.txt
tar -C $OUT -czf $OUT/s10_ab3.tgz r && rm -rf $OUT/r
