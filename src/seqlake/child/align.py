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

These rules run in C, a chunk of reads per call: ``mappy.seqlake_map_batch`` (scripts/mappy/seqlake_batch.h,
compiled into seqlake's mappy build by scripts/install_mappy.py) returns the chunk's rows as column buffers, which
:func:`rows_table` makes an Arrow table without a Python object per row; tests/core/align_reference.py computes
the same rows per hit from mappy's own ``map`` and tests/core/test_align.py holds the two equal.

The aligner loads a minimap2 index it is given (:func:`seqlake.plan.reference.local_index`): the
planner built it once, before the fan-out, and the reference's contigs come with it
(:func:`seqlake.plan.reference.load_contigs`), so no sequence of the reference is held here.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator, Sequence
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


def rows_table(mapped: dict[str, bytes], names: Sequence[str], read_index: Sequence[int], contigs: pa.Array, *,
               sample: str, schema: pa.Schema) -> pa.Table:
    """The ``alignments`` rows of one mapped call as a table of ``schema``, from the column buffers
    ``mappy.seqlake_map_batch`` returns (``contigs``: the index's contig names, which its ``tid`` indexes):
    built in NumPy and Arrow, nothing per row in Python."""
    import pyarrow.compute as pc  # here, not at the top: a child that does not align never loads it

    types = {f.name: f.type for f in schema}
    pair = np.frombuffer(mapped["pair"], dtype=np.int32)
    n = len(pair)
    tid = np.frombuffer(mapped["tid"], dtype=np.int32)
    unmapped = tid < 0
    flag = np.frombuffer(mapped["flag"], dtype=np.uint16).astype(np.int32)

    def column(key: str, dtype: str, name: str, shift: int = 0) -> pa.Array:
        values = np.frombuffer(mapped[key], dtype=dtype).astype(types[name].to_pandas_dtype()) + shift
        return pa.array(values, mask=unmapped, type=types[name])

    text_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.frombuffer(mapped["text_len"], dtype=np.int32), out=text_offsets[1:])
    valid = pa.py_buffer(np.packbits(~unmapped, bitorder="little"))
    arrays: dict[str, pa.Array] = {
        "mate": pa.array(np.frombuffer(mapped["mate"], dtype=np.uint8).astype(np.int8), type=types["mate"]),
        "read_name": pa.array(names, type=pa.string()).take(pair),
        "read_index": pa.array(_int64s(read_index)[pair], type=types["read_index"]),
        "flag": pa.array(flag, type=types["flag"]),
        "contig": contigs.take(pa.array(tid, mask=unmapped)).cast(types["contig"]),
        "pos": column("start", "<i4", "pos", 1),
        "end_pos": column("end", "<i4", "end_pos"),
        "mapq": column("mapq", "u1", "mapq"),
        "cigar": pa.Array.from_buffers(pa.string(), n, [valid, pa.py_buffer(text_offsets),
                                                        pa.py_buffer(mapped["text"])]).cast(types["cigar"]),
        "nm": column("nm", "<i4", "nm"),
        "read_len": pa.array(np.frombuffer(mapped["read_len"], dtype=np.int32), type=types["read_len"]),
        "is_primary": pa.array((flag & 0x800) == 0, type=types["is_primary"]),
    }
    rev = pa.array((flag & 0x10) != 0)
    arrays["strand"] = pc.if_else(arrays["contig"].is_null(), pa.scalar(None, pa.string()),
                                  pc.if_else(rev, "-", "+")).cast(types["strand"])
    arrays.update(mate_columns(arrays, types))
    arrays["sample"] = pa.array([sample], type=types["sample"]).take(np.zeros(n, dtype=np.int64))
    return pa.table([arrays[f.name] for f in schema], schema=schema)


def _int64s(values: Sequence[int]) -> npt.NDArray[np.int64]:
    """``values`` as int64 (a ``range``, a child's usual read indexes, without converting each int)."""
    if isinstance(values, range):
        return np.arange(values.start, values.stop, values.step, dtype=np.int64)
    return np.asarray(values, dtype=np.int64)


def mapped_stats(mapped: dict[str, bytes], mates: int) -> tuple[AlignStats, ...]:
    """Per mate, the counts ``mappy.seqlake_map_batch`` kept: mapped reads, properly paired, MAPQ sum."""
    counts = np.frombuffer(mapped["stats"], dtype=np.int64).reshape(2, 3).tolist()
    return tuple(AlignStats(*counts[m]) for m in range(mates))


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
    #: each row's CIGAR packed as BAM holds it (``length << 4 | op``, soft clips included): the operations'
    #: count per row and the operations end to end (the same CIGARs as the ``cigar`` column's text)
    cigar: tuple[npt.NDArray[np.int64], npt.NDArray[np.uint32]]


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
            parts = [part.result() for part in self._parts]
            stats = parts[0].stats
            for part in parts[1:]:
                stats = _merge_stats(stats, part.stats)
            self._done = parts[0] if len(parts) == 1 else AlignedBatch(
                pa.concat_tables([p.rows for p in parts]), stats,
                (np.concatenate([p.cigar[0] for p in parts]), np.concatenate([p.cigar[1] for p in parts])))
        return self._done


class _Part:
    """One part of a call: aligning in an alignment process, or taken back and aligned here."""

    def __init__(self, aligner: ReadAligner, future: Future[AlignedBatch],
                 args: tuple[Any, ...]) -> None:
        self.aligner = aligner
        self.future = future
        self.args = args
        self.here: AlignedBatch | None = None

    def done(self) -> bool:
        return self.here is not None or self.future.done()

    def steal(self) -> bool:
        if self.here is None and self.future.cancel():
            self.here = _align_part(self.aligner, *self.args)
            return True
        return False

    def result(self) -> AlignedBatch:
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
        #: the batch mapping scripts/install_mappy.py compiles into mappy (rows as column buffers)
        batch = getattr(mappy, "seqlake_map_batch", None)
        if batch is None:
            raise RuntimeError(f"mappy {mappy.__version__} at {mappy.__file__} is not seqlake's build (no "
                               "seqlake_map_batch): install it with scripts/install_mappy.py (make does)")
        self._batch: Any = batch
        #: the index's contig names, in the order of the ``tid`` the batch mapping returns
        self._contigs = pa.array(self._aligner.seq_names, pa.string())
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
            return PendingBatch([], getattr(self, method)(reads, sample, self._buffers[0]))
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

    def _single(self, reads: tuple[Sequence[Any], ...], sample: str, buf: Any) -> AlignedBatch:
        names, seqs, read_index = reads
        return self._mapped(self._batch(self._aligner, names, seqs, None, self.max_frag_len, buf), names,
                            read_index, 1, sample)

    def _pairs(self, reads: tuple[Sequence[Any], ...], sample: str, buf: Any) -> AlignedBatch:
        """Pairs mapped together (minimap2's paired-end mode) when both mates have bases; a pair with one empty
        mate has the other aligned alone (as minimap2 does). Each read's name seeds minimap2's choice among
        equally good placements (``mm_map_frag`` hashes it) as the command line's read name does: a read in
        a repeat lands where ``minimap2 -ax sr`` puts it, not on a copy of mappy's own choosing."""
        names, seqs1, seqs2, read_index = reads
        return self._mapped(self._batch(self._aligner, names, seqs1, seqs2, self.max_frag_len, buf), names,
                            read_index, 2, sample)

    def _mapped(self, mapped: dict[str, bytes], names: Sequence[str], read_index: Sequence[int], mates: int,
                sample: str) -> AlignedBatch:
        return AlignedBatch(rows_table(mapped, names, read_index, self._contigs, sample=sample,
                                       schema=BY_NAME["alignments"].schema),
                            mapped_stats(mapped, mates),
                            (np.frombuffer(mapped["n_cigar"], dtype=np.int32).astype(np.int64),
                             np.frombuffer(mapped["ops"], dtype=np.uint32)))


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
) -> AlignedBatch:
    """One part of a call, in a forked alignment process (see :func:`_align_part`)."""
    return _align_part(_FORKED["aligner"], method, reads, mates, sample)


def _align_part(
    aligner: ReadAligner, method: str, reads: tuple[Sequence[Any], ...], mates: int, sample: str
) -> AlignedBatch:
    """One part of a call: its rows (an Arrow table of ``sample``, which crosses back from an alignment
    process as buffers and not as millions of Python objects) and counts."""
    batch: AlignedBatch = getattr(aligner, method)(reads, sample, aligner._buffers[0])
    return batch
