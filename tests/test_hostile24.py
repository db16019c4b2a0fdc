"""Hostile inputs of sweep 24: seeded mutation fuzzing of the log readers (`wmtp logs`, `wmtp accept`), of `--profile`
and `--framework` files (predict / sweep / report), and of the output paths of every command that writes a file
without a GPU, pinned as parametrized tests over fixed seeds: a mutated input either gives a sane result (AL in
[1, d], TPOT a time per token, every number finite, estimator and source named, no `nan` / `inf` printed) or exactly
one `error:` line, and an output that cannot be written leaves nothing behind. What the fuzz found is pinned, with
expected values worked out by hand, in `test_hostile24_found.py`."""

from __future__ import annotations

import copy
import functools
import gzip
import json
import math
import os
import random
import re
from pathlib import Path

import pytest

from wmtp.engine import engines_dir
from wmtp.errors import WmtpError
from wmtp.log_analysis import analyse
from wmtp.profile import PROFILES_DIR
from cli_checks import assert_one_error, invoke  # noqa: E402

DATA = Path(__file__).parent / "data"
CORPUS = sorted(p for p in DATA.rglob("*") if p.is_file() and p.suffix not in (".tsv", ".md"))
POINTS = engines_dir() / "sglang-b200-paper.points.csv"
HUGE = "9" * 5000  # past Python's 4300-digit int() limit
WIDE = "9" * 400  # an integer no float holds: float() gives inf


# --- the fuzz, pinned: mutators ---------------------------------------------------------------------------------
_NUM = re.compile(rb"\d+(?:\.\d+)?")
_KINDS = ["flip", "flipmany", "trunc", "dup", "dupblock", "shuffle", "delline", "huge", "nan", "inf", "neg", "zero",
          "swapnum", "bigint", "tiny", "utf16", "utf16bom", "latin1", "bom", "crlf", "cr", "nul", "gzgarbage",
          "gztrunc", "gzip", "trailing", "empty"]
_NUMBER_FOR = {"huge": lambda r, m, ns: b"1e400", "nan": lambda r, m, ns: r.choice([b"nan", b"NaN"]),
               "inf": lambda r, m, ns: r.choice([b"inf", b"Infinity"]), "neg": lambda r, m, ns: b"-" + m.group(),
               "zero": lambda r, m, ns: b"0", "swapnum": lambda r, m, ns: r.choice(ns).group(),
               "bigint": lambda r, m, ns: b"9" * r.choice([20, 400, 5000]), "tiny": lambda r, m, ns: b"1e-320"}


def mutate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One seeded mutation of a file's bytes: bits flipped, cut at a random offset, lines duplicated / shuffled /
    dropped, numbers made huge / NaN / inf / negative / 0 / 1e-320 / 20-5000 digits, re-encoded (UTF-16 with and
    without a mark, Latin-1, a UTF-8 mark, CRLF, CR), NUL bytes, gzip (of garbage, cut, whole), emptied."""
    kind = rng.choice(_KINDS)
    b, ls = bytearray(data), data.split(b"\n")
    if kind in ("flip", "flipmany") and b:
        for _ in range(rng.randint(1, 4) if kind == "flip" else rng.randint(5, 50)):
            i = rng.randrange(len(b))
            b[i] = b[i] ^ (1 << rng.randrange(8)) if kind == "flip" else rng.randrange(256)
        return bytes(b), kind
    if kind == "trunc":
        return data[:rng.randrange(len(data) + 1)], kind
    if kind == "dup":
        for _ in range(rng.randint(1, 5)):
            ls.insert(rng.randrange(len(ls) + 1), ls[rng.randrange(len(ls))])
    elif kind == "dupblock":
        i = rng.randrange(len(ls))
        j = rng.randrange(i, len(ls)) + 1
        ls = ls[:j] + ls[i:j] + ls[j:]
    elif kind == "shuffle":
        rng.shuffle(ls)
    elif kind == "delline" and len(ls) > 1:
        del ls[rng.randrange(len(ls))]
    if kind in ("dup", "dupblock", "shuffle", "delline"):
        return b"\n".join(ls), kind
    if kind in _NUMBER_FOR:
        nums = list(_NUM.finditer(data))
        out = data
        for m in sorted(rng.sample(nums, min(len(nums), rng.randint(1, 3))), key=lambda m: -m.start()):
            out = out[:m.start()] + _NUMBER_FOR[kind](rng, m, nums) + out[m.end():]
        return out, kind
    text = data.decode("utf-8", "replace")
    return {"utf16": lambda: text.encode("utf-16-le"), "utf16bom": lambda: text.encode("utf-16"),
            "latin1": lambda: text.encode("latin-1", "replace") + b"\xe9\xff", "bom": lambda: b"\xef\xbb\xbf" + data,
            "crlf": lambda: data.replace(b"\n", b"\r\n"), "cr": lambda: data.replace(b"\n", b"\r"),
            "nul": lambda: (lambda i: data[:i] + b"\0" * rng.randint(1, 3) + data[i:])(rng.randrange(len(data) + 1)),
            "gzgarbage": lambda: b"\x1f\x8b" + bytes(rng.randrange(256) for _ in range(rng.randint(0, 200))),
            "gztrunc": lambda: (lambda z: z[:rng.randrange(len(z) + 1)])(gzip.compress(data)),
            "gzip": lambda: gzip.compress(data),
            "trailing": lambda: data.rstrip(b"\n") + rng.choice([b"", b"\n\n\n", b"   \n", b"\t"]),
            "empty": lambda: b""}[kind](), kind


# mutations that change no content: the reading must be the original's
_SAME_READING = {"crlf", "gzip", "trailing", "bom"}
_PRINTED_NONFINITE = re.compile(r"(?<![A-Za-z])(nan|inf|infinity)(?![A-Za-z])", re.I)


def _numbers(doc, path=""):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _numbers(v, f"{path}.{k}")
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _numbers(v, f"{path}[{i}]")
    elif isinstance(doc, (int, float)) and not isinstance(doc, bool):
        yield path, doc


def _sane_or_one_error(r) -> bool:
    """True for a result (exit 0, no traceback, nothing non-finite printed); one `error:` line, else a failure."""
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    if r.exit_code != 0:
        line = assert_one_error(r)
        assert len(line) < 2000, line
        return False
    assert "Traceback" not in r.output
    return True


def _check_logs(doc: list) -> None:
    for f in doc:
        for path, x in _numbers(f):
            assert math.isfinite(x), (path, x)
        if f["accept_length"] is not None:
            assert 1 <= f["accept_length"] <= 64 and f["al"]["estimator"], f["al"]
        if f["tpot_ms"] is not None:
            assert 1e-3 <= f["tpot_ms"] <= 1e12 and f["tpot"]["estimator"] and f["tpot"]["source"], f["tpot"]


def _check_accept(doc: dict) -> None:
    for f in doc["files"]:
        for path, x in _numbers(f):
            assert math.isfinite(x) and (x >= 0 or path.endswith("delta")), (path, x)
        d = f.get("measured_depth") or 64
        assert 1 <= f["accept_length"] <= d * (1 + 1e-9) and f["kind"] and f["estimator"] and f["source"], f
        assert all(a["alpha"] is None or 0 <= a["alpha"] <= 1 for a in f.get("alphas") or [])
        for k, v in (f.get("al_by_depth") or {}).items():
            assert 1 <= v["al"] <= int(k) * (1 + 1e-9), (k, v)


def _reading(cmd: str, r):
    if r.exit_code:  # (its counts aside: blank lines added at the end are lines read)
        return re.sub(r"\d+", "N", r.output.strip().split(": ", 2)[-1])
    doc = json.loads(r.stdout)
    if cmd == "logs":
        return [(f["tpot_ms"], f["accept_length"], (f["tpot"] or {}).get("estimator")) for f in doc]
    return [(f["accept_length"], f["kind"], f["estimator"]) for f in doc["files"]]


@functools.lru_cache(maxsize=None)
def _original(cmd: str, src: Path):
    return _reading(cmd, invoke(cmd, src, "--json"))


@pytest.mark.parametrize("seed", range(400))
def test_fuzzed_log_reads_sanely_or_is_one_error(tmp_path, seed):
    """A corpus file (tests/data), mutated: `wmtp logs` and `wmtp accept` (JSON and tables) give a sane reading or
    one error line; a mutation that keeps the content (CRLF, gzip, a UTF-8 mark, trailing blank lines) the same
    reading as the file's own."""
    rng = random.Random(seed)
    src = rng.choice(CORPUS)
    data, kind = mutate(src.read_bytes(), rng)
    p = tmp_path / (f"m{src.suffix}" + (".gz" if kind == "gzip" else ""))
    p.write_bytes(data)
    for cmd, check in (("logs", _check_logs), ("accept", _check_accept)):
        extra = ["-d", str(rng.randint(2, 9))] if cmd == "accept" and rng.random() < 0.2 else []
        r = invoke(cmd, p, "--json", *extra)
        if _sane_or_one_error(r):
            check(json.loads(r.stdout))
        if kind in _SAME_READING and not extra and not src.read_bytes().startswith(b"\xff\xfe"):  # (bytes of UTF-8)
            assert _reading(cmd, r) == _original(cmd, src), (kind, src.name)
        table = invoke(cmd, p, *extra)
        if _sane_or_one_error(table):
            m = _PRINTED_NONFINITE.search(table.output)
            assert m is None, table.output[max(0, m.start() - 200):m.end() + 50]


@pytest.mark.parametrize("case", range(80))
def test_huge_number_in_a_log_reads_sanely_or_is_one_error(tmp_path, case):
    """One number of a corpus file (log, JSON, CSV) replaced by 5000 or 400 digits, 1e400, 1e-320 or 4294967297, read
    by both readers: the same answer, sane, or the same one error."""
    rng = random.Random(1000 + case)
    src = rng.choice([f for f in CORPUS if not f.read_bytes().startswith((b"\x1f\x8b", b"\xff\xfe"))])  # (UTF-8)
    data = src.read_bytes()
    m = rng.choice(list(_NUM.finditer(data)))
    rep = rng.choice([HUGE.encode(), WIDE.encode(), b"1e400", b"1e-320", b"4294967297"])
    p = tmp_path / "n.log"
    p.write_bytes(data[:m.start()] + rep + data[m.end():])
    got = []
    for reference in (False, True):
        try:
            a = analyse(p, reference=reference)
            got.append((a["tpot_ms"], a["accept_length"], a["garbled"]))
        except WmtpError as e:
            got.append(str(e))
    assert got[0] == got[1]
    r = invoke("logs", p, "--json")
    if _sane_or_one_error(r):
        _check_logs(json.loads(r.stdout))


# --- the fuzz, pinned: profiles and engine presets ----------------------------------------------------------------
_VALUES = [None, True, 0, -1, -0.5, 1.5, 1e308, 10**30, 2**63, 10**400, float("nan"), float("inf"), "", "x", [],
           {}, [1, 2], {"a": 1}, [None], 1e-300]


def _paths(doc, rng, path=()):
    if path:
        yield path
    if isinstance(doc, dict):
        items = list(doc.items())
    elif isinstance(doc, list):
        items = list(enumerate(doc)) if len(doc) <= 8 else [(i, doc[i]) for i in rng.sample(range(len(doc)), 6)]
    else:
        items = []
    for k, v in items:
        yield from _paths(v, rng, path + (k,))


def _mutated_doc(doc: dict, rng: random.Random) -> dict:
    """`doc` with 1-3 fields dropped, negated, scaled by 1e12 or 1e-12, or replaced (null, a string for a number, a
    list for an object, NaN, infinity, 10**400)."""
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(list(_paths(doc, random.Random(rng.random()))))
        parent = functools.reduce(lambda d, k: d[k], path[:-1], doc)
        old = parent[path[-1]]
        if rng.random() < 0.15 and isinstance(parent, dict):
            del parent[path[-1]]
        elif rng.random() < 0.3 and isinstance(old, (int, float)) and not isinstance(old, bool):
            parent[path[-1]] = rng.choice([-old, old * 1e12, old * 1e-12, -1e-9])
        else:
            parent[path[-1]] = rng.choice(_VALUES + [str(old)[:50], [old], {"a": old}])
    return doc


_SOURCES = {"profile": PROFILES_DIR / "h200.json", "flashinfer": PROFILES_DIR / "h200-flashinfer.json",
            "preset": engines_dir() / "sglang-b200-paper.json",
            "preset-v1": engines_dir() / "sglang-b200-paper-v1.json"}
_DOCS = {k: json.loads(p.read_text()) for k, p in _SOURCES.items()}


@pytest.mark.parametrize("which, seed", [(w, s) for w, n in (("profile", 64), ("flashinfer", 20), ("preset", 32),
                                                              ("preset-v1", 24)) for s in range(n)])
def test_fuzzed_profile_or_preset_prices_sanely_or_is_one_error(tmp_path, which, seed):
    """A shipped profile or engine preset, mutated field-wise (70 %) or byte-wise: predict (JSON and table), and for
    some seeds sweep and report, give an answer with every time finite and non-negative, or one error line."""
    rng = random.Random(seed)
    if rng.random() < 0.7:
        data = json.dumps(_mutated_doc(_DOCS[which], rng)).encode()
    else:
        data = mutate(_SOURCES[which].read_bytes(), rng)[0]
    p = tmp_path / "p.json"
    p.write_bytes(data)
    opt = ["--framework", p] if which.startswith("preset") else ["--profile", p]
    extra = rng.choice([[], ["--batch", "16"], ["--ctx", "4K"], ["--kv-dtype", "fp8"], ["--weight-dtype", "bf16"],
                        ["--tp", "2"], ["--depth", "3"]])
    r = invoke("predict", "-m", "q35", "--ctx", "1M", *opt, *extra, "--json")
    if _sane_or_one_error(r):
        for path, x in _numbers(json.loads(r.stdout)):
            assert math.isfinite(x) and (x >= 0 or not path.endswith(("ms", "_s"))), (path, x)
    table = invoke("predict", "-m", "q35", "--ctx", "1M", *opt, *extra)
    if _sane_or_one_error(table):
        assert not _PRINTED_NONFINITE.search(table.output), table.output
    if seed % 4 == 0:
        sw = invoke("sweep", rng.choice(["ctx", "depth", "window", "batch"]), "-m", "q35", *opt, "--json")
        if _sane_or_one_error(sw):
            assert all(math.isfinite(x) for _, x in _numbers(json.loads(sw.stdout)))
    if seed % 8 == 0:
        out = tmp_path / "r.html"
        if not _sane_or_one_error(invoke("report", "-m", "q35", *opt, "--out", out)):
            assert not out.exists() and sorted(os.listdir(tmp_path)) == ["p.json"]


# --- the fuzz, pinned: outputs that cannot be written ---------------------------------------------------------------
def _decode_log(path: Path, step_ms: float) -> Path:
    """An SGLang decode log at batch 1 whose every line gives T_iter = accept len / gen throughput = step_ms."""
    path.write_text("\n".join(f"[2026-01-01 10:00:{i:02d}] Decode batch. #running-req: 1, #token: 10, token usage: "
                              f"0.1, accept len: 3.00, cuda graph: True, gen throughput (token/s): "
                              f"{3 / (step_ms / 1e3):.3f}, #queue-req: 0" for i in range(40)))
    return path


_WRITERS = {
    "report": lambda t, o: ["report", "-m", "q35", "--out", o],
    "sweep --csv": lambda t, o: ["sweep", "depth", "-m", "q35", "--csv", o],
    "engines --fit": lambda t, o: ["engines", "--fit", POINTS, "--out", o],
    "calibrate-logs": lambda t, o: ["calibrate-logs", f"{_decode_log(t / 'a.log', 35.0)}:3",
                                    f"{_decode_log(t / 'b.log', 40.0)}:5", "--model", "q35", "--out", o],
}


def _read_only_folder(t: Path) -> Path | None:
    """A folder this process cannot write into: a 0555 folder, or for root (who writes there) /sys where the system
    refuses it; None where there is none."""
    ro = t / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    for folder in (ro, Path("/sys")):
        try:
            (folder / ".wmtp-probe").open("x").close()
        except OSError:
            return folder
        (folder / ".wmtp-probe").unlink()
    return None


def _target(t: Path, kind: str) -> Path:
    (t / "afile").write_text("x")
    (t / "adir").mkdir()
    (t / "todir").symlink_to(t / "adir")
    ro = _read_only_folder(t)
    if ro is None and "read-only" in kind:
        pytest.skip("no folder this user cannot write into")
    ro = ro or t
    return {"a folder": t / "adir", "a link to a folder": t / "todir", "through a file": t / "afile" / "o.x",
            "a device": Path("/dev/full"), "a read-only folder": ro / "o.x",
            "under a read-only folder": ro / "s" / "o.x",
            "a folder with a trailing /.": t / "adir" / "."}[kind]


@pytest.mark.parametrize("kind", ["a folder", "a link to a folder", "through a file", "a device", "a read-only folder",
                                  "under a read-only folder", "a folder with a trailing /."])
@pytest.mark.parametrize("writer", sorted(_WRITERS))
def test_unwritable_output_is_one_error_and_leaves_nothing(tmp_path, writer, kind):
    target = _target(tmp_path, kind)
    args = _WRITERS[writer](tmp_path, target)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    assert_one_error(invoke(*args))
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before  # no partial file, no temporary file
    assert not target.exists() or target.is_dir() or target == Path("/dev/full")


@pytest.mark.parametrize("writer", sorted(_WRITERS))
def test_output_in_a_missing_folder_is_written_whole(tmp_path, writer):
    """The control (and the documented behaviour: `wmtp.fileio` creates an output's missing folders): the file is
    written whole, no temporary file beside it."""
    out = tmp_path / "new" / "deeper" / "o.out"
    r = invoke(*_WRITERS[writer](tmp_path, out))
    assert r.exit_code == 0, r.output
    assert out.stat().st_size > 0 and not [p for p in out.parent.iterdir() if p.name.endswith(".tmp")]
