"""The predict path stays free of torch, triton and plotly, and answers quickly."""

import subprocess
import sys


def test_predict_path_imports_no_heavy_modules():
    code = (
        "import sys, wmtp.cli.main, wmtp.predict, wmtp.cli.render, wmtp.hf_config\n"
        "from typer.testing import CliRunner\n"
        "r = CliRunner().invoke(wmtp.cli.main.app, ['predict', '--model', 'q122', '--ctx', '1M', '--json'])\n"
        "assert r.exit_code == 0, r.output\n"
        "bad = sorted(m for m in ('torch', 'triton', 'plotly', 'pandas', 'scipy') if m in sys.modules)\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"predict imported {out.stdout.strip()}"


def test_package_layout_maps_folders_under_wmtp():
    import wmtp
    import wmtp.calibrate
    import wmtp.cli
    import wmtp.measure
    import wmtp.reports

    for mod, folder in ((wmtp, "wmtp_model"), (wmtp.measure, "measure"), (wmtp.calibrate, "calibrate"),
                        (wmtp.cli, "cli"), (wmtp.reports, "reports")):
        assert mod.__file__ is not None
        parts = mod.__file__.replace("\\", "/").split("/")
        # editable install: the repository folder; wheel install: site-packages/wmtp/...
        assert folder in parts or "wmtp" in parts
