#!/bin/bash
# Session 17, device call 7: every quantized-kernel GPU test after the review moved the split-K finish of all these
# kernels into one shared routine (quant_kernels.finish_at); no timing.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
R=$OUT/r; mkdir -p $R
python3 -m pip install --no-deps --no-build-isolation -e . -q > $R/pip.txt 2>&1 || { echo "pip failed"; cat $R/pip.txt; exit 1; }
{ date -u +%FT%TZ; echo "commit $WMTP_GIT_SHA"; nvidia-smi --query-gpu=name,driver_version --format=csv
  python3 -c "import torch,triton,sys;print('torch',torch.__version__,'cuda',torch.version.cuda,'triton',triton.__version__,'python',sys.version.split()[0])"; } > $R/env.txt 2>&1
cat $R/env.txt
(timeout 400 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_kernels_quant*.py > $R/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $R/pytest_gpu.txt)
tail -4 $R/pytest_gpu.txt; echo "tests done $(( $(date +%s) - T0 )) s" | tee -a $R/env.txt
tar -C $OUT -czf $OUT/run7.tgz r && rm -rf $R
