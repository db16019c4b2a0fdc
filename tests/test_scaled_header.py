"""A profile measured on one GPU pricing another says so in the header, not only in each component's tag."""

import json

from typer.testing import CliRunner

from wmtp.cli.main import app


def _run(*args):
    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return r.stdout


def test_predict_on_another_gpu_says_its_profile_is_scaled():
    out = json.loads(_run("predict", "--model", "q122", "--hw", "b200", "--json"))
    assert out["cost_model"] == "measured profile h200 (shipped), scaled to b200 by bandwidth and flop ratios"
    assert json.loads(_run("predict", "--model", "q122", "--json"))["cost_model"] == "measured profile h200 (shipped)"


def test_sweep_and_simulate_headers_say_it_too():
    assert "scaled to b200" in json.loads(_run("sweep", "depth", "--model", "q122", "--hw", "b200", "--json"))[
        "cost_model"]
    assert "step costs: measured profile h200 (shipped), scaled to b200" in _run("simulate", "--model", "q122", "--hw",
                                                                                   "b200")
