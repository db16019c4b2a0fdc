"""Cases, fp64 checks and the sm_90 compile probe the ws kernel's tests share (`test_kernels_ws*.py`)."""

from __future__ import annotations

import torch

from kernel_refs import ref_attention


def case(hq, hkv, hd, d, n_kv, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    slots = sum(n_kv) + 5
    k = torch.randn(slots, hkv, hd, generator=g).bfloat16().cuda()
    v = torch.randn(slots, hkv, hd, generator=g).bfloat16().cuda()
    ind = torch.randperm(slots, generator=g)[: sum(n_kv)].to(torch.int32).cuda()
    ptr = torch.tensor([0] + list(torch.tensor(n_kv).cumsum(0)), dtype=torch.int32).cuda()
    q = torch.randn(len(n_kv) * d, hq, hd, generator=g).bfloat16().cuda()
    qo = torch.arange(len(n_kv) + 1, dtype=torch.int32).cuda() * d
    return q, k, v, ptr, ind, qo


def against_fp64(shape, d, kw, seed):
    """Four requests (a tile-aligned one, one with only the new tokens) into a NaN-poisoned output, against fp64."""
    from wmtp.measure.kernels.paged_ws import ws_attention  # imported where a Hopper GPU runs it

    hq, hkv, hd = shape
    n_kv = [3001, 64, d, 700]
    q, k, v, ptr, ind, qo = case(hq, hkv, hd, d, n_kv, seed=seed)
    ref = ref_attention(q, k.float(), v.float(), ptr, ind, qo)
    out = torch.full_like(q, float("nan"))
    ws_attention(q, k, v, ptr, ind, None if d == 1 else qo, d, max(n_kv), out=out, **kw)
    assert not torch.isnan(out).any()
    err = float((out.double() - ref).norm() / ref.norm())
    assert err < 1e-2, err  # bf16 inputs and P: about 3e-3 (the rows kernel's level)


def probe(*args) -> dict:
    """`ws_compile_probe.py ARGS` in a process without Triton's interpreter (which cannot compile Gluon): what the
    sm_90 PTX holds."""
    from probe_proc import run_probe

    return run_probe("ws_compile_probe.py", *args)
