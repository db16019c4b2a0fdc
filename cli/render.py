"""Rich rendering of library results. Every number carries a short tag saying where it came from."""

from __future__ import annotations

from dataclasses import asdict

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from wmtp.cli.common import echo_json
from wmtp.provenance import Origin, Source, source, weakest_of
from wmtp.units import format_bytes, format_tokens, printable


def shown(text) -> str:
    """Text from a user's files (a file or model name, a warning naming one) for a rich console line: its control
    characters as escapes (an ESC sequence reached the terminal raw), then rich markup escaped."""
    return escape(printable(text))


class _ConsoleProxy:
    """A fresh rich Console per use: it reads the terminal width (or $COLUMNS) when a command runs,
    not when this module was imported."""

    def __getattr__(self, name):
        return getattr(Console(), name)


console = _ConsoleProxy()


def compact_table(title: str | None = None) -> Table:
    """A table that spends its width on numbers: a rule under the header, no vertical borders."""
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                 padding=(0, 1), collapse_padding=True)


def add_columns(t: Table, *cols: tuple[str, bool]) -> None:
    """(header, numeric) pairs: numbers never wrap or get cut; text wraps (folding, never '…')."""
    for header, numeric in cols:
        t.add_column(header, justify="right" if numeric else "left", no_wrap=numeric, overflow="fold")

# Short tags for table cells, by origin (`wmtp.provenance`); acceptance sources are plain text.
_ORIGIN_TAGS = {Origin.ENGINE: "engine", Origin.SPEED_OF_LIGHT: "sol", Origin.SCALED: "scaled",
                Origin.EXTRAPOLATED: "extrap", Origin.INTERPOLATED: "interp", Origin.MEASURED: "meas",
                Origin.ANALYTICAL: "model", Origin.FRAMEWORK: "fw"}
# 'generic' first: the generic profile's text names the presets it averages ("generic (mean of paper presets)")
_TEXT_TAGS = (("generic", "generic"), ("preset", "preset"), ("--accept-length", "flag"), ("--al-window", "flag"),
              ("no speculation", "-"), ("the native draft's", "native"), ("--phases", "flag"), ("--trace", "trace"))


def short_tag(src: str) -> str:
    """A cell's tag: a priced number's weakest origin (starred when its parts differ), else an acceptance tag.
    A phase built from components of different provenance shows its weakest: a number is only as measured as
    its least measured part (`--json` lists every component's own source)."""
    s = source(src) if not isinstance(src, Source) else src
    if s.origin is not Origin.NONE or s.parts:
        return _ORIGIN_TAGS.get(s.weakest(), "-") + ("*" if s.mixed else "")
    for needle, tag in _TEXT_TAGS:
        if needle in s:
            return tag
    return str(s)[:10]


def weakest_tag(sources) -> str:
    """One tag for numbers priced from several sources (a sweep row's methods): the weakest origin among them,
    starred when they or their parts differ."""
    weakest, mixed = weakest_of(sources)
    return "-" if weakest is Origin.NONE else _ORIGIN_TAGS.get(weakest, "-") + ("*" if mixed else "")


def accept_tag(sources) -> str:
    """One tag for the acceptance lengths of a row (a sweep row's native and window AL): each distinct tag once, in
    order, joined by '/' ('preset', 'extrap/preset')."""
    tags = [short_tag(s) for s in sources]
    return "/".join(dict.fromkeys(tags)) or "-"


def cell(value: float, source: str, fmt: str = "{:.3f}") -> str:
    return f"{fmt.format(value)} [dim]{short_tag(source)}[/dim]"


def render_prediction(p) -> None:
    spec, hw = p.spec, p.hw
    console.print(
        f"[bold]{escape(spec.name)}[/bold] ({escape(spec.key)}) on [bold]{escape(hw.name)}[/bold] ({hw.key}) | "
        f"ctx {format_tokens(p.ctx)} "
        f"({p.ctx:,} tokens) | d {p.depth} | W {p.window} + sink {p.sink} | B {p.batch} | "
        + (f"TP {p.tp} (per GPU) | " if p.tp > 1 else "") + 
        f"weights {spec.weight_dtype}, KV {spec.kv_dtype} | costs: {escape(p.cost_model)} | engine overhead: "
        f"{escape(p.engine_overhead)}"
    )
    names = ("dense", "native", "window")
    t = Table(title="Decode step (ms per step unless stated)", title_justify="left")
    t.add_column("", overflow="fold")
    for n in names:
        t.add_column(n, justify="right", overflow="fold")
    r = {n: p.methods[n] for n in names}
    auto = p.depth == "auto"  # each method's d is then its best depth: priced, tagged as the best-depth line
    t.add_row("d (draft tokens / step)", *[str(r[n].cost.depth) + (f" [dim]{short_tag(r[n].cost.source)}[/dim]"
                                                                   if auto and n != "dense" else "") for n in names])
    t.add_row("keys read by draft", "-", *[format_tokens(r[n].cost.s_eff) for n in names[1:]])
    t.add_row("t_verify", *[cell(r[n].cost.t_verify.time_ms, r[n].cost.t_verify.source) for n in names])
    t.add_row("t_ctx", "-", *[cell(r[n].cost.t_ctx.time_ms, r[n].cost.t_ctx.source) for n in names[1:]])
    t.add_row("t_fwd (x gamma)", "-",
              *[cell(r[n].cost.t_fwd.time_ms, r[n].cost.t_fwd.source) + f" x{r[n].cost.gamma}" for n in names[1:]])
    t.add_row("step", *[cell(r[n].cost.step_ms, r[n].cost.source) for n in names])
    t.add_row("acceptance length AL", *[cell(r[n].accept_length, r[n].accept_source, "{:.2f}") for n in names])
    t.add_row("TPOT", *[cell(r[n].tpot_ms, r[n].cost.source) for n in names])
    t.add_row("tok/s per request", *[cell(1e3 / r[n].tpot_ms, r[n].cost.source, "{:.1f}") for n in names])
    for over in ("dense", "native"):  # a ratio of two TPOTs: the weaker of their two sources
        t.add_row(f"speedup over {over}", *[f"{p.speedup(n, over):.2f}x [dim]"
                                             f"{weakest_tag([r[n].cost.source, r[over].cost.source])}[/dim]"
                                             for n in names])
    console.print(t)

    m = p.memory
    render_memory_table(p, names)
    at_max = ("" if m.extra_requests_window_max is None else
              f" ({m.extra_requests_window_max:+d} with each at its largest mem_fraction_static)")
    console.print(
        f"draft pool share {m.draft_pool_share * 100:.1f} % of KV [dim]model[/dim] | reclaimable "
        f"{format_bytes(m.reclaimable_bytes)} per request [dim]model[/dim] | window seats "
        f"{m.extra_requests_window:+d} request(s) vs native{at_max} [dim]{'engine' if m.engine else 'model'}[/dim]"
    )
    bd, by_d = p.best_depth, p.tpot_by_depth
    both = weakest_tag([p.methods["native"].cost.source, p.methods["window"].cost.source])  # as --json's decisions
    console.print(
        f"best depth (d = 2..10, min TPOT): native d={bd['native']} ({by_d['native'][bd['native']]:.3f} ms), "
        f"window d={bd['window']} ({by_d['window'][bd['window']]:.3f} ms) [dim]{both}[/dim]"
    )
    console.print(
        f"break-even acceptance ratio rho* = step_window / step_native = {p.break_even_accept_ratio:.3f}: "
        f"windowing pays while AL_window / AL_native > {p.break_even_accept_ratio:.3f} [dim]{both}[/dim]"
    )
    dp = p.draft_prefill
    saving = f"{dp['saving_ms'] / 1e3:.1f} s" if dp["saving_ms"] >= 1e3 else f"{dp['saving_ms']:.1f} ms"
    console.print(f"draft prefill pruned to the last W + sink tokens saves about {saving} of "
                  f"time-to-first-token [dim]estimate (speed-of-light)[/dim]")
    sources = {"AL native": r["native"].accept_source, "AL window": r["window"].accept_source,
               "step": r["native"].cost.source}
    console.print("[dim]sources: " + "; ".join(f"{k}: {escape(v)}" for k, v in sources.items())
                  + ". tags: sol = speed-of-light (datasheet x achievable fraction), meas = measured, "
                  "interp/extrap = interpolated/extrapolated from measurements, scaled = another GPU's profile "
                  "scaled by bandwidth and flop ratios, model = analytical, engine = includes a serving-engine "
                  "overhead preset, fw = a framework profile from logs (shown where the other parts are measured), "
                  "preset / flag = a paper preset / your --accept-length; * = the weakest of mixed components "
                  "(--json lists each).[/dim]")
    for w in p.warnings:
        console.print(f"[yellow]warning:[/yellow] {shown(w)}")  # a warning names files and models


def render_memory_table(p, names) -> None:
    """The memory table of a prediction: per method, weights, KV, state, seats (and the engine's accounting)."""
    m, hw = p.memory, p.hw
    mt = Table(title=f"Memory on {hw.key}" + (f", per GPU of {p.tp}" if p.tp > 1 else "")
               + (f" (engine accounting: {m.engine_source})" if m.engine else " (analytical, mem_fraction 0.85)"),
               title_justify="left")
    mt.add_column("", overflow="fold")
    for n in names:
        mt.add_column(n, justify="right", overflow="fold")
    mt.add_row("weights", *[format_bytes(m.weights_bytes[n]) for n in names])
    mt.add_row("target KV / request", *[format_bytes(m.per_request[n].target_kv_bytes) for n in names])
    mt.add_row("draft KV / request", "-", format_bytes(m.per_request["native"].draft_kv_bytes),
               f"{format_bytes(m.per_request['window'].draft_kv_bytes)} "
               + (f"(ring {m.ring_slots} slots)" if m.ring_slots else "(no ring: the window covers the context)"))
    mt.add_row("recurrent state / request", *[format_bytes(m.per_request[n].state_bytes) for n in names])
    mt.add_row("max concurrent requests", *[str(m.max_batch[n]) for n in names])
    if m.engine:
        mt.add_row("fits (engine accounting)", *["yes" if m.engine[n].fits else "no" for n in names])
        mt.add_row("mem_fraction_static", *[f"{m.engine[n].mem_fraction_static:g}" for n in names])
    if m.engine_max:
        mt.add_row("largest mem_fraction_static that fits",
                   *[f"{e.mem_fraction_static:g}" if e else "none" for e in (m.engine_max[n] for n in names)])
        mt.add_row("max concurrent requests there",
                   *[str(e.max_batch) if e else "0" for e in (m.engine_max[n] for n in names)])
    console.print(mt)


def render_models(as_json: bool) -> None:
    from wmtp.models import MODELS

    if as_json:
        rows = []
        for s in MODELS.values():
            d = asdict(s)
            d.update(total_params=s.total_params, kv_bytes_per_token_layer=s.kv_bytes_per_token_layer,
                     state_bytes_per_layer=s.state_bytes_per_layer)
            rows.append(d)
        echo_json(rows)  # plain, as every --json (rich's print_json coloured it under FORCE_COLOR)
        return
    t = compact_table("Models (--model KEY, a model folder or a Hugging Face repo id)")
    add_columns(t, ("key", False), ("name", False), ("layers: full\n+ linear", False), ("heads\nq/kv x dim", True),
                ("FFN: experts\nx size/top-k", True), ("params", True), ("KV B/tok\n/layer", True), ("weights", False))
    t.columns[0].no_wrap = True  # the key a user types is never wrapped or cut
    t.columns[0].style = "bold"
    for s in MODELS.values():
        moe = f"{s.n_experts}x{s.expert_ffn}/{s.top_k}" if s.n_experts and s.n_moe else f"dense {s.dense_ffn}"
        layers = f"{s.n_layers}: {s.n_full_attn}" + (" MLA" if s.attn_kind == "mla" else "") + (
            f" + {s.n_linear} {s.linear_kind}" if s.n_linear else "")
        t.add_row(s.key, s.name, layers, f"{s.q_heads}/{s.kv_heads}x{s.head_dim}", moe, f"{s.total_params / 1e9:.1f}B",
                  f"{s.kv_bytes_per_token_layer:.0f}", s.weight_dtype)
    console.print(t)


def render_hardware(as_json: bool) -> None:
    from wmtp.hardware import HARDWARE

    if as_json:
        echo_json([asdict(h) for h in HARDWARE.values()])
        return
    t = compact_table("Hardware (--hw KEY): datasheet peaks per GPU")
    add_columns(t, ("key", False), ("name", False), ("HBM", True), ("TB/s", True), ("TFLOP/s\nbf16/fp8/fp4", True),
                ("L2", True), ("SMs", True), ("link\nGB/s", True), ("eff %\nbw/flop", True))
    t.columns[0].no_wrap = True
    t.columns[0].style = "bold"
    for h in HARDWARE.values():
        fp4 = f"{h.fp4_tflops:g}" if h.fp4_tflops else "-"
        t.add_row(h.key, h.name, format_bytes(h.hbm_bytes, 0), f"{h.hbm_bw_tbps:g}",
                  f"{h.bf16_tflops:g}/{h.fp8_tflops:g}/{fp4}", format_bytes(h.l2_bytes, 0), str(h.sm_count),
                  f"{h.link_bw_gbps:g}", f"{100 * h.bw_eff:.0f}/{100 * h.flop_eff:.0f}")
    con = Console()
    con.print(t)
    con.print("[dim]fp4 '-': no native fp4 (nvfp4 weights run at the bf16 rate). eff: achievable % of peak "
              "bandwidth / flops, used until a profile is measured. Sources:[/dim]")
    for h in HARDWARE.values():
        con.print(f"  [bold]{h.key}[/bold]: {h.source}", highlight=False)


def render_headroom(room: dict) -> None:
    """Per method: step totals, then the components where the engine's kernels and wmtp's differ most; every time
    tagged (the floor 'sol': speed-of-light at the measured ceilings), a component priced below its floor marked '!'
    and said why."""
    d = room["depth"]  # one d, or native / window -> d where --depth auto picked two
    at = f"d {d}" if not isinstance(d, dict) else ", ".join(f"{m} d {v}" for m, v in d.items())
    t = compact_table(f"Headroom at {at}: engine kernels ({escape(room['engine_kernels'])}) vs "
                      f"wmtp's own ({escape(room['own_kernels'])}) vs the floor, ms per step")
    add_columns(t, ("method", False), ("engine", True), ("own", True), ("floor", True), ("engine / own", True))
    for m, v in room["steps"].items():
        ratio, low = weakest_tag([v["engine_source"], v["own_source"]]), v.get("below_floor") or {}
        t.add_row(m, *[cell(v[f"{side}_ms"], v[f"{side}_source"]) + (" !" if side in low else "")
                       for side in ("engine", "own")], cell(v["floor_ms"], v["floor_source"]),
                  f"{v['engine_ms'] / v['own_ms']:.2f}x [dim]{ratio}[/dim]" if v["own_ms"] else "-")
    console.print(t)
    c = compact_table("Components, per step (largest engine - own first)")
    add_columns(c, ("method", False), ("component", False), ("engine", True), ("own", True), ("floor", True))
    rows = sorted(room["components"], key=lambda r: -(r["engine_ms"] - r["own_ms"]) * r["times"])
    for r in rows[:12]:
        k, low = r["times"], r.get("below_floor") or {}
        c.add_row(r["method"], r["component"] + (f" x{k}" if k > 1 else ""),
                  *[cell(r[f"{side}_ms"] * k, r[f"{side}_source"]) + (" !" if side in low else "")
                    for side in ("engine", "own")], cell(r["floor_ms"] * k, r["floor_source"]))
    console.print(c)
    console.print(f"[dim]floor (sol): {escape(room['floor'])}; --json lists every component with its sources[/dim]")
    for line in below_floor_lines(room["components"]):
        console.print(f"! {escape(line)}")
    if room.get("note"):
        console.print(f"note: {escape(room['note'])}")


def below_floor_lines(components: list[dict]) -> list[str]:
    """One line per component and side priced below its floor (all components, shown or not), its methods
    joined, the largest shortfall's reason."""
    by: dict = {}
    for r in components:
        for side, why in (r.get("below_floor") or {}).items():
            by.setdefault((side, r["component"]), []).append((r["method"], why))
    out = []
    for (side, comp), items in by.items():
        methods = ", ".join(dict.fromkeys(m for m, _ in items))
        worst = max((w for _, w in items), key=lambda w: float(w.split(" %", 1)[0]))
        out.append(f"{side} {comp} ({methods}): {worst}")
    return out
