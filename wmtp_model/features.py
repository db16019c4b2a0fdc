"""Features of a work item that the measured profile's fits use (pure Python, no numpy on the
predict path). Attention features follow the kernel's own tiling (`kernel_plan`): tile rows padded
to the MMA shape, extra passes over K/V when a KV group's rows span several tiles, and the fp32
split partials written and merged."""

from __future__ import annotations

from wmtp.kernel_plan import attention_features

FEATURES: dict[str, tuple[str, ...]] = {
    # One-token decode tiles are always 16 rows, so padded flops are 16x bytes: no separate term.
    "decode_attn": ("const", "bytes", "mid_bytes", "merge_iters", "batch"),
    "verify_attn": ("const", "bytes", "padded_flops", "extra_pass_bytes", "mid_bytes", "merge_iters", "batch"),
    # An engine's per-request index build walks each request's row serially: bytes per request set its time.
    "index_build": ("const", "bytes", "bytes_per_request"),
    "gemm": ("const", "bytes", "flops"),
    "moe": ("const", "bytes", "flops"),
    "lm_head": ("const", "bytes", "flops"),
    "linear_state": ("const", "bytes", "flops", "steps"),
}
# The draft extend has its own fit where it was timed on its own (a backend whose extend runs another kernel
# than its verify); otherwise it is priced by the verify fit (the same kernel).
FEATURES["extend_attn"] = FEATURES["verify_attn"]
ALIASES = {"extend_attn": "verify_attn"}


def fit_kind(kind: str) -> str:
    return ALIASES.get(kind, kind)


def group_name(work_name: str, feats: dict | None = None) -> str:
    """Component identity without its phase: 'verify.attn_proj' -> 'attn_proj'. Attention adds its
    tile shape ('attention@64x2'): each tiling regime of the kernel gets its own factor."""
    name = work_name.split(";")[0].split(".")[-1]
    name = "attention" if name == "extend_attention" else name
    if feats and "tiling" in feats:
        name += "@" + feats["tiling"]
    return name


def features(kind: str, bytes_: float, flops: float, batch: float, keys: float, q_len: float,
             kv_heads: int, group: int, head_dim: int, sm_count: int, backend: str = "wmtp",
             kv_fp8: bool | None = None) -> dict:
    """`kv_fp8`: whether the KV cache is fp8 (None: from the bytes per key, `attention_features`)."""
    f = {"const": 1.0, "bytes": bytes_, "flops": flops, "batch": batch, "steps": q_len,
         "bytes_per_request": bytes_ / max(batch, 1.0)}
    if fit_kind(kind) in ("decode_attn", "verify_attn"):
        kv_tok = bytes_ / max(batch * keys, 1.0)
        f.update(attention_features(int(batch), kv_heads, group, int(q_len), head_dim, int(keys), sm_count, kv_tok,
                                    backend, kv_fp8))
    return f


def work_features(work, spec, sm_count: int, backend: str = "wmtp") -> dict:
    shape = work.shape
    batch = float(shape.get("batch", 1) or 1)
    q_len = float(shape.get("d", 1) or 1)
    keys = float(shape.get("ctx", 0) or 0)
    # the KV dtype from the model, not from the bytes per key: a work item's bytes include its d new tokens' K/V
    # (fp8 at ctx <= 2d reads as bf16 per key), and an MLA cache holds one bf16 latent row (reads as fp8)
    return features(work.kind, work.bytes, work.flops, batch, keys, q_len, spec.kv_heads, spec.group_size,
                    spec.head_dim, sm_count, backend, spec.kv_dtype == "fp8")


def call_rows(work) -> float:
    """Rows (M) of one GEMM call of a weight-bound work item, which picks a quantized fit's M regime
    (`wmtp.profile.regime_index`): its tokens (B x d in verify, B in a draft forward), else batch x d; at least 1."""
    shape = work.shape
    rows = shape.get("tokens")
    if rows is None:
        rows = float(shape.get("batch", 1) or 1) * float(shape.get("d", 1) or 1)
    return max(float(rows), 1.0)
