"""Hostile inputs of the eleventh adversarial sweep (after test_hostile_sweep10.py): config.json fields of the 2025-2026
families read under one spelling only (the MTP layer count, tie_word_embeddings, Nemotron-H's mamba_n_groups), fields
a config leaves out priced with wmtp's own fallback instead of the default Hugging Face's config class gives them
(Qwen3-Next's head_dim 256, DeepSeek-V3's first_k_dense_replace 3), layer_types that are no list or list another
number of layers (and Nemotron-H's own derived layer_types refused), a null quantization_config that hid ModelOpt's
sidecar; UTF-16 files called binary; a profile point whose batch is null; engine fits (`engines --fit`) over
structure files of the wrong types (tracebacks), memory sections or model spellings the written preset could not be
read with, points given twice or written with '_' / '+' / other scripts' digits, rows longer or shorter than the
header, an --out over the structure file; outputs written into the shipped data folders (a new profiles/KEY.json or
engines/NAME.json there changes every later answer); control characters of paths and names (a newline split the one
`error:` line, an ESC reached the terminal); and `models --json` / `hardware --json` coloured where colour is forced.
Each bad input ends in exit code 1 and exactly one `error:` line (no traceback) and writes nothing; each family has a
legal control beside it. Expected values are worked out by hand in the comments or are properties (a field left out
equals that field at HF's default), not taken from the code under test."""

from __future__ import annotations

import codecs
import json
import os
import shutil
from pathlib import Path

import pytest

from wmtp.engine import engines_dir
from wmtp.errors import ConfigError
from wmtp.hf_config import load_config
from wmtp.profile import PROFILES_DIR
from cli_checks import assert_one_error, invoke  # noqa: E402

QNEXT = {"model_type": "qwen3_next", "hidden_size": 2048, "vocab_size": 151936, "num_hidden_layers": 48,
         "full_attention_interval": 4, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
         "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_value_head_dim": 128,
         "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 512,
         "shared_expert_intermediate_size": 512, "mtp_num_hidden_layers": 1}
DS = {"model_type": "deepseek_v3", "hidden_size": 7168, "vocab_size": 129280, "num_hidden_layers": 61,
      "num_attention_heads": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
      "v_head_dim": 128, "q_lora_rank": 1536, "n_routed_experts": 256, "num_experts_per_tok": 8,
      "moe_intermediate_size": 2048, "n_shared_experts": 1, "first_k_dense_replace": 3,
      "intermediate_size": 18432, "num_nextn_predict_layers": 1}
GLM = {"model_type": "glm4_moe", "hidden_size": 5120, "vocab_size": 151552, "num_hidden_layers": 92,
       "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128, "n_routed_experts": 160,
       "num_experts_per_tok": 8, "moe_intermediate_size": 1536, "n_shared_experts": 1,
       "first_k_dense_replace": 3, "intermediate_size": 12288, "num_nextn_predict_layers": 1}
NEM = {"model_type": "nemotron_h", "hidden_size": 2688, "vocab_size": 131072, "hybrid_override_pattern": "MEM*E-",
       "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "mamba_num_heads": 64,
       "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "n_routed_experts": 128, "intermediate_size": 4096,
       "num_experts_per_tok": 6, "moe_intermediate_size": 1856, "num_nextn_predict_layers": 1}
MIMO = {"model_type": "mimo", "hidden_size": 4096, "vocab_size": 151680, "num_hidden_layers": 36,
        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 11008, "num_nextn_predict_layers": 1}


def _without(doc: dict, *keys: str) -> dict:
    return {k: v for k, v in doc.items() if k not in keys}


def write(path: Path, doc) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(doc, bytes):
        path.write_bytes(doc)
    else:
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def _predict_json(*args) -> dict:
    r = invoke("predict", *args, "--ctx", "64K", "--json")
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    return json.loads(r.stdout)


# ----------------------------------------------------------------- the MTP layer count, under either of its names
@pytest.mark.parametrize("base, field", [
    (_without(QNEXT, "mtp_num_hidden_layers"), "num_nextn_predict_layers"),  # Qwen read only mtp_num_hidden_layers
    (_without(DS, "num_nextn_predict_layers"), "mtp_num_hidden_layers"),  # DeepSeek only num_nextn_predict_layers
    (_without(MIMO, "num_nextn_predict_layers"), "mtp_num_hidden_layers"),
])
def test_zero_mtp_layers_under_the_other_name_is_refused(tmp_path, base, field):
    """The config says the checkpoint has no MTP layer; it was priced with one MTP forward per draft token."""
    bad = write(tmp_path / "m" / "config.json", {**base, field: 0})
    assert_one_error(invoke("predict", "--config", bad, "--ctx", "64K"), f"{field} is 0", "no MTP head")
    ok = write(tmp_path / "ok" / "config.json", {**base, field: 1})  # the control
    assert invoke("predict", "--config", ok, "--ctx", "64K").exit_code == 0


def test_two_mtp_layer_counts_that_differ_are_refused(tmp_path):
    bad = write(tmp_path / "m" / "config.json", {**QNEXT, "num_nextn_predict_layers": 3})  # and mtp_num_hidden_layers 1
    assert_one_error(invoke("predict", "--config", bad, "--ctx", "64K"), "num_nextn_predict_layers (3)",
                     "mtp_num_hidden_layers (1)", "differ")
    same = write(tmp_path / "same" / "config.json", {**QNEXT, "num_nextn_predict_layers": 1})  # the control
    assert invoke("predict", "--config", same, "--ctx", "64K").exit_code == 0


def test_mtp_layers_counted_under_the_other_name_size_the_draft_kv(tmp_path):
    """DeepSeek-V3 with mtp_num_hidden_layers 2: two MTP layers cache 2 x 576 latent elements x 2 B = 2304 B per token,
    at 64K tokens 2304 x 65536 = 150,994,944 B of native draft KV (it was priced with one layer: half)."""
    p = write(tmp_path / "ds" / "config.json", {**_without(DS, "num_nextn_predict_layers"), "mtp_num_hidden_layers": 2})
    doc = _predict_json("--config", p)
    assert doc["memory"]["per_request"]["native"]["draft_kv_bytes"] == 2 * 576 * 2 * 65536


# ------------------------------------------------------------ fields left out: the default HF's config class gives
def test_qwen3_next_without_head_dim_takes_hf_default(tmp_path):
    """HF's Qwen3NextConfig sets head_dim = 256 where config.json has none (hidden_size / heads is 2048 / 16 = 128):
    12 full-attention layers x 2 (K, V) x 2 KV heads x 256 x 2 B x 65536 tokens = 1,610,612,736 B of target KV."""
    p = write(tmp_path / "qn" / "config.json", _without(QNEXT, "head_dim"))
    doc = _predict_json("--config", p)
    assert doc["memory"]["per_request"]["native"]["target_kv_bytes"] == 12 * 2 * 2 * 256 * 2 * 65536


@pytest.mark.parametrize("base, fields", [
    (DS, ("first_k_dense_replace", "n_shared_experts", "q_lora_rank")),  # HF DeepseekV3Config: 3, 1, 1536
    (QNEXT, ("head_dim", "shared_expert_intermediate_size")),  # HF Qwen3NextConfig: 256, 512
    (NEM, ("head_dim",)),  # HF NemotronHConfig: 128 (hidden_size / heads = 2688 / 32 = 84)
])
def test_fields_left_out_equal_hf_defaults(tmp_path, base, fields):
    """The property: these configs hold exactly HF's default values, so leaving the fields out changes nothing."""
    full = load_config(write(tmp_path / "full" / "config.json", base))
    bare = load_config(write(tmp_path / "bare" / "config.json", _without(base, *fields)))
    for attr in ("head_dim", "n_dense_ffn", "n_moe", "n_shared", "shared_ffn", "mla_q_rank", "total_params"):
        assert getattr(bare, attr) == getattr(full, attr), attr


def test_glm_without_first_k_dense_replace_has_one_dense_layer(tmp_path):
    """HF's Glm4MoeConfig: first_k_dense_replace 1, n_shared_experts 1; wmtp priced all 92 layers MoE, no shared one."""
    bare = _without(GLM, "first_k_dense_replace", "n_shared_experts")
    spec = load_config(write(tmp_path / "glm" / "config.json", bare))
    assert (spec.n_dense_ffn, spec.n_moe, spec.n_shared) == (1, 91, 1)


def test_an_explicit_null_keeps_its_meaning(tmp_path):
    """The control: q_lora_rank null is DeepSeek-V2-Lite's 'no query compression', not HF's 1536."""
    assert load_config(write(tmp_path / "ds" / "config.json", {**DS, "q_lora_rank": None})).mla_q_rank == 0


def test_nemotron_mamba_n_groups_is_n_groups(tmp_path):
    """mamba_n_groups is the name HF's NemotronHConfig takes for n_groups (and mamba_d_conv for conv_kernel); it was
    ignored and 8 groups priced."""
    spec = load_config(write(tmp_path / "a" / "config.json", {**_without(NEM, "n_groups"), "mamba_n_groups": 16,
                                                              "mamba_d_conv": 3}))
    assert (spec.ssm_groups, spec.conv_kernel) == (16, 3)
    bad = write(tmp_path / "b" / "config.json", {**NEM, "mamba_n_groups": 16})  # and n_groups 8
    assert_one_error(invoke("predict", "--config", bad, "--ctx", "64K"), "n_groups (8)", "mamba_n_groups (16)")


# ---------------------------------------------------------------------------- tie_word_embeddings in every family
@pytest.mark.parametrize("base", [QNEXT, DS, NEM])
def test_tied_embeddings_in_every_family(tmp_path, base):
    """Only the dense families read tie_word_embeddings: a tied MoE model counted its vocabulary matrix twice. Tied,
    the lm_head shares the embedding: vocab_size x hidden_size parameters fewer."""
    tied = load_config(write(tmp_path / "t" / "config.json", {**base, "tie_word_embeddings": True}))
    untied = load_config(write(tmp_path / "u" / "config.json", {**base, "tie_word_embeddings": False}))
    assert untied.total_params - tied.total_params == base["vocab_size"] * base["hidden_size"]
    bad = write(tmp_path / "s" / "config.json", {**base, "tie_word_embeddings": "false"})
    assert_one_error(invoke("predict", "--config", bad, "--ctx", "64K"), "tie_word_embeddings", "true or false")


# ------------------------------------------------------------------------------------------------ layer_types
@pytest.mark.parametrize("base, types, fragment", [
    (MIMO, "sliding_attention", "must list each layer's kind"),  # a string was ignored: full attention, silently
    (MIMO, {"0": "full_attention"}, "must list each layer's kind"),
    (MIMO, ["full_attention"] * 3, "lists 3 layers, num_hidden_layers is 36"),
    (DS, ["full_attention"] * 62, "lists 62 layers, num_hidden_layers is 61"),
    (NEM, ["mamba", "moe", "mamba", "attention", "moe"], "lists 5 layers, hybrid_override_pattern 6"),
    (NEM, ["mamba", "moe", "mamba", "sliding_attention", "moe", "mlp"], "layer_types[3] is 'sliding_attention'"),
])
def test_layer_types_that_describe_other_layers(tmp_path, base, types, fragment):
    p = write(tmp_path / "m" / "config.json", {**base, "layer_types": types})
    assert_one_error(invoke("predict", "--config", p, "--ctx", "64K"), "layer_types", fragment)


@pytest.mark.parametrize("base, types", [
    (MIMO, ["full_attention"] * 36),
    # Nemotron-H's config class derives layer_types from the pattern (M mamba, * attention, E moe, '-' mlp or moe):
    # a config saved with them was refused as attention wmtp does not model
    (NEM, ["mamba", "moe", "mamba", "attention", "moe", "mlp"]),
    (NEM, ["mamba", "moe", "mamba", "attention", "moe", "moe"]),
])
def test_layer_types_of_every_layer_price_as_without(tmp_path, base, types):
    with_types = load_config(write(tmp_path / "a" / "config.json", {**base, "layer_types": types}))
    without = load_config(write(tmp_path / "b" / "config.json", base))
    assert (with_types.n_full_attn, with_types.n_linear, with_types.total_params) == \
        (without.n_full_attn, without.n_linear, without.total_params)


@pytest.mark.parametrize("value", [0, False, {}, "0,1"])
def test_mlp_only_layers_that_is_no_list(tmp_path, value):
    """0, false and {} were read as 'no dense layer' (HF's `layer_idx not in 0` is a TypeError)."""
    p = write(tmp_path / "m" / "config.json", {**QNEXT, "mlp_only_layers": value})
    assert_one_error(invoke("predict", "--config", p, "--ctx", "64K"), "mlp_only_layers")
    for ok in ([], None):  # the controls
        assert invoke("predict", "--config", write(tmp_path / "ok" / "config.json", {**QNEXT, "mlp_only_layers": ok}),
                      "--ctx", "64K").exit_code == 0


# --------------------------------------------------------------- a null quantization_config beside ModelOpt's file
def test_null_quantization_config_reads_the_modelopt_sidecar(tmp_path):
    """vLLM reads hf_quant_config.json where config.json's quantization_config is absent or null; null hid the
    sidecar, and an NVFP4 checkpoint was priced as bf16."""
    side = {"quantization": {"quant_algo": "NVFP4", "exclude_modules": ["lm_head"]}}
    for name, doc in (("null", {**MIMO, "quantization_config": None}), ("absent", MIMO)):
        write(tmp_path / name / "hf_quant_config.json", side)
        assert _predict_json("--config", write(tmp_path / name / "config.json", doc))["weight_dtype"] == "nvfp4"
    # the control: no sidecar, no quantization
    assert _predict_json("--config", write(tmp_path / "plain" / "config.json", MIMO))["weight_dtype"] == "bf16"


# ------------------------------------------------------------------------------------- UTF-16 / UTF-32 files
@pytest.mark.parametrize("codec, name", [("utf-16", "UTF-16"), ("utf-32", "UTF-32")])
def test_a_wide_unicode_config_says_so(tmp_path, codec, name):
    """A UTF-16 config.json (Windows editors, PowerShell's `>`) was called 'a binary file, not text'."""
    p = write(tmp_path / "m" / "config.json", json.dumps(MIMO).encode(codec))  # Python writes the byte-order mark
    assert_one_error(invoke("predict", "--config", p, "--ctx", "64K"), f"is {name} text", "UTF-8", "iconv")


def test_a_utf8_config_with_a_byte_order_mark_is_read(tmp_path):  # the control
    p = write(tmp_path / "m" / "config.json", codecs.BOM_UTF8 + json.dumps(MIMO).encode())
    assert _predict_json("--config", p)["model"] == "m"


# --------------------------------------------------------------------------------- a profile point's null batch
def _profile_with_point(tmp_path, **point) -> Path:
    doc = json.loads((PROFILES_DIR / "h200.json").read_text())
    pt = doc["components"]["gemm"]["points"][0]
    for k, v in point.items():
        if v is _ABSENT:
            pt.pop(k)
        else:
            pt[k] = v
    return write(tmp_path / "p.json", doc)


_ABSENT = object()


def test_profile_point_with_a_null_batch_is_corrupt(tmp_path):
    """`"batch": null` passed the check (null read as absent) and was a TypeError traceback in the pricing."""
    r = invoke("predict", "--model", "q35", "--profile", _profile_with_point(tmp_path, batch=None), "--ctx", "256K")
    assert_one_error(r, "component 'gemm'", "points", "batch")


def test_profile_point_without_a_batch_prices(tmp_path):  # the control: absent is batch 1
    r = invoke("predict", "--model", "q35", "--profile", _profile_with_point(tmp_path, batch=_ABSENT), "--ctx", "256K")
    assert r.exit_code == 0, r.output


# ------------------------------------------------------------------------------------------- engines --fit
POINTS = (engines_dir() / "sglang-b200-paper.points.csv").read_text()
STRUCTURE = json.loads((engines_dir() / "sglang-b200-paper.structure.json").read_text())


def _fit(tmp_path, points: str = POINTS, structure=STRUCTURE):
    d = tmp_path / "fit"
    write(d / "mine.points.csv", points)
    write(d / "mine.structure.json", structure)
    out = d / "out.json"
    return invoke("engines", "--fit", d / "mine.points.csv", "--hw", "b200", "--out", out), out


@pytest.mark.parametrize("changes, fragment", [
    ({"counts": 5}, "counts must be an object"),  # TypeError: 'int' object is not iterable
    ({"counts": ["verify_index_walks"]}, "counts must be an object"),  # TypeError: argument after ** must be a mapping
    ({"shared": 5}, "lists of term names"),
    ({"per_model": [1]}, "lists of term names"),
    ({"kernel_profile": "../../../etc/h200"}, "kernel_profile must name a shipped profile"),
    ({"memory": "sglang"}, "memory must be an object"),  # the preset was written, and predict refused it
    ({"memory": {**STRUCTURE["memory"], "mem_fraction_static": 2}}, "mem_fraction_static"),
    ({"memory": {**STRUCTURE["memory"], "chunked_prefill": 1}}, "unknown settings chunked_prefill"),
])
def test_engine_structure_of_the_wrong_shape(tmp_path, changes, fragment):
    r, out = _fit(tmp_path, structure={**STRUCTURE, **changes})
    assert_one_error(r, "engine structure", fragment)
    assert not out.exists() and not out.with_suffix(".md").exists()


def test_engine_fit_whose_preset_would_be_refused_writes_nothing(tmp_path):
    """Named kernels for one model only: every per-model row must name the same terms, so --framework refused the
    preset the fit had written."""
    r, out = _fit(tmp_path, structure={**STRUCTURE, "named": {"q35": STRUCTURE["named"]["q35"]}})
    assert_one_error(r, "per_model.", "lacks moe_call_ms, moe_tbps")
    assert not out.exists() and not out.with_suffix(".md").exists()


def _rows(edit) -> str:
    lines = POINTS.splitlines()
    return "\n".join([lines[0]] + [edit(i, ln) for i, ln in enumerate(lines[1:], start=2)]) + "\n"


@pytest.mark.parametrize("edit, fragment", [
    (lambda i, ln: ln.replace("33.9", "3_3.9") if i == 4 else ln, "line 4"),  # float() read 33.9
    (lambda i, ln: ln.replace("1040000", "1_040_000") if i == 4 else ln, "line 4"),  # int() read 1040000
    (lambda i, ln: ln.replace("1040000", "+1040000") if i == 4 else ln, "line 4"),
    (lambda i, ln: ln.replace("1040000", "١٠٤٠٠٠٠") if i == 4 else ln, "line 4"),  # Arabic-Indic digits
    (lambda i, ln: ln + ",extra" if i == 5 else ln, "more fields than the header"),  # an unquoted comma
    (lambda i, ln: "q35,native,1040000" if i == 5 else ln, "fewer fields than the header"),
])
def test_engine_points_written_oddly(tmp_path, edit, fragment):
    r, out = _fit(tmp_path, points=_rows(edit))
    line = assert_one_error(r, "engine points", fragment)
    assert "Traceback" not in line and not out.exists()


def test_engine_point_given_twice_is_refused(tmp_path):
    """A published point pasted twice weighed twice in the fit (its relative error counted double)."""
    lines = POINTS.splitlines()
    r, out = _fit(tmp_path, points="\n".join(lines + [lines[3]]) + "\n")
    assert_one_error(r, f"line {len(lines) + 1}", "same point as line 4", "q122 native")
    assert not out.exists()


def test_engine_points_model_key_in_any_case_fits_as_the_registry_row(tmp_path):
    """'Q35' was a model of its own beside the structure's q35: its per-model row lacked q35's named MoE kernel and
    predict refused the preset. The property: the fit of 'Q35' rows is the fit of 'q35' rows."""
    upper = _rows(lambda i, ln: ln.replace("q35,", "Q35,", 1))
    assert upper != POINTS
    docs = []
    for name, pts in (("a", POINTS), ("b", upper)):
        r, out = _fit(tmp_path / name, points=pts)
        assert r.exit_code == 0, r.output
        docs.append(json.loads(out.read_text()))
    assert docs[0]["per_model"] == docs[1]["per_model"] and docs[0]["terms"] == docs[1]["terms"]
    r = invoke("predict", "--model", "q35", "--hw", "b200", "--framework", tmp_path / "b" / "fit" / "out.json")
    assert r.exit_code == 0, r.output


def test_engine_fit_out_over_its_structure_file_is_refused(tmp_path):
    """NAME.structure.json beside the points is an input of the fit: --out naming it replaced it with the preset."""
    d = tmp_path / "fit"
    write(d / "mine.points.csv", POINTS)
    structure = write(d / "mine.structure.json", STRUCTURE)
    before = structure.read_bytes()
    r = invoke("engines", "--fit", d / "mine.points.csv", "--out", structure)
    assert_one_error(r, "engine structure", "would destroy that input")
    assert structure.read_bytes() == before and not structure.with_suffix(".md").exists()


def test_engine_points_with_spaces_around_a_number_fit(tmp_path):  # the control: ' 1040000 ' is 1040000
    r, _ = _fit(tmp_path, points=_rows(lambda i, ln: ln.replace(",1040000,", ", 1040000 ,") if i == 4 else ln))
    assert r.exit_code == 0, r.output


# --------------------------------------------------------------------------- outputs inside the shipped data folders
@pytest.fixture
def shipped_links(tmp_path):
    """Symlinks to the shipped profiles and engines folders; any file a failing case wrote there is removed."""
    before = {d: set(os.listdir(d)) for d in (PROFILES_DIR, engines_dir())}
    (tmp_path / "profiles").symlink_to(PROFILES_DIR, target_is_directory=True)
    (tmp_path / "engines").symlink_to(engines_dir(), target_is_directory=True)
    yield tmp_path
    for d, names in before.items():
        for extra in set(os.listdir(d)) - names:
            p = d / extra
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        assert set(os.listdir(d)) == names


@pytest.mark.parametrize("args", [
    # profiles/b200.json is the default profile of --hw b200: a CSV there broke every b200 answer
    ["sweep", "ctx", "--model", "q35", "--csv", "{t}/profiles/b200.json"],
    # engines/NAME.json is a preset: an HTML there broke `wmtp engines` and --framework NAME
    ["report", "--model", "q35", "--out", "{t}/engines/mine.json"],
    ["calibrate", "--from-raw", str(PROFILES_DIR / "h200.raw.csv.gz"), "--out", "{t}/profiles/new"],
    ["engines", "--fit", str(engines_dir() / "sglang-b200-paper.points.csv"), "--out", "{t}/engines/refit.json"],
])
def test_an_output_into_the_shipped_data_folders_is_refused(shipped_links, args):
    r = invoke(*[a.format(t=shipped_links) for a in args])
    assert_one_error(r, "where wmtp keeps the profiles and engine presets it ships")


def test_add_tp_into_a_profile_linked_to_the_shipped_one_is_refused(tmp_path):
    """--add-tp merges into --out/profile.json in place: a link to the shipped H200 profile rewrote it."""
    out = tmp_path / "cal"
    out.mkdir()
    (out / "profile.json").symlink_to(PROFILES_DIR / "h200.json")
    before = (PROFILES_DIR / "h200.json").read_bytes()
    r = invoke("calibrate", "--add-tp", tmp_path / "tp", "--out", out)
    assert_one_error(r, "a file wmtp ships")
    assert (PROFILES_DIR / "h200.json").read_bytes() == before


def test_an_output_beside_the_data_folders_is_written(tmp_path):  # the control
    r = invoke("sweep", "ctx", "--model", "q35", "--csv", tmp_path / "profiles" / "b200.json")
    assert r.exit_code == 0 and (tmp_path / "profiles" / "b200.json").is_file(), r.output


# ------------------------------------------------------------------------ control characters of paths and names
def test_a_newline_in_a_path_stays_in_one_error_line(tmp_path):
    """An error naming the path 'a<newline>b' was two lines: the second did not start with 'error:'."""
    line = assert_one_error(invoke("predict", "--config", tmp_path / "a\nb" / "config.json"), "cannot read config")
    assert "a\\nb" in line


def test_a_newline_in_an_option_value_stays_in_one_error_line():
    line = assert_one_error(invoke("predict", "--model", "q35", "--task", "c\nwe"), "task")
    assert "c\\nwe" in line


@pytest.mark.parametrize("arch, folder", [("Qwen\x1b]0;pwned\x07\x1b[2J", "m"), ("MiMo", "evil\x1b[31mdir")])
def test_a_config_name_with_terminal_escapes_is_printed_escaped(tmp_path, arch, folder):
    """architectures[0] (or the model folder's name) is printed as the model's name: an ESC sequence from a downloaded
    config.json reached the terminal (a title change, a cleared screen)."""
    p = write(tmp_path / folder / "config.json", {**MIMO, "architectures": [arch]})
    r = invoke("predict", "--config", p, "--ctx", "64K")
    assert r.exit_code == 0, r.output
    assert "\x1b" not in r.output and "\x07" not in r.output
    assert "\\x1b" in r.output.splitlines()[0]


def test_an_ordinary_name_is_printed_as_written(tmp_path):  # the control
    p = write(tmp_path / "m" / "config.json", {**MIMO, "architectures": ["MiMoForCausalLM"]})
    r = invoke("predict", "--config", p, "--ctx", "64K")
    assert r.exit_code == 0 and r.output.startswith("MiMoForCausalLM (m) on"), r.output


# ------------------------------------------------------------------------------ --json wherever colour is forced
@pytest.mark.parametrize("args", [["models"], ["hardware"], ["predict", "--model", "q35", "--ctx", "64K"], ["engines"]])
def test_json_is_plain_where_colour_is_forced(monkeypatch, args):
    """FORCE_COLOR (set in many CI systems): `models --json` and `hardware --json` came out of rich's print_json
    syntax-coloured, escape codes inside the JSON; a parser read none of it. Every --json is json.dumps' text."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    r = invoke(*args, "--json")
    assert r.exit_code == 0, r.output
    assert "\x1b" not in r.stdout
    json.loads(r.stdout)
