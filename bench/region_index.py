"""What a reducer reads to find its region in every child's positions object, as the genome and the children grow.

    git worktree add /tmp/seqlake-before 605ed38      # the code before (the index in every child's manifest)
    python bench/region_index.py --src /tmp/seqlake-before/src --children 1000 --out bench/work/index-before.json
    python bench/region_index.py --children 1000 --out bench/work/index-after.json
    python bench/region_index.py --report bench/work/index-before.json bench/work/index-after.json

A GRCh38-like genome (:func:`reduce.contig_lengths`: 3.1 Gb, 3,366 contigs, the first 24 holding 95 %) in 5 Mb
regions and 1 Mb windows (the app's defaults), and ``--children`` children each with rows in every window of
every region (a child of a human run touches all of it): only what locates a region is written, the positions
index of each child as the code under ``--src`` keeps it (before: in the child's ``manifest.json`` with the
contigs it also holds, the QC left out; after: at the start of its ``positions.arrows``, the streams left out).
Then the reducer's own function (``reduce._positions_entries``) runs for a few regions (the first, one in the
middle, the decoys' last), each timed in CPU seconds of the process (its reading threads included), with the
GETs and bytes it reads counted at :mod:`seqlake.base.storage` (local files: no S3 latency, nothing stubbed but
the count). ``--report``: the ratios, before over after, as BENCHMARKS.md lines.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GENOME = 3_100_000_000
CONTIGS = 3_366


@dataclass(frozen=True)
class BenchPlan:
    """What ``_positions_entries`` reads of a plan (a real plan would have 1,000 shards of reads to index)."""

    run_id: str
    layout: Any
    array_size: int


def synthetic_index(positions: Any, all_regions: list[Any], window: int, start: int) -> Any:
    """A child's index with every table of every window of every region (lengths and rows of a child's
    windows at about 1x), its streams from byte ``start`` on."""
    from seqlake.lake.regions import windows
    from seqlake.lake.tables import POSITION_STAGING

    index = positions.PositionsIndex(window)
    at = start
    for region in all_regions:
        for w in windows(region, window):
            entry = {}
            for k, spec in enumerate(POSITION_STAGING):
                length, rows = 2_000 + 97 * k + w.index, 600 + 31 * k
                entry[spec.name] = positions.Extent(at, length, rows)
                at += length
            index.setdefault(region.index, {})[w.index] = entry
    return index


def write_children(plan: BenchPlan, contigs: list[tuple[str, int]], region_size: int, window: int) -> dict[str, Any]:
    """Each child's index as the code keeps it; its bytes (per child)."""
    from seqlake.lake import positions, staging
    from seqlake.lake.regions import regions

    all_regions = regions(contigs, region_size)
    before = hasattr(positions, "index_to_json")  # the index in the manifest (version 5)
    layout = None if before else positions.IndexLayout.of(all_regions, window)
    index = synthetic_index(positions, all_regions, window, 0 if layout is None else layout.size)
    sizes = []
    for child in range(plan.array_size):
        target = Path(plan.layout.manifest(child) if before else plan.layout.positions(child))
        target.parent.mkdir(parents=True, exist_ok=True)
        if before:
            data = json.dumps({"version": staging.MANIFEST_VERSION, "run_id": plan.run_id, "child": child,
                               "positions": positions.index_to_json(index), "contigs": [list(c) for c in contigs]},
                              separators=(",", ":"), sort_keys=True).encode()
        else:
            data = positions.index_bytes(index, layout, plan.run_id, child)
        target.write_bytes(data)
        sizes.append(len(data))
    return {"code": "before" if before else "after", "index_bytes_per_child": sum(sizes) // len(sizes),
            "regions": len(all_regions), "windows": sum(len(r) for r in index.values())}


def measure(plan: BenchPlan, rp: Any, region: int) -> dict[str, Any]:
    """One reducer's ``_positions_entries``: CPU seconds, GETs and bytes read."""
    from seqlake.base import storage
    from seqlake.reduce import reducer as reduce

    got: Counter[str] = Counter()
    real_range, real_bytes = storage.read_range, storage.read_bytes

    def read_range(uri: str, start: int, stop: int) -> bytes:
        data = real_range(uri, start, stop)
        got.update(gets=int(stop > start), bytes=len(data))  # an empty range is no request
        return data

    def read_bytes(uri: str) -> bytes:
        data = real_bytes(uri)
        got.update(gets=1, bytes=len(data))
        return data

    storage.read_range, storage.read_bytes = read_range, read_bytes  # type: ignore[assignment]
    try:
        cpu, wall = time.process_time(), time.perf_counter()
        if hasattr(reduce, "MANIFEST_VERSION"):  # before: (plan, region), the window from the manifests
            entries = reduce._positions_entries(plan, region)[1]
        else:
            entries = reduce._positions_entries(plan, rp, region)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        storage.read_range, storage.read_bytes = real_range, real_bytes  # type: ignore[assignment]
    assert len(entries) == plan.array_size and all(entries), "every child has rows in every region"
    return {"region": region, "windows": len(entries[0]), "gets": got["gets"], "bytes": got["bytes"],
            "cpu_seconds": round(cpu, 3), "seconds": round(wall, 3)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(args.src))
    from seqlake.base.layout import RunLayout  # first: the code under --src, whatever bench/reduce.py adds

    sys.path.insert(1, str(REPO / "bench"))
    from reduce import contig_lengths
    from seqlake.base.params import DEFAULT_REGION_SIZE, REDUCE_WINDOW
    from seqlake.lake.regions import ReducePlan, regions

    contigs = contig_lengths(GENOME, CONTIGS)
    root = Path(tempfile.mkdtemp(prefix="seqlake-index-bench-", dir=args.tmp))
    try:
        plan = BenchPlan("bench", RunLayout(str(root), "bench"), args.children)
        t0 = time.perf_counter()
        made = write_children(plan, contigs, DEFAULT_REGION_SIZE, REDUCE_WINDOW)
        setup = time.perf_counter() - t0
        # after: the reduce plan names the window (before, the reducer took it from the manifests)
        rp = None if made["code"] == "before" else ReducePlan(contigs, DEFAULT_REGION_SIZE, 5_000, REDUCE_WINDOW)
        n = len(regions(contigs, DEFAULT_REGION_SIZE))
        reducers = [measure(plan, rp, r) for r in (0, n // 2, n - 1)]
        return {
            **made, "children": args.children, "genome_bases": GENOME, "contigs": CONTIGS,
            "region_size": DEFAULT_REGION_SIZE, "window": REDUCE_WINDOW, "setup_seconds": round(setup, 1),
            "reducers": reducers, "src": str(args.src),
            "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_average": os.getloadavg()[0],
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def section(work: Path) -> list[str]:
    """BENCHMARKS.md's lines on the before and after saved in ``work`` (``index-before.json``,
    ``index-after.json``), when both are there (they follow the reduce section)."""
    saved = [work / "index-before.json", work / "index-after.json"]
    if not all(p.exists() for p in saved):
        return []
    return report(*(json.loads(p.read_text()) for p in saved))


def report(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """BENCHMARKS.md lines: per reducer, before and after, and the ratios."""
    lines = [
        "", "### What a reducer reads to find its region (`bench/region_index.py`)", "",
        f"A GRCh38-like genome ({before['genome_bases'] / 1e9:.1f} Gb, {before['contigs']:,} contigs, "
        f"{before['regions']} regions of {before['region_size'] / 1e6:g} Mb, {before['windows']:,} windows of "
        f"{before['window'] / 1e6:g} Mb), {before['children']:,} children with rows in every window; the reducer's",
        "`_positions_entries` (every child's entries of its region) timed in CPU seconds, its GETs and bytes counted",
        "at `storage` (local files). Before: the index in every child's manifest (with its contigs; QC left out);",
        "after: region r's block of the index at the start of each child's positions object. The commands are in",
        "`bench/region_index.py`'s docstring (before: 605ed38, the last commit with the index in the manifests);",
        "per child both are fixed, so bytes and CPU grow linearly with the children (1,000: five times these).", "",
        "| region (windows) | GETs before / after | bytes before | bytes after | bytes ratio | CPU s before "
        "| CPU s after | CPU ratio |", "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for b, a in zip(before["reducers"], after["reducers"], strict=True):
        lines.append(f"| {b['region']} ({b['windows']}) | {b['gets']:,} / {a['gets']:,} | {b['bytes']:,} | "
                     f"{a['bytes']:,} | **{b['bytes'] / a['bytes']:,.0f}x** | {b['cpu_seconds']} | "
                     f"{a['cpu_seconds']} | **{b['cpu_seconds'] / max(a['cpu_seconds'], 1e-3):,.0f}x** |")
    lines += ["", f"Index per child: {before['index_bytes_per_child']:,} bytes of manifest before, "
                  f"{after['index_bytes_per_child']:,} bytes at the head of the positions object after (not read "
                  "whole by anyone). Load average "
                  f"{before['load_average']:.1f} / {after['load_average']:.1f}; measured {before['measured_at']} / "
                  f"{after['measured_at']}."]
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--src", type=Path, default=REPO / "src", help="the seqlake source tree measured")
    p.add_argument("--children", type=int, default=1_000)
    p.add_argument("--tmp", default=None, help="where the objects go (default: the system's temp folder)")
    p.add_argument("--out", type=Path)
    p.add_argument("--report", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = p.parse_args()
    if args.report:
        print("\n".join(report(*(json.loads(f.read_text()) for f in args.report))))
        return 0
    if args.out is None:
        p.error("--out is needed to measure")
    result = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
