"""`wmtp calibrate` on a GPU: run the measurement sweep (`wmtp.measure.run.run_sweep`), then fit it
into a profile (`wmtp.calibrate.fitting`). The profile's provenance is the sweep's: GPU, versions,
timer, and the attention backend with its library versions."""

from __future__ import annotations

from pathlib import Path

from wmtp.calibrate.fitting import fit_raw_to_profile
from wmtp.specs import ModelSpec


def run_calibrate(specs: list[ModelSpec], out: Path, quick: bool = False, resume: bool = False,
                  backend: str = "wmtp", console=None) -> Path:
    """Sweep on this GPU (out/raw.csv, appended as measured), fit, write out/profile.json. Returns its path."""
    from wmtp.measure.run import run_sweep

    raw, meta = run_sweep(specs, out, quick=quick, resume=resume, backend=backend, console=console)
    return fit_raw_to_profile(raw, out / "profile.json", meta, [s.key for s in specs])
