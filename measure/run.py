"""Entry point behind `wmtp measure kernels`: output files, provenance, the summary."""

from __future__ import annotations

from pathlib import Path

from wmtp.measure import PARTS, check_resumable, require_gpu
from wmtp.specs import ModelSpec

TIMER = "cuda-graph replay, CUDA events, L2 flushed (256 MiB read) before each replay"


def backend_provenance(backend) -> dict:
    """What a run records about its attention backend: name, plan, library versions, kernel set."""
    out = {"backend": backend.name, "backend_plan": backend.describe(), "backend_versions": backend.versions()}
    kernels = backend.kernel_set()
    return out | ({"attention_kernels": kernels} if kernels else {})


def run_kernels(specs: list[ModelSpec], ctxs: list[int], batches: list[int], out_dir: Path, *, variants: bool = True,
                components: bool = True, sdpa: bool = True, resume: bool = False, backend: str = "wmtp",
                console=None) -> Path:
    """Benchmark on this GPU: kernels.csv (rows appended as measured), kernels.meta.json, summary.md.
    `resume` appends and skips the steps an interrupted run finished."""
    csv_path, done = out_dir / "kernels.csv", out_dir / "kernels.steps-done"
    if resume:  # before the GPU is looked for: a mistake the user hears of at once
        check_resumable(csv_path, done, out_dir / "kernels.meta.json", {"models": [s.key for s in specs], "ctxs": ctxs,
                        "batches": batches, "backend": backend}, "wmtp measure kernels")
    require_gpu()
    from wmtp.measure.backends import get_backend
    from wmtp.measure.bench import BenchConfig, plan, summarize
    from wmtp.measure.provenance import atomic_write_text, collect
    from wmtp.measure.steps import has_rows, recorded_run

    impl = get_backend(backend)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not resume:
        done.unlink(missing_ok=True)
    cfg = BenchConfig(ctxs=ctxs, batches=batches, variants=variants, components=components, sdpa=sdpa, backend=backend)
    prov = backend_provenance(impl)
    if resume:  # the kernel set is known once the GPU is: another set's rows are another measurement
        check_resumable(csv_path, done, out_dir / "kernels.meta.json",
                        {"attention_kernels": prov.get("attention_kernels")}, "wmtp measure kernels")
    meta = collect(TIMER, {
        "command": "wmtp measure kernels", "models": [s.key for s in specs], "ctxs": ctxs, "batches": batches,
        "depth": cfg.depth, "window": cfg.window, "sink": cfg.sink, **prov, "status": "running"})
    try:
        recorded_run(list(plan(specs, cfg, impl)), csv_path, done, out_dir / "kernels.meta.json", meta, resume,
                     console, "`wmtp measure kernels --resume` continues")
    finally:
        if has_rows(csv_path):
            atomic_write_text(out_dir / "summary.md", summarize(csv_path))
    return csv_path


def run_sweep(specs: list[ModelSpec], out_dir: Path, *, quick: bool = False, resume: bool = False,
              backend: str = "wmtp", command: str = "wmtp calibrate", console=None,
              parts: tuple[str, ...] | None = None, moe_impl: str = "wmtp") -> tuple[Path, dict]:
    """The calibration sweep on this GPU: raw.csv (rows appended as measured) and raw.meta.json; `parts` (default:
    all of `wmtp.measure.PARTS`) limits it to some of the sweep. Returns the CSV's path and its provenance
    (fitting it is `wmtp.calibrate`'s). `moe_impl`: the routed-expert kernel of the `moe` rows (`wmtp`, `sglang`)."""
    raw, done = out_dir / "raw.csv", out_dir / "raw.steps-done"
    command += ((" --quick" if quick else "") + (f" --backend {backend}" if backend != "wmtp" else "")
                + (f" --moe-backend {moe_impl}" if moe_impl != "wmtp" else ""))
    parts = tuple(parts or PARTS)
    if resume:  # before the GPU is looked for: a mistake the user hears of at once
        check_resumable(raw, done, out_dir / "raw.meta.json", {"command": command, "models": [s.key for s in specs],
                        "backend": backend, "moe_impl": moe_impl, "parts": list(parts)}, command)
    require_gpu()
    from wmtp.measure.backends import get_backend
    from wmtp.measure.harness import ceiling_rows
    from wmtp.measure.provenance import collect
    from wmtp.measure.steps import recorded_run
    from wmtp.measure.sweep import SweepConfig, sweep_plan

    impl = get_backend(backend)
    prov = backend_provenance(impl)
    if resume:  # the kernel set is known once the GPU is: another set's rows are another measurement
        check_resumable(raw, done, out_dir / "raw.meta.json", {"attention_kernels": prov.get("attention_kernels")},
                        command)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not resume:
        done.unlink(missing_ok=True)
    cfg = SweepConfig.quick() if quick else SweepConfig()
    meta = collect(TIMER, {
        "command": command, "moe_impl": moe_impl, "models": [s.key for s in specs], **prov,
        "sweep": {k: list(v) if isinstance(v, tuple) else v for k, v in vars(cfg).items()}, "parts": list(parts),
        "status": "running"})
    steps = [("ceilings", ceiling_rows)] + sweep_plan(specs, cfg, impl, parts, moe_impl)
    recorded_run(steps, raw, done, out_dir / "raw.meta.json", meta, resume, console,
                 "`wmtp calibrate --resume` continues")
    return raw, meta
