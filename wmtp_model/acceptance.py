"""Acceptance (DESIGN.md section 4): per-position conditional acceptance and acceptance length.

From a histogram H[n] (verify steps that accepted exactly n draft tokens, n = 0..gamma):
    alpha_j = sum_{n>=j} H[n] / sum_{n>=j-1} H[n]        (j = 1..gamma)
    AL(d)   = 1 + sum_{j=1..d-1} prod_{k<=j} alpha_k       (the bonus token is the 1)
A profile measured at depth d_m predicts other depths: shallower ones by truncation (exact for a
chain), deeper ones by holding the last measured alpha (flagged extrapolated). A bare AL at depth d
becomes a geometric profile (alpha_j = a for all j), flagged as such.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from wmtp.errors import WmtpError
from wmtp import defaults


def wilson_interval(successes: float, trials: float, z: float = 1.959964) -> tuple[float, float]:
    """95 % Wilson score interval for a binomial proportion (nan, nan when trials == 0). Written with trials in
    the numerators (the textbook form multiplied through by n), so fractional counts as small as a subnormal
    float (a normalised histogram) give the uninformative [0, 1] instead of dividing by an underflowed n**2."""
    if trials <= 0:
        return (math.nan, math.nan)
    z2 = z * z
    centre = (successes + z2 / 2) / (trials + z2)
    half = z * math.sqrt(max(0.0, successes * ((trials - successes) / trials)) + z2 / 4) / (trials + z2)
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclass(frozen=True)
class AcceptanceProfile:
    """Conditional acceptance per draft position, and where it came from."""

    alphas: tuple[float, ...]  # alpha_1 .. alpha_{d_m - 1}
    measured_depth: int
    source: str
    kind: str = "per-position"  # per-position | geometric | deep-shift
    counts: tuple[float, ...] = ()  # H[n] when built from a histogram

    def __post_init__(self) -> None:
        if self.measured_depth < 1 or len(self.alphas) != self.measured_depth - 1:
            raise WmtpError("an acceptance profile needs d - 1 alphas")
        if any(not 0.0 <= a <= 1.0 for a in self.alphas):
            raise WmtpError("conditional acceptances must lie in [0, 1]")

    def alphas_at(self, depth: int) -> list[float]:
        if depth < 1:
            raise WmtpError("depth must be >= 1")
        known = list(self.alphas[: depth - 1])
        tail = self.alphas[-1] if self.alphas else 0.0
        return known + [tail] * (depth - 1 - len(known))

    def accept_length(self, depth: int) -> float:
        al, run = 1.0, 1.0
        for a in self.alphas_at(depth):
            run *= a
            al += run
        return al

    def is_extrapolated(self, depth: int) -> bool:
        """Deeper than measured, or any depth other than the measured one for a geometric fit."""
        if self.kind != "per-position":  # fitted to one AL: every other depth is a model
            return depth != self.measured_depth
        return depth > self.measured_depth

    def tag(self, depth: int) -> str:
        if self.is_extrapolated(depth):
            return f"{self.source}, extrapolated from d={self.measured_depth}"
        return self.source


MAX_DEPTH = 64  # the deepest draft any command models (d = gamma + 1)
MAX_COUNT = 1e15  # verify steps in one bin: more than any log holds (keeps every sum finite)


RATE_SLACK = 0.01  # rates printed to 3 decimals, counters read a moment apart: within this share, still a chain


def is_chain(reach: Sequence[float]) -> bool:
    """reach[i]: drafts that accepted at least i tokens (reach[0]: all of them, > 0). A chain of drafts never rises
    with i and stays >= 0 (a draft accepted at i + 1 was accepted at i); within RATE_SLACK of reach[0] it is one."""
    tol = RATE_SLACK * reach[0]
    return reach[0] > 0 and all(r >= -tol for r in reach) and all(b <= a + tol for a, b in zip(reach, reach[1:]))


def from_histogram(counts: Sequence[float], source: str) -> AcceptanceProfile:
    """H[n] for n = 0..gamma -> profile at depth gamma + 1. Positions no step reached get alpha 0. The errors lead
    with `source` (the file it came from: of `accept a.json b.json --compare`, which one was not said)."""
    h = [float(c) for c in counts]
    if len(h) < 2 or any(not 0 <= c <= MAX_COUNT for c in h) or not sum(h) > 0:  # NaN fails both
        raise WmtpError(f"{source}: an acceptance histogram needs >= 2 bins of counts in [0, {MAX_COUNT:g}] with a "
                        "positive total")
    if len(h) > MAX_DEPTH:
        raise WmtpError(f"{source}: an acceptance histogram has at most {MAX_DEPTH} bins (n = 0..{MAX_DEPTH - 1} "
                        f"accepted), got {len(h)}")
    tail = [0.0] * (len(h) + 1)  # tail[j] = sum_{n >= j} H[n]
    for n in range(len(h) - 1, -1, -1):
        tail[n] = tail[n + 1] + h[n]
    alphas = [min(1.0, tail[j] / tail[j - 1]) if tail[j - 1] > 0 else 0.0 for j in range(1, len(h))]
    return AcceptanceProfile(tuple(alphas), len(h), source, "per-position", tuple(h))


def alpha_intervals(profile: AcceptanceProfile) -> list[tuple[float, float, float]]:
    """(alpha_j, lo, hi) with 95 % Wilson intervals; needs a histogram-built profile."""
    if not profile.counts:
        raise WmtpError(f"profile from {profile.source} has no counts for intervals")
    h = profile.counts
    out = []
    for j in range(1, len(h)):
        trials, succ = sum(h[j - 1:]), sum(h[j:])
        lo, hi = wilson_interval(succ, trials)
        out.append((succ / trials if trials else math.nan, lo, hi))
    return out


def _solve_increasing(f, lo: float = 0.0, hi: float = 1.0, tol: float = 1e-13) -> float:
    """Root of an increasing function on [lo, hi] by bisection (no scipy on the predict path)."""
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if f(mid) > 0:
            hi = mid
        else:
            lo = mid
        if hi - lo < tol:
            break
    return 0.5 * (lo + hi)


def check_accept_length(value: float, depth: int | None, where: str) -> float:
    """An acceptance length read from a file (tokens a verify step emits, bonus included) lies in [1, d],
    d = gamma + 1 when the depth is known, else in [1, MAX_DEPTH]; anything else is a corrupt or foreign number."""
    if not math.isfinite(value):
        raise WmtpError(f"{where}: mean acceptance length {value} is not a finite number")
    if value < 1.0:
        raise WmtpError(f"{where}: mean acceptance length {value:g} is below 1 (every verify step emits its "
                        "bonus token)")
    if depth is not None and value > depth * (1 + 1e-9):  # 1e-9: float sums of a chain that accepted everything
        raise WmtpError(f"{where}: mean acceptance length {value:g} is above d = {depth} (gamma + 1)")
    if value > MAX_DEPTH * (1 + 1e-9):  # depth unknown: no draft wmtp models emits more a step
        raise WmtpError(f"{where}: mean acceptance length {value:g} is above {MAX_DEPTH}, the deepest draft wmtp "
                        f"models (d = gamma + 1 <= {MAX_DEPTH}): not an acceptance length")
    return value


def geometric(accept_length: float, depth: int, source: str) -> AcceptanceProfile:
    """The constant-alpha profile whose AL at `depth` equals `accept_length`."""
    if depth < 2:
        raise WmtpError("an acceptance length needs depth d >= 2")
    if not 1.0 <= accept_length <= depth:
        raise WmtpError(f"acceptance length must lie in [1, d] = [1, {depth}], got {accept_length}")
    gamma = depth - 1
    if accept_length >= depth:
        a = 1.0
    elif accept_length <= 1.0:
        a = 0.0
    else:
        a = _solve_increasing(lambda x: 1 + sum(x**j for j in range(1, gamma + 1)) - accept_length)
    return AcceptanceProfile(tuple([a] * gamma), depth, source, "geometric")


def deep_shift(native: AcceptanceProfile, accept_length: float, depth: int, source: str) -> AcceptanceProfile:
    """The window's profile from its AL at `depth` and the native profile: alpha_1 as native's, the deeper
    positions at one constant alpha solved for the AL. The paper's per-position decomposition (Fig. 2)
    finds alpha_1 unchanged by windowing and the difference confined to the deep positions. Falls back
    to a geometric profile when alpha_1 alone cannot hold the AL."""
    a1 = native.alphas_at(depth)[0] if depth >= 2 else 0.0
    gamma = depth - 1
    if gamma < 2 or not 1.0 + a1 <= accept_length <= 1.0 + a1 * gamma:
        return geometric(accept_length, depth, source)
    a = _solve_increasing(lambda x: 1 + a1 * (1 + sum(x**j for j in range(1, gamma))) - accept_length)
    return AcceptanceProfile(tuple([a1] + [a] * (gamma - 1)), depth, source, "deep-shift")


# ---------------------------------------------------------------------------- paper presets
@dataclass(frozen=True)
class AcceptancePreset:
    model: str
    task: str
    depth: int
    native_al: float
    window_al: float | None  # None: the paper gives only the native figure (window taken as matched)
    source: str


PAPER = "Windowed-MTP paper (reference/paper-results.md)"
PRESETS: Mapping[tuple[str, str], AcceptancePreset] = {
    (p.model, p.task): p
    for p in (
        AcceptancePreset("q35", "niah_multiquery_enum", 7, 4.49, 4.74, f"{PAPER}, Table 2"),
        AcceptancePreset("q122", "niah_multiquery_enum", 7, 5.57, 4.74, f"{PAPER}, Table 2"),
        AcceptancePreset("nem", "niah_multiquery_enum", 7, 3.75, 3.61, f"{PAPER}, Table 2"),
        AcceptancePreset("q35", "niah_multiquery_enum_per_position", 7, 4.50, 4.76, f"{PAPER}, per-position figure"),
        AcceptancePreset("q122", "niah_multiquery_enum_per_position", 7, 5.58, 4.73, f"{PAPER}, per-position figure"),
        AcceptancePreset("nem", "niah_multiquery_enum_per_position", 7, 3.73, 3.54, f"{PAPER}, per-position figure"),
        AcceptancePreset("q35", "niah_multivalue", 7, 5.9, None, f"{PAPER}, difficulty sweep (native only)"),
        AcceptancePreset("q35", "vt", 7, 4.2, None, f"{PAPER}, difficulty sweep (native only)"),
        AcceptancePreset("q35", "cwe", 7, 2.8, None, f"{PAPER}, difficulty sweep (native only)"),
        AcceptancePreset("q35", "niah_multiquery_enum_h100_fp8", 7, 4.34, 4.53, f"{PAPER}, H100-80GB replication"),
    )
}
DEFAULT_TASK = defaults.TASK


@dataclass(frozen=True)
class AcceptanceChoice:
    native: AcceptanceProfile
    window: AcceptanceProfile
    warning: str | None = None
    # the AL(W) model every command prices the window with (`window_profile`): the task's dose-response preset
    # unless acceptance was given explicitly, or measured `--al-window` points (`with_window_points`); None: the
    # window's acceptance above, held fixed at every W
    window_al: WindowAcceptance | None = None


def choose_acceptance(model_key: str, depth: int, accept_length: tuple[float, float] | None,
                      task: str = DEFAULT_TASK) -> AcceptanceChoice:
    """Explicit `--accept-length` first, then a paper preset for `task`, else matched acceptance with a warning;
    with the task's AL(W) preset where acceptance is not given explicitly."""
    acc = _chosen(model_key, depth, accept_length, task)
    return acc if accept_length is not None else replace(acc, window_al=WINDOW_PRESETS.get((model_key, task)))


def _chosen(model_key: str, depth: int, accept_length: tuple[float, float] | None, task: str) -> AcceptanceChoice:
    if accept_length is not None:
        if task != DEFAULT_TASK:  # the task names a preset the measured AL replaces: it was silently unused
            raise WmtpError(f"--task {task} picks a paper acceptance preset and --accept-length replaces it; "
                            "give one of them")
        nat, win = accept_length
        return AcceptanceChoice(geometric(nat, depth, "--accept-length (geometric profile)"),
                                geometric(win, depth, "--accept-length (geometric profile)"))
    if task != DEFAULT_TASK and (model_key, task) not in PRESETS:
        known = sorted({t for m, t in PRESETS if m == model_key}) or sorted({t for _, t in PRESETS})
        raise WmtpError(f"no acceptance preset for {model_key!r} on task {task!r}; known: {', '.join(known)}")
    preset = PRESETS.get((model_key, task))
    if preset is not None:
        src = f"preset {preset.model}/{preset.task}: {preset.source}"
        native = geometric(preset.native_al, preset.depth, src)
        if preset.window_al is None:
            return AcceptanceChoice(native, geometric(preset.native_al, preset.depth, src + "; window matched"),
                                    warning=f"{preset.task}: the paper gives only the native AL; the window's is "
                                            "taken as matched")
        return AcceptanceChoice(native, deep_shift(native, preset.window_al, preset.depth,
                                                   src + " (alpha_1 as native, deeper positions shifted)"))
    # No data for this model: use the mean native per-position acceptance of the paper presets for
    # both methods (matched acceptance), and say so.
    heads = [p for p in PRESETS.values() if p.task == DEFAULT_TASK]
    alphas = [geometric(p.native_al, p.depth, "").alphas[0] for p in heads]
    a = sum(alphas) / len(alphas)
    d = heads[0].depth
    prof = AcceptanceProfile(tuple([a] * (d - 1)), d, "generic (mean of paper presets), matched", "geometric")
    return AcceptanceChoice(prof, prof, warning=(
        f"no acceptance data for {model_key!r}: native and window both use a generic profile "
        f"(alpha={a:.3f}, mean of the paper presets); pass --accept-length for real numbers"))


@dataclass(frozen=True)
class WindowAcceptance:
    """AL against the draft window W at one depth: measured (W, AL) points, and the native draft's AL
    as the value at W = S (the window then holds the whole context). Between points: linear in
    log2 W; above the largest measured W: toward the native value at W = S; below the smallest:
    held at the smallest point's AL (flagged extrapolated). Other depths via a geometric profile."""

    points: tuple[tuple[int, float], ...]
    native_al: float
    depth: int
    source: str

    def __post_init__(self) -> None:
        if not self.points or any(w <= 0 or not 1 <= al <= self.depth for w, al in self.points):
            raise WmtpError("AL(W) points need W > 0 and AL in [1, d]")
        ws = [w for w, _ in self.points]
        if len(set(ws)) != len(ws):  # sorted() would keep the lower AL and drop the other, silently
            twice = next(w for w in ws if ws.count(w) > 1)
            raise WmtpError(f"AL(W) points give W={twice} twice; give one AL per window")

    def _al_at_measured_depth(self, window: int, ctx: int) -> float:
        pts = sorted(self.points)
        if window >= ctx:
            return self.native_al
        if window <= pts[0][0]:
            return pts[0][1]
        xs = [(math.log2(w), al) for w, al in pts if w < ctx] + [(math.log2(ctx), self.native_al)]
        x = math.log2(window)
        for (x0, y0), (x1, y1) in zip(xs, xs[1:]):
            if x0 <= x <= x1:
                return y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 > x0 else y0
        return xs[-1][1]

    def accept_length(self, window: int, depth: int, ctx: int) -> float:
        al = self._al_at_measured_depth(window, ctx)
        if depth == self.depth:
            return al
        return geometric(min(al, self.depth), self.depth, self.source).accept_length(depth)

    def tag(self, window: int, ctx: int) -> str:
        ws = [w for w, _ in self.points]
        if window < min(ws):
            return f"{self.source}, extrapolated below W={min(ws)}"
        if window in ws:
            return self.source
        return f"{self.source}, interpolated" + (" toward the native AL at W=S" if window > max(ws) else "")


WINDOW_PRESETS: Mapping[tuple[str, str], WindowAcceptance] = {
    ("q35", "niah_multiquery_enum"): WindowAcceptance(
        ((1024, 3.79), (4032, 4.74)), 4.49, 7,
        f"preset q35/niah_multiquery_enum dose-response: {PAPER}, window dose-response"),
}


def histogram_count(value, where: str) -> float:
    """One histogram count H[n]: verify steps, a whole non-negative number (3.0 is read, 3.5 is no count of steps;
    not a bool, not a string). `where` (the bin) leads the ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: a count must be a number, got {value!r}"[:100])
    try:
        x = float(value)
    except OverflowError:  # an integer of 400 digits: no float holds it (Python's message said only that)
        raise ValueError(f"{where}: a count above 1e308 is too large to be a number of verify steps") from None
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"{where}: a count must be finite and >= 0, got {value!r}")
    if x != math.floor(x):
        raise ValueError(f"{where}: a count is a whole number of verify steps, got {value!r}")
    return x


def _bin(value) -> int:
    """One histogram bin index n (accepted draft tokens): an integer in [0, MAX_DEPTH); as text, plain ASCII digits
    (int() also read '1_0' as bin 10, '+1' and other scripts' digits such as '٣') of which int() reads every one."""
    if isinstance(value, str):
        if not (value.strip().isascii() and value.strip().isdigit()):
            raise ValueError(f"bin {value[:20]!r} is not a count of accepted draft tokens in plain digits")
        value = value.strip().lstrip("0") or "0"
        if len(value) > 4:  # int() of more than 4300 digits is a ValueError naming sys.set_int_max_str_digits
            shown = value if len(value) <= 20 else f"{value[:17]}... ({len(value)} digits)"
            raise ValueError(f"bin {shown} is outside 0..{MAX_DEPTH - 1} (accepted draft tokens per step)")
    n = int(value)
    if isinstance(value, float) and n != value:
        raise ValueError(f"a bin must be an integer, got {value!r}")
    if not 0 <= n < MAX_DEPTH:
        raise ValueError(f"bin n={n} is outside 0..{MAX_DEPTH - 1} (accepted draft tokens per step)")
    return n


def _add_bin(counts: dict[int, float], n: int, count: float) -> None:
    """One bin's count; a bin given twice ("0" and "00", or two CSV lines) is an error: one would be dropped."""
    if n in counts:
        raise ValueError(f"bin n={n} is given twice")
    counts[n] = count


def load_histogram(path, source: str | None = None) -> AcceptanceProfile:
    """H[n] from a JSON list [H0, H1, ...], a JSON object {"n": count}, or a CSV of `n,count` lines.
    Bins run over 0..63 (d <= 64); counts are whole non-negative numbers (verify steps)."""
    import csv
    import json
    from pathlib import Path

    from wmtp.fileio import json_int, read_text
    from wmtp.units import ascii_number

    p = Path(path)
    text = read_text(p, "histogram", WmtpError)
    counts: dict[int, float] = {}
    shape = f"{p}: a histogram is a JSON list, a JSON object n -> count, or CSV lines n,count"
    try:
        data = json.loads(text, parse_constant=lambda c: float("nan"), parse_int=json_int)
    except (json.JSONDecodeError, RecursionError):
        data = None
    except ValueError as e:  # JSON holding a number too long to read (`json_int`): not CSV lines
        raise WmtpError(f"{p}: not a usable histogram ({e})") from None
    try:
        if isinstance(data, list):
            if len(data) > MAX_DEPTH:
                raise ValueError(f"{len(data)} bins; at most {MAX_DEPTH}")
            counts = {i: histogram_count(c, f"bin n={i}") for i, c in enumerate(data)}
        elif isinstance(data, dict):
            for k, v in data.items():
                _add_bin(counts, n := _bin(str(k)), histogram_count(v, f"bin n={n}"))
        elif data is not None:
            raise ValueError("top level must be a list or an object")
        else:
            for row in csv.reader(text.splitlines()):
                if not row or not row[0].strip() or row[0].strip().lower() in ("n", "accepted") \
                        or row[0].lstrip().startswith("#"):
                    continue
                if len([c for c in row if c.strip()]) != 2:  # a third column is no part of n,count: refused, not dropped
                    raise ValueError(f"line {','.join(row)[:40]!r}: need exactly n,count")
                n = _bin(row[0])  # float() also read '1_000' as 1000 and '٥' as 5
                _add_bin(counts, n, histogram_count(float(ascii_number(row[1].strip())), f"bin n={n}"))
    except (ValueError, TypeError, IndexError, csv.Error) as e:
        raise WmtpError(f"{shape} ({str(e)[:100]})" if str(e) else shape) from None
    if not counts:
        raise WmtpError(f"{p}: no histogram bins found")
    h = [counts.get(n, 0.0) for n in range(max(counts) + 1)]
    return from_histogram(h, source or f"histogram {p.name}")


def parse_window_points(text: str, native_al: float, depth: int, ctx: int | None = None) -> WindowAcceptance:
    """`--al-window W:AL,...`: measured (W, AL) points at `depth` -> an AL(W) model (native AL at W = S). With
    `ctx`, every W must lie below it: a window holding the whole context is the native draft."""
    from wmtp.units import ascii_number, format_tokens, parse_tokens

    if not text.strip():
        raise WmtpError("--al-window is empty; give W:AL,... points or leave it out")
    try:
        pts = tuple((parse_tokens(w, "--al-window"), float(ascii_number(a)))
                    for w, a in (p.split(":") for p in text.split(",")))
    except ValueError:
        raise WmtpError(f"--al-window takes W:AL,..., got {text[:80]!r}") from None
    if ctx is not None and any(w >= ctx for w, _ in pts):
        w = next(w for w, _ in pts if w >= ctx)
        raise WmtpError(f"--al-window point W={format_tokens(w)} is not below the context ({format_tokens(ctx)}): "
                        "a window that holds the whole context is the native draft, whose AL the model takes "
                        "from the native acceptance")
    return WindowAcceptance(pts, native_al, depth, "--al-window points")


def with_window_points(acc: AcceptanceChoice, points: str | None, depth: int, ctx: int | None = None
                       ) -> AcceptanceChoice:
    """`acc` with measured `--al-window` points (each W below `ctx`) as its AL(W) model, in place of the preset."""
    if points is None:
        return acc
    return replace(acc, window_al=parse_window_points(points, acc.native.accept_length(depth), depth, ctx))


def window_covers_context(window: int, sink: int, ctx: int) -> bool:
    """Whether a sink + W window holds the whole context: the windowed draft then is the native draft."""
    return window + sink >= ctx


def window_profile(acc: AcceptanceChoice, window: int, sink: int, ctx: int) -> AcceptanceProfile:
    """The windowed draft's acceptance at window W, the same for every command: the native draft's when the window
    covers the context, else `acc`'s AL(W) model's (a geometric profile through its AL at the measured depth), else
    the chosen window acceptance held fixed."""
    if window_covers_context(window, sink, ctx):
        return acc.native
    al_model = acc.window_al
    if al_model is not None:
        al = al_model.accept_length(window, al_model.depth, ctx)
        return geometric(min(al, al_model.depth), al_model.depth, al_model.tag(window, ctx))
    return acc.window
