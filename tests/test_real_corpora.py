"""The checks every version corpus runs on each of its files (tests/data/real_v2/ to real_v5/: one synthetic
excerpt per log format, numbers ours, each format's public source in the folder's README; EXPECTED.tsv with
hand-derived TPOT / AL): `wmtp logs` / `wmtp accept` (both views) read every file with no traceback and no garbled line
and agree with EXPECTED.tsv within 1 % (`corpus_checks`), and the block reader agrees with its per-line reference. Each
corpus's own tests (the parsers behind its fixes, the near misses they must leave alone) are in
tests/test_real_logs_v2.py to _v5.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corpus_checks import check_accept, check_logs, corpus  # noqa: E402

DATA = Path(__file__).parent / "data"
CORPORA = {name: corpus(DATA / name) for name in ("real_v2", "real_v3", "real_v4", "real_v5")}
CASES = [(c, f) for c, (_, files) in CORPORA.items() for f in files]


@pytest.mark.parametrize("name", sorted(CORPORA))
def test_every_file_has_an_expected_row(name):
    rows, files = CORPORA[name]
    assert files and set(files) == set(rows)


@pytest.mark.parametrize("folder,name", CASES)
def test_logs_reads_the_format(folder, name):
    check_logs(DATA / folder / name, CORPORA[folder][0][name])


@pytest.mark.parametrize("folder,name", CASES)
def test_accept_reads_the_format(folder, name):
    check_accept(DATA / folder / name, CORPORA[folder][0][name])


@pytest.mark.parametrize("folder,name", CASES)
def test_block_and_line_readers_agree(folder, name):
    from wmtp.log_analysis import analyse

    path = DATA / folder / name
    assert json.dumps(analyse(path), sort_keys=True, default=str) == \
        json.dumps(analyse(path, reference=True), sort_keys=True, default=str)
