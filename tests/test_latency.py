import pytest
from hypothesis import given, settings, strategies as st

from wmtp.errors import WmtpError
from wmtp.hardware import HARDWARE, get_hardware
from wmtp.latency import SpeedOfLight, draft_fwd_work, experts_touched, step_cost, verify_work
from wmtp.models import MODELS, get_model

SOL = SpeedOfLight()
models = st.sampled_from(sorted(MODELS))
gpus = st.sampled_from(sorted(HARDWARE))
ctxs = st.integers(min_value=1, max_value=4 * 2**20)


@settings(max_examples=150, deadline=None)
@given(models, gpus, ctxs, st.integers(2, 12), st.integers(1, 16), st.integers(0, 16384), st.integers(0, 128))
def test_window_step_never_exceeds_native(key, hw, ctx, d, b, w, sink):
    spec, gpu = get_model(key), get_hardware(hw)
    nat = step_cost(spec, gpu, SOL, "native", ctx, d, b, w, sink)
    win = step_cost(spec, gpu, SOL, "window", ctx, d, b, w, sink)
    assert win.step_ms <= nat.step_ms + 1e-12
    assert win.t_verify.time_ms == pytest.approx(nat.t_verify.time_ms)  # windowing never touches verify
    if ctx <= w + sink:  # window degenerates to native
        assert win.step_ms == pytest.approx(nat.step_ms)
        assert win.s_eff == ctx


@settings(max_examples=100, deadline=None)
@given(models, gpus, st.integers(1, 2**21), st.integers(1, 2**20), st.integers(2, 10), st.integers(1, 8))
def test_native_step_grows_with_context(key, hw, ctx, extra, d, b):
    spec, gpu = get_model(key), get_hardware(hw)
    small = step_cost(spec, gpu, SOL, "native", ctx, d, b)
    large = step_cost(spec, gpu, SOL, "native", ctx + extra, d, b)
    assert large.step_ms >= small.step_ms
    dense_s = step_cost(spec, gpu, SOL, "dense", ctx, 1, b)
    dense_l = step_cost(spec, gpu, SOL, "dense", ctx + extra, 1, b)
    assert dense_l.step_ms >= dense_s.step_ms


def test_step_equation_holds():
    spec, gpu = get_model("q35"), get_hardware("h200")
    c = step_cost(spec, gpu, SOL, "native", 2**20, 7, 1, accept_length=4.5)
    assert c.gamma == 6
    assert c.step_ms == pytest.approx(c.t_verify.time_ms + c.t_ctx.time_ms + 6 * c.t_fwd.time_ms)
    dense = step_cost(spec, gpu, SOL, "dense", 2**20, 1, 1)
    assert dense.step_ms == pytest.approx(dense.t_verify.time_ms)


def test_draft_attention_bytes_are_kv_per_token_times_keys():
    spec = get_model("q35")
    attn = [w for w in draft_fwd_work(spec, 2**20, 3) if w.kind == "decode_attn"][0]
    assert attn.bytes == 3 * 2**20 * 2048  # B x S x 2 KiB: 6 GiB for three 1M requests


def test_verify_reads_each_layer_kv_once_per_request():
    spec = get_model("q122")
    attn = [w for w in verify_work(spec, 2**20, 7, 2) if w.kind == "verify_attn"][0]
    assert attn.count == spec.n_full_attn
    assert attn.bytes == 2 * (2**20 + 7) * 2048


@pytest.mark.parametrize("key, state_mib_per_layer", [("q35", 2), ("q122", 4), ("nem", 4)])
@pytest.mark.parametrize("d, b", [(1, 1), (2, 1), (7, 1), (7, 4), (9, 16)])
def test_linear_state_moves_every_draft_token_state(key, state_mib_per_layer, d, b):
    """Per request and layer the update reads the fp32 state and writes it back (architectures.md: q35 32 V-heads x
    128 x 128, q122 64 x 128 x 128, nem 128 heads x 64 x state 128, x 4 bytes); a speculative verify (d >= 2) also
    writes one state per token for the rollback: 2 + d states. Dense decoding (d = 1) moves two."""
    state = [w for w in verify_work(get_model(key), 2**20, d, b) if w.kind == "linear_state"][0]
    assert state.bytes == b * (2 + (d if d > 1 else 0)) * state_mib_per_layer * 2**20
    assert state.count == {"q35": 30, "q122": 36, "nem": 40}[key]


@given(st.sampled_from(["q35", "q122", "nem", "dsv3"]), st.integers(1, 4096))
def test_experts_touched_bounded_by_design(key, tokens):
    spec = get_model(key)
    n = experts_touched(spec, tokens)
    assert n <= min(spec.n_experts, tokens * spec.top_k) + 1e-9
    assert n >= spec.top_k - 1e-9  # at least one token's experts
    assert experts_touched(spec, tokens + 1) >= n


def test_experts_touched_closed_form():
    spec = get_model("q35")  # E = 256, k = 8
    assert experts_touched(spec, 1) == pytest.approx(8)
    assert experts_touched(spec, 7) == pytest.approx(256 * (1 - (248 / 256) ** 7))
    moe = [w for w in verify_work(spec, 1024, 7, 64) if w.kind == "moe"][0]
    assert moe.shape["experts_touched"] == pytest.approx(256, rel=1e-6)


def test_speed_of_light_matches_hand_computation():
    spec, gpu = get_model("q35"), get_hardware("h200")
    attn = [w for w in draft_fwd_work(spec, 2**20, 1) if w.kind == "decode_attn"][0]
    priced = SOL.price(attn, gpu, spec)
    by_hand = 2**20 * 2048 / (4.8e12 * gpu.bw_eff) * 1e3 + 2 * gpu.kernel_overhead_us * 1e-3
    assert priced.time_ms == pytest.approx(by_hand)
    assert priced.source == "speed-of-light"


def test_bad_arguments():
    spec, gpu = get_model("q35"), get_hardware("h200")
    with pytest.raises(WmtpError, match="unknown method"):
        step_cost(spec, gpu, SOL, "tree", 1000, 7)
    with pytest.raises(WmtpError, match="depth"):
        step_cost(spec, gpu, SOL, "native", 1000, 1)
    with pytest.raises(WmtpError, match="positive"):
        step_cost(spec, gpu, SOL, "native", 0, 7)


def test_fp8_kv_attention_from_the_bf16_fit_is_tagged_extrapolated():
    """A profile that measured bf16 KV only (the shipped one, less its `*_attn@fp8` fits): its attention fits priced at
    fp8 bytes are an extrapolation across dtypes (wmtp's fp8 decode streams at 66-87 % of copy where bf16 reaches
    100 %), whatever the bytes' range; bf16 KV at the same shape stays interpolated or measured. With the shipped
    fp8 fits, the fp8 verify is priced from them: not extrapolated, not the bf16 fit's note."""
    from dataclasses import replace

    from wmtp.profile import PROFILES_DIR, ProfileCostModel, load_profile

    shipped = load_profile(PROFILES_DIR / "h200.json")
    bf16_only = {**shipped, "components": {k: v for k, v in shipped["components"].items() if "_attn@" not in k}}
    hw, spec = get_hardware("h200"), get_model("q35")
    spec8 = replace(spec, kv_dtype="fp8")
    attn = [w for w in verify_work(spec, 1 << 20, 7, 1) if w.kind == "verify_attn"][0]
    attn8 = [w for w in verify_work(spec8, 1 << 20, 7, 1) if w.kind == "verify_attn"][0]  # the fp8 cache's bytes
    assert attn8.bytes < 0.51 * attn.bytes
    for prof, has_fp8 in ((bf16_only, False), (shipped, True)):
        cost = ProfileCostModel(prof)
        bf16 = cost.price(attn, hw, spec)
        fp8 = cost.price(attn8, hw, spec8)
        assert bf16.source.origin.name in ("MEASURED", "INTERPOLATED")
        if has_fp8:
            assert fp8.source.origin.name in ("MEASURED", "INTERPOLATED") and "bf16-KV fit" not in str(fp8.source)
        else:
            assert fp8.source.origin.name == "EXTRAPOLATED" and "bf16-KV fit at fp8 KV bytes" in str(fp8.source)
