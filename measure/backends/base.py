"""The interface every attention backend implements, and the paged inputs it is given.

A backend plans once per shape and hands back a callable that only launches kernels (no host
work, no allocation, no device sync), so the harness can capture it in a CUDA graph and time its
replays, as a serving engine replays its decode graphs:

    call = backend.decode(k_pool, v_pool, paged, q, out)          # plan, once
    call()                                                         # run, many times

Inputs follow the project's layout (DESIGN.md section 6): page size 1, KV pools
`[slots, kv_heads, head_dim]`, int32 `req_to_token[req, pos]`, and `kv_indptr` / `kv_indices`
naming each request's slots. Queries are `[B * rows, q_heads, head_dim]`, request b owning rows
b*rows .. (b+1)*rows - 1, the newest positions of its keys (causal among them).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from wmtp.errors import WmtpError

if TYPE_CHECKING:  # torch is imported by the backends themselves, so names and errors work without it
    import torch

KINDS = ("decode_attn", "verify_attn", "extend_attn", "index_build")


class UnsupportedKind(WmtpError):
    """The backend does not provide this kernel (e.g. `engine-index` builds indices only)."""


@dataclass
class Paged:
    """`batch` requests of `n` keys each over a pool (page size 1), built from `req_to_token` rows of
    `ctx` slots by an index build of `mode` (native: all ctx; window: the first `sink` and the last
    `window` positions)."""

    req_to_token: torch.Tensor  # [batch, ctx] int32
    seq_lens: torch.Tensor  # [batch] int32
    kv_indptr: torch.Tensor  # [batch + 1] int32
    kv_indices: torch.Tensor  # [batch * n] int32
    ctx: int
    batch: int
    n: int
    mode: str = "native"
    window: int = 0
    sink: int = 0


class AttentionBackend(ABC):
    """Decode (1 query row per request), verify and extend (d rows, causal chain) attention over a
    paged pool, and the KV-index build, as one library or engine runs them."""

    name: str = ""
    kinds: tuple[str, ...] = KINDS
    separate_extend: bool = False  # the draft extend runs another kernel than the verify (timed on its own)

    @abstractmethod
    def versions(self) -> dict[str, str]:
        """Library versions that decide its kernels (recorded in a profile's provenance)."""

    def kernel_set(self) -> str | None:
        """Which of the backend's own kernel versions the features of its attention rows follow (`wmtp` only)."""
        return None

    def describe(self) -> str:
        """One line on how the backend plans its kernels (recorded beside the versions)."""
        return self.name

    def decode(self, k: torch.Tensor, v: torch.Tensor, paged: Paged, q: torch.Tensor, out: torch.Tensor,
               **tuning) -> Callable[[], object]:
        raise UnsupportedKind(f"backend {self.name!r} has no decode attention")

    def verify(self, k: torch.Tensor, v: torch.Tensor, paged: Paged, q: torch.Tensor, out: torch.Tensor, d: int,
               **tuning) -> Callable[[], object]:
        """The target's verify: d query rows per request over its n keys."""
        raise UnsupportedKind(f"backend {self.name!r} has no verify attention")

    def extend(self, k: torch.Tensor, v: torch.Tensor, paged: Paged, q: torch.Tensor, out: torch.Tensor, d: int,
               **tuning) -> Callable[[], object]:
        """The draft extend over the accepted tokens (same shape as a verify; engines may plan it apart)."""
        return self.verify(k, v, paged, q, out, d, **tuning)

    def index_build(self, paged: Paged, **tuning) -> Callable[[], object]:
        """Rebuild `paged.kv_indices` from `paged.req_to_token`."""
        raise UnsupportedKind(f"backend {self.name!r} has no index build")

    def supports(self, kind: str) -> bool:
        return kind in self.kinds


def no_tuning(backend: str, tuning: dict) -> None:
    """Backends without tuning knobs refuse them rather than ignore them."""
    if tuning:
        raise ValueError(f"backend {backend!r} takes no tuning options (got {', '.join(sorted(tuning))})")
