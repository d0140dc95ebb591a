"""Read trimming with cutadapt's compiled functions, in cutadapt's order of steps.

For each read, as ``cutadapt -q Q5,Q3 -a A1 -a A2 ... -e E -O K -m M`` does (cutadapt's "order of
read processing"):

1. quality trimming (BWA's algorithm, ``cutadapt.qualtrim.quality_trim_index``), 5' then 3';
2. adapter removal: the best-matching 3' adapter (cutadapt's ``MultipleAdapters`` of
   ``BackAdapter``s; the adapter and everything after it go);
3. the minimum length filter: a read shorter than ``min_length`` is dropped; for paired-end input
   the pair is dropped when either mate is too short (``--pair-filter=any``, cutadapt's default).

Both mates get the same adapter list: the TruSeq and Nextera read-2 adapters start with the same
13 / 19 bases as their read-1 adapters.

Trimming never copies a read: a step returns the (start, stop) interval of the read that remains,
so that QC after trimming is a view into the raw chunk (see :mod:`seqlake.lake.qc`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from cutadapt.adapters import BackAdapter
from cutadapt.qualtrim import quality_trim_index

from seqlake.base.params import Params
from seqlake.lake.staging import TrimStats
from seqlake.reads.chunks import parse_chunk
from seqlake.reads.fastq import iter_file_chunks

I64 = npt.NDArray[np.int64]
#: what cutadapt's ``Aligner.locate`` returns: adapter start, stop, read start, stop, score, errors
_Alignment = tuple[int, int, int, int, int, int]


class QualityTrimmer:
    """5' / 3' quality trimming with BWA's algorithm (cutadapt ``-q FRONT,BACK``)."""

    def __init__(self, cutoff_front: int, cutoff_back: int, base: int = 33) -> None:
        self.cutoff_front = cutoff_front
        self.cutoff_back = cutoff_back
        self.base = base

    def __repr__(self) -> str:
        return f"QualityTrimmer(cutoff_front={self.cutoff_front}, cutoff_back={self.cutoff_back}, base={self.base})"

    def __call__(self, qualities: str) -> tuple[int, int]:
        """The (start, stop) interval of the read that remains."""
        start, stop = quality_trim_index(qualities, self.cutoff_front, self.cutoff_back, self.base)
        return start, stop


class AdapterTrimmer:
    """Removal of the best-matching 3' adapter and everything after it (cutadapt ``-a``)."""

    def __init__(self, adapters: Sequence[str], max_error_rate: float = 0.1, min_overlap: int = 3) -> None:
        self.sequences = tuple(adapters)
        self.max_error_rate = max_error_rate
        self.min_overlap = min_overlap
        back = [
            BackAdapter(a, max_errors=max_error_rate, min_overlap=min_overlap, name=f"adapter{i + 1}")
            for i, a in enumerate(self.sequences)
        ]
        #: per adapter, its compiled k-mer prefilter and aligner: what ``BackAdapter.match_to`` calls
        self.finders: list[tuple[Callable[[str], bool], Callable[[str], _Alignment | None]]] = [
            (ad.kmer_finder.kmers_present, ad.aligner.locate) for ad in back
        ]

    def __repr__(self) -> str:
        return (
            f"AdapterTrimmer(adapters={list(self.sequences)!r}, max_error_rate={self.max_error_rate}, "
            f"min_overlap={self.min_overlap})"
        )

    def __call__(self, sequence: str) -> int | None:
        """Where the adapter starts in ``sequence`` (the read is cut there), or None.

        ``MultipleAdapters.match_to`` of ``BackAdapter``s without their Python layers (cutadapt
        ``adapters.py``): per adapter, the k-mer prefilter, then the aligner's ``locate``, which
        returns (adapter start, adapter stop, read start, read stop, score, errors); the best match
        has the highest score, then the fewest errors (the first adapter on a tie); a 3' match
        keeps the read up to its start (``RemoveAfterMatch.remainder_interval``).
        """
        best: _Alignment | None = None
        for present, locate in self.finders:
            if present(sequence):
                aln = locate(sequence)
                if aln is not None and (
                    best is None or aln[4] > best[4] or (aln[4] == best[4] and aln[5] < best[5])
                ):
                    best = aln
        return None if best is None else best[2]


class MinimumLengthFilter:
    """Drops reads (pairs: when either mate is) shorter than ``min_length`` (cutadapt ``-m``)."""

    def __init__(self, min_length: int) -> None:
        self.min_length = min_length

    def __repr__(self) -> str:
        return f"MinimumLengthFilter(min_length={self.min_length})"

    def __call__(self, lengths: Sequence[I64]) -> npt.NDArray[np.bool_]:
        """True for the reads (pairs) that are kept; ``lengths`` holds one array per mate."""
        keep = np.ones(len(lengths[0]), dtype=np.bool_)
        for lens in lengths:
            keep &= lens >= self.min_length
        return keep


#: adapter bases a read must lose to count in ``reads_adapter_8bp``: cutadapt removes matches from 3
#: bases (its minimum overlap), most of them chance matches at read ends; 8 bases of adapter are
#: rarely chance (4^-8), so this count is comparable to fastp's and FastQC's adapter figures
ADAPTER_QC_MIN = 8


@dataclass
class MateTrim:
    """The trimmed interval of every read of one mate's chunk (relative to each read)."""

    start: I64
    stop: I64
    adapter_hits: int
    bases_quality: int
    bases_adapter: int
    #: reads with at least :data:`ADAPTER_QC_MIN` adapter bases removed
    adapter_hits_qc: int = 0
    #: the trimmed sequences (``sequence[start:stop]`` of each read)
    sequences: list[str] = field(default_factory=list)

    @property
    def length(self) -> I64:
        return self.stop - self.start


class Trimmer:
    """The trimming steps of a run, built from :class:`seqlake.base.params.Params`."""

    def __init__(self, params: Params) -> None:
        self.enabled = params.trim
        self.quality = QualityTrimmer(params.quality_cutoff_5p, params.quality_cutoff)
        self.adapters = (
            AdapterTrimmer(params.adapters, params.adapter_max_error_rate, params.adapter_min_overlap)
            if params.adapters
            else None
        )
        self.min_length = MinimumLengthFilter(params.min_length)

    def __repr__(self) -> str:
        if not self.enabled:
            return "Trimmer(disabled)"
        return f"Trimmer([{self.quality!r}, {self.adapters!r}, {self.min_length!r}])"

    def trim_mate(self, sequences: Sequence[str], qualities: Sequence[str]) -> MateTrim:
        """Quality then adapter trimming of each read (one compiled call per step and read: the
        per-base work runs in cutadapt's C code; the loop around them is kept minimal). With trimming off
        nothing is cut and ``qualities`` is not read."""
        n = len(sequences)
        if not self.enabled:
            start = np.zeros(n, dtype=np.int64)
            stop = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=n)
            return MateTrim(start, stop, 0, 0, 0, 0, list(sequences))
        qtrim, front, back, base = quality_trim_index, self.quality.cutoff_front, self.quality.cutoff_back, \
            self.quality.base
        # AdapterTrimmer.__call__, inline: a Python call per read is a tenth of the loop's time
        finders = self.adapters.finders if self.adapters is not None else ()
        hits = hits_qc = adapter_bases = 0
        starts: list[int] = []
        stops: list[int] = []
        trimmed: list[str] = []
        for seq, qual in zip(sequences, qualities, strict=True):
            a, b = qtrim(qual, front, back, base)
            sub = seq[a:b]
            if b > a:
                best: _Alignment | None = None
                for present, locate in finders:
                    if present(sub):
                        aln = locate(sub)
                        if aln is not None and (
                            best is None or aln[4] > best[4] or (aln[4] == best[4] and aln[5] < best[5])
                        ):
                            best = aln
                if best is not None:
                    cut = best[2]
                    hits += 1
                    removed = b - a - cut
                    adapter_bases += removed
                    hits_qc += removed >= ADAPTER_QC_MIN
                    b = a + cut
                    sub = sub[:cut]
            starts.append(a)
            stops.append(b)
            trimmed.append(sub)
        raw_bases = sum(map(len, sequences))
        start = np.asarray(starts, dtype=np.int64).reshape(n)
        stop = np.asarray(stops, dtype=np.int64).reshape(n)
        kept = int((stop - start).sum())
        return MateTrim(start, stop, hits, raw_bases - kept - adapter_bases, adapter_bases, hits_qc, trimmed)

    def filter(self, mates: Sequence[MateTrim]) -> npt.NDArray[np.bool_]:
        """Reads (pairs) kept by the minimum length filter (all of them when trimming is off)."""
        if not self.enabled:
            return np.ones(len(mates[0].start), dtype=np.bool_)
        return self.min_length([m.length for m in mates])


def add_stats(stats: TrimStats, mate: MateTrim, keep: npt.NDArray[np.bool_]) -> None:
    """Fold one mate's chunk into its :class:`TrimStats` (``keep`` from :meth:`Trimmer.filter`)."""
    stats.reads_adapter_trimmed += mate.adapter_hits
    stats.reads_adapter_8bp += mate.adapter_hits_qc
    stats.bases_quality_trimmed += mate.bases_quality
    stats.bases_adapter_trimmed += mate.bases_adapter
    dropped = ~keep
    stats.reads_too_short += int(dropped.sum())
    stats.bases_too_short += int(mate.length[dropped].sum())


def trim_file(path: str, params: Params | None = None) -> TrimStats:
    """Trim one local FASTQ file as single-end reads and count (the benchmark's trimming path)."""
    trimmer = Trimmer(params or Params())
    stats = TrimStats()
    first = 0
    for chunk in iter_file_chunks(path):
        recs = parse_chunk(chunk, path, first)
        first += len(recs)
        mate = trimmer.trim_mate(recs.sequences(), recs.qualities())
        add_stats(stats, mate, trimmer.filter([mate]))
    return stats
