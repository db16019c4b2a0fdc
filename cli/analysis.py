"""`wmtp sweep` and `wmtp simulate`: thin commands over `wmtp.decisions` and `wmtp.simulate`."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Annotated, Optional

import typer

from wmtp.cli.common import (DEFAULT_DEPTH, DEFAULT_SINK, DEFAULT_TASK, DEFAULT_WINDOW, MAX_DEPTH, AccOpt, BatchOpt,
                             ConfigOpt, CsvOpt, CtxOpt, FrameworkOpt, HwOpt, JsonOpt, KvOpt, ModelOpt, ProfileOpt,
                             SinkOpt, SolOpt, TaskOpt, TpOpt, WdOpt, WindowOpt, decimal_number, echo_json,
                             handles_errors, int_option, parse_accept, refuse_overwriting_inputs, resolve_model, warn)
from wmtp.engine import label as engine_label
from wmtp.latency import cost_label
from wmtp.errors import WmtpError
from wmtp.units import format_tokens


def scenario(opts: dict, depth: int, fixed_window: bool = False):
    """(Scenario, warnings) from the options every analysis command shares (`opts`: their values by name).
    `fixed_window`: the command prices the window at --window and --ctx as given (a depth or batch sweep, a
    simulation), so a window that covers the context is said, as `wmtp predict` says it."""
    from wmtp.decisions import Scenario, odd_input_warnings, sink_warning
    from wmtp.engine import memory_config
    from wmtp.engine import resolve as resolve_engine
    from wmtp.hardware import get_hardware
    from wmtp.memory import weights_fit_warning
    from wmtp.profile import cost_model_for, framework_warnings
    from wmtp.tp import per_gpu_spec
    from wmtp.units import parse_tokens

    if opts["batch"] < 1:
        raise WmtpError(f"--batch must be >= 1, got {opts['batch']}")
    if opts["sink"] < 0:
        raise WmtpError(f"--sink must be >= 0, got {opts['sink']}")
    if not 2 <= depth <= MAX_DEPTH:
        raise WmtpError(f"--depth must lie in 2..{MAX_DEPTH}, got {depth}")
    if opts["tp"] < 1:
        raise WmtpError(f"--tp must be >= 1, got {opts['tp']}")
    spec = resolve_model(opts["model"], opts["config"], opts["weight_dtype"], opts["kv_dtype"], opts["framework"])
    gpu = get_hardware(opts["hw"])
    ctx, window = parse_tokens(opts["ctx"], "--ctx"), parse_tokens(opts["window"], "--window")
    overheads, warnings = resolve_engine(spec.key, gpu.key, opts["framework"])
    cost = cost_model_for(gpu, opts["profile"], opts["speed_of_light"], opts["framework"])
    odd = odd_input_warnings(ctx, window, opts["sink"]) if fixed_window else sink_warning(ctx, opts["sink"])
    warnings += list(spec.notes) + odd + weights_fit_warning(per_gpu_spec(spec, opts["tp"]), gpu) \
        + framework_warnings(cost, opts["framework"], gpu.key)
    return Scenario(spec, gpu, cost, ctx, depth, window, opts["sink"], opts["batch"], opts["tp"], overheads or None,
                    memory_config(spec.key, opts["framework"])), warnings


def _tok(n: int) -> str:
    """A token count as typed: '1M', '256K' when exact, else the integer ('4032')."""
    short = format_tokens(n)
    return short if "." not in short else str(n)


def _ms(x: float) -> str:
    return f"{x:.3f}"


def _num(x) -> str:
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


# Per sweep: (row key, header, format) of the table's columns; the CSV and --json keep every key.
_COLUMNS = {
    "ctx": [("ctx", "ctx", _tok), ("dense_tpot_ms", "dense\nTPOT", _ms),
            ("native_tpot_ms", "native\nTPOT", _ms), ("window_tpot_ms", "window\nTPOT", _ms),
            ("native_step_ms", "native\nstep", _ms), ("window_step_ms", "window\nstep", _ms),
            ("step_saving_ms", "step\nsaving", _ms), ("cost_ratio", "window\ncost gain", lambda v: f"{100 * v:+.1f}%"),
            ("window_speedup", "window\nspeedup", lambda v: f"{v:.2f}x")],
    "depth": [("depth", "d", str), ("native_tpot_ms", "native\nTPOT", _ms), ("native_step_ms", "native\nstep", _ms),
              ("native_accept_length", "native\nAL", lambda v: f"{v:.2f}"), ("window_tpot_ms", "window\nTPOT", _ms),
              ("window_step_ms", "window\nstep", _ms), ("window_accept_length", "window\nAL", lambda v: f"{v:.2f}")],
    "window": [("window", "W", _tok), ("window_step_ms", "window\nstep", _ms),
               ("accept_length", "window\nAL", lambda v: f"{v:.2f}"), ("window_tpot_ms", "window\nTPOT", _ms),
               ("native_tpot_ms", "native\nTPOT", _ms), ("beats_native", "beats\nnative", _num)],
    "batch": [("method", "method", str), ("batch", "B", str), ("tpot_ms", "TPOT", _ms),
              ("per_user_tok_s", "tok/s\nper user", lambda v: f"{v:.1f}"),
              ("per_gpu_tok_s", "tok/s\nper GPU", lambda v: f"{v:.1f}"), ("step_ms", "step", _ms),
              ("accept_length", "AL", lambda v: f"{v:.2f}"), ("pareto", "Pareto", lambda v: "*" if v else "")],
}


def _runs(items: list[str]) -> str:
    """'window B=1', ..., 'window B=10' -> 'window B=1..10' (runs of consecutive batches per method)."""
    groups: dict[str, list[int]] = {}
    for it in items:
        m, _, b = it.partition(" B=")
        groups.setdefault(m, []).append(int(b))
    out = []
    for m, bs in groups.items():
        spans, start = [], bs[0]
        for prev, cur in zip(bs, bs[1:] + [None]):
            if cur != prev + 1 if cur is not None else True:
                spans.append(f"{start}" if start == prev else f"{start}..{prev}")
                start = cur
        out.append(f"{m} B={', '.join(spans)}")
    return "; ".join(out)


def _footer(what: str, extra: dict, found: str = "-") -> list[str]:
    """The sweep's findings and provenance as sentences (no raw dicts); `found`: the findings' source tag."""
    lines = []
    if "break_even_ctx" in extra:
        be, thr = extra["break_even_ctx"], extra["break_even_threshold"]
        lines.append(f"break-even context: native's step is at least {100 * thr:g} % longer than the window's "
                     + (f"from {be:,} tokens ({format_tokens(be)}) on" if be else "nowhere up to 16M tokens")
                     + f" (matched acceptance) {found}")
    if "best_depth" in extra:
        bd = extra["best_depth"]
        lines.append(f"best depth (min TPOT): native d={bd['native']}, window d={bd['window']} {found}")
    if "break_even_window" in extra:
        bw = extra["break_even_window"]
        rng = bw["beats_native_range"]
        lines.append(f"TPOT-optimal window W={_tok(bw['optimal_window'])} ({bw['optimal_tpot_ms']:.3f} ms); "
                     + (f"W from {_tok(rng[0])} to {_tok(rng[1])} beats native"
                        if rng else "no window on the grid beats native")
                     + f" (acceptance: {bw['acceptance']}) {found}")
    if "pareto" in extra:
        lines.append("Pareto-optimal (no other point is faster per user and per GPU): "
                     + (_runs(extra["pareto"]) or "none") + f" {found}")
    if "note" in extra:
        lines.append(f"note: {extra['note']}")
    acc = extra.get("acceptance", {})
    lines.append(f"acceptance: native: {acc.get('native')}; window: {acc.get('window')}")
    lines.append(f"costs: {extra.get('cost_model')}; engine overhead: {extra.get('engine_overhead')}")
    known = {"break_even_ctx", "break_even_threshold", "best_depth", "break_even_window", "pareto", "note",
             "findings_source",
             "acceptance", "cost_model", "engine_overhead", "model", "hardware", "warning"}
    for k, v in extra.items():
        if k not in known:
            text = ", ".join(f"{a}: {b}" for a, b in v.items()) if isinstance(v, dict) else (
                ", ".join(map(str, v)) if isinstance(v, list) else str(v))
            lines.append(f"{k.replace('_', ' ')}: {text}")
    return lines


def _emit(what: str, rows: list[dict], extra: dict, as_json: bool, csv_path: Path | None, title: str) -> None:
    if csv_path is not None:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
        from wmtp.fileio import atomic_write_text

        atomic_write_text(csv_path, buf.getvalue(), "CSV file")
    from wmtp.cli.render import weakest_tag

    # the findings (break-even, best depth, optimal window, Pareto) are computed from the rows: their weakest source
    found = weakest_tag([v for r in rows for k, v in r.items() if k.endswith("step_source")])
    if as_json:
        findings = {"break_even_ctx", "best_depth", "break_even_window", "pareto"} & set(extra)
        echo_json({**extra, **({"findings_source": f"{found}: derived from the rows' TPOTs (each row's "
                                                     "*_step_source and *_accept_source)"} if findings else {}),
                   "rows": rows})
        return
    from rich.console import Console

    from wmtp.cli.render import accept_tag, add_columns, compact_table

    spec = _COLUMNS.get(what) or [(c, c, _num) for c in rows[0] if not c.endswith("_source")]
    spec = [c for c in spec if c[0] in rows[0]]
    al_keys = [k for k in rows[0] if k.endswith("accept_source")]  # rows whose AL varies: each row's own source
    t = compact_table()
    add_columns(t, *[(head, key not in ("method",)) for key, head, _ in spec],
                *([("AL\nsource", False)] if al_keys else []), ("cost\nsource", False))
    for r in rows:  # the last column: the weakest origin of the row's step costs (--json: each one's source)
        t.add_row(*[fmt(r[key]) for key, _, fmt in spec], *([accept_tag([r[k] for k in al_keys])] if al_keys else []),
                  weakest_tag([v for k, v in r.items() if k.endswith("step_source")]))
    con = Console()
    con.print(title, highlight=False, markup=False)
    con.print(t)
    for line in _footer(what, extra, found):
        con.print(line, highlight=False, markup=False)
    if csv_path is not None:
        con.print(f"wrote {csv_path}", highlight=False, markup=False)
    if extra.get("warning"):
        warn(extra["warning"])


@handles_errors
def sweep(
    what: Annotated[str, typer.Argument(help="ctx | depth | window | batch")],
    model: ModelOpt = None, config: ConfigOpt = None, hw: HwOpt = "h200", ctx: CtxOpt = "1M",
    depth: Annotated[int, int_option(
        "--depth", "-d", help=f"Draft tokens per step d (2..{MAX_DEPTH}); a depth sweep takes it only as the depth of "
                              "--accept-length.")] = DEFAULT_DEPTH,
    window: WindowOpt = DEFAULT_WINDOW, sink: SinkOpt = DEFAULT_SINK, batch: BatchOpt = 1, kv_dtype: KvOpt = None,
    weight_dtype: WdOpt = None, accept_length: AccOpt = None, profile: ProfileOpt = None,
    speed_of_light: SolOpt = False, tp: TpOpt = 1, framework: FrameworkOpt = None,
    task: TaskOpt = DEFAULT_TASK,
    threshold: Annotated[float, typer.Option(
        help="ctx sweep: the break-even context is the smallest one where native's step is at least this fraction "
             "longer than the window's (0.05 = 5 %).", parser=decimal_number)] = 0.05,
    al_window: Annotated[Optional[str], typer.Option(
        "--al-window", help="window sweep: measured (W, AL) points at --depth as W:AL,... (AL(W) model; native AL "
                            "at W=S).")] = None,
    as_json: JsonOpt = False, csv_out: CsvOpt = None,
) -> None:
    """Decision curves: TPOT against context, depth, window or batch, with the break-even points."""
    import math

    from wmtp.acceptance import choose_acceptance, with_window_points
    from wmtp.decisions import SWEEPS, scenario_window_profile
    from wmtp.decisions import sweep as run_sweep

    if what not in SWEEPS:
        raise WmtpError(f"sweep takes {', '.join(SWEEPS)}, not {what!r}")
    if not (math.isfinite(threshold) and 0 <= threshold <= 10):
        raise WmtpError(f"--threshold is a fraction of the native step (0.05 = 5 %) in [0, 10], got {threshold}")
    threshold += 0.0  # '-0' is 0: JSON and the footer said -0.0
    for opt, given, applies in (("--al-window", al_window is not None, "window"),
                                ("--threshold", threshold != 0.05, "ctx")):
        if given and what != applies:  # never a silently ignored option
            raise WmtpError(f"{opt} applies to `wmtp sweep {applies}` only, not to a {what} sweep")
    swept = {"ctx": ("--ctx", ctx != "1M"), "window": ("--window", window != DEFAULT_WINDOW),
             "batch": ("--batch", batch != 1)}.get(what)
    if swept and swept[1]:  # the sweep runs over its own grid of this variable: the value would be ignored
        raise WmtpError(f"{swept[0]} is what `wmtp sweep {what}` varies (over its own grid); leave it out")
    if what == "depth" and depth != DEFAULT_DEPTH and accept_length is None:  # the rows were those of d = 7
        raise WmtpError("--depth is what `wmtp sweep depth` varies (over its own grid); give it only with "
                        "--accept-length, as the depth that acceptance length was measured at")
    if csv_out is not None:
        from wmtp.fileio import check_output_path

        check_output_path(csv_out, "CSV file")
        refuse_overwriting_inputs([("--csv", csv_out)], [("--profile", profile), ("--config", config)]
                                  + [("--framework", f) for f in framework or []])

    opts = dict(model=model, config=config, hw=hw, ctx=ctx, window=window, sink=sink, batch=batch, kv_dtype=kv_dtype,
                weight_dtype=weight_dtype, profile=profile, speed_of_light=speed_of_light, tp=tp, framework=framework)
    sc, warnings = scenario(opts, depth, fixed_window=what in ("depth", "batch"))
    # the AL(W) model predict uses (--al-window points only in a window sweep, which refuses them elsewhere): the
    # window's acceptance at --window in the ctx, depth and batch sweeps, and at each W of the window sweep
    acc = with_window_points(choose_acceptance(sc.spec.key, depth, parse_accept(accept_length), task), al_window, depth,
                             sc.ctx)
    win = scenario_window_profile(sc, acc).tag(depth) if what != "window" else _window_sweep_acceptance(acc, depth)
    extra = {"model": sc.spec.key, "hardware": sc.hw.key, "cost_model": cost_label(sc.cost, sc.hw),
             "engine_overhead": engine_label(sc.overheads),
             "acceptance": {"native": acc.native.tag(depth), "window": win}}
    warnings = ([acc.warning] if acc.warning else []) + warnings
    if warnings:
        extra["warning"] = "; ".join(warnings)
    rows, found = run_sweep(what, sc, acc, threshold=threshold)
    extra.update(found)
    _emit(what, rows, extra, as_json, csv_out, _title(what, sc))


def _window_sweep_acceptance(acc, depth: int) -> str:
    """What a window sweep's window AL comes from: the AL(W) model (--al-window points or the task's dose-response
    preset) at each row's W, else the --window acceptance held fixed (the rows' accept_source say the same)."""
    if acc.window_al is not None:
        return f"{acc.window_al.source} (the AL(W) model, at each row's W)"
    return "held fixed (no AL(W) model): " + acc.window.tag(depth)


def _title(what: str, sc) -> str:
    """What the sweep varies, and everything it holds fixed (TP included)."""
    fixed = {"ctx": f"ctx {_tok(sc.ctx)}", "depth": f"d {sc.depth}",
             "window": f"W {_tok(sc.window)} + sink {sc.sink}", "batch": f"B {sc.batch}"}
    fixed.pop(what, None)
    parts = list(fixed.values()) + ([f"TP {sc.tp} (tok/s per GPU)" if what == "batch" else f"TP {sc.tp}"]
                                    if sc.tp > 1 else [])
    sweeps = {"ctx": "against context", "depth": "against draft depth d", "window": "against the draft window W",
              "batch": "against batch B (throughput-latency frontier)"}
    return f"TPOT (ms) {sweeps[what]}: {sc.spec.key} on {sc.hw.key}, " + ", ".join(parts)


@handles_errors
def simulate(
    model: ModelOpt = None, config: ConfigOpt = None, hw: HwOpt = "h200", ctx: CtxOpt = "1M",
    depth: Annotated[str, typer.Option(
        "--depth", "-d", help=f"Draft tokens per step d (2..{MAX_DEPTH}), or 'adaptive'.")] = str(DEFAULT_DEPTH),
    method: Annotated[str, typer.Option(help="native or window.")] = "window",
    window: WindowOpt = DEFAULT_WINDOW, sink: SinkOpt = DEFAULT_SINK, kv_dtype: KvOpt = None,
    weight_dtype: WdOpt = None,
    profile: ProfileOpt = None, speed_of_light: SolOpt = False, tp: TpOpt = 1, framework: FrameworkOpt = None,
    tokens: Annotated[int, int_option(help="Output tokens to decode.")] = 4096,
    seed: Annotated[int, int_option(help="Random seed.")] = 0,
    phases: Annotated[Optional[str], typer.Option(
        help="Acceptance over time: ALPHA:TOKENS,... (constant per-position acceptance per phase). "
             "Default: the model's preset profile.")] = None,
    trace: Annotated[Optional[Path], typer.Option(
        help="Recorded accepted counts per step, one integer a line.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Monte Carlo decode with the latency model: TPOT with a 95 % interval, fixed or adaptive depth."""
    from dataclasses import asdict

    from wmtp.simulate import (decode_profile, parse_phases, read_trace, step_time_fn, trace_cap_warning,
                               trace_replay_warning)
    from wmtp.simulate import simulate as run

    from wmtp.simulate import MAX_TOKENS

    if method not in ("native", "window"):
        raise WmtpError("--method is native or window")
    text = depth.strip().lower()
    plain = depth.isascii() and depth.isdigit() and len(depth) < 4  # '²' is a digit to isdigit; ' 7' is no number
    policy = "adaptive" if text == "adaptive" else int(depth) if plain else None
    if policy is None or (policy != "adaptive" and not 2 <= policy <= MAX_DEPTH):
        raise WmtpError(f"--depth takes an integer d in 2..{MAX_DEPTH} or 'adaptive', got {depth!r}")
    if not 1 <= tokens <= MAX_TOKENS:
        raise WmtpError(f"--tokens must lie in 1..{MAX_TOKENS:,}, got {tokens}")
    for opt, given in (("--window", window != DEFAULT_WINDOW), ("--sink", sink != DEFAULT_SINK)):
        if method == "native" and given:  # native MTP drafts over the whole context: the result was the same
            raise WmtpError(f"{opt} sizes the windowed draft, which --method native does not run; leave it out "
                            "or simulate --method window")
    opts = dict(model=model, config=config, hw=hw, ctx=ctx, window=window, sink=sink, batch=1, kv_dtype=kv_dtype,
                weight_dtype=weight_dtype, profile=profile, speed_of_light=speed_of_light, tp=tp, framework=framework)
    if phases is not None and not phases.strip():  # was the preset profile, silently
        raise WmtpError("--phases is empty; give ALPHA:TOKENS,... or leave it out for the model's preset")
    if phases and trace is not None:  # a trace fixes every step's accepted count: the phases would be ignored
        raise WmtpError("give one of --phases (acceptance to sample from) or --trace (recorded counts), not both")
    if trace is not None and seed != 0:  # a trace replays recorded counts: nothing is drawn, the seed changed nothing
        raise WmtpError("--seed draws sampled acceptance, and --trace replays recorded counts without drawing; "
                        "leave --seed out")
    ph = parse_phases(phases) if phases else None
    tr = read_trace(trace) if trace is not None else None
    sc, warnings = scenario(opts, DEFAULT_DEPTH, fixed_window=method == "window")
    ph, acc_source = _sim_acceptance(sc, method, tokens, ph, trace)
    steps = step_time_fn(sc, method, decode_profile(ph, tr, n_tokens=tokens))
    res = run(steps, ph, tokens, policy, seed, tr)
    warnings += trace_cap_warning(tr, res) + trace_replay_warning(tr, res.steps, tokens)
    out = asdict(res)
    if res.tpot_ci95[0] != res.tpot_ci95[0]:  # NaN is not JSON
        out["tpot_ci95"] = None
    sources = steps.sources(res.depth_histogram)
    out.update(step_source={str(d): src for d, src in sources.items()})
    out.update(model=sc.spec.key, hardware=sc.hw.key, method=method, cost_model=sc.cost.name,
               engine_overhead=engine_label(sc.overheads), warnings=warnings, acceptance_source=acc_source,
               source="Monte Carlo over the latency model" + (" and a recorded trace" if tr else ""))
    if as_json:
        echo_json(out)
        return
    _print_simulation(sc, method, res, sources, acc_source, warnings)


def _sim_acceptance(sc, method: str, tokens: int, phases: list | None, trace: Path | None) -> tuple[list, str]:
    """(phases, where the acceptance comes from): --phases as given; else the acceptance `wmtp predict` uses (the
    window's at this W, the native draft's if it covers S), which a --trace's recorded counts replace."""
    from wmtp.acceptance import choose_acceptance, window_profile

    if phases is not None:
        return phases, "--phases (constant per-position acceptance per phase)"
    acc = choose_acceptance(sc.spec.key, DEFAULT_DEPTH, None)
    prof = acc.native if method == "native" else window_profile(acc, sc.window, sc.sink, sc.ctx)
    src = f"--trace {trace} (recorded accepted counts)" if trace is not None else prof.tag(DEFAULT_DEPTH)
    return [(tokens, list(prof.alphas_at(16)))], src


def _print_simulation(sc, method: str, res, sources: dict, acc_source: str, warnings: list[str]) -> None:
    lo, hi = res.tpot_ci95
    ci = f"95 % CI {lo:.3f}-{hi:.3f}" if lo == lo else "too few steps for a 95 % CI (needs 40)"
    depths = ", ".join(f"d={d}: {n} steps" for d, n in sorted(res.depth_histogram.items()))
    from wmtp.cli.render import accept_tag, weakest_tag

    # tagged as predict's cells: the TPOT by its step costs' weakest origin, the AL by its acceptance's
    typer.echo(f"{sc.spec.key} {method} on {sc.hw.key}, policy {res.policy}: {res.tokens} tokens in {res.steps} steps, "
               f"TPOT {res.tpot_ms:.3f} ms {weakest_tag(sources.values())} ({ci}), mean AL "
               f"{res.mean_accept_length:.2f} {accept_tag([acc_source])}; depths used: {depths}")

    typer.echo(f"source: simulated; step costs: {cost_label(sc.cost, sc.hw)} ({weakest_tag(sources.values())}; "
               f"--json: each depth's source); engine overhead: {engine_label(sc.overheads)}; acceptance: {acc_source}")
    for w in warnings:
        warn(w)


def register(app: typer.Typer) -> None:
    app.command()(sweep)
    app.command()(simulate)
