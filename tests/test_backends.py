"""Attention backends on the CPU: the engines' per-request index build against the reference (Triton
interpreter), the wmtp backend against the attention reference, and FlashInfer's planning logic
(tensor-core choice, tile cliffs, plan inputs, the wrappers it builds) without FlashInfer, which CI
does not have."""

from __future__ import annotations

import sys
import types

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from kernel_refs import ref_attention, ref_index  # noqa: E402
from wmtp.errors import WmtpError  # noqa: E402
from wmtp.measure.backends import Paged, UnsupportedKind, check_name, get_backend  # noqa: E402
from wmtp.measure.backends import flashinfer as fib  # noqa: E402
from wmtp.measure.kernels.engine_index import build_kv_indices_per_request  # noqa: E402
from wmtp.measure.kernels.index_build import build_kv_indices  # noqa: E402


def _paged(seq_lens, mode, n_sink, window, width=None, seed=0):
    gen = torch.Generator().manual_seed(seed)
    width = width or max(seq_lens)
    r2t = torch.randint(0, 1 << 20, (len(seq_lens), width), generator=gen, dtype=torch.int32)
    seq = torch.tensor(seq_lens, dtype=torch.int32)
    ptr, _ = ref_index(r2t, seq, mode, n_sink, window, 1)
    return r2t, seq, ptr


@pytest.mark.kernels
@pytest.mark.parametrize("mode,seq_lens,n_sink,window", [
    ("native", [1, 63, 1000], 4, 16),
    ("native", [513], 0, 0),  # one key past a block
    ("window", [1, 63, 1000], 4, 16),
    ("window", [70, 20], 0, 33),  # sink 0; window larger than one request
    ("window", [1200], 64, 600),  # the window spans two blocks
])
def test_per_request_build_matches_reference(mode, seq_lens, n_sink, window):
    r2t, seq, ptr = _paged(seq_lens, mode, n_sink, window, width=max(seq_lens) + 7)
    out = torch.full((int(ptr[-1]),), -1, dtype=torch.int32)  # an unwritten entry fails
    build_kv_indices_per_request(r2t, seq, ptr, out, mode, n_sink, window)
    want_ptr, want = ref_index(r2t, seq, mode, n_sink, window, 1)
    assert torch.equal(ptr, want_ptr) and torch.equal(out, want) and (want != 0).any()
    par = torch.full_like(out, -1)
    build_kv_indices(r2t, seq, mode, n_sink, window, 1, kv_indptr=ptr, out=par)
    assert torch.equal(out, par)  # the engines' build and wmtp's parallel build agree


@pytest.mark.kernels
def test_per_request_build_reads_pool_rows():
    r2t = torch.arange(4 * 50, dtype=torch.int32).view(4, 50)
    seq = torch.tensor([10, 50], dtype=torch.int32)
    rows = torch.tensor([3, 1], dtype=torch.int32)
    ptr = torch.tensor([0, 10, 60], dtype=torch.int32)
    out = torch.full((60,), -1, dtype=torch.int32)
    build_kv_indices_per_request(r2t, seq, ptr, out, req_pool_indices=rows, block=16)
    assert out[:10].tolist() == list(range(150, 160)) and out[10:].tolist() == list(range(50, 100))


def test_per_request_build_rejects_bad_inputs():
    r2t = torch.zeros(1, 8, dtype=torch.int32)
    seq = torch.tensor([8], dtype=torch.int32)
    ptr = torch.tensor([0, 8], dtype=torch.int32)
    out = torch.empty(8, dtype=torch.int32)
    with pytest.raises(ValueError, match="no mode 'ring'"):
        build_kv_indices_per_request(r2t, seq, ptr, out, "ring")
    with pytest.raises(ValueError, match="seq_lens must be int32"):
        build_kv_indices_per_request(r2t, seq.long(), ptr, out)
    with pytest.raises(ValueError, match="power of two"):
        build_kv_indices_per_request(r2t, seq, ptr, out, block=500)
    with pytest.raises(ValueError, match="one entry more"):
        build_kv_indices_per_request(r2t, seq, ptr[:1], out)


@pytest.mark.kernels
@pytest.mark.parametrize("d", [1, 3])
def test_wmtp_backend_matches_reference(d):
    gen = torch.Generator().manual_seed(7 + d)
    hq, hkv, hd, batch, ctx = 4, 2, 32, 2, 70
    k = torch.randn(batch * ctx, hkv, hd, generator=gen).to(torch.bfloat16)
    v = torch.randn(batch * ctx, hkv, hd, generator=gen).to(torch.bfloat16)
    r2t = torch.randperm(batch * ctx, generator=gen).to(torch.int32).view(batch, ctx)
    seq = torch.full((batch,), ctx, dtype=torch.int32)
    ptr = torch.arange(batch + 1, dtype=torch.int32) * ctx
    paged = Paged(r2t, seq, ptr, torch.full((batch * ctx,), -1, dtype=torch.int32), ctx, batch, ctx)
    backend = get_backend("wmtp")
    backend.index_build(paged)()
    assert torch.equal(paged.kv_indices, r2t.view(-1))
    q = torch.randn(batch * d, hq, hd, generator=gen).to(torch.bfloat16)
    out = torch.full_like(q, float("nan"))
    call = backend.decode(k, v, paged, q, out) if d == 1 else backend.verify(k, v, paged, q, out, d, num_splits=3)
    call()
    qo = torch.arange(batch + 1, dtype=torch.int32) * d
    want = ref_attention(q, k, v, ptr, paged.kv_indices, qo)
    assert want.abs().max() > 0.05
    torch.testing.assert_close(out.double(), want, atol=2e-2, rtol=2e-2)


def test_registry_and_unsupported_kinds():
    assert check_name("flashinfer", attention=True) == "flashinfer"
    with pytest.raises(WmtpError, match="unknown backend 'vllm'; known: wmtp, flashinfer, engine-index"):
        check_name("vllm")
    with pytest.raises(WmtpError, match="known: wmtp, flashinfer$"):
        check_name("engine-index", attention=True)
    eng = get_backend("engine-index")
    assert eng.supports("index_build") and not eng.supports("decode_attn")
    with pytest.raises(UnsupportedKind, match="'engine-index' has no decode attention"):
        eng.decode(None, None, None, None, None)


def test_missing_flashinfer_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "flashinfer", None)  # import flashinfer -> ImportError
    with pytest.raises(WmtpError, match=r"pip install flashinfer-python"):
        get_backend("flashinfer")


@pytest.mark.parametrize("dtype,hq,hkv,want", [
    (torch.bfloat16, 16, 2, True), (torch.bfloat16, 32, 2, True), (torch.float16, 8, 2, True),
    (torch.bfloat16, 6, 2, False), (torch.bfloat16, 8, 8, False), (torch.float8_e4m3fn, 8, 8, True),
    (torch.float32, 16, 2, False),
])
def test_tensor_cores_as_sglang_chooses(dtype, hq, hkv, want):
    assert fib.use_tensor_cores(dtype, hq, hkv) is want


def test_tensor_core_choice_rejects_ragged_groups():
    with pytest.raises(ValueError, match="multiple of kv_heads"):
        fib.use_tensor_cores(torch.bfloat16, 10, 4)


@pytest.mark.parametrize("group,head_dim,cliffs", [
    (8, 256, {2: 1, 8: 1, 9: 2}),  # q35: two query tiles from d = 9
    (16, 256, {2: 1, 4: 1, 5: 2, 8: 2, 9: 3}),  # q122: the 4 -> 5 rows cliff
    (16, 128, {2: 1, 5: 1, 8: 1, 9: 2}),  # nem: 128-row tiles above 64 packed rows
])
def test_flashinfer_query_tiles(group, head_dim, cliffs):
    assert {d: fib.q_tiles(d, group, head_dim) for d in cliffs} == cliffs


def test_flashinfer_graph_plan_sizes_tiles_for_the_batch():
    assert fib.cta_tile_q(16, 256) == 16 and fib.cta_tile_q(17, 256) == 64 and fib.cta_tile_q(65, 128) == 128
    # B = 4, d = 3, group 16, head_dim 128: the plan allows a 9-row request, so 128-row tiles
    assert fib.q_tiles(3, 16, 128, batch=4) == 1 and fib.q_tiles(3, 16, 128, batch=1) == 1


def test_plan_inputs_and_chain_mask():
    inp = fib.plan_inputs(3, 10, 4)
    assert inp["qo_indptr"].tolist() == [0, 4, 8, 12] and inp["kv_indptr"].tolist() == [0, 10, 20, 30]
    assert inp["kv_last_page_len"].tolist() == [1, 1, 1]
    m = fib.chain_mask(2, 5, 2).view(2, 2, 5)
    assert m[0].tolist() == [[True, True, True, True, False], [True, True, True, True, True]]
    assert torch.equal(m[0], m[1])
    with pytest.raises(ValueError, match="cannot be the newest"):
        fib.chain_mask(1, 3, 4)


class _Wrapper:
    """Stands in for a FlashInfer wrapper: records construction and plan arguments."""

    made: list = []

    def __init__(self, workspace, layout, **kw):
        self.kw, self.layout, self.plans = kw, layout, []
        _Wrapper.made.append(self)

    def plan(self, *args, **kw):
        self.plans.append((args, kw))

    def run(self, q, kv, out=None):
        return out


@pytest.fixture
def fake_flashinfer(monkeypatch):
    _Wrapper.made = []
    mod = types.SimpleNamespace(__version__="0.6.0", BatchDecodeWithPagedKVCacheWrapper=type("D", (_Wrapper,), {}),
                                BatchPrefillWithPagedKVCacheWrapper=type("P", (_Wrapper,), {}))
    monkeypatch.setattr(fib, "import_flashinfer", lambda: mod)
    monkeypatch.setattr(fib, "WORKSPACE_BYTES", 1024)
    return fib.FlashInferBackend(device="cpu")


def _shape(batch=2, n=40, hq=16, hkv=2, hd=64, d=1):
    k = torch.zeros(batch * n, hkv, hd, dtype=torch.bfloat16)
    paged = Paged(torch.zeros(batch, n, dtype=torch.int32), torch.full((batch,), n, dtype=torch.int32),
                  torch.arange(batch + 1, dtype=torch.int32) * n, torch.zeros(batch * n, dtype=torch.int32), n, batch, n)
    q = torch.zeros(batch * d, hq, hd, dtype=torch.bfloat16)
    return k, paged, q


def test_flashinfer_decode_is_planned_as_sglang_plans_it(fake_flashinfer):
    k, paged, q = _shape()
    call = fake_flashinfer.decode(k, k, paged, q, q)
    (w,) = _Wrapper.made
    assert w.layout == "NHD" and w.kw["backend"] == "fa2" and w.kw["use_cuda_graph"] is True
    assert w.kw["use_tensor_cores"] is True  # group 8 >= 4
    assert w.kw["paged_kv_indices_buffer"] is paged.kv_indices  # the buffer the index build writes
    (args, kw), = w.plans
    assert args[0].tolist() == [0, 40, 80] and args[2].tolist() == [1, 1] and args[3:7] == (16, 2, 64, 1)
    assert kw["disable_split_kv"] is False and kw["kv_data_type"] == torch.bfloat16
    assert call() is q
    assert fake_flashinfer.versions()["flashinfer"] == "0.6.0"


def test_flashinfer_verify_uses_the_chain_mask_and_extend_is_causal(fake_flashinfer):
    k, paged, q = _shape(d=3)
    fake_flashinfer.verify(k, k, paged, q, q, 3)
    fake_flashinfer.extend(k, k, paged, q, q, 3)
    ver, ext = _Wrapper.made
    for w in (ver, ext):
        assert w.kw["backend"] == "fa2" and w.kw["use_cuda_graph"] is True
        assert w.kw["paged_kv_indices_buf"] is paged.kv_indices
        assert w.kw["qo_indptr_buf"].tolist() == [0, 3, 6]
    (args, kw), = ver.plans
    assert kw["causal"] is False and torch.equal(kw["custom_mask"], fib.chain_mask(2, 40, 3))
    assert ver.kw["custom_mask_buf"].numel() >= 2 * 15  # 3 x 40 bits per request, packed
    (args, kw), = ext.plans
    assert kw["causal"] is True and kw["custom_mask"] is None and "custom_mask_buf" not in ext.kw
    with pytest.raises(ValueError, match="takes no tuning options"):
        fake_flashinfer.verify(k, k, paged, q, q, 3, block_n=32)


def test_cli_backend_errors(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from wmtp.cli.main import app
    from wmtp.measure import run

    r = CliRunner().invoke(app, ["measure", "kernels", "--backend", "vllm", "--out", str(tmp_path)])
    assert r.exit_code == 1 and "error: unknown backend 'vllm'" in r.output
    monkeypatch.setattr(run, "require_gpu", lambda: None)
    monkeypatch.setitem(sys.modules, "flashinfer", None)
    r = CliRunner().invoke(app, ["measure", "kernels", "--backend", "flashinfer", "--out", str(tmp_path)])
    assert r.exit_code == 1 and "pip install flashinfer-python" in r.output and "Traceback" not in r.output
