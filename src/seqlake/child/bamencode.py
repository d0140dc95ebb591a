"""A batch's BAM records encoded in compiled code: the bytes :func:`seqlake.formats.bam.encode` writes for
:func:`seqlake.lake.bamrows.records_of`'s records (tests/core/test_bam_rows.py holds them equal byte for byte),
without the intermediate per-byte index arrays of the NumPy path, which cost the child as much CPU as
mappy's batch mapping of the same reads saves.

The placement of each record (an unmapped read with a mapped mate at its mate's position), its CIGAR packed and
its tags' values are worked out here over the whole batch in NumPy; each record's bytes are then written in one
pass (``mappy.seqlake_encode_records``: scripts/mappy/seqlake_batch.h, compiled into seqlake's mappy build by
scripts/install_mappy.py), its bases and qualities read once from the reads' buffer, with the base codes, the
complement and the reference-consuming operations of :mod:`seqlake.formats.bam` and :mod:`seqlake.formats.cigar`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from seqlake.formats import bam
from seqlake.formats.cigar import CONSUMES_REF
from seqlake.lake.bamrows import name_bytes, placement
from seqlake.lake.pileup import AlignmentRows, BatchReads, parse_cigars

I64 = npt.NDArray[np.int64]
#: per op code (0..15): 1 where it consumes reference bases
_CONSUMES_REF16 = np.zeros(16, dtype=np.uint8)
_CONSUMES_REF16[: len(CONSUMES_REF)] = CONSUMES_REF


@dataclass(frozen=True)
class EncodedRecords:
    """A batch's records as BAM bytes, and what a sort by coordinate and window needs of each."""

    data: bytes | bytearray
    starts: I64
    tid: I64
    pos: I64
    flag: I64
    #: the reference end (0-based, exclusive; ``pos + 1`` without reference bases)
    end: I64


def encode_rows(rows: AlignmentRows, reads: BatchReads, *, mapq: I64, nm: I64,
                read_group: str | tuple[Sequence[str], I64],
                cigar: tuple[I64, npt.NDArray[np.uint32]] | None = None) -> EncodedRecords:
    """The BAM records of a batch's rows, as :func:`seqlake.lake.bamrows.records_of` makes them, encoded.
    ``cigar``: the rows' CIGARs already packed (each row's operation count, the operations end to end: the
    aligner's), else parsed from ``rows.cigar``."""
    import mappy  # the child's aligner's build: every child that aligns has it

    n = len(rows.flag)
    flag = rows.flag.astype(np.int64)
    tid, pos = placement(rows)
    if cigar is None:
        row, op, length = parse_cigars(rows.cigar)
        counts = np.bincount(row, minlength=n).astype(np.int64)
        ops = (length << 4 | op).astype(np.uint32)
    else:
        counts, ops = cigar
    cigar_off = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    names = name_bytes(rows.names)
    if isinstance(read_group, str):
        groups, codes = [read_group], np.zeros(n, dtype=np.int64)
    else:
        groups, codes = list(read_group[0]), np.asarray(read_group[1], dtype=np.int64)
    tags = bam.string_tag("RG", groups)

    def i64(a: npt.ArrayLike) -> I64:
        return np.ascontiguousarray(a, dtype=np.int64)

    data, starts, ends = mappy.seqlake_encode_records(
        i64(tid), i64(pos), i64(mapq), flag, i64(rows.mate_contig), i64(rows.mate_start), i64(rows.tlen), i64(nm),
        np.ascontiguousarray(names.data, dtype=np.uint8), i64(names.offsets), np.ascontiguousarray(ops, np.uint32),
        cigar_off,
        np.ascontiguousarray(reads.data, dtype=np.uint8), i64(reads.seq_start), i64(reads.qual_start),
        i64(reads.length), np.ascontiguousarray(tags.data, dtype=np.uint8), i64(tags.offsets), codes, bam.NT16,
        bam.COMPLEMENT, _CONSUMES_REF16)
    return EncodedRecords(data, np.frombuffer(starts, dtype=np.int64), i64(tid), i64(pos), flag,
                          np.frombuffer(ends, dtype=np.int64))

