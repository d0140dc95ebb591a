"""Regions: the reference cut into windows, the unit of the reduce step (one reducer per region).

The reference's contigs, in reference order, are cut into windows of ``region_size`` bases (a run
parameter, :data:`seqlake.base.params.DEFAULT_REGION_SIZE` by default); consecutive contigs shorter than a window are
grouped into one region until the next one would take it past ``region_size`` bases. A region is
therefore a list of pieces ``(contig, start, end)``: one window of a long contig, or several whole
short contigs. A 30 kb virus is one region; GRCh38 (3.1 Gb, 3,366 contigs with decoys) about 130.

Regions are a pure function of (contigs, region_size): the child that cuts its per-position tables by
region, the reducer that merges one region and the commit that adds the regions' summaries up all
compute the same list, and nothing has to carry it. Windows start at multiples of ``region_size``
inside their contig, so a coverage bin never straddles two regions: the bin width divides ``region_size``
(:class:`seqlake.base.params.Params` checks it).
"""

from __future__ import annotations

import json
import math
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from seqlake.base import params as _params
from seqlake.base import storage
from seqlake.base.errors import SeqlakeError
from seqlake.base.params import DEFAULT_REGION_SIZE, coverage_bin_width
from seqlake.plan.planfile import Plan

Contigs = Sequence[tuple[str, int]]
#: coverage points per sample the report may draw (over its longest contigs): the reducers sum the bins
#: into at most this many (the report regroups them to its own budget)
COVERAGE_POINTS = 2_000
#: contigs the report draws (the longest)
COVERAGE_CONTIGS = 12


@dataclass(frozen=True)
class Piece:
    """Bases ``[start, end)`` of one contig (0-based, half-open) inside a region."""

    contig: str
    start: int
    end: int
    #: the contig's length (a piece that ends before it is a window cut from a longer contig)
    contig_length: int

    @property
    def bases(self) -> int:
        return self.end - self.start

    @property
    def whole(self) -> bool:
        return self.start == 0 and self.end == self.contig_length


@dataclass(frozen=True)
class Region:
    index: int
    pieces: tuple[Piece, ...]

    @property
    def bases(self) -> int:
        return sum(p.bases for p in self.pieces)

    @property
    def contigs(self) -> list[str]:
        return [p.contig for p in self.pieces]


def regions(contigs: Contigs, region_size: int = DEFAULT_REGION_SIZE) -> list[Region]:
    """The reference's regions, in reference order (see the module docstring)."""
    if region_size < 1:
        raise ValueError(f"region_size must be a positive number of bases, not {region_size}")
    return _cut([Piece(name, 0, length, length) for name, length in contigs], region_size)


def _cut(pieces: Sequence[Piece], size: int) -> list[Region]:
    """``pieces`` (in reference order) as regions of at most ``size`` bases: a piece of ``size`` bases or more
    cut every ``size`` bases from its start, consecutive shorter ones grouped until the next would take the
    group past ``size``."""
    out: list[Region] = []
    group: list[Piece] = []
    held = 0

    def close() -> None:
        nonlocal group, held
        if group:
            out.append(Region(len(out), tuple(group)))
        group, held = [], 0

    for p in pieces:
        if p.bases >= size:
            close()
            for start in range(p.start, p.end, size):
                out.append(Region(len(out), (Piece(p.contig, start, min(start + size, p.end), p.contig_length),)))
            continue
        if held + p.bases > size:
            close()
        group.append(p)
        held += p.bases
    close()
    return out


def window_size(bin_width: int) -> int:
    """The bases of a reducer's window (:data:`seqlake.base.params.REDUCE_WINDOW`, read when called) rounded down
    to a multiple of the coverage bin width, so that no bin straddles two windows."""
    return max(bin_width, _params.REDUCE_WINDOW // bin_width * bin_width)


def windows(region: Region, size: int) -> list[Region]:
    """The region cut into windows of at most ``size`` bases, numbered from 0 inside the region: a piece of
    ``size`` bases or more is cut every ``size`` bases from its start (a multiple of the bin width, as ``size``
    is), consecutive shorter pieces are grouped as :func:`regions` groups contigs. A region of at most ``size``
    bases is one window: itself."""
    if size < 1:
        raise ValueError(f"a window must be a positive number of bases, not {size}")
    if region.bases <= size:
        return [Region(0, region.pieces)]
    return _cut(region.pieces, size)


class RegionMap:
    """Where each contig's bases go: per contig, its windows' starts, ends and region numbers."""

    def __init__(self, all_regions: Sequence[Region]) -> None:
        self.regions = list(all_regions)
        self.windows: dict[str, list[tuple[int, int, int]]] = {}
        for region in self.regions:
            for p in region.pieces:
                self.windows.setdefault(p.contig, []).append((p.start, p.end, region.index))
        self._starts = {c: [w[0] for w in ws] for c, ws in self.windows.items()}

    def region_at(self, contig: str, pos: int) -> int:
        """The region holding 0-based position ``pos`` of ``contig``."""
        ws = self.windows[contig]
        return ws[bisect_right(self._starts[contig], pos) - 1][2]

    def pieces_of(self, contig: str) -> Iterator[tuple[int, int, int]]:
        """``(start, end, region)`` of each window of ``contig``, in order."""
        yield from self.windows.get(contig, ())


def reference_length(contigs: Contigs) -> int:
    return sum(length for _, length in contigs)


@dataclass(frozen=True)
class ReducePlan:
    """What the reducers and the commit agree on (``runs/<id>/reduce/regions.json``)."""

    contigs: list[tuple[str, int]]
    region_size: int
    bin_width: int
    #: the window (bases) the children cut their positions objects at (child 0's), which a reducer works in
    window: int

    @property
    def regions(self) -> list[Region]:
        return regions(self.contigs, self.region_size)

    def to_json(self) -> bytes:
        return json.dumps({"contigs": [list(c) for c in self.contigs], "region_size": self.region_size,
                           "bin_width": self.bin_width, "window": self.window, "regions": len(self.regions)}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> ReducePlan:
        d = json.loads(data)
        if "window" not in d:
            raise SeqlakeError("the reduce plan names no window: an older seqlake's (manifest version 5 or before); "
                               "re-run the run's children with this version")
        return cls([(str(n), int(length)) for n, length in d["contigs"]], int(d["region_size"]), int(d["bin_width"]),
                   int(d["window"]))

    def coverage_widths(self) -> dict[str, int]:
        """Contig -> the width of its report points (a multiple of the bin width), for the drawn contigs:
        the longest, sharing :data:`COVERAGE_POINTS` by length."""
        drawn = sorted(self.contigs, key=lambda c: (-c[1], c[0]))[:COVERAGE_CONTIGS]
        total = sum(n for _, n in drawn) or 1
        out = {}
        for name, length in drawn:
            step = min(self.bin_width, length) or 1
            budget = max(20, COVERAGE_POINTS * length // total)
            out[name] = step * max(1, math.ceil(math.ceil(length / step) / budget))
        return out


def reduce_plan_of(plan: Plan, contigs: Contigs, window: int) -> ReducePlan:
    return ReducePlan(list(contigs), plan.params.region_size,
                      coverage_bin_width(plan.params, reference_length(contigs)), window)


def plan_reduce(plan: Plan) -> ReducePlan | None:
    """Write the reduce step's plan from the children's contigs and the window they cut their positions objects
    at (the first child's manifest: with a reference every child aligns; each reducer checks every other child's
    window against it); None without a reference (nothing to reduce)."""
    if not plan.reference or plan.array_size == 0:
        return None
    uri = plan.layout.manifest(0)
    try:
        manifest = json.loads(storage.read_bytes(uri))
    except FileNotFoundError as err:
        raise SeqlakeError(f"child 0 has no manifest at {uri}: it did not finish") from err
    window = manifest.get("positions_window")
    if not isinstance(window, int) or window < 1:
        raise SeqlakeError(f"the manifest at {uri} (version {manifest.get('version')}) names no positions window: "
                           "an older seqlake's child; re-run the run's children with this version")
    contigs = manifest.get("contigs") or []
    rp = reduce_plan_of(plan, [(str(n), int(length)) for n, length in contigs], window)
    storage.write_bytes(plan.layout.reduce_plan, rp.to_json())
    return rp


def load_reduce_plan(plan: Plan) -> ReducePlan:
    return ReducePlan.from_json(storage.read_bytes(plan.layout.reduce_plan))
