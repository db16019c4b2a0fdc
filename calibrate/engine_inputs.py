"""The inputs of an engine fit (`wmtp.calibrate.engine_fit`), read and checked: the points CSV (per row a model,
method, ctx, depth range, a step time or a per-draft-forward slope in ms, its source, and whether it is fitted) and
the engine structure beside it (`NAME.structure.json`: kernel profile, structural counts, fitted host terms, named
kernels, memory settings). Every malformed input is one `WmtpError` naming the file and line."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from wmtp.errors import WmtpError
from wmtp.fileio import read_text
from wmtp.models import MODELS, get_model
from wmtp.units import first_repeat

COLUMNS = ("model", "method", "ctx", "d_lo", "d_hi", "quantity", "value_ms", "source")
MIN_VALUE_MS, MAX_VALUE_MS = 1e-6, 1e8  # a step or slope of more than a nanosecond, less than 28 hours


def _whole(text: str) -> int:
    """A count as a points table writes it: plain ASCII digits (int() also read '1_040_000', '+7' and other scripts'
    digits, as the options refuse them); ValueError otherwise."""
    from wmtp.units import parse_whole

    try:
        return parse_whole(str(text).strip(), "count")
    except WmtpError:
        raise ValueError(text) from None


def _row(r: dict, p: Path, i: int) -> dict:
    """One points row, its numbers read strictly and its model keyed as the registry keys it ('Q35' was a model of
    its own: its per-model terms fitted apart from q35's, and the preset predict then refused)."""
    from wmtp.units import ascii_number

    if None in r or any(r.get(c) is None for c in COLUMNS):  # a row longer or shorter than the header
        raise WmtpError(f"engine points {p}, line {i}: {'more' if None in r else 'fewer'} fields than the header "
                        f"({', '.join(COLUMNS)}, ...): a field holding a comma needs quotes")
    try:
        pt = {"model": r["model"], "method": r["method"], "ctx": _whole(r["ctx"]), "d_lo": _whole(r["d_lo"]),
              "d_hi": _whole(r["d_hi"]), "quantity": r["quantity"], "value_ms": float(ascii_number(r["value_ms"])),
              "source": r["source"], "derivation": r.get("derivation") or "",
              "fit": (r.get("fit") or "yes").strip().lower()}
    except (TypeError, ValueError):
        raise WmtpError(f"engine points {p}, line {i}: ctx, d_lo, d_hi must be integers (plain digits) and value_ms "
                        "a number") from None
    try:
        spec = get_model(pt["model"])
        pt["model"] = spec.key if spec.key in MODELS else pt["model"]  # a config path stays the path it names
    except WmtpError as e:
        raise WmtpError(f"engine points {p}, line {i}: {e}") from None
    return pt


def read_points(path: str | Path) -> list[dict]:
    p = Path(path)
    try:
        reader = csv.DictReader(io.StringIO(read_text(p, "engine points", WmtpError)))
        rows = list(reader)
    except csv.Error as e:  # a field over the csv module's limit, a stray NUL: not a points table
        raise WmtpError(f"engine points {p} is not a CSV table ({e})") from None
    twice = first_repeat([c.strip() for c in reader.fieldnames or [] if c and c.strip()])
    if twice is not None:  # DictReader kept the last of the two columns, silently
        raise WmtpError(f"engine points {p}: the header names column {twice[:40]!r} twice; remove one")
    if not rows or any(c not in rows[0] for c in COLUMNS):
        raise WmtpError(f"engine points {p} need the columns {', '.join(COLUMNS)}")
    out, seen = [], {}
    for i, r in enumerate(rows, start=2):
        pt = _row(r, p, i)
        if not (1 <= pt["ctx"] <= 2**31 and 1 <= pt["d_lo"] <= pt["d_hi"] <= 64):
            raise WmtpError(f"engine points {p}, line {i}: ctx must be 1..2**31 and 1 <= d_lo <= d_hi <= 64")
        if pt["quantity"] == "step" and pt["d_lo"] != pt["d_hi"]:
            raise WmtpError(f"engine points {p}, line {i}: a step is at one depth (d_lo = d_hi)")
        if pt["method"] not in ("dense", "native", "window") or pt["quantity"] not in ("step", "slope"):
            raise WmtpError(f"engine points {p}, line {i}: method is dense/native/window, quantity step/slope")
        if not MIN_VALUE_MS <= pt["value_ms"] <= MAX_VALUE_MS:  # 1e-300 fitted every term to 0, 1e300 to nonsense
            raise WmtpError(f"engine points {p}, line {i}: value_ms must be a positive number in "
                            f"[{MIN_VALUE_MS:g}, {MAX_VALUE_MS:g}] ms, got {r['value_ms'][:20]!r}")
        if pt["fit"] not in ("yes", "no"):  # anything but "no" was fitted: a row marked "false" or "0" too
            raise WmtpError(f"engine points {p}, line {i}: fit is yes or no (blank: yes), got {r.get('fit')[:20]!r}")
        pt["fit"] = pt["fit"] == "yes"
        if pt["quantity"] == "slope" and not pt["d_hi"] > pt["d_lo"]:
            raise WmtpError(f"engine points {p}, line {i}: a slope needs d_hi > d_lo")
        if pt["method"] == "dense" and (pt["d_hi"], pt["quantity"]) != (1, "step"):  # priced at d = 1, whatever it said
            raise WmtpError(f"engine points {p}, line {i}: a dense point is a step at d = 1 (no draft), got "
                            f"{pt['quantity']} at d {pt['d_lo']}-{pt['d_hi']}")
        if pt["method"] != "dense" and pt["d_lo"] < 2:  # was 'depth d must be in 2..64' with no file or line
            raise WmtpError(f"engine points {p}, line {i}: a {pt['method']} point drafts: d >= 2 (d = gamma + 1)")
        key = tuple(pt[k] for k in ("model", "method", "ctx", "d_lo", "d_hi", "quantity"))
        if key in seen:  # a point pasted twice weighed twice in the fit; two values of one point contradict
            raise WmtpError(f"engine points {p}, line {i}: the same point as line {seen[key]} ({key[0]} {key[1]}, "
                            f"ctx {key[2]}, d {key[3]}-{key[4]}, {key[5]}); give each point once")
        seen[key] = i
        out.append(pt)
    return out


def structure_path_for(points_path: str | Path) -> Path:
    """The engine structure a points CSV is fitted with: NAME.structure.json beside NAME.points.csv (v2 when it exists)."""
    p = Path(points_path)
    return p.with_name(p.name.split(".")[0] + ".structure.json")


STRUCTURE_KEYS = {"engine", "kernel_profile", "counts", "shared", "per_model", "named", "memory", "sources"}


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def read_structure(path: str | Path) -> dict:
    """An engine structure (JSON): kernel profile, structural counts, fitted host terms, memory settings."""
    from wmtp.engine import COUNTS, NAMED, REQUIRED, TERMS, check_memory
    from wmtp.fileio import read_json

    doc = read_json(Path(path), "engine structure", WmtpError)
    if not isinstance(doc, dict) or set(doc) - STRUCTURE_KEYS or not {"kernel_profile", "counts"} <= set(doc):
        raise WmtpError(f"engine structure {path}: an object with kernel_profile, counts, shared, per_model "
                        f"(and engine, memory, sources)")
    lists = [doc.get(k, []) for k in ("shared", "per_model")]
    if not isinstance(doc["counts"], dict) or not all(isinstance(v, list) and all(isinstance(t, str) for t in v)
                                                     for v in lists):  # a number here was a TypeError traceback
        raise WmtpError(f"engine structure {path}: counts must be an object (count name -> integer), shared and "
                        "per_model lists of term names")
    kp = doc["kernel_profile"]  # a file name in the shipped profiles folder, not a path out of it
    if not isinstance(kp, str) or not kp.replace("-", "").replace("_", "").isalnum():
        raise WmtpError(f"engine structure {path}: kernel_profile must name a shipped profile, got {_short(kp)}")
    if set(doc["counts"]) - set(COUNTS) or (set(doc.get("shared", [])) | set(doc.get("per_model", []))) - set(TERMS):
        raise WmtpError(f"engine structure {path}: counts from {', '.join(COUNTS)}, terms from {', '.join(TERMS)}")
    missing = [t for t in REQUIRED if t not in set(doc.get("shared", [])) | set(doc.get("per_model", []))]
    if missing:  # its preset would not load (wmtp.engine.load_preset)
        raise WmtpError(f"engine structure {path}: fits no {', '.join(missing)} (every preset names "
                        f"{', '.join(REQUIRED)}, shared or per model)")
    named = doc.get("named", {})
    if not isinstance(named, dict) or any(not isinstance(v, dict) or set(v) - set(NAMED) for v in named.values()):
        raise WmtpError(f"engine structure {path}: named is an object of model -> {{{', '.join(NAMED)}}}")
    if doc.get("memory") is not None:  # the preset carries it as it is: predict refused the preset the fit wrote
        check_memory(doc["memory"], f"engine structure {path}")
    return doc
