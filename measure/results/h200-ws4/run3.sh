#!/bin/bash
# Session 24, device call 3 (issue 18): the GPU tests of the ws kernel after its consumer loop moved into
# paged_ws_loop (the serial default, fp8 K/V, the merge, the kernel sets and plans, the kernels' own tests).
export PYTHONUNBUFFERED=1
T0=$(date +%s)
R=$OUT/r; mkdir -p $R
python3 -m pip install --no-deps --no-build-isolation -e . -q > $R/pip.txt 2>&1 || { echo "pip failed"; cat $R/pip.txt; exit 1; }
export TRITON_CACHE_DIR=$PWD/.tcache; mkdir -p $TRITON_CACHE_DIR
{ date -u +%FT%TZ; echo "commit $WMTP_GIT_SHA"; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
  python3 -c "import torch,triton,sys;print('torch',torch.__version__,'cuda',torch.version.cuda,'triton',triton.__version__)"; } > $R/env.txt 2>&1
python3 -c "import xdist" 2>/dev/null && N="-n 8" || N=""
timeout -k 5 330 python3 -m pytest -q $N -p no:cacheprovider tests/test_kernels_ws.py tests/test_kernels_ws_fp8.py \
  tests/test_kernel_merge.py tests/test_kernel_sets.py tests/test_kernel_plan.py tests/test_kv_fp8_part.py tests/test_kernels.py > $R/pytest_gpu.txt 2>&1
echo "pytest rc=$? $(( $(date +%s) - T0 )) s" | tee -a $R/pytest_gpu.txt
tail -4 $R/pytest_gpu.txt
date -u +%FT%TZ >> $R/env.txt
tar -C $OUT -czf $OUT/run3.tgz r && rm -rf $R
