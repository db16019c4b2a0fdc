"""`wmtp.provenance.classify` reads an origin's word, not a substring: a kernel named in a source
(`torch_scaled_mm_tensor`, the fp8 fit's regime since h200-quant-v13) made q122's H200 step print `scaled*`."""

import pytest

from wmtp.provenance import Origin, classify, combine


@pytest.mark.parametrize("text, origin", [
    ("interpolated (torch_scaled_mm_tensor (M 2-256 regime))", Origin.INTERPOLATED),
    ("interpolated (bf16 kernel's rate at fp8 bytes: the measured fp8 kernel is slower: torch_scaled_mm_tensor "
     "(M 2-256 regime))", Origin.INTERPOLATED),
    ("measured (torch_scaled_mm_rowwise)", Origin.MEASURED),
    ("measured profile h200 scaled to b200", Origin.SCALED),
    ("scaled from h200", Origin.SCALED),
    ("speed-of-light (datasheet x achievable fraction)", Origin.SPEED_OF_LIGHT),
    ("engine preset sglang-b200-paper", Origin.ENGINE),
    ("extrapolated (raised to its flops at the measured GEMM peak)", Origin.EXTRAPOLATED),
    ("a_measured_kernel", Origin.NONE),
])
def test_classify_reads_words(text, origin):
    assert classify(text) is origin


def test_a_kernel_name_does_not_weaken_a_sum():
    """Two interpolated parts, one naming torch_scaled_mm_tensor, and a measured one: the sum is interpolated."""
    s = combine(["interpolated (torch_scaled_mm_tensor (M 2-256 regime))", "interpolated (wmtp_int4_group_auto)",
                 "measured (torch_bf16)"])
    assert s.weakest() is Origin.INTERPOLATED
