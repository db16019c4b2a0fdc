#!/bin/bash
# session 11, call 8: GPU tests of every quantized-kernel file at the final kernel code
export PYTHONUNBUFFERED=1
T0=$(date +%s)
mkdir -p $OUT/r
python3 -m pip install --no-deps --no-build-isolation . -q > $OUT/r/pip.txt 2>&1 || { echo "pip failed"; cat $OUT/r/pip.txt; exit 1; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv
  python3 -c "import torch,triton,sys;print('torch',torch.__version__,'cuda',torch.version.cuda,'triton',triton.__version__,'python',sys.version.split()[0])"; } > $OUT/r/env.txt 2>&1
(cd /tmp && timeout 300 python3 -m pytest -q -n 8 -p no:cacheprovider $OLDPWD/tests/test_kernels_quant*.py > $OUT/r/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $OUT/r/pytest_gpu.txt)
tail -3 $OUT/r/pytest_gpu.txt; echo "tests done $(( $(date +%s) - T0 )) s" | tee -a $OUT/r/env.txt
date -u +%FT%TZ >> $OUT/r/env.txt
cp $OUT/r/pytest_gpu.txt $OUT/r/env.txt $OUT/ && rm -rf $OUT/r
