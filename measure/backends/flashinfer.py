"""Backend `flashinfer`: FlashInfer's paged kernels, planned the way SGLang's FlashInfer attention
backend plans them for speculative decoding (sglang/srt/layers/attention/flashinfer_backend.py;
FlashInfer 0.6.0's python API, flashinfer/decode.py and prefill.py).

What SGLang does, and so what this backend does:
- Backend `fa2` for every wrapper (`prefill_backend = decode_backend = "fa2"`), never `auto`. On
  the H200 `auto` resolves to FA3, whose paged prefill has no split-KV: one CTA per (request, KV
  head, 64-row query tile) walks all 1M keys, hence the 44 ms verify (and 42.7 ms tensor-core
  decode) measured with a plain `plan(..., causal=True)`. FA2 splits the keys across the GPU.
- CUDA-graph wrappers (`use_cuda_graph=True`, SGLang's `_create_decode_wrappers` /
  `_create_prefill_wrappers`): fixed `kv_indptr`, `kv_indices`, `kv_last_page_len` (and
  `qo_indptr`) buffers, the indices buffer being the one the index build writes. In graph mode
  FlashInfer's FA2 scheduler always splits the keys: the grid is padded to 2 CTAs per SM
  (`max_batch_size_if_split = 2 * SMs / kv_heads`) and the chunk size found by binary search so
  the split work fills it; `fixed_split_size` stays unset and `disable_split_kv` False (SGLang
  sets them only for deterministic inference).
- Decode: `BatchDecodeWithPagedKVCacheWrapper`, tensor cores chosen as SGLang's
  `should_use_tensor_core`: always for fp8 KV, for bf16/fp16 KV when the GQA group is >= 4 (all
  of q35 16/2, q122 32/2, nem 32/2: the tensor-core path runs FA2's prefill kernel with one row
  per request), else the CUDA-core decode kernel.
- Verify (`target_verify`): `BatchPrefillWithPagedKVCacheWrapper`, page size 1, NHD layout,
  `kv_last_page_len` = 1, `qo_indptr` of d rows per request, and the EAGLE verify's custom mask
  (for a chain, query row i sees keys 0 .. n-d+i) in a `custom_mask_buf`, as SGLang captures
  verify graphs when the spec input carries a mask. Draft extend: the same wrapper, causal, no
  custom mask.
- Index builds: the engines' per-request build (`engine-index`, SGLang's
  `create_flashinfer_kv_indices_triton`), which SGLang runs before the verify, draft-extend and target
  decode plans. Not reproduced: the EAGLE draft decode's own builder (`generate_draft_decode_kv_indices`,
  one program per (step, request) copying the prefix in blocks of 128, num_steps times per step).
  Facts and sources: calibrate/engines/sglang-facts.md (SGLang >= PR #18364; spec v1 draft extend).

Tile cliffs in d (what the fit must see): FA2 packs a request's d rows times the GQA group into
query tiles of `cta_tile_q` rows (16 when <= 16 packed rows, else 64; 128 when > 64 rows and
head_dim < 256; in graph mode sized for the longest request the captured batch allows), and each
tile reads the request's K/V again: `q_tiles(d, group, head_dim)`. For q35 (group 8, head_dim 256)
a verify needs two tiles from d = 9; for q122 (group 16) from d = 5 (the paper's 4 -> 5 rows cliff
on the B200) and three from d = 9; for nem (group 16, head_dim 128) from d = 9.

FlashInfer JIT-compiles each kernel variant with nvcc on first use; its cache lives under
`$FLASHINFER_WORKSPACE_BASE/.cache/flashinfer` (flashinfer/jit/env.py): point that variable at a
folder kept between runs.
"""

from __future__ import annotations

import math

import torch

from wmtp.errors import WmtpError
from wmtp.measure.backends.base import AttentionBackend, Paged, no_tuning
from wmtp.measure.backends.engine_index import EngineIndexBackend

PACKAGE = "flashinfer-python"
WORKSPACE_BYTES = 512 * 2**20  # SGLang's workspace for Qwen models
FP8 = ("float8_e4m3fn", "float8_e5m2")


def import_flashinfer():
    """FlashInfer, or one `WmtpError` naming the package to install."""
    try:
        import flashinfer
    except ImportError as e:
        raise WmtpError(f"the flashinfer backend needs FlashInfer, which is not importable here ({e}): "
                        f"pip install {PACKAGE}") from None
    return flashinfer


def use_tensor_cores(kv_dtype: torch.dtype, q_heads: int, kv_heads: int) -> bool:
    """SGLang's `should_use_tensor_core`: fp8 KV always; bf16 / fp16 KV when the GQA group is >= 4."""
    if q_heads % kv_heads:
        raise ValueError(f"q_heads ({q_heads}) must be a multiple of kv_heads ({kv_heads})")
    name = str(kv_dtype).replace("torch.", "")
    if name in FP8:
        return True
    if name in ("bfloat16", "float16"):
        return q_heads // kv_heads >= 4
    return False


def cta_tile_q(packed_rows: int, head_dim: int) -> int:
    """FlashInfer FA2's query-tile rows for `packed_rows` = query rows x GQA group (FA2DetermineCtaTileQ, SM80+)."""
    if packed_rows > 64 and head_dim < 256:
        return 128
    return 64 if packed_rows > 16 else 16


def q_tiles(d: int, group: int, head_dim: int, batch: int = 1) -> int:
    """Query tiles per request of a CUDA-graph FA2 plan with d rows per request: each reads the
    request's K/V once. The graph plan sizes the tile for the longest request the captured batch
    allows (batch * (d - 1) + 1 rows)."""
    longest = (batch * (d - 1) + 1) * group
    return math.ceil(d * group / cta_tile_q(longest, head_dim))


def plan_inputs(batch: int, n: int, rows: int, device="cpu") -> dict:
    """The host-side plan inputs SGLang passes (page size 1): qo_indptr (rows per request),
    kv_indptr (n per request), kv_last_page_len (all 1)."""
    ar = torch.arange(batch + 1, dtype=torch.int32, device=device)
    return {"qo_indptr": ar * rows, "kv_indptr": ar * n,
            "kv_last_page_len": torch.ones(batch, dtype=torch.int32, device=device)}


def chain_mask(batch: int, n: int, d: int, device="cpu") -> torch.Tensor:
    """The verify's custom mask for a chain draft, flattened per request as FlashInfer reads it
    ([d, n] booleans each): row i sees keys 0 .. n - d + i."""
    if d > n:
        raise ValueError(f"{d} query rows cannot be the newest of {n} keys")
    keys = torch.arange(n, device=device)
    last = n - d + torch.arange(d, device=device)
    one = keys[None, :] <= last[:, None]
    return one.reshape(-1).repeat(batch)


def _paged_kv(k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[slots, kv_heads, head_dim] pools as FlashInfer's NHD pages of size 1."""
    return k.unsqueeze(1), v.unsqueeze(1)


class FlashInferBackend(AttentionBackend):
    name = "flashinfer"
    separate_extend = True  # causal prefill, no custom mask

    def __init__(self, device: str = "cuda"):
        self.fi = import_flashinfer()
        self.device = device
        self.workspace = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        self.index = EngineIndexBackend()

    def versions(self) -> dict[str, str]:
        return {"flashinfer": str(getattr(self.fi, "__version__", "unknown")), "torch": torch.__version__,
                "cuda": str(torch.version.cuda)}

    def describe(self) -> str:
        return ("FlashInfer fa2, CUDA-graph wrappers, page size 1, NHD; decode tensor cores as SGLang chooses "
                "(group >= 4 or fp8 KV); verify: paged prefill with the chain's custom mask; extend: causal; "
                "index builds per request (engine-index)")

    def _buffers(self, paged: Paged, rows: int) -> dict:
        inp = plan_inputs(paged.batch, paged.n, rows, self.device)
        return {k: v.clone() for k, v in inp.items()} | {"inputs": inp}

    def decode(self, k, v, paged: Paged, q, out, **tuning):
        no_tuning(self.name, tuning)
        hq, hkv, hd = q.shape[1], k.shape[1], k.shape[2]
        buf = self._buffers(paged, 1)
        w = self.fi.BatchDecodeWithPagedKVCacheWrapper(
            self.workspace, "NHD", use_cuda_graph=True, use_tensor_cores=use_tensor_cores(k.dtype, hq, hkv),
            paged_kv_indptr_buffer=buf["kv_indptr"], paged_kv_indices_buffer=paged.kv_indices,
            paged_kv_last_page_len_buffer=buf["kv_last_page_len"], backend="fa2")
        w.plan(buf["inputs"]["kv_indptr"], paged.kv_indices, buf["inputs"]["kv_last_page_len"], hq, hkv, hd, 1,
               q_data_type=q.dtype, kv_data_type=k.dtype, non_blocking=True, disable_split_kv=False)
        kv = _paged_kv(k, v)
        return lambda: w.run(q, kv, out=out)

    def _prefill(self, k, v, paged: Paged, q, out, d: int, mask: bool):
        hq, hkv, hd = q.shape[1], k.shape[1], k.shape[2]
        buf = self._buffers(paged, d)
        extra = {}
        custom = None
        if mask:
            custom = chain_mask(paged.batch, paged.n, d, self.device)
            extra = {"custom_mask_buf": torch.empty(paged.batch * -(-d * paged.n // 8) + 16, dtype=torch.uint8,
                                                    device=self.device),
                     "mask_indptr_buf": torch.empty(paged.batch + 1, dtype=torch.int32, device=self.device)}
        w = self.fi.BatchPrefillWithPagedKVCacheWrapper(
            self.workspace, "NHD", use_cuda_graph=True, backend="fa2", qo_indptr_buf=buf["qo_indptr"],
            paged_kv_indptr_buf=buf["kv_indptr"], paged_kv_indices_buf=paged.kv_indices,
            paged_kv_last_page_len_buf=buf["kv_last_page_len"], **extra)
        inp = buf["inputs"]
        w.plan(inp["qo_indptr"], inp["kv_indptr"], paged.kv_indices, inp["kv_last_page_len"], hq, hkv, hd, 1,
               custom_mask=custom, causal=not mask, q_data_type=q.dtype, kv_data_type=k.dtype, non_blocking=True)
        del custom
        kv = _paged_kv(k, v)
        return lambda: w.run(q, kv, out=out)

    def verify(self, k, v, paged: Paged, q, out, d: int, mask: bool = True, **tuning):
        """`mask=False` plans the plain causal prefill (what the draft extend runs)."""
        no_tuning(self.name, tuning)
        return self._prefill(k, v, paged, q, out, d, mask)

    def extend(self, k, v, paged: Paged, q, out, d: int, **tuning):
        no_tuning(self.name, tuning)
        return self._prefill(k, v, paged, q, out, d, mask=False)

    def index_build(self, paged: Paged, **tuning):
        return self.index.index_build(paged, **tuning)
