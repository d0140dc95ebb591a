"""The child's alignment rows computed per hit in Python from mappy's own ``Aligner.map``: the judge of
``mappy.seqlake_map_batch`` (scripts/mappy/seqlake_batch.h), which computes the same rows in C. The rules
(which hits are rows, the SAM primary of a pair, flags, soft clips) are seqlake.child.align's module
docstring's; this was the child's own code until the batch mapping replaced it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from seqlake.child.align import SR_MAX_FRAG_LEN, mate_columns
from seqlake.lake.staging import AlignStats
from seqlake.lake.tables import BY_NAME

PE_BONUS = 33  # minimap2's default pe_bonus (options.c)
SR_MAX_GAP = 100  # the sr preset's max_gap: the floor of the pairing distance
_OPS = "MIDNSHP=XB"
_STORED = ("mate", "read_name", "read_index", "flag", "contig", "start", "end_pos", "mapq", "cigar", "nm", "read_len")


def _cigar(hit: Any, read_len: int, revcomp_query: bool) -> str:
    left, right = hit.q_st, read_len - hit.q_en
    if (hit.strand < 0) != revcomp_query:
        left, right = right, left
    ops = "".join(f"{n}{_OPS[op]}" for n, op in hit.cigar)
    return (f"{left}S" if left else "") + ops + (f"{right}S" if right else "")


def _dp_score(hit: Any) -> int:
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
    if a.ctg != b.ctg or a.strand == b.strand:
        return False
    fwd, rev = (a, b) if a.strand > 0 else (b, a)
    return bool(rev.r_st >= fwd.r_st and rev.r_st - fwd.r_en <= max_gap)


def _pair_primaries(h1: list[Any], h2: list[Any], max_gap: int) -> tuple[int, int, bool]:
    if not h1 or not h2:
        return 0, 0, False
    if len(h1) == len(h2) == 1:
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
    return (0, 0, False) if best is None else (best[1], best[2], True)


def _emit(rows: list[tuple[Any, ...]], stats: AlignStats, read: tuple[str, int, int, int], hits: list[Any],
          primary: int, mate_hit: Any, base: int, proper: bool, revcomp_query: bool = False) -> None:
    name, mate, idx, read_len = read
    if base:
        base |= 0x8 if mate_hit is None else (0x20 if mate_hit.strand < 0 else 0)
    if not hits:
        rows.append((mate, name, idx, base | 0x4, None, None, None, None, None, None, read_len))
        return
    stats.mapped_reads += 1
    stats.mapq_sum += int(hits[primary].mapq)
    stats.properly_paired += int(proper)
    primary_flag = base | (0x2 if proper else 0)
    for k, h in enumerate(hits):
        flag = (primary_flag if k == primary else base | 0x800) | (0x10 if h.strand < 0 else 0)
        rows.append((mate, name, idx, flag, h.ctg, h.r_st, h.r_en, h.mapq, _cigar(h, read_len, revcomp_query), h.NM,
                     read_len))


def map_pairs(aligner: Any, names: Sequence[str], seqs1: Sequence[str], seqs2: Sequence[str],
              read_index: Sequence[int], sample: str) -> tuple[pa.Table, tuple[AlignStats, AlignStats]]:
    rows: list[tuple[Any, ...]] = []
    stats = (AlignStats(), AlignStats())
    for name, s1, s2, idx in zip(names, seqs1, seqs2, read_index, strict=True):
        l1, l2 = len(s1), len(s2)
        h1: list[Any] = []
        h2: list[Any] = []
        if l1 and l2:
            for h in aligner.map(s1, s2, name):
                if h.is_primary:
                    (h1 if h.read_num == 1 else h2).append(h)
        elif l1 or l2:
            for h in aligner.map(s1 or s2):
                if h.is_primary:
                    (h1 if l1 else h2).append(h)
        p1, p2, pp = _pair_primaries(h1, h2, max(SR_MAX_FRAG_LEN - l1 - l2, SR_MAX_GAP))
        m1 = h1[p1] if h1 else None
        m2 = h2[p2] if h2 else None
        _emit(rows, stats[0], (name, 1, idx, l1), h1, p1, m2, 0x41, pp)
        _emit(rows, stats[1], (name, 2, idx, l2), h2, p2, m1, 0x81, pp, revcomp_query=bool(l1))
    return _table(rows, sample), stats


def map_single(aligner: Any, names: Sequence[str], seqs: Sequence[str], read_index: Sequence[int],
               sample: str) -> tuple[pa.Table, tuple[AlignStats]]:
    rows: list[tuple[Any, ...]] = []
    stats = AlignStats()
    for name, seq, idx in zip(names, seqs, read_index, strict=True):
        hits = [h for h in aligner.map(seq, None, name) if h.is_primary] if seq else []
        _emit(rows, stats, (name, 1, idx, len(seq)), hits, 0, None, 0, False)
    return _table(rows, sample), (stats,)


def _table(rows: list[tuple[Any, ...]], sample: str) -> pa.Table:
    schema = BY_NAME["alignments"].schema
    types = {f.name: f.type for f in schema}
    c = {name: [r[k] for r in rows] for k, name in enumerate(_STORED)}
    arrays = {name: pa.array(c[name], type=types[name])
              for name in ("mate", "read_name", "read_index", "flag", "contig", "end_pos", "mapq", "cigar", "nm",
                           "read_len")}
    arrays["pos"] = pc.add(pa.array(c["start"], type=pa.int64()), 1).cast(types["pos"])
    flag = np.asarray(c["flag"], dtype=np.int64)
    arrays["strand"] = pa.array([None if ctg is None else ("-" if f & 0x10 else "+")
                                 for ctg, f in zip(c["contig"], flag.tolist(), strict=True)], type=types["strand"])
    arrays["is_primary"] = pa.array((flag & 0x800) == 0, type=types["is_primary"])
    arrays.update(mate_columns(arrays, types))
    arrays["sample"] = pa.array([sample] * len(rows), type=types["sample"])
    return pa.table([arrays[f.name] for f in schema], schema=schema)
