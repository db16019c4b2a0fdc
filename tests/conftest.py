import json
import os
import shutil
import sys
from pathlib import Path

import pytest

# Triton kernels run under the interpreter on machines without an NVIDIA GPU. This must be set
# before triton is first imported.
if shutil.which("nvidia-smi") is None:
    os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, str(Path(__file__).parent))  # kernel_refs


@pytest.fixture
def write_config(tmp_path):
    """Write a config.json (dict or raw text) under tmp_path/<name>/config.json and return its path."""

    def _write(content, name="model"):
        d = tmp_path / name
        d.mkdir(exist_ok=True)
        p = d / "config.json"
        p.write_text(content if isinstance(content, str) else json.dumps(content))
        return p

    return _write


@pytest.fixture
def profile_copy(tmp_path):
    """A writable copy of the shipped H200 profile (for tests that merge fits into a profile)."""
    from wmtp.profile import PROFILES_DIR

    p = tmp_path / "h200.json"
    shutil.copy(PROFILES_DIR / "h200.json", p)
    p.chmod(0o644)
    return p
