"""Hostile inputs of the sixteenth adversarial sweep (after test_hostile_sweep15.py).

`calibrate --from-raw`: rows no GPU can have run were fitted (batch 0 read as 1 request, window 0 as no window, a
blank ctx as attention over 0 keys, d 0, a draft loop of gamma 0, a context of 1e17 tokens, 1.5 query heads per KV
head floored, a kernel that moved 0 bytes, a copy of 0 bytes making a 0 TB/s ceiling), attention rows of another
backend or a tuning variant were averaged into the profile's medians, a row with no status or no kernel was dropped,
and rows the fit does not read (a failed or skipped shape, an unknown kernel, a draft loop of an unregistered
model) vanished without a word: each bad row is now one `error:` line naming file, data row and column, each left
row counted in a `note:` line and in the profile's provenance. A header-only CSV named the models it lacked; a row
with too many fields did not say where.

Nemotron-H config.json: `moe_latent_size` as wide as `hidden_size` or wider was priced as given; a shared expert of
width 0 was priced as none; the model row's own errors (q_heads / kv_heads, top_k / n_experts) did not name the
config's fields.

quantization_config: compressed-tensors FP8 blocks other than 128 x 128, 4-bit float groups of 32 (MXFP4), sparse
(2:4) layouts and ModelOpt NVFP4 with a group of 32 were priced as the dense 128 x 128 / NVFP4 formats; ModelOpt's
INT4 AWQ group_size and AutoAWQ's `w_bit` / `q_group_size` were not read.

Each bad input ends in exit code 1 and exactly one `error:` line (no traceback) and writes nothing; each has a legal
control beside it. Expected values are worked out by hand from the input each test writes."""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path

import pytest

from wmtp.errors import ConfigError, WmtpError
from wmtp.hf_config import load_config, spec_from_config
from wmtp.profile import PROFILES_DIR
from wmtp.quant_config import weight_formats
from cli_checks import assert_one_error, invoke  # noqa: E402


# --- calibrate --from-raw: a small raw sweep ------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _small_raw() -> tuple[str, ...]:
    """The shipped H200 sweep's q35 rows and ceilings, three replays of each shape (a refit of `--models q35` in
    seconds): the header first, data row i at index i."""
    text = gzip.decompress((PROFILES_DIR / "h200.raw.csv.gz").read_bytes()).decode().splitlines()
    head = text[0].split(",")
    model, rep = head.index("model"), head.index("rep")
    return (text[0], *[ln for ln in text[1:] if ln.split(",")[model] in ("q35", "") and int(ln.split(",")[rep]) < 3])


def _col(name: str) -> int:
    return _small_raw()[0].split(",").index(name)


def _first_row(kind: str) -> int:
    """The data row of the first `kind` row (its index in `_small_raw`)."""
    return next(i for i, ln in enumerate(_small_raw()) if i and ln.split(",")[0] == kind)


def _edited(kind: str, **cells: str) -> tuple[list[str], int]:
    """The small raw with cells of the first `kind` row replaced; (lines, that row's data row number)."""
    lines = list(_small_raw())
    row = _first_row(kind)
    parts = lines[row].split(",")
    for col, value in cells.items():
        parts[_col(col)] = value
    lines[row] = ",".join(parts)
    return lines, row


def _write(tmp_path: Path, lines: list[str], name: str = "raw.csv") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def _refit(raw: Path, out: Path):
    return invoke("calibrate", "--from-raw", raw, "--out", out, "--models", "q35")


@pytest.mark.parametrize("kind, cells, fragments", [
    ("decode_attn", {"batch": "0"}, ["has batch 0", "1..1048576 requests"]),  # was read as 1 request
    ("verify_attn", {"ctx": "0"}, ["has ctx 0", "1..17179869184 context tokens"]),
    ("verify_attn", {"d": "0"}, ["has d 0", "1..64 query tokens"]),
    ("verify_attn", {"d": "65"}, ["has d 65", "1..64"]),  # past the deepest draft any command models
    ("decode_attn", {"ctx": "100000000000000000"}, ["has ctx 1e+17", "1..17179869184"]),  # 1e17 < MAX_SHAPE 1e18
    ("decode_attn", {"window": "0"}, ["has window 0", "a native row leaves window blank"]),  # was: no window
    ("draft_loop", {"d": "1"}, ["has d 1", "2..64", "gamma = d - 1 >= 1"]),  # a loop of 0 forwards
    ("decode_attn", {"ctx": ""}, ["has ctx nothing (a blank cell)", "every decode_attn row gives its ctx"]),
    ("verify_attn", {"d": "NaN"}, ["has d nothing", "every verify_attn row gives its d"]),
    ("linear_state", {"batch": ""}, ["has batch nothing", "every linear_state row gives its batch"]),
    ("decode_attn", {"q_heads": "3"}, ["has q_heads 3 and kv_heads 2", "whole number of query heads"]),
    ("gemm", {"bytes": "0"}, ["has bytes 0", "moved bytes"]),
    ("copy", {"bytes": "0"}, ["has bytes 0"]),  # the copy ceiling: 0 TB/s
    ("gemm_peak", {"flops": "0"}, ["has flops 0", "gemm peak"]),
    ("decode_attn", {"status": ""}, ["has status nothing", "ok or why its shape failed"]),  # was dropped
    ("decode_attn", {"impl": "flashinfer"}, ["has impl 'flashinfer'", "attention backend 'wmtp'"]),  # averaged in
    ("verify_attn", {"impl": "wmtp[num_splits=8]"}, ["has impl 'wmtp[num_splits=8]'", "tuning variant"]),
])
def test_raw_row_no_gpu_ran_is_refused_naming_row_and_column(tmp_path, kind, cells, fragments):
    lines, row = _edited(kind, **cells)
    raw, out = _write(tmp_path, lines), tmp_path / "cal"
    assert_one_error(_refit(raw, out), str(raw), f"data row {row} (kernel '{kind}')", *fragments)
    assert not out.exists()


def test_raw_row_without_a_kernel_is_refused(tmp_path):
    lines, row = _edited("decode_attn", kernel="")
    raw, out = _write(tmp_path, lines), tmp_path / "cal"
    assert_one_error(_refit(raw, out), f"data row {row} (no kernel)", "has kernel nothing")
    assert not out.exists()


def test_raw_line_cut_short_is_refused_where_it_was_dropped(tmp_path):
    """A line cut after its first cells (an interrupted write): its status reads blank, and the row was dropped."""
    lines = list(_small_raw())
    lines.append(",".join(lines[_first_row("decode_attn")].split(",")[:4]))
    raw = _write(tmp_path, lines)
    assert_one_error(_refit(raw, tmp_path / "cal"), f"data row {len(lines) - 1} ", "has status nothing")


@pytest.fixture(scope="module")
def plain_fit(tmp_path_factory) -> dict:
    """The profile of the small raw as it stands."""
    tmp = tmp_path_factory.mktemp("plain")
    r = _refit(_write(tmp, list(_small_raw())), tmp / "cal")
    assert r.exit_code == 0, r.output
    return json.loads((tmp / "cal" / "profile.json").read_text())


def test_rows_the_fit_leaves_are_counted_in_one_note(tmp_path, plain_fit):
    """Three failed decode shapes, two skipped ones, a kernel no fit knows and a draft loop of an unregistered model:
    they vanished; now one `note:` line on stderr, the counts in the provenance, the same fit."""
    lines = list(_small_raw())
    dec, loop = lines[_first_row("decode_attn")].split(","), lines[_first_row("draft_loop")].split(",")

    def row(parts, **cells):
        parts = list(parts)
        for col, value in cells.items():
            parts[_col(col)] = value
        return ",".join(parts)

    oom = "error: OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    lines += [row(dec, status=oom, time_ms="", rep="0", ctx=str(c)) for c in (8192, 32768, 131072)]
    lines += [row(dec, status="skipped: needs 9.0 GiB of KV; this GPU holds 4.0 GiB for the run", time_ms="",
                  rep="0", batch=str(b)) for b in (16, 32)]
    lines.append(row(dec, kernel="foo"))
    lines.append(row(loop, model="zzz"))
    out = tmp_path / "cal"
    r = _refit(_write(tmp_path, lines), out)
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output
    note = ("7 rows not fitted: status 'error: OutOfMemoryError' (3), status 'skipped' (2), draft_loop of model 'zzz' "
            "(no registry row to price it) (1), unknown kernel 'foo' (1)")
    assert r.stderr.splitlines() == [f"note: {note}"]
    assert r.stdout.startswith("wrote ")
    prof = json.loads((out / "profile.json").read_text())
    assert prof["provenance"]["skipped_rows"] == {"rows": 7, "reasons": [
        {"reason": "status 'error: OutOfMemoryError'", "rows": 3}, {"reason": "status 'skipped'", "rows": 2},
        {"reason": "draft_loop of model 'zzz' (no registry row to price it)", "rows": 1},
        {"reason": "unknown kernel 'foo'", "rows": 1}]}
    assert note in (out / "profile.md").read_text()
    assert prof["components"] == plain_fit["components"]  # the rows left out weigh nothing in the fit


def test_a_raw_whose_every_row_is_fitted_has_no_note(plain_fit):
    assert "skipped_rows" not in plain_fit["provenance"]


@pytest.mark.parametrize("kind, cells", [
    ("decode_attn", {"window": ""}),  # a native decode: no window
    ("decode_attn", {"d": ""}),  # a decode is one query per request: its work items carry no d
    ("index_build", {"d": ""}),
    ("decode_attn", {"sink": "0"}),  # no attention sink is a shape
])
def test_raw_rows_that_leave_out_what_their_kind_does_not_need_are_fitted(tmp_path, kind, cells):
    r = _refit(_write(tmp_path, _edited(kind, **cells)[0]), tmp_path / "cal")
    assert r.exit_code == 0, r.output
    assert r.stderr == ""  # nothing left out, nothing to note
    assert (tmp_path / "cal" / "profile.json").is_file()


@pytest.mark.parametrize("variant", ["bom", "crlf", "bom+crlf", "plain text named .gz", "gzip"])
def test_raw_csv_in_another_encoding_or_line_end_fits_the_same(tmp_path, plain_fit, variant):
    text = "\n".join(_small_raw()) + "\n"
    if "crlf" in variant:
        text = text.replace("\n", "\r\n")
    data = ("\ufeff" if "bom" in variant else "").encode() + text.encode()
    p = tmp_path / ("raw.csv.gz" if "gz" in variant else "raw.csv")
    p.write_bytes(gzip.compress(data) if variant == "gzip" else data)
    r = _refit(p, tmp_path / "cal")
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "cal" / "profile.json").read_text())["components"] == plain_fit["components"]


def _gz_truncated(tmp_path: Path) -> Path:
    blob = gzip.compress(("\n".join(_small_raw()) + "\n").encode())
    p = tmp_path / "raw.csv.gz"
    p.write_bytes(blob[: len(blob) // 2])
    return p


@pytest.mark.parametrize("make, fragments", [
    (lambda t: _write(t, [_small_raw()[0]]), ["holds a header and no data rows"]),  # named the models it lacked
    (lambda t: _write(t, [_small_raw()[0].replace(",", "\t")] + list(_small_raw()[1:3])), ["lacks columns"]),
    (_gz_truncated, ["raw.csv.gz is not a readable sweep CSV", "EOFError"]),
    (lambda t: _write(t, list(_small_raw()) + [",".join(["1"] * 25)]),  # 25 fields under a 19-column header
     ["not a readable sweep CSV", f"Expected 19 fields in line {len(_small_raw()) + 1}, saw 25"]),
])
def test_raw_csv_that_is_no_sweep_says_so(tmp_path, make, fragments):
    raw, out = make(tmp_path), tmp_path / "cal"
    assert_one_error(_refit(raw, out), *fragments)
    assert not out.exists()


class _SweepStarted(Exception):
    pass


@pytest.mark.parametrize("backend", ["flashinfer", "wmtp"])
def test_parts_that_keep_another_backends_attention_are_refused_before_the_sweep(tmp_path, monkeypatch, backend):
    """`--parts components --backend flashinfer --base-raw` of a wmtp sweep kept wmtp's attention rows under a
    flashinfer profile; the fit now refuses them, so the sweep refuses first instead of after the GPU time."""
    import wmtp.measure.run as mr
    from wmtp.calibrate.sweep_run import run_calibrate

    def sweep(*a, **k):
        raise _SweepStarted

    monkeypatch.setattr(mr, "run_sweep", sweep)
    base = _write(tmp_path, list(_small_raw()), "base.csv")  # attention rows of impl wmtp
    if backend == "wmtp":  # the control: the same backend goes on to the sweep
        with pytest.raises(_SweepStarted):
            run_calibrate([], tmp_path / "out", parts=("components",), base_raw=base, backend=backend)
        return
    with pytest.raises(WmtpError, match="its attention rows, which --parts keeps, are of 'wmtp', not of --backend "
                                        "flashinfer"):
        run_calibrate([], tmp_path / "out", parts=("components",), base_raw=base, backend=backend)


def test_check_fitted_rows_counts_by_status_class():
    """The reasons, by hand: an error's exception type, a skip without its message, another status as written."""
    from wmtp.calibrate.raw_rows import skipped_note, status_class

    assert status_class("error: OutOfMemoryError: CUDA out of memory") == "error: OutOfMemoryError"
    assert status_class("skipped: needs 1.0 GiB") == "skipped"
    assert status_class("oom") == "oom"
    reasons = [{"reason": f"status 'r{i}'", "rows": 8 - i} for i in range(8)]
    assert skipped_note({"rows": 36, "reasons": reasons}) == (
        "36 rows not fitted: status 'r0' (8), status 'r1' (7), status 'r2' (6), status 'r3' (5), status 'r4' (4), "
        "status 'r5' (3), 2 other reasons (3)")  # r6 (2) + r7 (1)
    assert skipped_note({}) is None


# --- Nemotron-H config.json -----------------------------------------------------------------------------------------

NEM_SUPER = {"model_type": "nemotron_h", "hidden_size": 4096, "vocab_size": 131072,
             "hybrid_override_pattern": "MEM*EMEM*E", "num_attention_heads": 32, "num_key_value_heads": 2,
             "head_dim": 128, "mamba_num_heads": 128, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8,
             "n_routed_experts": 512, "num_experts_per_tok": 22, "moe_intermediate_size": 2688,
             "moe_latent_size": 1024, "n_shared_experts": 1, "moe_shared_expert_intermediate_size": 5376,
             "num_nextn_predict_layers": 1}


def _config(tmp_path: Path, doc: dict) -> Path:
    d = tmp_path / "model"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(doc))
    return d / "config.json"


@pytest.mark.parametrize("latent, fragments", [
    (4096, ["moe_latent_size (4096) must be smaller than hidden_size (4096)"]),  # as wide as hidden: no latent
    (8192, ["moe_latent_size (8192) must be smaller than hidden_size (4096)"]),
    (-1, ["'moe_latent_size'", "[0, "]),
    (1024.5, ["'moe_latent_size'", "integer"]),
    ("1024", ["'moe_latent_size'", "integer"]),
    (True, ["'moe_latent_size'", "integer"]),
    ([1024], ["'moe_latent_size'", "integer"]),
])
def test_nemotron_latent_that_is_no_narrower_width_is_refused(tmp_path, latent, fragments):
    p = _config(tmp_path, {**NEM_SUPER, "moe_latent_size": latent})
    with pytest.raises(ConfigError) as e:
        load_config(p)
    for f in fragments:
        assert f in str(e.value)
    assert_one_error(invoke("predict", "--config", p), str(p), "moe_latent_size")


@pytest.mark.parametrize("latent, want", [(1024, 1024), (1024.0, 1024), (4095, 4095), (0, 0), (None, 0)])
def test_nemotron_latent_narrower_than_hidden_is_read(latent, want):
    spec = spec_from_config({**NEM_SUPER, "moe_latent_size": latent}, "c.json")
    assert spec.moe_latent == want
    # relu2 experts: up and down (2 matrices) of latent (or hidden) x moe_intermediate_size
    assert spec.expert_params == 2 * (want or 4096) * 2688


def test_nemotron_shared_expert_without_a_width_is_refused():
    with pytest.raises(ConfigError, match="n_shared_experts is 1 but moe_shared_expert_intermediate_size is 0"):
        spec_from_config({**NEM_SUPER, "moe_shared_expert_intermediate_size": 0}, "c.json")
    spec = spec_from_config({**NEM_SUPER, "n_shared_experts": 0, "moe_shared_expert_intermediate_size": 0}, "c.json")
    assert (spec.n_shared, spec.shared_ffn) == (0, 0)


GLM = {"model_type": "glm4_moe", "hidden_size": 5120, "vocab_size": 151552, "num_hidden_layers": 92,
       "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128, "n_routed_experts": 160,
       "num_experts_per_tok": 8, "moe_intermediate_size": 1536, "n_shared_experts": 1,
       "first_k_dense_replace": 3, "intermediate_size": 12288, "num_nextn_predict_layers": 1}


@pytest.mark.parametrize("doc, fragments", [
    ({**GLM, "num_key_value_heads": 128}, ["q_heads must be a multiple of kv_heads",  # more KV heads than query heads
                                           "num_attention_heads 96", "num_key_value_heads 128"]),
    ({**GLM, "num_key_value_heads": 7}, ["num_key_value_heads 7"]),
    ({**GLM, "num_experts_per_tok": 161}, ["top_k <= n_experts", "num_experts_per_tok 161", "n_routed_experts 160"]),
    ({**NEM_SUPER, "num_experts_per_tok": 600}, ["num_experts_per_tok 600", "n_routed_experts 512"]),
    ({**GLM, "hidden_size": 0}, ["hidden must be positive", "hidden_size 0"]),
])
def test_model_row_errors_name_the_config_fields(doc, fragments):
    with pytest.raises(ConfigError) as e:
        spec_from_config(doc, "c.json")
    for f in fragments:
        assert f in str(e.value)


def test_model_row_refuses_a_latent_as_wide_as_hidden():
    from dataclasses import replace

    from wmtp.models import get_model

    nem = get_model("nem")
    assert nem.moe_latent < nem.hidden  # the registry row itself is sound
    with pytest.raises(WmtpError, match="moe_latent must be smaller than hidden"):
        replace(nem, moe_latent=nem.hidden)
    with pytest.raises(WmtpError, match="must be >= 0"):
        replace(nem, n_shared=-1)


# --- quantization_config ---------------------------------------------------------------------------------------------

def _ct(weights: dict, **extra) -> dict:
    return {"quant_method": "compressed-tensors", "config_groups": {"group_0": {"targets": ["Linear"],
                                                                               "weights": weights}},
            "ignore": ["lm_head"], **extra}


FP8_CHANNEL = {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True, "dynamic": False}
W4_GROUP = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}
NVFP4 = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": True}


@pytest.mark.parametrize("q, want", [
    # RedHatAI FP8-dynamic: per-channel fp8 weights, fp8 per-token activations
    (_ct(FP8_CHANNEL), {"weight_dtype": "fp8"}),
    (_ct({"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]}),
     {"weight_dtype": "fp8"}),
    (_ct(W4_GROUP), {"weight_dtype": "int4", "int4_group": 128, "int4_zeros": False}),  # W4A16
    (_ct({**W4_GROUP, "group_size": 32, "symmetric": False}),
     {"int4_group": 32, "int4_zeros": True, "int4_asym": True}),
    (_ct(NVFP4, sparsity_config={"format": "dense", "sparsity_structure": "unstructured"}), {"weight_dtype": "nvfp4"}),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "kv_cache_quant_algo": "FP8",
      "exclude_modules": ["lm_head", "model.layers.61*"]},
     {"weight_dtype": "nvfp4", "mtp_bf16": True}),  # layer 61 of a 61-layer model: the MTP block
    ({"quant_method": "modelopt", "quant_algo": "W4A16_AWQ", "group_size": 64}, {"weight_dtype": "int4",
                                                                                 "int4_group": 64}),  # was 128
    ({"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [128, 128]},
     {"weight_dtype": "fp8"}),
    ({"quant_method": "gptq", "bits": 4, "group_size": -1, "desc_act": False, "sym": True},  # -1: per channel
     {"weight_dtype": "int4", "int4_group": 0, "int4_zeros": True, "int4_asym": False}),
    ({"quant_method": "gptq", "bits": 4, "group_size": 32, "sym": False}, {"int4_group": 32, "int4_asym": True}),
    ({"quant_method": "awq", "w_bit": 4, "q_group_size": 64, "zero_point": True, "version": "gemm"},  # AutoAWQ names
     {"weight_dtype": "int4", "int4_group": 64, "int4_zeros": True, "int4_asym": True}),
    ({"quant_method": "awq", "bits": 4, "w_bit": 4, "group_size": 128}, {"int4_group": 128}),  # both names, agreeing
])
def test_real_checkpoint_quantization_is_read(q, want):
    got = weight_formats({"quantization_config": q, "num_hidden_layers": 61})
    assert {k: got[k] for k in want} == want


@pytest.mark.parametrize("q, fragments", [
    (_ct({"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [64, 64]}),
     ["block_structure is [64, 64]", "128 x 128"]),  # priced as 128 x 128, silently
    (_ct({"num_bits": 4, "type": "float", "group_size": 32}), ["groups of 32 are not NVFP4"]),  # MXFP4
    (_ct(FP8_CHANNEL, sparsity_config={"format": "sparse-24-bitmask", "sparsity_structure": "2:4"}),
     ["stored sparse ('sparse-24-bitmask')", "dense weights only"]),
    (_ct(W4_GROUP, format="marlin-24"), ["stored sparse ('marlin-24')"]),
    (_ct(W4_GROUP, sparsity_config="2:4"), ["sparsity_config must be an object"]),
    (_ct({**W4_GROUP, "num_bits": 3}), ["3-bit 'int' weights"]),
    (_ct({**W4_GROUP, "group_size": 0}), ["group_size must be a positive integer or -1", "got 0"]),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 32}, ["NVFP4 with group_size 32"]),
    ({"quant_method": "modelopt", "quant_algo": "W4A16_AWQ", "group_size": -2}, ["group_size", "got -2"]),
    ({"quant_method": "gptq", "bits": 3, "group_size": 128}, ["gptq with bits=3"]),
    ({"quant_method": "gptq", "bits": 4, "group_size": 0}, ["group_size must be a positive integer or -1", "got 0"]),
    ({"quant_method": "awq", "bits": 4, "w_bit": 8}, ["bits (4) and w_bit (8)"]),
    ({"quant_method": "awq", "w_bit": 3}, ["awq with bits=3"]),
    ({"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]}, ["quant_method 'mxfp4' is not supported"]),
    ({"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0}, ["quant_method 'fbgemm_fp8' is not supported"]),
])  # (fp8 weight_block_size of another length: test_hostile_sweep12; bitsandbytes, hqq: test_quant_config)
def test_unsupported_quantization_names_what_is_unsupported(tmp_path, q, fragments):
    with pytest.raises(ConfigError) as e:
        weight_formats({"quantization_config": q})
    for f in fragments:
        assert f in str(e.value)
    p = _config(tmp_path, {**GLM, "quantization_config": q})
    line = assert_one_error(invoke("predict", "--config", p), str(p), "quantization_config", *fragments)
    assert "pass --weight-dtype" in line  # the way around it
