"""The int4 inner step of the GEMV kernel (`quant_gemv.quant_gemv_kernel`), round 4 (issue 17): contiguous
activations and fewer ALU instructions per weight element.

Why: at 70 % of an H200's copy bandwidth a 4-bit GEMV must consume ~5.7e12 weight elements per second, about 22 per
clock per SM (132 SMs, 1.98 GHz). Round 2's step (`quant_gemv._int4_gemv_step`) spends per element and row a strided
2-byte activation load and its conversion, a shift, an and/or, an fp32 subtract and an FMA: near the 128 issue slots
and 64 integer slots per clock and SM before any other work. This step:
- loads each row's activations once per step as one contiguous [G, 16, 8] tile (16 bytes per thread and word:
  element 8c + i of word c), split in registers into the 8 nibble positions and shared by the tile's BLOCK_N rows;
- `MODE_PACKED` (bf16 activations): dequantizes two codes per 32-bit register, nibble j into the low bf16 and
  nibble j + 4 into the high one (`lop3`: (w >> 4j) & 0x000F000F | 0x43004300 is the bf16 pair 128 + code, exact;
  one packed FMA with 1 and -136 gives code - 8, exact), once per step for all rows; then per row and word four
  packed bf16 FMAs (`fma.rn.bf16x2`) over the activation pairs (x_j, x_j+4), the two lanes promoted to fp32 and
  added; scaled word sums accumulate across steps ([BLOCK_M, BN, G, 16]) and are reduced once per call. Per 8
  elements: 3 shifts + 4 lop3 + 4 packed FMAs (dequant, all rows) and 4 packed FMAs + 3 (promote) + 1 accumulate
  per row. Compiled for sm_90 (triton 3.9, SASS): 770 loop instructions per 256 weight elements and thread at
  M = 1, round 2's step 1619; measured speed: measure/results/h200-quant-v5.
  Precision trade-off: each lane sums 4 products in bf16 (8-bit significand): every product and partial sum is
  rounded once to bf16, so a word's partial carries at most 7 roundings of 2^-9 relative to the sum of its terms'
  magnitudes (|error| <= 7 * 2^-9 * sum |code - 8| |x| over the word's 8 elements); words, groups and splits are
  summed in fp32 and the group scale applied in fp32. bf16 has fp32's exponent range: no overflow short of
  |x| ~ 4e37. The interpreter (CPU tests) cannot run PTX: `MODE_PACKED_EMU` does the same arithmetic in fp32
  tensors, rounding each product and partial sum to bf16 (fp32 fma then bf16 rounding: a double rounding, so
  rare last-bit differences from the device).
- `MODE_F32` (fp16 activations, or chosen): exact, as round 2 (fp32 magic 2^23 + code, fp32 FMA), with the
  contiguous shared activations.
Round 6 (`int4_quad_kernel`, a kernel of its own for dense rows, launched by `launch_quad`): loads the words as
[BN, G, 4, 4], 4 consecutive words per thread (16-byte loads in the SASS: `measure.scripts.quant_asm`), each thread
loading the activations of its own words, and does the same arithmetic per word. The lead it followed (32-bit weight
loads in the step above) held for a triton 3.9 compile only; the device's triton 3.6 gives the step above 16-byte
weight loads too. Measured (measure/results/h200-quant-v7): slower than the step above except with 4-wide tiles at
one row on small weights (path='auto' there), since at wider tiles each thread recomputes the activation pairs for
each of its rows.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from wmtp.measure.kernels.quant_formats import splits_wanted
from wmtp.measure.kernels.quant_kernels import finish_tile
from wmtp.measure.kernels.quant_pdl import LINE_BYTES, pdl_enter, pdl_launch

MODE_WORDS = 0  # round 2's step (`quant_gemv._int4_gemv_step`)
MODE_F32 = 1
MODE_PACKED = 2
MODE_PACKED_EMU = 3
MODE_PACKED_PF = 4  # MODE_PACKED, loading the next step's words first
_MAGIC = tl.constexpr(0x4B000000)  # bits of 2^23: OR-ing a 4-bit code into the low mantissa gives 2^23 + code

# w -> the 4 bf16 pairs (code_j - 8, code_j+4 - 8), j = 0..3; lop3 0xEA = (a & b) | c
DEQ_ASM = tl.constexpr("""{
.reg .b32 t1, t2, t3, one, nb;
mov.b32 one, 0x3F803F80;
mov.b32 nb, 0xC308C308;
shr.b32 t1, $4, 4;
shr.b32 t2, $4, 8;
shr.b32 t3, $4, 12;
lop3.b32 $0, $4, 0x000F000F, 0x43004300, 0xEA;
lop3.b32 $1, t1, 0x000F000F, 0x43004300, 0xEA;
lop3.b32 $2, t2, 0x000F000F, 0x43004300, 0xEA;
lop3.b32 $3, t3, 0x000F000F, 0x43004300, 0xEA;
fma.rn.bf16x2 $0, $0, one, nb;
fma.rn.bf16x2 $1, $1, one, nb;
fma.rn.bf16x2 $2, $2, one, nb;
fma.rn.bf16x2 $3, $3, one, nb;
}""")
# (d0..d3, q0..q3) -> fp32 sum of both lanes of d0*q0 + d1*q1 + d2*q2 + d3*q3 (bf16x2, starting from -0)
_DOT_ASM = tl.constexpr("""{
.reg .b32 acc, lo, hi;
mov.b32 acc, 0x80008000;
fma.rn.bf16x2 acc, $1, $5, acc;
fma.rn.bf16x2 acc, $2, $6, acc;
fma.rn.bf16x2 acc, $3, $7, acc;
fma.rn.bf16x2 acc, $4, $8, acc;
shl.b32 lo, acc, 16;
and.b32 hi, acc, 0xFFFF0000;
add.f32 $0, lo, hi;
}""")


@triton.jit
def _eighths(x):
    """x [..., 2, 2, 2] (entry 4 b2 + 2 b1 + b0 of an axis of 8, last axis b0) -> its 8 entries as
    (x0, x4, x2, x6, x1, x5, x3, x7)."""
    e, o = tl.split(x)  # b0 = 0 / 1: [.., 2 (b2), 2 (b1)]
    e0, e1 = tl.split(e)  # b1: [.., 2 (b2)]
    o0, o1 = tl.split(o)
    x0, x4 = tl.split(e0)
    x2, x6 = tl.split(e1)
    x1, x5 = tl.split(o0)
    x3, x7 = tl.split(o1)
    return x0, x4, x2, x6, x1, x5, x3, x7


@triton.jit
def _split8(x, BLOCK_M: tl.constexpr, G: tl.constexpr):
    """x [BLOCK_M, G, 16, 8] -> its 8 entries along the last axis, as (x0, x4, x2, x6, x1, x5, x3, x7)."""
    return _eighths(tl.reshape(x, [BLOCK_M, G, 16, 2, 2, 2]))


@triton.jit
def _pair(lo, hi):
    """Two bf16 tensors -> int32 holding lo in the low half and hi in the high half."""
    return (hi.to(tl.int16, bitcast=True).to(tl.int32) << 16) | (lo.to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF)


@triton.jit
def _bf(v):
    """fp32 -> nearest bf16 (ties to even), as fp32; by integer ops because the interpreter's cast truncates."""
    b = v.to(tl.int32, bitcast=True)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & -65536
    return b.to(tl.float32, bitcast=True)


@triton.jit
def int4_code(wd, i: tl.constexpr):
    """Nibble i of each word, minus 8, as fp32 (exact)."""
    return (((wd >> (4 * i)) & 0xF) | _MAGIC).to(tl.float32, bitcast=True) - 8388616.0


@triton.jit
def _lane_emu(c0, c1, c2, c3, x0, x1, x2, x3):
    """One bf16 lane of `_DOT_ASM` in fp32 tensors: each product and partial sum rounded to bf16."""
    a = _bf(c0 * x0.to(tl.float32))
    a = _bf(c1 * x1.to(tl.float32) + a)
    a = _bf(c2 * x2.to(tl.float32) + a)
    return _bf(c3 * x3.to(tl.float32) + a)


@triton.jit
def _dot_packed(d0, d1, d2, d3, x0, x4, x2, x6, x1, x5, x3, x7):
    """A word's 8 dequantized codes (d0..d3: bf16 pairs) dotted with its 8 activations by `_DOT_ASM`."""
    return tl.inline_asm_elementwise(_DOT_ASM, "=f,r,r,r,r,r,r,r,r",
                                     [d0, d1, d2, d3, _pair(x0, x4), _pair(x1, x5), _pair(x2, x6), _pair(x3, x7)],
                                     dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def _dot_emu(wd, x0, x4, x2, x6, x1, x5, x3, x7):
    """`_dot_packed`'s arithmetic in fp32 tensors (its two bf16 lanes, each rounded as the instruction rounds)."""
    return (_lane_emu(int4_code(wd, 0), int4_code(wd, 1), int4_code(wd, 2), int4_code(wd, 3), x0, x1, x2, x3)
            + _lane_emu(int4_code(wd, 4), int4_code(wd, 5), int4_code(wd, 6), int4_code(wd, 7), x4, x5, x6, x7))


@triton.jit
def _word_sums(wd, d0, d1, d2, d3, x, BLOCK_M: tl.constexpr, G: tl.constexpr, MODE: tl.constexpr):
    """[BLOCK_M, BN, G, 16] fp32: each word's 8 codes (minus 8) dotted with its 8 activations x [BLOCK_M, G, 16, 8]
    of each row; wd, d0..d3 [1, BN, G, 16]."""
    x0, x4, x2, x6, x1, x5, x3, x7 = _split8(x, BLOCK_M, G)
    x0, x4, x2, x6 = x0[:, None], x4[:, None], x2[:, None], x6[:, None]  # [BLOCK_M, 1, G, 16]
    x1, x5, x3, x7 = x1[:, None], x5[:, None], x3[:, None], x7[:, None]
    if MODE == 2 or MODE == 4:  # MODE_PACKED(_PF)
        t = _dot_packed(d0, d1, d2, d3, x0, x4, x2, x6, x1, x5, x3, x7)
    elif MODE == 3:  # MODE_PACKED_EMU
        t = _dot_emu(wd, x0, x4, x2, x6, x1, x5, x3, x7)
    else:
        t = int4_code(wd, 0) * x0.to(tl.float32)
        t += int4_code(wd, 1) * x1.to(tl.float32)
        t += int4_code(wd, 2) * x2.to(tl.float32)
        t += int4_code(wd, 3) * x3.to(tl.float32)
        t += int4_code(wd, 4) * x4.to(tl.float32)
        t += int4_code(wd, 5) * x5.to(tl.float32)
        t += int4_code(wd, 6) * x6.to(tl.float32)
        t += int4_code(wd, 7) * x7.to(tl.float32)
    return t


@triton.jit
def _load_words(w_base, ws_base, c_ok, g, g_ok, KW):
    """The step's words [1, BN, G, 16] and group scales [1, BN, G, 1] (fp32)."""
    kw = g[:, None] * 16 + tl.arange(0, 16)[None, :]  # [G, 16] word index along the row (8 codes a word)
    k_ok = g_ok[:, None] & (kw < KW)
    wd = tl.load(w_base[:, None, None] + kw[None, :, :], mask=c_ok[:, None, None] & k_ok[None, :, :], other=0)
    s = tl.load(ws_base[:, None] + g[None, :], mask=c_ok[:, None] & g_ok[None, :], other=0.0).to(tl.float32)
    return wd[None], s[None, :, :, None]


@triton.jit
def _step(acc, A, a_row, r_ok, wd, s, g, g_ok, KW, stride_am, BLOCK_M: tl.constexpr, G: tl.constexpr,
          MODE: tl.constexpr):
    """acc [BLOCK_M, BN, G, 16] += scaled word sums of every row against the step's words wd / scales s."""
    if MODE == 2 or MODE == 4:  # packed pairs (code_j - 8, code_j+4 - 8), once for all rows
        d0, d1, d2, d3 = tl.inline_asm_elementwise(DEQ_ASM, "=r,=r,=r,=r,r", [wd],
                                                   dtype=(tl.int32, tl.int32, tl.int32, tl.int32), is_pure=True,
                                                   pack=1)
    else:
        d0 = wd
        d1 = wd
        d2 = wd
        d3 = wd
    kw = g[:, None] * 16 + tl.arange(0, 16)[None, :]
    ok = r_ok[:, None, None, None] & (g_ok[:, None] & (kw < KW))[None, :, :, None]
    kk = kw[:, :, None] * 8 + tl.arange(0, 8)[None, None, :]  # [G, 16, 8] element index
    x = tl.load(A + a_row[:, None, None, None] * stride_am + kk[None], mask=ok, other=0.0)  # 16 B per word
    return acc + _word_sums(wd, d0, d1, d2, d3, x, BLOCK_M, G, MODE) * s


@triton.jit
def int4_gemv_v4(A, a_row, r_ok, w_base, ws_base, c_ok, g_lo, g_hi, KW, stride_am, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr, G: tl.constexpr, MODE: tl.constexpr):
    """[BLOCK_M, BLOCK_N] = rows of A (a_row [BLOCK_M], r_ok) @ dequant(words of groups [g_lo, g_hi))^T (see the
    module docstring); w_base / ws_base [BN] point at each tile row's words / group scales; KW = K / 8 words per row
    (an argument of its own: Triton's divisibility specialization of it lets the masked loads vectorize). Scaled
    word sums of all rows accumulate across steps in [BLOCK_M, BN, G, 16] (no reduction per step) and are reduced
    once at the end (the launcher picks G so that this fits in registers). MODE_PACKED_PF (4): the next step's words
    are loaded before the current step's arithmetic."""
    acc = tl.zeros([BLOCK_M, BLOCK_N, G, 16], tl.float32)
    if MODE == 4:
        g = g_lo + tl.arange(0, G)
        wd, s = _load_words(w_base, ws_base, c_ok, g, g < g_hi, KW)
        for g0 in range(g_lo, g_hi, G):
            g = g0 + tl.arange(0, G)
            g_n = g + G
            wd_n, s_n = _load_words(w_base, ws_base, c_ok, g_n, g_n < g_hi, KW)
            acc = _step(acc, A, a_row, r_ok, wd, s, g, g < g_hi, KW, stride_am, BLOCK_M, G, MODE)
            wd = wd_n
            s = s_n
    else:
        for g0 in range(g_lo, g_hi, G):
            g = g0 + tl.arange(0, G)
            wd, s = _load_words(w_base, ws_base, c_ok, g, g < g_hi, KW)
            acc = _step(acc, A, a_row, r_ok, wd, s, g, g < g_hi, KW, stride_am, BLOCK_M, G, MODE)
    return tl.sum(tl.sum(acc, 3), 2)

def int4_mode(step: str, act_dtype, interp: bool) -> int:
    """I4_MODE of `quant_gemv.quant_gemv_kernel` for a step name: 'words' (round 2), 'f32', 'packed' (bf16 activations
    only: fp16 ones take 'f32'; under the interpreter its fp32 emulation)."""
    if step == "words":
        return MODE_WORDS
    if step == "f32" or (step.startswith("packed") and str(act_dtype) != "torch.bfloat16"):
        return MODE_F32
    if step in ("packed", "packed_pf"):
        return MODE_PACKED_EMU if interp else MODE_PACKED if step == "packed" else MODE_PACKED_PF
    raise ValueError(f"int4 GEMV step must be 'packed', 'packed_pf', 'f32' or 'words', got {step!r}")


# ---------------------------------------------------------------------------------------------
# round 6 (issue 17): the quad-word kernel, 16 weight bytes per thread and load


@triton.jit
def _split8q(x, BLOCK_M: tl.constexpr, B: tl.constexpr, G: tl.constexpr):
    """x [BLOCK_M, B, G, 4, 8] -> its 8 entries along the last axis, as (x0, x4, x2, x6, x1, x5, x3, x7)."""
    return _eighths(tl.reshape(x, [BLOCK_M, B, G, 4, 2, 2, 2]))


@triton.jit
def _quad_word(wd, a_base, r_ok, g, g_ok, KW, j: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               G: tl.constexpr, MODE: tl.constexpr, XS: tl.constexpr):
    """[BLOCK_M, BN, G, 4] fp32: word j of each quad (words 4q + j of each group, wd [BN, G, 4]) dotted with its 8
    activations of every row (one 16-byte load per row, word and thread)."""
    kw = g[:, None] * 16 + tl.arange(0, 4)[None, :] * 4 + j  # [G, 4] word index along the row
    ok = r_ok[:, None, None, None, None] & (g_ok[:, None] & (kw < KW))[None, None, :, :, None]
    kk = kw[:, :, None] * 8 + tl.arange(0, 8)[None, None, :]  # [G, 4, 8] element index
    if XS:  # [BLOCK_M, 1, G, 4, 8]: Triton exchanges it into the words' layout through shared memory
        x = tl.load(a_base[:, None, None, None, None] + kk[None, None], mask=ok, other=0.0)
        x0, x4, x2, x6, x1, x5, x3, x7 = _split8q(x, BLOCK_M, 1, G)  # [BLOCK_M, 1, G, 4]
    else:  # [BLOCK_M, BN, G, 4, 8]: the pointer broadcast over the tile's rows, so that each thread loads the
        # activations of its own words in their layout (no exchange; one 16-byte load per word and row of the tile)
        a_ptr = a_base[:, None, None, None, None] + kk[None, None] + (wd * 0).to(tl.int64)[None, :, :, :, None]
        x = tl.load(a_ptr, mask=ok, other=0.0)
        x0, x4, x2, x6, x1, x5, x3, x7 = _split8q(x, BLOCK_M, BLOCK_N, G)  # [BLOCK_M, BN, G, 4]
    wd = wd[None]
    if MODE == 2:  # MODE_PACKED
        d0, d1, d2, d3 = tl.inline_asm_elementwise(DEQ_ASM, "=r,=r,=r,=r,r", [wd],
                                                   dtype=(tl.int32, tl.int32, tl.int32, tl.int32), is_pure=True,
                                                   pack=1)
        t = _dot_packed(d0, d1, d2, d3, x0, x4, x2, x6, x1, x5, x3, x7)
    elif MODE == 3:  # MODE_PACKED_EMU
        t = _dot_emu(wd, x0, x4, x2, x6, x1, x5, x3, x7)
    else:  # MODE_F32
        t = int4_code(wd, 0) * x0.to(tl.float32) + int4_code(wd, 1) * x1.to(tl.float32)
        t += int4_code(wd, 2) * x2.to(tl.float32) + int4_code(wd, 3) * x3.to(tl.float32)
        t += int4_code(wd, 4) * x4.to(tl.float32) + int4_code(wd, 5) * x5.to(tl.float32)
        t += int4_code(wd, 6) * x6.to(tl.float32) + int4_code(wd, 7) * x7.to(tl.float32)
    return t


@triton.jit(do_not_specialize=["M"])
def int4_quad_kernel(A, W, W_s, Out, Part, Count, M, N, KW, n_groups, g_per_split, n_split,
                     stride_am, stride_wn, stride_wsn, stride_ps, stride_om, SPLIT: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, G: tl.constexpr, MODE: tl.constexpr,
                     XS: tl.constexpr, PDL: tl.constexpr = False):
    """Dense Out [M, N] = A [M, K] @ dequant(W words [N, KW = K / 8], W_s [N, groups])^T, all M rows in one program
    (BLOCK_M >= M), BLOCK_N weight rows, 128-groups [pid_k * g_per_split, ..) of K, G groups a step. Each step
    loads the words as [BN, G, 4, 4] (K contiguous in the last axis: 4 consecutive words, 16 bytes, per thread and
    load) and splits them in registers into the 4 words of each quad; per word the arithmetic of round 4's step
    (`_word_sums`, same MODE values: 1 f32, 2 packed, 3 packed emulation). Scaled word sums accumulate in
    [BLOCK_M, BN, G, 4] and are reduced once; split-K by the semaphore of `quant_kernels.finish_tile`. XS: how the
    activations reach the words' layout (`_quad_word`)."""
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    rows = tl.arange(0, BLOCK_M)
    r_ok = rows < M
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ok = cols < N
    if PDL:  # `quant_pdl`: this program's first step of words (16 a group, 32 a line), then the wait
        pdl_enter(W + tl.minimum(cols, N - 1).to(tl.int64) * stride_wn, pid_k * g_per_split * 16, KW - 1, (G + 1) // 2,
                  LINE_BYTES // 4)
    w_base = W + cols.to(tl.int64) * stride_wn  # [BN]
    ws_base = W_s + cols.to(tl.int64) * stride_wsn
    a_base = A + rows.to(tl.int64) * stride_am  # [BLOCK_M]
    g_lo = pid_k * g_per_split
    g_hi = tl.minimum(g_lo + g_per_split, n_groups)
    quad = tl.arange(0, 4)[:, None] * 4 + tl.arange(0, 4)[None, :]  # [4, 4]: word 4q + j of a group
    acc = tl.zeros([BLOCK_M, BLOCK_N, G, 4], tl.float32)
    for g0 in range(g_lo, g_hi, G):
        g = g0 + tl.arange(0, G)
        g_ok = g < g_hi
        kw = g[:, None, None] * 16 + quad[None]  # [G, 4, 4]
        ok = c_ok[:, None, None, None] & (g_ok[:, None, None] & (kw < KW))[None]
        wd = tl.load(w_base[:, None, None, None] + kw[None], mask=ok, other=0)  # [BN, G, 4, 4]
        s_ptr = ws_base[:, None, None] + g[None, :, None] + tl.zeros([1, 1, 4], tl.int64)  # [BN, G, 4]: per quad
        s = tl.load(s_ptr, mask=(c_ok[:, None] & g_ok[None, :])[:, :, None], other=0.0).to(tl.float32)
        wd = tl.reshape(wd, [BLOCK_N, G, 4, 2, 2])  # j = 2 b1 + b0
        we, wo = tl.split(wd)
        w0, w2 = tl.split(we)
        w1, w3 = tl.split(wo)
        t = _quad_word(w0, a_base, r_ok, g, g_ok, KW, 0, BLOCK_M, BLOCK_N, G, MODE, XS)
        t += _quad_word(w1, a_base, r_ok, g, g_ok, KW, 1, BLOCK_M, BLOCK_N, G, MODE, XS)
        t += _quad_word(w2, a_base, r_ok, g, g_ok, KW, 2, BLOCK_M, BLOCK_N, G, MODE, XS)
        t += _quad_word(w3, a_base, r_ok, g, g_ok, KW, 3, BLOCK_M, BLOCK_N, G, MODE, XS)
        acc += t * s[None]
    finish_tile(tl.sum(tl.sum(acc, 3), 2), Out, Part, Count, rows.to(tl.int64), cols, r_ok, c_ok, pid_n, pid_k,
                n_split, stride_ps, stride_om, SPLIT)


def quad_plan(m, n, k, sm, block_n=None, split_k=None, ctas=2, g_step=None):
    """(block_m, block_n, G, split, groups per split) of `int4_quad_kernel`: 32-wide tiles (16 where they leave SMs
    idle), steps of 1024 / rows K (>= 128) times 32 / block_n (the same words per thread; `g_step`: that many
    128-groups instead), at most K's groups; split-K (automatic) until about `ctas` programs per SM (0: none) while
    the fp32 partials stay under a quarter of the weight bytes, each split a whole number of steps."""
    if not 1 <= m <= 16:
        raise ValueError(f"the int4 quad GEMV takes 1..16 rows, got {m}")
    if block_n is not None and (block_n < 4 or block_n & (block_n - 1)):
        raise ValueError(f"block_n must be a power of two >= 4, got {block_n}")
    if g_step is not None and (g_step < 1 or g_step & (g_step - 1)):
        raise ValueError(f"g_step must be a power of two >= 1, got {g_step}")
    groups = triton.cdiv(k, 128)
    block_n = block_n or (32 if triton.cdiv(n, 32) >= sm else 16)
    if g_step is None:
        g_step = max(1, 8 // triton.next_power_of_2(m)) * max(1, 32 // block_n)  # 256 words per row and thread
    if split_k is None:
        want = splits_wanted(ctas, sm, triton.cdiv(n, block_n))
        cap = max(1, k // (64 * m))  # partials 4 B per output and split, weights k / 2 bytes per row
        per = triton.cdiv(triton.cdiv(groups, max(1, min(want, groups, cap))), g_step) * g_step
    elif not 1 <= split_k <= groups:
        raise ValueError(f"split_k must be in [1, {groups}] (K blocks of 128), got {split_k}")
    else:
        per = triton.cdiv(groups, split_k)
    g_step = min(g_step, triton.next_power_of_2(min(per, groups)))
    return triton.next_power_of_2(m), block_n, g_step, triton.cdiv(groups, per), per


def launch_quad(x, w, w_scale, out, mode, sm, counters, block_n=None, split_k=None, num_warps=None, ctas=2,
                xs=False, g_step=None):
    """Plan and launch `int4_quad_kernel` once (x bf16 / fp16 [M, K], K % 8 == 0; w uint8 [N, K / 2]); mode: an
    I4 mode of `int4_mode` other than MODE_WORDS / MODE_PACKED_PF; `counters(n)` gives the split-K semaphores; xs:
    activations through shared memory (`_quad_word`); g_step: `quad_plan`'s. Returns `out`."""
    m, k = x.shape
    n = w.shape[0]
    if k % 8:
        raise ValueError(f"the int4 GEMV reads 8 codes per int32 word: K must be a multiple of 8, got {k}")
    if mode not in (MODE_F32, MODE_PACKED, MODE_PACKED_EMU):
        raise ValueError(f"the quad kernel takes I4 modes {MODE_F32}, {MODE_PACKED}, {MODE_PACKED_EMU}, got {mode}")
    block_m, block_n, g_step, split, per = quad_plan(m, n, k, sm, block_n, split_k, ctas, g_step)
    n_tiles = triton.cdiv(n, block_n)
    part = torch.empty((split, m, n), dtype=torch.float32, device=x.device) if split > 1 else out
    count = counters(n_tiles) if split > 1 else out
    wv = w.view(torch.int32)
    int4_quad_kernel[(n_tiles, split)](
        x, wv, w_scale, out, part, count, m, n, k // 8, triton.cdiv(k, 128), per, split,
        x.stride(0), wv.stride(0), w_scale.stride(0), part.stride(0) if split > 1 else 0, out.stride(0),
        SPLIT=split > 1, BLOCK_M=block_m, BLOCK_N=block_n, G=g_step, MODE=mode, XS=xs, num_warps=num_warps or 4,
        **pdl_launch(x.device),
    )
    return out
