"""Re-measure one kind of a sweep, not the whole sweep: splice new rows of one work kind into a raw sweep in place of
that kind's rows, then carry what a shipped profile holds beyond its raw sweep into the refit.

`splice_rows` keeps every other line of the base verbatim (other files and tests compare them as text; the sweep
writes `\\r\\n` line ends, pandas `\\n`: the new rows take the base's) and records where the new rows came from in the
sidecar (`spliced_rows`, one entry per kind). `carry_extras` takes the profile `wmtp calibrate --from-raw` fitted on
the spliced raw and adds, unchanged, the shipped profile's components that are not fitted from the raw sweep (TP
all-reduces, quantized weights and fp8 KV, `KIND@DTYPE`) with their raw-data records, and the sections later merges
appended to its .md.

    python -m wmtp.calibrate.splice rows BASE.raw.csv.gz NEW_ROWS.csv.gz KIND OUTDIR
    wmtp calibrate --from-raw OUTDIR/BASE.raw.csv.gz --out CAL
    python -m wmtp.calibrate.splice carry SHIPPED.json CAL/profile.json OUT.json
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import json
import sys
from pathlib import Path

from wmtp.calibrate.fitting import profile_summary
from wmtp.calibrate.raw_csv import raw_sidecar, raw_text, read_sidecar
from wmtp.calibrate.profile import save_profile
from wmtp.errors import WmtpError
from wmtp.fileio import atomic_write_bytes, atomic_write_text, check_output_folder, check_output_path
from wmtp.profile import load_profile

CARRIED_TOP = ("tp_raw_data", "weight_dtype_raw_data", "kv_dtype_raw_data")


def _lines(path: Path) -> list[str]:
    return raw_text(path).splitlines(keepends=True)


def _check_targets(base: Path, new: Path, target: Path) -> None:
    """The spliced raw and its sidecar destroy no input: OUTDIR the base's own folder wrote the splice over the base
    (its other rows of `kind` gone), a new-rows file named like the base in OUTDIR was replaced by it."""
    import os

    read = {os.path.realpath(p): p for p in (base, new, raw_sidecar(base), raw_sidecar(new))}
    for out in (target, raw_sidecar(target)):
        if os.path.realpath(out) in read:
            raise WmtpError(f"OUTDIR {target.parent} would write {out}, an input of the splice ("
                            f"{read[os.path.realpath(out)]}): writing it would destroy that input; give another folder")
        check_output_path(out, "spliced raw sweep")


def splice_rows(base: Path, new: Path, kind: str, out_dir: Path) -> tuple[Path, int, int]:
    """OUT_DIR/<base's name> (gzip) and its sidecar: `base` without its `kind` rows, plus `new`'s rows, which must all
    be ok rows of that kind with the base's columns. Returns (the written raw, rows replaced, rows added)."""
    check_output_folder(out_dir, "OUTDIR")
    target = out_dir / base.name
    _check_targets(base, new, target)
    lines, rows = _lines(base), _lines(new)
    if not lines or not rows or rows[0].rstrip("\r\n") != lines[0].rstrip("\r\n"):
        raise WmtpError(f"{new} does not have the columns of {base}")
    head = next(csv.reader([lines[0]]))
    if not {"kernel", "status"} <= set(head):
        raise WmtpError(f"{base} has no kernel and status columns: not a raw sweep")
    k_col, s_col = head.index("kernel"), head.index("status")
    end = lines[0][len(lines[0].rstrip("\r\n")):]
    added = [ln.rstrip("\r\n") + end for ln in rows[1:] if ln.strip()]
    short = next((f for f, part in ((new, added), (base, lines[1:])) for r in csv.reader(part)
                  if r and len(r) != len(head)), None)
    if short is not None:
        raise WmtpError(f"{short} has a row of another number of fields than its header's {len(head)}")
    bad = [r for r in csv.reader(added) if r[k_col] != kind or r[s_col] != "ok"]  # (a quoted field may hold commas)
    if bad or not added:
        raise WmtpError(f"{new} must hold ok rows of kind {kind} only; {len(bad)} are not")
    kept = [ln for ln, r in zip(lines[1:], csv.reader(lines[1:])) if r and r[k_col] != kind]
    out_dir.mkdir(parents=True, exist_ok=True)
    # mtime 0 in the gzip header: the same rows give the same bytes
    atomic_write_bytes(target, gzip.compress("".join([lines[0], *kept, *added]).encode(), mtime=0))
    side = read_sidecar(base)
    new_meta = read_sidecar(new)
    side.setdefault("spliced_rows", {})[kind] = {
        "replaced_rows": len(lines) - 1 - len(kept), "new_rows": len(added), "file": str(new),
        "sha256": hashlib.sha256(new.read_bytes()).hexdigest(),
        **{k: new_meta[k] for k in ("command", "git_sha", "utc_time", "gpu_name") if k in new_meta}}
    atomic_write_text(raw_sidecar(target), json.dumps(side, indent=1) + "\n")
    return target, len(lines) - 1 - len(kept), len(added)


def carry_extras(shipped: Path, refit: Path, out: Path) -> list[str]:
    """`refit` with the components it lacks and the raw-data records of `shipped` (module docstring) written to
    `out` (+ .md). Returns the components carried."""
    old, new = load_profile(shipped), load_profile(refit)  # checked: '{}' or a list was a KeyError / TypeError
    carried = sorted(set(old["components"]) - set(new["components"]))
    for k in carried:
        new["components"][k] = old["components"][k]
    for k in CARRIED_TOP:
        if k in old:
            new[k] = old[k]
    save_profile(new, out)
    summary = profile_summary(new)
    old_md = shipped.with_suffix(".md")
    md = old_md.read_text().splitlines(keepends=True) if old_md.exists() else []
    heads = {ln for ln in summary.splitlines() if ln.startswith("## ")}
    cut = next((i for i, ln in enumerate(md) if ln.startswith("## ") and ln.rstrip("\n") not in heads), None)
    tail = "".join(md[cut:]) if cut is not None else ""
    atomic_write_text(out.with_suffix(".md"), summary.rstrip("\n") + "\n\n" + tail if tail else summary)
    return carried


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("rows")
    r.add_argument("base", type=Path)
    r.add_argument("new", type=Path)
    r.add_argument("kind")
    r.add_argument("out_dir", type=Path)
    c = sub.add_parser("carry")
    c.add_argument("shipped", type=Path)
    c.add_argument("refit", type=Path)
    c.add_argument("out", type=Path)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "rows":
            target, replaced, added = splice_rows(a.base, a.new, a.kind, a.out_dir)
            print(f"{target}: {added} {a.kind} rows in place of {replaced}")
        else:
            print(f"{a.out}: carried {', '.join(carry_extras(a.shipped, a.refit, a.out)) or 'nothing'}")
    except WmtpError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
