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
"""

from __future__ import annotations

import triton
import triton.language as tl

MODE_WORDS = 0  # round 2's step (`quant_gemv._int4_gemv_step`)
MODE_F32 = 1
MODE_PACKED = 2
MODE_PACKED_EMU = 3
MODE_PACKED_PF = 4  # MODE_PACKED, loading the next step's words first
_MAGIC = tl.constexpr(0x4B000000)  # bits of 2^23: OR-ing a 4-bit code into the low mantissa gives 2^23 + code

# w -> the 4 bf16 pairs (code_j - 8, code_j+4 - 8), j = 0..3; lop3 0xEA = (a & b) | c
_DEQ_ASM = tl.constexpr("""{
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
def _split8(x, BLOCK_M: tl.constexpr, G: tl.constexpr):
    """x [BLOCK_M, G, 16, 8] -> its 8 entries along the last axis, as (x0, x4, x2, x6, x1, x5, x3, x7)."""
    x = tl.reshape(x, [BLOCK_M, G, 16, 2, 2, 2])  # index 4 b2 + 2 b1 + b0: last axis b0
    e, o = tl.split(x)  # b0 = 0 / 1: [.., 2 (b2), 2 (b1)]
    e0, e1 = tl.split(e)  # b1: [.., 2 (b2)]
    o0, o1 = tl.split(o)
    x0, x4 = tl.split(e0)
    x2, x6 = tl.split(e1)
    x1, x5 = tl.split(o0)
    x3, x7 = tl.split(o1)
    return x0, x4, x2, x6, x1, x5, x3, x7


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
def _code(wd, i: tl.constexpr):
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
def _word_sums(wd, d0, d1, d2, d3, x, BLOCK_M: tl.constexpr, G: tl.constexpr, MODE: tl.constexpr):
    """[BLOCK_M, BN, G, 16] fp32: each word's 8 codes (minus 8) dotted with its 8 activations x [BLOCK_M, G, 16, 8]
    of each row; wd, d0..d3 [1, BN, G, 16]."""
    x0, x4, x2, x6, x1, x5, x3, x7 = _split8(x, BLOCK_M, G)
    x0, x4, x2, x6 = x0[:, None], x4[:, None], x2[:, None], x6[:, None]  # [BLOCK_M, 1, G, 16]
    x1, x5, x3, x7 = x1[:, None], x5[:, None], x3[:, None], x7[:, None]
    if MODE == 2 or MODE == 4:  # MODE_PACKED(_PF)
        t = tl.inline_asm_elementwise(_DOT_ASM, "=f,r,r,r,r,r,r,r,r",
                                      [d0, d1, d2, d3, _pair(x0, x4), _pair(x1, x5), _pair(x2, x6), _pair(x3, x7)],
                                      dtype=tl.float32, is_pure=True, pack=1)
    elif MODE == 3:  # MODE_PACKED_EMU
        t = _lane_emu(_code(wd, 0), _code(wd, 1), _code(wd, 2), _code(wd, 3), x0, x1, x2, x3)
        t += _lane_emu(_code(wd, 4), _code(wd, 5), _code(wd, 6), _code(wd, 7), x4, x5, x6, x7)
    else:
        t = _code(wd, 0) * x0.to(tl.float32)
        t += _code(wd, 1) * x1.to(tl.float32)
        t += _code(wd, 2) * x2.to(tl.float32)
        t += _code(wd, 3) * x3.to(tl.float32)
        t += _code(wd, 4) * x4.to(tl.float32)
        t += _code(wd, 5) * x5.to(tl.float32)
        t += _code(wd, 6) * x6.to(tl.float32)
        t += _code(wd, 7) * x7.to(tl.float32)
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
        d0, d1, d2, d3 = tl.inline_asm_elementwise(_DEQ_ASM, "=r,=r,=r,=r,r", [wd],
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
