#!/bin/bash
# Session 24, device call 4 (issue 18): the ws kernel's GPU tests after the fp8 path stopped taking the loop orders
# and the hand-over barriers became the ping-pong order's only (a tight call: the session's last device minutes).
export PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R
python3 -m pip install --no-deps --no-build-isolation -e . -q > $R/pip.txt 2>&1 || { echo "pip failed"; exit 1; }
export TRITON_CACHE_DIR=$PWD/.tcache; mkdir -p $TRITON_CACHE_DIR
{ date -u +%FT%TZ; echo "tree $WMTP_GIT_SHA"; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/env.txt 2>&1
timeout -k 5 150 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_kernels_ws.py tests/test_kernels_ws_fp8.py > $R/pytest_gpu.txt 2>&1
echo "pytest rc=$?" | tee -a $R/pytest_gpu.txt; tail -3 $R/pytest_gpu.txt
date -u +%FT%TZ >> $R/env.txt
tar -C $OUT -czf $OUT/run4.tgz r
