"""SAM text read into :class:`~seqlake.formats.bam.Records`: what the comparisons with ``minimap2 -ax sr |
samtools sort`` and the tests parse. Only the fields a BAM record holds; of the tags, the integer (``i``) and
string (``Z``, ``A``) ones are kept as BAM stores them, others (``f``, ``B``, ``H``) are dropped. And a header's
read group IDs (:func:`read_group_ids`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from seqlake.formats.bam import Ragged, Records, concat_tags, int_tag
from seqlake.formats.cigar import parse


def records(lines: Iterable[str], tids: Mapping[str, int]) -> Records:
    """The records of SAM body lines (``@`` lines skipped), references numbered by ``tids``."""
    rows = [line.rstrip("\n").split("\t") for line in lines if line and not line.startswith("@")]

    def ints(k: int) -> np.ndarray:
        return np.array([int(r[k]) for r in rows], dtype=np.int64)

    tid = np.array([tids.get(r[2], -1) for r in rows], dtype=np.int64)
    next_tid = np.array([tid[i] if r[6] == "=" else tids.get(r[6], -1) for i, r in enumerate(rows)], dtype=np.int64)
    row, op, length = parse([r[5] for r in rows])
    counts = np.bincount(row, minlength=len(rows)).astype(np.int64)
    cigar = Ragged((length << 4 | op).astype(np.uint32), np.concatenate(([0], np.cumsum(counts))).astype(np.int64))
    seq = Ragged.of([r[9].encode() if r[9] != "*" else b"" for r in rows])
    qual = Ragged.of([bytes(c - 33 for c in r[10].encode()) if r[10] != "*" else b"\xff" * len(r[9].replace("*", ""))
                      for r in rows])
    per_tag: list[list[bytes]] = []
    for r in rows:
        raw = []
        for t in r[11:]:
            name, kind, value = t.split(":", 2)
            if kind == "i":
                raw.append(int_tag(name, np.array([int(value)], dtype=np.int64)).data.tobytes())
            elif kind == "Z":
                raw.append(name.encode() + b"Z" + value.encode() + b"\0")
            elif kind == "A":
                raw.append(name.encode() + b"A" + value.encode())
        per_tag.append(raw)
    tags = concat_tags(Ragged.of([b"".join(t) for t in per_tag]))
    return Records(tid, ints(3) - 1, ints(4), ints(1), next_tid, ints(7) - 1, ints(8),
                   Ragged.of([r[0].encode() for r in rows]), cigar, seq, qual, tags)


def read_group_ids(text: str) -> list[str]:
    """The ``@RG`` IDs of a SAM header, in order (a CRAM record's read group is an index into them)."""
    return [field[3:] for line in text.splitlines() if line.startswith("@RG")
            for field in line.split("\t") if field.startswith("ID:")]
