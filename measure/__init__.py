"""GPU measurement: the project's Triton kernels, torch-timed components and the benchmark harness.

The only part of wmtp that imports torch or triton (install with `pip install 'wmtp[measure]'`).
"""

from __future__ import annotations

from pathlib import Path

from wmtp.errors import WmtpError

# The calibration sweep's parts (`sweep`): attention kernels and index builds (through the backend), the
# non-attention components (the same torch calls for every backend), the in-place draft loop (attention + MTP head,
# gamma forwards). Here, beside require_gpu, so that checks before the GPU is looked for need no torch.
PARTS = ("attention", "components", "loop")
# Parts a sweep runs only when `--parts` names them: `kv-fp8`, the attention part's decode / verify (and draft
# extend, where the backend runs it apart) over an fp8 (e4m3) KV pool, rows of `dtype` fp8 (fitted as KIND@fp8).
EXTRA_PARTS = ("kv-fp8",)
MOE_IMPLS = ("wmtp", "sglang")  # routed-expert kernels of the `moe` rows (`components`): ours, SGLang's fused MoE


def require_gpu() -> None:
    """Raise a `WmtpError` unless torch, triton and a CUDA GPU are available."""
    try:
        import torch
        import triton
    except ImportError as e:
        raise WmtpError(f"wmtp measure needs torch and triton ({e.name} is missing): pip install 'wmtp[measure]'") from None
    del triton  # imported only to know it imports
    if not torch.cuda.is_available():
        raise WmtpError("no CUDA GPU is visible: wmtp measure, wmtp validate and a wmtp calibrate sweep run on a GPU "
                        "machine")


def check_resumable(csv_path: Path, done: Path, meta_path: Path, same: dict, command: str) -> None:
    """`--resume` with nothing to continue is an error (it started afresh, silently): no `csv_path`, or one without
    the record of finished steps (every step would run again and append beside its rows). An interrupted run of
    other settings (`same`: sidecar key -> this run's value; another backend, models, grid) is one too: its rows and
    this run's would be fitted as one measurement."""
    from wmtp.fileio import read_json

    folder = csv_path.parent
    if not csv_path.is_file():
        raise WmtpError(f"--resume: nothing to resume in {folder}: it holds no {csv_path.name} of an interrupted "
                        f"run; leave out --resume to start one")
    if not done.is_file():
        raise WmtpError(f"--resume: {csv_path} has no record of its finished steps ({done.name}), so every step "
                        f"would run again beside its rows; leave out --resume to start afresh (it replaces "
                        f"{csv_path.name})")
    old = read_json(meta_path, "run metadata", WmtpError) if meta_path.is_file() else {}
    if not isinstance(old, dict):  # the checks below were skipped: a run of other settings resumed, silently
        raise WmtpError(f"--resume: {meta_path} is corrupt: a run's metadata is an object (command, models, ...), got "
                        f"{type(old).__name__}; leave out --resume to start afresh")
    for key, value in same.items():
        if key in old and old[key] != value:
            was = (f"`{old[key]}`, this one is `{value}`" if key == "command" else
                   f"`{old.get('command', command)}` with {key} {old[key]!r}, this one has {value!r}")
            raise WmtpError(f"--resume: the interrupted run in {folder} was {was}; give the same options, or leave "
                            "out --resume to start afresh")
