"""Read alignment with mappy (minimap2's Python binding), shaped like ``minimap2 -ax sr`` output.

Which alignments are rows (as the command line prints them with the ``sr`` preset):

- the preset sets ``--secondary=no`` (``MM_F_NO_PRINT_2ND`` in minimap2 ``options.c``), so secondary
  alignments (mappy ``is_primary`` False: ``id != parent``) are not rows;
- of a read's ``is_primary`` hits, the SAM primary is the one minimap2's pairing step chose
  (``mm_pair`` in ``pe.c``): when the mates form a proper pair, the hits of that pair; otherwise the
  first (best-scoring) hit. The others are supplementary (0x800);
- an unmapped read is one row with flag 0x4 and a null contig.

SAM flags follow minimap2 ``format.c``: 0x1 for pairs, 0x2 on the SAM primaries of both mates when
they form a pair as ``mm_pair`` accepts it (same contig, forward mate leftmost, the reverse mate starting
at most ``max_frag_len`` (800 for ``sr``) after the forward mate ends: mappy does not expose
``proper_frag``), never on a supplementary row (``mm_pair`` sets ``proper_frag`` on the two paired hits
only), 0x8 / 0x20 from the mate's SAM primary, 0x40 / 0x80 for mate 1 / 2. CIGARs carry
soft clips for every alignment (as ``minimap2 -Y``; the command line hard-clips supplementary ones).

The aligner loads a minimap2 index it is given (:func:`seqlake.plan.reference.local_index`): the
planner built it once, before the fan-out, and the reference's contigs come with it
(:func:`seqlake.plan.reference.load_contigs`), so no sequence of the reference is held here.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from seqlake.base import forked
from seqlake.lake.staging import AlignStats
from seqlake.lake.tables import BY_NAME

#: minimap2 ``sr`` preset: max_frag_len, the pairing distance of ``mm_pair``
SR_MAX_FRAG_LEN = 800

#: (read name, mate, read index, read length)
_Read = tuple[str, int, int, int]


#: the ``alignments`` columns of one read's alignment, in order (the table adds ``sample`` and the mate's columns)
ROW_COLUMNS = (
    "mate",
    "read_name",
    "read_index",
    "flag",
    "contig",
    "pos",
    "end_pos",
    "strand",
    "mapq",
    "cigar",
    "nm",
    "is_primary",
    "read_len",
)
#: what a row tuple holds: ``pos`` (``start`` + 1), ``strand`` and ``is_primary`` follow from the
#: 0-based start and the flag, and are derived per batch (not per row) when the columns are built
_STORED = ("mate", "read_name", "read_index", "flag", "contig", "start", "end_pos", "mapq", "cigar", "nm", "read_len")
_WIDTH = len(_STORED)
#: minimap2's CIGAR operator letters (``MM_CIGAR_STR``), indexed by the op code mappy returns
_CIGAR_OPS = "MIDNSHP=XB"


class AlignmentColumns:
    """``alignments`` rows as one flat list of values, :data:`_STORED` after :data:`_STORED` (one
    ``extend`` per read or pair: no per-row list, no transposition), sliced into columns per batch."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def __len__(self) -> int:
        return len(self.values) // _WIDTH

    def _stored(self) -> dict[str, list[Any]]:
        return {name: self.values[k::_WIDTH] for k, name in enumerate(_STORED)}

    def to_arrow(self, sample: str, schema: pa.Schema) -> pa.Table:
        """The rows as an ``alignments`` table (``schema``), built column-wise in Arrow."""
        import pyarrow.compute as pc  # here, not at the top: a child that does not align never loads it
        c = self._stored()
        n = len(self)
        types = {f.name: f.type for f in schema}
        arrays: dict[str, pa.Array] = {
            name: pa.array(c[name], type=types[name])
            for name in ("read_name", "contig", "end_pos", "mapq", "cigar", "nm")
        }
        # the columns every row fills: through NumPy, which converts a list of ints faster than Arrow
        for name in ("mate", "read_index", "flag", "read_len"):
            arrays[name] = pa.array(np.array(c[name], dtype=types[name].to_pandas_dtype()), type=types[name])
        start = pa.array(c["start"], type=pa.int64())
        arrays["pos"] = pc.add(start, 1).cast(types["pos"])
        flag = arrays["flag"].to_numpy()
        unmapped = arrays["contig"].is_null()
        rev = pa.array((flag & 0x10) != 0)
        arrays["strand"] = pc.if_else(unmapped, pa.scalar(None, pa.string()), pc.if_else(rev, "-", "+")).cast(
            types["strand"]
        )
        arrays["is_primary"] = pa.array((flag & 0x800) == 0, type=types["is_primary"])
        arrays.update(mate_columns(arrays, types))
        arrays["sample"] = pa.array([sample], type=types["sample"]).take(np.zeros(n, dtype=np.int64))
        return pa.table([arrays[f.name] for f in schema], schema=schema)


def mate_columns(arrays: dict[str, pa.Array], types: dict[str, pa.DataType]) -> dict[str, pa.Array]:
    """RNEXT, PNEXT and TLEN of a batch's rows as minimap2 ``format.c`` writes them: the mate is the
    other mate's SAM primary (for supplementary rows too); TLEN is the signed distance between the
    two 5' ends (reverse hits: their last base), one added away from zero, 0 on different contigs;
    a mapped read with an unmapped mate gets its own position. The rows of a pair are in one batch
    and a pair is keyed by its read index."""
    n = len(arrays["flag"])
    flag = arrays["flag"].to_numpy(zero_copy_only=False).astype(np.int64)
    mate = arrays["mate"].to_numpy(zero_copy_only=False).astype(np.int64)
    index = arrays["read_index"].fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    contig = arrays["contig"].dictionary_encode()
    code = contig.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    start = arrays["pos"].fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64) - 1
    end = arrays["end_pos"].fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    rev = (flag & 0x10) != 0
    paired = ((flag & 0x1) != 0) & (index >= 0)
    key = index * 2 + (mate - 1)
    prim = np.flatnonzero(paired & ((flag & 0x800) == 0))
    order = prim[np.argsort(key[prim], kind="stable")]
    want = index * 2 + (2 - mate)
    at = np.minimum(np.searchsorted(key[order], want), max(len(order) - 1, 0))
    m = order[at] if len(order) else np.zeros(n, dtype=np.int64)
    has_mate = paired & (key[m] == want) if len(order) else np.zeros(n, dtype=np.bool_)
    mapped, mate_mapped = code >= 0, has_mate & (code[m] >= 0)
    # the mate's contig and position; a mapped read whose mate is unmapped points at itself
    own = mapped & has_mate & ~mate_mapped
    mate_code = np.where(mate_mapped, code[m], np.where(own, code, -1))
    mate_pos = np.where(mate_mapped, start[m] + 1, np.where(own, start + 1, 0))
    same = mapped & mate_mapped & (code == code[m])
    tlen = np.where(rev[m], end[m] - 1, start[m]) - np.where(rev, end - 1, start)
    tlen = np.where(same, tlen + np.sign(tlen), 0)
    dictionary = contig.dictionary
    mate_contig = pa.DictionaryArray.from_arrays(pa.array(mate_code, mask=mate_code < 0), dictionary).cast(
        types["mate_contig"])
    return {
        "mate_contig": mate_contig,
        "mate_pos": pa.array(mate_pos, mask=mate_code < 0, type=types["mate_pos"]),
        "tlen": pa.array(np.where(paired, tlen, 0), mask=~paired, type=types["tlen"]),
    }


def alignment_spans(table: pa.Table) -> Iterator[tuple[str, npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
    """Per contig, the 0-based starts and exclusive ends of an ``alignments`` table's mapped rows
    (primary and supplementary: the coverage input), gathered in Arrow rather than per row."""
    import pyarrow.compute as pc  # here, not at the top: a child that does not align never loads it
    mapped = table.select(["contig", "pos", "end_pos"]).filter(pc.is_valid(table.column("contig")))
    if mapped.num_rows == 0:
        return
    contig = mapped.column("contig").combine_chunks().dictionary_encode()
    codes = contig.indices.to_numpy()
    starts = mapped.column("pos").to_numpy().astype(np.int64) - 1
    ends = mapped.column("end_pos").to_numpy().astype(np.int64)
    names = contig.dictionary.to_pylist()
    if len(names) == 1:
        yield names[0], starts, ends
        return
    for k, name in enumerate(names):
        sel = codes == k
        yield name, starts[sel], ends[sel]


def _cigar(hit: Any, read_len: int, revcomp_query: bool) -> str:
    """The CIGAR with soft clips. mappy's query coordinates are those of the sequence it aligned,
    which for mate 2 of a pair is the reverse complement of the read (``cmappy.h``). An int's formatting is
    most of a CIGAR's cost: short pieces come from tables."""
    left, right = hit.q_st, read_len - hit.q_en
    if (hit.strand < 0) != revcomp_query:
        left, right = right, left
    c = hit.cigar
    n, op = c[0]
    ops = _MATCH_STR[n] if len(c) == 1 and op == 0 and n < _TABLED_LEN else _cigar_ops(c)
    if left or right:
        return _clip(left) + ops + _clip(right)
    return ops


def _clip(n: int) -> str:
    return _CLIP_STR[n] if n < _TABLED_LEN else f"{n}S"


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
#: reads per part below which a call is not cut into parts (the cut costs more than it saves)
MIN_READS_PER_THREAD = 256
#: submitted calls left aligning behind the caller: one keeps the processes busy while the caller
#: prepares the next, a second covers the uneven time calls take
IN_FLIGHT = 2
#: parts of a call per alignment process: parts finish unevenly, smaller ones keep every process busy
PARTS_PER_PROCESS = 1


@dataclass(frozen=True)
class AlignedBatch:
    """The rows and per-mate counts of one submitted call (:meth:`ReadAligner.submit_pairs`)."""

    #: the ``alignments`` rows of the call, as an Arrow table of that schema
    rows: pa.Table
    stats: tuple[AlignStats, ...]


class PendingBatch:
    """A submitted call: its parts aligning in the alignment processes (or already aligned here),
    joined in order when :meth:`result` is asked for. A part no process has started yet can be taken back
    and aligned by the caller (:meth:`steal_one`) while it would otherwise wait."""

    def __init__(self, parts: list[_Part], done: AlignedBatch | None = None) -> None:
        self._parts = parts
        self._done = done

    def done(self) -> bool:
        return self._done is not None or all(p.done() for p in self._parts)

    def steal_one(self) -> bool:
        """Align here the first part no process has started; False when there is none."""
        return any(p.steal() for p in self._parts)

    def result(self) -> AlignedBatch:
        if self._done is None:
            tables, stats = [], None
            for table, counts in (part.result() for part in self._parts):
                tables.append(table)
                stats = counts if stats is None else _merge_stats(stats, counts)
            assert stats is not None
            self._done = AlignedBatch(pa.concat_tables(tables) if len(tables) > 1 else tables[0], stats)
        return self._done


class _Part:
    """One part of a call: aligning in an alignment process, or taken back and aligned here."""

    def __init__(self, aligner: ReadAligner, future: Future[tuple[Any, tuple[AlignStats, ...]]],
                 args: tuple[Any, ...]) -> None:
        self.aligner = aligner
        self.future = future
        self.args = args
        self.here: tuple[Any, tuple[AlignStats, ...]] | None = None

    def done(self) -> bool:
        return self.here is not None or self.future.done()

    def steal(self) -> bool:
        if self.here is None and self.future.cancel():
            self.here = _align_part(self.aligner, *self.args)
            return True
        return False

    def result(self) -> tuple[Any, tuple[AlignStats, ...]]:
        return self.here if self.here is not None else self.future.result()


def _merge_stats(totals: tuple[AlignStats, ...], counts: tuple[AlignStats, ...]) -> tuple[AlignStats, ...]:
    for total, count in zip(totals, counts, strict=True):
        total.merge(count)
    return totals


class ReadAligner:
    """A mappy aligner over one index, producing ``alignments`` rows and per-mate counts.

    A child's ``threads`` are the vCPUs its job gives it (:func:`seqlake.base.cpus.threads_from_env`). With
    ``threads`` > 1 the aligner forks ``threads - 1`` alignment processes once the index is loaded: they
    share its pages (copy-on-write, never written), so the index is in memory once whatever the number.
    Threads would share it too, but mappy holds the GIL for all the Python it runs per read (building each
    hit, and our rows from it), which serialised them: two threads gained 1.4x at best. Each call is cut
    into consecutive parts aligned in the processes; a part comes back as an Arrow table (buffers, not
    Python objects) and the parts are joined in order, so the rows and counts are the same, row order
    included, whatever the number. The calling process is the last aligner: rather than wait for a call's
    rows it takes back the parts no process has started (:meth:`PendingBatch.steal_one`), so its vCPU
    aligns whenever reading, QC and trimming leave it idle.

    :meth:`submit_pairs` / :meth:`submit_single` return at once and align behind the caller, up to
    :attr:`in_flight` calls at a time, so that a child reads, checks and trims its next chunks while these
    align; with one vCPU they align here before returning. :meth:`close` stops the processes.
    """

    def __init__(
        self, index_path: str, preset: str = "sr", max_frag_len: int = SR_MAX_FRAG_LEN, threads: int = 1
    ) -> None:
        self.index_path = index_path
        self.preset = preset
        self.max_frag_len = max_frag_len
        self.threads = max(1, threads)
        #: submitted calls a caller may leave aligning while it prepares the next ones
        self.in_flight = IN_FLIGHT if self.threads > 1 else 0
        # imported here, not at module level: the commit Lambda imports this module (through merge) for
        # its counters, and mappy has no wheel, so it is not in the Lambda layer
        import mappy

        self._aligner = mappy.Aligner(index_path, preset=preset, n_threads=1)
        if not self._aligner:
            raise ValueError(f"could not load the minimap2 index {index_path}")
        self._buffers = [mappy.ThreadBuffer()]
        self._processes = _fork_aligners(self) if self.threads > 1 else None

    def close(self) -> None:
        """Stop the alignment processes (a child's last call; the aligner maps no more after it). Calls not
        yet started are cancelled: after a failure nobody waits for their rows."""
        if self._processes is not None:
            self._processes.shutdown(cancel_futures=True)
        self._processes = None

    def __enter__(self) -> ReadAligner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ReadAligner(index={self.index_path!r}, preset={self.preset!r})"

    def submit_pairs(
        self, names: Sequence[str], seqs1: Sequence[str | bytes], seqs2: Sequence[str | bytes],
        read_index: Sequence[int], sample: str,
    ) -> PendingBatch:
        """Align read pairs together (minimap2's paired-end mode: pairing, proper pairs, mate flags), behind
        the caller: the rows (of ``sample``) and counts of mates 1 and 2. Sequences may be ``bytes`` (mappy
        maps those as given) or ``str``."""
        return self._submit("_pairs", (names, seqs1, seqs2, read_index), 2, sample)

    def submit_single(
        self, names: Sequence[str], seqs: Sequence[str | bytes], read_index: Sequence[int], sample: str
    ) -> PendingBatch:
        """Align single-end reads behind the caller (as :meth:`submit_pairs`)."""
        return self._submit("_single", (names, seqs, read_index), 1, sample)

    def _submit(
        self,
        method: str,
        reads: tuple[Sequence[Any], ...],
        mates: int,
        sample: str,
    ) -> PendingBatch:
        if self._processes is None:
            return PendingBatch([], _aligned(getattr(self, method), reads, mates, sample, self._buffers[0]))
        return PendingBatch(self._submit_parts(self._processes, method, reads, mates, sample))

    def _submit_parts(
        self,
        processes: ProcessPoolExecutor,
        method: str,
        reads: tuple[Sequence[Any], ...],
        mates: int,
        sample: str,
    ) -> list[_Part]:
        """The call cut into consecutive parts, each aligned in an alignment process (or by the caller, when
        it takes one back) as an ``alignments`` table of ``sample``."""
        n = len(reads[0])
        parts = min(self.threads * PARTS_PER_PROCESS, max(1, n // MIN_READS_PER_THREAD))
        cuts = [n * k // parts for k in range(parts + 1)]
        out = []
        for k in range(parts):
            args = (method, tuple(r[cuts[k] : cuts[k + 1]] for r in reads), mates, sample)
            out.append(_Part(self, processes.submit(_align_forked, *args), args))
        return out

    def _single(self, reads: tuple[Sequence[Any], ...], values: list[Any], stats: tuple[AlignStats, ...],
                buf: Any) -> None:
        amap = self._aligner.map
        names, seqs, read_index = reads
        for name, seq, idx in zip(names, seqs, read_index, strict=True):
            hits = [h for h in amap(seq, None, name, buf) if h.is_primary] if seq else []
            _emit(values, stats[0], (name, 1, idx, len(seq)), hits, 0, None, 0, False)

    def _pairs(self, reads: tuple[Sequence[Any], ...], values: list[Any], stats: tuple[AlignStats, ...],
               buf: Any) -> None:
        """Most pairs give exactly one hit per mate, mate 1's first (mappy returns mate 1's hits, then
        mate 2's): that case is written inline, with the counts kept in locals; anything else (an
        unmapped mate, supplementary or secondary hits, an empty mate) goes through :func:`_emit`."""
        amap, frag = self._aligner.map, self.max_frag_len
        extend = values.extend
        names, seqs1, seqs2, read_index = reads
        both = proper_pairs = mapq1 = mapq2 = 0
        for name, s1, s2, idx in zip(names, seqs1, seqs2, read_index, strict=True):
            l1, l2 = len(s1), len(s2)
            # (seq, seq2, name, buf): no keywords to parse. The name seeds minimap2's choice among equally good
            # placements (``mm_map_frag`` hashes it) as the command line's read name does: a read in a repeat
            # lands where ``minimap2 -ax sr`` puts it, not on a copy of mappy's own choosing
            hits = list(amap(s1, s2, name, buf)) if l1 and l2 else []
            if len(hits) == 2:
                done = _one_hit_each(extend, name, idx, l1, l2, hits, frag)
                if done is not None:
                    both += 1
                    proper_pairs += done[0]
                    mapq1 += done[1]
                    mapq2 += done[2]
                    continue
            h1: list[Any] = []
            h2: list[Any] = []
            if l1 and l2:
                for h in hits:
                    if h.is_primary:
                        (h1 if h.read_num == 1 else h2).append(h)
            elif l1 or l2:  # one empty mate: the other is aligned alone (as minimap2 does)
                for h in amap(s1 or s2, buf=buf):
                    if h.is_primary:
                        (h1 if l1 else h2).append(h)
            p1, p2, pp = _pair_primaries(h1, h2, max(frag - l1 - l2, SR_MAX_GAP))
            m1 = h1[p1] if h1 else None
            m2 = h2[p2] if h2 else None
            _emit(values, stats[0], (name, 1, idx, l1), h1, p1, m2, 0x41, pp)
            _emit(values, stats[1], (name, 2, idx, l2), h2, p2, m1, 0x81, pp, revcomp_query=bool(l1))
        for st, q in ((stats[0], mapq1), (stats[1], mapq2)):
            st.mapped_reads += both
            st.properly_paired += proper_pairs
            st.mapq_sum += q


def _cigar_ops(cigar: list[list[int]]) -> str:
    """mappy's ``cigar`` as a string (its ``cigar_str`` builds one through a lambda per operation)."""
    if len(cigar) == 1:
        n, op = cigar[0]
        return f"{n}{_CIGAR_OPS[op]}"
    return "".join([f"{n}{_CIGAR_OPS[op]}" for n, op in cigar])


#: CIGAR pieces up to this length come from the tables below (an int's formatting is most of a CIGAR's cost)
_TABLED_LEN = 1024
#: ``f"{n}M"`` and the soft clip ``f"{n}S"`` ("" for 0) for n < :data:`_TABLED_LEN`
_MATCH_STR = [f"{n}M" for n in range(_TABLED_LEN)]
_CLIP_STR = ["", *(f"{n}S" for n in range(1, _TABLED_LEN))]


def _one_hit_each(  # noqa: PLR0917 - called per pair: no tuple to pack and unpack
    extend: Callable[[tuple[Any, ...]], None], name: str, idx: int, l1: int, l2: int, hits: list[Any], frag: int
) -> tuple[bool, int, int] | None:
    """The rows of a pair whose two hits are one primary per mate (mate 1's first), or None when the
    hits are anything else; returns (proper pair, MAPQ 1, MAPQ 2). The general case is :func:`_emit`
    after :func:`_pair_primaries`; this is its result for the pairs that need no choice (no mate unmapped,
    no supplementary hit), with the counts left to the caller: the same rows (a test holds them equal)."""
    a, b = hits
    if not (a.read_num == 1 and b.read_num == 2 and a.is_primary and b.is_primary):
        return None
    a_rev, b_rev = a.strand < 0, b.strand < 0
    proper = _proper(a, b, max(frag - l1 - l2, SR_MAX_GAP))
    flag = 0x3 if proper else 0x1
    qa, qb = a.mapq, b.mapq
    extend((1, name, idx, flag | (0x50 if a_rev else 0x40) | (0x20 if b_rev else 0), a.ctg, a.r_st, a.r_en, qa,
            _cigar(a, l1, False), a.NM, l1,
            2, name, idx, flag | (0x90 if b_rev else 0x80) | (0x20 if a_rev else 0), b.ctg, b.r_st, b.r_en, qb,
            _cigar(b, l2, True), b.NM, l2))
    return proper, qa, qb


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


def _emit(  # noqa: PLR0917 - the general case of _one_hit_each, called per read
    values: list[Any],
    stats: AlignStats,
    read: _Read,
    hits: list[Any],
    primary: int,
    mate_hit: Any,
    base: int,
    proper: bool,
    revcomp_query: bool = False,
) -> None:
    """Rows of one read (the general case): ``base`` holds 0x1 and 0x40 / 0x80 for a mate of a pair
    (0 for single-end reads), ``mate_hit`` the mate's SAM primary (None: the mate is unmapped)."""
    name, mate, idx, read_len = read
    if base:
        if mate_hit is None:
            base |= 0x8
        elif mate_hit.strand < 0:
            base |= 0x20
    if not hits:
        values.extend((mate, name, idx, base | 0x4, None, None, None, None, None, None, read_len))
        return
    stats.mapped_reads += 1
    stats.mapq_sum += int(hits[primary].mapq)
    if proper:
        stats.properly_paired += 1
    # 0x2 on the SAM primary alone: minimap2 sets ``proper_frag`` on the two hits ``mm_pair`` paired, and a
    # supplementary hit of a properly paired mate is written without it (``format.c``)
    primary_flag = base | (0x2 if proper else 0)
    for k, h in enumerate(hits):
        rev = h.strand < 0
        values.extend(
            (
                mate,
                name,
                idx,
                (primary_flag if k == primary else base | 0x800) | (0x10 if rev else 0),
                h.ctg,
                h.r_st,
                h.r_en,
                h.mapq,
                _cigar(h, read_len, revcomp_query),
                h.NM,
                read_len,
            )
        )


#: the aligner a forked alignment process maps with (key ``aligner``): set in the parent just before it
#: forks them
_FORKED: dict[str, ReadAligner] = {}


def _fork_aligners(aligner: ReadAligner) -> ProcessPoolExecutor:
    """``aligner.threads - 1`` processes forked now, each with the parent's index in memory (copy-on-write
    pages: the index is read, never written, so it stays one copy in RAM); the parent is the last aligner,
    taking back the parts no process has started while it waits for a call's rows."""
    forked.require_single_thread("the aligner's fork")
    _FORKED["aligner"] = aligner
    processes = aligner.threads - 1
    pool = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork"))
    # fork all of them at once, while this process has no thread of ours
    for f in [pool.submit(os.getpid) for _ in range(processes)]:
        f.result()
    return pool


def _align_forked(
    method: str, reads: tuple[Sequence[Any], ...], mates: int, sample: str
) -> tuple[Any, tuple[AlignStats, ...]]:
    """One part of a call, in a forked alignment process (see :func:`_align_part`)."""
    return _align_part(_FORKED["aligner"], method, reads, mates, sample)


def _align_part(
    aligner: ReadAligner, method: str, reads: tuple[Sequence[Any], ...], mates: int, sample: str
) -> tuple[Any, tuple[AlignStats, ...]]:
    """One part of a call: its rows (an Arrow table of ``sample``, which crosses back from an alignment
    process as buffers and not as millions of Python objects) and counts."""
    batch = _aligned(getattr(aligner, method), reads, mates, sample, aligner._buffers[0])
    return batch.rows, batch.stats


def _aligned(
    align: Callable[[tuple[Sequence[Any], ...], list[Any], tuple[AlignStats, ...], Any], None],
    reads: tuple[Sequence[Any], ...], mates: int, sample: str, buf: Any,
) -> AlignedBatch:
    rows = AlignmentColumns()
    stats = tuple(AlignStats() for _ in range(mates))
    align(reads, rows.values, stats, buf)
    return AlignedBatch(rows.to_arrow(sample, BY_NAME["alignments"].schema), stats)
