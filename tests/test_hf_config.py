import pytest

from wmtp.errors import ConfigError
from wmtp.hf_config import load_config
from wmtp.models import get_model

QWEN_NEXT = {
    "model_type": "qwen3_next", "architectures": ["Qwen3NextForCausalLM"], "hidden_size": 2048, "vocab_size": 151936,
    "num_hidden_layers": 48, "full_attention_interval": 4, "num_attention_heads": 16, "num_key_value_heads": 2,
    "head_dim": 256, "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "num_experts": 512, "num_experts_per_tok": 10,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "intermediate_size": 5120,
    "mlp_only_layers": [],
}


def test_qwen3_next_matches_registry_row(write_config):
    spec = load_config(write_config(QWEN_NEXT, "qnext"))
    row = get_model("qnext")
    for f in ("hidden", "vocab", "n_layers", "n_full_attn", "n_linear", "q_heads", "kv_heads", "head_dim",
              "n_experts", "top_k", "expert_ffn", "lin_v_heads", "kv_bytes_per_token_layer", "state_bytes_per_layer"):
        assert getattr(spec, f) == getattr(row, f), f
    assert spec.key == "qnext"


def test_qwen3_5_moe_reads_text_config_and_layer_types(write_config):
    text = {k: v for k, v in QWEN_NEXT.items() if k not in ("model_type", "full_attention_interval")}
    text.update(hidden_size=3072, num_attention_heads=32, linear_num_value_heads=64, num_experts=256,
                num_experts_per_tok=8, moe_intermediate_size=1024, shared_expert_intermediate_size=1024,
                vocab_size=248320, layer_types=["linear_attention"] * 3 + ["full_attention"]) 
    text["layer_types"] = text["layer_types"] * 12
    spec = load_config(write_config({"model_type": "qwen3_5_moe", "text_config": text}, "q122"))
    row = get_model("q122")
    assert (spec.n_full_attn, spec.n_linear, spec.state_bytes_per_layer) == (12, 36, row.state_bytes_per_layer)
    assert spec.total_params == pytest.approx(row.total_params, rel=1e-9)


def test_nemotron_h_pattern(write_config):
    pattern = "ME" * 40 + "*" * 8
    cfg = {"model_type": "nemotron_h", "hidden_size": 4096, "vocab_size": 131072, "hybrid_override_pattern": pattern,
           "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "mamba_num_heads": 128,
           "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "n_routed_experts": 512,
           "num_experts_per_tok": 22, "moe_intermediate_size": 2688, "moe_shared_expert_intermediate_size": 5376,
           "moe_latent_size": 1024}
    spec = load_config(write_config(cfg, "nem"))
    row = get_model("nem")
    assert (spec.n_full_attn, spec.n_linear, spec.n_moe, spec.n_layers) == (8, 40, 40, 88)
    assert spec.kv_bytes_per_token_layer == row.kv_bytes_per_token_layer == 1024
    assert spec.ssm_state_bytes_per_layer == row.ssm_state_bytes_per_layer


def test_deepseek_v3_mla(write_config):
    cfg = {"model_type": "deepseek_v3", "hidden_size": 7168, "vocab_size": 129280, "num_hidden_layers": 61,
           "num_attention_heads": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
           "v_head_dim": 128, "q_lora_rank": 1536, "n_routed_experts": 256, "num_experts_per_tok": 8,
           "moe_intermediate_size": 2048, "n_shared_experts": 1, "first_k_dense_replace": 3,
           "intermediate_size": 18432, "num_nextn_predict_layers": 1}
    spec = load_config(write_config(cfg, "dsv3"))
    assert spec.attn_kind == "mla" and spec.kv_bytes_per_token_layer == 576 * 2
    assert spec.total_params == pytest.approx(get_model("dsv3").total_params, rel=1e-9)


def test_glm4_moe_and_mimo(write_config):
    glm = {"model_type": "glm4_moe", "hidden_size": 5120, "vocab_size": 151552, "num_hidden_layers": 92,
           "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128, "n_routed_experts": 160,
           "num_experts_per_tok": 8, "moe_intermediate_size": 1536, "n_shared_experts": 1,
           "first_k_dense_replace": 3, "intermediate_size": 12288}
    assert load_config(write_config(glm, "glm")).total_params == pytest.approx(get_model("glm45").total_params, rel=1e-9)
    mimo = {"model_type": "mimo", "hidden_size": 4096, "vocab_size": 151680, "num_hidden_layers": 36,
            "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 11008,
            "num_nextn_predict_layers": 1}
    spec = load_config(write_config(mimo, "mimo"))
    assert spec.head_dim == 128 and spec.total_params == pytest.approx(get_model("mimo7b").total_params, rel=1e-9)


def test_malformed_json(write_config):
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(write_config('{"model_type": "qwen3_next", '))


def test_missing_fields_are_named(write_config):
    cfg = dict(QWEN_NEXT)
    del cfg["num_experts"], cfg["linear_num_value_heads"]
    with pytest.raises(ConfigError, match="needs linear_num_value_heads, num_experts"):
        load_config(write_config(cfg))


def test_wrong_types_and_unsupported_family(write_config):
    with pytest.raises(ConfigError, match="hidden_size"):
        load_config(write_config({**QWEN_NEXT, "hidden_size": "big"}))
    with pytest.raises(ConfigError, match="'llama' is not supported"):
        load_config(write_config({"model_type": "llama"}))
    with pytest.raises(ConfigError, match="JSON object"):
        load_config(write_config("[1, 2]"))
    with pytest.raises(ConfigError, match="cannot read"):
        load_config("/nonexistent/config.json")
