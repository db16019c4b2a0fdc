"""Weight formats read from a config.json's quantization_config, and what a mixed-precision checkpoint weighs."""

import dataclasses

import pytest

from wmtp.errors import ConfigError
from wmtp.hf_config import load_config
from wmtp.latency import verify_work
from wmtp.models import get_model
from wmtp.quant_config import weight_formats
from wmtp.weights import weight_parts

QWEN_NEXT = {
    "model_type": "qwen3_next", "hidden_size": 2048, "vocab_size": 151936,
    "num_hidden_layers": 48, "full_attention_interval": 4, "num_attention_heads": 16, "num_key_value_heads": 2,
    "head_dim": 256, "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "num_experts": 512, "num_experts_per_tok": 10,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "intermediate_size": 5120,
    "mlp_only_layers": [],
}

NVFP4 = {"num_bits": 4, "type": "float", "group_size": 16}
FP8 = {"num_bits": 8, "type": "float"}


def test_unquantized_config_has_no_formats():
    assert weight_formats({"model_type": "qwen2"}) == {}


@pytest.mark.parametrize("q, expected", [
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, ("fp8", None, False)),
    ({"quant_method": "gptq", "bits": 4}, ("int4", None, False)),
    ({"quant_method": "awq", "bits": 4}, ("int4", None, False)),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": ["lm_head"]}, ("nvfp4", None, False)),
    ({"quant_method": "modelopt", "quant_algo": "FP8"}, ("fp8", None, False)),
    # llm-compressor, one group over every Linear, the MTP block left out
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": NVFP4, "targets": ["Linear"]}},
      "ignore": ["lm_head", "re:.*mlp.gate$", "mtp.fc"]}, ("nvfp4", None, True)),
    # ModelOpt mixed precision by config groups: dense layers FP8, routed experts NVFP4
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "config_groups": {
        "group_0": {"weights": FP8, "targets": ["backbone.layers.0.mixer.in_proj",
                                                "backbone.layers.1.mixer.shared_experts.up_proj"]},
        "group_1": {"weights": NVFP4, "targets": ["backbone.layers.1.mixer.experts.0.up_proj"]}}},
     ("nvfp4", "fp8", False)),
    # ... and by quantized_layers, with the MTP block excluded
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "exclude_modules": ["mtp*", "lm_head"],
      "quantized_layers": {"model.layers.0.mlp.experts": {"quant_algo": "NVFP4"},
                           "model.layers.3.self_attn.q_proj": {"quant_algo": "FP8"},
                           "model.layers.0.linear_attn.out_proj": {"quant_algo": "FP8"}}}, ("nvfp4", "fp8", True)),
])
def test_producers(q, expected):
    got = weight_formats({"quantization_config": q})
    assert (got["weight_dtype"], got["dense_weight_dtype"], got["mtp_bf16"]) == expected


@pytest.mark.parametrize("q, needle", [
    ("nvfp4", "must be an object"),
    ({"quant_method": "bitsandbytes"}, "bitsandbytes"),
    ({"quant_method": "gptq", "bits": 8}, "bits=8"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": 8, "type": "int"}}}},
     "8-bit 'int'"),
    ({"quant_method": "compressed-tensors", "config_groups": {}}, "non-empty"),
    ({"quant_method": "modelopt", "quant_algo": "W8A8_SQ"}, "W8A8_SQ"),
    ({"quant_method": "fp8", "ignore": "lm_head"}, "list of module names"),
])
def test_unsupported_or_malformed_is_a_config_error(q, needle):
    with pytest.raises(ConfigError, match="quantization_config") as e:
        weight_formats({"quantization_config": q})
    assert needle in str(e.value)


def test_config_json_carries_its_formats(write_config):
    q = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "exclude_modules": ["mtp*"],
         "quantized_layers": {"model.layers.0.mlp.experts": {"quant_algo": "NVFP4"},
                              "model.layers.3.self_attn.q_proj": {"quant_algo": "FP8"}}}
    spec = load_config(write_config({**QWEN_NEXT, "quantization_config": q}, "qn"))
    assert (spec.weight_dtype, spec.dense_weight_dtype, spec.mtp_bf16) == ("nvfp4", "fp8", True)
    plain = load_config(write_config(QWEN_NEXT, "qn2"))
    assert (plain.weight_dtype, plain.dense_weight_dtype) == ("bf16", None)
    with pytest.raises(ConfigError):
        load_config(write_config({**QWEN_NEXT, "quantization_config": {"quant_method": "hqq"}}, "qn3"))


def test_mixed_checkpoint_bytes_by_hand():
    """nem as a mixed checkpoint: only the non-expert linear layers change format (NVFP4 0.5625 B/param plus 4 B
    per matrix -> FP8 1 + 4/128^2 B/param); the experts, bf16 parts and MTP do not move."""
    row = get_model("nem")
    uniform = dataclasses.replace(row, dense_weight_dtype=None)
    mixed = dataclasses.replace(row, dense_weight_dtype="fp8")
    u, m = weight_parts(uniform), weight_parts(mixed)
    h = 4096
    mamba = h * (2 * 128 * 64 + 2 * 8 * 128 + 128) + 128 * 64 * h  # in_proj (x, z, B, C, dt) + out_proj
    assert row.linear_params == mamba
    attn = h * 32 * 128 + 2 * h * 2 * 128 + 32 * 128 * h  # q, k, v, o
    shared = 2 * h * 5376  # relu2: up, down
    latent = 2 * h * 1024
    params = 40 * mamba + 8 * attn + 40 * (shared + latent)
    mats = 40 * 2 + 8 * 4 + 40 * (2 + 2)
    delta = params * (1 + 4 / 128**2 - 0.5625) - mats * 4
    assert m["target"] - u["target"] == pytest.approx(delta, rel=1e-9)
    for k in ("embed", "lm_head", "norms", "routers", "conv", "mtp_bf16"):
        assert m[k] == u[k]
    assert m["mtp"] > u["mtp"]  # the MTP block's own attention and projections follow the dense format


def test_work_items_read_each_part_in_its_format():
    """q122's attention projections are read at FP8 rates, its experts at NVFP4, its lm_head in bf16."""
    row = get_model("q122")
    items = {w.name: w for w in verify_work(row, 1000, 1, 1)}
    act = 2.0 * 1 * row.hidden * 2
    assert items["verify.attn_proj"].bytes == pytest.approx(row.attn_params * (1 + 4 / 128**2) + act)
    assert items["verify.attn_proj"].shape["wdtype"] == "fp8"
    assert items["verify.lm_head"].bytes == pytest.approx(row.vocab * row.hidden * 2 + row.vocab * 4)
    assert items["verify.moe"].shape["wdtype"] == "nvfp4"
    assert row.with_dtypes(weight_dtype="fp8").dense_weight_dtype is None  # a uniform FP8 checkpoint
    assert row.with_dtypes(kv_dtype="fp8").dense_weight_dtype == "fp8"


def test_weight_dtype_given_skips_an_unreadable_quantization_config(write_config):
    """The error says to pass --weight-dtype; passing it must then work (the config's quantization is not read)."""
    bad = {**QWEN_NEXT, "quantization_config": {"quant_method": "hqq"}}
    path = write_config(bad, "qn4")
    with pytest.raises(ConfigError, match="--weight-dtype"):
        load_config(path)
    spec = load_config(path, weight_dtype="int4")
    assert spec.dense_weight_dtype is None and spec.n_layers == 48
