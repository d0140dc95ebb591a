"""The allele and indel counts of one window, counted by the reducer from the children's sorted records
(docs/INTERNALS.md, "Read slices and the per-sample BAM", "Counting from records").

A window's records of a sample are its children's placed and carried runs (:mod:`seqlake.lake.slices`):
every record whose alignment covers a base of the window, the mates of an overlapping pair both among them.
They are decoded back into what the child counted (:func:`seqlake.lake.bamrows.counting_inputs`) and counted
by the same code (:class:`seqlake.lake.pileup.AlleleAccumulator`); of its rows only the window's positions
are kept (a carried record also counts the bases it has in earlier windows, which those windows count; an
indel is kept where its anchor is). The result is the ``alleles`` and ``indels`` staging tables the
reducer merged from the children's per-position rows, row for row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from seqlake.formats import bam
from seqlake.lake.bamrows import counting_inputs
from seqlake.lake.pileup import AlleleAccumulator
from seqlake.lake.positions import dictionary_column
from seqlake.lake.regions import Contigs, Region
from seqlake.lake.slices import SliceEntry, read_runs, read_window_bytes
from seqlake.lake.tables import ALLELES, INDELS

I64 = npt.NDArray[np.int64]
#: records decoded and counted at a time (whole names): ~1 M bases, ~150 MB of counting (20,000 took 650 MB)
RECORDS_PER_BATCH = 5_000
#: a child's bytes of one window (every sample's entries) and where they start in its object
ChildWindow = tuple[bytes, int]


def window_reads(children: Sequence[tuple[str, Sequence[str]]], entries: Sequence[Sequence[Sequence[SliceEntry]]],
                 w: int) -> dict[str, list[tuple[ChildWindow, SliceEntry]]]:
    """Per sample, its children's entries of window ``w`` of a region with the bytes they are in (one ranged GET
    per child holding any record there, in parallel), in child order. ``children``: each child's slices object
    and samples; ``entries``: :func:`seqlake.lake.slices.read_region_entries`'s."""
    out: dict[str, list[tuple[ChildWindow, SliceEntry]]] = {}
    got = read_window_bytes([uri for uri, _ in children], entries, w)
    for (_, samples), ents, read in zip(children, entries, got, strict=True):
        if read is None:
            continue
        for sample, e in zip(samples, ents[w], strict=True):
            if e.placed or e.carried:
                out.setdefault(sample, []).append((read, e))
    return out


def sample_records(reads: Sequence[tuple[ChildWindow, SliceEntry]]) -> tuple[bytes, I64]:
    """A sample's placed and carried records of one window, from each of its children's entries (child order),
    as record bytes and each record's start (decoded a batch at a time by :func:`window_allele_tables`); their
    order does not change a count."""
    plain = []
    for (data, start), entry in reads:
        placed, carried = read_runs(data, start, entry)
        plain += [placed, carried]
    joined = b"".join(plain)
    return joined, bam.record_starts(joined)


def _in_window(table: pa.Table, window: Region) -> pa.Table:
    """The rows of ``table`` whose (contig, pos) is in one of the window's pieces, their contig coded as the
    reducer's staging rows are: into the window's contigs, in piece order."""
    names = [p.contig for p in window.pieces]
    if table.num_rows:
        contig = table.column("contig").cast(pa.string())
        pos = table.column("pos")
        keep = None
        for p in window.pieces:
            here = pc.and_(pc.equal(contig, p.contig), pc.and_(pc.greater_equal(pos, p.start), pc.less(pos, p.end)))
            keep = here if keep is None else pc.or_(keep, here)
        assert keep is not None
        table = table.filter(keep)
    codes = pc.index_in(table.column("contig").cast(pa.string()), value_set=pa.array(names, pa.string()))
    recoded = dictionary_column(np.asarray(codes.to_numpy(zero_copy_only=False), dtype=np.int32), names)
    return table.set_column(table.schema.get_field_index("contig"), "contig", recoded)


def _batches_of_whole_names(data: bytes, starts: I64, size: int) -> list[I64]:
    """The records in batches of about ``size``, each holding every record of its read names (the
    overlapping-mates rule needs both mates in one batch, as a child's chunk held them). Decoding and counting
    a window's 116,000 records at once took 2.2 GB."""
    n = len(starts)
    if n <= size:
        return [np.arange(n, dtype=np.int64)] if n else []
    name = bam.name_ids(bam.read_names(data, starts))
    first = np.full(int(name.max()) + 1, n, dtype=np.int64)
    np.minimum.at(first, name, np.arange(n, dtype=np.int64))
    # names dealt round the batches by their first record: each batch spans the window at a fraction of its
    # depth, as a child's chunk of reads in read order did (batches of consecutive records, each deep over a
    # short span, cost 1.5x the counting: 5.1 s against 3.3 s, measured on the MiSeq pair x10 whose copies
    # shared their read names, before the overlap rule paired a name's rows two by two; not re-measured since)
    batch = np.searchsorted(np.unique(first[name]), first[name]) % -(-n // size)
    order = np.argsort(batch, kind="stable")
    bounds = np.flatnonzero(np.diff(batch[order])) + 1
    return [part.astype(np.int64) for part in np.split(order, bounds)]


def window_allele_tables(records: tuple[bytes, I64], window: Region, contigs: Contigs, min_quality: int,
                         sample: str) -> dict[str, pa.Table]:
    """The ``alleles`` and ``indels`` staging rows of one sample in one window, from its records
    (:func:`sample_records`)."""
    data, starts = records
    acc = AlleleAccumulator(list(contigs), min_quality)
    for batch in _batches_of_whole_names(data, starts, RECORDS_PER_BATCH):
        rows, reads = counting_inputs(bam.decode(data, starts[batch]))
        acc.add(rows, reads)
    alleles, indels = acc.tables(sample)
    return {ALLELES.name: _in_window(alleles, window).cast(ALLELES.schema),
            INDELS.name: _in_window(indels, window).cast(INDELS.schema)}
