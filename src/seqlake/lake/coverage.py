"""Depth of coverage in fixed-width bins, exactly additive across shards.

Semantics are those of ``mosdepth --fast-mode``: each primary or supplementary alignment covers its
whole reference span (``pos`` .. ``end``) with depth 1, deletions and skipped regions included,
nothing subtracted for overlapping mates (so a base covered by both mates of a pair has depth 2).

Per bin, ``depth_sum`` (the sum of per-base depth) is a sum over alignments and therefore adds up
across shards. ``covered_bases`` (bases with depth >= 1) does not: a shard keeps the union of its
covered intervals instead (sorted, merged; :func:`union_intervals`), the commit step unions the
shards' intervals one shard at a time and derives ``covered_bases`` and the whole-reference breadth
from that union. Memory is proportional to the bins and to the union's intervals, never to the
reference's bases: everything is computed at bin boundaries with sorted starts / ends and
``searchsorted`` (no per-base array, no Python loop over bases).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]


def bin_edges(contig_len: int, width: int) -> I64:
    """Bin boundaries 0, w, 2w, ..., contig_len (the last bin ends at the contig's end)."""
    edges = np.arange(0, contig_len, width, dtype=np.int64)
    return np.append(edges, np.int64(contig_len))


def covered_upto(starts: I64, ends: I64, x: I64) -> I64:
    """For each x, the sum over intervals [s, e) of |[s, e) ∩ [0, x)|: the covered bases left of x.

    ``sum_{s<x} (x - s) - sum_{e<x} (x - e)`` with sorted starts / ends and prefix sums.
    """
    s = np.sort(starts)
    e = np.sort(ends)
    cs = np.concatenate([[0], np.cumsum(s)])
    ce = np.concatenate([[0], np.cumsum(e)])
    ns = np.searchsorted(s, x, side="left")
    ne = np.searchsorted(e, x, side="left")
    covered: I64 = (ns * x - cs[ns]) - (ne * x - ce[ne])
    return covered


def union_intervals(starts: I64, ends: I64) -> tuple[I64, I64]:
    """The union of half-open intervals as sorted, disjoint, non-adjacent intervals."""
    if len(starts) == 0:
        return starts.astype(np.int64), ends.astype(np.int64)
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=np.bool_)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first].astype(np.int64), reach[last].astype(np.int64)


@dataclass
class ContigCoverage:
    """One contig's additive bin depths and covered-interval union."""

    length: int
    edges: I64
    depth_sum: I64
    union_start: I64 = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    union_end: I64 = field(default_factory=lambda: np.empty(0, dtype=np.int64))

    def add(self, starts: I64, ends: I64) -> None:
        cum = covered_upto(starts, ends, self.edges)
        self.depth_sum += np.diff(cum)
        self.add_union(starts, ends)

    def add_union(self, starts: I64, ends: I64) -> None:
        self.union_start, self.union_end = union_intervals(
            np.concatenate([self.union_start, starts]), np.concatenate([self.union_end, ends])
        )

    def covered_bases(self) -> I64:
        return np.diff(covered_upto(self.union_start, self.union_end, self.edges))


class CoverageAccumulator:
    """Coverage of one sample over a reference (contigs and lengths from the index)."""

    def __init__(self, contigs: Sequence[tuple[str, int]], width: int) -> None:
        self.width = width
        self.contigs: dict[str, ContigCoverage] = {}
        for name, length in contigs:
            edges = bin_edges(length, width)
            self.contigs[name] = ContigCoverage(length, edges, np.zeros(len(edges) - 1, dtype=np.int64))

    def add_spans(self, spans: Iterable[tuple[str, int, int]]) -> None:
        """Add alignment spans (contig, 0-based start, end exclusive), grouped per contig."""
        by_contig: dict[str, tuple[list[int], list[int]]] = {}
        for ctg, s, e in spans:
            lists = by_contig.setdefault(ctg, ([], []))
            lists[0].append(s)
            lists[1].append(e)
        for ctg, (s_list, e_list) in by_contig.items():
            self.contigs[ctg].add(np.asarray(s_list, dtype=np.int64), np.asarray(e_list, dtype=np.int64))

    def add_intervals(self, contig: str, starts: I64, ends: I64) -> None:
        """Add alignment spans of one contig given as arrays (0-based starts, exclusive ends)."""
        if len(starts):
            self.contigs[contig].add(starts, ends)

    @property
    def reference_length(self) -> int:
        return sum(c.length for c in self.contigs.values())

    def totals(self) -> tuple[int, int]:
        """(sum of depth over the reference, bases with depth >= 1)."""
        depth = sum(int(c.depth_sum.sum()) for c in self.contigs.values())
        covered = sum(int((c.union_end - c.union_start).sum()) for c in self.contigs.values())
        return depth, covered

    def mean_depth_and_breadth(self) -> tuple[float | None, float | None]:
        total = self.reference_length
        if total == 0:
            return None, None
        depth, covered = self.totals()
        return depth / total, covered / total

    def rows(self, sample: str) -> dict[str, list[object]]:
        """``coverage`` table columns (bins of every contig, in index order)."""
        cols: dict[str, list[object]] = {
            k: [] for k in ("sample", "contig", "bin_start", "bin_end", "pos", "depth_sum", "mean_span_depth",
                            "covered_bases")
        }
        for name, c in self.contigs.items():
            n = len(c.depth_sum)
            starts, ends = c.edges[:-1], c.edges[1:]
            cols["sample"] += [sample] * n
            cols["contig"] += [name] * n
            cols["bin_start"] += starts.tolist()
            cols["bin_end"] += ends.tolist()
            cols["pos"] += (starts + 1).tolist()
            cols["depth_sum"] += c.depth_sum.tolist()
            cols["mean_span_depth"] += (c.depth_sum / np.maximum(ends - starts, 1)).tolist()
            cols["covered_bases"] += c.covered_bases().tolist()
        return cols
