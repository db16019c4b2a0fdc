#!/bin/bash
# Session 17, device call 6 (issue 17, round 10): GPU tests of quant_mma_i4 (now up to 16 rows), then the dense kernel at
# M = 9..16 (two MMA N tiles) and with 1-2 warps per program (small projections), path=auto with it up to 16 rows.
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
(timeout 240 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_kernels_quant_mma_i4.py > $R/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $R/pytest_gpu.txt)
tail -3 $R/pytest_gpu.txt; echo "tests done $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
timeout 420 python3 -m wmtp.measure.scripts.quant_i4mma --out $R/mma --budget-s 300 --procs 6 --kernels 'wmtp_int4_group,wmtp_int4_group_auto,wmtp_int4_group_auto16,wmtp_int4_mma[sub-w4-c8],wmtp_int4_mma[fma-w4-c8],wmtp_int4_mma[fma-w2-c8],wmtp_int4_mma[fma-w1-c8],wmtp_int4_mma[fma-w2-c4],wmtp_int4_mma[sub-w2-c8],torch_int4pack_mm' > $R/mma.log 2>&1; echo "mma rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
kill $CLK
python3 -m wmtp.measure.scripts.quant_asm int4_mma_kernel --cache $TRITON_CACHE_DIR > $R/asm.txt 2>&1
CU=$(python3 -c "import triton,os;print(os.path.join(os.path.dirname(triton.__file__),'backends/nvidia/bin/cuobjdump'))")
for f in $TRITON_CACHE_DIR/*/int4_mma_kernel.cubin; do
  [ -f "$f" ] && { echo "$f $(python3 -c "import json,sys;m=json.load(open(sys.argv[1]));print('warps',m.get('num_warps'),'consts',{k:v for k,v in (m.get('constants') or {}).items()} if isinstance(m.get('constants'),dict) else '')" ${f%.cubin}.json 2>/dev/null)"; $CU --dump-resource-usage $f | grep -o "REG:[0-9]*"; }
done > $R/regs.txt 2>&1
grep -E "check|error" $R/mma.log | grep -v "ok=True" | head -20; tail -5 $R/mma.log
date -u +%FT%TZ >> $R/env.txt
tar -C $OUT -czf $OUT/run6.tgz r && rm -rf $R
ls -la $OUT
