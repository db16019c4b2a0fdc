"""Log corpus round 7 (the defects hostile sweep 14 found): vLLM per-position rates holding `nan` (read in full or
refused, never cut short), vLLM `Drafted: 0` beside accepted tokens (impossible counts), and accept lengths deeper
than any draft wmtp models (an SGLang line's `accept len: 99`, a bare mean of 99). Expected values are hand arithmetic
on the lines written here (in the comments); each refusal is one `error:` line naming the file and line, through
`wmtp logs` and `wmtp accept`, from both readers."""

from __future__ import annotations

import json

import pytest

from corpus_checks import logs_json, one_error, run, write_log

_V1 = ("(APIServer pid=1) INFO 05-08 13:54:{s:02d} [loggers.py:123] SpecDecoding metrics: "
       "Mean acceptance length: {al}, Accepted throughput: 35.20 tokens/s, Drafted throughput: 72.80 tokens/s, "
       "Accepted: {a} tokens, Drafted: {d} tokens, Per-position acceptance rate: {rates}, "
       "Avg Draft acceptance rate: {pct}%\n")
_GOOD = dict(al="2.45", a=352, d=728, rates="0.736, 0.477, 0.242", pct="48.4")  # 1 + 352 / (728 / 3) = 2.4505
_SGL = ("[2025-05-31 18:31:{s:02d} DP0 TP0] Decode batch. #running-req: 8, #token: {t}, token usage: 0.13, accept len: "
        "{al}, cuda graph: True, gen throughput (token/s): 171.01, #queue-req: 0\n")


def _v1(s: int, **kw) -> str:
    return _V1.format(s=s, **{**_GOOD, **kw})


def _sgl(s: int, al: str) -> str:
    return _SGL.format(s=s, t=37000 + 8 * s, al=al)


def _both_readers_refuse(path, *words) -> None:
    """The block reader and the per-line one stop with the same `WmtpError`."""
    from wmtp.errors import WmtpError
    from wmtp.log_analysis import analyse

    msgs = []
    for reference in (False, True):
        with pytest.raises(WmtpError) as e:
            analyse(path, reference=reference)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] and all(w in msgs[0] for w in words), msgs


def _accept_error(path, *words, depth=()) -> None:
    r = run(["accept", str(path), *depth])
    assert r.exit_code == 1 and r.output.startswith("error: ") and r.output.count("\n") == 1, r.output
    assert all(w in r.output for w in words), r.output


def _same_both_ways(path) -> dict:
    from wmtp.log_analysis import analyse

    new, ref = analyse(path), analyse(path, reference=True)
    assert json.dumps(new, sort_keys=True, default=str) == json.dumps(ref, sort_keys=True, default=str)
    return new


# ------------------------------------------------------------------------------------- vLLM rates with `nan`
@pytest.mark.parametrize("rates, where", [("0.800, nan, 0.400", "position 2 of 3"),  # (before: read as [0.800])
                                          ("nan, 0.500, 0.250", "position 1 of 3"),
                                          ("0.800, 0.600, nan", "position 3 of 3"),
                                          ("nan, nan, nan", "position 1, 2, 3 of 3")])  # nan everywhere, drafts > 0
def test_nan_beside_numbers_or_with_drafts_is_refused_naming_the_line(tmp_path, rates, where):
    # vLLM divides every position by one drafts count: nan (0 / 0) is at every position of an interval with no
    # drafts, or at none; 728 drafted tokens here, so no entry can be nan
    p = write_log(tmp_path, _v1(0) + _v1(1, rates=rates))
    one_error(p, "x.log:2:", "nan at " + where)
    _accept_error(p, "x.log:2:", "nan at " + where)
    _both_readers_refuse(p, "x.log:2:", where)


def test_an_interval_that_drafted_nothing_is_read_as_nothing(tmp_path):
    # vLLM's own line for an interval whose steps drafted nothing (0 / 0 everywhere): a spec line, nothing pooled;
    # the AL is the good line's alone, 1 + 352 / (728 / 3) = 1 + 1056 / 728
    empty = _v1(1, al="nan", a=0, d=0, rates="nan, nan, nan", pct="nan")
    out = _same_both_ways(write_log(tmp_path, _v1(0) + empty))
    assert out["garbled"] == 0 and out["records"]["vllm_spec"] == 2
    assert out["accept_length"] == pytest.approx(1 + 1056 / 728)


def test_a_nan_list_is_never_read_shorter(tmp_path):
    # the control: the same positions without nan are read in full (k = 3, so d = 4 from the line itself)
    out = logs_json(write_log(tmp_path, _v1(0)))
    assert out["al"]["histogram"] and len(out["al"]["histogram"]) == 4


# ------------------------------------------------------------------------------ vLLM Drafted: 0, Accepted > 0
def test_drafted_zero_with_accepted_tokens_is_refused(tmp_path):
    # Accepted 352 of Drafted 0: no drafts to divide by (before: AL 2.43 from the printed mean, a note saying the
    # opposite)
    p = write_log(tmp_path, _v1(0, al="2.43", d=0))
    one_error(p, "x.log:1:", "Drafted: 0")
    _accept_error(p, "x.log:1:", "Drafted: 0")
    _both_readers_refuse(p, "x.log:1:", "Drafted: 0")


def test_drafted_zero_among_good_lines_is_pooled_as_printed_and_named(tmp_path):
    # as Accepted > Drafted > 0 is (tests/test_real_logs_v6.py): counts pooled as printed, the line named in a note;
    # 1 + (352 + 352) / (728 / 3) = 1 + 2112 / 728 (not the printed mean's drafts, 352 / 1.43)
    out = _same_both_ways(write_log(tmp_path, _v1(0) + _v1(1, al="2.43", d=0)))
    assert out["accept_length"] == pytest.approx(1 + 2112 / 728)
    assert any("more Accepted than Drafted" in n and "line 2" in n for n in out["notes"]), out["notes"]


def test_drafted_zero_and_accepted_zero_is_no_contradiction(tmp_path):
    # the control: an interval with nothing drafted and nothing accepted adds nothing; AL from the good line
    out = _same_both_ways(write_log(tmp_path, _v1(0) + _v1(1, al="1.00", a=0, d=0)))
    assert out["accept_length"] == pytest.approx(1 + 1056 / 728) and not any("Accepted than" in n for n in out["notes"])


# ------------------------------------------------------------------------- accept lengths beyond any draft
def test_an_sglang_accept_len_of_99_is_refused_naming_its_line(tmp_path):
    # SGLang's accept len: accepted tokens (bonus included) / verify steps <= num_draft_tokens; wmtp models d <= 64
    p = write_log(tmp_path, _sgl(0, "99.00"))
    one_error(p, "x.log:1:", "accept len 99 is above 64")
    _accept_error(p, "x.log:1:", "accept len 99 is above 64")
    _accept_error(p, "x.log:1:", "accept len 99 is above 64", depth=("--depth", "7"))


def test_one_deep_line_among_good_ones_is_refused_not_averaged(tmp_path):
    # 10 lines at 3.00 then one at 99.00: a mean of (30 + 99) / 11 = 11.7 would pass the depth-64 bound; the line
    # itself is refused, in both readers
    p = write_log(tmp_path, "".join(_sgl(s, "3.00") for s in range(10)) + _sgl(10, "99.00"))
    one_error(p, "x.log:11:", "accept len 99")
    _both_readers_refuse(p, "x.log:11:", "accept len 99")


def test_an_accept_len_at_the_deepest_draft_is_read(tmp_path):
    # the control: 64.00 (every draft of d = 64 accepted) is legal; the run's AL is that line's
    assert logs_json(write_log(tmp_path, _sgl(0, "64.00")))["accept_length"] == pytest.approx(64.0)


@pytest.mark.parametrize("depth, fragment", [((), "99 is above 64"), (("--depth", "7"), "99 is above d = 7")])
def test_a_bare_mean_of_99_is_refused_with_or_without_depth(tmp_path, depth, fragment):
    p = write_log(tmp_path, "mean acceptance length: 99\n")
    _accept_error(p, "x.log:1-1", fragment, depth=depth)
    if not depth:
        one_error(p, "x.log:1-1", fragment)
