"""Read alignment with mappy (minimap2's Python binding), shaped like ``minimap2 -ax sr`` output.

Which alignments are rows (as the command line prints them with the ``sr`` preset):

- the preset sets ``--secondary=no`` (``MM_F_NO_PRINT_2ND`` in minimap2 ``options.c``), so secondary
  alignments (mappy ``is_primary`` False: ``id != parent``) are not rows;
- of a read's ``is_primary`` hits, the SAM primary is the one minimap2's pairing step chose
  (``mm_pair`` in ``pe.c``): when the mates form a proper pair, the hits of that pair; otherwise the
  first (best-scoring) hit. The others are supplementary (0x800);
- an unmapped read is one row with flag 0x4 and a null contig.

SAM flags follow minimap2 ``format.c``: 0x1 for pairs, 0x2 when the SAM primaries of both mates
form a pair as ``mm_pair`` accepts it (same contig, forward mate leftmost, the reverse mate starting
at most ``max_frag_len`` (800 for ``sr``) after the forward mate ends: mappy does not expose
``proper_frag``), 0x8 / 0x20 from the mate's SAM primary, 0x40 / 0x80 for mate 1 / 2. CIGARs carry
soft clips for every alignment (as ``minimap2 -Y``; the command line hard-clips supplementary ones).

:func:`resolve_reference` turns a FASTA (plain or gzip; a path or ``s3://`` URI) or a prebuilt
``.mmi`` into a local minimap2 index, built once and kept beside the FASTA (``<fasta>.mmi``) and in
a per-host cache (``$SEQLAKE_REF_CACHE``, default ``~/.cache/seqlake/references``) under a file lock,
so concurrent children on one host download or build it once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mappy

from seqlake import storage
from seqlake.qc import iter_file_chunks, parse_chunk

#: minimap2 ``sr`` preset: max_frag_len, the pairing distance of ``mm_pair``
SR_MAX_FRAG_LEN = 800

#: (read name, mate, read index, read length)
_Read = tuple[str, int, int, int]


#: the ``alignments`` columns a row tuple holds, in order (``sample`` is added when written)
ROW_COLUMNS = (
    "mate",
    "read_name",
    "read_index",
    "flag",
    "contig",
    "pos",
    "end",
    "strand",
    "mapq",
    "cigar",
    "nm",
    "is_primary",
    "read_len",
)


class AlignmentColumns:
    """``alignments`` rows, kept as tuples (one list append per row) and turned into columns on demand."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []

    def __len__(self) -> int:
        return len(self.rows)

    def as_dict(self) -> dict[str, list[Any]]:
        columns = list(zip(*self.rows, strict=True)) if self.rows else [() for _ in ROW_COLUMNS]
        return {name: list(col) for name, col in zip(ROW_COLUMNS, columns, strict=True)}


@dataclass
class AlignStats:
    """Additive alignment counts per mate (``qc_summary``)."""

    mapped_reads: int = 0
    properly_paired: int = 0
    mapq_sum: int = 0

    def merge(self, other: AlignStats) -> None:
        self.mapped_reads += other.mapped_reads
        self.properly_paired += other.properly_paired
        self.mapq_sum += other.mapq_sum


def _cigar(hit: Any, read_len: int, revcomp_query: bool) -> str:
    """The CIGAR with soft clips. mappy's query coordinates are those of the sequence it aligned,
    which for mate 2 of a pair is the reverse complement of the read (``cmappy.h``)."""
    left, right = hit.q_st, read_len - hit.q_en
    if (hit.strand < 0) != revcomp_query:
        left, right = right, left
    ops: str = hit.cigar_str
    return (f"{left}S" if left else "") + ops + (f"{right}S" if right else "")


def _dp_score(hit: Any) -> int:
    """The alignment's DP score under the ``sr`` scoring (match 2, mismatch 8, gaps
    min(12 + 2l, 24 + l)), from its CIGAR and NM: mappy does not expose minimap2's ``dp_max``."""
    aligned = gaps = gap_pen = 0
    for n, op in hit.cigar:
        if op == 0:
            aligned += n
        elif op in (1, 2):
            gaps += n
            gap_pen += min(12 + 2 * n, 24 + n)
    mismatches = int(hit.NM) - gaps
    return 2 * (aligned - mismatches) - 8 * mismatches - gap_pen


def _proper(a: Any, b: Any, max_gap: int) -> bool:
    """``mm_pair``'s geometry: one forward and one reverse hit on one contig, the forward hit
    leftmost, the reverse hit starting at most ``max_gap`` after the forward hit ends."""
    if a.ctg != b.ctg or a.strand == b.strand:
        return False
    fwd, rev = (a, b) if a.strand > 0 else (b, a)
    return bool(rev.r_st >= fwd.r_st and rev.r_st - fwd.r_en <= max_gap)


#: minimap2's default ``pe_bonus`` (``options.c``)
PE_BONUS = 33
#: minimap2 ``sr`` ``max_gap``, the floor of the pairing distance
SR_MAX_GAP = 100


class ReadAligner:
    """A mappy aligner over one index, producing ``alignments`` rows and per-mate counts."""

    def __init__(self, index_path: str, preset: str = "sr", max_frag_len: int = SR_MAX_FRAG_LEN) -> None:
        self.index_path = index_path
        self.preset = preset
        self.max_frag_len = max_frag_len
        self._aligner = mappy.Aligner(index_path, preset=preset, n_threads=1)
        if not self._aligner:
            raise ValueError(f"could not load the minimap2 index {index_path}")
        self._buf = mappy.ThreadBuffer()

    def __repr__(self) -> str:
        return f"ReadAligner(index={self.index_path!r}, preset={self.preset!r})"

    @property
    def contigs(self) -> list[tuple[str, int]]:
        """(name, length) of the index's sequences, in index order.

        mappy exposes lengths only through ``seq(name)``: they are computed once (one contig in
        memory at a time) and kept in ``<index>.contigs.json`` beside a cached index.
        """
        sidecar = Path(self.index_path + ".contigs.json")
        if sidecar.exists():
            return [(str(n), int(length)) for n, length in json.loads(sidecar.read_text())]
        names: list[str] = self._aligner.seq_names
        contigs = [(n, len(self._aligner.seq(n) or "")) for n in names]
        with contextlib.suppress(OSError):
            tmp = sidecar.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(contigs))
            tmp.replace(sidecar)
        return contigs

    def align_single(
        self,
        names: Sequence[str],
        seqs: Sequence[str],
        read_index: Sequence[int],
        *,
        out: AlignmentColumns,
        stats: AlignStats,
        spans: list[tuple[str, int, int]],
    ) -> None:
        """Align single-end reads; ``spans`` collects (contig, start, end) of primary +
        supplementary alignments (0-based, end exclusive) for coverage."""
        amap, buf = self._aligner.map, self._buf
        for name, seq, idx in zip(names, seqs, read_index, strict=True):
            hits = [h for h in amap(seq, buf=buf) if h.is_primary] if seq else []
            self._emit(
                out,
                stats,
                spans,
                (name, 1, idx, len(seq)),
                hits,
                primary=0,
                mate_hit=None,
                paired=False,
                proper=False,
            )

    def align_pairs(
        self,
        names: Sequence[str],
        seqs1: Sequence[str],
        seqs2: Sequence[str],
        read_index: Sequence[int],
        *,
        out: AlignmentColumns,
        stats: tuple[AlignStats, AlignStats],
        spans: list[tuple[str, int, int]],
    ) -> None:
        """Align read pairs together (minimap2's paired-end mode: pairing, proper pairs, mate flags)."""
        amap, buf, frag = self._aligner.map, self._buf, self.max_frag_len
        for name, s1, s2, idx in zip(names, seqs1, seqs2, read_index, strict=True):
            h1: list[Any] = []
            h2: list[Any] = []
            if s1 and s2:
                for h in amap(s1, s2, buf=buf):
                    if h.is_primary:
                        (h1 if h.read_num == 1 else h2).append(h)
            elif s1 or s2:  # one empty mate: the other is aligned alone (as minimap2 does)
                for h in amap(s1 or s2, buf=buf):
                    if h.is_primary:
                        (h1 if s1 else h2).append(h)
            max_gap = max(frag - len(s1) - len(s2), SR_MAX_GAP)
            p1, p2, proper = self._pair_primaries(h1, h2, max_gap)
            m1 = h1[p1] if h1 else None
            m2 = h2[p2] if h2 else None
            self._emit(
                out,
                stats[0],
                spans,
                (name, 1, idx, len(s1)),
                h1,
                primary=p1,
                mate_hit=m2,
                paired=True,
                proper=proper,
            )
            self._emit(
                out,
                stats[1],
                spans,
                (name, 2, idx, len(s2)),
                h2,
                primary=p2,
                mate_hit=m1,
                paired=True,
                proper=proper,
                revcomp_query=bool(s1),
            )

    @staticmethod
    def _pair_primaries(h1: list[Any], h2: list[Any], max_gap: int) -> tuple[int, int, bool]:
        """Which hit of each mate is the SAM primary, as ``mm_pair`` decides: the best-scoring pair
        of hits in proper geometry whose score is within ``PE_BONUS`` of the two best single
        scores; without one, each mate's first (best) hit and no proper pair."""
        if not h1 or not h2:
            return 0, 0, False
        if len(h1) == len(h2) == 1:  # the usual case: the pair's score is the best, so only geometry decides
            return 0, 0, _proper(h1[0], h2[0], max_gap)
        s1 = [_dp_score(h) for h in h1]
        s2 = [_dp_score(h) for h in h2]
        threshold = max(s1) + max(s2) - PE_BONUS
        best: tuple[int, int, int] | None = None
        for i, a in enumerate(h1):
            for j, b in enumerate(h2):
                score = s1[i] + s2[j]
                if score >= threshold and (best is None or score > best[0]) and _proper(a, b, max_gap):
                    best = (score, i, j)
        if best is None:
            return 0, 0, False
        return best[1], best[2], True

    @staticmethod
    def _emit(
        out: AlignmentColumns,
        stats: AlignStats,
        spans: list[tuple[str, int, int]],
        read: _Read,
        hits: list[Any],
        *,
        primary: int,
        mate_hit: Any,
        paired: bool,
        proper: bool,
        revcomp_query: bool = False,
    ) -> None:
        name, mate, idx, read_len = read
        base = 0
        if paired:
            base = 0x1 | (0x40 if mate == 1 else 0x80)
            if mate_hit is None:
                base |= 0x8
            elif mate_hit.strand < 0:
                base |= 0x20
        rows = out.rows
        if not hits:
            rows.append((mate, name, idx, base | 0x4, None, None, None, None, None, None, None, True, read_len))
            return
        stats.mapped_reads += 1
        stats.mapq_sum += int(hits[primary].mapq)
        if proper:
            stats.properly_paired += 1
            base |= 0x2
        for k, h in enumerate(hits):
            rev = h.strand < 0
            rows.append(
                (
                    mate,
                    name,
                    idx,
                    base | (0x10 if rev else 0) | (0 if k == primary else 0x800),
                    h.ctg,
                    h.r_st + 1,
                    h.r_en,
                    "-" if rev else "+",
                    h.mapq,
                    _cigar(h, read_len, revcomp_query),
                    h.NM,
                    k == primary,
                    read_len,
                )
            )
            spans.append((h.ctg, h.r_st, h.r_en))


# -- the reference index ------------------------------------------------------------------------


def cache_dir() -> Path:
    env = os.environ.get("SEQLAKE_REF_CACHE")
    base = Path(env) if env else Path.home() / ".cache" / "seqlake" / "references"
    base.mkdir(parents=True, exist_ok=True)
    return base


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path``: one process per host builds or downloads an index."""
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _cache_key(uri: str, preset: str) -> str:
    try:
        info = storage.head(uri)
        ident = f"{uri}|{info.size}|{info.etag}|{preset}"
    except Exception:
        ident = f"{uri}|{preset}"
    return hashlib.sha256(ident.encode()).hexdigest()[:20]


def resolve_reference(uri: str, preset: str = "sr") -> str:
    """A local minimap2 index (``.mmi``) for a FASTA or ``.mmi`` reference URI (see module doc)."""
    key = _cache_key(uri, preset)
    cached = cache_dir() / f"{key}-{preset}.mmi"
    if cached.exists():
        return str(cached)
    with _locked(cache_dir() / f"{key}.lock"):
        if cached.exists():  # another process on this host finished it while we waited
            return str(cached)
        tmp = cached.with_suffix(f".tmp{os.getpid()}")
        if uri.endswith(".mmi"):
            storage.download(uri, tmp)
        elif storage.exists(uri + ".mmi"):
            storage.download(uri + ".mmi", tmp)
        else:
            _build_index(uri, tmp, preset)
            _publish_beside(tmp, uri + ".mmi")
        tmp.replace(cached)
    return str(cached)


def _build_index(fasta_uri: str, out: Path, preset: str) -> None:
    local = fasta_uri
    fetched: Path | None = None
    if storage.is_s3(fasta_uri):
        fetched = out.with_suffix(".fasta")
        storage.download(fasta_uri, fetched)
        local = str(fetched)
    try:
        aligner = mappy.Aligner(local, preset=preset, fn_idx_out=str(out))
        if not aligner:
            raise ValueError(f"{fasta_uri}: not a FASTA reference minimap2 can index")
    finally:
        if fetched is not None:
            fetched.unlink(missing_ok=True)


def _publish_beside(index: Path, uri: str) -> None:
    """Keep the index beside its FASTA for later runs; a read-only location only loses that."""
    with contextlib.suppress(Exception):  # the per-host cache still holds the index
        storage.upload(index, uri)


def align_files(r1: str, r2: str | None, reference: str, preset: str = "sr") -> list[AlignStats]:
    """Align local FASTQ files (a pair when ``r2`` is given) without trimming: the benchmark's
    alignment path, and a quick check against the command line."""
    aligner = ReadAligner(resolve_reference(reference, preset), preset)
    stats = [AlignStats(), AlignStats()]
    first = 0
    chunks2 = iter_file_chunks(r2) if r2 else None
    for chunk in iter_file_chunks(r1):
        rec1 = parse_chunk(chunk, r1, first)
        out = AlignmentColumns()
        spans: list[tuple[str, int, int]] = []
        index = list(range(first, first + len(rec1)))
        if chunks2 is not None and r2 is not None:
            rec2 = parse_chunk(next(chunks2), r2, first)
            aligner.align_pairs(
                rec1.names(),
                rec1.sequences(),
                rec2.sequences(),
                index,
                out=out,
                stats=(stats[0], stats[1]),
                spans=spans,
            )
        else:
            aligner.align_single(rec1.names(), rec1.sequences(), index, out=out, stats=stats[0], spans=spans)
        first += len(rec1)
    return stats
