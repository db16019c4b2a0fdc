"""`wmtp report`: one self-contained HTML file (plotly.js inlined, no external requests) built from a
prediction, the decision curves, the profile's validation data and, where given, acceptance
histograms. Every axis carries its unit; hovering shows exact values, each with where it came from (as the tables'
cells: a time by its cost's weakest origin, an alpha or AL by its acceptance source), point by point where the
points' origins differ (`customdata`); a line drawn at a value says its origin in its label."""

from __future__ import annotations

import html
import json
import math
from datetime import datetime, timezone
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from wmtp import __version__
from wmtp import decisions as dec
from wmtp.acceptance import AcceptanceProfile, alpha_intervals
from wmtp.predict import Prediction
from wmtp.provenance import Origin, weakest_of
from wmtp.units import format_bytes, format_tokens
from wmtp import defaults

COLORS = {"dense": "#7f7f7f", "native": "#d62728", "window": "#1f77b4"}
FIGURES = ("step-decomposition", "tpot-vs-context", "tpot-vs-depth", "batch-frontier", "acceptance-per-position",
           "window-curve", "memory", "measured-vs-predicted")


def _layout(fig: go.Figure, title: str, x: str, y: str) -> go.Figure:
    fig.update_layout(title=title, xaxis_title=x, yaxis_title=y, template="plotly_white", height=430,
                      margin=dict(l=70, r=30, t=60, b=60), legend=dict(orientation="h", y=-0.2))
    return fig


def step_decomposition(p: Prediction) -> go.Figure:
    fig = go.Figure()
    names = ["dense", "native", "window"]
    costs = [p.methods[n].cost for n in names]
    parts = [("t_verify", lambda c: (c.t_verify, 1)), ("t_ctx", lambda c: (c.t_ctx, 1)),
             ("gamma x t_fwd", lambda c: (c.t_fwd, c.gamma))]
    for label, get in parts:
        phases = [get(c) for c in costs]
        drawn = [label == "t_verify" or c.gamma > 0 for c in costs]  # dense drafts nothing: no draft bars
        fig.add_bar(name=label, x=names, y=[ph.time_ms * k if ok else None for (ph, k), ok in zip(phases, drawn)],
                    customdata=[origin_of(ph.source) if ok else "-" for (ph, _), ok in zip(phases, drawn)],
                    hovertemplate="%{x}: %{y:.3f} ms, %{customdata}<extra>" + label + "</extra>")
    fig.update_layout(barmode="stack")
    return _layout(fig, f"Decode step at {format_tokens(p.ctx)}: where the time goes", "method", "ms per step")


def tpot_vs_context(sc: dec.Scenario, acc) -> go.Figure:
    ctxs = [2**k for k in range(12, 23)]
    rows = dec.context_curve(sc, acc, ctxs)
    fig = go.Figure()
    for m in ("dense", "native", "window"):
        fig.add_scatter(x=ctxs, y=[r[f"{m}_tpot_ms"] for r in rows], name=m, mode="lines+markers",
                        line=dict(color=COLORS[m]), customdata=[origin_of(r[f"{m}_step_source"]) for r in rows],
                        hovertemplate="S=%{x}: %{y:.3f} ms, %{customdata}<extra>" + m + "</extra>")
    fig.update_xaxes(type="log")
    return _layout(fig, "TPOT against context (the widening wedge)", "context S (tokens, log scale)", "TPOT (ms)")


def tpot_vs_depth(p: Prediction) -> go.Figure:
    fig = go.Figure()
    for m in ("native", "window"):
        curve, srcs = p.tpot_by_depth[m], p.source_by_depth[m]
        fig.add_scatter(x=list(curve), y=list(curve.values()), name=m, mode="lines+markers",
                        line=dict(color=COLORS[m]), customdata=[origin_of(srcs[d]) for d in curve],
                        hovertemplate="d=%{x}: %{y:.3f} ms, %{customdata}<extra>" + m + "</extra>")
        best = p.best_depth[m]
        fig.add_scatter(x=[best], y=[curve[best]], name=f"{m} best d={best}", mode="markers",
                        marker=dict(symbol="star", size=16, color=COLORS[m]), customdata=[origin_of(srcs[best])],
                        hovertemplate="best d=%{x}: %{y:.3f} ms, %{customdata}<extra>" + m + "</extra>")
    dense = p.methods["dense"]
    fig.add_hline(y=dense.tpot_ms, line_dash="dot", line_color=COLORS["dense"],
                  annotation_text=f"dense TPOT {dense.tpot_ms:.3f} ms, {origin_of(dense.cost.source)}")
    return _layout(fig, "TPOT against draft depth d", "d = gamma + 1 (draft tokens per step)", "TPOT (ms)")


def batch_frontier(sc: dec.Scenario, acc) -> go.Figure:
    rows = dec.batch_frontier(sc, acc, max_batch=512)
    fig = go.Figure()
    # The window is drawn first and native last, with open markers a size larger: where the two coincide
    # (matched points at B=1, say) both stay visible.
    style = {"dense": dict(symbol="square", size=7), "window": dict(symbol="circle", size=8),
             "native": dict(symbol="diamond-open", size=12, line=dict(width=2))}
    for m in ("dense", "window", "native"):
        rs = [r for r in rows if r["method"] == m]
        fig.add_scatter(x=[r["per_gpu_tok_s"] for r in rs], y=[r["per_user_tok_s"] for r in rs], name=m,
                        mode="lines+markers", line=dict(color=COLORS[m]), marker=dict(color=COLORS[m], **style[m]),
                        text=[f"B={r['batch']}" for r in rs], customdata=[origin_of(r["step_source"]) for r in rs],
                        hovertemplate="%{text}: %{x:.1f} tok/s/GPU, %{y:.1f} tok/s/user, %{customdata}<extra>" + m
                        + "</extra>")
    par = [r for r in rows if r["pareto"]]
    fig.add_scatter(x=[r["per_gpu_tok_s"] for r in par], y=[r["per_user_tok_s"] for r in par], name="Pareto-optimal",
                    mode="markers", marker=dict(symbol="circle-open", size=14, color="black"),
                    customdata=[f"{r['method']} B={r['batch']}: {origin_of(r['step_source'])}" for r in par],
                    hovertemplate="%{x:.1f} tok/s/GPU, %{y:.1f} tok/s/user, %{customdata}<extra>Pareto-optimal</extra>")
    return _layout(fig, f"Throughput-latency frontier at {format_tokens(sc.ctx)} (B up to the memory limit)",
                   "per-GPU throughput (tokens/s)", "per-user speed (tokens/s)")


def _short_source(prof: AcceptanceProfile) -> str:
    """A legend label in whole words: where the profile came from, not its full citation."""
    src = prof.source
    if src.startswith("preset "):
        label = "paper preset " + src.split(":", 1)[0].removeprefix("preset ")
    elif src.startswith("--accept-length"):
        label = "--accept-length"
    elif src.startswith("generic"):
        label = "generic, matched"
    else:
        words, label = src.split(), ""
        for w in words:
            if len(label) + len(w) + 1 > 40:
                label += " ..."
                break
            label = f"{label} {w}".strip()
    return f"{label}, {prof.kind}"


def _with_origin(prof: AcceptanceProfile, text: str) -> str:
    """`text` (a source of `prof`'s acceptance) with its origin word first where the text names none, as `wmtp
    accept` says a file's: a paper preset's text names it ('preset q35/...', 'generic (mean of paper presets)');
    measured: a file's counts or the per-position rates it prints; analytical: a geometric or deep-shift profile
    through one AL (--accept-length, a log's mean)."""
    word = "preset" if "preset" in prof.source else \
        "measured" if prof.counts or prof.kind == "per-position" else f"analytical, {prof.kind} profile"
    return text if word in text else f"{word}: {text}"


def _position_sources(prof: AcceptanceProfile, n: int, tail: str = "") -> list[str]:
    """Where each of alpha_1 .. alpha_n comes from: the profile's, extrapolated past the positions it holds."""
    src = _with_origin(prof, prof.source) + tail
    return [html.escape(src + (f", extrapolated past d={prof.measured_depth}" if j >= prof.measured_depth else ""))
            for j in range(1, n + 1)]


def acceptance_figure(profiles: dict[str, AcceptanceProfile], depth: int) -> go.Figure:
    fig = go.Figure()
    for m, prof in profiles.items():
        if prof.counts:
            iv = alpha_intervals(prof)
            xs = list(range(1, len(iv) + 1))
            fig.add_scatter(x=xs, y=[a for a, _, _ in iv], name=f"{m} (histogram)", mode="lines+markers",
                            line=dict(color=COLORS[m]), customdata=_position_sources(prof, len(iv)),
                            error_y=dict(type="data", symmetric=False, array=[hi - a for a, _, hi in iv],
                                         arrayminus=[a - lo for a, lo, _ in iv]),
                            hovertemplate="alpha_%{x} = %{y:.3f}, %{customdata}<extra>" + m + " (95 % Wilson)</extra>")
        else:
            al = prof.alphas_at(depth)
            fig.add_scatter(x=list(range(1, len(al) + 1)), y=al, name=f"{m} ({_short_source(prof)})",
                            mode="lines+markers", line=dict(color=COLORS[m], dash="dash"),
                            customdata=_position_sources(prof, len(al), f" ({prof.kind})"),
                            hovertemplate="alpha_%{x} = %{y:.3f}, %{customdata}<extra>" + m + " (no intervals)</extra>")
    fig.update_yaxes(range=[0, 1.05])
    return _layout(fig, "Conditional acceptance per draft position", "draft position j", "alpha_j (probability)")


def model_rel_error(sc: dec.Scenario) -> tuple[float, str]:
    """The relative error within which two predicted TPOTs are indistinguishable: the largest held-out
    median error of the measured profile's fits, else 5 % (speed of light is not better than that)."""
    prof = getattr(sc.cost, "profile", None)
    if isinstance(prof, dict):
        meds = [c.get("heldout", {}).get("median_rel") for c in prof.get("components", {}).values()
                if isinstance(c.get("heldout"), dict)]
        meds = [m for m in meds if isinstance(m, (int, float)) and 0 < m < 1]
        if meds:
            return max(meds), "measured: the largest held-out median error of the profile's fits"
    return 0.05, "assumed: no held-out error for this cost model"


def _window_al_source(row: dict, acc, depth: int) -> str:
    """A window-curve row's acceptance source (`decisions.window_curve`) with its origin: the AL(W) model's tag names
    it (a preset's dose-response, interpolated or not); the native draft's or the held-fixed profile's is said."""
    if row["accept_kind"] == "native":
        return f"{row['accept_source']}: {_with_origin(acc.native, acc.native.tag(depth))}"
    if row["accept_kind"] == "held_fixed":
        return f"held fixed (no AL(W) model): {_with_origin(acc.window, acc.window.tag(depth))}"
    return row["accept_source"]


def window_figure(sc: dec.Scenario, acc) -> tuple[go.Figure, dict]:
    rows = dec.window_curve(sc, acc, defaults.WINDOW_GRID)
    be = dec.break_even_window(rows)
    fig = go.Figure()
    ws = [r["window"] for r in rows]
    fig.add_scatter(x=ws, y=[r["window_tpot_ms"] for r in rows], name="window TPOT (ms)", mode="lines+markers",
                    line=dict(color=COLORS["window"]), customdata=[origin_of(r["window_step_source"]) for r in rows],
                    hovertemplate="W=%{x}: %{y:.3f} ms, %{customdata}<extra></extra>")
    fig.add_scatter(x=ws, y=[r["accept_length"] for r in rows], name="window AL (tokens/step)", yaxis="y2",
                    mode="lines+markers", line=dict(color="#2ca02c", dash="dot"),
                    customdata=[html.escape(_window_al_source(r, acc, sc.depth)) for r in rows],
                    hovertemplate="W=%{x}: AL %{y:.2f}, %{customdata}<extra></extra>")
    native = rows[0]["native_tpot_ms"]
    err, err_src = model_rel_error(sc)
    fig.add_hline(y=native, line_dash="dash", line_color=COLORS["native"],
                  annotation_text=f"native TPOT {native:.3f} ms, {origin_of(rows[0]['native_step_source'])}")
    fig.add_hrect(y0=native * (1 - err), y1=native * (1 + err), fillcolor="rgba(214,39,40,0.07)", line_width=0,
                  annotation_text=f"native +/- model error ({100 * err:.1f} %, {err_src})",
                  annotation_position="bottom left")
    clear = [r["window"] for r in rows if r["window_tpot_ms"] < native * (1 - err)]
    be["model_rel_error"], be["model_error_source"] = err, err_src
    be["beats_native_beyond_error"] = [min(clear), max(clear)] if clear else None
    be["cost_origin"] = origin_of(*[v for r in rows for k, v in r.items() if k.endswith("step_source")])
    ys = [r["window_tpot_ms"] for r in rows] + [native * (1 - 2 * err), native * (1 + 2 * err)]
    y0, y1 = min(ys) * 0.97, max(ys) * 1.03
    if clear:
        lo, hi = clear[0], clear[-1]
        fig.add_scatter(x=[lo, hi, hi, lo, lo], y=[y0, y0, y1, y1, y0], fill="toself", mode="lines",
                        line=dict(width=0), fillcolor="rgba(31,119,180,0.10)",
                        name=f"W {lo}-{hi} beats native beyond the model error ({be['cost_origin']} TPOTs)",
                        hoverinfo="skip")
    else:
        fig.add_annotation(text=f"window and native TPOT ({be['cost_origin']}) differ by less than the model's error "
                                f"({100 * err:.1f} %, {err_src}) at every W", showarrow=False, x=0.5, y=1.0,
                           xref="paper", yref="paper", yanchor="bottom")
    fig.update_layout(yaxis=dict(range=[y0, y1]))
    fig.update_xaxes(type="log")
    fig.update_layout(yaxis2=dict(title="AL (tokens per step)", overlaying="y", side="right"))
    return _layout(fig, f"TPOT and acceptance against the window W ({be['acceptance']})", "window W (tokens, log)",
                   "TPOT (ms)"), be


def memory_figure(p: Prediction) -> go.Figure:
    m = p.memory
    names = ["dense", "native", "window"]
    fig = go.Figure()
    gib = 1024**3
    for label, get in (("target KV", lambda r: r.target_kv_bytes), ("draft KV", lambda r: r.draft_kv_bytes),
                       ("recurrent state", lambda r: r.state_bytes)):
        fig.add_bar(name=label, x=names, y=[get(m.per_request[n]) / gib for n in names],
                    hovertemplate="%{x}: %{y:.3f} GiB, analytical<extra>" + label + "</extra>")
    seats = f"engine accounting: {m.engine_source}" if m.engine else "analytical"  # as the memory table's title
    fig.add_scatter(x=names, y=[m.max_batch[n] for n in names], name=f"max concurrent requests ({html.escape(seats)})",
                    yaxis="y2", mode="markers+text", text=[str(m.max_batch[n]) for n in names],
                    textposition="top center", marker=dict(size=14, color="black"),
                    hovertemplate="%{x}: %{y} requests seated, " + html.escape(seats) + "<extra></extra>")
    top = max(m.max_batch.values()) or 1
    fig.update_layout(barmode="stack", yaxis2=dict(title="requests seated", overlaying="y", side="right",
                                                   rangemode="tozero", range=[0, top * 1.25 + 1], tickformat="d",
                                                   dtick=max(1, math.ceil(top / 5))))
    return _layout(fig, f"Memory per {format_tokens(p.ctx)} request and requests seated on {p.hw.key}", "method",
                   "GiB per request")


VALIDATION_COLUMNS = ("model", "ctx", "d", "method", "measured_ms", "predicted_ms", "status")


def read_validation(path: Path) -> list[dict]:
    """The ok rows of a validation table (`wmtp validate`'s validation.csv), their times as finite floats; a
    table that is not one raises `WmtpError` naming the file."""
    import csv
    import io

    from wmtp.errors import WmtpError
    from wmtp.fileio import read_text

    try:
        rows = list(csv.DictReader(io.StringIO(read_text(path, "validation table", WmtpError))))
    except csv.Error as e:
        raise WmtpError(f"validation table {path} is not a CSV table ({e})") from None
    if rows and any(c not in rows[0] for c in VALIDATION_COLUMNS):
        raise WmtpError(f"validation table {path} needs the columns {', '.join(VALIDATION_COLUMNS)}")
    out = []
    for i, r in enumerate(rows, start=2):
        if r["status"] != "ok":
            continue
        try:
            times = {k: float(r[k]) for k in ("measured_ms", "predicted_ms")}
        except (TypeError, ValueError):
            times = {}
        if not times or not all(math.isfinite(t) and t >= 0 for t in times.values()):
            raise WmtpError(f"validation table {path}, line {i}: measured_ms and predicted_ms must be finite times")
        out.append({**r, **times})
    return out


def validation_figure(validation_csv: Path | None) -> go.Figure:
    fig = go.Figure()
    if validation_csv is not None and validation_csv.exists():
        rows = read_validation(validation_csv)
        for m in ("dense", "native", "window"):
            rs = [r for r in rows if r["method"] == m]
            fig.add_scatter(x=[r["measured_ms"] for r in rs], y=[r["predicted_ms"] for r in rs], name=m,
                            mode="markers", marker=dict(color=COLORS[m], size=9),
                            text=[f"{r['model']} S={r['ctx']} d={r['d']}" for r in rs],
                            customdata=[html.escape(r.get("predicted_source") or "its source not recorded")
                                        for r in rs],  # the table's predicted_source: the profile's fits
                            hovertemplate="%{text}: measured %{x:.3f} ms, predicted %{y:.3f} ms (%{customdata})"
                                          "<extra></extra>")
        top = max([r["measured_ms"] for r in rows] + [1.0]) * 1.1
        fig.add_scatter(x=[0, top], y=[0, top], name="prediction = measurement", mode="lines",
                        line=dict(color="black", dash="dot"), hoverinfo="skip")  # a guide, not a value
    else:
        fig.add_annotation(text="no validation data for this profile", showarrow=False, x=0.5, y=0.5,
                           xref="paper", yref="paper")
    return _layout(fig, "Composed speculative step: measured against predicted", "measured step (ms)",
                   "predicted step (ms)")


def _summary_table(p: Prediction) -> str:
    head = "<tr><th></th>" + "".join(f"<th>{n}</th>" for n in ("dense", "native", "window")) + "</tr>"
    rows = []
    for label, get in (("step (ms)", lambda r: _tagged(r.cost.step_ms, r.cost.source)),
                       ("t_verify (ms)", lambda r: _tagged(r.cost.t_verify.time_ms, r.cost.t_verify.source)),
                       ("t_ctx (ms)", lambda r: "-" if r.cost.gamma == 0 else _tagged(r.cost.t_ctx.time_ms,
                                                                                      r.cost.t_ctx.source)),
                       ("t_fwd (ms) x gamma", lambda r: "-" if r.cost.gamma == 0 else
                        f"{_tagged(r.cost.t_fwd.time_ms, r.cost.t_fwd.source)} x{r.cost.gamma}"),
                       ("AL (tokens/step)", lambda r: f"{r.accept_length:.2f}"),  # its source: the 'source (AL)' row
                       ("TPOT (ms)", lambda r: _tagged(r.tpot_ms, r.cost.source)),
                       ("source (step)", lambda r: html.escape(r.cost.source)),
                       ("source (AL)", lambda r: html.escape(r.accept_source))):
        rows.append(f"<tr><td>{label}</td>" + "".join(f"<td>{get(p.methods[n])}</td>"
                                                      for n in ("dense", "native", "window")) + "</tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def _window_sentence(be: dict) -> str:
    """The window curve's finding in words (the figure's data, not a dict): one clause, the model error's source
    said (the TPOTs' origin follows it in the report)."""
    err = f"{100 * be.get('model_rel_error', 0.05):.1f} %, {be.get('model_error_source', 'assumed')}"
    text = f"TPOT-optimal window W={be['optimal_window']} ({be['optimal_tpot_ms']:.3f} ms, {be['acceptance']})"
    clear = be.get("beats_native_beyond_error")
    if clear:
        return text + f", and W from {clear[0]} to {clear[1]} beats native by more than the model's error ({err})"
    if be.get("beats_native_range"):
        lo, hi = be["beats_native_range"]
        return text + (f", and W from {lo} to {hi} is faster than native, but by less than the model's error "
                       f"({err}): no window is clearly better")
    return text + ", and no window on the grid beats native"


def _times(k: int) -> str:
    return f" x{k}" if k > 1 else ""


def origin_of(*sources) -> str:
    """The weakest origin among `sources` in words (`wmtp.provenance`: 'interpolated', 'speed-of-light', 'engine
    preset'), '(mixed)' where they or their parts differ: the tag of an HTML cell."""
    weakest, mixed = weakest_of(sources)
    return "-" if weakest is Origin.NONE else weakest.value + (" (mixed)" if mixed else "")


def _tagged(ms: float, *sources, low: bool = False) -> str:
    return f"{ms:.3f} <small>{html.escape(origin_of(*sources))}</small>" + (" !" if low else "")


def headroom_table(room: dict | None) -> str:
    """Engine kernels vs wmtp's own vs the measured floor, per method and for the components that differ most; each
    time with its origin, '!' where it is priced below its floor (said why below the table)."""
    if not room:
        return ""
    head = "<tr><th>method</th><th>engine ms</th><th>own ms</th><th>floor ms</th><th>engine / own</th></tr>"

    def cells(v: dict, k: int = 1) -> str:
        low = v.get("below_floor") or {}
        return "".join(f"<td>{_tagged(v[f'{s}_ms'] * k, v[f'{s}_source'], low=s in low)}</td>"
                       for s in ("engine", "own", "floor"))

    steps = "".join(f"<tr><td>{m}</td>{cells(v)}<td>{v['engine_ms'] / v['own_ms']:.2f}x "
                    f"<small>{html.escape(origin_of(v['engine_source'], v['own_source']))}</small></td></tr>"
                    for m, v in room["steps"].items() if v["own_ms"])
    comps = sorted(room["components"], key=lambda r: -(r["engine_ms"] - r["own_ms"]) * r["times"])[:8]
    rows = "".join(f"<tr><td>{r['method']}</td><td>{html.escape(r['component'])}{_times(r['times'])}</td>"
                   f"{cells(r, r['times'])}</tr>" for r in comps)
    low = "".join("<p>! " + html.escape(f"{r['method']} {r['component']} {side}: {why}") + "</p>"
                  for r in room["components"] for side, why in (r.get("below_floor") or {}).items())
    return (f"<h2>Headroom: the engine's kernels, wmtp's own, the floor (d {room['depth']})</h2>"
            f"<p>engine: {html.escape(room['engine_kernels'])}; own: {html.escape(room['own_kernels'])}; floor "
            f"(speed-of-light at the measured ceilings): {html.escape(room['floor'])}.</p><table>{head}{steps}</table>"
            "<table><tr><th>method</th><th>component, per step</th><th>engine ms</th><th>own ms</th><th>floor ms</th>"
            f"</tr>{rows}</table>{low}")


def build_report(p: Prediction, sc: dec.Scenario, acc, profiles: dict, profile_meta: dict,
                 validation_csv: Path | None, sources: dict, headroom: dict | None = None) -> str:
    figs = {
        "step-decomposition": step_decomposition(p),
        "tpot-vs-context": tpot_vs_context(sc, acc),
        "tpot-vs-depth": tpot_vs_depth(p),
        "batch-frontier": batch_frontier(sc, acc),
        "acceptance-per-position": acceptance_figure(profiles, sc.depth),
    }
    figs["window-curve"], be = window_figure(sc, acc)
    figs["memory"] = memory_figure(p)
    figs["measured-vs-predicted"] = validation_figure(validation_csv)
    divs = "\n".join(f'<section><div class="wmtp-figure" id="{k}">'
                     + pio.to_html(f, include_plotlyjs=False, full_html=False, div_id=f"plot-{k}") + "</div></section>"
                     for k, f in figs.items())
    prov = {"wmtp version": __version__, "generated (UTC)": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "cost model": p.cost_model, **{f"profile {k}": v for k, v in profile_meta.items()}, **sources}
    prov_rows = "".join(f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(str(v))}</td></tr>" for k, v in prov.items())
    m = p.memory
    both = html.escape(origin_of(p.methods["native"].cost.source, p.methods["window"].cost.source))
    facts = (f"draft pool share {m.draft_pool_share:.1%} <small>analytical</small>; reclaimable "
             f"{format_bytes(m.reclaimable_bytes)} per request <small>analytical</small>; best depth native "
             f"d={p.best_depth['native']}, window d={p.best_depth['window']} <small>{both}</small>; break-even "
             f"acceptance ratio {p.break_even_accept_ratio:.3f} <small>{both}</small>; "
             f"{html.escape(_window_sentence(be))} <small>{html.escape(be['cost_origin'])}</small>")
    warn = "".join(f"<p class='warn'>warning: {html.escape(w)}</p>" for w in p.warnings)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>wmtp report: {html.escape(p.spec.name)} at {format_tokens(p.ctx)} on {html.escape(p.hw.name)}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}} .warn{{color:#a60}}</style>
<script type="text/javascript">window.wmtpErrors=[];window.addEventListener('error',function(e){{window.wmtpErrors.push(String(e.message))}});</script>
<script type="text/javascript">{get_plotlyjs()}</script>
</head><body>
<h1>{html.escape(p.spec.name)} ({html.escape(p.spec.key)}) on {html.escape(p.hw.name)}</h1>
<p>ctx {format_tokens(p.ctx)} ({p.ctx:,} tokens), d {p.depth}, W {p.window} + sink {p.sink}, B {p.batch}{f", TP {p.tp}" if p.tp > 1 else ""};
weights {p.spec.weight_dtype}, KV {p.spec.kv_dtype}; costs: {html.escape(p.cost_model)}.</p>
{_summary_table(p)}
<p>{facts}</p>{warn}
{divs}
{headroom_table(headroom)}
<h2>Provenance</h2><table>{prov_rows}</table>
<script type="text/javascript">
window.addEventListener('load', function () {{
  var ids = {json.dumps([f"plot-{k}" for k in FIGURES])};
  var drawn = ids.filter(function (id) {{ var d = document.getElementById(id); return d && d.querySelector('svg.main-svg'); }});
  document.body.setAttribute('data-plots-drawn', String(drawn.length));
  document.body.setAttribute('data-plots-expected', String(ids.length));
  document.body.setAttribute('data-js-errors', String(window.wmtpErrors.length));
}});
</script>
</body></html>
"""


def write_report(path: Path, text: str) -> None:
    from wmtp.fileio import atomic_write_text

    atomic_write_text(path, text, "report")


def is_self_contained(text: str) -> bool:
    """No script, link, img or iframe loads anything from the network."""
    import re

    return not re.search(r"<(script|link|img|iframe)[^>]+(src|href)\s*=\s*[\"']?(https?:)?//", text, re.IGNORECASE)


__all__ = ["FIGURES", "build_report", "write_report", "is_self_contained"]
