"""Backend `engine-index`: the KV-index build as serving engines run it, one program per request
walking its `req_to_token` row in blocks of 512 (`measure/kernels/engine_index.py`, after SGLang's
`create_flashinfer_kv_indices_triton`). It builds indices only; the `flashinfer` backend uses it
for its index builds, as SGLang does before every FlashInfer plan."""

from __future__ import annotations

import torch
import triton

from wmtp.measure.backends.base import AttentionBackend, Paged
from wmtp.measure.kernels.engine_index import build_kv_indices_per_request


class EngineIndexBackend(AttentionBackend):
    name = "engine-index"
    kinds = ("index_build",)

    def versions(self) -> dict[str, str]:
        return {"torch": torch.__version__, "triton": triton.__version__}

    def describe(self) -> str:
        return "per-request KV-index build (one program per request, blocks of 512), as SGLang builds FlashInfer indices"

    def index_build(self, paged: Paged, **tuning):
        p = paged
        return lambda: build_kv_indices_per_request(p.req_to_token, p.seq_lens, p.kv_indptr, p.kv_indices, p.mode,
                                                    p.sink, p.window, **tuning)
