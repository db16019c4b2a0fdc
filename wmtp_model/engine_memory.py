"""A serving engine's GPU memory, as SGLang accounts it (DESIGN.md section 3, engine part).

Every term and default comes from SGLang's public code (read at 0.5.8 / 0.5.12; paths, functions
and the arithmetic checked against the paper in calibrate/engines/sglang-facts.md, part B):

    M0        free memory after start-up (HBM - CUDA context)                              [bytes]
    mfs       mem_fraction_static (SGLang's default heuristic, or the value the run set)
    rest      = mfs * M0 - target weights (values, scales and the bf16 layers; wmtp.weights)  (model_runner, profile_max_num_token)
    rest     -= m * R * d      speculative only: intermediate recurrent states per draft token
                               (m = recurrent state per request, R = max_running_requests)  (handle_max_mamba_cache)
    rest     -= m * C          recurrent-state pool, C = R state slots (radix cache off)
    N_tok     = floor(rest / cell),  cell = target full-attention KV bytes per token       (the KV pool)
    B_max     = min(floor(N_tok / (S + min(max_new, 4096) * 0.7)), R, C)                   (PrefillAdder admission)
    slack     = (1 - mfs) * M0 must hold: the draft weights, the native draft KV pool (N_tok tokens, 1 layer;
                a windowed draft keeps a ring instead), the request table ((R + 1) rows of S + 4 + d int32), the
                state pool's spare slot (m, and m * d intermediate states with speculation), CUDA-graph index/mask buffers
                (max_bs * S * (10 d + 4 (d - 1)) bytes), fp32 verify logits (max_bs * d * vocab * 4),
                the TP communication buffers, and one chunked-prefill forward's transient activations
                (`prefill_activation_bytes`, with FlashInfer's workspace); if it cannot, the engine fails.

A method "fits" at (S, d) when B_max >= 1 and the slack check passes. Nothing here is fitted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from wmtp.errors import WmtpError
from wmtp.hardware import HardwareSpec
from wmtp.specs import ModelSpec
from wmtp.weights import model_weight_bytes

MiB = 1024**2
GiB = 1024**3
# CUDA context, cuBLAS/NCCL handles and torch's own reservations before SGLang measures free memory:
# about 1 GiB on a Hopper/Blackwell GPU with torch 2.x (assumed; SGLang measures it, we cannot).
CUDA_CONTEXT_BYTES = 1 * GiB
NEW_TOKEN_RATIO = 0.7  # SGLANG_INIT_NEW_TOKEN_RATIO: share of max_new_tokens a running request holds back
ADMIT_MAX_NEW_CAP = 4096  # a new request needs input_len + min(max_new_tokens, 4096) free tokens
MAMBA_FULL_MEMORY_RATIO = 0.9  # SGLang's mamba_full_memory_ratio (state pool : KV pool)
CUSTOM_ALLREDUCE_BYTES = 24 * MiB  # per rank, TP > 1 (custom_all_reduce.py: meta + data + rank_data)
FLASHINFER_WORKSPACE_BYTES = 384 * MiB  # SGLANG_FLASHINFER_WORKSPACE_SIZE (environ.py), one buffer all wrappers share
GDN_CHUNK = 64  # FLA's chunk_gated_delta_rule keeps one state [v_heads, dim, dim] per 64-token chunk (bf16)
MAMBA_CHUNK = 256  # Mamba2 SSD chunk (NemotronH's mamba_chunk_size default); chunk states in fp32 (ssd_chunk_state)
MAX_SETTING = 1 << 31  # SGLang's server arguments are 32-bit integers; larger is no engine's setting


@dataclass(frozen=True)
class EngineMemoryConfig:
    """How one engine run is configured (SGLang's server arguments that decide memory)."""

    engine: str = "sglang"
    mem_fraction_static: float | None = None  # None: SGLang's default for this GPU
    max_running_requests: int | None = None  # None: 48 with speculation (EAGLE/NEXTN), else SGLang's default
    chunked_prefill_size: int | None = None  # None: 8192 below 160 GiB of HBM, 16384 above
    cuda_graph_max_bs: int | None = None  # None: 256 below 160 GiB (TP < 4), 512 above
    max_new_tokens: int = 512  # the decode cap of the workload (the paper's: 512)
    radix_cache: bool = False  # the paper disables it; on, state slots are sized from memory
    # --mamba-full-memory-ratio (state pool : KV pool, used when the state slots are sized from memory): one value, or
    # one per model family ({"qwen3_5_moe": 0.1, "default": 0.9}); SGLang's default 0.9
    mamba_full_memory_ratio: float | dict = MAMBA_FULL_MEMORY_RATIO
    source: str = "SGLang defaults (sglang-facts.md, part B)"

    def state_memory_ratio(self, family: str) -> float:
        r = self.mamba_full_memory_ratio
        if isinstance(r, dict):
            return float(r.get(family, r.get("default", MAMBA_FULL_MEMORY_RATIO)))
        return float(r)

    def __post_init__(self) -> None:
        mfs = self.mem_fraction_static
        if mfs is not None and not (isinstance(mfs, (int, float)) and not isinstance(mfs, bool) and 0 < mfs < 1):
            raise WmtpError(f"mem_fraction_static must be in (0, 1), got {mfs!r}")
        for name in ("max_running_requests", "chunked_prefill_size", "cuda_graph_max_bs", "max_new_tokens"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_SETTING):
                raise WmtpError(f"{name} must be an integer in 1..{MAX_SETTING:,}, got {repr(v)[:40]}")
        if self.max_new_tokens is None:
            raise WmtpError("max_new_tokens must be an integer, got None")
        if self.engine != "sglang" or self.radix_cache is not False or not isinstance(self.source, str):
            raise WmtpError(f"engine memory models SGLang with its radix cache off (engine 'sglang', radix_cache "
                            f"false, source a string), got engine {repr(self.engine)[:40]}, radix_cache "
                            f"{repr(self.radix_cache)[:40]}")
        r = self.mamba_full_memory_ratio
        values = list(r.values()) if isinstance(r, dict) else [r]
        if (isinstance(r, dict) and not all(isinstance(k, str) for k in r)) or not values or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 100 for v in values):
            raise WmtpError(f"mamba_full_memory_ratio must be a number in [0, 100] or a map of model family to one, "
                            f"got {repr(r)[:80]}")


@dataclass(frozen=True)
class EngineMemory:
    """One method's accounting at (S, d) on one GPU of `tp` (bytes unless stated)."""

    method: str
    m0: float
    mem_fraction_static: float
    weights_target: float
    weights_draft: float
    spec_state_reserve: float  # m * R * d
    state_pool: float  # m * C
    kv_pool_tokens: int
    kv_cell_bytes: float
    max_running_requests: int
    max_batch: int
    slack: float  # (1 - mfs) * M0
    slack_needed: dict = field(default_factory=dict)  # what the slack must hold, by part
    fits: bool = True
    why_not: str = ""

    @property
    def slack_used(self) -> float:
        return sum(self.slack_needed.values())


def default_chunked_prefill(hw: HardwareSpec) -> int:
    return 16384 if hw.hbm_bytes >= 160 * GiB else 8192


def default_graph_bs(hw: HardwareSpec, tp: int) -> int:
    if hw.hbm_bytes >= 160 * GiB:
        return 512
    return 256 if tp < 4 else 512


def default_mem_fraction(hw: HardwareSpec, cfg: EngineMemoryConfig, tp: int, speculative: bool) -> float:
    """SGLang's `_handle_gpu_memory_settings`: (gpu_mem - reserved) / gpu_mem, reserved in MiB."""
    gpu_mib = hw.hbm_bytes / MiB
    cps = cfg.chunked_prefill_size or default_chunked_prefill(hw)
    gbs = cfg.cuda_graph_max_bs or default_graph_bs(hw, tp)
    reserved = 512 + 1.5 * max(cps, 2048) + 2 * gbs + 1024 * tp / 8
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10240)
    if speculative:
        reserved += 2048  # EAGLE / NEXTN
    return round((gpu_mib - reserved) / gpu_mib, 3)


def graph_buffer_bytes(max_bs: int, ctx: int, depth: int) -> float:
    """FlashInfer CUDA-graph index and mask buffers that scale with the context (sglang-facts.md B3):
    verify kv_indices + custom mask, draft decode kv_indices, draft extend (v1 graph runner)."""
    return float(max_bs) * ctx * (10 * depth + 4 * (depth - 1))


def prefill_activation_bytes(spec: ModelSpec, chunk: int) -> float:
    """Transient bytes of one chunked-prefill forward of `chunk` tokens (bf16 activations; `spec` is one GPU's slice),
    at its largest layer, plus FlashInfer's workspace: the residual stream, its normed copy and the layer's output
    (3 x chunk x hidden), and the largest mixer or FFN of the model:
      attention      q (doubled by an output gate), k, v and the output, chunk rows each;
      Gated-DeltaNet q, k (k-heads x dim), v and the output (v-heads x dim), and one state per 64-token chunk;
      Mamba2         x, z and the output (heads x dim), B and C (groups x state), and fp32 chunk states;
      routed experts chunk x top_k rows of the gate-up / down buffer (max(gate-up width, model width), shared as
                     SGLang's fused_marlin_moe shares intermediate_cache13) and of the activation (expert width);
      dense FFN      chunk rows of the gate-up output and of the activation."""
    b = 2
    parts = []
    if spec.n_full_attn:
        q = spec.q_heads * spec.head_dim * (2 if spec.attn_out_gate else 1)
        parts.append(chunk * (q + 2 * spec.kv_heads * spec.head_dim + spec.q_heads * spec.head_dim) * b)
    if spec.n_linear and spec.linear_kind == "gdn":
        dk, dv = spec.lin_k_heads * spec.lin_head_dim, spec.lin_v_heads * spec.lin_head_dim
        states = -(-chunk // GDN_CHUNK) * spec.lin_v_heads * spec.lin_head_dim ** 2 * b
        parts.append(chunk * (2 * dk + 2 * dv) * b + states)
    elif spec.n_linear and spec.linear_kind == "mamba2":
        inner = spec.lin_v_heads * spec.lin_head_dim
        states = -(-chunk // MAMBA_CHUNK) * inner * spec.ssm_state * 4
        parts.append(chunk * (3 * inner + 2 * spec.ssm_groups * spec.ssm_state) * b + states)
    gated = 2 if spec.ffn_act == "swiglu" else 1
    if spec.n_moe:
        width = spec.moe_latent or spec.hidden
        parts.append(chunk * spec.top_k * (max(gated * spec.expert_ffn, width) + spec.expert_ffn) * b)
    if spec.n_dense_ffn:
        parts.append(chunk * (gated + 1) * spec.dense_ffn * b)
    return 3.0 * chunk * spec.hidden * b + max(parts, default=0) + FLASHINFER_WORKSPACE_BYTES


def engine_memory(spec: ModelSpec, hw: HardwareSpec, method: str, ctx: int, depth: int, cfg: EngineMemoryConfig,
                  tp: int = 1, ring_slots: int = 0) -> EngineMemory:
    """SGLang's accounting of `method` at context `ctx` and depth `depth` on one of `tp` GPUs (`spec` is
    the per-GPU slice; weights are per GPU)."""
    speculative = method != "dense"
    d = depth if speculative else 1
    m0 = hw.hbm_bytes - CUDA_CONTEXT_BYTES
    mfs = cfg.mem_fraction_static or default_mem_fraction(hw, cfg, tp, speculative)
    w_target = model_weight_bytes(spec, with_mtp=False)  # `spec` is already the per-GPU slice
    w_draft = model_weight_bytes(spec, with_mtp=True) - w_target if speculative else 0.0
    m = spec.n_linear * spec.state_bytes_per_layer
    rest = mfs * m0 - w_target
    if cfg.max_running_requests is not None or speculative:
        r = cfg.max_running_requests or 48  # SGLang's default with EAGLE / NEXTN speculation
        c = r if m > 0 else 0  # radix cache off: one state slot per running request
    else:  # no cap given: state slots take q / (1 + q) of the rest (q = mamba_full_memory_ratio, SGLang's 0.9)
        q = cfg.state_memory_ratio(spec.family)
        c = max(0, math.floor(rest * q / (1 + q) / m)) if m > 0 else 0
        r = c if m > 0 else 4096
    spec_reserve = m * r * d if speculative and m > 0 else 0.0
    state_pool = m * c
    rest -= spec_reserve + state_pool
    cell = spec.n_full_attn * spec.kv_bytes_per_token_layer
    n_tok = max(0, math.floor(rest / cell)) if cell > 0 else 0
    need = ctx + min(cfg.max_new_tokens, ADMIT_MAX_NEW_CAP) * NEW_TOKEN_RATIO
    by_tokens = math.floor(n_tok / need) if cell > 0 else r
    max_b = max(0, min(by_tokens, r, c if m > 0 else r))
    max_bs = min(cfg.cuda_graph_max_bs or default_graph_bs(hw, tp), r)
    draft_kv = 0.0
    if method == "native":
        draft_kv = n_tok * spec.n_mtp * spec.kv_bytes_per_token_layer
    elif method == "window" and ring_slots == 0:  # the window covers the context: the native draft's pool
        draft_kv = n_tok * spec.n_mtp * spec.kv_bytes_per_token_layer
    elif method == "window":
        draft_kv = max_b * ring_slots * spec.n_mtp * spec.kv_bytes_per_token_layer
    slack_needed = {"draft weights": w_draft, "draft KV": draft_kv,
                    # SGLang allocates one spare request row and one spare state slot (and its d intermediate states)
                    # beyond what it reserved inside mem_fraction_static (ReqToTokenPool, MambaPool: size + 1)
                    "request table (req_to_token)": float(r + 1) * (ctx + 4 + d) * 4,
                    "spare state slot": float(m) * (1 + (d if speculative else 0)) if m > 0 else 0.0,
                    "CUDA-graph index/mask buffers": graph_buffer_bytes(max_bs, ctx, d) if speculative else 0.0,
                    "verify logits (fp32)": float(max_bs) * d * spec.vocab * 4 if speculative else 0.0,
                    "TP buffers": CUSTOM_ALLREDUCE_BYTES if tp > 1 else 0.0,
                    "prefill activations": prefill_activation_bytes(
                        spec, cfg.chunked_prefill_size or default_chunked_prefill(hw))}
    slack = (1 - mfs) * m0
    why = ""
    if rest <= 0:
        why = "the weights and recurrent-state reservations exceed mem_fraction_static"
    elif max_b < 1:
        why = f"the KV pool ({n_tok:,} tokens) cannot seat one request of {ctx:,} tokens"
    elif sum(slack_needed.values()) > slack:
        why = ("the draft weights, draft KV, CUDA-graph buffers and prefill activations exceed the memory outside "
               "mem_fraction_static")
    return EngineMemory(method, m0, mfs, w_target, w_draft, spec_reserve, state_pool, n_tok, cell, r,
                        max_b if not why else 0, slack, slack_needed, not why, why)


def largest_mem_fraction(spec: ModelSpec, hw: HardwareSpec, method: str, ctx: int, depth: int, cfg: EngineMemoryConfig,
                         tp: int = 1, ring_slots: int = 0) -> EngineMemory | None:
    """The accounting at the largest mem_fraction_static (to 0.001) at which `method` still fits: more of the GPU for
    the KV pool until the slack can no longer hold what lives outside it (for a native draft its KV pool, which grows
    with the target's). A practitioner raises it per method this way (the Windowed-MTP paper ran its batch sweeps at
    0.87-0.98, the window arm at the high end); this is the capacity's upper bound, with no margin for fragmentation.
    None when the method fits at no setting."""
    for k in range(999, 99, -1):
        e = engine_memory(spec, hw, method, ctx, depth, replace(cfg, mem_fraction_static=k / 1000), tp, ring_slots)
        if e.fits:
            return e
    return None


def config_from_preset(doc: dict | None) -> EngineMemoryConfig | None:
    """The `memory` section of an engine preset, validated (None when the preset has none)."""
    if not doc:
        return None
    known = set(EngineMemoryConfig.__dataclass_fields__)
    bad = set(doc) - known
    if bad:
        raise WmtpError(f"engine memory: unknown settings {', '.join(sorted(bad))}")
    try:
        return EngineMemoryConfig(**doc)
    except WmtpError as e:
        raise WmtpError(f"engine preset memory section: {e}") from None
