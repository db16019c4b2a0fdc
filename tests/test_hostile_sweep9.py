"""Hostile inputs of the ninth adversarial sweep (after test_hostile_sweep8.py): integer options that Python's int()
read too generously ('1_000', '+7', ' 7'); comma lists whose empty item was dropped ('3,,5'); `--resume` with nothing
to resume (a fresh start, silently) or over a run of other options (two runs fitted as one); acceptance histograms
with fractional or negative counts, and a log's histogram whose non-number item shifted the bins; GPTQ / AWQ
group_size -1 (per channel) and 32 counted as group 128; '0_5' read by float() as 5. Each bad input ends in
exit code 1 and exactly one `error:` line naming the option; each family has a legal control beside it, so the cases
can fail. Expected values come from what the user typed, not from the code under test."""

from __future__ import annotations

import json

import pytest

from cli_checks import assert_one_error, invoke  # noqa: E402

PROFILE = "wmtp_model/data/profiles/h200.json"


def _json(*args) -> dict:
    r = invoke(*args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


# ------------------------------------------------------------------------- 1. integer options: plain digits only
# Every integer option of every command, with the arguments it needs to reach option parsing.
INT_OPTIONS = [
    (["predict", "-m", "q35"], "--sink"), (["predict", "-m", "q35"], "--batch"), (["predict", "-m", "q35"], "--tp"),
    (["predict", "-m", "q35"], "--tree-width"), (["predict", "-m", "q35"], "--depth"),
    (["report", "-m", "q35"], "--sink"), (["report", "-m", "q35"], "--batch"), (["report", "-m", "q35"], "--depth"),
    (["sweep", "ctx", "-m", "q35"], "--depth"), (["sweep", "ctx", "-m", "q35"], "--sink"),
    (["sweep", "ctx", "-m", "q35"], "--batch"), (["sweep", "ctx", "-m", "q35"], "--tp"),
    (["simulate", "-m", "q35"], "--sink"), (["simulate", "-m", "q35"], "--tp"), (["simulate", "-m", "q35"], "--tokens"),
    (["simulate", "-m", "q35"], "--seed"), (["simulate", "-m", "q35"], "--depth"),
    (["logs", "x.log"], "--batch"), (["accept", "x.json"], "--depth"),
    (["calibrate-logs", "a.log:3", "b.log:5", "-m", "q35"], "--batch"),
    (["calibrate-logs", "a.log:3", "b.log:5", "-m", "q35"], "--sink"),
    (["calibrate-logs", "a.log:3", "b.log:5", "-m", "q35"], "--min-gamma"),
    (["calibrate", "--from-logs", "a.log:3"], "--min-gamma"),
]


@pytest.mark.parametrize("typed", ["1_0", "+7", " 7", "7 ", "1e3", "0x10"])
@pytest.mark.parametrize("args, opt", INT_OPTIONS)
def test_an_integer_option_takes_plain_digits(args, opt, typed):
    """int() read '1_0' as 10 and '+7' as 7: a typo priced as a number the user did not write."""
    line = assert_one_error(invoke(*args, opt, typed), opt)
    assert repr(typed) in line or "plain digits" in line, line


def test_every_integer_option_is_in_the_table():
    """The table above covers every integer option the app has: a new one without the strict reader fails here."""
    import typing

    import typer.main

    from wmtp.cli.main import app

    found, group = set(), typer.main.get_command(app)

    def plain(t):  # Annotated[int, ...] / Optional[int] -> int (typer's own record of it moved between versions)
        while typing.get_origin(t) is typing.Annotated:
            t = typing.get_args(t)[0]
        args = [a for a in typing.get_args(t) if a is not type(None)]
        return args[0] if typing.get_origin(t) is typing.Union and len(args) == 1 else t

    def walk(cmd, name):
        for sub, c in getattr(cmd, "commands", {}).items():
            walk(c, f"{name} {sub}".strip())
        fn = getattr(getattr(cmd, "callback", None), "__wrapped__", None)
        hints = typing.get_type_hints(fn, include_extras=True) if fn else {}
        for p in getattr(cmd, "params", []):
            if plain(hints.get(p.name)) is int:
                found.add((name, max(p.opts, key=len)))

    walk(group, "")
    listed = {(a[0], opt) for a, opt in INT_OPTIONS}
    assert ("predict", "--batch") in found  # the walk sees the options (an empty set would pass the next line)
    assert found <= listed, sorted(found - listed)


@pytest.mark.parametrize("args, key, value", [
    (["predict", "-m", "q35", "--batch", "16"], "batch", 16),  # the control: plain digits still read
    (["predict", "-m", "q35", "--depth", "5"], "depth", 5),
    (["predict", "-m", "q35", "--batch", "007"], "batch", 7),  # leading zeros are still digits
])
def test_plain_digits_are_read(args, key, value):
    assert _json(*args)[key] == value


def test_a_negative_count_gets_its_range_error():  # a '-' is read, so the message names the option's bounds
    assert_one_error(invoke("predict", "-m", "q35", "--batch", "-3"), "--batch", ">= 1")


def test_phases_tokens_take_plain_digits():
    assert_one_error(invoke("simulate", "-m", "q35", "--phases", "0.5:1_000"), "--phases", "plain digits")
    r = invoke("simulate", "-m", "q35", "--phases", "0.5:1000", "--tokens", "64", "--json")
    assert r.exit_code == 0, r.output


def test_list_values_of_a_count_take_no_suffix(tmp_path):
    """validate --depths read '3K' as depth 3072 and measure kernels --batch '1K' as 1024 requests (the token-count
    reader's suffixes)."""
    assert_one_error(invoke("validate", "--profile", PROFILE, "--depths", "3K", "--out", tmp_path), "--depths", "'3K'")
    assert_one_error(invoke("measure", "kernels", "--batch", "1K", "--out", tmp_path), "--batch", "'1K'")


# ------------------------------------------------------------------------- 2. comma lists: an empty item
@pytest.mark.parametrize("args, opt, item", [
    (["validate", "--profile", PROFILE, "--depths", "3,,5"], "--depths", "item 2 of 3"),
    (["validate", "--profile", PROFILE, "--ctx", "64K,,1M"], "--ctx", "item 2 of 3"),
    (["validate", "--profile", PROFILE, "--models", "q35,"], "--models", "item 2 of 2"),  # a trailing comma
    (["measure", "kernels", "--model", ",q35"], "--model", "item 1 of 2"),
    (["measure", "kernels", "--batch", "1,,4"], "--batch", "item 2 of 3"),
    (["calibrate", "--parts", "attention,,loop"], "--parts", "item 2 of 3"),
    (["calibrate", "--from-logs", "a.log:3", "--models", "q35,,"], "--models", "item 2 of 3"),
    (["simulate", "-m", "q35", "--phases", "0.5:100,,0.7:100"], "--phases", ""),
])
def test_an_empty_list_item_is_refused(tmp_path, args, opt, item):
    """'3,,5' measured depths 3 and 5, silently: the empty item was dropped, not reported."""
    out = ["--out", tmp_path / "o"] if args[0] in ("validate", "measure", "calibrate") else []
    assert_one_error(invoke(*args, *out), opt, item)
    assert not (tmp_path / "o").exists()


def test_an_empty_parts_list_is_refused():  # '' was the whole sweep
    assert_one_error(invoke("calibrate", "--parts", ""), "--parts", "empty")


def test_a_full_list_is_read():  # the control: the same lists without the extra comma get past the parsing
    from wmtp.units import parse_int_list, split_list

    assert parse_int_list("64K, 1M", what="--ctx") == [65536, 1048576]
    assert parse_int_list("3,5", what="--depths", whole=True) == [3, 5]
    assert split_list(" attention , loop", "--parts") == ["attention", "loop"]


# ------------------------------------------------------------------------- 3. --resume with nothing to resume
def test_resume_with_no_run_in_out_is_refused(tmp_path):
    """`calibrate --resume` into a folder with no interrupted sweep started a fresh one, silently."""
    out = tmp_path / "cal"
    out.mkdir()
    assert_one_error(invoke("calibrate", "--resume", "--out", out), "--resume", "nothing to resume", "raw.csv")
    assert_one_error(invoke("measure", "kernels", "--resume", "--out", out), "--resume", "nothing to resume",
                     "kernels.csv")
    assert list(out.iterdir()) == []


def test_resume_without_the_record_of_finished_steps_is_refused(tmp_path):
    """A raw.csv with no raw.steps-done: every step ran again and its rows went in beside the old ones."""
    (tmp_path / "raw.csv").write_text("kernel,time_ms\ncopy,1.0\n")
    assert_one_error(invoke("calibrate", "--resume", "--out", tmp_path), "--resume", "raw.steps-done")
    assert (tmp_path / "raw.csv").read_text() == "kernel,time_ms\ncopy,1.0\n"


@pytest.mark.parametrize("args, needle", [
    (["--backend", "flashinfer"], "`wmtp calibrate`, this one is `wmtp calibrate --backend flashinfer`"),
    (["--models", "q35"], "this one has ['q35']"),
    (["--quick"], "this one is `wmtp calibrate --quick`"),
])
def test_resume_with_other_options_is_refused(tmp_path, args, needle):
    """The interrupted run's rows and this run's would be fitted as one sweep (another backend's kernels, another
    grid), and the sidecar would name only this run's settings."""
    (tmp_path / "raw.csv").write_text("kernel,time_ms\ncopy,1.0\n")
    (tmp_path / "raw.steps-done").write_text("ceilings\n")
    (tmp_path / "raw.meta.json").write_text(json.dumps({"command": "wmtp calibrate", "models": ["q35", "q122", "nem"],
                                                        "backend": "wmtp", "moe_impl": "wmtp"}))
    assert_one_error(invoke("calibrate", "--resume", "--out", tmp_path, *args), "--resume", needle)


def test_an_interrupted_run_of_the_same_options_may_resume(tmp_path):  # the control (the GPU check comes after it)
    from wmtp.measure import check_resumable

    (tmp_path / "raw.csv").write_text("kernel,time_ms\ncopy,1.0\n")
    (tmp_path / "raw.steps-done").write_text("ceilings\n")
    meta = {"command": "wmtp calibrate", "models": ["q35"], "backend": "wmtp", "moe_impl": "wmtp"}
    (tmp_path / "raw.meta.json").write_text(json.dumps(meta | {"status": "interrupted"}))
    check_resumable(tmp_path / "raw.csv", tmp_path / "raw.steps-done", tmp_path / "raw.meta.json", meta,
                    "wmtp calibrate")


def test_resume_is_documented_in_help():
    r = invoke("calibrate", "--help")
    assert "is an error, not a fresh start" in " ".join(r.output.replace("│", " ").split())


# ------------------------------------------------------------------------- 5. histogram counts: whole numbers
@pytest.mark.parametrize("name, text, entry", [
    ("h.json", "[10, 3.5, 2]", "bin n=1"),
    ("h.json", '{"0": 10, "2": 0.25, "1": 4}', "bin n=2"),
    ("h.csv", "n,count\n0,10\n1,3.5\n", "bin n=1"),
    ("m.json", json.dumps({"meta_info": {"spec_correct_drafts_histogram": [10, 2.5, 1]}}), "request 1's"),
    ("m.jsonl", "\n".join(json.dumps({"meta_info": {"spec_accept_histogram": h}}) for h in ([9, 1], [8, 1.5])),
     "request 2's spec_accept_histogram bin n=1"),
    # a negative count in one request cancelled another's, silently (the summed histogram was valid)
    ("m.json", json.dumps([{"meta_info": {"spec_correct_drafts_histogram": [10, -5, 1]}},
                           {"meta_info": {"spec_correct_drafts_histogram": [10, 6, 1]}}]), "request 1's"),
])
def test_a_fractional_or_negative_count_is_refused(tmp_path, name, text, entry):
    """H[n] counts verify steps: 3.5 of them is a corrupt file (or a normalised histogram, whose total is not the
    number of steps the Wilson intervals need), not data."""
    p = tmp_path / name
    p.write_text(text)
    line = assert_one_error(invoke("accept", p), name, entry)
    assert "whole number" in line or ">= 0" in line, line


@pytest.mark.parametrize("name, text", [
    ("h.json", "[10, 4.0, 2]"),  # the control: an integral float is a whole count
    ("h.csv", "0,10\n1,4\n2,2\n"),
    ("m.json", json.dumps({"meta_info": {"spec_correct_drafts_histogram": [10, 4, 2]}})),
])
def test_whole_counts_are_read(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    doc = _json("accept", p)
    # H = [10, 4, 2]: AL = sum (n + 1) H[n] / sum H[n] = (10 + 8 + 6) / 16 = 1.5
    assert doc["files"][0]["accept_length"] == pytest.approx(1.5)


def test_a_log_histogram_with_a_non_number_is_not_shifted(tmp_path):
    """'[10, null, 1]' in a meta_info log line was read as [10, 1] (the numbers picked out): bin 2's count moved to
    bin 1. Such a line is now garbled (counted, not read); the control line beside it is read."""
    bad = tmp_path / "bad.log"
    bad.write_text('out={"meta_info": {"spec_correct_drafts_histogram": [10, null, 1], "completion_tokens": 20}}\n')
    assert_one_error(invoke("accept", bad), "1 garbled")
    good = tmp_path / "good.log"
    good.write_text('out={"meta_info": {"spec_correct_drafts_histogram": [10, 0, 1], "completion_tokens": 20}}\n')
    # H = [10, 0, 1]: AL = (10 + 0 + 3) / 11
    assert _json("accept", good)["files"][0]["accept_length"] == pytest.approx(13 / 11)


# ------------------------------------------------------------------------- 4. GPTQ / AWQ group_size
def _gptq(group, method="gptq") -> dict:
    from test_hostile_sweep5 import MIMO_7B

    q = {"quant_method": method, "bits": 4}
    return MIMO_7B | {"quantization_config": q if group is None else q | {"group_size": group}}


def _weights(cfg, with_mtp=True) -> float:
    from wmtp.hf_config import spec_from_config
    from wmtp.weights import model_weight_bytes

    return model_weight_bytes(spec_from_config(cfg, "m/config.json"), with_mtp)


# MiMo-7B (hidden 4096, 32 q / 8 kv heads x 128, SwiGLU 11008, 36 layers, one dense MTP block) per decoder layer:
# q 4096 -> 4096, k and v 4096 -> 1024, o 4096 -> 4096, gate and up 4096 -> 11008, down 11008 -> 4096:
# params 4096 * 6144 + 4096 * 4096 + 3 * 4096 * 11008 = 177,209,344; output rows 4096 + 2 * 1024 + 4096 + 2 * 11008
# + 4096 = 36,352. The MTP block adds its eh projection (2 * 4096 -> 4096): params 210,763,776, rows 40,448.
LAYER_PARAMS, LAYER_ROWS, MTP_PARAMS, MTP_ROWS = 177_209_344, 36_352, 210_763_776, 40_448


@pytest.mark.parametrize("method", ["gptq", "awq"])
def test_per_channel_int4_counts_one_scale_per_output_row(method):
    """group_size -1 was counted as group 128: 2 bytes per 128 parameters instead of 2 bytes per output row. Each
    scale comes with a 4-bit zero point (qzeros, stored by GPTQ and AWQ checkpoints): 2.5 bytes per scale."""
    g128 = 36 * 2.5 * LAYER_PARAMS / 128 + 2.5 * MTP_PARAMS / 128  # bf16 scales + 4-bit zeros, group 128
    per_row = 36 * 2.5 * LAYER_ROWS + 2.5 * MTP_ROWS  # one bf16 scale + one 4-bit zero per output row
    assert _weights(_gptq(128, method)) - _weights(_gptq(-1, method)) == pytest.approx(g128 - per_row)  # 125,344,000


def test_another_group_size_counts_its_groups():
    # group 32: 2.5 bytes (bf16 scale + 4-bit zero) per 32 parameters, four times group 128's
    scales_128 = 36 * 2.5 * LAYER_PARAMS / 128 + 2.5 * MTP_PARAMS / 128
    assert _weights(_gptq(32)) - _weights(_gptq(128)) == pytest.approx(3 * scales_128)
    assert _weights(_gptq(None)) == _weights(_gptq(128))  # the control: unsaid is the documented 128


@pytest.mark.parametrize("group", [0, -2, "128", True, 12.5])
def test_an_impossible_group_size_is_refused(write_config, group):
    p = write_config(_gptq(group))
    assert_one_error(invoke("predict", "--config", p), "group_size", "-1")


def test_compressed_tensors_channel_strategy_is_per_row():
    ct = {"quant_method": "compressed-tensors", "config_groups": {"g0": {"targets": ["Linear"], "weights": {
        "num_bits": 4, "type": "int", "strategy": "channel", "group_size": None}}}}
    from test_hostile_sweep5 import MIMO_7B

    # symmetric (compressed-tensors' default): no zero points, where GPTQ stores 0.5 byte of qzeros per output row
    zeros = 36 * 0.5 * LAYER_ROWS + 0.5 * MTP_ROWS
    assert _weights(MIMO_7B | {"quantization_config": ct}) == pytest.approx(_weights(_gptq(-1)) - zeros)


def test_weight_dtype_given_prices_group_128(write_config):
    """--weight-dtype int4 says how the weights are stored (W4A16, group 128, as its help says): the config's
    per-channel group is not kept."""
    from wmtp.cli.common import resolve_model

    spec = resolve_model(None, write_config(_gptq(-1)), "int4", None)
    assert spec.int4_group == 128


# ------------------------------------------------------------------------- sweep: '_' in a decimal option
@pytest.mark.parametrize("args, opt", [
    (["sweep", "ctx", "-m", "q35", "--threshold", "0_5"], "--threshold"),  # read as 5: a 500 % break-even, silently
    (["predict", "-m", "q35", "-d", "16", "--accept-length", "1_0"], "--accept-length"),  # read as AL 10 at d = 16
    (["sweep", "window", "-m", "q35", "--al-window", "1K:3_5"], "--al-window"),
    (["simulate", "-m", "q35", "--phases", "0_5:100"], "--phases"),
])
def test_a_decimal_option_refuses_underscores(args, opt):
    assert_one_error(invoke(*args), opt)


def test_a_plain_decimal_is_read():  # the control
    assert _json("sweep", "ctx", "-m", "q35", "--threshold", "0.5")["break_even_threshold"] == 0.5
    r = invoke("predict", "-m", "q35", "-d", "16", "--accept-length", "10")
    assert r.exit_code == 0 and "--accept-length" in r.output, r.output


def test_resume_with_other_parts_is_refused(tmp_path):
    """An interrupted `--parts attention` sweep resumed with `--parts attention,loop` (or without --parts: the whole
    sweep) appended the other parts' rows to a sidecar that names one part: the merge with --base-raw would then
    drop the base's rows of the part measured here without saying so."""
    (tmp_path / "raw.csv").write_text("kernel,time_ms\ncopy,1.0\n")
    (tmp_path / "raw.steps-done").write_text("ceilings\n")
    (tmp_path / "raw.meta.json").write_text(json.dumps({"command": "wmtp calibrate", "models": ["q35", "q122", "nem"],
                                                        "backend": "wmtp", "moe_impl": "wmtp",
                                                        "parts": ["attention"]}))
    base = tmp_path / "base.csv"
    base.write_text("kernel,model,ctx,batch,d,window,config,bytes,flops,time_ms,status\n"
                    "copy,,0,1,1,0,,1048576,0,1.0,ok\n")
    assert_one_error(invoke("calibrate", "--resume", "--out", tmp_path, "--parts", "attention,loop", "--base-raw",
                            base), "--resume", "parts ['attention']", "this one has ['attention', 'loop']")
    assert (tmp_path / "raw.csv").read_text() == "kernel,time_ms\ncopy,1.0\n"
