"""Records joined on one line: two processes (DP ranks, an API server and its engine) writing one stream without line
buffering, or a capture that lost a line end, leave a line like
`[... DP0 TP0] Decode batch. ..., #queue-req: 0[... DP1 TP4] Decode batch. ..., #queue-req: 0`. The line parsers read
the first record of such a line and would drop the rest; `split_joined` cuts the line before each later record's
prefix, so each record is read on its own (under the line's number: the file's line numbers stay as they are)."""

from __future__ import annotations

# what starts a record of the kinds that repeat line after line (SGLang's scheduler, vLLM's loggers)
STARTS = ("Decode batch", "Prefill batch", "SpecDecoding metrics:", "peculative metrics:", "Avg prompt throughput:")
_ZERO = str.maketrans("123456789", "000000000")
MAX_PIECES = 64  # records on one line read, at most (a runaway line: the rest is its last piece's garbage)


def record_starts(line: str) -> list[int]:
    """Where the records of `line` start their kind's text (`STARTS`), in order; one entry for most lines."""
    at = []
    for key in STARTS:
        i = line.find(key)
        while i >= 0 and len(at) < MAX_PIECES:
            at.append(i)
            i = line.find(key, i + len(key))
    return sorted(at)


def _cut(line: str, lo: int, start: int, shape: str) -> int:
    """Where the record whose kind's text starts at `start` begins its prefix: the first record's prefix has the shape
    `shape` (digits made 0); a prefix of that shape right before `start`, else the last place after `lo` where that
    shape's head (up to its first digit) begins, else `start` itself (no prefix found: the kind's text begins it)."""
    n = len(shape)
    if n and start - n >= lo and line[start - n:start].translate(_ZERO) == shape:
        return start - n
    head = shape[:next((i for i, c in enumerate(shape) if c == "0"), n)]
    if head:
        j = line.rfind(head, lo, start)
        if j > lo:
            return j
    return start


def _ends_a_record(piece: str) -> bool:
    """Whether `piece` (a record from its kind's text on) holds a field and ends as an engine record's field does (a
    number, `%`, the `.` of vLLM V0's lines, `True` / `False`; or a number cut short, when another process's record
    broke into it): prose naming a kind, or a kind's name alone, does not."""
    tail = piece.rstrip(", ")
    return ": " in tail and (tail[-1].isdigit() or tail[-1] in "%." or tail.endswith(("True", "False")))


def split_joined(line: str) -> list[str] | None:
    """The records of a line holding more than one (each with its prefix, newline-terminated), or None for a line of
    one record (or none)."""
    at = record_starts(line)
    if len(at) < 2:
        return None
    shape = line[:at[0]].translate(_ZERO)
    cuts, kind = [0], at[0]  # where each piece starts; where the current piece's kind text starts
    for start in at[1:]:
        c = _cut(line, cuts[-1] + 1, start, shape)
        if c > cuts[-1] and c >= kind and _ends_a_record(line[kind:c]):
            cuts.append(c)
            kind = start
    if len(cuts) < 2:
        return None
    end = line.rstrip("\r\n")
    return [end[a:b] + "\n" for a, b in zip(cuts, cuts[1:] + [len(end)])]
