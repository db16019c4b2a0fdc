"""What every `wmtp` command shares: option types, argument parsers, and the one error mapping.

A `WmtpError` (the library's own) becomes one `error: ...` line on stderr and exit code 1 through
`handles_errors`; any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from wmtp import defaults
from wmtp.acceptance import MAX_DEPTH
from wmtp.errors import WmtpError  # noqa: F401  (re-exported for command modules)
from wmtp.units import ascii_number, first_repeat, printable


def _within_largest_context(value: int | None) -> int | None:
    """A token count that must fit in the largest context wmtp models (`wmtp.units.MAX_TOKENS`)."""
    from wmtp.units import MAX_TOKENS, format_tokens

    if value is not None and value > MAX_TOKENS:
        raise typer.BadParameter(f"{value} tokens is wider than the largest context wmtp models "
                                 f"({format_tokens(MAX_TOKENS)} = {MAX_TOKENS:,} tokens)")
    return value


def whole_number(text) -> int:
    """An integer option as typed (`wmtp.units.parse_whole`): plain digits; typer's int() also read '1_000' and '+7'."""
    from wmtp.units import parse_whole

    try:
        return parse_whole(text, "value")
    except WmtpError as e:
        raise typer.BadParameter(str(e).removeprefix("value: ")) from None


def decimal_number(text) -> float:
    """A float option as typed: float() also read '0_5' as 5 and other scripts' digits (`wmtp.units.ascii_number`)."""
    try:
        return float(ascii_number(text))
    except ValueError:
        raise typer.BadParameter(f"{str(text)[:40]!r} is not a plain number (e.g. 0.05)") from None


def int_option(*decls, **kw):
    """`typer.Option` of an integer option, read by `whole_number`: every integer option takes plain digits."""
    return typer.Option(*decls, parser=whole_number, **kw)


def file_to_write(text: str) -> Path:
    """A file output option as typed: a path ending in '/' names a folder, which `Path` would drop the slash of and
    write a file of that name instead (`--out results/` made a file called `results`); so does one ending in '.' or
    '..' (`engines --fit P --out .` was a ValueError traceback: `Path('.').with_suffix`)."""
    if str(text).endswith(("/", os.sep)):
        raise typer.BadParameter(f"{text!r} ends with '/', so it names a folder; give a file name")
    if not str(text).strip():
        raise typer.BadParameter("the path is empty; give a file name")
    if Path(text).name in ("", ".", ".."):  # '.', '..', 'a/..': a folder too (`engines --out .`: a ValueError)
        raise typer.BadParameter(f"{str(text)[:60]!r} names a folder ('.' or '..'); give a file name")
    return Path(text)


ModelOpt = Annotated[Optional[str], typer.Option("--model", "-m", help="Registry key (see `wmtp models`).")]
ConfigOpt = Annotated[Optional[Path], typer.Option("--config", help="A Hugging Face config.json instead of --model.")]
HwOpt = Annotated[str, typer.Option("--hw", help="Hardware key (see `wmtp hardware`).")]
CtxOpt = Annotated[str, typer.Option("--ctx", help="Context tokens: 1048576, 256K, 1M (=1048576), 1.04M.")]
DepthOpt = Annotated[str, typer.Option(
    "--depth", "-d", help=f"Draft tokens per step d = gamma + 1 (2..{MAX_DEPTH}), or 'auto'.")]
WindowOpt = Annotated[str, typer.Option("--window", "-W", help="Draft window W (tokens).")]
SinkOpt = Annotated[int, int_option("--sink", help="Attention-sink tokens n_sink.", callback=_within_largest_context)]
BatchOpt = Annotated[int, int_option("--batch", "-B", help="Concurrent requests B.")]
KvOpt = Annotated[Optional[str], typer.Option("--kv-dtype", help="KV cache dtype: bf16 or fp8 (default: the model row's).")]
WdOpt = Annotated[Optional[str], typer.Option(
    "--weight-dtype", help="Weight dtype: bf16, fp8, int4 (W4A16, group 128) or nvfp4 (default: the model row's).")]
AccOpt = Annotated[Optional[str], typer.Option(
    "--accept-length", help="Measured AL at --depth: one value for both methods, or NATIVE:WINDOW.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of tables.")]
ProfileOpt = Annotated[Optional[Path], typer.Option(
    "--profile", help="Measured latency profile (default: the shipped one for --hw, else the H200's scaled).")]
SolOpt = Annotated[bool, typer.Option("--speed-of-light", help="Ignore measured profiles: datasheet speed of light.")]
FrameworkOpt = Annotated[Optional[list[str]], typer.Option(
    "--framework", help="Serving-engine overhead on top of the kernels: an engine preset (`wmtp engines`, e.g. "
                        "sglang-b200-paper) or a framework profile JSON from `wmtp calibrate-logs` (one per method); "
                        "repeatable. Default: kernels only.")]
TaskOpt = Annotated[str, typer.Option("--task", help="Which paper acceptance preset (e.g. cwe, vt, niah_multivalue).")]
TpOpt = Annotated[int, int_option("--tp", help="Tensor-parallel GPUs (heads, experts and vocabulary split).")]
CsvOpt = Annotated[Optional[Path], typer.Option("--csv", help="Also write the rows to this CSV file.",
                                                 parser=file_to_write)]

DEFAULT_WINDOW = str(defaults.WINDOW)
DEFAULT_SINK = defaults.SINK
DEFAULT_DEPTH = defaults.DEPTH
DEFAULT_TASK = defaults.TASK


def fail(msg: str) -> None:
    """One `error:` line on stderr, exit code 1 (control characters of a path or a value written as escapes: a
    newline split the line in two)."""
    typer.echo(f"error: {printable(msg)}", err=True)
    raise typer.Exit(1)


def warn(msg: str) -> None:
    """One `warning:` line on stderr, its control characters escaped as `fail`'s."""
    typer.echo(f"warning: {printable(msg)}", err=True)


def handles_errors(fn):
    """Wrap a command so the library's `WmtpError` becomes `fail(...)`; nothing else is caught."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except WmtpError as e:
            fail(str(e))

    return wrapper


def parse_accept(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    parts = text.split(":")
    try:
        values = [float(ascii_number(p)) for p in parts]
    except ValueError:
        raise WmtpError(f"--accept-length takes a number or NATIVE:WINDOW, got {text!r}") from None
    if len(values) == 1:
        return values[0], values[0]
    if len(values) == 2:
        return values[0], values[1]
    raise WmtpError(f"--accept-length takes a number or NATIVE:WINDOW, got {text!r}")


def parse_depth(text: str) -> int | str:
    if text.strip().lower() == "auto":
        return "auto"
    from wmtp.units import parse_whole

    try:
        return parse_whole(text, "--depth")
    except WmtpError:
        raise WmtpError(f"--depth takes an integer d >= 2 or 'auto' (plain digits), got {text[:40]!r}") from None


def stdin_paths(files: list[Path]) -> list[Path]:
    """The file arguments with `-` as standard input (read once through /dev/stdin, as a pipe: `wmtp.log_input`); `-`
    twice is an error (one stream cannot be read twice)."""
    if sum(str(f) == "-" for f in files) > 1:
        raise WmtpError("'-' (standard input) is given twice; it can be read once")
    if any(str(f) == "-" for f in files) and not Path("/dev/stdin").exists():
        raise WmtpError("'-' means standard input, which this system offers no /dev/stdin for; save it to a file")
    return [Path("/dev/stdin") if str(f) == "-" else f for f in files]


def resolve_model(model: str | None, config: Path | None, weight_dtype: str | None, kv_dtype: str | None,
                  frameworks: list[str] | None = None):
    """The model row of --model or --config at the dtypes asked for (the options every model command shares,
    --framework items among them, checked here)."""
    from wmtp.models import config_model, get_model

    if (model is None) == (config is None):
        raise WmtpError("give exactly one of --model KEY or --config path/to/config.json")
    from wmtp.specs import KV_DTYPES, WEIGHT_DTYPES

    for opt, value, known in (("--weight-dtype", weight_dtype, WEIGHT_DTYPES), ("--kv-dtype", kv_dtype, KV_DTYPES)):
        if value is not None and not value.strip():
            raise WmtpError(f"{opt} is empty; leave it out for the model's own dtype")
        if value is not None and value not in known:
            raise WmtpError(f"{opt} must be one of {', '.join(known)}, got {value[:40]!r}")
    if any(not f.strip() for f in frameworks or []):  # "" would read the current folder as a profile
        raise WmtpError("--framework is empty; give an engine preset name or a framework profile path")
    spec = get_model(model) if model is not None else config_model(config, weight_dtype, kv_dtype)
    check_frameworks(frameworks)
    return spec.with_dtypes(weight_dtype=weight_dtype, kv_dtype=kv_dtype)


def check_frameworks(frameworks: list[str] | None) -> None:
    """--framework items that contradict each other: two engine presets (each prices every method, and brings its
    own kernel profile and memory accounting; a mix of two is neither), or two framework profiles of one method."""
    if not frameworks:
        return
    from wmtp.engine import read_items

    items = read_items(frameworks)
    presets = sorted({str(p) for p, _, is_preset in items if is_preset})
    if len(presets) > 1:
        names = ", ".join(Path(p).stem for p in presets)
        raise WmtpError(f"--framework names {len(presets)} engine presets ({names}); give one: a preset prices "
                        "every method with its own kernels and memory accounting")
    seen: dict[str, str] = {}
    for p, doc, is_preset in items:
        if not is_preset and seen.setdefault(doc["method"], str(p)) != str(p):
            raise WmtpError(f"--framework gives two framework profiles for the {doc['method']} method "
                            f"({Path(seen[doc['method']]).name}, {p.name}); give one per method")


def comma_list(text: str, opt: str) -> list[str]:
    """The items of the comma-separated option `opt` (its name leads the errors): none, an empty item or one given
    twice is an error."""
    from wmtp.units import split_list

    if not text.strip():
        raise WmtpError(f"{opt} is empty; give one or more comma-separated registry keys")
    keys = split_list(text, opt)  # 'q35,,nem': an empty item is an error, not dropped
    twice = first_repeat(keys)
    if twice is not None:  # 'q35,q35' swept (on the GPU) the same model twice
        raise WmtpError(f"{opt} lists {twice[:40]!r} twice; give each key once")
    return keys


def check_count(value: int | None, opt: str, lo: int, hi: int) -> None:
    """An integer option (None: not given) within lo..hi, else one error naming the option."""
    if value is not None and not lo <= value <= hi:
        raise WmtpError(f"{opt} must lie in {lo}..{hi:,}, got {value}")


def echo_json(obj, default=None) -> None:
    """`obj` as strict JSON for scripts: NaN and Infinity are not JSON (parsers refuse them), so a result holding
    one is an error, not invalid output."""
    try:
        text = json.dumps(obj, indent=2, allow_nan=False, default=default)
    except ValueError:
        raise WmtpError("the result holds a non-finite number (NaN or infinity), which JSON cannot carry; "
                        "nothing printed") from None
    typer.echo(text)


def refuse_overwriting_inputs(outputs, inputs) -> None:
    """Output paths that name one of the command's own input files: writing would destroy the input (`--csv` naming
    the profile just read, `--out` the points being fitted). `outputs` / `inputs`: (option, path or None) pairs; a
    model folder given as an input stands for its config.json as well."""
    def real(p) -> str | None:
        try:
            return os.path.realpath(p)
        except (OSError, ValueError):
            return None

    read: dict[str, str] = {}
    for opt, p in inputs:
        if p is not None and str(p).strip():
            for cand in (Path(p), Path(p) / "config.json"):
                read.setdefault(real(cand), opt)
    read.pop(None, None)
    shipped = _shipped_files(real)
    for opt, p in outputs:
        if p is not None and real(p) in read:
            raise WmtpError(f"{opt} {p} is also the {read[real(p)]} input: writing it would destroy that input; "
                            "give another path")
        if p is not None and real(p) in shipped:  # the default profile a report read without being told
            raise WmtpError(f"{opt} {p} is a file wmtp ships and reads by default (a profile, engine preset or "
                            "validation table): "
                            "writing it would change every later answer; give another path")
        if p is not None:
            refuse_shipped_folder(opt, p)


def refuse_shipped_folder(opt: str, path) -> None:
    """An output inside the folders of the shipped profiles and engine presets (wmtp_model/data/profiles, .../engines),
    by its path or through a symlink: a new file there is read by default too (profiles/b200.json priced every
    --hw b200 answer from a CSV; an HTML engines/NAME.json broke `wmtp engines`), so nothing is written there."""
    from wmtp.engine import engines_dir
    from wmtp.profile import PROFILES_DIR

    try:
        target = os.path.realpath(path)
        folders = [os.path.realpath(f) for f in (PROFILES_DIR, engines_dir())]
    except (OSError, ValueError):
        return
    for folder in folders:
        if target == folder or target.startswith(folder.rstrip(os.sep) + os.sep):
            raise WmtpError(f"{opt} {path} is inside {folder}, where wmtp keeps the profiles and engine presets it "
                            "ships and reads by default: writing there would change later answers; give another path")


def validation_dir() -> Path:
    """The shipped validation tables (calibrate/validation, installed as wmtp/calibrate/validation), found without
    importing wmtp.calibrate."""
    from importlib.util import find_spec

    return Path(next(iter(find_spec("wmtp.calibrate").submodule_search_locations))) / "validation"


def shipped_folders() -> list[Path]:
    """The folders of the files wmtp ships and reads by default: profiles, engine presets, and the validation tables
    `wmtp report` shows for a shipped profile (`report --out calibrate/validation/h200.csv` replaced one with HTML)."""
    from wmtp.engine import engines_dir
    from wmtp.profile import PROFILES_DIR

    return [PROFILES_DIR, engines_dir(), validation_dir()]


def _shipped_files(real) -> set[str]:
    """The real paths of the shipped profiles, engine presets and validation tables: inputs of every command that
    prices or reports, named or not (`report --out .../profiles/h200.json` replaced the default H200 profile with
    HTML)."""
    out = set()
    for folder in shipped_folders():
        try:
            out |= {real(folder / name) for name in os.listdir(folder)}
        except OSError:
            continue
    return out - {None}

