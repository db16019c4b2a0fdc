"""A profile or a resumed sweep of a kernel set other than this wmtp's (issue 18, ws3): refused, not priced or
fitted with another tiling."""

from __future__ import annotations

import json
import pytest

from wmtp.errors import ProfileError, WmtpError
from wmtp.kernel_plan import WS3_SET, WS_SET, feature_backend
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


@pytest.mark.parametrize("kernels", ["v1+rows", WS_SET, WS3_SET])
def test_known_sets_load(tmp_path, kernels):  # the control
    assert load_profile(_copy(tmp_path, attention_kernels=kernels))["attention_kernels"] == kernels


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


def test_resuming_under_another_kernel_set_is_refused(tmp_path):
    """An interrupted sweep of 128-row blocks (v1+rows+ws) resumed by a wmtp whose default is 192-row blocks: both
    runs' rows were fitted as one measurement under the new set's name."""
    from wmtp.measure.run import backend_provenance

    (tmp_path / "raw.csv").write_text("kernel,time_ms\ncopy,1.0\n")
    (tmp_path / "raw.steps-done").write_text("ceilings\n")
    (tmp_path / "raw.meta.json").write_text(json.dumps({"command": "wmtp calibrate", "attention_kernels": WS_SET}))
    resume = (tmp_path / "raw.csv", tmp_path / "raw.steps-done", tmp_path / "raw.meta.json", "wmtp calibrate")
    with pytest.raises(WmtpError, match=r"attention_kernels 'v1\+rows\+ws', this one has 'v1\+rows\+ws3'"):
        backend_provenance(_Backend(WS3_SET), resume)
    assert backend_provenance(_Backend(WS_SET), resume)["attention_kernels"] == WS_SET  # same set: resumes
    assert backend_provenance(_Backend(WS3_SET))["attention_kernels"] == WS3_SET  # not resuming: no check
