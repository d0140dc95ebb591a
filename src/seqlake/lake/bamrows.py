"""The bridge between what the counting takes and BAM records (docs/INTERNALS.md, "Read slices and the
per-sample BAM"): a batch's alignment rows, as the counting sees them (primer-clipped in amplicon mode), and
the reads they came from become :class:`seqlake.formats.bam.Records` exactly as the per-sample BAM holds
them (:func:`records_of`); records become the counting's inputs again (:func:`counting_inputs`), so the
reducers count from merged records with the same functions (:func:`seqlake.lake.pileup.count_batch`).

:func:`counting_inputs` of :func:`records_of` gives rows and reads that count the same as the originals (a
pair keyed by its read name instead of its read index: both mates of a pair share it either way;
``tests/core/test_bam_rows.py``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from seqlake.formats import bam
from seqlake.formats.bam import Ragged, Records
from seqlake.lake.pileup import AlignmentRows, BatchReads, parse_cigars

I64 = npt.NDArray[np.int64]
_PHRED_OFFSET = 33


def _sources(starts: I64, lengths: I64, reverse: npt.NDArray[np.bool_]) -> tuple[I64, npt.NDArray[np.bool_]]:
    """Where each output byte of rows ``data[starts : starts + lengths]`` comes from, reversed on ``reverse``
    rows, and which output bytes are in such rows: one repeat of a base and one of a sign per byte
    (``base + sign * i`` for output byte ``i``), where three repeats and a select per byte cost a sixth of
    the child."""
    offsets = np.concatenate(([0], np.cumsum(lengths)))[:-1]
    base = np.where(reverse, starts + lengths - 1 + offsets, starts - offsets)
    sign = np.where(reverse, -1, 1).astype(np.int8)
    i = np.arange(int(lengths.sum()), dtype=np.int64)
    per_byte_sign = np.repeat(sign, lengths)
    return np.repeat(base, lengths) + per_byte_sign * i, per_byte_sign < 0


def _ragged(data: npt.NDArray[np.uint8], src: I64, rev_bytes: npt.NDArray[np.bool_], lengths: I64,
            table: npt.NDArray[np.uint8] | None, *, complement: bool = False) -> Ragged:
    """The bytes ``data[src]`` as rows of ``lengths``, through ``table`` (a byte -> byte lookup) when given,
    complemented where ``rev_bytes`` when ``complement``."""
    out = data[src]
    if table is not None:
        out = table[out]
    if complement and rev_bytes.any():
        at = np.flatnonzero(rev_bytes)
        out[at] = bam.COMPLEMENT[out[at]]
    return Ragged(out, np.concatenate(([0], np.cumsum(lengths))).astype(np.int64))


def records_of(rows: AlignmentRows, reads: BatchReads, *, mapq: I64, nm: I64,
               read_group: str | tuple[Sequence[str], I64]) -> Records:
    """The BAM records of a batch's rows (``mapq`` and ``nm`` per row, from the ``alignments`` table). An
    unmapped row whose mate is mapped is placed at its mate's position (as ``minimap2 -a`` writes it).
    ``read_group``: every row's ``RG``, or the groups' IDs and each row's index into them
    (:meth:`seqlake.lake.readgroups.ShardGroups.of`)."""
    n = len(rows.flag)
    flag = rows.flag.astype(np.int64)
    rev = (flag & bam.FLAG_REVERSE) != 0
    tid, pos = placement(rows)
    row, op, length = parse_cigars(rows.cigar)
    counts = np.bincount(row, minlength=n).astype(np.int64)
    cigar = Ragged((length << 4 | op).astype(np.uint32), np.concatenate(([0], np.cumsum(counts))).astype(np.int64))
    src, rev_bytes = _sources(reads.seq_start, reads.length, rev)
    seq = _ragged(reads.data, src, rev_bytes, reads.length, None, complement=True)
    # a read's qualities are as far from its bases in every byte: the same sources, shifted
    shift = np.repeat(reads.qual_start - reads.seq_start, reads.length)
    qual = _ragged(reads.data, src + shift, rev_bytes, reads.length, _MINUS_33)
    names = name_bytes(rows.names)
    rg = (bam.constant_tag("RG", read_group, n) if isinstance(read_group, str)
          else bam.coded_tag("RG", read_group[0], read_group[1]))
    tags = bam.concat_tags(bam.int_tag("NM", nm), rg)
    return Records(tid.astype(np.int64), pos.astype(np.int64), mapq.astype(np.int64), flag,
                   rows.mate_contig.astype(np.int64), rows.mate_start.astype(np.int64), rows.tlen.astype(np.int64),
                   names, cigar, seq, qual, tags)


def placement(rows: AlignmentRows) -> tuple[I64, I64]:
    """Each record's reference and 0-based position: the row's, or for an unmapped row whose mate is mapped
    its mate's (as ``minimap2 -a`` writes it), else none (-1)."""
    unmapped = (rows.flag & bam.FLAG_UNMAPPED) != 0
    placed_by_mate = unmapped & (rows.mate_contig >= 0)
    tid = np.where(unmapped, np.where(placed_by_mate, rows.mate_contig, -1), rows.contig)
    pos = np.where(unmapped, np.where(placed_by_mate, rows.mate_start, -1), rows.start)
    return tid.astype(np.int64), pos.astype(np.int64)


def name_bytes(names: pa.Array | pa.ChunkedArray) -> Ragged:
    """The read names' bytes end to end and their offsets, from the Arrow buffers (no Python strings)."""
    if isinstance(names, pa.ChunkedArray):
        names = names.combine_chunks()
    names = names.cast(pa.large_string())
    n = len(names)
    if n == 0:
        return Ragged(np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=np.int64))
    _, offsets_buf, data_buf = names.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[names.offset : names.offset + n + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8)[int(offsets[0]) : int(offsets[-1])]
    return Ragged(data, offsets - offsets[0])


#: Phred+33 bytes -> Phred values, and back
_MINUS_33 = ((np.arange(256) - _PHRED_OFFSET) % 256).astype(np.uint8)
_PLUS_33 = ((np.arange(256) + _PHRED_OFFSET) % 256).astype(np.uint8)


def counting_inputs(records: Records) -> tuple[AlignmentRows, BatchReads]:
    """What :func:`seqlake.lake.pileup.count_batch` takes, from records: the read as sequenced again (the
    reverse rows' bases complemented back and reversed), its qualities as Phred+33, the two mates of a pair
    under one key (their read name)."""
    from seqlake.formats import cigar as cigars  # the text form the counting parses

    n = len(records)
    flag = records.flag
    rev = (flag & bam.FLAG_REVERSE) != 0
    unmapped = (flag & bam.FLAG_UNMAPPED) != 0
    lengths = records.seq.lengths
    src, rev_bytes = _sources(records.seq.offsets[:-1], lengths, rev)
    seq = _ragged(records.seq.data.astype(np.uint8), src, rev_bytes, lengths, None, complement=True)
    qual = _ragged(records.qual.data.astype(np.uint8), src, rev_bytes, lengths, _PLUS_33)
    data = np.concatenate((seq.data, qual.data))
    names = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(records.names.offsets.astype(np.int32)),
                                                   pa.py_buffer(records.names.data.astype(np.uint8))])
    pair = bam.name_ids(records.names)
    packed = records.cigar.data.astype(np.int64)
    text = cigars.to_text(records.cigar.lengths, packed & 0xF, packed >> 4)
    rows = AlignmentRows(
        contig=np.where(unmapped, -1, records.tid).astype(np.int64),
        start=np.where(unmapped, 0, records.pos).astype(np.int64), flag=flag.astype(np.int64),
        cigar=[c if c != "*" else "" for c in text],
        pair=np.where((flag & 0x1) != 0, pair.astype(np.int64), -1),
        mate_start=records.next_pos.astype(np.int64), mate_contig=records.next_tid.astype(np.int64),
        tlen=records.tlen.astype(np.int64), names=names)
    reads = BatchReads(data, seq.offsets[:-1].copy(), len(seq.data) + qual.offsets[:-1], lengths.astype(np.int64))
    return rows, reads
