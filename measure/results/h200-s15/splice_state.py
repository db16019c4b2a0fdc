"""Splice run 1's `linear_state` rows (intermediate states saved at d >= 2) into a shipped raw sweep in place of its
own `linear_state` rows; every other row is kept as it is. Writes OUT/NAME.raw.csv.gz and its sidecar
OUT/NAME.raw.meta.json (the base sidecar, plus `linear_state_rows`: where the new rows came from).

    python measure/results/h200-s15/splice_state.py wmtp_model/data/profiles/h200.raw.csv.gz OUTDIR
    wmtp calibrate --from-raw OUTDIR/h200.raw.csv.gz --out CAL                      # then refit
    python measure/results/h200-s15/splice_state.py carry wmtp_model/data/profiles/h200.json CAL/profile.json OUT.json
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
NEW = HERE / "run1" / "state_raw.csv.gz"


def main(base: str, out_dir: str) -> None:
    """Line by line: the base's lines are kept verbatim (other files compare them as text), its `linear_state` lines
    dropped, run 1's lines appended (the same columns)."""
    base, out = Path(base), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    lines = gzip.decompress(base.read_bytes()).decode().splitlines(keepends=True)
    new = gzip.decompress(NEW.read_bytes()).decode().splitlines(keepends=True)
    if new[0].rstrip("\r\n") != lines[0].rstrip("\r\n"):
        raise SystemExit("run 1's state rows have other columns than the base")
    end = lines[0][len(lines[0].rstrip("\r\n")):]  # the base's line ending (the sweep writes \r\n, pandas \n)
    new = [ln.rstrip("\r\n") + end for ln in new]
    check = pd.read_csv(NEW)
    if set(check["kernel"]) != {"linear_state"} or (check["status"] != "ok").any():
        raise SystemExit("run 1's state rows are not all ok linear_state rows")
    kept = [ln for ln in lines[1:] if not ln.startswith("linear_state,")]
    name = base.name
    target = out / name
    # mtime 0 in the gzip header: the same rows give the same bytes
    target.write_bytes(gzip.compress("".join([lines[0], *kept, *new[1:]]).encode(), mtime=0))
    side = json.loads(base.with_name(name.replace(".csv.gz", ".meta.json")).read_text())
    meta = json.loads((HERE / "run1" / "state_raw.meta.json").read_text())
    side["linear_state_rows"] = {
        "replaced_rows": len(lines) - 1 - len(kept), "new_rows": len(new) - 1,
        "file": "measure/results/h200-s15/run1/state_raw.csv.gz",
        "sha256": hashlib.sha256(NEW.read_bytes()).hexdigest(), "command": meta["command"],
        "git_sha": meta["git_sha"], "utc_time": meta["utc_time"], "gpu_name": meta["gpu_name"],
        "why": "a speculative verify saves one recurrent state per draft token (wmtp.latency.state_traffic_states)"}
    (out / name.replace(".csv.gz", ".meta.json")).write_text(json.dumps(side, indent=1) + "\n")
    print(f"{target}: {len(kept)} rows kept, {len(new) - 1} linear_state rows in place of "
          f"{side['linear_state_rows']['replaced_rows']}")


CARRIED_TOP = ("tp_raw_data", "weight_dtype_raw_data", "kv_dtype_raw_data")


def carry(old_profile: str, new_profile: str, out_profile: str) -> None:
    """The refitted profile (`new_profile`, `wmtp calibrate --from-raw` of the spliced raw) with what the shipped one
    holds beyond its raw sweep carried over unchanged: the TP2 all-reduce fit, the quantized-weight and fp8-KV fits
    (components named `KIND@DTYPE` or missing from the refit) and their raw-data records. Writes OUT.json and OUT.md."""
    from wmtp.calibrate.fitting import profile_summary
    from wmtp.calibrate.profile import save_profile

    old, new = json.loads(Path(old_profile).read_text()), json.loads(Path(new_profile).read_text())
    for k, v in old["components"].items():
        if k not in new["components"]:
            new["components"][k] = v
    for k in CARRIED_TOP:
        if k in old:
            new[k] = old[k]
    out = Path(out_profile)
    save_profile(new, out)
    # the summary of the refit, then the sections later merges appended to the shipped .md (SGLang MoE rows, fp8 KV,
    # quantized weights), as they were
    summary = profile_summary(new)
    old_md = Path(old_profile).with_suffix(".md").read_text()
    heads = {ln for ln in summary.splitlines() if ln.startswith("## ")}
    cut = next((i for i, ln in enumerate(old_md.splitlines(keepends=True)) if ln.startswith("## ")
                and ln.rstrip("\n") not in heads), None)
    tail = "".join(old_md.splitlines(keepends=True)[cut:]) if cut is not None else ""
    out.with_suffix(".md").write_text(summary.rstrip("\n") + "\n\n" + tail if tail else summary)
    print(f"{out}: carried {sorted(set(old['components']) - set(json.loads(Path(new_profile).read_text())['components']))}")


if __name__ == "__main__":
    if sys.argv[1] == "carry":  # carry OLD.json REFIT.json OUT.json
        carry(*sys.argv[2:5])
    else:  # BASE.raw.csv.gz OUTDIR
        main(*sys.argv[1:3])
