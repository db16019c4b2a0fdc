"""Work items and their prices: what the latency model hands a cost model, and what comes back.

Shared by `wmtp.latency` (which builds work items from a model row), `wmtp.tp` (collectives) and
every cost model (`wmtp.latency.SpeedOfLight`, `wmtp.profile.ProfileCostModel`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from wmtp.hardware import HardwareSpec
from wmtp.specs import ModelSpec


@dataclass(frozen=True)
class Work:
    """One component of a phase: `count` identical launches of kernel class `kind`."""

    kind: str  # decode_attn | verify_attn | extend_attn | index_build | gemm | moe | linear_state | lm_head
    name: str
    bytes: float  # HBM bytes of one instance (reads + writes)
    flops: float
    kernels: int  # kernel launches of one instance
    count: int = 1
    shape: dict = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Priced:
    work: Work
    time_ms: float  # all `count` instances
    source: str


class CostModel(Protocol):
    name: str

    def price(self, work: Work, hw: HardwareSpec, spec: ModelSpec) -> Priced: ...
