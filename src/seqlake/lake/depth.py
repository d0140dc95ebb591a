"""Exact per-base depth as run-length intervals: the coverage thresholds and the low-coverage regions.

Semantics are those of ``samtools depth -a`` with its defaults: each primary or supplementary
alignment adds 1 to the bases its aligned blocks cover (CIGAR ``M``, ``=``, ``X``); deletions and
skipped regions (``D``, ``N``) add nothing, insertions and clips cover no reference base, and the
two mates of a pair both count where they overlap. (The binned ``coverage`` table keeps the older
whole-span semantics of ``mosdepth --fast-mode``.)

A depth profile is a sorted list of disjoint runs ``[start, end)`` (0-based, half-open) with a
constant depth >= 1; bases outside every run have depth 0. Profiles add exactly with a sweep over
their boundaries (:func:`add_profiles`), so the commit sums the children's profiles in any order.

Depth is capped at :data:`seqlake.lake.tables.DEPTH_CAP` (the highest threshold) everywhere: ``min(a + b, cap) ==
min(min(a, cap) + min(b, cap), cap)``, so the capped sum answers every threshold question exactly,
and runs at or above the cap merge into one. A profile's size is therefore the number of depth
changes below the cap, never the reference's length: a few thousand runs for a viral genome,
tens of thousands for a bacterial one at the usual depths. For a human genome at 30x about half
the bases sit below the cap and change depth every few bases: ~10^8 runs per sample (~2.4 GB as
three int64 arrays), beyond the commit Lambda; such a run would need the sweep per contig and
streamed to the result file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from seqlake.lake.tables import DEPTH_CAP

I64 = npt.NDArray[np.int64]


_CIGAR_OP = re.compile(r"(\d+)([MIDNSHP=XB])")
#: operations that consume the reference, and those of them that count as depth
_REF_OPS = frozenset("MDN=X")
_DEPTH_OPS = frozenset("M=X")


def _empty() -> I64:
    return np.empty(0, dtype=np.int64)


@dataclass
class Profile:
    """One contig's capped depth runs (see the module docstring)."""

    start: I64 = field(default_factory=_empty)
    end: I64 = field(default_factory=_empty)
    depth: I64 = field(default_factory=_empty)

    def __len__(self) -> int:
        return len(self.start)

    def bases_at_least(self, threshold: int) -> int:
        sel = self.depth >= threshold
        return int((self.end[sel] - self.start[sel]).sum())

    def below(self, threshold: int, length: int) -> tuple[I64, I64]:
        """The merged intervals ``[start, end)`` of ``[0, length)`` with depth below ``threshold``."""
        sel = self.depth >= threshold
        s, e = self.start[sel], self.end[sel]
        if len(s):  # runs at or above the threshold that touch each other are one covered interval
            first = np.flatnonzero(np.concatenate([[True], s[1:] != e[:-1]]))
            last = np.append(first[1:] - 1, len(s) - 1)
            s, e = s[first], e[last]
        gap_s = np.concatenate([[0], e]).astype(np.int64)
        gap_e = np.concatenate([s, [length]]).astype(np.int64)
        nonempty = gap_e > gap_s
        return gap_s[nonempty], gap_e[nonempty]


def _sweep(positions: I64, deltas: I64) -> Profile:
    """Runs of the step function that changes by ``deltas`` at ``positions`` (capped, merged)."""
    if len(positions) == 0:
        return Profile()
    # any sort will do (the deltas at one position are summed), and the sorted positions give their
    # distinct values in one pass (np.unique would sort them again)
    order = np.argsort(positions)
    pos, dlt = positions[order], deltas[order]
    first = np.flatnonzero(np.concatenate(([True], pos[1:] != pos[:-1])))
    return _steps(pos[first], np.add.reduceat(dlt, first))


def _steps(uniq: I64, change: I64) -> Profile:
    """Runs of the step function that changes by ``change`` at the sorted, distinct ``uniq`` (capped, merged)."""
    depth = np.minimum(np.cumsum(change), DEPTH_CAP)
    start, end, d = uniq[:-1], uniq[1:], depth[:-1]
    # a run continues when the depth does not change at a boundary (e.g. both at the cap)
    new = np.ones(len(d), dtype=np.bool_)
    new[1:] = d[1:] != d[:-1]
    idx = np.flatnonzero(new)
    ends = np.append(start[idx[1:]], end[-1]) if len(idx) else _empty()
    run_s, run_e, run_d = start[idx], ends, d[idx]
    nz = run_d > 0
    return Profile(run_s[nz].astype(np.int64), run_e[nz].astype(np.int64), run_d[nz].astype(np.int64))


def profile_of_blocks(starts: I64, ends: I64) -> Profile:
    """The capped depth of aligned blocks ``[start, end)`` (each adds 1). Every delta is +1 or -1, so the
    positions are sorted as one key each (position and sign) by a plain sort, several times faster than the
    argsort :func:`_sweep` needs for deltas of any size; the steps are then its."""
    if len(starts) == 0:
        return Profile()
    key = np.sort(np.concatenate([starts.astype(np.int64) << 1, (ends.astype(np.int64) << 1) | 1]))
    pos = key >> 1
    first = np.flatnonzero(np.concatenate(([True], pos[1:] != pos[:-1])))
    change = np.add.reduceat(1 - 2 * (key & 1), first)
    return _steps(pos[first], change)


def sum_runs(starts: I64, ends: I64, depths: I64) -> Profile:
    """The capped sum of runs given in any order (several profiles' runs, concatenated)."""
    return _sweep(np.concatenate([starts, ends]).astype(np.int64), np.concatenate([depths, -depths]).astype(np.int64))


def add_profiles(*profiles: Profile) -> Profile:
    """The capped sum of profiles (exact for every threshold up to the cap)."""
    parts = [p for p in profiles if len(p)]
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return Profile()
    pos = np.concatenate([x for p in parts for x in (p.start, p.end)])
    dlt = np.concatenate([x for p in parts for x in (p.depth, -p.depth)])
    return _sweep(pos, dlt)


def cigar_blocks(pos1: int, cigar: str) -> list[tuple[int, int]]:
    """Aligned blocks ``[start, end)`` (0-based) of an alignment at 1-based ``pos1``: the ``M``, ``=``
    and ``X`` runs between deletions and skips."""
    out: list[tuple[int, int]] = []
    ref = pos1 - 1
    for n_text, op in _CIGAR_OP.findall(cigar):
        n = int(n_text)
        if op in _DEPTH_OPS:
            if out and out[-1][1] == ref:
                out[-1] = (out[-1][0], ref + n)
            else:
                out.append((ref, ref + n))
        if op in _REF_OPS:
            ref += n
    return out


@lru_cache(maxsize=4096)
def _relative_blocks(cigar: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The aligned blocks of a CIGAR relative to its alignment's start (starts, ends): amplicon reads
    repeat the same few gapped CIGARs, so each is parsed once."""
    blocks = cigar_blocks(1, cigar)
    return tuple(b[0] for b in blocks), tuple(b[1] for b in blocks)


def depth_blocks(table: pa.Table) -> dict[str, tuple[I64, I64]]:
    """Per contig, the aligned blocks of an ``alignments`` table's mapped rows. Alignments without a
    deletion or skip are one block (``pos`` .. ``end_pos``); only the others have their CIGAR parsed."""
    import pyarrow.compute as pc  # here, not at the top: a child that does not align never loads it
    mapped = table.select(["contig", "pos", "end_pos", "cigar"]).filter(pc.is_valid(table.column("contig")))
    if mapped.num_rows == 0:
        return {}
    contig = mapped.column("contig").combine_chunks().dictionary_encode()
    names: list[str] = contig.dictionary.to_pylist()
    codes = contig.indices.to_numpy()
    starts = mapped.column("pos").to_numpy().astype(np.int64) - 1
    ends = mapped.column("end_pos").to_numpy().astype(np.int64)
    cigar = mapped.column("cigar")
    gapped = pc.or_(pc.match_substring(cigar, "D"), pc.match_substring(cigar, "N")).to_numpy(zero_copy_only=False)
    # the gapped rows' blocks, row after row, from their CIGARs alone (the others are one block)
    rows = np.flatnonzero(gapped)
    rel_starts: list[int] = []
    rel_ends: list[int] = []
    per_row: list[int] = []
    for cigar in mapped.column("cigar").take(rows).to_pylist():
        s, e = _relative_blocks(cigar)
        rel_starts += s
        rel_ends += e
        per_row.append(len(s))
    owner = np.repeat(rows, per_row)
    all_codes = np.concatenate([codes[~gapped], codes[owner]])
    all_starts = np.concatenate([starts[~gapped], starts[owner] + np.asarray(rel_starts, dtype=np.int64)])
    all_ends = np.concatenate([ends[~gapped], starts[owner] + np.asarray(rel_ends, dtype=np.int64)])
    order = np.argsort(all_codes, kind="stable")
    bounds = np.searchsorted(all_codes[order], np.arange(len(names) + 1))
    return {name: (all_starts[order[bounds[k]:bounds[k + 1]]], all_ends[order[bounds[k]:bounds[k + 1]]])
            for k, name in enumerate(names) if bounds[k + 1] > bounds[k]}


class DepthAccumulator:
    """One sample's capped depth profiles per contig, folded batch by batch.

    Each contig keeps a stack of partial sums, each at least twice the runs of the one above it (a binary
    counter's carries): a batch is summed into the profile below only once that profile is no more than twice
    its size. Folding every batch into one whole profile re-sorted that profile at every batch, a cost that grew
    with the square of the batches where the reads barely overlap (a child of 2 M pairs over a 100 Mb genome:
    17 % of its CPU in that sort); here each run is swept O(log batches) times. The sums are exact in any
    order (:func:`add_profiles`)."""

    def __init__(self) -> None:
        self._stacks: dict[str, list[Profile]] = {}

    def add_blocks(self, blocks: Mapping[str, tuple[I64, I64]]) -> None:
        """Add a batch's aligned blocks per contig (:func:`depth_blocks`)."""
        for contig, (starts, ends) in blocks.items():
            self.add(contig, profile_of_blocks(starts, ends))

    def add(self, contig: str, profile: Profile) -> None:
        stack = self._stacks.setdefault(contig, [])
        stack.append(profile)
        while len(stack) > 1 and len(stack[-2]) <= 2 * len(stack[-1]):
            top = stack.pop()
            stack[-1] = add_profiles(stack[-1], top)

    @property
    def profiles(self) -> dict[str, Profile]:
        """Each contig's whole profile (its partial sums summed, and kept so)."""
        for stack in self._stacks.values():
            if len(stack) > 1:
                stack[:] = [add_profiles(*stack)]
        return {contig: stack[0] for contig, stack in self._stacks.items()}
