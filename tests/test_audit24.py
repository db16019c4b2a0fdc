"""Session print24: every number a command prints says where it came from (measured, interpolated, extrapolated,
speed-of-light, analytical, a named preset or framework profile, or for logs the file lines it was read from).

The rule, as the checkers in tests/tag_checks.py apply it: a priced number is one the tool derived (times, TPOT,
tok/s, speed-ups, memory sizes, ratios, acceptance lengths and alphas, best depth, requests seated, break-even
points); an input echoed back (ctx, d, W, sink, B the user gave) or a count (lines, steps, runs) needs no tag. In
text, a priced number's tag is in its table cell, in its row's source column, in its table's title (one source for
the whole table), or on its line; in --json, in its record (the dict holding it) or an enclosing one, and an
acceptance number needs an acceptance source there, not only a cost one; in `wmtp report`'s figures (their plotly
JSON parsed from the HTML, review 25), in each drawn point's hover box, in the label of a line drawn at a value, and
in the legend of numbers written on the plot. Each command runs through typer's
CliRunner at 400 columns (no wrapped lines), its text and its --json parsed; the checkers are shown to catch a
stripped tag (the synthetic cases below).

And `predict --headroom`: no own-kernel component below its floor without a note saying why (the floor recomputed
here from the shipped profiles' JSON, not read from the code under test).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tag_checks import priced_numbers, report_figures, untagged_figures, untagged_html, untagged_json, untagged_text
from wmtp.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
PROFILES = ROOT / "wmtp_model" / "data" / "profiles"


def run(*args, columns: int = 400):
    r = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": str(columns)})
    assert r.exit_code == 0, r.output
    return r.stdout


def _histograms(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "native.json", tmp_path / "window.json"
    a.write_text("[10, 20, 30, 40]")
    b.write_text("[20, 20, 30, 30]")
    return a, b


COMMANDS = [
    ("predict", "--model", "q122"),
    ("predict", "--model", "q122", "--headroom"),
    ("predict", "--model", "dsv3", "--ctx", "128K", "--batch", "8", "--headroom"),  # components below the floor
    ("predict", "--model", "q35", "--hw", "b200", "--headroom"),  # both profiles scaled to another GPU
    ("predict", "--model", "q122", "--hw", "b200", "--framework", "sglang-b200-paper"),  # engine memory accounting
    ("predict", "--model", "q35", "--tp", "2", "--depth", "auto"),
    ("predict", "--model", "q35", "--accept-length", "4.5:4.0", "--speed-of-light"),
    ("sweep", "ctx", "--model", "q122"),
    ("sweep", "depth", "--model", "q122"),
    ("sweep", "window", "--model", "q122", "--al-window", "1K:3.0,4032:3.5"),
    ("sweep", "batch", "--model", "q35", "--ctx", "128K"),
    ("simulate", "--model", "q122"),
    ("simulate", "--model", "q35", "--depth", "adaptive", "--phases", "0.9:200"),
    ("models",), ("hardware",), ("engines",),
    ("logs", DATA / "sglang_decode.log"),
    ("logs", DATA / "real_v3" / "vllm-bench-serve-2026-save-result-json-per-position.json"),
    ("accept", DATA / "real" / "sglang-meta-info-dspark-histogram-33518.json"),
    ("accept", DATA / "real" / "sglang-bench-serving-accept-length-only-npu-17098.log", "--depth", "4"),
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(map(str, a))[:60])
def test_every_priced_number_is_tagged_in_text_and_json(args):
    text = run(*args)
    # the model registry prints the rows' architecture facts (inputs, like --config's): integers and names only
    assert bool(priced_numbers(text)) == (args != ("models",)), "the checker saw no number at all"
    assert untagged_text(text) == []
    doc = json.loads(run(*args, "--json"))
    assert untagged_json(doc, reader=args[0] in ("logs", "accept")) == []


def test_accept_compare_is_tagged(tmp_path):
    a, b = _histograms(tmp_path)
    text = run("accept", a, b, "--compare")
    assert "native vs window, position by position: native measured" in text
    assert untagged_text(text) == []
    doc = json.loads(run("accept", a, b, "--compare", "--json"))
    assert doc["comparison_source"].startswith("native measured")
    assert untagged_json(doc, reader=True) == []


def test_a_mean_al_only_profile_is_said_to_be_a_model_not_measured():
    doc = json.loads(run("accept", DATA / "real" / "sglang-bench-serving-accept-length-only-npu-17098.log",
                         "--depth", "4", "--json"))
    assert doc["files"][0]["profile_source"].startswith("analytical (a geometric profile")
    text = run("accept", DATA / "real" / "sglang-bench-serving-accept-length-only-npu-17098.log", "--depth", "4")
    assert "alpha_j (analytical)" in text and "AL by depth (analytical profile;" in text


def test_depth_auto_tags_the_depths_it_chose():
    """Under --depth auto the d row holds each method's best depth (a decision from priced TPOTs), tagged as the
    best-depth line is; at a fixed --depth it is the input, untagged."""
    row = next(ln for ln in run("predict", "--model", "q35", "--depth", "auto").splitlines() if "d (draft" in ln)
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells[1] == "1" and all(re.fullmatch(r"\d+ (interp|meas|extrap)\*?", c) for c in cells[2:]), cells
    fixed = next(ln for ln in run("predict", "--model", "q35").splitlines() if "d (draft" in ln)
    assert [c.strip() for c in fixed.strip("│").split("│")][1:] == ["1", "7", "7"]


def test_batch_sweep_rows_say_where_their_acceptance_comes_from():
    rows = json.loads(run("sweep", "batch", "--model", "q35", "--ctx", "128K", "--json"))["rows"]
    by_method = {r["method"]: r["accept_source"] for r in rows}
    assert by_method["dense"] == "no speculation"
    assert by_method["native"].startswith("preset q35/") and by_method["window"].startswith("preset q35/")


def _log(path: Path, step_ms: float, al: float = 3.0, n: int = 40) -> Path:
    thr = al / (step_ms / 1e3)  # every line: T_iter = accept len / gen throughput = step_ms
    path.write_text("\n".join(
        f"[2026-01-01 10:00:{i % 60:02d}] Decode batch. #running-req: 1, #token: 10, token usage: 0.1, "
        f"accept len: {al:.2f}, cuda graph: True, gen throughput (token/s): {thr:.3f}, #queue-req: 0"
        for i in range(n)))
    return path


def test_calibrate_logs_summary_is_tagged(tmp_path):
    runs = [f"{_log(tmp_path / f'd{d}.log', ms)}:{d}" for d, ms in ((3, 35.0), (5, 40.0), (7, 45.0))]
    text = run("calibrate-logs", *runs, "--model", "q35", "--out", tmp_path / "fw.json")
    assert "(measured: fitted to the logged steps)" in text and "(framework profile:" in text
    assert untagged_text(text) == []


def test_report_html_text_is_tagged(tmp_path):
    pytest.importorskip("plotly")
    for args in (("--model", "q122"), ("--model", "dsv3", "--ctx", "128K", "--batch", "8")):
        out = tmp_path / "r.html"
        run("report", *args, "--out", out)
        doc = out.read_text()
        assert "<small>speed-of-light</small>" in doc  # the headroom floor's
        assert untagged_html(doc) == []


def test_validate_and_calibrate_without_a_gpu_print_no_untagged_number(tmp_path):
    r = CliRunner().invoke(app, ["validate", "--profile", str(PROFILES / "h200.json"), "--out", str(tmp_path / "v")])
    assert r.exit_code == 1 and r.output.startswith("error: ") and not priced_numbers(r.output)
    text = run("calibrate", "--from-raw", PROFILES / "h200.raw.csv.gz", "--out", tmp_path / "cal")
    assert untagged_text(text) == []


# --- the checkers can fail -------------------------------------------------------------------------------------------

def _strip_first(text: str, pattern) -> str:
    """`text` with the first match of `pattern` (a tag after a number) blanked, the line's width kept (as a table
    printed without the tag would be)."""
    out, n = re.subn(pattern, lambda m: " " * len(m.group(0)), text, count=1)
    assert n == 1, pattern
    return out


def test_text_checker_finds_a_stripped_tag():
    text = run("predict", "--model", "q122", "--headroom")
    assert untagged_text(text) == []
    for pattern in (r"(?<=22\.248) interp\*", r"(?<=ms\)) interp\*$", r"(?<=34\.962) extrap\*", r"(?<=\d) sol(?= )"):
        broken = _strip_first(text, re.compile(pattern, re.M) if pattern.endswith("$") else pattern)
        assert untagged_text(broken), pattern
    synthetic = "Table\n┏━━━┳━━━━━┓\n┃   ┃ dense ┃\n┡━━━╇━━━━━┩\n│ step │ 9.350 │\n└───┴─────┘\n"
    assert untagged_text(synthetic) == ["│ step │ 9.350 │  <- cell '9.350'"]
    assert untagged_text(synthetic.replace("9.350", "9.350 meas")) == []
    assert untagged_text("best depth: native d=8\n") == ["best depth: native d=8"]


def test_json_checker_finds_a_missing_source():
    doc = json.loads(run("predict", "--model", "q122", "--headroom", "--json"))
    assert untagged_json(doc) == []
    sides = ("own_source", "engine_source", "floor_source")
    for path, keys in ((("methods", "native"), ("source",)), (("methods", "native"), ("accept_source",)),
                       (("headroom", "components", 0), sides), (("headroom", "steps", "dense"), sides)):
        broken = copy.deepcopy(doc)
        rec = broken
        for p in path:
            rec = rec[p]
        for k in keys:
            del rec[k]
        found = untagged_json(broken)
        assert found and all(p.startswith("$." + ".".join(map(str, path[:2]))) for p, _ in found), (keys, found)
    assert ("$.methods.native.accept_length", doc["methods"]["native"]["accept_length"]) in untagged_json(
        {"methods": {"native": {k: v for k, v in doc["methods"]["native"].items() if k != "accept_source"}}})


def test_headroom_records_carry_each_sides_source():
    """A component's engine, own and floor times each name their own source (one tag for three numbers of three
    origins would say the wrong thing for two of them)."""
    room = json.loads(run("predict", "--model", "q122", "--headroom", "--json"))["headroom"]
    for rec in room["components"] + list(room["steps"].values()):
        assert {"engine_source", "own_source", "floor_source"} <= set(rec)
        assert rec["floor_source"] == "speed-of-light at the measured ceilings"
        assert rec["own_source"] and rec["engine_source"]


def test_html_checker_finds_a_stripped_tag(tmp_path):
    pytest.importorskip("plotly")
    out = tmp_path / "r.html"
    run("report", "--model", "q122", "--out", out)
    doc = out.read_text()
    head = doc.index("<h2>Headroom")
    assert untagged_html(doc[:head] + re.sub(r" <small>[^<]*</small>", "", doc[head:], count=1))
    assert untagged_html(doc.replace(" <small>analytical</small>;", ";", 1))


# --- the report's figures: every number a hover box, a label or the plot shows carries its tag ----------------------

REPORTS = [
    ("--model", "q122"),
    ("--model", "dsv3", "--ctx", "128K", "--batch", "8"),
    ("--model", "q35", "--hw", "b200"),  # the H200 profile scaled: 'scaled'
    ("--model", "q35", "--speed-of-light"),  # no held-out error: the 5 % model error 'assumed'
    ("--model", "q122", "--hw", "b200", "--framework", "sglang-b200-paper"),  # engine preset, engine accounting
    ("--model", "q35", "--accept-length", "4.5:4.0"),  # geometric profiles through the flag's ALs: 'analytical'
    ("--model", "q35", "--histogram", f"window={DATA / 'real' / 'sglang-meta-info-dspark-histogram-33518.json'}",
     "--logs", f"native={DATA / 'sglang_decode.log'}"),  # a measured histogram; a log's mean AL
]


def _figures(tmp_path: Path, *args) -> tuple[dict, str]:
    out = tmp_path / "r.html"
    run("report", *args, "--out", out)
    doc = out.read_text()
    return report_figures(doc), doc


@pytest.mark.parametrize("args", REPORTS, ids=lambda a: " ".join(map(str, a))[:60])
def test_report_figures_are_tagged(tmp_path, args):
    pytest.importorskip("plotly")
    from wmtp.reports.html import FIGURES

    figs, _ = _figures(tmp_path, *args)
    assert set(figs) == {f"plot-{k}" for k in FIGURES}
    drawn = [t for f in figs.values() for t in f["data"] if any(isinstance(y, (int, float)) for y in t.get("y", []))]
    assert len(drawn) >= 15, "the checker saw no figure data"
    assert untagged_figures(figs) == []


def _small(doc: str, row: str) -> list[str]:
    """The <small> origins of the summary table's row `row` (dense, native, window; '' where the cell is '-')."""
    cells = re.findall(r"<td>(.*?)</td>", re.search(rf"<tr><td>{re.escape(row)}</td>(.*?)</tr>", doc).group(1))
    return [(re.findall(r"<small>(.*?)</small>", c) or [""])[0] for c in cells]


def test_report_figures_tags_agree_with_the_tables(tmp_path):
    """The figures' per-point origins are the summary table's for the same numbers: each bar of the step figure is
    its t_* cell's, the depth curves at the report's d = 7 are the TPOT cells'."""
    pytest.importorskip("plotly")
    figs, doc = _figures(tmp_path, "--model", "q122")
    bars = {t["name"]: t for t in figs["plot-step-decomposition"]["data"]}
    for name, row in (("t_verify", "t_verify (ms)"), ("t_ctx", "t_ctx (ms)")):
        shown = [c for c, y in zip(bars[name]["customdata"], bars[name]["y"]) if y is not None]
        assert shown == [t for t in _small(doc, row) if t], name
    tpot = dict(zip(("dense", "native", "window"), _small(doc, "TPOT (ms)")))
    for t in figs["plot-tpot-vs-depth"]["data"]:
        if t["name"] in ("native", "window"):
            assert t["customdata"][t["x"].index(7)] == tpot[t["name"]]


def test_figure_checker_finds_a_stripped_tag(tmp_path):
    """Each way a tag can go missing, one at a time: one point's source, a hover's fixed tag, a value line's label,
    the legend of numbers written on the plot, a priced annotation's source; and the HTML's own text edited."""
    pytest.importorskip("plotly")
    figs, doc = _figures(tmp_path, "--model", "q122")
    assert untagged_figures(figs) == []

    def trace(f, fid, name):
        return next(t for t in f[fid]["data"] if t["name"] == name)

    def note(f, fid, start):
        return next(a for a in f[fid]["layout"]["annotations"] if a["text"].startswith(start))

    edits = [
        ("plot-step-decomposition", lambda f: trace(f, "plot-step-decomposition", "t_verify")["customdata"]
         .__setitem__(1, "")),
        ("plot-tpot-vs-context", lambda f: trace(f, "plot-tpot-vs-context", "window")["customdata"]
         .__setitem__(0, "14.757")),
        ("plot-memory", lambda f: trace(f, "plot-memory", "draft KV").update(
            hovertemplate=trace(f, "plot-memory", "draft KV")["hovertemplate"].replace(", analytical", ""))),
        ("plot-tpot-vs-depth", lambda f: note(f, "plot-tpot-vs-depth", "dense TPOT").update(text="dense")),
        ("plot-memory", lambda f: trace(f, "plot-memory", "max concurrent requests (analytical)").update(
            name="max concurrent requests", hovertemplate="%{x}: %{y} requests<extra></extra>")),
        ("plot-window-curve", lambda f: note(f, "plot-window-curve", "window and native").update(
            text="window and native TPOT differ by less than the model's error (7.9 %) at every W")),
        ("plot-acceptance-per-position", lambda f: f["plot-acceptance-per-position"]["data"][0]["customdata"]
         .__setitem__(2, "Windowed-MTP paper, Table 2")),
    ]
    for fid, edit in edits:
        broken = copy.deepcopy(figs)
        edit(broken)
        found = untagged_figures(broken)
        assert found and all(x.startswith(fid + ":") for x in found), (fid, found)
    stripped = doc.replace(r"ms, %{customdata}\u003cextra\u003et_ctx", r"ms\u003cextra\u003et_ctx", 1)  # (JSON's <)
    assert stripped != doc
    assert [x.split(":")[0] for x in untagged_figures(report_figures(stripped))] == ["plot-step-decomposition"]


# --- predict --headroom: no own-kernel component below its floor unsaid ---------------------------------------------

def _profile(name: str) -> dict:
    return json.loads((PROFILES / f"{name}.json").read_text())


OWN_DOC, ENGINE_DOC = _profile("h200"), _profile("h200-flashinfer")


def _expected_rates(hw) -> tuple[float, float]:
    """(HBM bytes/s, bf16 flop/s) the floor should divide by on `hw`, recomputed from the profiles' JSON: the faster
    of the own run's copy and the fastest measured shape of either run that moves at least 4 L2s (H200: 60 MB),
    links left out; scaled by the datasheet ratios off the H200."""
    from wmtp.hardware import get_hardware

    h200 = get_hardware("h200")
    rates = [OWN_DOC["ceilings"]["copy_tbps"] * 1e12]
    for doc in (OWN_DOC, ENGINE_DOC):
        for kind, comp in doc["components"].items():
            rates += [p["bytes"] / (p["median_ms"] / 1e3) for p in comp.get("points", [])
                      if not kind.startswith("allreduce") and p["bytes"] >= 4 * h200.l2_bytes]
    gemm = OWN_DOC["ceilings"]["gemm_bf16_tflops"] * 1e12
    return max(rates) * hw.hbm_bw_tbps / h200.hbm_bw_tbps, gemm * hw.bf16_tflops / h200.bf16_tflops


def _expected_floor(work, spec, hw, rates) -> float:
    bw = hw.l2_bw_tbps * 1e12 if work.shape.get("l2_resident") else rates[0]
    weights = work.kind in ("gemm", "moe", "lm_head")
    flop_rate = rates[1] * (hw.tflops_for(work.shape.get("wdtype") or spec.weight_dtype) / hw.bf16_tflops
                            if weights else 1.0)
    return max(work.bytes * work.count / bw, work.flops * work.count / flop_rate) * 1e3


GRID = [("h200", m, ctx, b) for m in ("q35", "q122", "nem", "qnext", "dsv3", "glm45", "mimo7b")
        for ctx in (4096, 131072, 1 << 20) for b in (1, 8)] + [("b200", m, 1 << 20, 1) for m in ("q35", "q122")]


@pytest.mark.parametrize("hw_key, model, ctx, batch", GRID)
def test_no_component_below_its_floor_without_a_note(hw_key, model, ctx, batch):
    from wmtp.hardware import get_hardware
    from wmtp.headroom import headroom
    from wmtp.latency import step_cost
    from wmtp.models import get_model
    from wmtp.profile import ProfileCostModel

    hw, spec = get_hardware(hw_key), get_model(model)
    own = ProfileCostModel.from_path(PROFILES / "h200.json", "shipped")
    eng = ProfileCostModel.from_path(PROFILES / "h200-flashinfer.json", "shipped")
    rows = headroom(spec, hw, eng, own, ctx, 7, 4032, 64, batch)
    rates = _expected_rates(hw)
    works = [p.work for m in ("dense", "native", "window")
             for c in [step_cost(spec, hw, own, m, ctx, 1 if m == "dense" else 7, batch, 4032, 64)]
             for p in c.t_verify.items + c.t_ctx.items + c.t_fwd.items]
    assert len(works) == len(rows)
    for r, w in zip(rows, works):
        floor = _expected_floor(w, spec, hw, rates)
        assert r.component == w.name and r.floor_ms == pytest.approx(floor, rel=1e-9)
        for side in ("own", "engine"):
            below = getattr(r, f"{side}_ms") < floor * (1 - 1e-9)
            assert below == (side in r.below_floor), (side, r)  # said where it is, and only there
            if below:
                assert re.search(r"% below the floor \((flops|bytes) at .*rate above the (measured|estimated) "
                                 r"ceiling$", r.below_floor[side]), r.below_floor[side]


def test_reported_case_q122_lm_head_is_above_its_floor_now_and_the_cause_is_the_copy_rate():
    """The report: q122 at 1M showed the own lm_head (0.3555 ms) below a floor of bytes / copy bandwidth (0.3559 ms).
    The profile's own measurement of that shape (tokens=1) ran at 0.3538 ms: a pure read streams faster than the
    copy (read + write) the floor divided by. The floor now divides by the fastest stream either run measured, at or
    below every measured lm_head point."""
    copy = OWN_DOC["ceilings"]["copy_tbps"] * 1e12
    pt = next(p for p in OWN_DOC["components"]["lm_head"]["points"] if p["model"] == "q122"
              and p["config"] == "lm_head;tokens=1")
    assert pt["median_ms"] < pt["bytes"] / copy * 1e3  # the cause: measured faster than the copy floor
    from wmtp.hardware import get_hardware

    stream = _expected_rates(get_hardware("h200"))[0]
    assert all(p["median_ms"] >= p["bytes"] / stream * 1e3 for doc in (OWN_DOC, ENGINE_DOC)
               for p in doc["components"]["lm_head"]["points"])
    text = run("predict", "--model", "q122", "--ctx", "1M", "--headroom")
    assert not [ln for ln in text.splitlines() if ln.startswith("! ")]
    room = json.loads(run("predict", "--model", "q122", "--ctx", "1M", "--headroom", "--json"))
    lm = [c for c in room["headroom"]["components"] if c["kind"] == "lm_head"]
    assert lm and all(c["own_ms"] >= c["floor_ms"] and not c["below_floor"] for c in lm)
    # the headroom's own step is predict's step (the draft extend priced at predict's AL, not at d)
    for m in ("dense", "native", "window"):
        assert room["headroom"]["steps"][m]["own_ms"] == pytest.approx(room["methods"][m]["step_ms"], rel=1e-12)


def test_a_compute_bound_item_is_priced_at_its_floor_not_below_it():
    """DeepSeek-V3's MLA attention at 128K, B = 32: its fit (of bandwidth-bound shapes) gives less time than its
    flops take at the measured GEMM peak (with the profile of 2026-12-04; at B = 8 the re-measured verify fit sits
    1.6 % above that floor). `profile.price` raises it to that floor and says so, so the own side sits on its floor
    (the floor's flops term: the same flops at the same peak) and no own component is below it."""
    doc = json.loads(run("predict", "--model", "dsv3", "--ctx", "128K", "--batch", "32", "--headroom", "--json"))
    comps = {c["component"]: c for c in doc["headroom"]["components"]}
    att = comps["verify.attention"]
    assert att["own_ms"] == pytest.approx(att["floor_ms"], rel=1e-9)
    assert "raised to its flops at the measured GEMM peak" in att["own_source"]
    assert not [c for c in doc["headroom"]["components"] if "own" in c["below_floor"]]


def test_components_below_the_floor_are_said_in_the_text(tmp_path):
    """An engine profile whose recorded GEMM peak is ten times the own run's does not raise its compute-bound
    prices to the floor (which divides by the own run's peak): dsv3's MLA attention at 128K, B = 8 is then priced
    by the engine fit below the floor, and every such component has its '!' line, the JSON's `below_floor` entry
    and a reason naming the flops."""
    eng = json.loads(json.dumps(ENGINE_DOC))
    eng["ceilings"]["gemm_bf16_tflops"] *= 10
    path = tmp_path / "engine.json"
    path.write_text(json.dumps(eng))
    args = ("predict", "--model", "dsv3", "--ctx", "128K", "--batch", "8", "--profile", str(path), "--headroom")
    doc = json.loads(run(*args, "--json"))
    low = {(side, c["component"]) for c in doc["headroom"]["components"] for side in c["below_floor"]}
    assert ("engine", "verify.attention") in low and not [k for k in low if k[0] == "own"]
    lines = [ln for ln in run(*args).splitlines() if ln.startswith("! ")]
    assert {tuple(ln[2:].split()[:2]) for ln in lines} == low
    assert any("flops at the GEMM rate" in ln for ln in lines)