"""A profile or a resumed sweep of a kernel set other than this wmtp's (issue 18, ws3): refused, not priced or
fitted with another tiling."""

from __future__ import annotations

import json
import pytest

from wmtp.errors import ProfileError, WmtpError
from wmtp.kernel_plan import (MERGE2, WS3_SET, WS_SET, attention_features, feature_backend, merge_rounds,
                              merge_split_block)
from wmtp.profile import PROFILES_DIR, load_profile


def _copy(tmp_path, **change):
    prof = json.loads((PROFILES_DIR / "h200.json").read_text())
    prof.update(change)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(prof))
    return path


def test_an_unknown_wmtp_kernel_set_is_refused(tmp_path):
    """A typo or a later wmtp's set (say ws4) fell back to the tiling of the kernels before the ws kernel."""
    with pytest.raises(ProfileError, match="kernel set 'v1\\+rows\\+ws4', which this wmtp does not know"):
        load_profile(_copy(tmp_path, attention_kernels="v1+rows+ws4"))


@pytest.mark.parametrize("kernels", ["v1+rows", WS_SET, WS3_SET, "v1+rows+m2", WS3_SET + MERGE2])
def test_known_sets_load(tmp_path, kernels):  # the control
    assert load_profile(_copy(tmp_path, attention_kernels=kernels))["attention_kernels"] == kernels


@pytest.mark.parametrize("splits, want", [(1, 1), (2, 2), (16, 16), (17, 32), (66, 128), (128, 128), (132, 128),
                                          (500, 128)])
def test_merge_split_block_by_hand(splits, want):
    """The next power of two of the splits, at most 128 (one round up to 128 splits)."""
    assert merge_split_block(splits) == want


def test_merge_rounds_follow_the_kernel_set_that_ran():
    """A set measured with the one-round merge (+m2) counts rounds of 128 splits; the sets before it, and
    FlashInfer's plan, rounds of 32 (66 splits: 1 against ceil(66 / 32) = 3; 132: 2 against 5)."""
    assert feature_backend("wmtp", WS3_SET + MERGE2) == "wmtp+ws3+m2"
    assert feature_backend("wmtp", "v1+rows+m2") == "wmtp+m2"
    assert [merge_rounds(66, b) for b in ("wmtp+ws3+m2", "wmtp+m2", "wmtp+ws3", "wmtp", "flashinfer")] == [1, 1, 3, 3, 3]
    assert merge_rounds(132, "wmtp+ws3+m2") == 2 and merge_rounds(132, "wmtp+ws3") == 5


@pytest.mark.parametrize("base", ["wmtp", "wmtp+ws3"])
def test_the_merge_suffix_keeps_the_tiling(base):
    """+m2 changes the merge's rounds only: the tile, passes and splits are those of the set without it (nem decode at
    64K, B = 1: 66 splits with the ws kernel, one 16-row v1 tile without it)."""
    for q_len in (1, 7):
        old = attention_features(1, 2, 16, q_len, 128, 65536, 132, 1024.0, base)
        new = attention_features(1, 2, 16, q_len, 128, 65536, 132, 1024.0, base + MERGE2)
        assert {k: v for k, v in new.items() if k != "merge_iters"} == {k: v for k, v in old.items()
                                                                        if k != "merge_iters"}
        assert new["merge_iters"] == -(-new["splits"] // 128) and old["merge_iters"] == -(-old["splits"] // 32)


def test_other_backends_name_their_own_sets(tmp_path):
    """The check is for wmtp's own kernels; a FlashInfer profile records its own name."""
    assert load_profile(_copy(tmp_path, backend="flashinfer", attention_kernels="flashinfer"))["backend"] == "flashinfer"
    assert feature_backend("flashinfer", "flashinfer") == "flashinfer"


class _Backend:
    name = "wmtp"

    def __init__(self, kernels):
        self.kernels = kernels

    def describe(self):
        return "test"

    def versions(self):
        return {}

    def kernel_set(self):
        return self.kernels


def test_resuming_under_another_kernel_set_is_refused(tmp_path, monkeypatch):
    """An interrupted sweep of 128-row blocks (v1+rows+ws) resumed by a wmtp whose default is 192-row blocks: both
    runs' rows were fitted as one measurement under the new set's name. The set is known once the backend is, so
    the check runs there (the GPU check is stubbed out here); nothing is measured or written."""
    import wmtp.measure.backends as backends
    import wmtp.measure.run as run
    from wmtp.models import MODELS

    (tmp_path / "raw.csv").write_text("kernel,time_ms\ncopy,1.0\n")
    (tmp_path / "raw.steps-done").write_text("ceilings\n")
    meta = {"command": "wmtp calibrate", "models": ["q35"], "backend": "wmtp", "moe_impl": "wmtp",
            "parts": ["attention", "components", "loop"], "attention_kernels": WS_SET}
    (tmp_path / "raw.meta.json").write_text(json.dumps(meta))
    monkeypatch.setattr(run, "require_gpu", lambda: None)
    monkeypatch.setattr(backends, "get_backend", lambda name: _Backend(WS3_SET))
    with pytest.raises(WmtpError, match=r"attention_kernels 'v1\+rows\+ws', this one has 'v1\+rows\+ws3'"):
        run.run_sweep([MODELS["q35"]], tmp_path, resume=True)
    assert (tmp_path / "raw.csv").read_text() == "kernel,time_ms\ncopy,1.0\n"
    assert json.loads((tmp_path / "raw.meta.json").read_text()) == meta


@pytest.mark.parametrize("args", [["calibrate"], ["calibrate", "--resume"], ["measure", "kernels"],
                                  ["validate", "--profile", str(PROFILES_DIR / "h200.json")]])
def test_gpu_commands_without_torch_are_one_error(tmp_path, args):
    """The checks that run before the GPU is looked for (--resume, --moe-backend) must not import torch on the way:
    a core install without the measure extra got a ModuleNotFoundError traceback from `wmtp calibrate`."""
    import subprocess
    import sys

    out = tmp_path / "cal"
    if "--resume" in args:  # an interrupted run to resume, so the check reads its sidecar
        out.mkdir()
        (out / "raw.csv").write_text("kernel,time_ms\ncopy,1.0\n")
        (out / "raw.steps-done").write_text("ceilings\n")
    argv = ["wmtp", *args, "--out", str(out)]
    code = f"import sys; sys.modules['torch'] = None; from wmtp.cli.main import main; sys.argv = {argv!r}; main()"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert r.returncode != 0 and len(lines) == 1 and lines[0].startswith("error: ") and "torch" in lines[0], lines
