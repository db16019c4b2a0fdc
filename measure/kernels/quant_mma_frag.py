"""One `mma.sync.m16n8k16` on the A-fragment registers of `quant_mma_i4`'s weight layout (issue 17): a lane's word of
8 int4 codes dequantized to bf16 pairs and multiplied by its two bf16-pair B registers, and, under the interpreter
(CPU tests), the same sums computed from the same registers in fp32 tensor arithmetic. Split from `quant_mma_i4`,
which holds the layout, the kernels and their plans."""

from __future__ import annotations

import triton
import triton.language as tl

from wmtp.measure.kernels.quant_gemv_int4 import DEQ_ASM, int4_code

_MMA_ASM = tl.constexpr("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                        "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};")
# SUB_MMA: dequantize to the bf16 pairs 128 + code (lop3 only) and subtract 136 x by a second MMA with A = -136
# (both products exact, the sums in fp32), instead of code - 8 by a packed FMA per pair
_DEQ_MMA2_ASM = tl.constexpr("""{
.reg .b32 a0, a1, a2, a3, t1, t2, t3, k;
shr.b32 t1, $4, 4;
shr.b32 t2, $4, 8;
shr.b32 t3, $4, 12;
lop3.b32 a0, $4, 0x000F000F, 0x43004300, 0xEA;
lop3.b32 a1, t1, 0x000F000F, 0x43004300, 0xEA;
lop3.b32 a2, t2, 0x000F000F, 0x43004300, 0xEA;
lop3.b32 a3, t3, 0x000F000F, 0x43004300, 0xEA;
mov.b32 k, 0xC308C308;
mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {$0, $1, $2, $3}, {a0, a1, a2, a3}, {$5, $6}, {$7, $8, $9, $10};
mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {$0, $1, $2, $3}, {k, k, k, k}, {$5, $6}, {$0, $1, $2, $3};
}""")


@triton.jit
def quarters(v):
    """[R, 4] -> its 4 columns, each [R]."""
    v = tl.reshape(v, [v.shape[0], 2, 2])
    a, b = tl.split(v)  # columns 0, 2 / 1, 3
    c0, c2 = tl.split(a)
    c1, c3 = tl.split(b)
    return c0, c1, c2, c3


@triton.jit
def _bf_lo(v):
    return (v << 16).to(tl.float32, bitcast=True)


@triton.jit
def _bf_hi(v):
    return (v & -65536).to(tl.float32, bitcast=True)


@triton.jit
def _emu_rows(a0, a1, a2, a3, b0, b1, b2, b3, c_lo, c_hi, NW: tl.constexpr):
    """Interpreter: one fragment row's part of an MMA: for each lane (g, q) and token t, the sum over the 4 lanes
    (g, q') of a0 b0 + a1 b1 + a2 b2 + a3 b3 with b* of lane (t, q'); returns c_lo / c_hi plus the sums for tokens
    2 q / 2 q + 1. a*: the lane's 4 fp32 k values of the row, b*: its 4 activations (as the token-g lane)."""
    a = tl.reshape(tl.join(tl.join(a0, a1), tl.join(a2, a3)), [NW, 8, 1, 4, 4])
    b = tl.reshape(tl.join(tl.join(b0, b1), tl.join(b2, b3)), [NW, 1, 8, 4, 4])
    p = tl.sum(tl.sum(a * b, 4), 3)  # [NW, 8 (g), 8 (token)]
    q2 = tl.reshape(tl.arange(0, 4) * 2, [1, 1, 4, 1])
    tok = tl.reshape(tl.arange(0, 8), [1, 1, 1, 8])
    p = tl.reshape(p, [NW, 8, 1, 8])
    d0 = tl.sum(tl.where(tok == q2, p, 0.0), 3)  # [NW, 8, 4]
    d1 = tl.sum(tl.where(tok == q2 + 1, p, 0.0), 3)
    return c_lo + tl.reshape(d0, [NW * 32]), c_hi + tl.reshape(d1, [NW * 32])


@triton.jit
def mma(wd, xa, xb, c0, c1, c2, c3, NW: tl.constexpr, EMU: tl.constexpr, SUB_MMA: tl.constexpr):
    """D = A (the dequantized word wd of each lane) . B (xa, xb: the lane's two bf16-pair registers) + C."""
    if EMU:
        b0, b1, b2, b3 = _bf_lo(xa), _bf_hi(xa), _bf_lo(xb), _bf_hi(xb)
        o = 136.0 if SUB_MMA else 0.0  # 128 + code, then the -136 MMA
        n0, n1, n2, n3 = int4_code(wd, 0) + o, int4_code(wd, 1) + o, int4_code(wd, 2) + o, int4_code(wd, 3) + o
        n4, n5, n6, n7 = int4_code(wd, 4) + o, int4_code(wd, 5) + o, int4_code(wd, 6) + o, int4_code(wd, 7) + o
        c0, c1 = _emu_rows(n0, n4, n2, n6, b0, b1, b2, b3, c0, c1, NW)  # row g: a0 a1 / a4 a5
        c2, c3 = _emu_rows(n1, n5, n3, n7, b0, b1, b2, b3, c2, c3, NW)  # row g + 8: a2 a3 / a6 a7
        if SUB_MMA:
            k = tl.full(wd.shape, -136.0, tl.float32)
            c0, c1 = _emu_rows(k, k, k, k, b0, b1, b2, b3, c0, c1, NW)
            c2, c3 = _emu_rows(k, k, k, k, b0, b1, b2, b3, c2, c3, NW)
        return c0, c1, c2, c3
    if SUB_MMA:
        return tl.inline_asm_elementwise(_DEQ_MMA2_ASM, "=f,=f,=f,=f,r,r,r,f,f,f,f", [wd, xa, xb, c0, c1, c2, c3],
                                         dtype=(tl.float32, tl.float32, tl.float32, tl.float32), is_pure=True,
                                         pack=1)
    d0, d1, d2, d3 = tl.inline_asm_elementwise(DEQ_ASM, "=r,=r,=r,=r,r", [wd],
                                               dtype=(tl.int32, tl.int32, tl.int32, tl.int32), is_pure=True, pack=1)
    return tl.inline_asm_elementwise(_MMA_ASM, "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f",
                                     [d0, d1, d2, d3, xa, xb, c0, c1, c2, c3],
                                     dtype=(tl.float32, tl.float32, tl.float32, tl.float32), is_pure=True, pack=1)
