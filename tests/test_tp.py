"""Tensor parallelism: the per-GPU slice, the collectives, predict --tp, and the all-reduce harness
on two CPU processes with the gloo backend."""

from __future__ import annotations

import json
import socket

from dataclasses import replace

import pytest
from typer.testing import CliRunner

from wmtp.cli.main import app
from wmtp.errors import WmtpError
from wmtp.hardware import get_hardware
from wmtp.latency import SpeedOfLight, step_cost
from wmtp.memory import memory_report
from wmtp.models import get_model
from wmtp.tp import per_gpu_spec, tp_collectives


def test_per_gpu_slice_splits_heads_experts_and_vocab():
    q = get_model("q35")
    g = per_gpu_spec(q, 2)
    assert (g.q_heads, g.kv_heads, g.lin_v_heads, g.expert_ffn, g.vocab) == (8, 1, 16, 256, 124160)
    assert g.kv_bytes_per_token_layer == q.kv_bytes_per_token_layer / 2
    g4 = per_gpu_spec(q, 4)
    assert g4.kv_heads == 1  # 2 KV heads over 4 GPUs: replicated, each GPU holds one
    assert g4.kv_bytes_per_token_layer == q.kv_bytes_per_token_layer / 2
    assert per_gpu_spec(q, 1) is q
    with pytest.raises(WmtpError, match="cannot be split"):
        per_gpu_spec(q, 3)
    with pytest.raises(WmtpError, match="GQA"):
        per_gpu_spec(get_model("dsv3"), 2)


def test_collective_counts():
    q, nem = get_model("q35"), get_model("nem")
    assert tp_collectives(q, 1, "verify", 7) == []
    ver = tp_collectives(q, 2, "verify", 7)
    assert ver[0].count == 2 * q.n_layers and ver[0].bytes == 2 * 7 * q.hidden
    assert tp_collectives(nem, 2, "verify", 7)[0].count == nem.n_layers  # one mixer or FFN per block
    assert [w.count for w in tp_collectives(q, 2, "fwd", 1)] == [3, 1]


def test_tp_step_adds_collectives_and_halves_the_reads():
    q, h = get_model("q35"), get_hardware("h200")
    one = step_cost(q, h, SpeedOfLight(), "native", 2**20, 7)
    two = step_cost(q, h, SpeedOfLight(), "native", 2**20, 7, tp=2)
    attn1 = [p for p in one.t_fwd.items if p.work.kind == "decode_attn"][0].work
    attn2 = [p for p in two.t_fwd.items if p.work.kind == "decode_attn"][0].work
    assert attn2.bytes == attn1.bytes / 2
    assert any(p.work.kind == "allreduce" for p in two.t_verify.items)
    assert not any(p.work.kind == "allreduce" for p in one.t_verify.items)
    assert two.t_verify.time_ms < one.t_verify.time_ms


def test_tp_memory_per_gpu_seats_more():
    q, h = get_model("q35"), get_hardware("h200")
    one = memory_report(q, h, 2**20)
    two = memory_report(per_gpu_spec(q, 2), h, 2**20)
    assert two.max_batch["window"] >= 2 * one.max_batch["window"]
    assert two.draft_pool_share == pytest.approx(one.draft_pool_share)


def test_predict_tp_cli():
    r = CliRunner().invoke(app, ["predict", "--model", "q35", "--ctx", "1M", "--tp", "2", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["tp"] == 2 and any("tp=2" in w for w in out["warnings"])
    srcs = {c["source"] for c in out["methods"]["native"]["components"] if c["kind"] == "allreduce"}
    assert srcs and all("analytical" in s or "interpolated" in s or "extrapolated" in s or "measured" in s for s in srcs)
    r = CliRunner().invoke(app, ["predict", "--model", "q35", "--tp", "3"])
    assert r.exit_code == 1 and r.output.startswith("error: ") and "cannot be split" in r.output


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, out):
    import os

    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from wmtp.measure.tp_bench import allreduce_rows, fit_allreduce

    rows = allreduce_rows([64, 256], tokens=(1, 8, 32), reps=3, device="cpu")
    if rank == 0:
        fit = fit_allreduce(rows)
        out.put((len(rows), rows[0]["tp"], fit["n_shapes"], fit["coef_ms"][0] >= 0))
    dist.destroy_process_group()


def test_allreduce_harness_on_gloo():
    torch = pytest.importorskip("torch")
    mp = torch.multiprocessing.get_context("spawn")
    q = mp.Queue()
    port = _free_port()
    procs = [mp.Process(target=_worker, args=(r, 2, port, q)) for r in range(2)]
    for p in procs:
        p.start()
    n_rows, tp, n_shapes, ok = q.get(timeout=120)
    for p in procs:
        p.join(timeout=60)
    assert all(p.exitcode == 0 for p in procs)
    assert (n_rows, tp, n_shapes, ok) == (2 * 3 * 3, 2, 6, True)


def test_merge_tp_fit_into_profile(tmp_path):
    import shutil

    from wmtp.calibrate.fitting import merge_tp
    from wmtp.profile import PROFILES_DIR, load_profile

    prof = tmp_path / "profile.json"
    shutil.copy(PROFILES_DIR / "h200.json", prof)
    run = tmp_path / "run"
    run.mkdir()
    (run / "tp_raw.csv").write_text("kernel,time_ms\nallreduce,0.01\n")
    fit = {"features": ["const", "bytes"], "coef_ms": [0.02, 1e-9], "groups": {}, "n_shapes": 2,
           "heldout": {"median_rel": 0.1, "p90_rel": 0.2, "max_rel": 0.3, "method": "x"},
           "bytes_range": [1.0, 2.0], "flops_range": [0.0, 0.0], "points": []}
    (run / "allreduce_tp4.json").write_text(json.dumps(fit))
    r = CliRunner().invoke(app, ["calibrate", "--add-tp", str(run), "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    p = load_profile(prof)
    assert p["components"]["allreduce_tp4"]["coef_ms"] == [0.02, 1e-9]
    assert len(p["tp_raw_data"]["allreduce_tp4"]["sha256"]) == 64
    r = CliRunner().invoke(app, ["calibrate", "--add-tp", str(tmp_path / "nothing"), "--out", str(tmp_path)])
    assert r.exit_code == 1 and "no tp_raw.csv" in r.output
    with pytest.raises(WmtpError, match="no allreduce"):
        (run / "allreduce_tp4.json").unlink()
        merge_tp(prof, run)


def test_shipped_profile_prices_tp2_collectives_from_measurement():
    out = json.loads(CliRunner().invoke(app, ["predict", "--model", "q35", "--tp", "2", "--json"]).output)
    ar = [c for c in out["methods"]["window"]["components"] if c["kind"] == "allreduce"]
    assert ar and all(c["source"] in ("measured", "interpolated", "extrapolated") for c in ar)
    out4 = json.loads(CliRunner().invoke(app, ["predict", "--model", "q35", "--tp", "4", "--json"]).output)
    ar4 = [c for c in out4["methods"]["window"]["components"] if c["kind"] == "allreduce"]
    assert all("analytical" in c["source"] for c in ar4)  # no TP4 measurement: the link model, and it says so


def test_batch_frontier_with_tp_seats_more_per_gpu_pair():
    one = json.loads(CliRunner().invoke(app, ["sweep", "batch", "--model", "q122", "--json"]).output)
    two = json.loads(CliRunner().invoke(app, ["sweep", "batch", "--model", "q122", "--tp", "2", "--json"]).output)
    max_b = lambda out, m: max(r["batch"] for r in out["rows"] if r["method"] == m)  # noqa: E731
    assert max_b(two, "window") > max_b(one, "window")
    r2 = [r for r in two["rows"] if r["method"] == "window" and r["batch"] == 2][0]
    assert r2["per_gpu_tok_s"] == pytest.approx(r2["per_user_tok_s"] * 2 / 2)  # two requests over two GPUs


def test_a_split_that_cuts_quantization_blocks_is_warned():
    from wmtp.models import get_model
    from wmtp.tp import quant_split_warning

    q35 = get_model("q35")  # routed and shared experts 512 wide
    fp8 = q35.with_dtypes(weight_dtype="fp8")
    assert quant_split_warning(fp8, 4) is None  # 512 / 4 = 128: one whole block per GPU
    assert "512 / 8 = 64" in quant_split_warning(fp8, 8)  # half a block
    assert "512 / 16 = 32" in quant_split_warning(fp8, 16)
    assert quant_split_warning(q35.with_dtypes(weight_dtype="nvfp4"), 16) is None  # 32 = two groups of 16
    assert quant_split_warning(q35.with_dtypes(weight_dtype="bf16"), 16) is None  # nothing quantized
    # int4 groups follow the checkpoint: 512 / 8 = 64 columns hold two groups of 32, half a group of 128; one scale
    # per output row (group 0) is never cut by a split of K
    int4 = q35.with_dtypes(weight_dtype="int4")
    assert "512 / 8 = 64" in quant_split_warning(int4, 8)
    assert quant_split_warning(replace(int4, int4_group=32), 8) is None
    assert "512 / 32 = 16" in quant_split_warning(replace(int4, int4_group=32), 32)
    assert quant_split_warning(replace(int4, int4_group=0), 32) is None
