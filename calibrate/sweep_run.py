"""`wmtp calibrate` on a GPU: run the measurement sweep (`wmtp.measure.run.run_sweep`), then fit it
into a profile (`wmtp.calibrate.fitting`; the raw CSV read by `wmtp.calibrate.raw_csv`). The profile's provenance is
the sweep's: GPU, versions, timer, and the attention backend with its library versions.

`--parts` re-measures part of the sweep (after a kernel change: `attention,loop`) and fits it together with the
other parts' rows of an earlier run (`--base-raw`, e.g. the shipped `h200.raw.csv.gz`): the new run's rows replace
the base's rows of the re-measured kinds and its ceilings; `raw.merged.csv` is what gets fitted, and its sidecar
names both runs."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path

from wmtp.calibrate.fitting import fit_raw_to_profile
from wmtp.calibrate.raw_csv import raw_text, read_raw, read_sidecar
from wmtp.calibrate.raw_rows import KV_DTYPE_KINDS
from wmtp.errors import WmtpError
from wmtp.fileio import atomic_write_text, check_lookup
from wmtp.specs import ModelSpec

# The rows each part of the sweep writes (`kernel` column); the ceilings (copy, gemm_peak) belong to every run.
# Rows of another KV dtype (`dtype` fp8) are told apart by their key KIND@DTYPE (`row_key`).
PART_KINDS = {"attention": ("decode_attn", "verify_attn", "extend_attn", "index_build"),
              "components": ("gemm", "moe", "lm_head", "linear_state", "component"),
              "loop": ("draft_loop",),
              "kv-fp8": ("decode_attn@fp8", "verify_attn@fp8", "extend_attn@fp8")}
CEILING_KINDS = ("copy", "gemm_peak")


def row_key(kernel: str, dtype: str) -> str:
    """A raw row's kind as the parts name it: attention over fp8 KV is `verify_attn@fp8`, everything else its
    kernel (a blank or bf16 dtype is the sweep's default KV)."""
    dtype = dtype.strip()
    return f"{kernel}@{dtype}" if kernel in KV_DTYPE_KINDS and dtype not in ("", "bf16") else kernel


def parse_parts(text: str | None) -> tuple[str, ...] | None:
    """`attention,loop` -> ('attention', 'loop'); None: the whole sweep; an empty list or item is an error."""
    if text is None:
        return None
    from wmtp.units import split_list

    parts = tuple(split_list(text, "--parts"))  # '' or 'attention,,loop': an error, not the whole sweep or a drop
    bad = [p for p in parts if p not in PART_KINDS]
    if bad or not parts:
        raise WmtpError(f"unknown sweep part(s) {', '.join(bad) or repr(text)}; known: {', '.join(PART_KINDS)}")
    return parts


def _csv_lines(path: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """(header fields, [(row_key, line)]) of a raw CSV (gunzipped), each data line as its text: a merge copies the
    measurements byte for byte (a round trip through pandas rewrote 1 as 1.0 and dropped digits of times)."""
    lines = raw_text(path).splitlines()
    header = next(csv.reader(lines[:1]), [])
    kind = header.index("kernel") if "kernel" in header else 0
    dtype = header.index("dtype") if "dtype" in header else -1
    rows = []
    for i, line in enumerate(lines[1:], 2):
        if line.strip():
            cells = next(csv.reader([line]))
            if len(cells) != len(header):  # a quoted field across lines, or a cut line: not one row per line
                raise WmtpError(f"{path}: line {i} holds {len(cells)} fields where the header names {len(header)}; "
                                "a merge copies one row per line")
            rows.append((row_key(cells[kind], cells[dtype] if dtype >= 0 else ""), line))
    return header, rows


def _aligned(line: str, header: list[str], to: list[str]) -> str:
    """`line` of a CSV whose columns are `header`, rewritten with the columns `to` (missing ones blank)."""
    cells = dict(zip(header, next(csv.reader([line]))))
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow([cells.get(c, "") for c in to])
    return buf.getvalue()


def merge_raw(new_raw: Path, base_raw: Path, parts: tuple[str, ...], out: Path, base=None) -> tuple[Path, dict]:
    """The base run's rows of the parts not re-measured, plus every row of the new run, written to `out`, each line
    as it stands in its file (`base`: `base_raw` already read and checked by `read_raw`). The base's own splice
    records (`spliced_rows` of its sidecar) whose kinds it keeps travel in `info["spliced_rows"]`, its merge record
    in `info["base_merged_from"]`."""
    read_raw(new_raw)  # both checked as the fit reads them: a corrupt file is an error here, not a silent drop
    if base is None:
        read_raw(base_raw)
    replaced = {k for p in parts for k in PART_KINDS[p]} | set(CEILING_KINDS)
    side = read_sidecar(base_raw)
    records = side.get("spliced_rows") or {}
    if not isinstance(records, dict):
        raise WmtpError(f"{base_raw}'s sidecar is corrupt: spliced_rows must be an object, got "
                        f"{type(records).__name__}")
    spliced = {k: v for k, v in records.items() if k not in replaced}
    b_head, b_rows = _csv_lines(base_raw)
    n_head, n_rows = _csv_lines(new_raw)
    kept = [ln for kind, ln in b_rows if kind not in replaced]
    added = [ln if n_head == b_head else _aligned(ln, n_head, b_head) for _, ln in n_rows]
    head = io.StringIO()
    csv.writer(head, lineterminator="").writerow(b_head)
    atomic_write_text(out, "\n".join([head.getvalue(), *kept, *added]) + "\n")
    info = {"base_raw": str(base_raw), "base_sha256": hashlib.sha256(base_raw.read_bytes()).hexdigest(),
            "base_rows_kept": len(kept), "new_rows": len(added), "remeasured_parts": list(parts),
            "replaced_kinds": sorted(replaced)}
    if spliced:
        info["spliced_rows"] = spliced
    if side.get("merged_from"):
        info["base_merged_from"] = side["merged_from"]
    return out, info


def kernels_of_base(meta: dict, base_raw: Path) -> dict:
    """`meta` with the base run's `attention_kernels` (none where its sidecar names none: a sweep before the ws
    kernel) in place of this run's."""
    kernels = read_sidecar(base_raw).get("attention_kernels")
    return {k: v for k, v in meta.items() if k != "attention_kernels"} | (
        {"attention_kernels": kernels} if kernels else {})


def _check_base_backend(base, base_raw: Path, backend: str) -> None:
    """The base's attention rows, kept when attention is not re-measured, are of `backend`: the profile fits its
    kernels (`raw_rows.check_fitted_rows` refuses them, which after the sweep cost the GPU time of the sweep)."""
    ok = base[base["kernel"].isin(PART_KINDS["attention"]) & (base["status"] == "ok")]
    other = sorted({str(i) for i in ok["impl"].dropna()} - {backend}) if "impl" in ok.columns else []
    if other:
        raise WmtpError(f"--base-raw {base_raw}: its attention rows, which --parts keeps, are of {other[0][:40]!r}, "
                        f"not of --backend {backend}: a profile fits one backend's attention kernels; give --backend "
                        f"{other[0][:40]} or re-measure attention too")


def run_calibrate(specs: list[ModelSpec], out: Path, quick: bool = False, resume: bool = False,
                  backend: str = "wmtp", console=None, parts: tuple[str, ...] | None = None,
                  base_raw: Path | None = None, moe_impl: str = "wmtp") -> Path:
    """Sweep on this GPU (out/raw.csv, appended as measured), fit, write out/profile.json. Returns its path.
    With `parts` short of the whole sweep, `base_raw` supplies the other parts (module docstring); `moe_impl` is
    the routed-expert kernel of the `moe` rows (`wmtp`, or `sglang`: SGLang's fused MoE)."""
    from wmtp.measure import MOE_IMPLS, PARTS
    from wmtp.measure.run import run_sweep

    if moe_impl not in MOE_IMPLS:
        raise WmtpError(f"unknown --moe-backend {moe_impl!r}; known: {', '.join(MOE_IMPLS)}")
    if moe_impl == "sglang":  # SGLang's files absent: one error before any measurement, not a row per shape
        from wmtp.measure.backends import sglang_moe

        sglang_moe.load()
    partial = parts is not None and not set(PARTS) <= set(parts)  # kv-fp8 alone completes nothing
    if partial and base_raw is None:
        raise WmtpError("--parts re-measures part of the sweep: give --base-raw, the raw data of a full run "
                        "whose other parts it completes")
    base = None
    if base_raw is not None:
        check_lookup(base_raw, "--base-raw")
        if not Path(base_raw).exists():
            raise WmtpError(f"no base raw data at {base_raw}")
        base = read_raw(Path(base_raw))  # a corrupt base is an error before the sweep, not after it
        if "attention" not in (parts or PART_KINDS):
            _check_base_backend(base, Path(base_raw), backend)
    raw, meta = run_sweep(specs, out, quick=quick, resume=resume, backend=backend, console=console, parts=parts,
                          moe_impl=moe_impl)
    if not partial:
        return fit_raw_to_profile(raw, out / "profile.json", meta, [s.key for s in specs])
    merged, info = merge_raw(raw, Path(base_raw), parts, out / "raw.merged.csv", base)
    spliced = info.pop("spliced_rows", None)  # the base's spliced rows it kept: their record stays at the top
    meta = {**meta, "merged_from": info, "command": meta.get("command", "wmtp calibrate")
            + f" --parts {','.join(parts)} --base-raw {base_raw}"} | ({"spliced_rows": spliced} if spliced else {})
    if "attention" not in parts:  # the attention rows are the base's: their features follow its kernel set
        meta = kernels_of_base(meta, Path(base_raw))
    atomic_write_text(out / "raw.merged.meta.json", json.dumps(meta, indent=1) + "\n")
    return fit_raw_to_profile(merged, out / "profile.json", meta, [s.key for s in specs])
