"""The rows of a raw sweep a refit fits, checked as what they describe, and the rows it leaves, counted.

`raw_csv.read_raw` has made every shape column a number (a blank cell: NaN) and refused text, negatives, fractions of
a count and values past any shape. A row the fit reads (status `ok`; a kernel of `wmtp.features.FEATURES` or
`draft_loop`, `FITTED`; or a ceiling, `copy` / `gemm_peak`) must also describe what a GPU can have run
(`check_fitted_rows`):

- an attention row (decode / verify / extend attention, an index build, the draft loop) gives its ctx and batch,
  a verify, extend or loop row its d too, a linear-state row its batch and d (`NEEDS`): a blank ctx was priced as
  attention over 0 keys, a blank batch as 1 request;
- where given, ctx, batch, d and window are >= 1 (batch 0 was read as 1 request and window 0 as no window, silently)
  and within the tool's own bounds (`BOUNDS`); a draft loop runs gamma = d - 1 >= 1 forwards; q_heads is a whole
  multiple of kv_heads (a GQA group of 1.5 heads was floored to 1);
- every kernel moved bytes (a copy of 0 bytes made a 0 TB/s ceiling) and the GEMM peak did flops;
- an attention row is of the profile's attention backend (column `impl`): the fit groups shapes without it, so a
  tuning variant's (`wmtp[...]`) or another backend's times were averaged into the backend's medians.

Each is one `WmtpError` naming the file, the data row (1 = the first row under the header), the column and the value.
Rows the fit does not read — a status other than `ok` (a shape that failed, or did not fit the GPU), a kernel no fit
or ceiling reads, a draft loop of a model with no registry row — were dropped without a word; they are counted by
reason (`skipped_rows`), kept in the profile's provenance (`skipped_rows`) and said in one line (`skipped_note`:
`wmtp calibrate` prints it as `note: ...` on stderr, the profile's summary holds it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from wmtp.acceptance import MAX_DEPTH
from wmtp.errors import WmtpError
from wmtp.features import FEATURES
from wmtp.latency import MAX_BATCH
from wmtp.specs import MAX_COUNT
from wmtp.units import MAX_TOKENS, printable

ATTENTION_KINDS = ("decode_attn", "verify_attn", "extend_attn", "index_build")
LOOP_KIND = "draft_loop"
CEILING_KINDS = ("copy", "gemm_peak")
FITTED = (*FEATURES, LOOP_KIND)  # kinds whose rows are fitted (draft_loop: checked against the fits)
# the shape columns a kind's time depends on, as its work items carry them (`wmtp.latency`; a decode or an index
# build is one query per request: a blank d is 1)
NEEDS = {"decode_attn": ("ctx", "batch"), "index_build": ("ctx", "batch"), "verify_attn": ("ctx", "batch", "d"),
         "extend_attn": ("ctx", "batch", "d"), LOOP_KIND: ("ctx", "batch", "d"), "linear_state": ("batch", "d")}
# column: (least, most, what it counts); where given on a fitted row
BOUNDS = {"ctx": (1, MAX_TOKENS, "context tokens"), "batch": (1, MAX_BATCH, "requests"),
          "d": (1, MAX_DEPTH, "query tokens per request"), "window": (1, MAX_TOKENS, "window tokens"),
          "sink": (0, MAX_TOKENS, "sink tokens"), "q_heads": (1, MAX_COUNT, "query heads"),
          "kv_heads": (1, MAX_COUNT, "KV heads"), "head_dim": (1, MAX_COUNT, "head dims")}
SHOWN_REASONS = 6  # reasons a note names; the rest are summed


def _shown(value) -> str:
    if pd.isna(value):
        return "nothing (a blank cell)"
    return f"{value:g}" if isinstance(value, (int, float)) else repr(printable(str(value))[:40])


def _first(bad) -> int | None:
    """The position of the first row of a boolean mask, None where there is none."""
    hits = (bad.to_numpy() if isinstance(bad, pd.Series) else bad).nonzero()[0]
    return int(hits[0]) if len(hits) else None


def _at(df: pd.DataFrame, path: Path, i: int) -> str:
    kind = df["kernel"].iloc[i]
    return f"{path}: data row {i + 1} ({'no kernel' if pd.isna(kind) else f'kernel {printable(str(kind))[:40]!r}'})"


def _refuse_first(bad, df: pd.DataFrame, path: Path, col: str, why: str) -> None:
    """A `WmtpError` at the first row of `bad` (a boolean mask over `df`'s rows), if any."""
    i = _first(bad)
    if i is not None:
        raise WmtpError(f"{_at(df, path, i)} has {col} {_shown(df[col].iloc[i])}; {why}")


def check_fitted_rows(df: pd.DataFrame, path: Path, backend: object = None) -> dict:
    """Refuse a row the fit reads that no GPU can have run (module docstring); the rows it does not read, counted
    (`skipped_rows`; {} where it reads every row). `df` is `raw_csv.read_raw`'s (a RangeIndex); `backend` the raw's
    sidecar's (None: wmtp; one that is no name is refused as the profile is saved, the impl check skipped here)."""
    backend = "wmtp" if backend is None or backend == "" else backend if isinstance(backend, str) else None
    status = df["status"]
    _refuse_first(status.isna() | (status.astype(str).str.strip() == ""), df, path, "status",
                  "every row says ok or why its shape failed (a line cut short?)")
    ok = (status == "ok").to_numpy()
    _refuse_first(ok & df["kernel"].isna().to_numpy(), df, path, "kernel", "a measurement names the kernel it timed")
    kinds = df["kernel"].astype(str)
    fitted = ok & kinds.isin(FITTED).to_numpy()
    for kind, cols in NEEDS.items():
        for col in cols:
            _refuse_first(fitted & (kinds == kind).to_numpy() & df[col].isna().to_numpy(), df, path, col,
                          f"every {kind} row gives its {col}, which its time depends on")
    loop = (kinds == LOOP_KIND).to_numpy()
    for col, (least, most, unit) in BOUNDS.items():
        if col in df.columns:
            num = df[col].to_numpy(float)
            low = np.where(loop, 2, least) if col == "d" else least  # a draft loop runs gamma = d - 1 >= 1 forwards
            bad = fitted & ~np.isnan(num) & ((num < low) | (num > most))
            i = _first(bad)
            if i is not None:
                least_here = 2 if col == "d" and loop[i] else least
                raise WmtpError(f"{_at(df, path, i)} has {col} {_shown(df[col].iloc[i])}; a measured shape has "
                                f"{least_here}..{int(most)} {unit}" + _BOUND_NOTES.get((col, bool(loop[i])), ""))
    if {"q_heads", "kv_heads"} <= set(df.columns):
        q, kv = df["q_heads"].to_numpy(float), df["kv_heads"].to_numpy(float)
        attention = fitted & kinds.isin((*ATTENTION_KINDS, LOOP_KIND)).to_numpy()
        i = _first(attention & ~np.isnan(q) & ~np.isnan(kv) & (np.fmod(q, np.where(kv > 0, kv, 1)) != 0))
        if i is not None:
            raise WmtpError(f"{_at(df, path, i)} has q_heads {q[i]:g} and kv_heads {kv[i]:g}; a GQA group shares "
                            "each KV head among a whole number of query heads")
    _refuse_first((fitted | (ok & (kinds == "copy").to_numpy())) & ~(df["bytes"] > 0).to_numpy(), df, path, "bytes",
                  "a kernel that was timed moved bytes (what it read and wrote are its features)")
    _refuse_first(ok & (kinds == "gemm_peak").to_numpy() & ~(df["flops"] > 0).to_numpy(), df, path, "flops",
                  "the GEMM peak's rate is its flops over its time")
    if backend is not None and "impl" in df.columns:
        impl = df["impl"]
        other = impl.notna().to_numpy() & (impl.astype(str) != backend).to_numpy()
        _refuse_first(ok & kinds.isin(ATTENTION_KINDS).to_numpy() & other, df, path, "impl",
                      f"the profile fits the attention backend {backend!r} (the sidecar's backend; wmtp where there "
                      "is no sidecar), and its shapes are grouped without impl: another backend's or a tuning "
                      "variant's times would be averaged into them; drop those rows, or give the raw CSV the "
                      ".meta.json sidecar of the run that measured them")
    return skipped_rows(df, ok, kinds)


_BOUND_NOTES = {("window", False): " (a native row leaves window blank)",
                ("window", True): " (a native row leaves window blank)",
                ("d", True): " (a draft loop of gamma = d - 1 >= 1 forwards)"}


def status_class(status: str) -> str:
    """A row's status as a reason: `skipped: needs 9.0 GiB ...` -> skipped, `error: OutOfMemoryError: CUDA ...` ->
    error: OutOfMemoryError (what failed, not its message)."""
    head, _, rest = status.partition(":")
    head = head.strip()
    if head == "error" and rest.strip():
        head = f"error: {rest.split(':')[0].strip()}"
    return printable(head)[:60]


def skipped_rows(df: pd.DataFrame, ok, kinds: pd.Series) -> dict:
    """{"rows": n, "reasons": [{"reason": ..., "rows": n}, ...]} of the rows the fit does not read, most first;
    {} where there are none."""
    from wmtp.models import MODELS

    counts: dict[str, int] = {}
    for s, n in df["status"][~ok].astype(str).map(status_class).value_counts().items():
        counts[f"status {s!r}"] = counts.get(f"status {s!r}", 0) + int(n)
    known = kinds.isin((*FITTED, *CEILING_KINDS)).to_numpy()
    for k, n in kinds[ok & ~known].value_counts().items():
        counts[f"unknown kernel {printable(k)[:40]!r}"] = int(n)
    loops = ok & (kinds == LOOP_KIND).to_numpy()
    models = df["model"].astype(str) if "model" in df.columns else pd.Series("", index=df.index)
    for m, n in models[loops & ~models.isin(list(MODELS)).to_numpy()].value_counts().items():
        counts[f"draft_loop of model {printable(m)[:40]!r} (no registry row to price it)"] = int(n)
    if not counts:
        return {}
    reasons = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return {"rows": sum(counts.values()), "reasons": [{"reason": r, "rows": n} for r, n in reasons]}


def skipped_note(skipped: dict | None) -> str | None:
    """`12 rows skipped: status 'oom' (10), unknown kernel 'foo' (2)` (None: none skipped)."""
    if not skipped or not isinstance(skipped.get("reasons"), list):
        return None
    shown = [f"{r.get('reason')} ({r.get('rows')})" for r in skipped["reasons"][:SHOWN_REASONS] if isinstance(r, dict)]
    rest = skipped["reasons"][SHOWN_REASONS:]
    if rest:
        shown.append(f"{len(rest)} other reasons ({sum(int(r.get('rows', 0)) for r in rest if isinstance(r, dict))})")
    n = skipped.get("rows")
    return f"{n} row{'s' if n != 1 else ''} not fitted: {', '.join(shown)}"


def skipped_note_of(profile_path: Path) -> str | None:
    """The note of a profile just written (`skipped_note` of its provenance's `skipped_rows`)."""
    from wmtp.fileio import read_json

    prof = read_json(profile_path, "latency profile", WmtpError)
    prov = prof.get("provenance") if isinstance(prof, dict) else None
    return skipped_note(prov.get("skipped_rows")) if isinstance(prov, dict) else None


KV_DTYPE_KINDS = ("decode_attn", "verify_attn", "extend_attn")  # attention kinds that read the KV cache


def split_kv_dtypes(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """A sweep's rows, less its attention rows over another KV dtype (`dtype` fp8: the `kv-fp8` part), and those
    rows by dtype (fitted as KIND@DTYPE). A raw without a dtype column is all bf16."""
    if "dtype" not in df.columns:
        return df, {}
    dtype = df["dtype"].fillna("bf16").astype(str).str.strip().replace("", "bf16")
    other = df["kernel"].isin(KV_DTYPE_KINDS) & (dtype != "bf16")
    unknown = set(dtype[other]) - {"fp8"}
    if unknown:
        raise WmtpError(f"attention rows over KV dtype {sorted(unknown)[0][:20]!r}: a profile fits bf16 and fp8 KV")
    return df[~other], {d: df[other & (dtype == d)] for d in sorted(set(dtype[other]))}
