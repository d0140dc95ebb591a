"""A sample's files (consensus FASTA, VCF and its tabix index) joined from the regions' pieces, by the commit.

Each reducer leaves, per sample, its region's piece of each file in the region's genomes object
(:class:`seqlake.reduce.reducer.GenomePieces`; offsets in the region's summary): the FASTA's bytes, the VCF's
records as BGZF blocks without the EOF member, and the tabix entries of those records relative to the
piece's first byte. The commit joins them per sample in region order (reference order) without holding a
genome: the FASTA is the pieces one after the other; the VCF is its header (BGZF), the pieces, then the EOF
member; the ``.tbi`` is the pieces' entries, each shifted by its piece's byte offset in the joined file
(:meth:`seqlake.lake.vcf.JoinedIndex.add`, numpy arrays: never an object per chunk). The joining itself is
:func:`seqlake.base.storage.concatenate` (server-side copies of large pieces on S3, bounded memory).

Once the run is committed (its commit point: :func:`seqlake.aws.steps.commit_step`) the pieces are removed
(:func:`remove_pieces`): the FASTA pieces are one byte per base of the genome (all ``N`` below the calling
depth), as large as a low-depth run's BAM three times over, and ``results/`` holds them joined. So a commit
run again joins only the samples whose files are not all under ``results/`` yet (:func:`joined_samples`):
after a commit that got past its commit point, none. Every file is put whole (a local file renamed into
place, an S3 object complete or absent) and a sample's ``.tbi`` after its FASTA and VCF, and the pieces go
only after every sample's files are there; nothing but a sample's deletion (which takes the run's ``runs/``
objects too) removes a joined file. So a commit that dies anywhere, before its commit point or during the
removal (after which RecordFailure may even roll the run out of the tables), is run again cleanly: the
pieces are all there, or every file made from them is.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from seqlake.base import storage
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


#: a sample's files joined from the pieces, in the order they are written (the ``.tbi`` last)
JOINED_SUFFIXES = (CONSENSUS_SUFFIX, VCF_SUFFIX, VCF_SUFFIX + TBI_SUFFIX)


def joined_samples(layout: RunLayout, samples: Iterable[str]) -> set[str]:
    """The ``samples`` whose files an earlier commit of the run joined already: every one of
    :data:`JOINED_SUFFIXES` under ``results/`` (one listing of the run's folder; see the module docstring)."""
    listed = {storage.basename(uri) for uri in storage.list_sizes(layout.sample_files)}
    return {s for s in samples if all(f"{s}{suffix}" in listed for suffix in JOINED_SUFFIXES)}


def write_genomes(layout: RunLayout, samples: Sequence[tuple[str, Sequence[Sequence[int]]]],
                  contigs: list[tuple[str, int]], params: CallParams, *, reference: str | None = None) -> None:
    """Join every sample's files (``(sample, SampleSums.genomes)``, one sample at a time) and index its VCF; a
    sample whose files an earlier commit of the run joined is left as it is (:func:`joined_samples`)."""
    names = [c for c, _ in contigs]
    done = joined_samples(layout, (sample for sample, _ in samples)) if samples else set()
    for sample, genomes in samples:
        if sample in done:
            continue
        (fasta_uri, fasta), (vcf_uri, vcf), (tbi_uri, tbi) = genome_files(layout, sample, genomes, contigs, params,
                                                                          reference=reference)
        storage.concatenate(fasta_uri, fasta)
        storage.concatenate(vcf_uri, vcf)
        storage.write_bytes(tbi_uri, tabix_of(vcf, tbi, names))


def remove_pieces(layout: RunLayout, reducers: int) -> int:
    """Remove the run's ``reduce/region=NNNNN.genomes`` objects (one per reducer: :meth:`RunLayout.region_genomes`),
    once the run is committed and every sample's files are joined under ``results/`` (the module docstring says
    why a commit run again after this is clean); the number of objects asked to go (a missing one is no error)."""
    return storage.delete_many(layout.region_genomes(r) for r in range(reducers))
