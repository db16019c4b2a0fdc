import json

import pytest


@pytest.fixture
def write_config(tmp_path):
    """Write a config.json (dict or raw text) under tmp_path/<name>/config.json and return its path."""

    def _write(content, name="model"):
        d = tmp_path / name
        d.mkdir(exist_ok=True)
        p = d / "config.json"
        p.write_text(content if isinstance(content, str) else json.dumps(content))
        return p

    return _write
