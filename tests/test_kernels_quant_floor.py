"""The floor kernels of measure/scripts/quant_floor (issue 17): `read_` reads every int32 of its input exactly once
(the xor of its per-program folds equals the xor of the input, for one block per program and for shares of awkward
sizes), `noop_` stores its program id, and bad arguments are errors."""

from __future__ import annotations

import functools
import operator

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from test_kernels_quant import DEV  # noqa: E402
from wmtp.measure.kernels.quant_kernels import noop_, read_  # noqa: E402

pytestmark = pytest.mark.kernels


def _xor(values):
    return functools.reduce(operator.xor, values, 0)


@pytest.mark.parametrize("n, block, programs", [(10000, 256, None), (10000, 256, 7), (4097, 1024, 3), (5, 256, 4),
                                                (65536, 2048, None)])
def test_read_folds_every_word_once(n, block, programs):
    x = torch.randint(-2 ** 31, 2 ** 31 - 1, (n,), dtype=torch.int32, generator=torch.Generator().manual_seed(n))
    out = torch.zeros(n // 64 + 8, dtype=torch.int32, device=DEV)
    read_(x.to(DEV), out, block=block, programs=programs, num_warps=4)
    used = -(-n // block) if programs is None else min(programs, -(-n // block))
    per = -(-(-(-n // used)) // block) * block
    assert _xor(out[: -(-n // per)].tolist()) == _xor(x.tolist())


def test_read_and_noop_errors_and_noop_store():
    with pytest.raises(ValueError, match="contiguous int32"):
        read_(torch.zeros(8, dtype=torch.float32, device=DEV), torch.zeros(8, dtype=torch.int32, device=DEV))
    with pytest.raises(ValueError, match="one output entry per program"):
        read_(torch.zeros(4096, dtype=torch.int32, device=DEV), torch.zeros(1, dtype=torch.int32, device=DEV), block=256)
    out = torch.full((2,), 7, dtype=torch.int32, device=DEV)
    noop_(out)
    assert out.tolist() == [0, 7]
