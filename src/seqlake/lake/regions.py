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
from seqlake.base.errors import BadInputError, SeqlakeError
from seqlake.base.limits import BATCH_ARRAY_MAX
from seqlake.base.params import DEFAULT_REGION_SIZE, coverage_bin_width
from seqlake.plan import sizing
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
class Reducer:
    """One reducer of the reduce array (its array index): the region it merges and the children whose rows it
    reads, a group of whole samples (:func:`child_groups`), so that no reducer's work grows with the run's
    number of samples."""

    index: int
    region: int
    group: int
    #: the children of its group, ``range(first, last + 1)``
    children: range


@dataclass(frozen=True)
class ReducePlan:
    """What the reducers and the commit agree on (``runs/<id>/reduce/regions.json``)."""

    contigs: list[tuple[str, int]]
    region_size: int
    bin_width: int
    #: the window (bases) the children cut their positions objects at (child 0's), which a reducer works in
    window: int
    #: the sample groups: each a range of children ``(first, stop)`` holding whole samples; one group of
    #: every child when not given (a plan from before the groups)
    groups: tuple[tuple[int, int], ...] = ()

    @property
    def regions(self) -> list[Region]:
        return regions(self.contigs, self.region_size)

    @property
    def reducers(self) -> list[Reducer]:
        """Every reducer, in array order: region by region, and inside a region group by group (so a sample's
        reducers are in reference order, as the commit joins their pieces)."""
        groups = self.groups or ((0, 0),)
        return [Reducer(r * len(groups) + g, r, g, range(a, b)) for r in range(len(self.regions))
                for g, (a, b) in enumerate(groups)]

    def reducer(self, index: int) -> Reducer:
        n_groups = max(1, len(self.groups))
        n = len(self.regions) * n_groups
        if not 0 <= index < n:
            raise SeqlakeError(f"reducer {index} does not exist: the reduce has {n} reducers "
                               f"({len(self.regions)} regions x {n_groups} sample groups)")
        return self.reducers[index]

    def to_json(self) -> bytes:
        return json.dumps({"contigs": [list(c) for c in self.contigs], "region_size": self.region_size,
                           "bin_width": self.bin_width, "window": self.window, "regions": len(self.regions),
                           "groups": [list(g) for g in self.groups]}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> ReducePlan:
        d = json.loads(data)
        if "window" not in d:
            raise SeqlakeError("the reduce plan names no window: an older seqlake's (manifest version 5 or before); "
                               "re-run the run's children with this version")
        return cls([(str(n), int(length)) for n, length in d["contigs"]], int(d["region_size"]), int(d["bin_width"]),
                   int(d["window"]), tuple((int(a), int(b)) for a, b in d.get("groups") or ()))

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


def _atoms(plan: Plan) -> list[tuple[int, int, list[str]]]:
    """The plan's children cut where no sample continues into the next child: ``(first, stop, samples)``, the
    smallest runs of children that hold whole samples (a sample's children are consecutive)."""
    out: list[tuple[int, int, list[str]]] = []
    first, samples = 0, list[str]()
    for child in range(plan.array_size):
        shards = plan.child_shards(child)
        for i in shards:
            name = plan.shards[i].sample
            if not samples or samples[-1] != name:
                samples.append(name)
        nxt = plan.child_shards(child + 1) if child + 1 < plan.array_size else None
        if nxt is None or plan.shards[nxt.start].sample != plan.shards[shards.stop - 1].sample:
            out.append((first, child + 1, samples))
            first, samples = child + 1, []
    return out


def child_groups(plan: Plan, contigs: Contigs, target_s: float | None = None) -> tuple[tuple[int, int], ...]:
    """The plan's children in groups of whole samples, each group's work on its largest region at most
    ``target_s`` seconds (:func:`seqlake.plan.sizing.reducer_seconds`; a sample whose work alone passes it is a
    group of its own): a reducer merges one region of one group, so its work does not grow with the number
    of samples of the run. ``target_s``: :data:`seqlake.plan.sizing.REDUCER_TARGET_SECONDS` (read when called)."""
    target = sizing.REDUCER_TARGET_SECONDS if target_s is None else target_s
    genome = max(1, reference_length(contigs))
    region_bases = min(plan.params.region_size, genome)
    bases = sizing.sample_bases(plan)
    alleles = plan.params.allele_counts
    groups: list[tuple[int, int]] = []
    start, depths, children = 0, list[float](), 0
    for first, stop, samples in _atoms(plan):
        add = [bases.get(s, 0) / genome for s in samples]
        work = sizing.reducer_seconds(region_bases, depths + add, children + stop - first, alleles)
        if depths and work > target:
            groups.append((start, first))
            start, depths, children = first, list[float](), 0
        depths += add
        children += stop - first
    if plan.array_size:
        groups.append((start, plan.array_size))
    return tuple(groups)


def reducer_keys(plan: Plan, contigs: Contigs) -> list[sizing.ReducerKey]:
    """Every reducer the run will have, with its expected seconds; refused (bad input, naming the run
    parameter) when they would be more than a Batch array holds. The plan calls it before any child runs."""
    rp = reduce_plan_of(plan, contigs, 1)
    all_regions = rp.regions
    reducers = len(all_regions) * max(1, len(rp.groups))
    if reducers > BATCH_ARRAY_MAX.value:
        raise BadInputError(
            "region_size", f"{len(all_regions):,} regions of {plan.params.region_size:,} bases x "
            f"{len(rp.groups):,} sample groups = {reducers:,} reducers, more than a Batch array's "
            f"{BATCH_ARRAY_MAX.value:,}: raise the run parameter region_size (a genome of "
            f"{reference_length(contigs):,} bases), or run fewer samples at once")
    genome = max(1, reference_length(contigs))
    bases = sizing.sample_bases(plan)
    depths: dict[int, list[float]] = {}  # group -> its samples' depths (the groups are the same in every region)
    starts = [a for a, _ in rp.groups]
    for first, _, names in _atoms(plan):
        group = bisect_right(starts, first) - 1
        depths.setdefault(group, []).extend(bases.get(s, 0) / genome for s in names)
    keys = []
    for red in rp.reducers:
        seconds = sizing.reducer_seconds(all_regions[red.region].bases, depths.get(red.group, []),
                                         len(red.children), plan.params.allele_counts)
        keys.append(sizing.ReducerKey(red.index, red.region, red.group, (red.children.start, red.children.stop),
                                      len(depths.get(red.group, [])), round(seconds, 1)))
    return keys


def reduce_plan_of(plan: Plan, contigs: Contigs, window: int) -> ReducePlan:
    return ReducePlan(list(contigs), plan.params.region_size,
                      coverage_bin_width(plan.params, reference_length(contigs)), window,
                      child_groups(plan, contigs))


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
