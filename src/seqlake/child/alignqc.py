"""Alignment QC of a batch of ``alignments`` rows, counted as ``samtools stats`` counts it.

Rules (samtools ``stats.c``):

- MAPQ histogram: one count per mapped read (its primary alignment);
- insert size: one count per pair with both mates mapped, ``|TLEN|`` of its primary alignments
  (samtools' ``IS`` rows: inward + outward + other pairs), on one contig or with a non-zero TLEN,
  capped at samtools' default maximum (``-i 8000``);
- error rate: the sum of NM over ``bases mapped (cigar)`` (M, I, = and X operations), both over
  primary and supplementary alignments (samtools skips only secondary ones, which are not rows here);
- soft-clipped bases: the S operations of primary alignments.

Depth bases per contig (the numerator of the mean depth) follow :mod:`seqlake.lake.depth`: aligned
blocks of primary and supplementary alignments.

mappy picks the primary alignment as minimap2 does (see :mod:`seqlake.child.align`), so these equal
``samtools stats`` on the same alignments; against the minimap2 command line they differ only where
minimap2 hard-clips supplementary alignments (their bases are not counted here either).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from seqlake.lake.depth import I64, depth_blocks
from seqlake.lake.staging import AlignQC

#: samtools stats' default maximum insert size (``-i``): larger ones count as this size
MAX_INSERT = 8000
_OP = re.compile(r"(\d+)([MIDNSHP=XB])")


@lru_cache(maxsize=4096)
def _cigar_sums(cigar: str) -> tuple[int, int]:
    """(bases mapped as samtools counts them: M, I, =, X; soft-clipped bases) of a CIGAR."""
    mapped = clipped = 0
    for n, op in _OP.findall(cigar):
        if op in "MI=X":
            mapped += int(n)
        elif op == "S":
            clipped += int(n)
    return mapped, clipped


def alignment_qc(table: pa.Table, blocks: Mapping[str, tuple[I64, I64]] | None = None) -> AlignQC:
    """The :class:`AlignQC` of some ``alignments`` rows (with ``tlen``, ``mate_pos``); ``blocks``: the
    table's :func:`~seqlake.lake.depth.depth_blocks` when the caller has them already. Rows are selected
    by NumPy masks over whole columns: filtering the table would copy its strings."""
    qc = AlignQC()
    flag = table.column("flag").to_numpy().astype(np.int64)
    aligned = (flag & 0x104) == 0
    primary = aligned & table.column("is_primary").to_numpy(zero_copy_only=False)
    if aligned.any():
        nm = table.column("nm").fill_null(0).to_numpy(zero_copy_only=False)
        qc.mismatches = int(nm[aligned].astype(np.int64).sum())
        # the CIGAR sums per distinct CIGAR (a few thousand in a batch), then per row by its code
        cigars = table.column("cigar").combine_chunks().dictionary_encode()
        sums = np.array([_cigar_sums(c) for c in cigars.dictionary.to_pylist()], dtype=np.int64).reshape(-1, 2)
        codes = cigars.indices.fill_null(0).to_numpy(zero_copy_only=False)
        qc.bases_mapped_cigar = int(sums[codes[aligned], 0].sum())
        qc.soft_clipped_bases = int(sums[codes[primary], 1].sum())
    if primary.any():
        mapq = table.column("mapq").fill_null(0).to_numpy(zero_copy_only=False)[primary].astype(np.int64)
        qc.mapq_hist = {int(q): int(n) for q, n in zip(*np.unique(mapq, return_counts=True), strict=True)}
        qc.insert_hist = _insert_hist(table, flag, primary)
    for contig, (starts, ends) in (depth_blocks(table) if blocks is None else blocks).items():
        qc.depth_bases[contig] = int((ends - starts).sum())
    return qc


def _insert_hist(table: pa.Table, flag: I64, rows: npt.NDArray[np.bool_]) -> dict[int, int]:
    """The insert sizes of the ``rows`` (the aligned primaries) of ``table``, as samtools stats counts them."""
    import pyarrow.compute as pc  # here, not at the top: a child that does not align never loads it
    pair = rows & ((flag & 0x1) != 0) & ((flag & 0x8) == 0)
    tlen = table.column("tlen").fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    same_contig = pc.fill_null(pc.equal(table.column("contig"), table.column("mate_contig")), False)
    same = same_contig.to_numpy(zero_copy_only=False)
    size = np.minimum(np.abs(tlen), MAX_INSERT)
    # samtools counts both mates and prints pairs; a pair's two primaries have the same |TLEN|
    counted = pair & ((flag & 0x40) != 0) & ((size > 0) | same)
    sizes, counts = np.unique(size[counted], return_counts=True)
    return {int(s): int(n) for s, n in zip(sizes, counts, strict=True)}
