"""Attention backends: the kernels a measurement runs for decode, verify / extend and the KV-index
build (see `base.py` for the interface). `wmtp` (the project's own Triton kernels) is the default;
`flashinfer` runs FlashInfer as SGLang plans it; `engine-index` is the engines' per-request index
build. Optional libraries are imported only when their backend is asked for."""

from __future__ import annotations

from importlib import import_module

from wmtp.errors import WmtpError
from wmtp.measure.backends.base import KINDS, AttentionBackend, Paged, UnsupportedKind

# name -> (module, class); modules are imported on request, so a missing optional library only
# matters to the backend that needs it.
BACKENDS: dict[str, tuple[str, str]] = {
    "wmtp": ("wmtp.measure.backends.wmtp", "WmtpBackend"),
    "flashinfer": ("wmtp.measure.backends.flashinfer", "FlashInferBackend"),
    "engine-index": ("wmtp.measure.backends.engine_index", "EngineIndexBackend"),
}
DEFAULT = "wmtp"
ATTENTION = ("wmtp", "flashinfer")  # backends that provide every attention kind

__all__ = ["ATTENTION", "BACKENDS", "DEFAULT", "KINDS", "AttentionBackend", "Paged", "UnsupportedKind",
           "check_name", "get_backend"]


def check_name(name: str, attention: bool = False) -> str:
    """`name` if it is a known backend (one that runs attention, with `attention`), else a `WmtpError`."""
    known = ATTENTION if attention else tuple(BACKENDS)
    if name not in known:
        raise WmtpError(f"unknown backend {name!r}; known: {', '.join(known)}")
    return name


def get_backend(name: str = DEFAULT, **options) -> AttentionBackend:
    """An instance of backend `name` (its library imported now; a missing one is a `WmtpError`
    naming the package to install)."""
    module, cls = BACKENDS[check_name(name)]
    return getattr(import_module(module), cls)(**options)
