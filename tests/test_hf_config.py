import json

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


# ---- a model folder or a Hugging Face repo id (huggingface_hub is optional; CI has no network) ----
import sys  # noqa: E402
import types  # noqa: E402

from typer.testing import CliRunner  # noqa: E402

from wmtp.cli.main import app  # noqa: E402

MIMO = {"model_type": "mimo", "hidden_size": 4096, "vocab_size": 151680, "num_hidden_layers": 36,
        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 11008,
        "num_nextn_predict_layers": 1}


def _one_error(r, match):
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 1 and len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert match in lines[0], lines[0]


def _fake_hub(monkeypatch, cache: dict, download=None):
    """A stand-in for huggingface_hub: `cache` maps repo id -> cached config path."""
    calls = []

    def try_to_load_from_cache(repo_id, filename):
        assert filename == "config.json"
        return str(cache[repo_id]) if repo_id in cache else None

    def hf_hub_download(repo_id, filename, **kw):
        calls.append(repo_id)
        if download is None:
            raise ConnectionError("Max retries exceeded with url: /api/models (network unreachable)")
        return str(download)

    mod = types.ModuleType("huggingface_hub")
    mod.try_to_load_from_cache, mod.hf_hub_download = try_to_load_from_cache, hf_hub_download
    mod.constants = types.SimpleNamespace(HF_HUB_OFFLINE=False)
    monkeypatch.setitem(sys.modules, "huggingface_hub", mod)
    return calls


def test_model_folder_by_config_and_model(tmp_path, write_config):
    folder = write_config(MIMO, "MiMo-7B-RL").parent
    assert load_config(folder).key == "MiMo-7B-RL"
    r = CliRunner().invoke(app, ["predict", "--config", str(folder), "--ctx", "64K", "--json"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["predict", "--model", str(folder), "--ctx", "64K", "--json"])
    assert r.exit_code == 0, r.output
    _one_error(CliRunner().invoke(app, ["predict", "--config", str(tmp_path)]), "has no config.json")


def test_repo_id_from_the_hub_cache(monkeypatch, tmp_path, write_config):
    cached = write_config(MIMO, "snapshot-abc123")  # the cache's snapshot folder name is a hash
    calls = _fake_hub(monkeypatch, {"XiaomiMiMo/MiMo-7B-RL": cached})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = load_config("XiaomiMiMo/MiMo-7B-RL")
    assert spec.key == "MiMo-7B-RL" and spec.n_layers == 36 and calls == []  # no network when cached
    r = CliRunner().invoke(app, ["predict", "--model", "XiaomiMiMo/MiMo-7B-RL", "--ctx", "64K", "--json"])
    assert r.exit_code == 0, r.output


def test_repo_id_not_cached_offline_is_one_error_line(monkeypatch):
    calls = _fake_hub(monkeypatch, {})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _one_error(CliRunner().invoke(app, ["predict", "--config", "org/not-cached"]), "HF_HUB_OFFLINE")
    assert calls == []


def test_repo_id_unreachable_is_one_error_line(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    calls = _fake_hub(monkeypatch, {})
    _one_error(CliRunner().invoke(app, ["predict", "--model", "org/unreachable"]), "cannot fetch config.json")
    assert calls == ["org/unreachable"]


def test_repo_id_downloaded_when_online(monkeypatch, write_config):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    _fake_hub(monkeypatch, {}, download=write_config(MIMO, "dl"))
    assert load_config("org/fresh").key == "fresh"


def test_repo_id_without_huggingface_hub_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails
    _one_error(CliRunner().invoke(app, ["predict", "--config", "org/model"]), "huggingface_hub")
    with pytest.raises(ConfigError, match="pip install huggingface_hub"):
        load_config("org/model")
    _one_error(CliRunner().invoke(app, ["predict", "--model", "llama"]), "unknown model 'llama'")  # not a repo id


def test_hostile_config_fields_are_config_errors(write_config):
    with pytest.raises(ConfigError, match="kv_heads must be positive"):
        load_config(write_config({**MIMO, "num_key_value_heads": 0}))
    with pytest.raises(ConfigError, match="at most 10000 layers"):
        load_config(write_config({**QWEN_NEXT, "num_hidden_layers": 1e9}))
    with pytest.raises(ConfigError, match="full_attention_interval must be >= 1"):
        load_config(write_config({**QWEN_NEXT, "full_attention_interval": 0}))
    with pytest.raises(ConfigError, match="should be an integer"):
        load_config(write_config(json.dumps({**MIMO, "hidden_size": 1.5})))
    with pytest.raises(ConfigError, match="binary|UTF-8"):
        p = write_config("x")
        p.write_bytes(b"\x00\xff" * 100)
        load_config(p)
