"""A sample's files (consensus FASTA, VCF and its tabix index) joined from the regions' pieces, by the commit.

Each reducer leaves, per sample, its region's piece of each file in the region's genomes object
(:class:`seqlake.reduce.reducer.GenomePieces`; offsets in the region's summary): the FASTA's bytes, the VCF's
records as BGZF blocks without the EOF member, and the tabix entries of those records relative to the
piece's first byte. The commit joins them per sample in region order (reference order) without holding a
genome: the FASTA is the pieces one after the other; the VCF is its header (BGZF), the pieces, then the EOF
member; the ``.tbi`` is the pieces' entries, each shifted by its piece's byte offset in the joined file
(:meth:`seqlake.lake.vcf.JoinedIndex.add`, numpy arrays: never an object per chunk). The joining itself is
:func:`seqlake.base.storage.concatenate` (server-side copies of large pieces on S3, bounded memory).

Once every sample's files are joined, the commit records it (:meth:`RunLayout.genomes_joined`, under
``runs/``); once the run is committed (its commit point: :func:`seqlake.aws.steps.commit_step`) it removes
the pieces (:func:`remove_pieces`): the FASTA pieces are one byte per base of the genome (all ``N`` below
the calling depth), as large as a low-depth run's BAM three times over, and ``results/`` holds them joined.
A commit run again joins only the samples that record does not list (:func:`joined_samples`): after a
commit that got past its commit point, none. The pieces go only after the record is written, the record
only after every sample's files are put (each whole: a local file renamed into place, an S3 object complete
or absent), and nothing but a sample's deletion (which takes the run's ``runs/`` objects too) removes a
joined file. So a commit that dies anywhere, before its commit point or during the removal (after which
RecordFailure even rolls the run out of the tables), is run again cleanly: the pieces are all there, or the
record says every file made from them is. The record is under ``runs/`` rather than read off a listing of
``results/``: the local cloud puts ``runs/`` back into its S3 when it starts again, not ``results/``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from seqlake.base import storage
from seqlake.base.errors import SeqlakeError
from seqlake.base.layout import CONSENSUS_SUFFIX, VCF_SUFFIX, RunLayout
from seqlake.base.storage import Source
from seqlake.lake.alleles import CallParams
from seqlake.lake.vcf import BGZF_EOF, JoinedIndex, TabixEntries, bgzf_compress, tabix_bytes, vcf_header

#: a piece of a joined file: bytes, or bytes ``[start, stop)`` of an object
Piece = Source
#: the index suffix of a VCF (tabix's)
TBI_SUFFIX = ".tbi"


@dataclass(frozen=True)
class _Region:
    """Where one region's pieces of a sample's files are in its genomes object."""

    uri: str
    fasta: tuple[int, int]
    vcf: tuple[int, int]
    tbi: tuple[int, int]


def _regions(layout: RunLayout, genomes: Sequence[Sequence[int]]) -> list[_Region]:
    out = []
    for region, fa, fa_n, vcf, vcf_n, tbi, tbi_n in sorted(tuple(g) for g in genomes):
        out.append(_Region(layout.region_genomes(region), (fa, fa + fa_n), (vcf, vcf + vcf_n), (tbi, tbi + tbi_n)))
    return out


def genome_files(layout: RunLayout, sample: str, genomes: Sequence[Sequence[int]], contigs: list[tuple[str, int]],
                 params: CallParams, *, reference: str | None = None) -> list[tuple[str, list[Piece]]]:
    """The sample's FASTA and VCF as the pieces to join (the ``.tbi`` is made from the VCF's by
    :func:`write_genomes`)."""
    regions = _regions(layout, genomes)
    fasta: list[Piece] = [(r.uri, *r.fasta) for r in regions if r.fasta[1] > r.fasta[0]]
    vcf: list[Piece] = [bgzf_compress(vcf_header(sample, contigs, params, reference).encode(), eof=False)]
    vcf += [(r.uri, *r.vcf) for r in regions if r.vcf[1] > r.vcf[0]]
    vcf.append(BGZF_EOF)
    return [(layout.sample_file(sample, CONSENSUS_SUFFIX), fasta), (layout.sample_file(sample, VCF_SUFFIX), vcf),
            (layout.sample_file(sample, VCF_SUFFIX + TBI_SUFFIX),
             [(r.uri, *r.tbi) for r in regions if r.vcf[1] > r.vcf[0]])]


def tabix_of(vcf: Sequence[Piece], tbi: Sequence[Piece], contigs: Sequence[str]) -> bytes:
    """The ``.tbi`` of a joined VCF: each piece's entries shifted by where the piece starts in the file."""
    entries = JoinedIndex()
    offset = _size(vcf[0])
    ranged = [p for p in vcf[1:] if not isinstance(p, bytes)]
    read = storage.read_many_ranges([p for p in tbi if not isinstance(p, bytes)])
    for piece, data in zip(ranged, read, strict=True):
        if data is None:
            raise FileNotFoundError(piece[0])
        entries.add(TabixEntries.from_json(data), offset)
        offset += _size(piece)
    return tabix_bytes(entries, contigs)


def _size(piece: Piece) -> int:
    return len(piece) if isinstance(piece, bytes) else piece[2] - piece[1]


def joined_samples(layout: RunLayout) -> set[str]:
    """The samples whose files an earlier commit of the run joined (its record, :meth:`RunLayout.genomes_joined`;
    none without one)."""
    try:
        record = json.loads(storage.read_bytes(layout.genomes_joined))
    except FileNotFoundError:
        return set()
    if record.get("run_id") != layout.run_id:
        raise SeqlakeError(f"{layout.genomes_joined} belongs to run {record.get('run_id')}, not {layout.run_id}")
    return {str(s) for s in record["samples"]}


def write_genomes(layout: RunLayout, samples: Sequence[tuple[str, Sequence[Sequence[int]]]],
                  contigs: list[tuple[str, int]], params: CallParams, *, reference: str | None = None) -> None:
    """Join every sample's files (``(sample, SampleSums.genomes)``, one sample at a time) and index its VCF, then
    record them joined; a sample an earlier commit of the run joined is left as it is (:func:`joined_samples`)."""
    if not samples:
        return
    names = [c for c, _ in contigs]
    done = joined_samples(layout)
    for sample, genomes in samples:
        if sample in done:
            continue
        (fasta_uri, fasta), (vcf_uri, vcf), (tbi_uri, tbi) = genome_files(layout, sample, genomes, contigs, params,
                                                                          reference=reference)
        storage.concatenate(fasta_uri, fasta)
        storage.concatenate(vcf_uri, vcf)
        storage.write_bytes(tbi_uri, tabix_of(vcf, tbi, names))
    every = done | {sample for sample, _ in samples}
    if every != done:
        storage.write_bytes(layout.genomes_joined,
                            json.dumps({"run_id": layout.run_id, "samples": sorted(every)}).encode())


def remove_pieces(layout: RunLayout, reducers: int) -> int:
    """Remove the run's ``reduce/region=NNNNN.genomes`` objects (one per reducer: :meth:`RunLayout.region_genomes`),
    once the run is committed and its record says every sample's files are joined under ``results/`` (the module
    docstring says why a commit run again after this is clean); the number of objects asked to go (a missing
    one is no error)."""
    return storage.delete_many(layout.region_genomes(r) for r in range(reducers))
