"""Operands, calls and fp32 references of the quantized-GEMM benchmark (`quant_bench`): our kernels and the
torch peers (bf16 F.linear, torch._scaled_mm per tensor / per row, block-scaled (1 x 128 activation groups, the
checkpoint's 128 x 128 weight blocks) where the installed torch and GPU run it, torch._weight_int4pack_mm)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from wmtp.measure.kernels import quant_gemm as qg
from wmtp.measure.kernels.quant_mma_i4 import pack_int4_mma


def weight_set(n, k, dev, gen):
    w = torch.randn(n, k, device=dev, generator=gen, dtype=torch.bfloat16) / math.sqrt(k)
    fq, fs = qg.quantize_fp8_block(w)
    ip, is_ = qg.quantize_int4_group(w)
    return {"bf16": w, "fp8": (fq, fs), "int4": (ip, is_)}


DENSE_KERNELS = ("wmtp_fp8_block", "wmtp_fp8_block_gemm", "wmtp_int4_group", "wmtp_int4_group_auto",
                 "wmtp_fp8_block_gemv", "wmtp_int4_group_gemv", "torch_bf16", "torch_scaled_mm_tensor",
                 "torch_scaled_mm_rowwise", "torch_scaled_mm_block", "torch_int4pack_mm")
GEMV_MAX_ROWS = 16  # our GEMV kernels are timed up to this M


def dense_format(kernel, n, k):
    """(dtype label, bytes of weights + scales read) of one [N, K] projection."""
    if "fp8_block" in kernel:
        return "fp8_e4m3", qg.weight_bytes("fp8_block", n, k)
    if "int4" in kernel:  # tinygemm also reads a zero per scale
        extra = 2 * n * math.ceil(k / 128) if kernel == "torch_int4pack_mm" else 0
        return "int4", qg.weight_bytes("int4_group", n, k) + extra
    if kernel == "torch_scaled_mm_tensor":
        return "fp8_e4m3", n * k + 4
    if kernel == "torch_scaled_mm_rowwise":
        return "fp8_e4m3", n * k + 4 * n
    if kernel == "torch_scaled_mm_block":  # our fp8 blocks, read by cuBLASLt
        return "fp8_e4m3", qg.weight_bytes("fp8_block", n, k)
    return "bf16", 2 * n * k


def dense_prepare(kernel, w):
    """Weight operands of `kernel` from one weight set."""
    if "fp8_block" in kernel:
        return w["fp8"]
    if kernel == "torch_scaled_mm_block":
        return block_scaled_operands(*w["fp8"])
    if kernel == "wmtp_int4_group_auto":  # path='auto' with the weights repacked for the tensor-core kernel
        return (*w["int4"], pack_int4_mma(w["int4"][0]))
    if kernel.startswith("wmtp_int4_group"):
        return w["int4"]
    if kernel == "torch_scaled_mm_tensor":
        return _tensor_scaled(w)
    if kernel == "torch_scaled_mm_rowwise":
        return _row_scaled(w)
    if kernel == "torch_int4pack_mm":
        return _tinygemm(w)
    return (w["bf16"],)


def dense_fns(x):
    """kernel -> fn(*weight operands) for activations x [M, K] bf16 (fp8 baselines get x pre-quantized here).
    wmtp_*: the tensor-core kernel (path 'dot', round 1); wmtp_*_gemv: the GEMV kernel (M <= 16); wmtp_int4_group_auto:
    path='auto' given the repacked weights (`quant_mma_i4`), what the shipped profiles price."""
    xq, xs = qg.quantize_act_fp8(x)
    amax = x.float().abs().amax().clamp_min(1e-6)
    x_t, sa_t = (x.float() * (448.0 / amax)).to(torch.float8_e4m3fn), (amax / 448.0).reshape(())
    row_amax = x.float().abs().amax(1, keepdim=True).clamp_min(1e-6)
    x_r, sa_r = (x.float() * (448.0 / row_amax)).to(torch.float8_e4m3fn), row_amax / 448.0
    return {
        "wmtp_fp8_block": lambda q, s: qg.fp8_gemm(x, q, s, path="dot"),
        "wmtp_fp8_block_gemm": lambda q, s: qg.fp8_gemm(xq, q, s, x_scale=xs, path="dot"),
        "wmtp_int4_group": lambda p, s: qg.int4_gemm(x, p, s, path="dot"),
        "wmtp_int4_group_auto": lambda p, s, wm: qg.int4_gemm(x, p, s, w_mma=wm),
        "wmtp_fp8_block_gemv": lambda q, s: qg.fp8_gemm(x, q, s, path="gemv"),
        "wmtp_int4_group_gemv": lambda p, s: qg.int4_gemm(x, p, s, path="gemv"),
        "torch_bf16": lambda w: F.linear(x, w),
        "torch_scaled_mm_tensor": lambda q, s: torch._scaled_mm(x_t, q.t(), scale_a=sa_t, scale_b=s,
                                                                out_dtype=torch.bfloat16),
        "torch_scaled_mm_rowwise": lambda q, s: torch._scaled_mm(x_r, q.t(), scale_a=sa_r, scale_b=s,
                                                                 out_dtype=torch.bfloat16),
        "torch_scaled_mm_block": lambda q, sb: block_scaled_mm(xq, xs, q, sb),
        "torch_int4pack_mm": lambda p, sz: torch._weight_int4pack_mm(x, p, 128, sz),
    }


def _block_form(dev):
    """How this torch takes 1 x 128 x 128 x 128 block scales: 'legacy' (torch._scaled_mm, scale_a [M, K/128] and
    scale_b [K/128, N/128], both outer-dimension-major) or 'recipe' (F.scaled_mm with ScalingType.BlockWise1x128 /
    BlockWise128x128, scale_b padded to a multiple of 4 K blocks). The first whose product matches fp32 torch on a
    256 x 512 x 384 problem (relative error < 2 %); raises when neither does (the peer's rows record it)."""
    if _FORM:
        return _FORM[0]
    gen = torch.Generator(device=dev).manual_seed(5)
    x = torch.randn(256, 512, device=dev, generator=gen).to(torch.bfloat16)
    w = torch.randn(384, 512, device=dev, generator=gen).to(torch.bfloat16)
    xq, xs = qg.quantize_act_fp8(x)
    fq, fs = qg.quantize_fp8_block(w)
    ref = qg.dequantize_fp8_block(xq, xs, (1, 128)) @ qg.dequantize_fp8_block(fq, fs).T
    errors = []
    for form in ("legacy", "recipe"):
        try:
            out = _block_call(form, xq, xs, fq, _block_scale_b(form, fs)).float()
            rel = ((out - ref).norm() / ref.norm()).item()
            if rel < 0.02:
                _FORM.append(form)
                return form
            errors.append(f"{form}: rel. err. {rel:.3g}")
        except Exception as exc:  # this torch build or GPU does not run the form
            errors.append(f"{form}: {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}")
    raise RuntimeError("block-scaled torch._scaled_mm: " + "; ".join(errors))


_FORM: list[str] = []


def _block_scale_b(form, fs):
    if form == "legacy":
        return fs.t()  # [K/128, N/128], stride (1, K/128)
    nb, kb = fs.shape
    l4 = -(-kb // 4) * 4
    pad = torch.zeros(nb, l4, dtype=torch.float32, device=fs.device)
    pad[:, :kb] = fs
    return pad.t()  # [L4, N/128], stride (1, L4)


def _block_call(form, xq, xs, fq, sb):
    sa = xs.t().contiguous().t()  # [M, K/128], stride (1, M)
    if form == "legacy":
        return torch._scaled_mm(xq, fq.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    st = F.ScalingType
    return F.scaled_mm(xq, fq.t(), sa, st.BlockWise1x128, sb, st.BlockWise128x128, output_dtype=torch.bfloat16)


def block_scaled_operands(fq, fs):
    """(weights, scale_b in the form this torch takes) for `block_scaled_mm`."""
    return fq, _block_scale_b(_block_form(fq.device), fs)


def block_scaled_mm(xq, xs, fq, sb):
    """torch's block-scaled FP8 GEMM (cuBLASLt) of pre-quantized activations (xq, xs: `quantize_act_fp8`, not timed
    with it, as the other torch fp8 peers) and 128 x 128-block weights."""
    return _block_call(_block_form(fq.device), xq, xs, fq, sb)


def _tensor_scaled(w):
    amax = w["bf16"].float().abs().amax().clamp_min(1e-6)
    return (w["bf16"].float() * (448.0 / amax)).to(torch.float8_e4m3fn), (amax / 448.0).reshape(())


def _row_scaled(w):
    amax = w["bf16"].float().abs().amax(1, keepdim=True).clamp_min(1e-6)
    return (w["bf16"].float() * (448.0 / amax)).to(torch.float8_e4m3fn), (amax / 448.0).reshape(1, -1)


def _tinygemm(w):
    """Our packing (element 2j low nibble) -> tinygemm's (2j high nibble), scales+zeros [K/128, N, 2] with zero 0."""
    p, s = w["int4"]
    swapped = ((p & 0xF) << 4) | (p >> 4)
    packed = torch._convert_weight_to_int4pack(swapped.contiguous(), 8)
    sz = torch.stack([s.t(), torch.zeros_like(s.t())], -1).to(torch.bfloat16).contiguous()
    return packed, sz


def dense_ref(x, w, kernel):
    """fp32 torch on the operands the kernel sees (dequantized)."""
    if kernel.startswith("wmtp_fp8") or kernel == "torch_scaled_mm_block":
        xq, xs = qg.quantize_act_fp8(x)
        return qg.dequantize_fp8_block(xq, xs, (1, 128)) @ qg.dequantize_fp8_block(*w["fp8"]).T
    if "int4" in kernel:
        return x.float() @ qg.dequantize_int4_group(*w["int4"]).T
    if kernel == "torch_scaled_mm_tensor":
        q, s = _tensor_scaled(w)
        amax = x.float().abs().amax().clamp_min(1e-6)
        return ((x.float() * (448.0 / amax)).to(torch.float8_e4m3fn).float() * amax / 448.0) @ (q.float() * s).T
    if kernel == "torch_scaled_mm_rowwise":
        q, s = _row_scaled(w)
        amax = x.float().abs().amax(1, keepdim=True).clamp_min(1e-6)
        return ((x.float() * (448.0 / amax)).to(torch.float8_e4m3fn).float() * amax / 448.0) @ (q.float() * s.t()).T
    return x.float() @ w["bf16"].float().T


def moe_operands(m, n, k, n_exp, top_k, dev, gen, down):
    w = torch.randn(n_exp, n, k, device=dev, generator=gen, dtype=torch.bfloat16) / math.sqrt(k)
    ids = torch.rand(m, n_exp, device=dev, generator=gen).topk(top_k, dim=1).indices.to(torch.int32)
    wts = torch.softmax(torch.randn(m, top_k, device=dev, generator=gen), -1)
    x = torch.randn(m * top_k if down else m, k, device=dev, generator=gen).to(torch.bfloat16)
    return w, ids, wts, x


def moe_ref(x, w_deq, ids, wts, down):
    t_len, top_k = ids.shape
    pair_tok = torch.arange(t_len * top_k, device=x.device) // top_k
    xa = x.float() if down else x.float()[pair_tok]
    y = torch.einsum("pk,pnk->pn", xa, w_deq[ids.reshape(-1).long()])
    return y * wts.reshape(-1, 1) if down else y
