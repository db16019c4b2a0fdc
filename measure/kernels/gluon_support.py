"""Where the Gluon kernels can run and why a build failed: the GPU check and the error triage the ws kernel's launcher
and its fallback share. Nothing here imports Gluon, so a Triton without it can still ask."""

from __future__ import annotations

import torch


def hopper(device) -> bool:
    """Whether `device` is an NVIDIA Hopper GPU (compute capability 9.x), the only one whose warpgroup MMAs (wgmma)
    the kernel uses: Blackwell (10.x, 12.x) has none (Triton 3.9 aborts the process compiling it for sm_100: "LLVM
    ERROR: Cannot select: intrinsic %llvm.nvvm.wgmma..."), and ROCm reports its gfx9 GPUs as 9.x (MI300X: 9.4)."""
    return torch.version.hip is None and torch.cuda.get_device_capability(device)[0] == 9


def build_failure(err: Exception) -> bool:
    """Whether `err` says the kernel cannot be built with this Triton (front end, MLIR passes, ptxas, resources),
    not that a launch failed: a fallback takes the first, never the second."""
    from triton.errors import TritonError

    return isinstance(err, TritonError) or (isinstance(err, RuntimeError) and "PassManager" in str(err))
