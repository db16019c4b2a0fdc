"""Model rows: the architecture facts the latency and memory models need.

A `ModelSpec` is a frozen, validated row. Shapes follow `shared/reference/architectures.md` and
the models' Hugging Face configs. Byte and parameter counts are derived properties, so there is
one place where "how big is a layer" is answered.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from wmtp.errors import WmtpError

# Bounds that keep every count physical and every derived byte count finite: no real model comes
# near them, and a config that does (num_hidden_layers: 1e9) is an error, not a minute of arithmetic.
MAX_LAYERS = 10_000
MAX_COUNT = 1 << 31  # any other width, head count or expert count

# Bytes per stored element, per dtype name (KV cache). Weights: `wmtp.weights.bytes_per_param`, scales included.
DTYPE_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "nvfp4": 0.5 + 1.0 / 16}
WEIGHT_DTYPES = ("bf16", "fp8", "int4", "nvfp4")
KV_DTYPES = ("bf16", "fp8")
LINEAR_KINDS = (None, "gdn", "mamba2")
ATTN_KINDS = ("gqa", "mla")
FFN_ACTS = ("swiglu", "relu2")


def dtype_bytes(name: str) -> float:
    try:
        return DTYPE_BYTES[name]
    except KeyError:
        raise WmtpError(f"unknown dtype {name!r}; known: {', '.join(DTYPE_BYTES)}") from None


@dataclass(frozen=True)
class ModelSpec:
    """One model. Counts are per model; "layer" means one decoder block of the target.

    Attention (`attn_kind='gqa'`): `q_heads`, `kv_heads`, `head_dim`. MLA: `kv_heads=1` and
    `head_dim` = cached elements per token (kv_lora_rank + rope dim), `mla_q_rank`/`mla_v_dim` for
    the projections (`mla_rope`, `mla_nope` per-head dims). Linear attention: `linear_kind` gdn (Gated-DeltaNet: `lin_k_heads`,
    `lin_v_heads`, `lin_head_dim`, state [v_heads, dim, dim] fp32) or mamba2 (`lin_v_heads` heads
    x `lin_head_dim`, `ssm_state` per head, `ssm_groups`). MoE: `n_experts`, `top_k`,
    `expert_ffn`, `n_shared`, `shared_ffn`, optional `moe_latent` (experts run in a smaller width).
    """

    key: str
    name: str
    family: str  # Hugging Face model_type
    hidden: int
    vocab: int
    n_layers: int  # decoder blocks counted as in the config
    n_full_attn: int  # F: softmax attention layers (with KV cache)
    n_linear: int  # linear-attention / SSM layers (recurrent state, no KV)
    n_moe: int  # layers whose FFN is MoE
    n_dense_ffn: int  # layers whose FFN is dense
    q_heads: int
    kv_heads: int
    head_dim: int
    attn_kind: str = "gqa"
    mla_q_rank: int = 0
    mla_rope: int = 0
    mla_nope: int = 0
    mla_v_dim: int = 0
    linear_kind: str | None = None
    lin_k_heads: int = 0
    lin_v_heads: int = 0
    lin_head_dim: int = 0
    ssm_state: int = 0
    ssm_groups: int = 0
    conv_kernel: int = 4
    n_experts: int = 0
    top_k: int = 0
    expert_ffn: int = 0
    n_shared: int = 0
    shared_ffn: int = 0
    moe_latent: int = 0
    dense_ffn: int = 0
    ffn_act: str = "swiglu"
    attn_out_gate: bool = False  # Qwen3-Next/3.5 gated attention: q projection doubled
    n_mtp: int = 1
    mtp_moe: bool = True  # the MTP block's FFN is MoE (else dense)
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    tied_embeddings: bool = False
    mtp_bf16: bool = False  # the checkpoint keeps its MTP block in bf16 (`wmtp.weights`)
    # Mixed-precision checkpoints (ModelOpt MIXED_PRECISION): the routed experts in `weight_dtype`, every other
    # linear layer (attention, linear-attention / Mamba projections, shared experts, latent projections, dense FFNs)
    # in this format; None: all linear layers in `weight_dtype` (`wmtp.weights`).
    dense_weight_dtype: str | None = None
    int4_group: int = 128  # int4 scale group along K (GPTQ / AWQ group_size); 0: one scale per output row (-1)
    # int4 zero points (`wmtp.weights`, `wmtp.quant_config`): the checkpoint stores a 4-bit zero point per scale
    # (GPTQ and AWQ qzeros always; compressed-tensors when asymmetric), and the W4A16 kernel reads them (asymmetric
    # weights: GPTQ sym false, AWQ zero_point, compressed-tensors symmetric false). --weight-dtype int4: neither.
    int4_zeros: bool = False
    int4_asym: bool = False
    source: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        problems = []
        for fd in fields(self):
            v = getattr(self, fd.name)
            if fd.type == "int" and (isinstance(v, bool) or not isinstance(v, int)):
                raise WmtpError(f"model {self.key!r}: {fd.name} must be an integer, got {v!r}")
            if fd.type == "int" and not -MAX_COUNT <= v <= MAX_COUNT:
                problems.append(f"{fd.name} is out of range ({v})")
        for f in ("n_layers", "n_full_attn", "n_linear", "n_moe", "n_dense_ffn", "n_mtp"):
            if getattr(self, f) > MAX_LAYERS:
                problems.append(f"{f} must be at most {MAX_LAYERS}")
        for f in ("hidden", "vocab", "n_layers", "q_heads", "kv_heads", "head_dim"):
            if getattr(self, f) <= 0:
                problems.append(f"{f} must be positive")
        for f in ("n_full_attn", "n_linear", "n_moe", "n_dense_ffn", "n_mtp"):
            if getattr(self, f) < 0:
                problems.append(f"{f} must be >= 0")
        if self.n_full_attn < 1:
            problems.append("needs at least one full-attention layer (F >= 1)")
        if self.attn_kind not in ATTN_KINDS:
            problems.append(f"attn_kind must be one of {ATTN_KINDS}")
        if self.linear_kind not in LINEAR_KINDS:
            problems.append(f"linear_kind must be one of {LINEAR_KINDS}")
        if self.n_linear and not self.linear_kind:
            problems.append("n_linear > 0 needs a linear_kind")
        if self.linear_kind and (self.lin_v_heads <= 0 or self.lin_head_dim <= 0):
            problems.append("linear attention needs lin_v_heads and lin_head_dim")
        if self.linear_kind == "mamba2" and self.ssm_state <= 0:
            problems.append("mamba2 needs ssm_state")
        if self.linear_kind and self.conv_kernel < 1:
            problems.append("linear attention needs conv_kernel >= 1")
        if self.linear_kind == "gdn" and (self.lin_k_heads <= 0 or self.lin_v_heads % self.lin_k_heads):
            problems.append("gdn needs lin_k_heads > 0 dividing lin_v_heads")
        if self.linear_kind == "mamba2" and (self.ssm_groups <= 0 or self.lin_v_heads % self.ssm_groups):
            problems.append("mamba2 needs ssm_groups > 0 dividing lin_v_heads")
        if self.attn_kind == "mla" and (min(self.mla_rope, self.mla_nope, self.mla_v_dim) <= 0
                                        or self.head_dim <= self.mla_rope or self.mla_q_rank < 0):
            problems.append("mla needs mla_rope, mla_nope, mla_v_dim > 0, mla_q_rank >= 0 and head_dim > mla_rope "
                            "(a latent of kv_lora_rank > 0)")
        if self.attn_kind == "gqa" and self.kv_heads > 0 and self.q_heads % self.kv_heads:
            problems.append("q_heads must be a multiple of kv_heads")
        if self.n_moe and (self.n_experts <= 0 or not 0 < self.top_k <= self.n_experts or self.expert_ffn <= 0):
            problems.append("MoE layers need n_experts, 0 < top_k <= n_experts, expert_ffn")
        if min(self.n_shared, self.shared_ffn, self.moe_latent) < 0:
            problems.append("n_shared, shared_ffn and moe_latent must be >= 0")
        elif self.moe_latent >= self.hidden > 0:
            problems.append("moe_latent must be smaller than hidden (latent experts run narrower; 0: none)")
        if self.n_dense_ffn and self.dense_ffn <= 0:
            problems.append("dense FFN layers need dense_ffn")
        if self.ffn_act not in FFN_ACTS:
            problems.append(f"ffn_act must be one of {FFN_ACTS}")
        if self.weight_dtype not in WEIGHT_DTYPES:
            problems.append(f"weight_dtype must be one of {WEIGHT_DTYPES}")
        if self.dense_weight_dtype is not None and self.dense_weight_dtype not in WEIGHT_DTYPES:
            problems.append(f"dense_weight_dtype must be one of {WEIGHT_DTYPES} (or unset)")
        if self.int4_group < 0:
            problems.append("int4_group must be >= 0 (0: one scale per output row)")
        if not isinstance(self.int4_zeros, bool) or not isinstance(self.int4_asym, bool):
            problems.append("int4_zeros and int4_asym must be true or false")
        elif self.int4_asym and not self.int4_zeros:
            problems.append("int4_asym needs int4_zeros: a kernel reads only zero points the checkpoint stores")
        if self.kv_dtype not in KV_DTYPES:
            problems.append(f"kv_dtype must be one of {KV_DTYPES}")
        if self.mtp_moe and self.n_mtp and self.n_experts <= 0:
            problems.append("an MoE MTP head needs n_experts")
        if problems:
            raise WmtpError(f"model {self.key!r}: " + "; ".join(problems))

    # ---- KV cache -------------------------------------------------------------------------------
    @property
    def kv_elems_per_token_layer(self) -> int:
        """Cached elements per token per attention layer (K and V; MLA: one latent row)."""
        if self.attn_kind == "mla":
            return self.kv_heads * self.head_dim
        return 2 * self.kv_heads * self.head_dim

    @property
    def kv_bytes_per_token_layer(self) -> float:
        return self.kv_elems_per_token_layer * dtype_bytes(self.kv_dtype)

    @property
    def group_size(self) -> int:
        return self.q_heads // self.kv_heads if self.attn_kind == "gqa" else self.q_heads

    # ---- recurrent state ------------------------------------------------------------------------
    @property
    def state_bytes_per_layer(self) -> float:
        """fp32 recurrent state of one linear-attention layer for one request (+ bf16 conv state)."""
        if self.linear_kind == "gdn":
            ssm = self.lin_v_heads * self.lin_head_dim * self.lin_head_dim * 4
            conv_ch = (2 * self.lin_k_heads + self.lin_v_heads) * self.lin_head_dim
        elif self.linear_kind == "mamba2":
            ssm = self.lin_v_heads * self.lin_head_dim * self.ssm_state * 4
            conv_ch = self.lin_v_heads * self.lin_head_dim + 2 * self.ssm_groups * self.ssm_state
        else:
            return 0.0
        return ssm + conv_ch * (self.conv_kernel - 1) * 2

    @property
    def ssm_state_bytes_per_layer(self) -> float:
        """The fp32 recurrent matrix alone (what a decode step reads and writes)."""
        if self.linear_kind == "gdn":
            return self.lin_v_heads * self.lin_head_dim * self.lin_head_dim * 4
        if self.linear_kind == "mamba2":
            return self.lin_v_heads * self.lin_head_dim * self.ssm_state * 4
        return 0.0

    # ---- parameters (element counts) ------------------------------------------------------------
    @property
    def attn_params(self) -> int:
        """Projections of one softmax-attention layer."""
        h, d = self.hidden, self.head_dim
        if self.attn_kind == "mla":
            kv_rank = d - self.mla_rope  # cached row = latent + shared rope key
            qk_head = self.mla_nope + self.mla_rope
            q = (h * self.mla_q_rank + self.mla_q_rank * self.q_heads * qk_head) if self.mla_q_rank else h * self.q_heads * qk_head
            kv = h * d + kv_rank * self.q_heads * (self.mla_nope + self.mla_v_dim)
            return q + kv + self.q_heads * self.mla_v_dim * h
        q_out = self.q_heads * d * (2 if self.attn_out_gate else 1)
        return h * q_out + 2 * h * self.kv_heads * d + self.q_heads * d * h

    @property
    def linear_params(self) -> int:
        """Projections of one linear-attention / SSM layer."""
        h, dim = self.hidden, self.lin_head_dim
        if self.linear_kind == "gdn":
            qk = 2 * self.lin_k_heads * dim
            v = self.lin_v_heads * dim
            # in-proj: q, k, v, z (output gate) + beta, alpha per v-head; out-proj v -> hidden
            return h * (qk + 2 * v + 2 * self.lin_v_heads) + v * h
        if self.linear_kind == "mamba2":
            inner = self.lin_v_heads * dim
            in_proj = h * (2 * inner + 2 * self.ssm_groups * self.ssm_state + self.lin_v_heads)
            return in_proj + inner * h
        return 0

    @property
    def _ffn_mats(self) -> int:
        return 3 if self.ffn_act == "swiglu" else 2

    @property
    def expert_params(self) -> int:
        width = self.moe_latent or self.hidden
        return self._ffn_mats * width * self.expert_ffn

    @property
    def moe_dense_params(self) -> int:
        """Parameters of one MoE layer that every token touches: router, shared expert(s), latent projections."""
        router = self.hidden * self.n_experts
        shared = self.n_shared * self._ffn_mats * self.hidden * self.shared_ffn
        latent = 2 * self.hidden * self.moe_latent if self.moe_latent else 0
        return router + shared + latent

    @property
    def dense_ffn_params(self) -> int:
        return self._ffn_mats * self.hidden * self.dense_ffn

    @property
    def lm_head_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def mtp_params(self) -> int:
        """One MTP/NEXTN block: eh projection (2h -> h), one attention layer, its FFN."""
        ffn = self.moe_dense_params + self.n_experts * self.expert_params if self.mtp_moe else self.dense_ffn_params
        return self.n_mtp * (2 * self.hidden * self.hidden + self.attn_params + ffn)

    @property
    def target_params(self) -> int:
        embed = self.vocab * self.hidden
        head = 0 if self.tied_embeddings else self.lm_head_params
        return (
            embed
            + head
            + self.n_full_attn * self.attn_params
            + self.n_linear * self.linear_params
            + self.n_moe * (self.moe_dense_params + self.n_experts * self.expert_params)
            + self.n_dense_ffn * self.dense_ffn_params
        )

    @property
    def total_params(self) -> int:
        return self.target_params + self.mtp_params

    def weight_format(self, part: str) -> str:
        """The storage format of one kind of weight: `experts` (routed experts), `dense` (every other linear layer of
        the target), `mtp_experts` / `mtp_dense` (the MTP block's), `lm_head`. Quantized checkpoints keep the lm_head
        in bf16 (`wmtp.weights.BF16_PARTS`)."""
        quantized = self.weight_dtype not in ("bf16", "fp16")
        if part == "lm_head":
            return "bf16" if quantized else self.weight_dtype
        if part.startswith("mtp_") and self.mtp_bf16:
            return "bf16"
        if part.endswith("experts"):
            return self.weight_dtype
        if part.endswith("dense"):
            return self.dense_weight_dtype or self.weight_dtype
        raise WmtpError(f"unknown weight part {part!r}")

    def with_dtypes(self, *, weight_dtype: str | None = None, kv_dtype: str | None = None) -> "ModelSpec":
        """The row with another weight or KV dtype. Another weight dtype means a checkpoint stored uniformly in it
        (a mixed-precision row's `dense_weight_dtype` is dropped)."""
        from dataclasses import replace

        new_w = weight_dtype or self.weight_dtype
        return replace(
            self,
            weight_dtype=new_w,
            dense_weight_dtype=self.dense_weight_dtype if new_w == self.weight_dtype else None,
            int4_group=self.int4_group if new_w == self.weight_dtype else 128,  # --weight-dtype int4: group 128,
            int4_zeros=self.int4_zeros and new_w == self.weight_dtype,  # ... and no zero points
            int4_asym=self.int4_asym and new_w == self.weight_dtype,
            kv_dtype=kv_dtype or self.kv_dtype,
        )
