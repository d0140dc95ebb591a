"""CIGARs: SAM's text (``"5S70M2I73M"``) and BAM's packed operations (``length << 4 | op``), over whole batches.

Op codes are BAM's (``MIDNSHP=XB`` -> 0..9); which ops consume the reference and the query is SAM's table.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
OPS = "MIDNSHP=XB"
#: CIGAR letters -> BAM op codes (-1 elsewhere)
OP_CODE = np.full(256, -1, dtype=np.int64)
for _k, _b in enumerate(OPS):
    OP_CODE[ord(_b)] = _k
#: per op code: 1 where it consumes reference bases, query bases
CONSUMES_REF = np.array([1, 0, 1, 1, 0, 0, 0, 1, 1, 0], dtype=np.int64)
CONSUMES_QUERY = np.array([1, 1, 0, 0, 1, 0, 0, 1, 1, 0], dtype=np.int64)


def parse(cigars: list[str]) -> tuple[I64, I64, I64]:
    """(row, op code, length) of every operation of ``cigars`` (``""`` or ``"*"``: none), in order, at once."""
    text = "".join(c if c != "*" else "" for c in cigars).encode("ascii")
    arr = np.frombuffer(text, dtype=np.uint8)
    lens = np.fromiter((len(c) if c != "*" else 0 for c in cigars), dtype=np.int64, count=len(cigars))
    offsets = np.concatenate(([0], np.cumsum(lens)))
    is_op = arr >= 61  # '=' and the letters; digits are 48..57
    op_at = np.flatnonzero(is_op)
    digit_at = np.flatnonzero(~is_op)
    owner = np.cumsum(is_op)[digit_at]  # the op each digit belongs to: the ops before it
    power = op_at[owner] - digit_at - 1
    length = np.bincount(owner, weights=(arr[digit_at] - 48) * 10.0 ** power, minlength=len(op_at))
    row = np.searchsorted(offsets, op_at, side="right") - 1
    return row.astype(np.int64), OP_CODE[arr[op_at]], np.rint(length).astype(np.int64)


def to_text(counts: I64, op: I64, length: I64) -> list[str]:
    """The CIGAR strings of rows holding ``counts[i]`` operations each (``op``, ``length`` row after row);
    ``"*"`` for a row without any, as SAM writes it."""
    words = [f"{n}{OPS[o]}" for n, o in zip(length.tolist(), op.tolist(), strict=True)]
    out = []
    at = 0
    for c in counts.tolist():
        out.append("".join(words[at : at + c]) if c else "*")
        at += c
    return out


def reference_span(counts: I64, op: I64, length: I64) -> I64:
    """Reference bases each row's operations consume (``bam_cigar2rlen``)."""
    row = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    return np.bincount(row, weights=length * CONSUMES_REF[op], minlength=len(counts)).astype(np.int64)


def query_length(counts: I64, op: I64, length: I64) -> I64:
    """Query bases each row's operations consume (``bam_cigar2qlen``)."""
    row = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    return np.bincount(row, weights=length * CONSUMES_QUERY[op], minlength=len(counts)).astype(np.int64)
