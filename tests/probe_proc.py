"""Run a compile probe of this folder (`ws_compile_probe.py`, `i4_compile_probe.py`, `swap_compile_probe.py`) in a
process without Triton's interpreter (which cannot compile for a GPU), and return the JSON of its last line."""

import json
import os
import subprocess
import sys
from pathlib import Path


def run_probe(script: str, *args) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    probe = Path(__file__).with_name(script)
    run = subprocess.run([sys.executable, str(probe), *map(str, args)], capture_output=True, text=True, env=env,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])
