"""Hostile inputs of sweep 22: how a config.json's quantization is read.

KV-cache quantization declared in the checkpoint (compressed-tensors `kv_cache_scheme`, ModelOpt
`kv_cache_quant_algo`, flat, nested under `quantization`, or in hf_quant_config.json) was not read: an fp8 KV cache
was priced as bf16 (twice its bytes). A checkpoint that quantizes only its KV cache was refused (no config_groups /
quant_algo null). A ModelOpt MIXED_PRECISION map's int4 group_size was not read. Malformed JSON (a 5000-digit
integer, NaN, Infinity, deep nesting) is one `error:` line naming the file. Then a fuzz over a fixed seed list:
mutated configs either predict or fail with exactly one `error:` line. What the fuzz found (no traceback): an int4
group_size past 2^31 was refused as the model row's `int4_group is out of range`, naming no field; a 4001-digit
integer or a 20000-character string in quantization_config was written whole into a 4000-30000-character line.

Expected values are worked out by hand from the config each test writes (the arithmetic is in the comments)."""

from __future__ import annotations

import copy
import functools
import json
import random

import pytest

from wmtp.errors import ConfigError
from wmtp.hf_config import load_config
from wmtp.quant_config import weight_formats
from cli_checks import assert_one_error, invoke  # noqa: E402

# a small dense qwen2: 4 layers, 8 query / 8 KV heads of 128, hidden 1024, FFN 2048, vocab 1000, untied
TINY = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 1024, "vocab_size": 1000,
        "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 8, "intermediate_size": 2048,
        "num_nextn_predict_layers": 1}
# its KV per token per layer: K and V, 8 heads x 128 = 2048 elements: 4096 bytes bf16, 2048 bytes fp8; over 4 layers
# at 1M (1048576) tokens the target KV is 4 x 2048 x 1048576 = 8589934592 bytes fp8 (17179869184 bf16)
FP8_KV_1M = 4 * 2048 * 1048576
# its bf16 weights without the MTP block: embeddings + lm_head 2 x 1000 x 1024 = 2048000 params; per layer attention
# 4 x 1024 x 1024 = 4194304 and SwiGLU 3 x 1024 x 2048 = 6291456, x 4 layers = 41943040; norms 2 per layer + 1 final,
# 9 x 1024 = 9216: 44000256 params, 2 bytes each
BF16_WEIGHTS = 2 * (2 * 1000 * 1024 + 4 * (4 * 1024 * 1024 + 3 * 1024 * 2048) + 9 * 1024)  # 88000512

FP8_SCHEME = {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False, "symmetric": True}


def write(path, doc) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def predict_json(*args) -> dict:
    r = invoke("predict", *args, "--ctx", "1M", "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


# --- 1. KV-cache quantization declared in the checkpoint ----------------------------------------------------------
@pytest.mark.parametrize("q, where", [
    ({"quant_method": "compressed-tensors", "config_groups": {}, "kv_cache_scheme": FP8_SCHEME},
     "quantization_config.kv_cache_scheme"),
    ({"quant_method": "compressed-tensors", "kv_cache_scheme": {"type": "float"}},  # num_bits 8 where unsaid
     "quantization_config.kv_cache_scheme"),
    ({"quant_method": "modelopt", "quant_algo": None, "kv_cache_quant_algo": "FP8"},
     "quantization_config.kv_cache_quant_algo"),
    ({"quant_method": "modelopt", "kv_cache_quant_algo": "fp8"}, "quantization_config.kv_cache_quant_algo"),
    # hf_quant_config.json's layout nested in config.json's quantization_config (vLLM reads the nested object)
    ({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": None, "kv_cache_quant_algo": "FP8"}},
     "quantization_config.kv_cache_quant_algo"),
    ({"quant_method": "compressed-tensors", "kv_cache_scheme": FP8_SCHEME}, "quantization_config.kv_cache_scheme"),
])
def test_fp8_kv_cache_declared_is_priced_as_fp8_and_said(tmp_path, q, where):
    cfg = write(tmp_path / "m" / "config.json", {**TINY, "quantization_config": q})
    out = predict_json("--config", cfg)
    assert (out["kv_dtype"], out["weight_dtype"]) == ("fp8", "bf16")
    assert out["memory"]["per_request"]["dense"]["target_kv_bytes"] == FP8_KV_1M
    said = [w for w in out["warnings"] if "KV cache" in w]
    assert len(said) == 1 and cfg in said[0] and where in said[0] and "fp8" in said[0], out["warnings"]
    r = invoke("predict", "--config", cfg, "--ctx", "1M")  # the table view says it as a warning line too
    assert r.exit_code == 0 and "declares an fp8 KV cache" in " ".join(r.output.split()), r.output


def test_explicit_kv_dtype_wins_over_the_checkpoint(tmp_path):
    cfg = write(tmp_path / "m" / "config.json", {**TINY, "quantization_config": {
        "quant_method": "modelopt", "quant_algo": None, "kv_cache_quant_algo": "FP8"}})
    out = predict_json("--config", cfg, "--kv-dtype", "bf16")
    assert out["kv_dtype"] == "bf16" and not [w for w in out["warnings"] if "KV cache" in w], out["warnings"]
    assert out["memory"]["per_request"]["dense"]["target_kv_bytes"] == 2 * FP8_KV_1M  # bf16: 2 bytes an element


def test_fp8_kv_in_hf_quant_config_beside_config_json(tmp_path):
    folder = tmp_path / "kvonly"
    write(folder / "config.json", TINY)
    side = write(folder / "hf_quant_config.json", {
        "producer": {"name": "modelopt"}, "quantization": {"quant_algo": None, "kv_cache_quant_algo": "FP8"}})
    spec = load_config(folder)
    assert (spec.kv_dtype, spec.weight_dtype) == ("fp8", "bf16")
    assert any(side in n and "quantization.kv_cache_quant_algo" in n for n in spec.notes), spec.notes
    # --weight-dtype says how the weights are stored; the KV scheme beside them is still read
    assert load_config(folder, weight_dtype="int4").kv_dtype == "fp8"
    assert load_config(folder, kv_dtype="bf16").kv_dtype == "bf16"  # the caller applies --kv-dtype; nothing said
    assert not [n for n in load_config(folder, kv_dtype="bf16").notes if "KV cache" in n]


@pytest.mark.parametrize("q, fragments", [
    ({"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "int"}},
     ["kv_cache_scheme", "num_bits 8, type 'int'", "--kv-dtype"]),
    ({"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8}},  # type int where unsaid
     ["kv_cache_scheme", "type 'int'", "--kv-dtype"]),
    ({"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 4, "type": "float"}},
     ["num_bits 4", "--kv-dtype"]),
    ({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "NVFP4"}, ["'NVFP4'", "--kv-dtype"]),
    ({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "INT8"}, ["'INT8'", "--kv-dtype"]),
    ({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8_E5M2_ISH"}, ["FP8_E5M2_ISH"]),
    ({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": 8}, ["must be a string"]),
    ({"quant_method": "compressed-tensors", "kv_cache_scheme": "fp8"}, ["kv_cache_scheme must be an object"]),
    ({"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": "8", "type": "float"}},
     ["num_bits must be an integer"]),
    ({"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": True, "type": "float"}},
     ["num_bits must be an integer"]),
    ({"quant_method": "modelopt", "quantization": ["FP8"]}, ["quantization must be an object"]),
])
def test_unsupported_kv_cache_scheme_is_one_error(tmp_path, q, fragments):
    """Refused, not priced as bf16: an int8 or 4-bit KV cache priced as bf16 is 2x / 4x off in the term that
    dominates at 1M context. --kv-dtype says how to price it, and then the scheme is not read."""
    cfg = write(tmp_path / "m" / "config.json", {**TINY, "quantization_config": q})
    assert_one_error(invoke("predict", "--config", cfg, "--ctx", "1M"), cfg, *fragments)
    if "quantization" not in q:
        assert predict_json("--config", cfg, "--kv-dtype", "bf16")["kv_dtype"] == "bf16"


def test_kv_and_weights_both_declared(tmp_path):
    """An NVFP4 checkpoint with an FP8 KV cache (ModelOpt's usual export): both read."""
    cfg = write(tmp_path / "m" / "config.json", {**TINY, "quantization_config": {
        "quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "kv_cache_quant_algo": "FP8",
        "kv_cache_scheme": {"num_bits": 8, "type": "float", "dynamic": False}}})
    out = predict_json("--config", cfg)
    assert (out["weight_dtype"], out["kv_dtype"]) == ("nvfp4", "fp8")
    said = [w for w in out["warnings"] if "KV cache" in w]
    assert len(said) == 1 and "kv_cache_scheme and" in said[0] and "kv_cache_quant_algo" in said[0], said


# --- 2. a KV-cache-only checkpoint has bf16 weights ----------------------------------------------------------------
@pytest.mark.parametrize("q", [
    {"quant_method": "compressed-tensors", "config_groups": {}, "kv_cache_scheme": FP8_SCHEME, "ignore": ["lm_head"]},
    {"quant_method": "compressed-tensors", "kv_cache_scheme": FP8_SCHEME},
    {"quant_method": "modelopt", "quant_algo": None, "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]},
    {"quant_method": "modelopt", "kv_cache_quant_algo": "FP8"},
])
def test_kv_only_checkpoint_prices_weights_as_bf16(tmp_path, q):
    assert weight_formats({**TINY, "quantization_config": q}) == {}
    out = predict_json("--config", write(tmp_path / "m" / "config.json", {**TINY, "quantization_config": q}))
    assert out["weight_dtype"] == "bf16" and out["memory"]["weights_bytes"]["dense"] == BF16_WEIGHTS


def test_nothing_quantized_at_all_is_still_refused():
    """Neither weights nor KV: a compressed-tensors object without config_groups describes no checkpoint."""
    with pytest.raises(ConfigError, match="config_groups must be a non-empty object"):
        weight_formats({"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {}}})
    with pytest.raises(ConfigError, match="quant_algo None"):
        weight_formats({"quantization_config": {"quant_method": "modelopt", "kv_cache_quant_algo": None}})


# --- 3. ModelOpt configs without optional keys ----------------------------------------------------------------------
@pytest.mark.parametrize("q, want", [
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, {"weight_dtype": "nvfp4", "mtp_bf16": False}),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": None}, {"weight_dtype": "nvfp4"}),
    ({"quant_method": "modelopt", "quant_algo": "W4A16_AWQ"}, {"weight_dtype": "int4", "int4_group": 128}),
    ({"quant_method": "modelopt", "quant_algo": "W4A16_AWQ", "group_size": None}, {"int4_group": 128}),
    ({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": None}, {"weight_dtype": "fp8"}),
    # MIXED_PRECISION by module: each int4 module's group_size (was not read: 128 whatever it said), else 128
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": {
        "model.layers.0.mlp.experts": {"quant_algo": "W4A16_AWQ", "group_size": 64},
        "model.layers.0.self_attn.q_proj": {"quant_algo": "FP8"}}},
     {"weight_dtype": "int4", "dense_weight_dtype": "fp8", "int4_group": 64}),
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": {
        "model.layers.0.mlp.experts": {"quant_algo": "W4A16_AWQ"},
        "model.layers.0.self_attn.q_proj": {"quant_algo": "NVFP4"}}},
     {"weight_dtype": "int4", "dense_weight_dtype": "nvfp4", "int4_group": 128}),
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "group_size": 32, "quantized_layers": {
        "model.layers.0.mlp.experts": {"quant_algo": "W4A16_AWQ"}}}, {"int4_group": 32}),
    # ModelOpt's config_groups without targets cover every Linear; int4 in groups of group_size
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "config_groups": {
        "g": {"weights": {"num_bits": 4, "type": "int", "group_size": 64}}}}, {"weight_dtype": "int4",
                                                                              "int4_group": 64}),
])
def test_modelopt_optional_keys_take_their_defaults(q, want):
    got = weight_formats({"quantization_config": q})
    assert {k: got[k] for k in want} == want


@pytest.mark.parametrize("q, needle", [
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": {
        "a.experts": {"quant_algo": "W4A16_AWQ", "group_size": 64}, "b.experts": {"quant_algo": "W4A16_AWQ"}}},
     r"scale groups of \[64, 128\]"),
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": {
        "a.experts": {"quant_algo": "NVFP4", "group_size": 32}}}, "NVFP4 with group_size 32"),
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": {
        "a.experts": {"quant_algo": "W4A16_AWQ", "group_size": "64"}}}, "positive integer or -1"),
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": {"a.experts": {}}},
     "quant_algo None"),
])
def test_modelopt_mixed_groups_that_cannot_be_priced(q, needle):
    with pytest.raises(ConfigError, match=needle):
        weight_formats({"quantization_config": q})


# --- 4. malformed JSON ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, fragment", [
    (json.dumps(TINY).replace('"hidden_size": 1024', '"hidden_size": 1' + "0" * 5000), "4300 digits"),
    (json.dumps(TINY).replace('"hidden_size": 1024', '"hidden_size": NaN'), "NaN"),
    (json.dumps(TINY).replace('"hidden_size": 1024', '"hidden_size": Infinity'), "Infinity"),
    (json.dumps(TINY).replace('"hidden_size": 1024', '"hidden_size": -Infinity'), "-Infinity"),
    (json.dumps(TINY)[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    (json.dumps(TINY)[:-1] + ', "x": ' + '{"a": ' * 50_000 + "1" + "}" * 50_000 + "}", "nested too deeply"),
])
def test_malformed_config_json_is_one_error_naming_the_file(tmp_path, text, fragment):
    cfg = write(tmp_path / "m" / "config.json", text)
    assert_one_error(invoke("predict", "--config", cfg, "--ctx", "1M"), cfg, "corrupt", fragment)


def test_malformed_hf_quant_config_json_is_one_error_naming_it(tmp_path):
    write(tmp_path / "m" / "config.json", TINY)
    side = write(tmp_path / "m" / "hf_quant_config.json", '{"quantization": {"group_size": ' + "9" * 4400 + "}}")
    assert_one_error(invoke("predict", "--config", tmp_path / "m", "--ctx", "1M"), side, "4300 digits")


# --- 5. what the fuzz found ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("q", [
    {"quant_method": "gptq", "bits": 4, "group_size": 2**31 + 1},
    {"quant_method": "awq", "bits": 4, "group_size": 10**40},
    {"quant_method": "modelopt", "quant_algo": "W4A16_AWQ", "group_size": 10**40},
    {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {
        "num_bits": 4, "type": "int", "group_size": 3 * 10**9}}}},
])
def test_int4_group_past_any_width_names_the_field(tmp_path, q):
    """A scale group wider than 2^31 columns was refused by the model row as `int4_group is out of range`, naming
    neither the file's field nor what to do; 2^31 itself is the largest count wmtp takes."""
    cfg = write(tmp_path / "m" / "config.json", {**TINY, "quantization_config": q})
    line = assert_one_error(invoke("predict", "--config", cfg, "--ctx", "1M"), cfg, "group_size must be a positive "
                            "integer or -1", "at most 2147483648", "--weight-dtype")
    assert "out of range" not in line and len(line) < 500, line
    ok = {"quant_method": "gptq", "bits": 4, "group_size": 2**31}  # the control: the largest group taken
    assert predict_json("--config", write(tmp_path / "ok" / "config.json",
                                          {**TINY, "quantization_config": ok}))["weight_dtype"] == "int4"


HUGE = 10**4000  # 4001 digits: under Python's 4300-digit limit, so the JSON reads


@pytest.mark.parametrize("q, fragment", [
    ({"quant_method": HUGE}, "quant_method 1000"),
    ({"quant_method": "x" * 20_000}, "quant_method 'xxx"),
    ({"quant_method": "modelopt", "quant_algo": HUGE}, "quant_algo 1000"),
    ({"quant_method": "gptq", "bits": 4, "sym": HUGE}, "sym must be true or false"),
    ({"quant_method": "awq", "bits": 4, "zero_point": HUGE}, "zero_point must be true or false"),
    ({"quant_method": "gptq", "bits": HUGE}, "gptq with bits=1000"),
    ({"quant_method": "fp8", "weight_block_size": [128, HUGE]}, "weight_block_size is [128, 1000"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": HUGE}}}}, "-bit 'int'"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g" * 20_000: {"weights": 5}}}, "must be an object"),
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION",
      "quantized_layers": {"m" * 20_000 + ".experts": {"quant_algo": "BOGUS"}}}, "quant_algo 'BOGUS'"),
    ({"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": HUGE, "type": "float"}}, "num_bits 1000"),
    ({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "Q" * 20_000}, "kv_cache_quant_algo is"),
])
def test_a_huge_value_or_name_makes_a_short_error_line(tmp_path, q, fragment):
    """The fuzz: a 4001-digit integer or a 20000-character string in quantization_config was written whole into the
    `error:` line (4200 to 30000 characters); a value is cut to 60 characters with `...`, as hf_config cuts its."""
    cfg = write(tmp_path / "m" / "config.json", {**TINY, "quantization_config": q})
    line = assert_one_error(invoke("predict", "--config", cfg, "--ctx", "1M"), cfg, fragment)
    assert len(line) < len(cfg) + 300 and "..." in line, line


# --- the fuzz, pinned: a fixed seed list of mutated configs --------------------------------------------------------
_QUANTS = [None,
           {"quant_method": "compressed-tensors", "ignore": ["lm_head"], "kv_cache_scheme": FP8_SCHEME,
            "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "float",
                                                                       "group_size": 16}}}},
           {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": "FP8",
            "quantized_layers": {"model.layers.0.mlp.experts": {"quant_algo": "W4A16_AWQ", "group_size": 64},
                                 "model.layers.0.self_attn.q_proj": {"quant_algo": "FP8"}}},
           {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"}},
           {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": False}]
_VALUES = [None, True, 0, -1, 1.5, 1e308, 10**30, 2**31 + 1, HUGE, "", "x", "FP8", [], {}, [1, 2], {"a": 1}]


def _paths(doc, path=()):
    if path:
        yield path
    items = doc.items() if isinstance(doc, dict) else enumerate(doc[:4]) if isinstance(doc, list) else ()
    for k, v in items:
        yield from _paths(v, path + (k,))


def _mutated(seed: int) -> dict:
    """TINY with one of `_QUANTS`, then 1-3 fields dropped or replaced (a string for an int, a list for an object,
    negative, zero, huge, null)."""
    rng = random.Random(seed)
    q = rng.choice(_QUANTS)
    doc = copy.deepcopy({**TINY, **({"quantization_config": q} if q else {})})
    for _ in range(rng.randint(1, 3)):
        paths = list(_paths(doc))
        quant = [p for p in paths if p[0] == "quantization_config"]
        path = rng.choice(quant if quant and rng.random() < 0.6 else paths)
        parent = functools.reduce(lambda d, k: d[k], path[:-1], doc)
        old = parent[path[-1]]
        if rng.random() < 0.2:
            del parent[path[-1]]
        else:
            parent[path[-1]] = rng.choice(_VALUES + [str(old), [old], {"a": old}])
    return doc


@pytest.mark.parametrize("seed", range(120))
def test_fuzzed_config_predicts_or_fails_with_one_error_line(tmp_path, seed):
    cfg = write(tmp_path / "m" / "config.json", _mutated(seed))
    r = invoke("predict", "--config", cfg, "--ctx", "1M")
    if r.exit_code != 0:
        line = assert_one_error(r)
        assert len(line) < len(cfg) + 400, line
    else:
        assert r.exception is None and "Traceback" not in r.output, r.output
