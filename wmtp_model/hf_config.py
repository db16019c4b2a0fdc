"""Load a Hugging Face `config.json` into a `ModelSpec` row.

Families: qwen3_next, qwen3_5_moe (text fields may sit under `text_config`), nemotron_h
(`hybrid_override_pattern`: M = Mamba2, * = attention, E = MoE, - = dense MLP), deepseek_v3,
glm4_moe, mimo and qwen2 (dense; MTP from `num_nextn_predict_layers`). Anything else, or a config
lacking a field the model needs, is a `ConfigError` naming what is missing; so is a field of the
wrong type, negative, non-finite or absurdly large (more than `MAX_LAYERS` layers), and so is a Nemotron-H
`moe_latent_size` not narrower than `hidden_size`; the model row's own checks (`ModelSpec`) are said with the
config's field names and values beside the row's. A field a config leaves out
takes the default of the family's Hugging Face config class (`_HF_DEFAULTS`), which is what an engine loading the
file runs; the MTP layer count is read under either of its names (`_MTP_FIELDS`) in every family.

`load_config` takes a config.json, a local model folder holding one, or a Hugging Face repo id
(`Qwen/Qwen3-Next-80B-A3B-Instruct`), located by `wmtp.hf_source` (a repo id read through `huggingface_hub`, optional: imported only then)
from its cache first, so `HF_HUB_OFFLINE=1` and a warm cache work without a network. The weight formats come
from the config's `quantization_config` (`wmtp.quant_config`), the KV dtype from its KV-cache scheme
(`wmtp.kv_quant`: fp8, said in the row's notes); an unquantized config is bf16.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from wmtp.errors import ConfigError, WmtpError
from wmtp.kv_quant import kv_cache_format
from wmtp.quant_config import QUANT_KEYS, weight_formats
from wmtp.specs import MAX_COUNT, MAX_LAYERS, ModelSpec
from wmtp.units import printable

_MTP_FIELDS = ("num_nextn_predict_layers", "mtp_num_hidden_layers")  # a config's count of MTP layers
FAMILIES = ("qwen3_next", "qwen3_5_moe", "nemotron_h", "deepseek_v3", "glm4_moe", "mimo", "qwen2")
# What Hugging Face's config class of each family sets a field to when config.json leaves it out (what an engine
# loading the file runs), where that differs from wmtp's own fallback: a Qwen3-Next config without head_dim was
# priced with hidden_size / num_attention_heads (128 where HF runs 256), a DeepSeek-V3 one without
# first_k_dense_replace with no dense layer (HF: 3). An explicit null keeps wmtp's fallback (q_lora_rank null: no
# query compression, as HF reads it). Aliases: the names HF's __init__ takes for the fields config.json stores.
_HF_DEFAULTS = {
    "qwen3_next": {"head_dim": 256, "shared_expert_intermediate_size": 512, "linear_key_head_dim": 128},
    "qwen3_5_moe": {"head_dim": 256, "shared_expert_intermediate_size": 512, "linear_key_head_dim": 128},
    "nemotron_h": {"head_dim": 128, "moe_shared_expert_intermediate_size": 7688},
    "deepseek_v3": {"first_k_dense_replace": 3, "n_shared_experts": 1, "q_lora_rank": 1536},
    "glm4_moe": {"first_k_dense_replace": 1, "n_shared_experts": 1},
}
_ALIASES = {"nemotron_h": {"n_groups": "mamba_n_groups", "conv_kernel": "mamba_d_conv"}}


class _Fields:
    def __init__(self, cfg: dict, family: str, path: str):
        self.cfg, self.family, self.path, self.missing = cfg, family, path, []
        for name, alias in _ALIASES.get(family, {}).items():
            if alias in cfg:
                if name in cfg and cfg[name] != cfg[alias]:
                    raise ConfigError(f"{path}: {name} ({_short(cfg[name])}) and {alias} ({_short(cfg[alias])}) are "
                                      "two names of one field with different values; give one")
                self.cfg = cfg = {**cfg, name: cfg[alias]}

    def need(self, name: str, kind=int):
        if name not in self.cfg or self.cfg[name] is None:
            self.missing.append(name)
            return kind(0) if kind in (int, float) else kind()
        value = self.cfg[name]
        if kind is int:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                    isinstance(value, float) and not (math.isfinite(value) and value.is_integer())):
                raise ConfigError(f"{self.path}: field {name!r} should be an integer, got {_short(value)}")
            if not 0 <= value <= MAX_COUNT:
                raise ConfigError(f"{self.path}: field {name!r} must lie in [0, {MAX_COUNT}], got {_short(value)}")
            return int(value)
        if kind is str and not isinstance(value, str):
            raise ConfigError(f"{self.path}: field {name!r} should be a string, got {_short(value)}")
        return kind(value)

    def get(self, name: str, default, kind=int):
        """The field, or where config.json leaves it out the default of HF's config class (`_HF_DEFAULTS`), else
        `default` (also for an explicit null)."""
        if name not in self.cfg:
            return _HF_DEFAULTS.get(self.family, {}).get(name, default)
        if self.cfg[name] is None:
            return default
        return self.need(name, kind)

    def mtp_layers(self) -> int:
        """The MTP block's layer count, under either of its names (`_MTP_FIELDS`; 1 where the config names neither):
        the family's other spelling was not read, so `num_nextn_predict_layers: 0` in a Qwen config was priced with
        one MTP layer. Both names with different values are two models."""
        given = {k: self.need(k) for k in _MTP_FIELDS if self.cfg.get(k) is not None}
        if len(set(given.values())) > 1:
            raise ConfigError(f"{self.path}: " + " and ".join(f"{k} ({v})" for k, v in given.items())
                              + " both count the MTP layers and differ; give one")
        return next(iter(given.values()), 1)

    def positive(self, name: str, default: int | None = None) -> int:
        """A head count or width the latency and memory models divide by or multiply with: an integer >= 1 (a
        missing field is reported with the others by `check`, or takes `default`)."""
        value = self.need(name) if default is None else self.get(name, default)
        if self.cfg.get(name) is not None and value < 1:
            raise ConfigError(f"{self.path}: field {name!r} must be a positive integer, got {value}")
        return value

    def divides(self, small: str, big: str, spec: dict, small_key: str, big_key: str) -> None:
        """`big` heads shared out in `small` groups: every group holds the same number (group size big / small)."""
        if spec[small_key] and spec[big_key] % spec[small_key]:
            raise ConfigError(f"{self.path}: {small} ({spec[small_key]}) must divide {big} ({spec[big_key]}): "
                              "each group holds the same number of heads")

    def check(self) -> None:
        if self.missing:
            raise ConfigError(
                f"{self.path}: a {self.family} config needs {', '.join(sorted(set(self.missing)))}, which it lacks")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _layer_count(f: _Fields, n: int, what: str = "num_hidden_layers") -> int:
    if n > MAX_LAYERS:
        raise ConfigError(f"{f.path}: {what} is {n}; wmtp models at most {MAX_LAYERS} layers")
    return n


def _head_dim(f: _Fields) -> int:
    """head_dim; where the config leaves it out, the family's HF default (`_HF_DEFAULTS`: Qwen3-Next / Qwen3.5 256,
    Nemotron-H 128), else hidden_size / num_attention_heads (as HF does); a width that does not divide has no such
    default (it was floored: GLM-4.5's 4096 / 96 read as 42, not its 128)."""
    heads = f.need("num_attention_heads")
    if f.cfg.get("head_dim") is not None:
        return f.need("head_dim")
    if "head_dim" not in f.cfg and "head_dim" in _HF_DEFAULTS.get(f.family, {}):  # HF's class default, not h / heads
        return _HF_DEFAULTS[f.family]["head_dim"]
    hidden = f.need("hidden_size")
    if heads and hidden % heads:
        raise ConfigError(f"{f.path}: no head_dim, and hidden_size ({hidden}) is not a multiple of "
                          f"num_attention_heads ({heads}): give head_dim")
    return hidden // heads if heads else 0


def _qwen_hybrid(f: _Fields, key: str, name: str) -> ModelSpec:
    n_layers = _layer_count(f, f.need("num_hidden_layers"))
    types = f.cfg.get("layer_types")
    if types is None:
        interval = f.need("full_attention_interval")
        if f.cfg.get("full_attention_interval") is not None and interval < 1:  # null: missing, said by check()
            raise ConfigError(f"{f.path}: full_attention_interval must be >= 1 (every k-th layer is full attention), "
                              f"got {interval}")
        types = ["full_attention" if (i + 1) % max(interval, 1) == 0 else "linear_attention" for i in range(n_layers)]
    if not isinstance(types, list) or len(types) != n_layers:
        raise ConfigError(f"{f.path}: layer_types must list num_hidden_layers entries")
    unknown = {_short(t) for t in types if t not in ("full_attention", "linear_attention")}
    if unknown:
        raise ConfigError(f"{f.path}: layer_types has unknown kinds {', '.join(sorted(unknown)[:5])}; "
                          "known: full_attention, linear_attention")
    n_full = sum(t == "full_attention" for t in types)
    mlp_only = f.cfg.get("mlp_only_layers")
    mlp_only = [] if mlp_only is None else mlp_only  # 0, false or {} was read as no layer, not refused
    if not isinstance(mlp_only, list) or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n_layers
                                             for i in mlp_only) or len(set(mlp_only)) != len(mlp_only):
        raise ConfigError(f"{f.path}: mlp_only_layers must list distinct layer indices in [0, num_hidden_layers)")
    n_experts = f.need("num_experts")
    # a layer is MoE unless listed in mlp_only_layers or off the decoder_sparse_step stride (HF Qwen3-Next: MoE
    # where (i + 1) % decoder_sparse_step == 0); the others run a dense MLP of intermediate_size
    step = f.positive("decoder_sparse_step", 1)
    dense_layers = set(mlp_only) | {i for i in range(n_layers) if (i + 1) % step}
    spec = dict(
        hidden=f.need("hidden_size"), vocab=f.need("vocab_size"), n_layers=n_layers,
        n_full_attn=n_full, n_linear=n_layers - n_full,
        n_moe=n_layers - len(dense_layers), n_dense_ffn=len(dense_layers),
        q_heads=f.need("num_attention_heads"), kv_heads=f.need("num_key_value_heads"), head_dim=_head_dim(f),
        attn_out_gate=True, linear_kind="gdn",
        lin_k_heads=f.positive("linear_num_key_heads"), lin_v_heads=f.positive("linear_num_value_heads"),
        lin_head_dim=_gdn_head_dim(f), conv_kernel=f.positive("linear_conv_kernel_dim", 4),
        n_experts=n_experts, top_k=f.need("num_experts_per_tok"), expert_ffn=f.need("moe_intermediate_size"),
        n_shared=1 if f.get("shared_expert_intermediate_size", 0) else 0,
        shared_ffn=f.get("shared_expert_intermediate_size", 0),
        dense_ffn=f.need("intermediate_size") if dense_layers else 0,
        n_mtp=f.mtp_layers(), tied_embeddings=_flag(f, "tie_word_embeddings"),
    )
    f.check()
    f.divides("linear_num_key_heads", "linear_num_value_heads", spec, "lin_k_heads", "lin_v_heads")
    return ModelSpec(key=key, name=name, family=f.family, **spec)


def _gdn_head_dim(f: _Fields) -> int:
    """Gated-DeltaNet's head dim. A model row holds one for keys and values (state [v_heads, d, d] fp32, conv channels
    (2 k_heads + v_heads) d); linear_key_head_dim was not read, so a config whose keys are narrower or wider than its
    values was priced with the value width, silently (0 or a string accepted). Two widths are refused, not priced."""
    value_dim = f.positive("linear_value_head_dim")
    key_dim = f.positive("linear_key_head_dim", value_dim)
    if value_dim and key_dim != value_dim:
        raise ConfigError(f"{f.path}: linear_key_head_dim ({key_dim}) differs from linear_value_head_dim ({value_dim}); "
                          "wmtp prices Gated-DeltaNet layers with one head width for keys and values")
    return value_dim


def _nemotron_h(f: _Fields, key: str, name: str) -> ModelSpec:
    pattern = f.need("hybrid_override_pattern", str)
    f.check()
    _layer_count(f, len(pattern), "hybrid_override_pattern's length")
    n_given = f.get("num_hidden_layers", len(pattern))
    if n_given != len(pattern):  # one block per character: a config that says otherwise is two models
        raise ConfigError(f"{f.path}: num_hidden_layers ({n_given}) differs from hybrid_override_pattern's length "
                          f"({len(pattern)}); the pattern has one character per layer")
    bad = set(pattern) - set("M*E-")
    if bad:
        raise ConfigError(f"{f.path}: hybrid_override_pattern has unknown block kinds {sorted(bad)}")
    _check_nemotron_layer_types(f, pattern)
    n_moe = pattern.count("E")
    _check_nemotron_moe(f, n_moe)
    spec = dict(
        hidden=f.need("hidden_size"), vocab=f.need("vocab_size"), n_layers=len(pattern),
        n_full_attn=pattern.count("*"), n_linear=pattern.count("M"), n_moe=n_moe, n_dense_ffn=pattern.count("-"),
        q_heads=f.need("num_attention_heads"), kv_heads=f.need("num_key_value_heads"), head_dim=_head_dim(f),
        linear_kind="mamba2", lin_v_heads=f.positive("mamba_num_heads"), lin_head_dim=f.positive("mamba_head_dim"),
        ssm_state=f.positive("ssm_state_size"), ssm_groups=f.positive("n_groups", 8),
        conv_kernel=f.positive("conv_kernel", 4),
        n_experts=f.need("n_routed_experts") if n_moe else 0, top_k=f.need("num_experts_per_tok") if n_moe else 0,
        expert_ffn=f.need("moe_intermediate_size") if n_moe else 0,
        n_shared=f.get("n_shared_experts", 1) if n_moe else 0,
        shared_ffn=f.get("moe_shared_expert_intermediate_size", 0),
        moe_latent=f.get("moe_latent_size", 0), dense_ffn=f.get("intermediate_size", 0),
        ffn_act="relu2", n_mtp=f.mtp_layers(), mtp_moe=n_moe > 0, tied_embeddings=_flag(f, "tie_word_embeddings"),
    )
    f.check()
    f.divides("n_groups", "mamba_num_heads", spec, "ssm_groups", "lin_v_heads")
    return ModelSpec(key=key, name=name, family=f.family, **spec)


def _check_nemotron_moe(f: _Fields, n_moe: int) -> None:
    """Nemotron-H's latent experts run in moe_latent_size, narrower than the hidden state (projected down and up
    around them): a latent as wide as hidden_size or wider was priced as given, experts wider than the model; and a
    shared expert counted by n_shared_experts has a width (moe_shared_expert_intermediate_size 0 priced none)."""
    latent, hidden = f.get("moe_latent_size", 0), f.get("hidden_size", 0)  # hidden_size missing: said by check()
    if n_moe and latent and hidden and latent >= hidden:
        raise ConfigError(f"{f.path}: moe_latent_size ({latent}) must be smaller than hidden_size ({hidden}): latent "
                          "experts run in a narrower width than the hidden state (0 or null: no latent projection)")
    shared, width = f.get("n_shared_experts", 1), f.get("moe_shared_expert_intermediate_size", 0)
    if n_moe and shared and not width:
        raise ConfigError(f"{f.path}: n_shared_experts is {shared} but moe_shared_expert_intermediate_size is "
                          f"{_short(f.cfg.get('moe_shared_expert_intermediate_size'))}: a shared expert has a width "
                          "(n_shared_experts 0: none)")


def _moe_first_dense(f: _Fields, key: str, name: str, mla: bool) -> ModelSpec:
    n_layers = _layer_count(f, f.need("num_hidden_layers"))
    first_dense = f.get("first_k_dense_replace", 0)
    if first_dense > n_layers:
        raise ConfigError(f"{f.path}: first_k_dense_replace ({first_dense}) exceeds num_hidden_layers ({n_layers})")
    freq = f.positive("moe_layer_freq", 1)  # HF DeepSeek: layer i is MoE when i >= first_k_dense_replace, i % freq == 0
    n_moe = sum(1 for i in range(first_dense, n_layers) if i % freq == 0)
    spec = dict(
        hidden=f.need("hidden_size"), vocab=f.need("vocab_size"), n_layers=n_layers,
        n_full_attn=n_layers, n_linear=0, n_moe=n_moe, n_dense_ffn=n_layers - n_moe,
        q_heads=f.need("num_attention_heads"),
        n_experts=f.need("n_routed_experts"), top_k=f.need("num_experts_per_tok"),
        expert_ffn=f.need("moe_intermediate_size"), n_shared=f.get("n_shared_experts", 0),
        dense_ffn=f.need("intermediate_size") if n_moe < n_layers else 0,
        n_mtp=f.mtp_layers(), tied_embeddings=_flag(f, "tie_word_embeddings"),
    )
    _check_layer_types(f, n_layers)
    spec["shared_ffn"] = spec["expert_ffn"] if spec["n_shared"] else 0
    if mla:
        rope = f.positive("qk_rope_head_dim")
        spec.update(attn_kind="mla", kv_heads=1, head_dim=f.positive("kv_lora_rank") + rope,
                    mla_q_rank=f.get("q_lora_rank", 0), mla_rope=rope,
                    mla_nope=f.positive("qk_nope_head_dim"), mla_v_dim=f.positive("v_head_dim"))
    else:
        spec.update(kv_heads=f.need("num_key_value_heads"), head_dim=_head_dim(f))
    f.check()
    return ModelSpec(key=key, name=name, family=f.family, **spec)


def _check_layer_types(f: _Fields, n_layers: int) -> None:
    """A family whose layers are all full attention may list them in layer_types (HF's newer configs do): one entry
    per layer. Another kind is refused before (`_refuse_unmodelled_attention`); a list of another length describes
    another model (a 3-entry list for 36 layers was read without a word)."""
    types = f.cfg.get("layer_types")
    if types is not None and len(types) != n_layers:
        raise ConfigError(f"{f.path}: layer_types lists {len(types)} layers, num_hidden_layers is {n_layers}: one "
                          "entry per layer")


# Nemotron-H's config class derives layer_types from hybrid_override_pattern (and config.json may carry them):
# M -> mamba, * -> attention, E -> moe, '-' (an MLP) -> mlp, or moe where the cache validator refuses 'mlp'
_NEMOTRON_KINDS = {"M": ("mamba",), "*": ("attention",), "E": ("moe",), "-": ("mlp", "moe")}


def _check_nemotron_layer_types(f: _Fields, pattern: str) -> None:
    """layer_types beside hybrid_override_pattern: the pattern's own blocks, per layer (a config saved by the newer
    config class holds them: it was refused as attention wmtp does not model), or an error saying where they
    differ (a sliding or other kind of layer the pattern does not name)."""
    types = f.cfg.get("layer_types")
    if types is None:
        return
    if len(types) != len(pattern):
        raise ConfigError(f"{f.path}: layer_types lists {len(types)} layers, hybrid_override_pattern {len(pattern)}: "
                          "one entry per layer")
    for i, (t, c) in enumerate(zip(types, pattern)):
        if t not in _NEMOTRON_KINDS[c]:
            raise ConfigError(f"{f.path}: layer_types[{i}] is {_short(t)} where hybrid_override_pattern's block {i} "
                              f"is {c!r} ({' or '.join(_NEMOTRON_KINDS[c])}): they describe different layers; wmtp "
                              "prices the pattern's blocks, every attention layer as full attention over the context")


def _flag(f: _Fields, name: str) -> bool:
    """A true / false field (absent or null: false); a string or a number is refused, not read by its truth
    ("false", a non-empty string, read as true: the lm_head's weights were dropped from the count)."""
    value = f.cfg.get(name)
    if value is not None and not isinstance(value, bool):
        raise ConfigError(f"{f.path}: field {name!r} must be true or false, got {_short(value)}")
    return bool(value)


def _dense(f: _Fields, key: str, name: str) -> ModelSpec:
    n_layers = _layer_count(f, f.need("num_hidden_layers"))
    spec = dict(
        hidden=f.need("hidden_size"), vocab=f.need("vocab_size"), n_layers=n_layers,
        n_full_attn=n_layers, n_linear=0, n_moe=0, n_dense_ffn=n_layers,
        q_heads=f.need("num_attention_heads"), kv_heads=f.get("num_key_value_heads", f.cfg.get("num_attention_heads", 0)),
        head_dim=_head_dim(f), dense_ffn=f.need("intermediate_size"),
        n_mtp=f.mtp_layers(), mtp_moe=False, tied_embeddings=_flag(f, "tie_word_embeddings"),
    )
    _check_layer_types(f, n_layers)
    f.check()
    return ModelSpec(key=key, name=name, family=f.family, **spec)


_HYBRID_KINDS = ("qwen3_next", "qwen3_5_moe")  # their layer_types (full / linear attention) are read by _qwen_hybrid
_NOT_MODELLED = "wmtp prices every attention layer as full attention over the whole context"
# families whose attention reads sliding_window whatever use_sliding_window says (HF / NVIDIA NemotronH passes
# sliding_window=config.sliding_window to every attention call); qwen2 / mimo slide only with use_sliding_window
_UNGATED_WINDOW = ("nemotron_h",)


def _refuse_unmodelled_attention(cfg: dict, family: str, path: str) -> None:
    """Attention a model row cannot hold (sliding-window or chunked layers, DeepSeek Sparse Attention): priced as
    full attention over the whole context, a long-context prediction would be silently wrong, so it is refused."""
    types = cfg.get("layer_types")
    if types is not None and not isinstance(types, list):  # a string was ignored: priced as full attention
        raise ConfigError(f"{path}: layer_types must list each layer's kind, got {_short(types)}")
    if family not in _HYBRID_KINDS + ("nemotron_h",) and isinstance(types, list):
        other = sorted({_short(t) for t in types if t != "full_attention"})
        if other:
            raise ConfigError(f"{path}: layer_types lists {', '.join(other[:3])} layers; {_NOT_MODELLED} "
                              "(no sliding-window or chunked attention)")
    use = cfg.get("use_sliding_window")
    if use is not None and not isinstance(use, bool):  # "true" (a string) was read as false: full attention, silently
        raise ConfigError(f"{path}: use_sliding_window must be true or false, got {_short(use)}")
    if family in _UNGATED_WINDOW and cfg.get("sliding_window") is not None:
        raise ConfigError(f"{path}: sliding_window is {_short(cfg['sliding_window'])}: {family}'s attention layers "
                          f"slide over that many keys (no use_sliding_window switch); {_NOT_MODELLED}")
    if use is True and cfg.get("sliding_window") is not None:
        raise ConfigError(f"{path}: use_sliding_window is true (sliding_window {_short(cfg['sliding_window'])}); "
                          f"{_NOT_MODELLED}: set it to false if no layer slides")
    if cfg.get("index_topk") is not None:
        raise ConfigError(f"{path}: index_topk ({_short(cfg['index_topk'])}) is DeepSeek Sparse Attention (each "
                          f"query reads its top-k keys); {_NOT_MODELLED}")


# ModelSpec's fields as config.json names them (the expert count: either name, as the family spells it)
_CONFIG_NAMES = {"hidden": ("hidden_size",), "vocab": ("vocab_size",), "n_layers": ("num_hidden_layers",),
                 "q_heads": ("num_attention_heads",), "kv_heads": ("num_key_value_heads",), "head_dim": ("head_dim",),
                 "n_experts": ("num_experts", "n_routed_experts"), "top_k": ("num_experts_per_tok",),
                 "expert_ffn": ("moe_intermediate_size",), "dense_ffn": ("intermediate_size",)}


def _config_names(message: str, f: _Fields) -> str:
    """` (config.json's names: q_heads = num_attention_heads 96, kv_heads = num_key_value_heads 7)` for the model
    row's fields `message` names that the config gives ('' where it names none)."""
    import re

    said = [f"{field} = {name} {_short(f.cfg[name])}" for field, names in _CONFIG_NAMES.items()
            if re.search(rf"\b{field}\b", message) for name in names if name in f.cfg]
    return f" (in {f.path}: {', '.join(said)})" if said else ""


def spec_from_config(cfg: dict, path: str = "config.json", key: str | None = None, read_quantization: bool = True,
                     quant_path: str | None = None, read_kv: bool = True) -> ModelSpec:
    """`read_quantization` False: the weight formats come from elsewhere (--weight-dtype); `read_kv` False: the KV
    dtype does (--kv-dtype), the KV scheme is not read (`wmtp.kv_quant`). `quant_path`: the file the
    quantization_config came from (hf_quant_config.json, its object `quantization`), where not config.json itself."""
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path}: top level must be a JSON object")
    family = cfg.get("model_type")
    text = cfg.get("text_config")
    if text is not None and not isinstance(text, dict):
        raise ConfigError(f"{path}: text_config must be an object (the language model's fields), got {_short(text)}")
    if isinstance(text, dict):  # multimodal wrappers (qwen3_5_moe) keep the LM under text_config
        merged = {**cfg, **text}
        for q in QUANT_KEYS:  # vLLM and SGLang read the top level's, text_config's only where it has none
            if cfg.get(q) is not None:
                merged[q] = cfg[q]
        family = family if family is not None else text.get("model_type")  # a wrapper that names it only there
        merged["model_type"] = family
        cfg = merged
    if family in ("qwen3_5_moe_text",):
        family = "qwen3_5_moe"
    if not isinstance(family, str) or family not in FAMILIES:
        raise ConfigError(
            f"{path}: model_type {_short(family)} is not supported; supported: {', '.join(FAMILIES)}")
    key = printable(key or Path(path).parent.name or family)  # a folder's or a config's text, shown on terminals:
    archs = cfg.get("architectures")  # its control characters (an ESC sequence, a newline) written as escapes
    name = printable(archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else family)
    _refuse_unmodelled_attention(cfg, family, path)
    f = _Fields(cfg, family, path)
    formats = weight_formats(cfg, quant_path or path) if read_quantization else {}  # wmtp.quant_config
    kv = kv_cache_format(cfg, quant_path or path, quant_path and "quantization") if read_kv else None
    try:
        if family in ("qwen3_next", "qwen3_5_moe"):
            spec = _qwen_hybrid(f, key, name)
        elif family == "nemotron_h":
            spec = _nemotron_h(f, key, name)
        elif family in ("deepseek_v3", "glm4_moe"):
            spec = _moe_first_dense(f, key, name, mla=family == "deepseek_v3")
        else:
            spec = _dense(f, key, name)
        if spec.n_mtp < 1:  # every family: the draft is priced as one MTP forward, its weights and KV as none
            field = next((k for k in _MTP_FIELDS if f.cfg.get(k) == 0), _MTP_FIELDS[0])
            raise ConfigError(f"{path}: {field} is 0: this model has no MTP head to draft with")
        if all(f.cfg.get(k) is None for k in _MTP_FIELDS):  # said out loud by every command (`ModelSpec.notes`)
            spec = replace(spec, notes=spec.notes + (
                f"{path} names no MTP layers ({' / '.join(_MTP_FIELDS)}): priced with one MTP layer of the "
                "target's layer shape, a draft head this checkpoint may not have",))
        spec = replace(spec, kv_dtype=kv[0], notes=spec.notes + (kv[1],)) if kv else spec
        return replace(spec, **formats) if formats else spec
    except ConfigError:
        raise
    except WmtpError as e:  # ModelSpec validation, which names its own fields: said with config.json's names too
        raise ConfigError(f"{path}: {e}{_config_names(str(e), f)}") from None


def load_config(path: str | Path, key: str | None = None, weight_dtype: str | None = None,
                kv_dtype: str | None = None) -> ModelSpec:
    """A `ModelSpec` from a config.json, a model folder, or a Hugging Face repo id (see module docstring). With
    `weight_dtype` (the user's --weight-dtype) the config's weight formats are not read, with `kv_dtype`
    (--kv-dtype) its KV-cache scheme: the user said how they are stored; with both, no quantization at all."""
    from wmtp.fileio import read_json

    from wmtp.hf_source import resolve_config_path, with_modelopt_sidecar

    p, default_key = resolve_config_path(path)
    cfg, quant_path = read_json(p, "config", ConfigError), None
    if weight_dtype is None or kv_dtype is None:  # both said by the user: no quantization file is read
        cfg, quant_path = with_modelopt_sidecar(cfg, p)
    return spec_from_config(cfg, str(p), key or default_key, read_quantization=weight_dtype is None,
                            quant_path=quant_path, read_kv=kv_dtype is None)
