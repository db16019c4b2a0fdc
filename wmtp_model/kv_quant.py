"""A checkpoint's KV-cache format, read from the `quantization_config` of its config.json (or ModelOpt's
hf_quant_config.json beside it), as vLLM and SGLang read it:

- `kv_cache_scheme` (compressed-tensors / llm-compressor, and ModelOpt's newer config.json export): an object of
  compressed-tensors' quantization arguments, `num_bits` (8 where unsaid) and `type` (`int` where unsaid, as
  compressed-tensors' `QuantizationArgs` default them; `strategy`, `dynamic`, `symmetric` change no byte count and
  are not read). 8-bit float is fp8 (e4m3, per-tensor or per-head scales: their bytes are negligible).
- `kv_cache_quant_algo` (ModelOpt; in hf_quant_config.json under `quantization`, and in a config.json whose
  `quantization_config` nests that `quantization` object): `FP8` (any case) is fp8.

A declared fp8 KV cache makes the row's `kv_dtype` fp8 and says so in the row's notes (every command shows them);
--kv-dtype overrides it, and then the config's KV scheme is not read (`wmtp.hf_config.load_config`).

Anything else declared (int8 or 4-bit KV, NVFP4 KV, an unknown algorithm, a field of the wrong type) is a
`ConfigError` saying to pass --kv-dtype: it is refused, not priced as bf16, because the KV bytes are the term
windowing exists for, and at 1M context the step's largest: an int8 or a 4-bit KV cache priced as bf16 would be
off by 2x / 4x without a word. A null field, or no field, declares nothing (bf16, the row's default).
"""

from __future__ import annotations

from wmtp.errors import ConfigError
from wmtp.quant_config import QUANT_KEYS, flat_modelopt, shown

KV_HINT = "pass --kv-dtype (bf16 or fp8) to say how the KV cache is stored"


def _scheme(value: object, where: str) -> str:
    """The KV dtype of a compressed-tensors `kv_cache_scheme` object."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be an object (num_bits, type), got {shown(value)}; {KV_HINT}")
    bits, kind = value.get("num_bits", 8), value.get("type", "int")
    if isinstance(bits, bool) or not isinstance(bits, int) or not isinstance(kind, str):
        raise ConfigError(f"{where}: num_bits must be an integer and type a string, got {shown(bits)} and "
                          f"{shown(kind)}; {KV_HINT}")
    if (bits, kind) == (8, "float"):
        return "fp8"
    raise ConfigError(f"{where}: num_bits {shown(bits)}, type {shown(kind)} is not a KV-cache format wmtp prices "
                      f"(bf16, or fp8: num_bits 8, type float); {KV_HINT}")


def _algo(value: object, where: str) -> str:
    """The KV dtype of a ModelOpt `kv_cache_quant_algo` string."""
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a string such as \"FP8\", got {shown(value)}; {KV_HINT}")
    if value.strip().upper() == "FP8":
        return "fp8"
    raise ConfigError(f"{where} is {shown(value)}: wmtp prices a bf16 or an FP8 KV cache only; {KV_HINT}")


def kv_cache_format(cfg: dict, path: str = "config.json", field: str | None = None) -> tuple[str, str] | None:
    """(KV dtype, a note naming where it was declared), or None where the config declares no KV-cache quantization
    (module docstring). `field`: the quantization object's name as the file spells it (hf_quant_config.json's
    `quantization`), where not config.json's."""
    key = next((k for k in QUANT_KEYS if cfg.get(k) is not None), None)
    if key is None or not isinstance(cfg[key], dict):  # not an object: said by the weight reader, where it reads
        return None
    where = f"{path}: {field or key}"
    q = flat_modelopt(cfg[key], where)
    found = {}
    if q.get("kv_cache_scheme") is not None:
        found["kv_cache_scheme"] = _scheme(q["kv_cache_scheme"], f"{where}.kv_cache_scheme")
    if q.get("kv_cache_quant_algo") is not None:
        found["kv_cache_quant_algo"] = _algo(q["kv_cache_quant_algo"], f"{where}.kv_cache_quant_algo")
    if not found:
        return None
    names = " and ".join(f"{where}.{k}" for k in found)
    return "fp8", (f"{names} declares an fp8 KV cache: the KV cache is priced as fp8 "
                   "(--kv-dtype bf16 prices it as bf16)")
