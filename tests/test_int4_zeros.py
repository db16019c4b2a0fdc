"""int4 zero points: what a GPTQ / AWQ / compressed-tensors checkpoint stores (memory) and what a W4A16 kernel reads
(latency), at the checkpoint's group size. Facts (wmtp.weights docstring): GPTQ and AWQ store `qzeros`, a 4-bit zero
per scale packed in int32, whatever `sym` says; compressed-tensors stores `weight_zero_point` only for
`symmetric: false`; the kernel reads zero points only for asymmetric weights (GPTQ sym false, AWQ zero_point,
compressed-tensors symmetric false). Expected bytes are counted by hand below, never taken from the code under test.

The model: a small MiMo-style dense config (hidden 1024, 8 q / 2 kv heads x 128, SwiGLU 2816, 2 layers, one dense
MTP block, vocab 1000, untied). One decoder layer's matrices (N output rows x K):
  q 1024 x 1024, k 256 x 1024, v 256 x 1024, o 1024 x 1024    -> params 1024 * 2560 = 2,621,440, rows 2,560
  gate 2816 x 1024, up 2816 x 1024, down 1024 x 2816          -> params 3 * 1024 * 2816 = 8,650,752, rows 6,656
  layer: params 11,272,192, rows 9,216
The MTP block adds its eh projection 1024 x 2048 (params 2,097,152, rows 1,024): params 13,369,344, rows 10,240.
Quantized: P = 2 * 11,272,192 + 13,369,344 = 35,913,728 params in R = 2 * 9,216 + 10,240 = 28,672 rows.
bf16 parts: embed 1000 * 1024 * 2 = 2,048,000; lm_head (kept bf16) 2,048,000; norms (2 * 2 + 1) * 1024 * 2 = 10,240;
MTP norms 5 * 1024 * 2 = 10,240: 4,116,480 bytes.
int4 bytes: codes P / 2 = 17,956,864; group g: P / g scales of 2 bytes (bf16) and, where stored, 0.5 byte (4-bit zero);
per channel: R scales and zeros.
"""

from __future__ import annotations

import pytest

from cli_checks import assert_one_error, invoke  # noqa: E402

SMALL = {"architectures": ["MiMoForCausalLM"], "model_type": "mimo", "hidden_size": 1024, "intermediate_size": 2816,
         "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000,
         "num_nextn_predict_layers": 1, "tie_word_embeddings": False}
P, R, BF16 = 35_913_728, 28_672, 4_116_480
CODES = P // 2  # 17,956,864

# Hand totals (bytes of the whole checkpoint, MTP block included)
G128_ZEROS = BF16 + CODES + 2.5 * P / 128  # 4,116,480 + 17,956,864 + 701,440 = 22,774,784
G128_NO_ZEROS = BF16 + CODES + 2 * P / 128  # 4,116,480 + 17,956,864 + 561,152 = 22,634,496
G32_ZEROS = BF16 + CODES + 2.5 * P / 32  # 4,116,480 + 17,956,864 + 2,805,760 = 24,879,104
CHANNEL_ZEROS = BF16 + CODES + 2.5 * R  # 4,116,480 + 17,956,864 + 71,680 = 22,145,024
CHANNEL_NO_ZEROS = BF16 + CODES + 2 * R  # 4,116,480 + 17,956,864 + 57,344 = 22,130,688


def _gptq(group=None, method="gptq", **extra) -> dict:
    q = {"quant_method": method, "bits": 4, **extra}
    return SMALL | {"quantization_config": q if group is None else q | {"group_size": group}}


def _ct(symmetric=None, group=128, strategy="group") -> dict:
    w = {"num_bits": 4, "type": "int", "strategy": strategy, "group_size": group}
    if symmetric is not None:
        w["symmetric"] = symmetric
    return SMALL | {"quantization_config": {"quant_method": "compressed-tensors",
                                            "config_groups": {"group_0": {"targets": ["Linear"], "weights": w}}}}


def _spec(cfg):
    from wmtp.hf_config import spec_from_config

    return spec_from_config(cfg, "m/config.json")


def _weights(cfg) -> float:
    from wmtp.weights import model_weight_bytes

    return model_weight_bytes(_spec(cfg), with_mtp=True)


def test_hand_totals_are_what_the_comments_say():  # the arithmetic above, checked once
    assert (G128_ZEROS, G128_NO_ZEROS, G32_ZEROS) == (22_774_784, 22_634_496, 24_879_104)
    assert (CHANNEL_ZEROS, CHANNEL_NO_ZEROS) == (22_145_024, 22_130_688)


# ------------------------------------------------------------------------- memory: what the checkpoint stores
@pytest.mark.parametrize("cfg, expected", [
    (_gptq(128), G128_ZEROS),  # GPTQ sym (the default): qzeros stored all the same
    (_gptq(128, sym=True), G128_ZEROS),
    (_gptq(128, sym=False), G128_ZEROS),
    (_gptq(None), G128_ZEROS),  # group_size unsaid: 128
    (_gptq(32), G32_ZEROS),
    (_gptq(-1), CHANNEL_ZEROS),  # per channel: one scale and one zero per output row
    (_gptq(128, "awq"), G128_ZEROS),
    (_gptq(128, "awq", zero_point=True), G128_ZEROS),
    (_gptq(-1, "awq"), CHANNEL_ZEROS),
    (_ct(), G128_NO_ZEROS),  # compressed-tensors symmetric where unsaid: no weight_zero_point
    (_ct(True), G128_NO_ZEROS),
    (_ct(False), G128_ZEROS),  # asymmetric: weight_zero_point, 4-bit per scale
    (_ct(False, None, "channel"), CHANNEL_ZEROS),
    (_ct(True, None, "channel"), CHANNEL_NO_ZEROS),
])
def test_checkpoint_bytes_by_hand(cfg, expected):
    assert _weights(cfg) == pytest.approx(expected, rel=1e-12)


def test_unquantized_control():  # bf16 everywhere: 2 bytes a parameter, the lm_head and the rest as before
    assert _weights(SMALL) == pytest.approx(BF16 + 2 * P, rel=1e-12)


@pytest.mark.parametrize("fmt_args, expected", [
    # [1024, 2816] (a down projection): codes 1024 * 1408 = 1,441,792; 22 groups of 128 per row
    ((128, False), 1_441_792 + 2 * 1024 * 22),  # 1,486,848
    ((128, True), 1_441_792 + 2.5 * 1024 * 22),  # 1,498,112
    ((0, True), 1_441_792 + 2.5 * 1024),  # per channel: 1,444,352
    ((0, False), 1_441_792 + 2 * 1024),
])
def test_matrix_bytes_with_zero_points(fmt_args, expected):
    from wmtp.weights import matrix_bytes

    group, zeros = fmt_args
    assert matrix_bytes("int4", 1024, 2816, group=group, zeros=zeros) == expected


@pytest.mark.parametrize("cfg, fields", [
    (_gptq(128), (128, True, False)),  # stored, not read: symmetric GPTQ
    (_gptq(128, sym=False), (128, True, True)),
    (_gptq(-1), (0, True, False)),
    (_gptq(64, "awq"), (64, True, True)),
    (_gptq(128, "awq", zero_point=False), (128, True, False)),
    (_ct(), (128, False, False)),
    (_ct(False, 32), (32, True, True)),
])
def test_spec_fields_from_the_config(cfg, fields):
    s = _spec(cfg)
    assert (s.int4_group, s.int4_zeros, s.int4_asym) == fields


def test_non_int4_checkpoints_have_no_zero_points():
    from wmtp.quant_config import weight_formats

    got = weight_formats({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}})
    assert (got["int4_zeros"], got["int4_asym"]) == (False, False)


def test_weight_dtype_int4_without_a_checkpoint_has_no_zero_points(write_config):
    """--weight-dtype int4 means W4A16 group 128 with bf16 scales and no zero points (its help and ModelSpec)."""
    from wmtp.cli.common import resolve_model

    for cfg in (_gptq(-1), _gptq(32, "awq")):
        spec = resolve_model(None, write_config(cfg), "int4", None)
        assert (spec.int4_group, spec.int4_zeros, spec.int4_asym) == (128, False, False)
    spec = resolve_model("q122", None, "int4", None)
    assert (spec.int4_group, spec.int4_zeros, spec.int4_asym) == (128, False, False)


# ------------------------------------------------------------------------- bad configs: one error line
@pytest.mark.parametrize("cfg, needle", [
    (_gptq(128, sym="yes"), "sym"),
    (_gptq(128, sym=None), "sym"),
    (_gptq(128, "awq", zero_point=1), "zero_point"),
    (_ct("false"), "symmetric"),
])
def test_a_non_boolean_flag_is_one_error(write_config, cfg, needle):
    assert_one_error(invoke("predict", "--config", write_config(cfg)), needle)


def test_two_int4_groups_of_different_symmetry_are_refused(write_config):
    ws = [{"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": s} for s in (True, False)]
    cfg = SMALL | {"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {
        "g0": {"targets": ["re:.*self_attn.*"], "weights": ws[0]}, "g1": {"targets": ["re:.*mlp.*"], "weights": ws[1]}}}}
    assert_one_error(invoke("predict", "--config", write_config(cfg)), "symmetry")


def test_a_legal_boolean_flag_predicts(write_config):  # the control of the two above
    r = invoke("predict", "--config", write_config(_gptq(128, sym=False)), "--ctx", "4K", "--json")
    assert r.exit_code == 0, r.output


def test_asymmetric_without_stored_zero_points_is_not_a_row():
    from wmtp.errors import WmtpError

    s = _spec(_gptq(128))
    with pytest.raises(WmtpError, match="int4_asym needs int4_zeros"):
        type(s)(**{**s.__dict__, "int4_zeros": False, "int4_asym": True})


# ------------------------------------------------------------------------- latency: what the kernel reads
# A work item's bytes are its weights plus bf16 activations in and out: 2 * tokens * hidden * 2 (4,096 for the small
# model at one token). The kernel reads codes, scales at the checkpoint's group, and zero points only where the
# weights are asymmetric (symmetric GPTQ's stored qzeros are not read: vLLM's Marlin path).
ACT = 2 * 1 * 1024 * 2
ATTN_P, ATTN_R, FFN_P, FFN_R = 2_621_440, 2_560, 8_650_752, 6_656
MTP_P, MTP_R = 2 * 1024 * 1024 + ATTN_P, 1_024 + ATTN_R  # eh projection 1024 x 2048 and the attention: 4,718,592


def _items(cfg, draft=False) -> dict:
    from wmtp.latency import draft_fwd_work, verify_work

    spec = _spec(cfg)
    work = draft_fwd_work(spec, 4096, 1) if draft else verify_work(spec, 4096, 1, 1)
    return {w.name: w.bytes for w in work}


@pytest.mark.parametrize("cfg, attn, ffn", [
    # GPTQ sym, group 128: codes + 2 bytes per 128 (no zeros read): 1,310,720 + 40,960; 4,325,376 + 135,168
    (_gptq(128), ATTN_P / 2 + 2 * ATTN_P / 128, FFN_P / 2 + 2 * FFN_P / 128),
    # GPTQ sym false: + 0.5 byte of zero per 128: 1,310,720 + 51,200
    (_gptq(128, sym=False), ATTN_P / 2 + 2.5 * ATTN_P / 128, FFN_P / 2 + 2.5 * FFN_P / 128),
    # AWQ group 32 (asymmetric): 2.5 bytes per 32 parameters: 1,310,720 + 204,800; 4,325,376 + 675,840
    (_gptq(32, "awq"), ATTN_P / 2 + 2.5 * ATTN_P / 32, FFN_P / 2 + 2.5 * FFN_P / 32),
    # per channel: one scale per output row (2 bytes; 2.5 with AWQ's zero): 1,310,720 + 5,120 / + 6,400
    (_gptq(-1), ATTN_P / 2 + 2 * ATTN_R, FFN_P / 2 + 2 * FFN_R),
    (_gptq(-1, "awq"), ATTN_P / 2 + 2.5 * ATTN_R, FFN_P / 2 + 2.5 * FFN_R),
    # compressed-tensors asymmetric channel: as AWQ's per channel
    (_ct(False, None, "channel"), ATTN_P / 2 + 2.5 * ATTN_R, FFN_P / 2 + 2.5 * FFN_R),
])
def test_verify_bytes_follow_group_and_zero_points(cfg, attn, ffn):
    items = _items(cfg)
    assert items["verify.attn_proj"] == pytest.approx(attn + ACT, rel=1e-12)
    assert items["verify.ffn"] == pytest.approx(ffn + ACT, rel=1e-12)


def test_draft_projection_bytes_per_channel():
    # AWQ per channel: 4,718,592 / 2 + 2.5 * 3,584 = 2,359,296 + 8,960
    items = _items(_gptq(-1, "awq"), draft=True)
    assert items["fwd.mtp_proj"] == pytest.approx(MTP_P / 2 + 2.5 * MTP_R + ACT, rel=1e-12)


def test_smaller_groups_read_more_bytes():  # a property: bytes fall with the group, per channel least
    b = [_items(_gptq(g, "awq"))["verify.ffn"] for g in (32, 64, 128, 256, -1)]
    assert b == sorted(b, reverse=True) and len(set(b)) == 5


def test_moe_bytes_per_channel_by_hand():
    """Qwen3-Next shape (hidden 2048, 512 experts of 512, top 10, one shared expert of 512), AWQ per channel. At one
    token, top_k = 10 experts are touched. One expert: 3 * 2048 * 512 = 3,145,728 params in 512 + 512 + 2048 = 3,072
    rows: 1,572,864 + 2.5 * 3,072 = 1,580,544 bytes; the shared expert the same; the router 2048 x 512 in bf16
    (2,097,152); activations 2 * 2048 * 2 = 8,192. Total 11 * 1,580,544 + 2,097,152 + 8,192 = 19,491,328."""
    from test_quant_config import QWEN_NEXT

    items = _items(QWEN_NEXT | {"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": -1}})
    assert items["verify.moe"] == pytest.approx(19_491_328, rel=1e-9)


def test_defaults_unchanged_by_hand():
    """q122's row (ModelOpt mixed: routed experts NVFP4, 0.5 + 1/16 bytes a parameter; the other linear layers FP8,
    1 + 4/128^2) and --weight-dtype int4 (every linear layer int4 at 0.5 + 2/128: group 128, no zero points) read
    the bytes they read before zero points were modelled."""
    from wmtp.latency import experts_touched, verify_work
    from wmtp.models import get_model

    nvfp4, fp8, int4 = 0.5 + 1 / 16, 1 + 4 / 128**2, 0.5 + 2 / 128
    for dtype, experts, dense in ((None, nvfp4, fp8), ("int4", int4, int4)):
        spec = get_model("q122").with_dtypes(weight_dtype=dtype)
        items = {w.name: w.bytes for w in verify_work(spec, 4096, 1, 1)}
        act = 2 * 1 * spec.hidden * 2
        router = spec.hidden * spec.n_experts
        assert items["verify.attn_proj"] == pytest.approx(spec.attn_params * dense + act, rel=1e-12)
        assert items[f"verify.{spec.linear_kind}_proj"] == pytest.approx(spec.linear_params * dense + act, rel=1e-12)
        moe = (experts_touched(spec, 1) * spec.expert_params * experts + (spec.moe_dense_params - router) * dense
               + 2 * router + act)
        assert items["verify.moe"] == pytest.approx(moe, rel=1e-12)
