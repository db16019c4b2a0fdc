"""The benchmark harness end to end on a tiny model, on the CPU (Triton interpreter, stand-in timer):
every kernel kind produces rows, failures become rows, the summary is written."""

from __future__ import annotations

import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from wmtp.measure import bench, components, harness, timing  # noqa: E402
from wmtp.measure.backends import get_backend  # noqa: E402
from wmtp.specs import ModelSpec  # noqa: E402

TINY = ModelSpec(
    key="tiny", name="tiny", family="qwen3_next", hidden=64, vocab=128, n_layers=4, n_full_attn=1, n_linear=3,
    n_moe=4, n_dense_ffn=0, q_heads=4, kv_heads=2, head_dim=32, attn_out_gate=True, linear_kind="gdn",
    lin_k_heads=2, lin_v_heads=4, lin_head_dim=16, n_experts=8, top_k=2, expert_ffn=32, n_shared=1, shared_ffn=32,
)


@pytest.fixture
def cpu_harness(monkeypatch):
    calls = []

    def fake_time(work, reps=50, warmup=5, flush=True, graph=True):
        for fn in work:  # really run every call once, so kernels and shapes are exercised
            fn()
        calls.append(len(work))
        return timing.Timing([0.5, 0.25], "stand-in")

    monkeypatch.setattr(components, "DEVICE", "cpu")
    monkeypatch.setattr(timing, "time_calls", fake_time)
    set_free_bytes(monkeypatch, 1 << 40)
    for mod in (harness, bench):
        monkeypatch.setattr(mod, "l2_bytes", lambda: 1 << 16)
    return calls


def set_free_bytes(monkeypatch, n: int) -> None:
    """Free device memory as the harness and the commands built on it see it."""
    from wmtp.measure import sweep

    for mod in (harness, bench, sweep):
        monkeypatch.setattr(mod, "free_bytes", lambda: n)


def attention_rows(w, spec, ctx, batch, cfg, tune=False):
    pools = harness.Pools(spec, ctx * batch)
    bench.attention_rows(w, pools, get_backend("wmtp"), ctx, batch, cfg, tune)


def test_harness_writes_every_kernel_kind(tmp_path, cpu_harness):
    cfg = bench.BenchConfig(ctxs=[100], batches=[2], window=24, sink=4, depth=3, extend_queries=2, variants=False)
    w = harness.RowWriter(tmp_path / "k.csv")
    attention_rows(w, TINY, 100, 2, cfg)
    bench.component_rows(w, TINY, 2, cfg)
    w.close()
    df = pd.read_csv(tmp_path / "k.csv")
    assert list(df.columns) == bench.COLUMNS
    bad = df[df.status != "ok"]
    assert bad.empty, bad[["kernel", "config", "status"]].to_string()
    kinds = set(df.kernel)
    assert {"index_build", "decode_attn", "verify_attn", "extend_attn", "lm_head", "gemm", "moe", "linear_state"} <= kinds
    assert set(df[df.kernel == "decode_attn"].impl) == {"wmtp", "torch_sdpa"}
    native = df[(df.kernel == "decode_attn") & (df.config == "native") & (df.impl == "wmtp")]
    assert (native.bytes == 2 * 100 * TINY.kv_bytes_per_token_layer).all()
    window = df[(df.kernel == "decode_attn") & (df.config == "window")]
    assert (window.bytes == 2 * 28 * TINY.kv_bytes_per_token_layer).all()
    assert (df.rep.isin([0, 1])).all() and len(df) % 2 == 0  # one row per sample
    (tmp_path / "summary.md").write_text(bench.summarize(tmp_path / "k.csv"))
    assert "decode_attn" in (tmp_path / "summary.md").read_text()


def test_failing_shape_is_a_row(tmp_path, cpu_harness, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("kernel exploded\nsecond line")

    from wmtp.measure.backends import wmtp as wmtp_backend

    monkeypatch.setattr(wmtp_backend, "decode_attention", boom)
    cfg = bench.BenchConfig(ctxs=[50], batches=[1], window=8, sink=2, depth=2, extend_queries=2, variants=False,
                            sdpa=False)
    w = harness.RowWriter(tmp_path / "k.csv")
    attention_rows(w, TINY, 50, 1, cfg)
    w.close()
    df = pd.read_csv(tmp_path / "k.csv")
    failed = df[df.kernel == "decode_attn"]
    assert len(failed) == 2 and failed.status.str.contains("RuntimeError: kernel exploded").all()
    assert failed.time_ms.isna().all()
    assert (df[df.kernel == "verify_attn"].status == "ok").all()


def test_not_enough_memory_is_a_row(tmp_path, cpu_harness, monkeypatch):
    set_free_bytes(monkeypatch, 1000)
    cfg = bench.BenchConfig(ctxs=[50], batches=[1])
    w = harness.RowWriter(tmp_path / "k.csv")
    attention_rows(w, TINY, 50, 1, cfg)
    w.close()
    df = pd.read_csv(tmp_path / "k.csv")
    # every case and the SDPA reference: one skipped row each, none timed
    assert len(df) == 3 + 2 + 3 + 2 and df.status.str.startswith("skipped: ").all()
    assert df.time_ms.isna().all()


def test_resume_appends(tmp_path):
    w = harness.RowWriter(tmp_path / "k.csv")
    w.write({"kernel": "copy"}, [1.0], "t")
    w.close()
    w = harness.RowWriter(tmp_path / "k.csv", resume=True)
    w.write({"kernel": "copy"}, [2.0], "t")
    w.close()
    assert pd.read_csv(tmp_path / "k.csv").time_ms.tolist() == [1.0, 2.0]


def test_calibration_sweep_and_fit_end_to_end(tmp_path, cpu_harness, monkeypatch):
    from wmtp.calibrate.fitting import fit_raw_to_profile
    from wmtp.profile import load_profile
    from wmtp.measure import sweep

    monkeypatch.setattr(sweep, "l2_bytes", lambda: 1 << 16)
    # enough shapes per kind for a held-out error (features + 2): 8 decode, 10 verify shapes
    cfg = sweep.SweepConfig(ctxs=(64, 200), batches=(1, 2), depths=(2, 3, 4, 5), windows=(16, 24), gammas=(1, 2),
                            sink=4, extra_ctx=0)
    w = harness.RowWriter(tmp_path / "raw.csv")
    labels = []
    for label, step in sweep.sweep_plan([TINY], cfg):
        labels.append(label)
        step(w)
    w.close()
    assert len(labels) == len(set(labels))  # --resume keys steps by label
    df = pd.read_csv(tmp_path / "raw.csv")
    assert (df.status == "ok").all()
    assert {"decode_attn", "verify_attn", "index_build", "gemm", "moe", "lm_head", "linear_state",
            "draft_loop"} <= set(df.kernel)
    prof = fit_raw_to_profile(tmp_path / "raw.csv", tmp_path / "profile.json", {"gpu_name": "test", "gpu_sm_count": 132}, ["tiny"])
    assert set(load_profile(prof)["components"]) >= {"decode_attn", "verify_attn", "moe"}


def test_composed_step_runs_and_matches_work_items(cpu_harness):
    from wmtp.latency import step_cost, SpeedOfLight
    from wmtp.hardware import get_hardware
    from wmtp.measure import composed

    model = composed.ComposedModel(TINY, 200, 1 << 16)
    for method, ctx, d in (("dense", 200, 1), ("native", 200, 3), ("window", 150, 4)):
        calls = model.step(method, ctx, d, 16, 4, 2)
        for c in calls:
            c()
        cost = step_cost(TINY, get_hardware("h200"), SpeedOfLight(), method, ctx, max(d, 1), 1, 16, 4, accept_length=2)
        # one call per work item instance (attention projections count as one call per layer)
        expected = sum(p.work.count for ph in (cost.t_verify, cost.t_ctx) for p in ph.items)
        expected += (cost.gamma * sum(p.work.count for p in cost.t_fwd.items))
        assert len(calls) == expected, (method, len(calls), expected)


def test_fit_layers_scales_only_when_needed():
    from wmtp.measure.composed import fit_layers
    from wmtp.models import get_model

    full, note = fit_layers(get_model("q35"), 2**20, 200 * 2**30)
    assert note == "full model" and full.n_full_attn == 10 and full.weight_dtype == "bf16"
    small, note = fit_layers(get_model("q122"), 2**20, 100 * 2**30)
    assert "scaled" in note and 1 <= small.n_full_attn < 12 and small.n_linear < 36


def test_composed_tp_step_has_the_collectives_the_model_counts(cpu_harness):
    from wmtp.hardware import get_hardware
    from wmtp.latency import SpeedOfLight, step_cost
    from wmtp.measure import composed
    from wmtp.tp import per_gpu_spec

    gpu = per_gpu_spec(TINY, 2)
    model = composed.ComposedModel(gpu, 200, 1 << 16)
    sent = []

    def collective(tokens, width):
        return lambda: sent.append((tokens, width))

    calls = model.step("native", 200, 3, 16, 4, 2, collective=collective)
    for c in calls:
        c()
    cost = step_cost(TINY, get_hardware("h200"), SpeedOfLight(), "native", 200, 3, 1, 16, 4, accept_length=2, tp=2)
    expected = [(p.work.bytes, p.work.count) for ph in (cost.t_verify, cost.t_ctx) for p in ph.items
                if p.work.kind == "allreduce"]
    expected += [(p.work.bytes, p.work.count * cost.gamma) for p in cost.t_fwd.items if p.work.kind == "allreduce"]
    got: dict = {}
    for tokens, width in sent:
        got[2.0 * tokens * width] = got.get(2.0 * tokens * width, 0) + 1
    want: dict = {}
    for b, n in expected:
        want[b] = want.get(b, 0) + n
    assert got == want


def test_interrupted_steps_resume_where_they_stopped(tmp_path):
    from wmtp.measure.steps import run_steps

    ran = []

    def step(label, boom=False):
        def fn(writer):
            if boom:
                raise KeyboardInterrupt
            ran.append(label)
            writer.write({"kernel": label}, [1.0], "t")
        return fn

    done = tmp_path / "steps-done"
    w = harness.RowWriter(tmp_path / "raw.csv")
    with pytest.raises(KeyboardInterrupt):
        run_steps([("a", step("a")), ("b", step("b")), ("c", step("c", boom=True))], w, done)
    w.close()
    assert ran == ["a", "b"] and done.read_text().split() == ["a", "b"]
    w = harness.RowWriter(tmp_path / "raw.csv", resume=True)
    run_steps([("a", step("a")), ("b", step("b")), ("c", step("c"))], w, done)
    w.close()
    assert ran == ["a", "b", "c"]  # a and b were not measured again
    assert pd.read_csv(tmp_path / "raw.csv").kernel.tolist() == ["a", "b", "c"]  # samples kept across the interruption


def test_sweep_on_a_small_gpu_measures_what_fits_and_records_the_rest(tmp_path, cpu_harness, monkeypatch):
    from wmtp.measure import sweep

    # Room for about 300 tokens of TINY's KV beyond the 2 GiB headroom: S = 200 at B = 1 fits, B = 2 does not.
    set_free_bytes(monkeypatch, int((2 * 2**30 + 300 * TINY.kv_bytes_per_token_layer) / 0.9))
    cfg = sweep.SweepConfig(ctxs=(64, 200), batches=(1, 2), depths=(2,), windows=(16,), gammas=(1,), sink=4, extra_ctx=0)
    w = harness.RowWriter(tmp_path / "raw.csv")
    for label, step in sweep.attention_steps(TINY, cfg):
        step(w)
    w.close()
    df = pd.read_csv(tmp_path / "raw.csv")
    assert (df[(df.ctx == 200) & (df.batch == 2)].status.str.startswith("skipped: needs")).all()
    assert (df[(df.ctx == 200) & (df.batch == 1)].status == "ok").all()
    assert (df[(df.ctx == 64) & (df.batch == 2)].status == "ok").all()


def test_run_kernels_writes_csv_meta_and_summary(tmp_path, cpu_harness, monkeypatch):
    import json

    from wmtp.measure import provenance, run

    monkeypatch.setattr(run, "require_gpu", lambda: None)
    monkeypatch.setattr(bench, "ceiling_rows", lambda w: w.write({"kernel": "copy", "bytes": 4e9, "config": "x"},
                                                                 [1.0], "t"))
    monkeypatch.setattr(provenance, "collect", lambda timer, extra: {"timer": timer, **extra})
    path = run.run_kernels([TINY], [100], [1], tmp_path, variants=False, components=False)
    meta = json.loads((tmp_path / "kernels.meta.json").read_text())
    assert meta["status"] == "complete" and meta["rows_this_run"] == len(pd.read_csv(path))
    assert "decode_attn" in (tmp_path / "summary.md").read_text()
    assert (tmp_path / "kernels.steps-done").read_text().split("\n")[0] == "ceilings"
