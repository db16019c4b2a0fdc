"""The model registry: one frozen `ModelSpec` row per supported model.

Facts from `shared/reference/architectures.md` (gathered from the published configs). Weight dtype
is the checkpoint a long-context deployment would run on one GPU: the paper's NVFP4 checkpoints for
q35 / q122 / nem, the official FP8 release where one exists, else bf16. `--weight-dtype` overrides.

How the paper's NVFP4 checkpoints store their layers (`dense_weight_dtype`, `mtp_bf16`; `wmtp.weights`):
- nvidia's ModelOpt releases (q122: nvidia/Qwen3.5-122B-A10B-NVFP4; nem: nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-
  NVFP4) are `quant_algo: MIXED_PRECISION`: routed experts NVFP4 (group 16), the other linear layers FP8
  (attention q/k/v/o, linear-attention and Mamba `mixer.in_proj` / `out_proj`, Nemotron's shared experts), as
  their `hf_quant_config.json` `quantized_layers` list them (seen as mirrored by third-party loaders' tests of
  these configs: aiconfigurator's ModelOpt MIXED_PRECISION cases, a C++ loader's copy of nvidia/Qwen3.6-35B-A3B-
  NVFP4's config); the model cards tag the NVFP4 repos "8-bit precision" for that reason. The Qwen recipe lists
  `exclude_modules: ["mtp*"]`: the MTP block stays bf16 (q122). Not re-read from q122's own file: its recipe is
  taken to be that of nvidia's Qwen3.6 NVFP4 release. The Qwen recipe keeps the shared expert NVFP4; this row
  prices it with the FP8 layers (0.45 B parameters, about 0.2 GB more).
- RedHatAI/Qwen3.6-35B-A3B-NVFP4 (q35, llm-compressor) is taken as uniform NVFP4 with its MTP block quantized
  like the target: its layout was not read.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Iterable, Mapping

from wmtp.errors import UnknownSpecError, WmtpError
from wmtp.specs import ModelSpec

_ARCH = "shared/reference/architectures.md"


def build_registry(rows: Iterable, what: str) -> Mapping:
    """Index rows by `.key` in an immutable mapping; a duplicate key is an error."""
    table: dict = {}
    for row in rows:
        if row.key in table:
            raise WmtpError(f"duplicate {what} key {row.key!r}")
        table[row.key] = row
    return MappingProxyType(table)


def lookup(table: Mapping, key: str, what: str):
    try:
        return table[key.strip().lower()]
    except KeyError:
        shown = repr(key) if len(key) <= 60 else repr(key[:60]) + f" (+{len(key) - 60:,} characters)"
        raise UnknownSpecError(f"unknown {what} {shown}; known: {', '.join(table)}") from None


MODELS: Mapping[str, ModelSpec] = build_registry(
    [
        ModelSpec(
            key="q35", name="Qwen3.6-35B-A3B", family="qwen3_5_moe",
            hidden=2048, vocab=248320, n_layers=40, n_full_attn=10, n_linear=30, n_moe=40, n_dense_ffn=0,
            q_heads=16, kv_heads=2, head_dim=256, attn_out_gate=True,
            linear_kind="gdn", lin_k_heads=16, lin_v_heads=32, lin_head_dim=128, conv_kernel=4,
            n_experts=256, top_k=8, expert_ffn=512, n_shared=1, shared_ffn=512,
            weight_dtype="nvfp4", source=f"{_ARCH}; paper checkpoint NVFP4",
        ),
        ModelSpec(
            key="q122", name="Qwen3.5-122B-A10B", family="qwen3_5_moe",
            hidden=3072, vocab=248320, n_layers=48, n_full_attn=12, n_linear=36, n_moe=48, n_dense_ffn=0,
            q_heads=32, kv_heads=2, head_dim=256, attn_out_gate=True,
            linear_kind="gdn", lin_k_heads=16, lin_v_heads=64, lin_head_dim=128, conv_kernel=4,
            n_experts=256, top_k=8, expert_ffn=1024, n_shared=1, shared_ffn=1024,
            weight_dtype="nvfp4", dense_weight_dtype="fp8", mtp_bf16=True,
            source=f"{_ARCH}; paper checkpoint NVFP4 (ModelOpt mixed: experts NVFP4, other layers FP8, MTP bf16)",
        ),
        ModelSpec(
            key="nem", name="Nemotron-3-Super-120B-A12B", family="nemotron_h",
            hidden=4096, vocab=131072, n_layers=88, n_full_attn=8, n_linear=40, n_moe=40, n_dense_ffn=0,
            q_heads=32, kv_heads=2, head_dim=128,
            linear_kind="mamba2", lin_v_heads=128, lin_head_dim=64, ssm_state=128, ssm_groups=8, conv_kernel=4,
            n_experts=512, top_k=22, expert_ffn=2688, moe_latent=1024, n_shared=1, shared_ffn=5376,
            ffn_act="relu2", weight_dtype="nvfp4", dense_weight_dtype="fp8",
            source=f"{_ARCH}; paper checkpoint NVFP4 (ModelOpt mixed: experts NVFP4, other layers FP8)",
        ),
        ModelSpec(
            key="qnext", name="Qwen3-Next-80B-A3B", family="qwen3_next",
            hidden=2048, vocab=151936, n_layers=48, n_full_attn=12, n_linear=36, n_moe=48, n_dense_ffn=0,
            q_heads=16, kv_heads=2, head_dim=256, attn_out_gate=True,
            linear_kind="gdn", lin_k_heads=16, lin_v_heads=32, lin_head_dim=128, conv_kernel=4,
            n_experts=512, top_k=10, expert_ffn=512, n_shared=1, shared_ffn=512,
            weight_dtype="fp8", source=f"{_ARCH}; official FP8 release",
        ),
        ModelSpec(
            key="dsv3", name="DeepSeek-V3", family="deepseek_v3",
            hidden=7168, vocab=129280, n_layers=61, n_full_attn=61, n_linear=0, n_moe=58, n_dense_ffn=3,
            q_heads=128, kv_heads=1, head_dim=576, attn_kind="mla",
            mla_q_rank=1536, mla_rope=64, mla_nope=128, mla_v_dim=128,
            n_experts=256, top_k=8, expert_ffn=2048, n_shared=1, shared_ffn=2048, dense_ffn=18432,
            weight_dtype="fp8", source=f"{_ARCH}; native FP8 release",
        ),
        ModelSpec(
            key="glm45", name="GLM-4.5", family="glm4_moe",
            hidden=5120, vocab=151552, n_layers=92, n_full_attn=92, n_linear=0, n_moe=89, n_dense_ffn=3,
            q_heads=96, kv_heads=8, head_dim=128,
            n_experts=160, top_k=8, expert_ffn=1536, n_shared=1, shared_ffn=1536, dense_ffn=12288,
            weight_dtype="bf16", source=_ARCH,
        ),
        ModelSpec(
            key="mimo7b", name="MiMo-7B", family="mimo",
            hidden=4096, vocab=151680, n_layers=36, n_full_attn=36, n_linear=0, n_moe=0, n_dense_ffn=36,
            q_heads=32, kv_heads=8, head_dim=128, dense_ffn=11008, mtp_moe=False,
            weight_dtype="bf16", source=_ARCH,
        ),
    ],
    "model",
)


def get_model(key: str) -> ModelSpec:
    """The registry row for `key`; else, when `key` is a local model folder (or config.json) or a
    Hugging Face repo id (`org/name`), the row read from its config.json (`wmtp.hf_config`);
    else `UnknownSpecError` listing the known keys."""
    from pathlib import Path

    if not isinstance(key, str) or not key.strip():
        raise UnknownSpecError(f"empty model key; known: {', '.join(MODELS)}")
    if key.strip().lower() in MODELS:
        return MODELS[key.strip().lower()]
    from wmtp.fileio import check_lookup
    from wmtp.hf_source import looks_like_repo_id

    if "/" in key:
        check_lookup(key, "model folder or config", UnknownSpecError)
    if "/" in key and (Path(key).exists() or looks_like_repo_id(key)):
        return config_model(key)
    try:
        return lookup(MODELS, key, "model")
    except UnknownSpecError as e:
        raise UnknownSpecError(f"{e}; or a Hugging Face repo id (org/name) or a local model folder") from None


def config_model(source, weight_dtype: str | None = None, kv_dtype: str | None = None) -> ModelSpec:
    """The row of a config.json, model folder or repo id (`wmtp.hf_config.load_config`), keyed by its folder's or
    repo's name unless that names a registry row: a MiMo config in a folder named q35 was keyed q35 and priced with
    q35's measured acceptance, fitted per-model factors and engine terms, silently. It is keyed q35-config, and
    says so."""
    from dataclasses import replace

    from wmtp.hf_config import load_config

    spec = load_config(source, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    if spec.key.casefold() not in {k.casefold() for k in MODELS}:
        return spec
    own = f"{spec.key}-config"
    note = (f"{source} is keyed {own!r}, not {spec.key!r}: the registry row {spec.key!r} (its measured acceptance, "
            "fitted factors and engine terms) is another model; use --model KEY for that row")
    return replace(spec, key=own, notes=spec.notes + (note,))
