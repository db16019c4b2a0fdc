"""GPU measurement: the project's Triton kernels, torch-timed components and the benchmark harness.

The only part of wmtp that imports torch or triton (install with `pip install 'wmtp[measure]'`).
"""

from __future__ import annotations

from wmtp.errors import WmtpError


def require_gpu() -> None:
    """Raise a `WmtpError` unless torch, triton and a CUDA GPU are available."""
    try:
        import torch
        import triton  # noqa: F401
    except ImportError as e:
        raise WmtpError(f"wmtp measure needs torch and triton ({e.name} is missing): pip install 'wmtp[measure]'") from None
    if not torch.cuda.is_available():
        raise WmtpError("no CUDA GPU is visible: wmtp measure and wmtp calibrate run on a GPU machine")
