"""From a raw sweep CSV to a profile JSON and its markdown summary (CPU only)."""

from __future__ import annotations

import gzip
import io
import json
import math
import re
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from wmtp.calibrate.fit import ceilings, draft_loop_check, fit_all, fit_kv_dtypes
from wmtp.calibrate.profile import build_profile, save_profile
from wmtp.calibrate.raw_rows import check_fitted_rows, skipped_note, split_kv_dtypes
from wmtp.kernel_plan import feature_backend
from wmtp.fileio import atomic_write_text, check_lookup, check_output_path, open_without_waiting, read_json
from wmtp.errors import WmtpError
from wmtp.models import MODELS
from wmtp.profile import load_profile

REQUIRED = {"kernel", "model", "config", "ctx", "batch", "d", "window", "time_ms", "bytes", "flops", "status"}
NUMERIC = ("ctx", "batch", "d", "window", "time_ms", "bytes", "flops")
SHAPE = ("ctx", "batch", "d", "window", "sink", "q_heads", "kv_heads", "head_dim", "bytes", "flops")  # where present
MAX_SHAPE = 1e18  # far past any measured shape (bytes of a 1M-token batch included); more is corruption
# a GPU kernel takes more than a nanosecond (1e-6 ms) and less than 28 hours (1e8 ms): outside, a time is corruption (1e-300 ms made
# the copy ceiling infinite and the refit failed on its own output)
MIN_TIME_MS, MAX_TIME_MS = 1e-6, 1e8
MAX_RAW_BYTES = 512 << 20  # a sweep's CSV is tens of MB (h200.raw.csv: 14 MB); more is not one


def _cell(col: pd.Series, index) -> str:
    value = col.loc[index]
    return "no time" if pd.isna(value) else repr(float(value))


def _raw_bytes(path: Path) -> bytes:
    """The CSV bytes of `path`, gunzipped where it is gzip, at most MAX_RAW_BYTES either way: /dev/zero or a gzip
    bomb was read until memory ran out."""
    if Path(path).is_dir():
        raise IsADirectoryError(21, "it is a folder")
    with open_without_waiting(path) as f:
        data = f.read(MAX_RAW_BYTES + 1)
    if data[:2] == b"\x1f\x8b" and len(data) <= MAX_RAW_BYTES:
        data = gzip.GzipFile(fileobj=io.BytesIO(data)).read(MAX_RAW_BYTES + 1)
    if len(data) > MAX_RAW_BYTES:
        raise WmtpError(f"{path} holds more than {MAX_RAW_BYTES >> 20} MiB of CSV: not a sweep CSV (a device, or a "
                        "gzip bomb?)")
    return data


def _repeated_column(data: bytes) -> str | None:
    """A column the header names twice: pandas renames the second `time_ms.1` and the fit read the first, silently."""
    import csv

    from wmtp.units import first_repeat

    header = data.split(b"\n", 1)[0].decode("utf-8-sig", "replace")
    return first_repeat([c.strip() for c in next(csv.reader([header]), []) if c.strip()])  # blank: unnamed, unread


def raw_text(path: Path) -> str:
    """The text of a raw sweep CSV (gunzipped and bounded as `_raw_bytes`); a missing, unreadable, corrupt or
    non-UTF-8 file is one `WmtpError` (`python -m wmtp.calibrate.splice` read it with read_bytes: tracebacks)."""
    try:
        return _raw_bytes(path).decode()
    except FileNotFoundError:
        raise WmtpError(f"no sweep data at {path}") from None
    except (UnicodeDecodeError, EOFError, OSError, zlib.error) as e:
        raise WmtpError(f"{path} is not a readable sweep CSV ({type(e).__name__})") from None


def read_raw(path: Path) -> pd.DataFrame:
    try:
        data = _raw_bytes(path)
        df = pd.read_csv(io.BytesIO(data), low_memory=False)  # one pass: no DtypeWarning on stderr
    except FileNotFoundError:
        raise WmtpError(f"no sweep data at {path}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, EOFError, OSError, zlib.error) as e:
        # OSError covers a truncated or corrupt .gz (gzip.BadGzipFile) and an unreadable file; pandas' parser says
        # where a row has more fields than the header ('Expected 19 fields in line 7, saw 30')
        where = f": {str(e).strip().splitlines()[-1][:120]}" if isinstance(e, pd.errors.ParserError) else ""
        raise WmtpError(f"{path} is not a readable sweep CSV ({type(e).__name__}{where})") from None
    twice = _repeated_column(data)
    if twice is not None:
        raise WmtpError(f"{path}: the header names column {twice[:40]!r} twice; which one holds the data is not "
                        "said: remove one")
    missing = REQUIRED - set(df.columns)
    if missing:
        raise WmtpError(f"{path} lacks columns {', '.join(sorted(missing))}")
    if df.empty:  # was 'the raw sweep has no rows for q35, q122, nem': of a file that holds no row at all
        raise WmtpError(f"{path} holds a header and no data rows: no measurement to fit")
    for col in dict.fromkeys(NUMERIC + SHAPE + ("rep",)):  # a blank cell is missing (NaN); other text is corruption
        if col not in df.columns:
            continue
        num = _to_numeric(df[col])
        bad = df[col].notna() & num.isna()
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0])
            raise WmtpError(f"{path}: column {col} holds {str(df[col].iloc[row])[:40]!r} on data row {row + 1}, "
                            "not a number")
        if col in SHAPE:  # a shape: finite, >= 0 and bounded (inf or 1e308 was an OverflowError in the features)
            bad = num.notna() & ~((num >= 0) & (num <= MAX_SHAPE))
            if bad.any():
                row = int(bad.to_numpy().nonzero()[0][0])
                raise WmtpError(f"{path}: column {col} holds {str(df[col].iloc[row])[:40]!r} on data row "
                                f"{row + 1}; a shape is a finite number in [0, {MAX_SHAPE:g}]")
        if col != "rep":  # checked only: numbers already where it passes, and a merged raw keeps writing 0, not 0.0
            df[col] = num
    _check_counts(df, path)
    for col in ("bytes", "flops"):  # blank: NaN features, and the least-squares fit a ValueError traceback
        blank = (df["status"] == "ok") & df[col].isna()
        if blank.any():
            raise WmtpError(f"{path}: data row {int(blank.to_numpy().nonzero()[0][0]) + 1} is a successful measurement "
                            f"without {col} (what the kernel moved and computed are its features); give it or "
                            "drop the row")
    t = df["time_ms"][df["status"] == "ok"]
    bad = ~((t >= MIN_TIME_MS) & (t <= MAX_TIME_MS))  # a blank (NaN) time fails too: it was dropped silently
    if bad.any():
        raise WmtpError(f"{path}: a successful measurement needs a positive, finite time_ms in "
                        f"[{MIN_TIME_MS:g}, {MAX_TIME_MS:g}] ms; data row {int(t[bad].index[0]) + 1} has "
                        f"{_cell(df['time_ms'], t[bad].index[0])}")
    copy = _first_copied_measurement(df)
    if copy is not None:
        row, first, n = copy
        what = f"{str(df['kernel'].iloc[row - 1])[:40]}, {str(df['config'].iloc[row - 1])[:60]}"
        raise WmtpError(f"{path}: data row {row} repeats data row {first} ({n} row(s), the same shape and the same "
                        f"time rep by rep: {what}): a measurement copied into the CSV would weigh twice in the fit; "
                        "remove the copy")
    return df


COUNTS = ("ctx", "batch", "d", "window", "sink", "q_heads", "kv_heads", "head_dim", "rep")  # tokens, requests, heads
HEAD_COUNTS = ("q_heads", "kv_heads", "head_dim")  # a shape has at least one of each


def _check_counts(df: pd.DataFrame, path: Path) -> None:
    """The count columns (already numbers) hold whole numbers, the head counts >= 1: 0.5 KV heads was int() 0 and
    q_heads // 0 a ZeroDivisionError traceback in the features, 2.5 query heads two, 0 KV heads one, silently."""
    for col in COUNTS:
        if col not in df.columns:
            continue
        num = _to_numeric(df[col])
        bad = num.notna() & (~np.isfinite(num) | (num != num.round()) | ((num < 1) if col in HEAD_COUNTS else num < 0))
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0])
            least = 1 if col in HEAD_COUNTS else 0
            what = "heads" if col in HEAD_COUNTS else "repetitions" if col == "rep" else "tokens or requests"
            raise WmtpError(f"{path}: column {col} holds {num.iloc[row]:g} on data row {row + 1}; a count of {what} "
                            f"is a whole number >= {least}")


def _to_numeric(col: pd.Series) -> pd.Series:
    """A column's cells as floats, NaN where one is no number; an integer no float holds (400 digits) is no number
    (pandas' to_numeric raised an OverflowError traceback on one)."""
    try:
        return pd.to_numeric(col, errors="coerce")
    except OverflowError:
        def one(v):
            try:
                return float(v)
            except (TypeError, ValueError, OverflowError):
                return math.nan

        return pd.to_numeric(col.map(one), errors="coerce")


COPY_MIN_ROWS = 4  # replays a block needs before a repeat of it is called a copy
COPY_MIN_TIMES = 3  # distinct times among them


def _first_copied_measurement(df: pd.DataFrame) -> tuple[int, int, int] | None:
    """(data row, data row it repeats, rows) of the first successful measurement the CSV holds twice, or None.
    A measurement is a block: consecutive rows of one shape (every column but rep and time_ms), its replays' rep
    rising. The same shape measured again (another call site, a --resume) has other times and is kept; a timer's
    coarse ticks make single rows tie (the shipped h200 sweep holds two such pairs), a whole block does not. A row
    equal to the one before it, rep included, is a copy too (rows pasted one by one)."""
    from wmtp.units import first_repeat

    ok = df[df["status"] == "ok"]
    if ok.empty:
        return None
    shape = pd.util.hash_pandas_object(ok[[c for c in ok.columns if c not in ("rep", "time_ms")]], index=False)
    shape, row = shape.to_numpy(), pd.util.hash_pandas_object(ok, index=False).to_numpy()
    new = np.ones(len(ok), dtype=bool)
    new[1:] = shape[1:] != shape[:-1]
    if "rep" in ok.columns:
        rep = pd.to_numeric(ok["rep"], errors="coerce").to_numpy()
        new[1:] |= rep[1:] <= rep[:-1]
        same = np.flatnonzero(row[1:] == row[:-1])
        if len(same):
            return int(ok.index[same[0] + 1]) + 1, int(ok.index[same[0]]) + 1, 1
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], len(ok))
    times = ok["time_ms"].to_numpy()
    # Only a block with a fingerprint counts: at least COPY_MIN_ROWS replays of at least COPY_MIN_TIMES distinct times.
    # The same shape timed at two call sites can tie in every replay where the times carry no spread (a stable short
    # kernel on a coarse timer; a test's stand-in timer), and that is a measurement, not a copy.
    blocks = [row[a:b].tobytes() if b - a >= COPY_MIN_ROWS and len(set(times[a:b])) >= COPY_MIN_TIMES else (a,)
              for a, b in zip(starts, ends)]  # 64-bit row hashes: a collision is not a concern
    again = first_repeat(blocks)
    if again is None:
        return None
    first, second = [i for i, b in enumerate(blocks) if b == again][:2]
    return int(ok.index[starts[second]]) + 1, int(ok.index[starts[first]]) + 1, int(ends[first] - starts[first])


def raw_sidecar(raw: Path) -> Path:
    """The provenance sidecar of a raw sweep CSV, as the sweep and the shipped profiles name it: raw.csv ->
    raw.meta.json, h200.raw.csv.gz -> h200.raw.meta.json (else NAME.csv.meta.json beside a .gz, where that exists)."""
    check_lookup(raw, "raw sweep CSV")
    if raw.is_dir() or not raw.name:  # '/' or '.' has no name to put a sidecar beside (a ValueError)
        raise WmtpError(f"{raw} is a folder, not a raw sweep CSV: give its raw.csv (or .csv.gz)")
    name = raw.name
    base = next((name[: -len(x)] for x in (".csv.gz", ".csv", ".gz") if name.endswith(x) and len(name) > len(x)),
                raw.stem)
    plain, other = raw.with_name(base + ".meta.json"), raw.with_name(raw.stem + ".meta.json")
    return other if not plain.exists() and other.exists() else plain


def read_sidecar(raw: Path) -> dict:
    """The raw CSV's provenance sidecar (`raw_sidecar`) as a dict; {} where it has none."""
    meta_path = raw_sidecar(raw)
    meta = read_json(meta_path, "raw-data metadata", WmtpError) if meta_path.exists() else {}
    if not isinstance(meta, dict):
        raise WmtpError(f"{meta_path} is not a JSON object")
    return meta


def refit_raw(raw: Path, profile_path: Path, models: list[str], hw_key: str | None = None,
              explicit_models: bool = True) -> Path:
    """`wmtp calibrate --from-raw`: refit a raw sweep CSV (its .meta.json sidecar, if any, is the provenance, and
    a `hw_key` given must agree with it; without one, the data is taken to come from GPU `hw_key`, else h200)."""
    from wmtp.hardware import get_hardware

    meta_path = raw_sidecar(raw)
    meta = read_sidecar(raw)
    sm = meta.get("gpu_sm_count")
    if sm is not None and (isinstance(sm, bool) or not isinstance(sm, int) or not 1 <= sm <= 100_000):
        raise WmtpError(f"{meta_path}: gpu_sm_count must be a count in 1..100000, got {repr(sm)[:40]}")
    if meta.get("gpu_name") and hw_key is not None and hardware_key(meta) != hw_key:
        raise WmtpError(f"{meta_path} says the sweep ran on {str(meta['gpu_name'])[:60]} ({hardware_key(meta)}); "
                        f"--hw {hw_key} contradicts it (--hw names the GPU of a raw sweep without a sidecar)")
    if not meta.get("gpu_name"):
        gpu = get_hardware(hw_key or "h200")
        meta = {**meta, "gpu_name": gpu.name, "gpu_sm_count": meta.get("gpu_sm_count") or gpu.sm_count,
                "note": f"no provenance sidecar: taken to be measured on {gpu.key} (--hw)"}
    return fit_raw_to_profile(raw, profile_path, meta, models, explicit_models)


def sm_count_of(meta: dict) -> int:
    """The SM count the raw data was measured with (its provenance), else the hardware row's."""
    from wmtp.hardware import HARDWARE

    if meta.get("gpu_sm_count"):
        return int(meta["gpu_sm_count"])
    row = HARDWARE.get(hardware_key(meta))
    if row is None:
        raise WmtpError(f"the raw data's provenance names GPU {meta.get('gpu_name')!r}, which has no SM count "
                        "(gpu_sm_count) and no hardware row: add gpu_sm_count to its .meta.json")
    return row.sm_count


# form factors of a GPU the registry's rows (SXM / HGX datasheets) are not: their bandwidth, clocks or memory differ
_OTHER_FORM_FACTORS = {"pcie", "nvl"}


def hardware_key(meta: dict) -> str:
    """The registry key of the GPU named in the provenance ("NVIDIA H200" -> h200, "NVIDIA H100 80GB HBM3" ->
    h100-sxm), matched by whole words: "NVIDIA GH200 480GB" (4.0 TB/s) was h200 (4.8) by a substring, and "NVIDIA H100
    PCIe" (2.0 TB/s) h100-sxm (3.35), so a profile measured on one was scaled to other GPUs with the wrong ratios. A
    GPU with no row keeps its own name as key (a profile of it is refused where it would be scaled)."""
    from wmtp.hardware import HARDWARE

    name = str(meta.get("gpu_name", "unknown"))
    words = set(re.split(r"[^a-z0-9]+", name.lower()))
    if not words & _OTHER_FORM_FACTORS:
        for key in HARDWARE:
            if key.split("-")[0] in words:
                return key
    return name.lower().replace(" ", "-")


def measured_models(df, raw: Path, models: list[str], explicit: bool) -> list[str]:
    """The models a refit profile says it was fitted for: those of `models` the raw sweep measured. A model
    `--models` names explicitly that the sweep has no rows for is refused (the profile would claim a fit for it);
    the default list is cut to the sweep's models (a `--quick` or one-model sweep)."""
    have = {str(m) for m in df["model"].dropna()} if "model" in df.columns else set()  # ceiling rows have none
    missing = [m for m in models if m not in have]
    kept = [m for m in models if m in have]
    if (missing and explicit) or not kept:
        found = ", ".join(sorted(have)[:8]) or "none"
        raise WmtpError(f"{raw}: the raw sweep has no rows for {', '.join(missing)} (it measured {found}); "
                        "give --models from those")
    return kept


def fit_raw_to_profile(raw: Path, profile_path: Path, meta: dict, models: list[str], explicit: bool = True) -> Path:
    df = read_raw(raw)
    models = measured_models(df, raw, models, explicit)
    sm = sm_count_of(meta)
    backend = str(meta.get("backend") or "wmtp")
    skipped = check_fitted_rows(df, raw, meta.get("backend"))  # the rows the fit leaves, counted: said, never silent
    meta = {k: v for k, v in meta.items() if k != "skipped_rows"} | ({"skipped_rows": skipped} if skipped else {})
    kernels = meta.get("attention_kernels")
    df, other_kv = split_kv_dtypes(df)
    fits = fit_all(df, sm, feature_backend(backend, kernels))
    loop = draft_loop_check(df, fits, dict(MODELS), sm, feature_backend(backend, kernels))
    fits |= fit_kv_dtypes(other_kv, sm, feature_backend(backend, kernels))
    hw = hardware_key(meta)
    prof = build_profile(fits, hw, meta, ceilings(df), raw, models,
                         extra={"draft_loop_check": loop, "backend": backend, "moe_backend": moe_backend_of(meta),
                                **({"attention_kernels": kernels} if kernels else {}),
                                "backend_versions": meta.get("backend_versions", {})})
    check_output_path(profile_path.with_suffix(".md"), "profile summary")  # both writable, or neither is written
    save_profile(prof, profile_path)
    atomic_write_text(profile_path.with_suffix(".md"), profile_summary(prof))
    return profile_path


def moe_backend_of(meta: dict) -> str:
    """The routed-expert kernel of a sweep's `moe` rows: its `moe_impl`, or the `impl` of `moe_rows` replaced from
    another run (both in the raw meta), else wmtp's own."""
    rows = meta.get("moe_rows") if isinstance(meta.get("moe_rows"), dict) else {}
    return str(meta.get("moe_impl") or rows.get("impl") or "wmtp")


def profile_summary(prof: dict) -> str:
    p = prof["provenance"]
    kernels = prof.get("attention_kernels")
    lines = [f"# Latency profile: {prof['hardware']} (attention backend: {prof.get('backend', 'wmtp')}"
             f"{f', kernel set {kernels}' if kernels else ''})", "",
             f"GPU {p.get('gpu_name')} (driver {p.get('driver')}), torch {p.get('torch')}, triton {p.get('triton')}, "
             f"wmtp {p.get('wmtp_version')} at {p.get('git_sha')}, {p.get('utc_time')}; timer: {p.get('timer')}.",
             f"Ceilings in the same run: {json.dumps(prof.get('ceilings', {}))}. "
             f"Raw data: {prof['raw_data']['file']} (sha256 {prof['raw_data']['sha256'][:16]}...)."
             + (f" {note}." if (note := skipped_note(p.get("skipped_rows"))) else ""), "",
             "Held-out error per component (leave-one-shape-out: each shape predicted by a fit that did not see it):", "",
             "| component | shapes | median abs err | p90 abs err | max | fit (ms) |", "|---|---|---|---|---|---|"]
    for kind, c in sorted(prof["components"].items()):
        h = c["heldout"]
        fit = " + ".join(f"{v:.3g}*{f}" for f, v in zip(c["features"], c["coef_ms"]) if v)
        pct = [f"{h[k]:.1%}" if h[k] is not None else "n/a (too few shapes)" for k in ("median_rel", "p90_rel", "max_rel")]
        lines.append(f"| {kind} | {c['n_shapes']} | {' | '.join(pct)} | {fit} |")
    loop = prof.get("draft_loop_check") or []
    if loop:
        lines += ["", "Draft loop (gamma back-to-back draft forwards, per forward) against the sum of the cold "
                  "component fits:", "", "| model | ctx | B | gamma | window | measured ms | component sum ms | diff |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in loop:
            diff = f"{r['rel_err']:+.1%}" if not math.isnan(r["rel_err"]) else "n/a"
            lines.append(f"| {r['model']} | {r['ctx']} | {r['batch']} | {r['gamma']} | {r['window'] or '-'} | "
                         f"{r['measured_ms']:.4f} | {r['predicted_ms']:.4f} | {diff} |")
    return "\n".join(lines) + "\n"


TP_FIT_NAME = re.compile(r"allreduce_tp([2-9]|[1-9][0-9]{1,3})\.json")  # N GPUs, 2..9999, plain digits


def _tp_raw_sha256(raw: Path) -> str:
    """The sha256 of a tp_bench run's raw rows, a regular file (a folder was an IsADirectoryError traceback, a FIFO
    a read that waited for a writer forever)."""
    import hashlib

    if not raw.is_file():
        raise WmtpError(f"{raw} is not a file (a folder, a FIFO or a device): tp_bench writes its raw rows there")
    try:
        return hashlib.sha256(raw.read_bytes()).hexdigest()
    except OSError as e:
        raise WmtpError(f"cannot read {raw}: {e.strerror or e}") from None


def merge_tp(profile_path: Path, tp_dir: Path) -> list[str]:
    """Add the all-reduce fits of a `torchrun -m wmtp.measure.tp_bench` run (its --out folder) to a
    profile, with the sha256 of their raw data. Returns the components added."""
    prof = load_profile(profile_path)
    raw = tp_dir / "tp_raw.csv"
    check_lookup(raw, "tp_bench output")
    if not raw.exists():
        raise WmtpError(f"no tp_raw.csv in {tp_dir}")
    digest = _tp_raw_sha256(raw)
    meta_path = tp_dir / "tp.meta.json"
    meta = read_json(meta_path, "TP metadata", WmtpError) if meta_path.exists() else {}
    if not isinstance(meta, dict):  # the GPU check below was skipped, and the document recorded as the run's metadata
        raise WmtpError(f"{meta_path} is corrupt: tp_bench writes an object of the run's facts (gpu_name, ...), got "
                        f"{type(meta).__name__}")
    if meta.get("gpu_name") and hardware_key(meta) != prof["hardware"]:
        # the profile prices its own GPU's all-reduces with the fit: a B200 run's NVLink 5 priced the H200's
        raise WmtpError(f"{meta_path} says the TP run was on {str(meta['gpu_name'])[:60]} ({hardware_key(meta)}), "
                        f"the profile {profile_path} measures {prof['hardware']}: its all-reduce fit would price "
                        f"{prof['hardware']}'s links; merge it into a profile of {hardware_key(meta)}")
    added = []
    for fit_path in sorted(tp_dir.glob("allreduce_tp*.json")):
        if not TP_FIT_NAME.fullmatch(fit_path.name):  # the pricing reads allreduce_tp<N> only: merged, never read
            raise WmtpError(f"{fit_path}: an all-reduce fit is named allreduce_tp<N>.json for N >= 2 GPUs (as tp_bench "
                            "writes it); no TP size reads this name: rename it or move it out of the folder")
        prof["components"][fit_path.stem] = read_json(fit_path, "all-reduce fit", WmtpError)
        added.append(fit_path.stem)
    if not added:
        raise WmtpError(f"no allreduce_tp*.json fit in {tp_dir}")
    prof.setdefault("tp_raw_data", {})[",".join(added)] = {"file": raw.name, "sha256": digest, "meta": meta}
    save_profile(prof, profile_path)
    return added


KV_DTYPE_KERNELS = {"": "decode_attn", "custom-mask": "verify_attn", "causal": "extend_attn"}
KV_DTYPE_WORK = {"decode_attn": "fwd.attention", "verify_attn": "verify.attention", "extend_attn": "ctx.extend_attention"}


def kv_dtype_rows(raw: pd.DataFrame, backend: str, kv_dtype: str) -> pd.DataFrame:
    """A side-by-side benchmark's rows of one backend over another KV dtype (config `fp8-kv`, `fp8-kv custom-mask`,
    `fp8-kv causal`), as sweep rows of the attention kinds they time (named as the latency model's work items)."""
    cfg = raw["config"].astype(str)
    sel = raw[(raw["impl"] == backend) & cfg.str.startswith(f"{kv_dtype}-kv")].copy()
    rest = sel["config"].astype(str).str.slice(len(kv_dtype) + 4).str.strip()
    sel["kernel"] = rest.map(KV_DTYPE_KERNELS)
    sel = sel[sel["kernel"].notna()]
    sel["config"] = sel["kernel"].map(KV_DTYPE_WORK)
    sel["window"] = ""
    if sel.empty:
        raise WmtpError(f"no {backend} rows over {kv_dtype} KV (configs '{kv_dtype}-kv ...') in the benchmark data")
    return sel


def merge_kv_dtype(profile_path: Path, bench_csv: Path, kv_dtype: str = "fp8") -> list[str]:
    """Fit the attention kinds a backends benchmark timed over `kv_dtype` KV (same GPU, same backend as the
    profile) and add them to the profile as `KIND@kv_dtype`, with the benchmark's sha256. Returns them."""
    import hashlib

    prof = load_profile(profile_path)
    backend = str(prof.get("backend") or prof.get("provenance", {}).get("backend") or "wmtp")
    sm = int(prof.get("provenance", {}).get("gpu_sm_count") or sm_count_of(prof.get("provenance", {})))
    rows = kv_dtype_rows(read_raw(bench_csv), backend, kv_dtype)
    fits = fit_all(rows, sm, feature_backend(backend, prof.get("attention_kernels")))
    added = []
    for kind, f in fits.items():
        comp = build_profile({kind: f}, prof["hardware"], {}, {}, bench_csv, [])["components"][kind]
        prof["components"][f"{kind}@{kv_dtype}"] = comp
        added.append(f"{kind}@{kv_dtype}")
    prof.setdefault("kv_dtype_raw_data", {})[kv_dtype] = {
        "file": bench_csv.name, "sha256": hashlib.sha256(bench_csv.read_bytes()).hexdigest(),
        "components": added}
    check_output_path(profile_path.with_suffix(".md"), "profile summary")  # both writable, or neither is written
    save_profile(prof, profile_path)
    atomic_write_text(profile_path.with_suffix(".md"), profile_summary(prof))
    return added
