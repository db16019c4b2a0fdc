"""Swap-AB tensor-core kernel of `wmtp.measure.kernels.quant_gemm` for dense int4 W4A16 at decode rows (M <= 64):
the layout of `quant_swap` (fp8) with int4 group-scaled weights (issue 17, round 6).

C^T [N, M] = W [N, K] @ A^T [K, M]: each program owns BLOCK_N weight rows (64 or 128, the MMA's M slot) and all M
activation rows (padded to BLOCK_M = 16..64, the MMA's N slot), and a range of K (split-K by the semaphore of
`quant_kernels.finish_tile`). Per 128-group: the packed tile [BLOCK_N, 64] bytes (two codes per byte, element 2j in
the low nibble) is dequantized once per weight in registers to code - 8 (exact in bf16 / fp16: the float
2^23 + code minus 2^23 + 8, converted), the two nibbles of each byte joined back into K order, one `tl.dot` with
the activation tile [BLOCK_M, 128] transposed, and the group's scale per weight row multiplies the fp32 group sum.
So each weight is dequantized once for all M rows, which the GEMV kernels cannot do (their cost per weight grows
with M). Under TRITON_INTERPRET=1 both operands are fp32 (UPCAST).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from wmtp.measure.kernels.quant_formats import interpreting
from wmtp.measure.kernels.quant_kernels import finish_tile
from wmtp.measure.kernels.quant_pdl import LINE_BYTES, pdl_enter, pdl_launch
from wmtp.measure.kernels.quant_swap import swap_plan

SWAP_I4_BLOCK_N = 64  # weight rows per tile when the caller names none (h200-quant-v7: 64 faster than 128 on lm_head)
SWAP_I4_WORDS = False  # int32 word reads (K % 8 == 0) instead of bytes: h200-quant-v7 call 2, 0.80x (geomean)
SWAP_I4_LOP3 = False  # dequantize byte reads by `_NIB_ASM` (bf16 A): h200-quant-v7 call 3, 0.92x (geomean)


# 4 bytes (pack 4) -> the low nibble of each (or of each byte of the input shifted right by 4: the high nibbles) as
# bf16 code - 8: prmt spreads bytes 0, 1 / 2, 3 into 16-bit halves, lop3 ORs the nibble into bf16 128 (exact 128 +
# code), one packed FMA subtracts 136 (round 4's magic, `quant_gemv_int4.DEQ_ASM`); 1.5 instructions per code
_NIB_ASM = tl.constexpr("""{
.reg .b32 t0, t1, one, nb;
mov.b32 one, 0x3F803F80;
mov.b32 nb, 0xC308C308;
prmt.b32 t0, $2, 0, 0x4140;
prmt.b32 t1, $2, 0, 0x4342;
lop3.b32 t0, t0, 0x000F000F, 0x43004300, 0xEA;
lop3.b32 t1, t1, 0x000F000F, 0x43004300, 0xEA;
fma.rn.bf16x2 $0, t0, one, nb;
fma.rn.bf16x2 $1, t1, one, nb;
}""")


@triton.jit
def _nibbles_bf16(b):
    """uint8 bytes -> bf16 code - 8 of each byte's low nibble (`_NIB_ASM`)."""
    return tl.inline_asm_elementwise(_NIB_ASM, "=r,=r,r", [b], dtype=tl.bfloat16, is_pure=True, pack=4)


@triton.jit
def _codes(b):
    """Bytes (int32) -> code - 8 of the low nibble (fp32, exact)."""
    return ((b & 0xF) | 0x4B000000).to(tl.float32, bitcast=True) - 8388616.0


@triton.jit(do_not_specialize=["M"])
def int4_swap_kernel(A, W, W_s, Out, Part, Count, M, N, K, KB, g_per_split, n_split,
                     stride_am, stride_wn, stride_wsn, stride_ps, stride_om, SPLIT: tl.constexpr,
                     BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, UPCAST: tl.constexpr, WORDS: tl.constexpr,
                     LOP3: tl.constexpr, PDL: tl.constexpr = False):
    """Out [M, N] = A [M, K] @ dequant(W, W_s [N, groups])^T, computed transposed per tile. W: WORDS, int32 [N, KB =
    K / 8] (8 codes a word); else uint8 [N, KB = K / 2] (KB an argument of its own: Triton's divisibility
    specialization of it lets the masked loads vectorize). LOP3 (bytes, bf16 A): `_NIB_ASM` dequantization."""
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    rows = tl.arange(0, BLOCK_M)
    r_ok = rows < M
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ok = cols < N
    if PDL:  # `quant_pdl`: the first 4 128-groups (2 lines: 64 bytes a group) of the weight rows, then the wait
        pf_rows = W + tl.minimum(cols, N - 1).to(tl.int64) * stride_wn
        if WORDS:  # int32 words: 16 a group, 32 a line
            pdl_enter(pf_rows, pid_k * g_per_split * 16, KB - 1, 2, LINE_BYTES // 4)
        else:  # bytes: 64 a group
            pdl_enter(pf_rows, pid_k * g_per_split * 64, KB - 1, 2, LINE_BYTES)
    w_base = W + cols.to(tl.int64)[:, None] * stride_wn  # [BN, 1]
    ws_base = W_s + cols.to(tl.int64) * stride_wsn  # [BN]
    a_base = A + rows.to(tl.int64)[:, None] * stride_am  # [BM, 1]
    acc = tl.zeros([BLOCK_N, BLOCK_M], tl.float32)
    g_lo = pid_k * g_per_split
    g_hi = tl.minimum(g_lo + g_per_split, tl.cdiv(K, 128))
    for g in range(g_lo, g_hi):
        if WORDS:  # int32 words of 8 codes: nibble i of word c is element 8c + i
            kw = g * 16 + tl.arange(0, 16)
            b = tl.load(w_base + kw[None, :], mask=c_ok[:, None] & (kw < KB)[None, :], other=0)  # [BN, 16]
            # [BN, 16, 2, 2, 2] [.., b2, b1, b0] = nibble 4 b2 + 2 b1 + b0 (the outermost join selects the last axis)
            ev = tl.join(tl.join(_codes(b), _codes(b >> 16)), tl.join(_codes(b >> 8), _codes(b >> 24)))
            od = tl.join(tl.join(_codes(b >> 4), _codes(b >> 20)), tl.join(_codes(b >> 12), _codes(b >> 28)))
            w = tl.join(ev, od)
        else:  # bytes: element 2j is the low nibble of byte j
            kb = g * 64 + tl.arange(0, 64)
            b = tl.load(w_base + kb[None, :], mask=c_ok[:, None] & (kb < KB)[None, :], other=0)
            if LOP3:  # packed bf16 dequantization (bf16 activations on the GPU)
                w = tl.join(_nibbles_bf16(b), _nibbles_bf16(b >> 4))
            else:
                b = b.to(tl.int32)
                w = tl.join(_codes(b), _codes(b >> 4))
        w = tl.reshape(w, [BLOCK_N, 128])
        ks = g * 128 + tl.arange(0, 128)
        a = tl.load(a_base + ks[None, :], mask=r_ok[:, None] & (ks < K)[None, :], other=0.0)  # [BM, 128]
        w_s = tl.load(ws_base + g, mask=c_ok, other=0.0).to(tl.float32)
        if UPCAST:
            a = a.to(tl.float32)
        else:
            w = w.to(a.dtype)
        acc += tl.dot(w, tl.trans(a)) * w_s[:, None]
    finish_tile(tl.trans(acc), Out, Part, Count, rows.to(tl.int64), cols, r_ok, c_ok, pid_n, pid_k, n_split,
                stride_ps, stride_om, SPLIT)


def launch_int4_swap(x, w, w_scale, out, sm, counters, block_n=None, split_k=None, num_warps=None, num_stages=4,
                     ctas_per_sm=4, words=None):
    """Plan (`quant_swap.swap_plan`; block_n `SWAP_I4_BLOCK_N` unless named) and launch `int4_swap_kernel` once: x
    bf16 / fp16 [M <= 64, K], w uint8 [N, K / 2], w_scale [N, ceil(K / 128)]; weights read as int32 words when
    `words` (None: `SWAP_I4_WORDS`) and K % 8 == 0, else as bytes; `counters(n)` gives the split-K semaphores. Returns `out`."""
    m, k = x.shape
    n = w.shape[0]
    block_m, block_n, split, per = swap_plan(m, n, k, sm, block_n or SWAP_I4_BLOCK_N, split_k, ctas_per_sm)
    words = k % 8 == 0 and (SWAP_I4_WORDS if words is None else words)
    lop3 = SWAP_I4_LOP3 and not words and x.dtype == torch.bfloat16 and not interpreting()
    wv = w.view(torch.int32) if words else w
    n_tiles = triton.cdiv(n, block_n)
    part = torch.empty((split, m, n), dtype=torch.float32, device=x.device) if split > 1 else out
    count = counters(n_tiles) if split > 1 else out
    int4_swap_kernel[(n_tiles, split)](
        x, wv, w_scale, out, part, count, m, n, k, k // 8 if words else k // 2, per, split,
        x.stride(0), wv.stride(0), w_scale.stride(0), part.stride(0) if split > 1 else 0, out.stride(0),
        SPLIT=split > 1, BLOCK_N=block_n, BLOCK_M=block_m, UPCAST=interpreting(), WORDS=words, LOP3=lop3,
        num_warps=num_warps or 4, num_stages=num_stages, **pdl_launch(x.device),
    )
    return out

