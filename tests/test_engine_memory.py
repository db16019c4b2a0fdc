"""SGLang's memory accounting (wmtp.engine_memory) against hand arithmetic and its stated properties."""

from __future__ import annotations

import math

import pytest

from wmtp.engine_memory import (CUDA_CONTEXT_BYTES, EngineMemoryConfig, config_from_preset, default_mem_fraction,
                                engine_memory, graph_buffer_bytes, largest_mem_fraction, prefill_activation_bytes)
from wmtp.errors import WmtpError
from wmtp.hardware import get_hardware
from wmtp.models import get_model
from wmtp.tp import per_gpu_spec

B200 = get_hardware("b200")
H200 = get_hardware("h200")
PAPER = EngineMemoryConfig(mem_fraction_static=0.85)


def test_dense_attention_model_by_hand():
    spec = get_model("mimo7b")  # no recurrent state: rest = mfs * M0 - weights; R = 48 with speculation
    e = engine_memory(spec, H200, "native", 2**20, 7, PAPER)
    m0 = H200.hbm_bytes - CUDA_CONTEXT_BYTES
    norms = (2 * 36 + 1) * 4096  # two RMSNorm vectors per layer and the final one (not in target_params)
    rest = 0.85 * m0 - (spec.target_params + norms) * 2  # a bf16 checkpoint: 2 bytes per parameter
    cell = spec.n_full_attn * spec.kv_bytes_per_token_layer  # 36 layers x 8 heads x 128 x 2 x 2 B = 147456
    assert cell == 36 * 8 * 128 * 2 * 2
    n_tok = math.floor(rest / cell)
    assert e.kv_pool_tokens == n_tok
    assert e.max_batch == min(math.floor(n_tok / (2**20 + 512 * 0.7)), 48)
    assert e.spec_state_reserve == 0 and e.state_pool == 0


def test_hybrid_reservation_grows_with_depth_and_decides_whether_d_fits():
    spec = get_model("q122")
    d7 = engine_memory(spec, B200, "native", 1_040_000, 7, PAPER)
    d9 = engine_memory(spec, B200, "native", 1_040_000, 9, PAPER)
    m = spec.n_linear * spec.state_bytes_per_layer
    assert d7.spec_state_reserve == pytest.approx(m * 48 * 7) and d9.spec_state_reserve == pytest.approx(m * 48 * 9)
    assert d7.fits and d7.max_batch >= 1
    assert not d9.fits and d9.max_batch == 0 and "cannot seat one request" in d9.why_not  # the paper: OOM at d 9


def test_window_covering_the_context_is_the_native_draft():
    spec = get_model("q35")
    nat = engine_memory(spec, H200, "native", 4096, 7, PAPER)
    win = engine_memory(spec, H200, "window", 4096, 7, PAPER, ring_slots=0)
    assert win.slack_needed["draft KV"] == nat.slack_needed["draft KV"]
    ring = engine_memory(spec, H200, "window", 2**20, 7, PAPER, ring_slots=4103)
    assert ring.slack_needed["draft KV"] == ring.max_batch * 4103 * spec.kv_bytes_per_token_layer


def test_tp_slices_weights_and_state():
    spec = get_model("q35")
    one = engine_memory(per_gpu_spec(spec, 1), B200, "native", 1_040_000, 7, PAPER, tp=1)
    two = engine_memory(per_gpu_spec(spec, 2), B200, "native", 1_040_000, 7, PAPER, tp=2)
    assert two.weights_target < one.weights_target and two.spec_state_reserve < one.spec_state_reserve
    assert two.max_batch > one.max_batch
    assert two.slack_needed["TP buffers"] > 0 == one.slack_needed["TP buffers"]


def test_defaults_follow_sglang_heuristics():
    # H200, TP1, speculative: reserved = 512 + 1.5 * 8192 + 2 * 256 + 1024 / 8 + 2048 MiB (sglang-facts.md B1)
    reserved = 512 + 1.5 * 8192 + 2 * 256 + 128 + 2048
    gpu = H200.hbm_bytes / 2**20
    assert default_mem_fraction(H200, EngineMemoryConfig(), 1, True) == round((gpu - reserved) / gpu, 3)
    assert graph_buffer_bytes(48, 2**20, 7) == 48 * 2**20 * (70 + 24)


def test_bad_settings_are_errors():
    with pytest.raises(WmtpError, match="mem_fraction_static"):
        EngineMemoryConfig(mem_fraction_static=1.5)
    with pytest.raises(WmtpError, match="max_running_requests"):
        EngineMemoryConfig(max_running_requests=0)
    with pytest.raises(WmtpError, match="unknown settings"):
        config_from_preset({"nope": 1})
    assert config_from_preset(None) is None


def test_predict_with_nothing_fitting_warns_and_does_not_crash():
    from wmtp.predict import predict

    p = predict(get_model("q35"), B200, 16 * 2**20, "auto", frameworks=["sglang-b200-paper"])
    assert p.memory.max_batch == {"dense": 0, "native": 0, "window": 0}
    assert any("does not fit" in w for w in p.warnings)


def test_prefill_activations_by_hand():
    # MiMo-7B: 32 q / 8 KV heads x 128, hidden 4096, dense SwiGLU FFN 11008 (no MoE, no linear attention).
    spec = get_model("mimo7b")
    chunk = 8192
    stream = 3 * chunk * 4096 * 2  # residual, its normed copy, the layer output (bf16)
    attention = chunk * (4096 + 2 * 1024 + 4096) * 2  # q, k, v, output
    ffn = chunk * (2 * 11008 + 11008) * 2  # gate-up output and the activation
    assert ffn > attention
    assert prefill_activation_bytes(spec, chunk) == stream + ffn + 384 * 2**20


def test_prefill_activations_count_mamba_chunk_states_in_fp32():
    spec = get_model("nem")  # Mamba2: 128 heads x 64, state 128, 8 groups; 22 of 512 experts, latent 1024, relu^2 2688
    chunk = 16384
    moe = chunk * 22 * (max(2688, 1024) + 2688) * 2
    mamba = chunk * (3 * 128 * 64 + 2 * 8 * 128) * 2 + (chunk // 256) * 128 * 64 * 128 * 4
    assert prefill_activation_bytes(spec, chunk) == 3 * chunk * 4096 * 2 + max(moe, mamba) + 384 * 2**20
    e = engine_memory(spec, B200, "native", 1_040_000, 7, PAPER)
    assert e.slack_needed["prefill activations"] == prefill_activation_bytes(spec, 16384)  # B200: chunk 16384


def test_slack_too_small_for_prefill_fails_with_a_reason():
    spec = get_model("mimo7b")
    e = engine_memory(spec, H200, "dense", 8192, 1, EngineMemoryConfig(mem_fraction_static=0.999))
    assert not e.fits and e.max_batch == 0 and "prefill activations" in e.why_not


def test_state_pool_from_the_mamba_memory_ratio_by_hand():
    """Dense decoding with no max_running_requests: the state slots take q / (1 + q) of the rest (SGLang's
    handle_max_mamba_cache), q per model family where the run set one (the paper: 0.1 for its Qwen models)."""
    spec = get_model("q35")
    m = spec.n_linear * spec.state_bytes_per_layer
    for q, cfg in ((0.9, PAPER), (0.1, EngineMemoryConfig(mem_fraction_static=0.85,
                                                          mamba_full_memory_ratio={"qwen3_5_moe": 0.1, "default": 0.9}))):
        e = engine_memory(spec, B200, "dense", 1_040_000, 1, cfg)
        rest = 0.85 * (B200.hbm_bytes - CUDA_CONTEXT_BYTES) - e.weights_target
        c = math.floor(rest * q / (1 + q) / m)
        assert e.state_pool == pytest.approx(m * c)
        assert e.kv_pool_tokens == math.floor((rest - m * c) / e.kv_cell_bytes)
    other = EngineMemoryConfig(mamba_full_memory_ratio={"qwen3_5_moe": 0.1, "default": 0.5})
    assert other.state_memory_ratio("nemotron_h") == 0.5 and other.state_memory_ratio("qwen3_5_moe") == 0.1
    for bad in (-1, "x", {"a": "b"}, {}, True):
        with pytest.raises(WmtpError, match="mamba_full_memory_ratio"):
            EngineMemoryConfig(mamba_full_memory_ratio=bad)


@pytest.mark.parametrize("key,tp", [("q35", 1), ("q122", 2), ("nem", 2)])
def test_largest_mem_fraction_is_the_edge_of_fitting(key, tp):
    """Properties: the method fits at the returned setting and not 0.001 above it; a windowed draft (its ring
    instead of a pool the size of the target's) runs at least as high and seats at least as many; the capacity
    there is at least the capacity at 0.85."""
    spec = per_gpu_spec(get_model(key).with_dtypes(weight_dtype="nvfp4"), tp)
    out = {}
    for method, slots in (("native", 0), ("window", 4103)):
        e = largest_mem_fraction(spec, B200, method, 1_040_000, 7, PAPER, tp, slots)
        assert e is not None and e.fits
        above = min(0.999, round(e.mem_fraction_static + 0.001, 3))
        if above > e.mem_fraction_static:
            cfg = EngineMemoryConfig(mem_fraction_static=above)
            assert not engine_memory(spec, B200, method, 1_040_000, 7, cfg, tp, slots).fits
        assert e.max_batch >= engine_memory(spec, B200, method, 1_040_000, 7, PAPER, tp, slots).max_batch
        out[method] = e
    assert out["window"].mem_fraction_static >= out["native"].mem_fraction_static
    assert out["window"].max_batch >= out["native"].max_batch


def test_largest_mem_fraction_none_when_nothing_fits():
    spec = get_model("q122").with_dtypes(weight_dtype="bf16")  # 244 GB of bf16 weights on one 180 GB GPU
    assert largest_mem_fraction(spec, B200, "native", 1_040_000, 7, PAPER) is None


def test_spare_rows_and_state_slot_come_out_of_the_slack():
    # nem at TP2 (SGLang 0.5.12, MambaPool / ReqToTokenPool allocate size + 1): one request row of S + 4 + d int32 per
    # running request and one more; one spare state slot of m = 40 layers x (conv 5120 x 3 bf16 + ssm 64 x 64 x 128 fp32)
    # and its d intermediate states
    spec = per_gpu_spec(get_model("nem"), 2)
    m = 40 * (5120 * 3 * 2 + 64 * 64 * 128 * 4)
    assert m == 85_114_880
    nat = engine_memory(spec, B200, "native", 1_040_000, 7, PAPER, tp=2)
    assert nat.slack_needed["request table (req_to_token)"] == 49 * (1_040_000 + 4 + 7) * 4
    assert nat.slack_needed["spare state slot"] == pytest.approx(m * 8, rel=1e-3)
    dense = engine_memory(spec, B200, "dense", 1_040_000, 7, EngineMemoryConfig(mem_fraction_static=0.85,
                                                                                   max_running_requests=16), tp=2)
    assert dense.slack_needed["spare state slot"] == pytest.approx(m, rel=1e-3)
    assert dense.slack_needed["request table (req_to_token)"] == 17 * (1_040_000 + 4 + 1) * 4
    attn_only = engine_memory(get_model("mimo7b"), H200, "native", 2**20, 7, PAPER)
    assert attn_only.slack_needed["spare state slot"] == 0
