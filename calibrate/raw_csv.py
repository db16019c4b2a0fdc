"""Reading a raw sweep CSV (CPU only): the file bounded and gunzipped, its columns and cells checked as numbers a GPU
can have measured, a measurement copied into it refused (`read_raw`, `raw_text`); and its provenance sidecar
(`raw_sidecar`, `read_sidecar`). What the rows describe is checked next by `raw_rows`; `fitting` fits them."""

from __future__ import annotations

import gzip
import io
import math
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from wmtp.errors import WmtpError
from wmtp.fileio import check_lookup, open_without_waiting, read_json

REQUIRED = {"kernel", "model", "config", "ctx", "batch", "d", "window", "time_ms", "bytes", "flops", "status"}
NUMERIC = ("ctx", "batch", "d", "window", "time_ms", "bytes", "flops")
SHAPE = ("ctx", "batch", "d", "window", "sink", "q_heads", "kv_heads", "head_dim", "bytes", "flops")  # where present
MAX_SHAPE = 1e18  # far past any measured shape (bytes of a 1M-token batch included); more is corruption
# a GPU kernel takes more than a nanosecond (1e-6 ms) and less than 28 hours (1e8 ms): outside, a time is corruption
# (1e-300 ms made the copy ceiling infinite and the refit failed on its own output)
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
