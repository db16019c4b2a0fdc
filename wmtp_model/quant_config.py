"""A checkpoint's weight formats, read from the `quantization_config` of its config.json (else its
`compression_config`, older compressed-tensors checkpoints' name, as vLLM and SGLang read it).

What the tool needs (`wmtp.specs.ModelSpec`): the format of the routed experts (`weight_dtype`), of the other linear
layers when the checkpoint is mixed precision (`dense_weight_dtype`), and whether the MTP block was left out of the
quantization (`mtp_bf16`). Formats are `wmtp.weights.FORMATS`. Producers read (their config.json fields):

- `compressed-tensors` (llm-compressor; e.g. RedHatAI's NVFP4 / FP8 releases): `config_groups.*.weights` with
  `num_bits`, `type` (`float` / `int`) and `group_size`: 4-bit float in groups of 16 = nvfp4, 4-bit int = int4,
  8-bit float = fp8 (`strategy` block: `block_structure` 128 x 128, as `fp8`); `ignore` lists modules left
  unquantized. 4-bit float in groups of another size (MXFP4's 32) and sparse layouts (`sparsity_config.format` other
  than dense, `format` marlin-24: 2:4 sparse weights) are a `ConfigError`, not priced as dense NVFP4 / FP8.
- `modelopt` (NVIDIA ModelOpt): `quant_algo` `NVFP4` (a `group_size` other than 16 refused), `FP8`, the INT4 AWQ
  algorithms (scale groups of `group_size`, 128 where unsaid or null) or `MIXED_PRECISION`; a mixed checkpoint's
  `config_groups` (as above) say which modules each format covers (`targets`), or `quantized_layers` maps module
  names to their `quant_algo` (and `group_size`: an int4 module's, else the object's, else 128; an NVFP4 module's
  other than 16 refused); `ignore` / `exclude_modules` list modules left unquantized. A config.json whose
  `quantization_config` nests hf_quant_config.json's `quantization` object is read as that object (vLLM does).
- A checkpoint that quantizes only its KV cache (`kv_cache_scheme` / `kv_cache_quant_algo`, `wmtp.kv_quant`, with
  no compressed-tensors `config_groups` or a null ModelOpt `quant_algo`) has bf16 weights: {} (it was refused).
- `modules_to_not_convert` (HF fp8, AWQ) and `ignored_layers` (fp8 checkpoints; vLLM's Fp8Config reads it before
  modules_to_not_convert): modules left unquantized too. A skipped module of the MTP block (`mtp.*`, or
  a decoder layer numbered past num_hidden_layers, DeepSeek's and GLM's `model.layers.61` / `model.layers.46`) makes
  the MTP block bf16 (`mtp_bf16`).
- `fp8` (Hugging Face fine-grained FP8, `weight_block_size` 128 x 128, HF's default where unsaid; DeepSeek-V3 / Qwen
  FP8 releases); another block size is a `ConfigError`.
- `gptq`, `awq`: `bits` 4 = int4, in scale groups of `group_size` along K (128 where unsaid; -1: one scale per output
  row, `ModelSpec.int4_group` 0); AWQ's also as AutoAWQ spells them, `w_bit` / `q_group_size` (vLLM reads both).
  compressed-tensors' int4: `group_size`, or `strategy` channel (per output row).

int4 zero points (`ModelSpec.int4_zeros`: stored; `int4_asym`: read by the kernel; `wmtp.weights` gives the sources):
GPTQ checkpoints store `qzeros` whatever `sym` says (AutoGPTQ / GPTQModel register the buffer unconditionally), read
only when `sym` is false (true where unsaid, AutoGPTQ's and GPTQModel's default; vLLM's Marlin path takes only
symmetric GPTQ, without zero points). AWQ checkpoints store `qzeros` (AutoAWQ `WQLinear_GEMM`), read when
`zero_point` is true (where unsaid too: AutoAWQ's default). compressed-tensors stores and reads `weight_zero_point`
when its int4 weights say `symmetric: false` (true where unsaid). ModelOpt's INT4_AWQ is taken as symmetric, no zero
points stored (an assumption, not re-read from its exporter here). A non-boolean `sym` / `zero_point` /
`symmetric` is a `ConfigError`.

A routed expert is a module path with `experts` in it that is not a shared expert. Anything else (another
method, 8-bit integer weights, a field of the wrong type) is a `ConfigError` that says to pass `--weight-dtype`.
"""

from __future__ import annotations

import re

from wmtp.errors import ConfigError
from wmtp.specs import MAX_COUNT

# where a config.json keeps its quantization, in the order vLLM and SGLang read them (`compression_config`: older
# compressed-tensors checkpoints; it was not read, and such a checkpoint priced as bf16)
QUANT_KEYS = ("quantization_config", "compression_config")
KV_KEYS = ("kv_cache_scheme", "kv_cache_quant_algo")  # a quantized KV cache declared (`wmtp.kv_quant`)
_WEIGHT_DTYPE_HINT = "pass --weight-dtype (bf16, fp8, int4, nvfp4) to say how the weights are stored"


def shown(value: object, width: int = 60, quote: bool = True) -> str:
    """`value` for an error line (its repr, or a name as it is where not `quote`), cut to `width` characters with
    `...`: a 4000-digit integer or a 20000-character module name made a 4000-character `error:` line."""
    text = repr(value) if quote else str(value)
    return text if len(text) <= width else text[:width - 3] + "..."


def _format_of(weights: object, where: str) -> str:
    """The format of one compressed-tensors / ModelOpt `weights` description."""
    if not isinstance(weights, dict):
        raise ConfigError(f"{where}: `weights` must be an object; {_WEIGHT_DTYPE_HINT}")
    bits, kind, group = weights.get("num_bits"), weights.get("type", "int"), weights.get("group_size")
    if bits == 4 and kind == "float":
        if group in (16, None):
            return "nvfp4"
        raise ConfigError(f"{where}: 4-bit float weights in groups of {shown(group)} are not NVFP4 (groups of 16; "
                          f"MXFP4's are 32, with power-of-two scales), the one 4-bit float format wmtp prices; "
                          f"{_WEIGHT_DTYPE_HINT}")
    if bits == 4 and kind == "int":
        return "int4"
    if bits == 8 and kind == "float":
        if weights.get("strategy") == "block":  # scale blocks of block_structure, priced as 128 x 128 (as `fp8`)
            _fp8_blocks(weights.get("block_structure"), f"{where}.weights.block_structure")
        return "fp8"
    raise ConfigError(f"{where}: {shown(bits)}-bit {shown(kind)} weights are not a supported format; "
                      f"{_WEIGHT_DTYPE_HINT}")


def _algo_format(algo: object, where: str) -> str:
    text = str(algo).upper() if isinstance(algo, str) else ""
    if "NVFP4" in text:
        return "nvfp4"
    if text.startswith("FP8") or text == "MXFP8":
        return "fp8"
    if text in ("W4A16_AWQ", "INT4_AWQ", "W4A8_AWQ"):
        return "int4"
    raise ConfigError(f"{where}: quant_algo {shown(algo)} is not a supported format; {_WEIGHT_DTYPE_HINT}")


def _is_mtp_module(module: str, n_layers: object) -> bool:
    """A module of the MTP block: named so (Qwen, Nemotron: `mtp.*`), or a decoder layer past the model's own
    (DeepSeek / GLM keep theirs as `model.layers.{num_hidden_layers}`)."""
    if "mtp" in module.lower():
        return True
    m = re.search(r"layers\\?\.(\d+)", module)  # also a regex entry, re:.*layers\\.61
    if not m or not isinstance(n_layers, int) or isinstance(n_layers, bool):
        return False
    digits = m.group(1).lstrip("0") or "0"  # int() of over 4300 digits is a ValueError: so many digits are past any
    return len(digits) > 18 or int(digits) >= n_layers  # model's layers


def _is_routed_expert(module: str) -> bool:
    return "experts" in module and "shared_expert" not in module


def _names(value: object, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of module names")
    return value


def _mixed(per_module: list[tuple[str, str]], where: str) -> tuple[str, str | None]:
    """(experts format, other layers' format or None) from (module, format) pairs."""
    experts = {fmt for mod, fmt in per_module if _is_routed_expert(mod)}
    other = {fmt for mod, fmt in per_module if not _is_routed_expert(mod)}
    if len(experts) > 1 or len(other) > 1:
        raise ConfigError(f"{where}: more than one format per kind of layer ({sorted(experts | other)}); "
                          f"{_WEIGHT_DTYPE_HINT}")
    if not experts and not other:
        raise ConfigError(f"{where}: no quantized layers listed; {_WEIGHT_DTYPE_HINT}")
    e = next(iter(experts or other))
    o = next(iter(other)) if other else None
    return e, (o if o != e else None)


def _groups(groups: object, where: str) -> list[tuple[str, str]]:
    if not isinstance(groups, dict) or not groups:
        raise ConfigError(f"{where}.config_groups must be a non-empty object")
    pairs = []
    for name, g in groups.items():
        name = shown(name, quote=False)
        if not isinstance(g, dict):
            raise ConfigError(f"{where}.config_groups.{name} must be an object")
        fmt = _format_of(g.get("weights"), f"{where}.config_groups.{name}")
        targets = _names(g.get("targets"), f"{where}.config_groups.{name}.targets") or ["Linear"]
        pairs += [(t, fmt) for t in targets]
    return pairs


def weight_formats(cfg: dict, path: str = "config.json") -> dict:
    """{} for an unquantized checkpoint, else {weight_dtype, dense_weight_dtype, mtp_bf16} (module docstring)."""
    field = next((k for k in QUANT_KEYS if cfg.get(k) is not None), None)
    if field is None:
        return {}
    q, where = cfg[field], f"{path}: {field}"
    if not isinstance(q, dict):
        raise ConfigError(f"{where} must be an object")
    q = flat_modelopt(q, where)
    method = q.get("quant_method")
    skipped = [m for key in ("ignore", "exclude_modules", "modules_to_not_convert", "ignored_layers")
               for m in _names(q.get(key), f"{where}.{key}")]
    mtp_bf16 = any(_is_mtp_module(m, cfg.get("num_hidden_layers")) for m in skipped)
    dense: str | None = None
    group, zeros, asym = 128, False, False
    if method == "fp8":
        experts = "fp8"
        _fp8_blocks(q.get("weight_block_size"), f"{where}.weight_block_size")
    elif method in ("gptq", "awq"):
        bits, _ = _setting(q, ("bits", "w_bit") if method == "awq" else ("bits",), None, where)
        if bits != 4:
            raise ConfigError(f"{where}: {method} with bits={shown(bits)} is not supported; {_WEIGHT_DTYPE_HINT}")
        size, name = _setting(q, ("group_size", "q_group_size") if method == "awq" else ("group_size",), 128, where)
        experts, group = "int4", _int4_group(size, f"{where}.{name}")
        key = "sym" if method == "gptq" else "zero_point"  # qzeros are stored either way
        flag = _flag(q.get(key, True), f"{where}.{key}")
        zeros, asym = True, (not flag if method == "gptq" else flag)
    elif method == "compressed-tensors":
        _refuse_sparse(q, where)
        if q.get("config_groups") in (None, {}) and _declares_kv(q):  # a KV-cache-only checkpoint: bf16 weights
            return {}
        experts, dense = _mixed(_groups(q.get("config_groups"), where), where)
        group, zeros = _ct_int4(q.get("config_groups"), where)
        asym = zeros
    elif method == "modelopt":
        if q.get("quant_algo") is None and _declares_kv(q):  # a KV-cache-only checkpoint: bf16 weights
            return {}
        experts, dense, group = _modelopt(q, where)
    else:
        raise ConfigError(f"{where}: quant_method {shown(method)} is not supported; {_WEIGHT_DTYPE_HINT}")
    return {"weight_dtype": experts, "dense_weight_dtype": dense, "mtp_bf16": mtp_bf16, "int4_group": group,
            "int4_zeros": zeros, "int4_asym": asym}


def flat_modelopt(q: dict, where: str) -> dict:
    """A ModelOpt quantization object that nests hf_quant_config.json's `quantization` object (vLLM reads the nested
    one where it is given) as one flat object, the nested fields over the outer ones, `quant_method` modelopt where
    unsaid; any other object as it is."""
    inner = q.get("quantization")
    if inner is None or q.get("quant_method") not in (None, "modelopt"):
        return q
    if not isinstance(inner, dict):
        raise ConfigError(f"{where}.quantization must be an object (ModelOpt's quant_algo, kv_cache_quant_algo, "
                          f"...), got {shown(inner)}")
    return {"quant_method": "modelopt", **{k: v for k, v in q.items() if k != "quantization"}, **inner}


def _declares_kv(q: dict) -> bool:
    """The object declares a quantized KV cache (`wmtp.kv_quant` reads which)."""
    return any(q.get(k) is not None for k in KV_KEYS)


def _modelopt(q: dict, where: str) -> tuple[str, str | None, int]:
    """(experts format, other layers' format or None, int4 scale group) of a ModelOpt `quant_algo`: one algorithm,
    or MIXED_PRECISION by `quantized_layers` (each module's algorithm and group_size) or by `config_groups`."""
    algo, group = q.get("quant_algo"), 128
    if algo == "MIXED_PRECISION":
        layers = q.get("quantized_layers")
        if isinstance(layers, dict) and layers:
            pairs = [(m, _algo_format(v.get("quant_algo") if isinstance(v, dict) else None,
                                      f"{where}.{shown(m, quote=False)}")) for m, v in layers.items()]
            group = _layers_int4_group(layers, pairs, q, where)
        else:
            pairs = _groups(q.get("config_groups"), where)
            group = _ct_int4(q["config_groups"], where)[0]
        return (*_mixed(pairs, where), group)
    experts = _algo_format(algo, where)
    if experts == "nvfp4" and q.get("group_size") not in (None, 16):  # was read as NVFP4's 16, silently
        raise ConfigError(f"{where}: quant_algo {algo} with group_size {shown(q.get('group_size'))}: NVFP4 "
                          f"scales groups of 16; {_WEIGHT_DTYPE_HINT}")
    if experts == "int4":  # INT4_AWQ's scale groups along K (its group_size was not read: 128 assumed); null: unsaid
        group = _int4_group(128 if q.get("group_size") is None else q["group_size"], f"{where}.group_size")
    return experts, None, group


def _layers_int4_group(layers: dict, pairs: list[tuple[str, str]], q: dict, where: str) -> int:
    """The int4 scale group of a MIXED_PRECISION `quantized_layers` map: each int4 module's group_size (the
    object's own where a module gives none, else 128; it was not read, every such checkpoint priced with 128); an
    NVFP4 module's own group_size checked as the single-format path checks it. int4 modules in groups of more than
    one size are more than the model holds."""
    sizes = set()
    for m, fmt in pairs:
        size = layers[m].get("group_size")
        if fmt == "nvfp4" and size not in (None, 16):
            raise ConfigError(f"{where}.{shown(m, quote=False)}: NVFP4 with group_size {shown(size)}: NVFP4 scales "
                              f"groups of 16; {_WEIGHT_DTYPE_HINT}")
        if fmt == "int4":
            size = (128 if q.get("group_size") is None else q["group_size"]) if size is None else size
            sizes.add(_int4_group(size, f"{where}.{shown(m, quote=False)}.group_size"))
    if len(sizes) > 1:
        raise ConfigError(f"{where}: int4 modules in scale groups of {sorted(sizes)}; {_WEIGHT_DTYPE_HINT}")
    return sizes.pop() if sizes else 128


def _setting(q: dict, names: tuple[str, ...], default: object, where: str) -> tuple[object, str]:
    """(value, the name it was given under) of a setting a producer spells more than one way (AutoAWQ: `w_bit`,
    `q_group_size`; HF and vLLM read both); two spellings with different values are refused."""
    given = {n: q[n] for n in names if n in q}
    if len({repr(v) for v in given.values()}) > 1:
        raise ConfigError(f"{where}: " + " and ".join(f"{n} ({shown(v)})" for n, v in given.items())
                          + f" name one setting with different values; give one, or {_WEIGHT_DTYPE_HINT}")
    return next(iter(given.values()), default), next(iter(given), names[0])


def _refuse_sparse(q: dict, where: str) -> None:
    """compressed-tensors' sparse layouts (2:4 bitmask, marlin-24) store part of each weight matrix: priced as
    the dense format of their config_groups, the weight bytes were wrong without a word. `dense`: stored whole."""
    sparse = q.get("sparsity_config")
    if sparse is not None and not isinstance(sparse, dict):
        raise ConfigError(f"{where}.sparsity_config must be an object, got {shown(sparse)}; {_WEIGHT_DTYPE_HINT}")
    layout = (sparse or {}).get("format")
    if q.get("format") == "marlin-24" or layout not in (None, "dense"):
        raise ConfigError(f"{where}: weights stored sparse ({shown(layout or q.get('format'))}); wmtp prices dense "
                          f"weights only; {_WEIGHT_DTYPE_HINT}")


def _fp8_blocks(value: object, where: str) -> None:
    """HF fine-grained FP8's scale blocks: [128, 128] (`wmtp.weights`; HF's default where unsaid). Another size,
    or a value that is no [rows, columns] pair, was priced as 128 x 128 without a word."""
    if value is None or value == [128, 128] and all(type(v) is int for v in value):
        return
    if not (isinstance(value, list) and len(value) == 2 and all(type(v) is int and v > 0 for v in value)):
        raise ConfigError(f"{where} must be [rows, columns] of one scale block, got {shown(value)}; "
                          f"{_WEIGHT_DTYPE_HINT}")
    raise ConfigError(f"{where} is {shown(value)}: wmtp prices fine-grained FP8 with 128 x 128 scale blocks only; "
                      f"{_WEIGHT_DTYPE_HINT}")


def _flag(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where} must be true or false, got {shown(value)}; {_WEIGHT_DTYPE_HINT}")
    return value


def _int4_group(value: object, where: str) -> int:
    """An int4 scale group along K: a positive integer up to `MAX_COUNT`, or -1 (GPTQ / AWQ: one scale per output
    row), read as 0. A larger one was refused by the model row as `int4_group is out of range`, naming no field."""
    if value == -1 and not isinstance(value, bool):
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_COUNT:
        raise ConfigError(f"{where} must be a positive integer or -1 (per channel), at most {MAX_COUNT}, got "
                          f"{shown(value)}; {_WEIGHT_DTYPE_HINT}")
    return value


def _ct_int4(groups: dict, where: str) -> tuple[int, bool]:
    """(group, asymmetric) of compressed-tensors' 4-bit integer weights: `strategy` channel is one scale per output
    row, else `group_size` (128 where unsaid); `symmetric` false stores a zero point per scale. Two int4 groups that
    differ in either are more than the model holds."""
    found = set()
    for name, g in groups.items():
        w = g.get("weights")
        if w.get("num_bits") == 4 and w.get("type", "int") == "int":
            size = -1 if w.get("strategy") == "channel" else 128 if w.get("group_size") is None else w["group_size"]
            at = f"{where}.config_groups.{shown(name, quote=False)}.weights"
            found.add((_int4_group(size, f"{at}.group_size"), not _flag(w.get("symmetric", True), f"{at}.symmetric")))
    if len(found) > 1:
        raise ConfigError(f"{where}: int4 weights in groups of more than one size or symmetry; {_WEIGHT_DTYPE_HINT}")
    return found.pop() if found else (128, False)
