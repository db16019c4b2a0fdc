"""Quantized formats of `wmtp.measure.kernels.quant_gemm`: FP8 block-scaled weights (128 x 128 blocks, fp32
scales), 4-bit weight-only weights (two codes per byte, even element in the low nibble, w = (code - 8) x scale,
one scale per row per 128 along K), per-token-group FP8 activation quantization (a Triton kernel), and the
bytes a GEMM must read in each format. torch-side helpers make and check test and benchmark weights."""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

GROUP = 128  # quantization block along K (both formats) and along N (fp8 weight scales)
FP8_MAX = 448.0
FP8_EPS = 1e-10
_FP8 = torch.float8_e4m3fn
_ACT_DTYPES = (torch.bfloat16, torch.float16)


@triton.jit
def round_e4m3(y):
    """Round fp32 to the nearest e4m3 value, ties to even (normals: 3 mantissa bits; subnormals: steps of 2^-9)."""
    e = tl.floor(tl.log2(tl.maximum(tl.abs(y), 1e-30)))
    step = tl.exp2(tl.maximum(e, -6.0) - 3.0)
    t = y / step
    r = tl.floor(t + 0.5)
    odd = (r - 2.0 * tl.floor(r * 0.5)) != 0.0
    r = tl.where(((r - t) == 0.5) & odd, r - 1.0, r)
    return r * step


@triton.jit
def rn_scale(amax, FP8_MAX_C: tl.constexpr):
    """RN(amax / FP8_MAX_C) without a division: FP8_MAX_C = 448 = 7 * 2^6 (e4m3) or 57344 = 7 * 2^13 (e5m2), so
    RN(amax / 7) by Markstein's correction from RN(1 / 7) (the residual amax - 7 q0 is exact in an fma, one corrected
    step rounds correctly), then an exact scaling by 2^-6 / 2^-13 (the result stays normal: amax >= EPS)."""
    tl.static_assert(FP8_MAX_C == 448.0 or FP8_MAX_C == 57344.0)
    q0 = amax * 0.14285714285714285
    s7 = tl.fma(tl.fma(-q0, 7.0, amax), 0.14285714285714285, q0)
    if FP8_MAX_C == 448.0:
        return s7 * 0.015625
    return s7 * 0.0001220703125


@triton.jit
def _rn_reciprocal(s):
    """RN(1 / s) for normal s > 0 without an IEEE division: the approximate reciprocal refined by two Newton steps in
    fma (Markstein: from within one ulp, y + y (1 - s y) is RN(1 / s) unless the mantissa of s is all ones); for an
    all-ones mantissa, s = 2^E (2 - 2^-23), RN(1 / s) = 2^-(E+1) (1 + 2^-23), set from the exponent bits."""
    y = 1.0 / s
    y = tl.fma(tl.fma(-s, y, 1.0), y, y)
    y = tl.fma(tl.fma(-s, y, 1.0), y, y)
    bits = s.to(tl.int32, bitcast=True)
    e_up = ((bits >> 23) & 0xFF) + 1  # exponent field of s + ulp(s) = 2^(E+1)
    exc = (((254 - e_up) << 23) | 1).to(tl.float32, bitcast=True)
    return tl.where((bits & 0x7FFFFF) == 0x7FFFFF, exc, y)


@triton.jit
def rn_quotient(x, s):
    """RN(x / s) for normal s > 0 without an IEEE division: Markstein's corrected quotient from y = RN(1 / s)
    (`_rn_reciprocal`): q0 = RN(x y) lies within one ulp of x / s, the residual x - s q0 is exact in an fma, and
    RN(q0 + residual y) = RN(x / s) (no underflow: a quotient below 2^-126 quantizes to e4m3 zero either way).
    Checked on the GPU bit for bit against IEEE division (tests/test_kernels_quant_pdl.py)."""
    y = _rn_reciprocal(s)
    q0 = x * y
    return tl.fma(tl.fma(-q0, s, x), y, q0)


@triton.jit
def fp8_group_quant(x, amax, FP8_MAX_C: tl.constexpr, IEEE: tl.constexpr, ROUND_FP32: tl.constexpr,
                    ROWS: tl.constexpr):
    """(clamp(RN(x / s), +-FP8_MAX_C), s), s = RN(amax / FP8_MAX_C), in fp32: the per-group activation quantization of
    every fp8 path. ROWS: x [R, 128] with amax [R]; else x [128] with a scalar amax. IEEE: `tl.math.div_rn`; else
    `rn_scale` / `rn_quotient`, the same numbers without an IEEE division (h200-quant-v9: the GEMV 1.15-1.37x faster).
    Under the interpreter (ROUND_FP32, whose fma rounds twice) always IEEE, and the codes rounded to e4m3 here."""
    if IEEE or ROUND_FP32:
        s = tl.math.div_rn(amax, FP8_MAX_C)
    else:
        s = rn_scale(amax, FP8_MAX_C)
    if ROWS:
        sb = s[:, None]
    else:
        sb = s
    if IEEE or ROUND_FP32:
        q = tl.math.div_rn(x, sb)
    else:
        q = rn_quotient(x, sb)
    q = tl.minimum(tl.maximum(q, -FP8_MAX_C), FP8_MAX_C)
    if ROUND_FP32:
        q = round_e4m3(q)
    return q, s


@triton.jit
def _act_quant_kernel(X, Xq, Xs, K, stride_xm, stride_qm, stride_sm,
                      GROUP_K: tl.constexpr, FP8_MAX_C: tl.constexpr, EPS: tl.constexpr, ROUND_FP32: tl.constexpr):
    m = tl.program_id(0)
    g = tl.program_id(1)
    ks = g * GROUP_K + tl.arange(0, GROUP_K)
    ok = ks < K
    x = tl.load(X + m.to(tl.int64) * stride_xm + ks, mask=ok, other=0.0).to(tl.float32)
    q, s = fp8_group_quant(x, tl.maximum(tl.max(tl.abs(x), 0), EPS), FP8_MAX_C, False, ROUND_FP32, False)
    tl.store(Xq + m.to(tl.int64) * stride_qm + ks, q.to(Xq.dtype.element_ty), mask=ok)
    tl.store(Xs + m.to(tl.int64) * stride_sm + g, s)


def splits_wanted(ctas: int, sm: int, programs: int, fit: bool = False) -> int:
    """The K splits a split-K plan asks for so that `programs` per split come to about `ctas` programs per SM on `sm`
    SMs: rounded up, or with `fit` at most that many (one wave where `ctas` reside); the caller caps and clamps it."""
    return ctas * sm // programs if fit else triton.cdiv(ctas * sm, programs)


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def check_2d(name, t, dtypes, device=None):
    if t.dim() != 2 or t.dtype not in dtypes:
        raise ValueError(f"{name} must be 2-D {'/'.join(str(d) for d in dtypes)}, got {tuple(t.shape)} {t.dtype}")
    if t.stride(1) != 1:
        raise ValueError(f"{name} must be contiguous along its last dimension")
    if device is not None and t.device != device:
        raise ValueError(f"{name} is on {t.device}, expected {device}")


def quantize_act_fp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token-group (1 x 128) fp8 quantization: x [M, K] bf16/fp16/fp32 -> (q fp8 [M, K], s fp32 [M, ceil(K/128)])."""
    check_2d("x", x, _ACT_DTYPES + (torch.float32,))
    m, k = x.shape
    q = torch.empty((m, k), dtype=_FP8, device=x.device)
    s = torch.empty((m, triton.cdiv(k, GROUP)), dtype=torch.float32, device=x.device)
    if m and k:
        _act_quant_kernel[(m, triton.cdiv(k, GROUP))](
            x, q, s, k, x.stride(0), q.stride(0), s.stride(0),
            GROUP_K=GROUP, FP8_MAX_C=FP8_MAX, EPS=FP8_EPS, ROUND_FP32=interpreting(),
        )
    return q, s


def weight_bytes(fmt: str, n: int, k: int, experts: int = 1, scale_bytes: int = 2) -> int:
    """Bytes of weights + scales of `experts` [N, K] matrices: 'fp8_block' (fp32 scale per 128x128),
    'int4_group' (two codes per byte, one `scale_bytes` scale per row and 128 K), 'bf16'."""
    if fmt == "fp8_block":
        per = n * k + 4 * triton.cdiv(n, GROUP) * triton.cdiv(k, GROUP)
    elif fmt == "int4_group":
        per = n * triton.cdiv(k, 2) + scale_bytes * n * triton.cdiv(k, GROUP)
    elif fmt == "bf16":
        per = 2 * n * k
    else:
        raise ValueError(f"unknown weight format {fmt!r}; known: fp8_block, int4_group, bf16")
    return experts * per


def _expand(s: torch.Tensor, rows: int, cols: int, block: tuple[int, int]) -> torch.Tensor:
    return s.repeat_interleave(block[0], -2)[..., :rows, :].repeat_interleave(block[1], -1)[..., :cols]


def quantize_fp8_block(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """w [..., N, K] float -> (float8_e4m3fn [..., N, K], fp32 scales [..., ceil(N/128), ceil(K/128)]), w ~ q * s."""
    n, k = w.shape[-2:]
    nb, kb = triton.cdiv(n, GROUP), triton.cdiv(k, GROUP)
    wf = torch.nn.functional.pad(w.float(), (0, kb * GROUP - k, 0, nb * GROUP - n))
    blocks = wf.reshape(*w.shape[:-2], nb, GROUP, kb, GROUP)
    s = blocks.abs().amax(dim=(-3, -1)).clamp_min(FP8_EPS) / FP8_MAX  # [..., nb, kb]
    q = (w.float() / _expand(s, n, k, (GROUP, GROUP))).clamp(-FP8_MAX, FP8_MAX).to(_FP8)
    return q, s


def dequantize_fp8_block(q: torch.Tensor, s: torch.Tensor, block: tuple[int, int] = (GROUP, GROUP)) -> torch.Tensor:
    """fp32 q * s with one scale per `block` (weights (128, 128); activations from `quantize_act_fp8` (1, 128))."""
    n, k = q.shape[-2:]
    return q.float() * _expand(s.float(), n, k, block)


def quantize_int4_group(w: torch.Tensor, scale_dtype: torch.dtype = torch.bfloat16) -> tuple[torch.Tensor, torch.Tensor]:
    """w [..., N, K] (K even) -> (uint8 [..., N, K/2], scales [..., N, ceil(K/128)]): symmetric,
    s = max|w_group| / 7 (rounded to scale_dtype first), code = clamp(round(w / s), -8, 7) + 8."""
    n, k = w.shape[-2:]
    if k % 2:
        raise ValueError(f"K must be even to pack two int4 per byte, got {k}")
    g = triton.cdiv(k, GROUP)
    wf = torch.nn.functional.pad(w.float(), (0, g * GROUP - k)).reshape(*w.shape[:-1], g, GROUP)
    s = (wf.abs().amax(-1) / 7.0).clamp_min(1e-8).to(scale_dtype)
    code = (w.float() / s.float().repeat_interleave(GROUP, -1)[..., :k]).round().clamp(-8, 7).to(torch.int32) + 8
    packed = (code[..., 0::2] | (code[..., 1::2] << 4)).to(torch.uint8)
    return packed, s


def dequantize_int4_group(packed: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """fp32 [..., N, K] from the packed codes and per-group scales."""
    p = packed.to(torch.int32)
    codes = torch.stack([p & 0xF, p >> 4], dim=-1).flatten(-2) - 8  # element 2j low nibble, 2j+1 high
    return codes.float() * s.float().repeat_interleave(GROUP, -1)[..., :codes.shape[-1]]


# input checks of the `quant_gemm` launchers


def check_fp8_weight(w, w_scale, k, grouped):
    dims = 3 if grouped else 2
    shape = "[E, N, K]" if grouped else "[N, K]"
    if w.dim() != dims or w.dtype != _FP8:
        raise ValueError(f"w must be float8_e4m3fn {shape}, got {tuple(w.shape)} {w.dtype}")
    if w.shape[-1] != k or w.stride(-1) != 1:
        raise ValueError(f"w's last dimension must be K = {k} and contiguous, got {tuple(w.shape)}")
    want = tuple(w.shape[:-2]) + (triton.cdiv(w.shape[-2], GROUP), triton.cdiv(k, GROUP))
    if w_scale.dtype != torch.float32 or tuple(w_scale.shape) != want:
        raise ValueError(f"w_scale must be float32 {want} (one per 128x128 block), got {tuple(w_scale.shape)} {w_scale.dtype}")


def check_int4_weight(w, w_scale, k, grouped):
    dims = 3 if grouped else 2
    shape = "[E, N, K/2]" if grouped else "[N, K/2]"
    if k % 2:
        raise ValueError(f"int4 weights pack two codes per byte along K: K must be even, got {k}")
    if w.dim() != dims or w.dtype != torch.uint8:
        raise ValueError(f"w must be uint8 {shape} (two int4 per byte), got {tuple(w.shape)} {w.dtype}")
    if w.shape[-1] * 2 != k or w.stride(-1) != 1:
        raise ValueError(f"w's last dimension must be K/2 = {k // 2} and contiguous, got {tuple(w.shape)}")
    want = tuple(w.shape[:-1]) + (triton.cdiv(k, GROUP),)
    if w_scale.dtype not in _ACT_DTYPES + (torch.float32,) or tuple(w_scale.shape) != want:
        raise ValueError(f"w_scale must be bf16/fp16/fp32 {want} (one per row and 128 K), got "
                         f"{tuple(w_scale.shape)} {w_scale.dtype}")


def same_device(x, *ts):
    if any(t.device != x.device for t in ts):
        raise ValueError("x, w and w_scale must be on one device")


def check_routing(x, topk_ids, topk_weights, a_is_pairs):
    """(T, k) of valid routing inputs."""
    if topk_ids.dim() != 2 or topk_ids.dtype not in (torch.int32, torch.int64) or not topk_ids.is_contiguous():
        raise ValueError(f"topk_ids must be a contiguous int32/int64 [T, k] tensor, got {tuple(topk_ids.shape)} "
                         f"{topk_ids.dtype}")
    t_len, top_k = topk_ids.shape
    rows = t_len * top_k if a_is_pairs else t_len
    if x.shape[0] != rows:
        raise ValueError(f"x must have {'T*k' if a_is_pairs else 'T'} = {rows} rows, got {x.shape[0]}")
    if topk_weights is not None and (topk_weights.shape != topk_ids.shape or topk_weights.dtype != torch.float32
                                     or not topk_weights.is_contiguous()):
        raise ValueError("topk_weights must be contiguous float32 with the shape of topk_ids")
    if topk_ids.device != x.device or (topk_weights is not None and topk_weights.device != x.device):
        raise ValueError("topk_ids / topk_weights must be on x's device")
    return t_len, top_k
