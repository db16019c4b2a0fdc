#!/bin/bash
# Session 15, device call 3 (run 2 again on the shipped tables grids; GPU tests of the final kernel code): composed-step validation of both shipped H200 profiles after the linear_state rows were
# re-measured with the verify's intermediate states (run 1) and refitted: own kernels, then FlashInfer as SGLang plans
# it with SGLang 0.5.12's fused MoE (carried in .devcarry/sgl, FlashInfer 0.6.0 wheels in .whl). GPU tests last.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
R=$OUT/r; mkdir -p $R
python3 -m pip install --no-deps --no-build-isolation -e . -q > $R/pip.txt 2>&1 || { echo "pip failed"; cat $R/pip.txt; exit 1; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >> $R/pip.txt 2>&1 || echo "wheels failed"
Q="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active"
nvidia-smi --query-gpu=$Q --format=csv > /dev/null 2>&1 || Q="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active"
nvidia-smi --query-gpu=$Q --format=csv -lms 250 > $R/clocks.csv 2>&1 &
CLK=$!
{ date -u +%FT%TZ; echo "commit $WMTP_GIT_SHA"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  python3 -c "import torch,triton,sys;print('torch',torch.__version__,'cuda',torch.version.cuda,'triton',triton.__version__,'python',sys.version.split()[0])"
  PYTHONPATH=/tmp/site python3 -c "import flashinfer; print('flashinfer', flashinfer.__version__)"; } > $R/env.txt 2>&1
cat $R/env.txt
timeout 150 wmtp validate --profile wmtp_model/data/profiles/h200.json --ctx 64K,256K,1M --depths 3,5,7,9 --out $R/val_h200 > $R/val_h200.log 2>&1; echo "val h200 rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
[ -f .fi_tgz/fi_cache.tgz ] && tar -xzf .fi_tgz/fi_cache.tgz; export FLASHINFER_WORKSPACE_BASE=$PWD/.fi_cache WMTP_SGLANG_DIR=$PWD/.devcarry/sgl
PYTHONPATH=/tmp/site timeout 330 wmtp validate --profile wmtp_model/data/profiles/h200-flashinfer.json --ctx 96K,256K,700K,1M --depths 3,4,6,7 --out $R/val_fi > $R/val_fi.log 2>&1; echo "val fi rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
(timeout 120 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_kernels.py tests/test_kernels_ws.py tests/test_kernel_merge.py tests/test_kernel_sets.py > $R/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $R/pytest_gpu.txt)
tail -2 $R/pytest_gpu.txt; echo "tests done $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
kill $CLK
tail -3 $R/val_h200.log; tail -3 $R/val_fi.log; cat $R/val_h200/validation.md 2>/dev/null | head -12; cat $R/val_fi/validation.md 2>/dev/null | head -12
date -u +%FT%TZ >> $R/env.txt
tar -C $OUT -czf $OUT/run3.tgz r && rm -rf $R
ls -la $OUT
