"""The SGLang fused-MoE measurement backend (measure/backends/sglang_moe.py) on the CPU: the stand-ins that need no
SGLang files (alignment, silu_and_mul), the clear error when SGLang's files are absent, the --moe-backend option,
the bytes of the measured rows; with a copy of SGLang's files present, the whole component against a reference."""

from __future__ import annotations

import dataclasses
import gzip
import math
import os
from pathlib import Path

import pytest
import torch

from kernel_refs import ref_moe
from wmtp.errors import WmtpError
from wmtp.measure.backends import sglang_moe

# the kernels run on CPU tensors under the interpreter (conftest sets it where there is no GPU)
interp = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="CPU tensors need the Triton interpreter")

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "measure/results/h200-sglang-moe/raw.csv.gz"
HAVE_SGLANG = (sglang_moe.sglang_dir() / "sglang/srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_kernels.py").is_file()


@interp
def test_alignment_matches_sglangs_documented_example():
    # moe_align_block_size's docstring: ids [[2,3,4],[1,2,4],[1,3,4],[1,2,3]], block 4 -> experts 1..4 each padded
    # to one block of 4 rows, sentinel 12 (= T * k) in the padding
    ids = torch.tensor([[2, 3, 4], [1, 2, 4], [1, 3, 4], [1, 2, 3]])
    rows, blocks, total = sglang_moe.align_block_size(ids, 4, 5)
    assert rows[:16].tolist() == [3, 6, 9, 12, 0, 4, 10, 12, 1, 7, 11, 12, 2, 5, 8, 12]
    assert int(total) == 16 and blocks[:4].tolist() == [1, 2, 3, 4]
    assert (rows[16:] == 12).all()  # rows past the padded total hold the sentinel too


@interp
@pytest.mark.parametrize("tokens,k,e,block", [(1, 8, 256, 16), (5, 4, 16, 4), (36, 6, 16, 16), (9, 22, 64, 16)])
def test_alignment_puts_every_pair_once_in_its_experts_blocks(tokens, k, e, block):
    g = torch.Generator().manual_seed(tokens * 100 + k)
    ids = torch.stack([torch.randperm(e, generator=g)[:k] for _ in range(tokens)])
    rows, blocks, total = sglang_moe.align_block_size(ids, block, e)
    flat, pairs = ids.reshape(-1), tokens * k
    assert int(total) % block == 0
    n_blocks = int(total) // block
    seen = []
    for b in range(n_blocks):
        chunk = rows[b * block:(b + 1) * block]
        real = chunk[chunk < pairs]
        assert len(real) > 0, "a padded block with no pair"
        assert (flat[real] == blocks[b]).all(), "a pair in another expert's block"
        seen += real.tolist()
    assert sorted(seen) == list(range(pairs))
    # the padded total: each expert's count rounded up to the block
    counts = torch.bincount(flat, minlength=e)
    assert int(total) == int(sum(math.ceil(c / block) * block for c in counts.tolist()))


def test_padded_sizes_by_hand():
    # fewer pairs than E + 1: pairs * block rows; else pairs + (E + 1) * (block - 1)
    assert sglang_moe.padded_sizes(8, 256, 16) == (128, 8)
    assert sglang_moe.padded_sizes(792, 512, 16) == (792 + 513 * 15, math.ceil((792 + 513 * 15) / 16))


@interp
def test_silu_and_mul_stand_in():
    x = torch.randn(5, 2 * 40)
    out = sglang_moe.silu_and_mul(x, torch.empty(5, 40))
    ref = x[:, :40] / (1 + torch.exp(-x[:, :40])) * x[:, 40:]
    assert torch.allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_missing_sglang_files_are_one_clear_error(tmp_path, monkeypatch):
    from wmtp.calibrate.sweep_run import run_calibrate
    from wmtp.measure import components as comp
    from wmtp.models import get_model

    monkeypatch.setenv("WMTP_SGLANG_DIR", str(tmp_path))
    monkeypatch.setattr(sglang_moe, "_mods", {})
    with pytest.raises(WmtpError, match="fused_moe_triton_kernels.py"):
        sglang_moe.load()
    with pytest.raises(WmtpError, match="SGLang's Triton MoE files"):
        comp.moe_component(get_model("q35"), 1, 6e7, "fwd", impl="sglang")
    with pytest.raises(WmtpError, match="SGLang's Triton MoE files"):  # before any measurement
        run_calibrate([], tmp_path / "out", moe_impl="sglang")
    with pytest.raises(WmtpError, match="unknown --moe-backend"):
        run_calibrate([], tmp_path / "out", moe_impl="vllm")
    assert not (tmp_path / "out").exists()


def test_moe_backend_option_belongs_to_a_sweep(tmp_path):
    from typer.testing import CliRunner

    from wmtp.cli.main import app

    r = CliRunner().invoke(app, ["calibrate", "--from-raw", str(tmp_path / "raw.csv"), "--moe-backend", "sglang"])
    assert r.exit_code == 1 and "--moe-backend does not apply to --from-raw" in r.output


def test_measured_rows_carry_the_wmtp_rows_bytes():
    import pandas as pd

    df = pd.read_csv(RESULTS)
    moe = df[df.kernel == "moe"]
    # q35, one token: router 2048 x 256, 8 routed experts and 1 shared of 3 x 2048 x 512 bf16 weights, x in and out
    q35 = moe[(moe.model == "q35") & (moe.config == "fwd.moe;tokens=1")]
    assert set(q35.impl) == {"sglang"}
    assert set(q35.bytes) == {(2048 * 256 + 9 * 3 * 2048 * 512) * 2 + 2 * 2048 * 2}
    # where both kernels were timed (7 and 16 tokens), the same work item
    both = moe[moe.config.isin(["verify.moe;tokens=7", "verify.moe;tokens=16"])]
    per = both.groupby(["model", "config"]).agg(impls=("impl", "nunique"), b=("bytes", "nunique"), f=("flops", "nunique"))
    assert len(per) == 6 and (per.impls == 2).all() and (per.b == 1).all() and (per.f == 1).all()


def test_shipped_profile_fits_the_sglang_rows_and_keeps_every_other_row():
    raw = gzip.decompress((ROOT / "wmtp_model/data/profiles/h200-flashinfer.raw.csv.gz").read_bytes()).decode()
    lines = raw.splitlines()
    assert not [ln for ln in lines if ln.startswith("moe,wmtp,")]
    shipped = [ln for ln in lines if ln.startswith("moe,sglang,")]
    measured = gzip.decompress(RESULTS.read_bytes()).decode().splitlines()
    assert shipped and set(shipped) <= set(measured)


@interp
@pytest.mark.skipif(not HAVE_SGLANG, reason="no copy of SGLang's Triton MoE files (.devcarry/sgl or WMTP_SGLANG_DIR)")
@pytest.mark.parametrize("act,latent", [("swiglu", 0), ("relu2", 24)])
def test_component_through_sglangs_kernel_matches_a_reference(act, latent, monkeypatch):
    import torch.nn.functional as F

    from wmtp.measure import components as comp
    from wmtp.models import get_model

    monkeypatch.setattr(comp, "DEVICE", "cpu")
    monkeypatch.setattr(comp, "DT", torch.float16)
    base = get_model("nem" if latent else "q35")
    spec = dataclasses.replace(base, n_experts=12, hidden=48, expert_ffn=32, top_k=3, shared_ffn=16, moe_latent=latent)
    call = comp.moe_component(spec, 5, 1e9, "verify", copies=1, impl="sglang").calls[0]
    router, w13, w2, sh_up, sh_down, lat = call.__defaults__
    x = next(c.cell_contents for c in call.__closure__ if isinstance(c.cell_contents, torch.Tensor))
    wts, ids = torch.topk(F.linear(x, router), 3, dim=-1)
    wts = torch.softmax(wts.float(), -1)
    h = x.double() @ lat[0].double().T if lat else x
    ref = ref_moe(h, w13.transpose(1, 2), w2.transpose(1, 2), ids, wts, act)
    if lat:
        ref = ref @ lat[1].double().T
    g = x.double() @ sh_up.double().T
    g = F.silu(g[:, :16]) * g[:, 16:] if act == "swiglu" else torch.relu(g) ** 2
    ref = ref + g @ sh_down.double().T
    y = call()
    assert float((y.double() - ref).norm() / ref.norm()) < 3e-3
