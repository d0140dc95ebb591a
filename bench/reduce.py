"""The reduce bench: peak memory and time of the commit and of the largest reducer as the genome grows.

    python bench/reduce.py --genome-mb 4 --contigs 4 --depth 30 --children 8 --out bench/work/reduce-4mb.json
    python bench/reduce.py --genome-mb 100 --contigs 5 --depth 30 --children 40 --out bench/work/reduce-100mb.json
    python bench/reduce.py --genome-mb 1500 --contigs 3366 --depth 0.03 --children 40 \\
        --out bench/work/reduce-1500mb.json

What the reducers and the commit read is the children's per-position objects and manifests, so the bench
makes those without aligning (aligning 10 M pairs takes this machine most of an hour): the children run
for real on the bundled demo reads (valid manifests, QC and all, one sample), then each child's
``positions.arrows`` is replaced by the staging tables of ``depth x genome / 300 / children`` simulated
pairs (fragments of normal(300, 50) bases, uniform over contigs drawn in proportion to their length; two
150-base mates, each one aligned block: the depth sweep, the covered intervals and the bins of the real
worker, :mod:`seqlake.lake.staging`), and its manifest's contigs and window with theirs. Then every
region's ``seqlake reduce`` runs in a process of its own under ``/usr/bin/time -v`` (wall time, peak RSS),
and so does the commit's merge (``merge_run(plan, reduce_here=False)``). Local files, no S3 latency.

Contig lengths: ``--contigs 5`` cuts the genome evenly; with many contigs, a human-like mix: the first 24
contigs hold 95 % of the genome (lengths decreasing), the rest share 5 % (decoys and unplaced scaffolds).

``--alleles``: the children's objects hold allele counts too and the reducers call variants and consensus
(the default of a run, and what a reducer's memory is about), over a simulated reference of the genome's
contigs (random bases, indexed as a run's is): at each position every simulated pair's aligned bases count
for the reference base (half on each strand, quality 35), but at every 500th base 60 % of them for another
base (a variant). One region of a chosen size at a fixed depth, the reducer's peak memory as the region
grows (issue 22: flat once the reducer works a window at a time)::

    for mb in 1 5 25; do python bench/reduce.py --genome-mb $mb --contigs 1 --region-mb $mb --depth 30 \
        --children 8 --alleles --out bench/work/reduce-window-${mb}mb.json; done
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from seqlake.base.model import Sample  # noqa: E402
from seqlake.base.params import Params, coverage_bin_width  # noqa: E402
from seqlake.child.worker import process_child  # noqa: E402
from seqlake.demo_data import paths  # noqa: E402
from seqlake.lake import positions as positions_module  # noqa: E402
from seqlake.lake.coverage import CoverageAccumulator  # noqa: E402
from seqlake.lake.depth import DepthAccumulator  # noqa: E402
from seqlake.lake.positions import dictionary_column, write_positions  # noqa: E402
from seqlake.lake.regions import Region, plan_reduce, reference_length, regions  # noqa: E402
from seqlake.lake.staging import staging_tables  # noqa: E402
from seqlake.lake.tables import ALLELE_COUNT_COLUMNS, ALLELES  # noqa: E402
from seqlake.plan.planfile import Plan  # noqa: E402
from seqlake.plan.planner import make_plan  # noqa: E402
from seqlake.plan.refindex import indexed_reference  # noqa: E402

READ = 150
#: a simulated variant every this many bases (``--alleles``)
VARIANT_EVERY = 500
_BASES = "acgt"


def synthetic_reference(path: Path, contigs: list[tuple[str, int]], seed: int) -> dict[str, np.ndarray]:
    """A FASTA of random bases over ``contigs`` (60 a line); each contig's base codes (0..3 for a, c, g, t)."""
    rng = np.random.default_rng(seed)
    codes = {}
    with path.open("w") as out:
        for name, length in contigs:
            c = rng.integers(0, 4, length).astype(np.uint8)
            codes[name] = c
            text = np.frombuffer(b"ACGT", dtype=np.uint8)[c].tobytes().decode()
            out.write(f">{name}\n")
            out.writelines(text[i:i + 60] + "\n" for i in range(0, length, 60))
    return codes


class SyntheticAlleles:
    """A child's ``alleles`` rows of simulated pairs (a :class:`seqlake.lake.positions.RegionStream`), made per
    window from its per-base depth and the reference's bases (see the module docstring)."""

    schema = ALLELES.schema

    def __init__(self, sample: str, depth: dict[str, np.ndarray], starts: dict[str, np.ndarray],
                 ends: dict[str, np.ndarray], bases: dict[str, np.ndarray]) -> None:
        self.sample, self.depth, self.starts, self.ends, self.bases = sample, depth, starts, ends, bases

    def batches(self, region: Region) -> Any:
        names = region.contigs
        index = {c.name: k for k, c in enumerate(ALLELE_COUNT_COLUMNS)}
        for k, piece in enumerate(region.pieces):
            if piece.contig not in self.depth:
                continue
            d = self.depth[piece.contig][piece.start:piece.end]
            pos = np.flatnonzero(d).astype(np.int64)
            n = len(pos)
            if not n:
                continue
            depth = d[pos].astype(np.int32)
            pos += piece.start
            ref = self.bases[piece.contig][pos]
            alt = np.where(pos % VARIANT_EVERY == 0, (ref + 1) % 4, ref)
            on_alt = np.where(alt != ref, (depth * 6) // 10, 0).astype(np.int32)
            counts = np.zeros((len(ALLELE_COUNT_COLUMNS), n), dtype=np.int32)
            for b in range(4):
                got = np.where(ref == b, depth - on_alt, 0) + np.where(alt == b, on_alt, 0)
                fwd = got // 2
                counts[index[f"{_BASES[b]}_fwd"]] = fwd
                counts[index[f"{_BASES[b]}_rev"]] = got - fwd
                counts[index[f"{_BASES[b]}_all"]] = got
                counts[index[f"{_BASES[b]}_olap"]] = got
                counts[index[f"{_BASES[b]}_qual"]] = got * 35
            counts[index["read_starts"]] = _counted(self.starts[piece.contig], pos)
            counts[index["read_ends"]] = _counted(self.ends[piece.contig] - 1, pos)
            counts[index["read_ends_olap"]] = counts[index["read_ends"]]
            cols = [dictionary_column(np.zeros(n, dtype=np.int32), [self.sample]),
                    dictionary_column(np.full(n, k, dtype=np.int32), names), pa.array(pos)]
            cols += [pa.array(counts[j]).cast(c.type) for j, c in enumerate(ALLELE_COUNT_COLUMNS)]
            yield pa.RecordBatch.from_arrays(cols, schema=ALLELES.schema)


def _counted(at: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """How many of ``at`` (sorted) equal each of ``pos``."""
    return (np.searchsorted(at, pos, side="right") - np.searchsorted(at, pos, side="left")).astype(np.int32)


def contig_lengths(genome: int, n: int) -> list[tuple[str, int]]:
    if n <= 24:
        base = genome // n
        return [(f"chr{i + 1}", base + (genome - base * n if i == 0 else 0)) for i in range(n)]
    big = np.linspace(2.0, 1.0, 24)
    big = (big / big.sum() * genome * 0.95).astype(np.int64)
    small_n = n - 24
    small = np.full(small_n, int(genome * 0.05) // small_n, dtype=np.int64)
    lengths = [*(f"chr{i + 1}" for i in range(24)), *(f"decoy{i + 1}" for i in range(small_n))]
    sizes = [*big.tolist(), *small.tolist()]
    sizes[0] += genome - sum(sizes)
    return list(zip(lengths, (int(x) for x in sizes), strict=True))


def synthetic_child(plan: Plan, child: int, contigs: list[tuple[str, int]], pairs: int, seed: int,
                    bases: dict[str, np.ndarray] | None = None) -> None:
    """Replace the child's positions object and its manifest's contigs and window with simulated ones (with
    allele counts over ``bases``, the reference's, when given)."""
    rng = np.random.default_rng(seed)
    lengths = np.array([n for _, n in contigs], dtype=np.int64)
    which = rng.choice(len(contigs), size=pairs, p=lengths / lengths.sum())
    sample = plan.shards[plan.child_shards(child).start].sample
    width = coverage_bin_width(plan.params, int(lengths.sum()))
    cov = CoverageAccumulator(contigs, width)
    depth = DepthAccumulator()
    per_base: dict[str, np.ndarray] = {}
    block_starts: dict[str, np.ndarray] = {}
    block_ends: dict[str, np.ndarray] = {}
    for k in np.unique(which):
        name, length = contigs[k]
        n = int((which == k).sum())
        frag = np.clip(rng.normal(300, 50, n).astype(np.int64), READ, min(length, 1000))
        start = (rng.random(n) * np.maximum(length - frag, 1)).astype(np.int64)
        starts = np.concatenate([start, start + frag - READ])
        ends = np.minimum(starts + READ, length)
        depth.add_blocks({name: (starts, ends)})
        cov.add_intervals(name, starts, ends)
        if bases is not None:
            steps = np.zeros(length + 1, dtype=np.int32)
            np.add.at(steps, starts, 1)
            np.add.at(steps, ends, -1)
            per_base[name] = np.cumsum(steps[:-1], dtype=np.int32)
            block_starts[name], block_ends[name] = np.sort(starts), np.sort(ends)
    tables = staging_tables({sample: cov}, {sample: depth}, [sample], contigs, width)
    streams = {"alleles": SyntheticAlleles(sample, per_base, block_starts, block_ends, bases)} if bases else {}
    target = Path(plan.layout.positions(child))
    cut: dict[str, Any] = {**_window(width)}
    if hasattr(positions_module, "IndexLayout"):  # the index in the object, for this child of this run
        cut |= {"run_id": plan.run_id, "child": child}
    index = write_positions(target, tables, contigs, regions(contigs, plan.params.region_size), streams, **cut)
    manifest_path = Path(plan.layout.manifest(child))
    m = json.loads(manifest_path.read_text())
    m["contigs"] = [list(c) for c in contigs]
    if hasattr(positions_module, "index_to_json"):  # before manifest version 6: the index in the manifest
        m["positions"] = positions_module.index_to_json(index)
    else:
        m["positions_window"] = index.window
    manifest_path.write_text(json.dumps(m))


def _window(width: int) -> dict[str, int]:
    """The window the children cut their objects at (as the worker does), for a positions object that has them
    (the same bench measures the code before windows: then nothing)."""
    try:
        from seqlake.lake.regions import window_size
    except ImportError:
        return {}
    return {"window": window_size(width)}


def timed(cmd: list[str]) -> dict[str, float]:
    out = subprocess.run(["/usr/bin/time", "-v", *cmd], check=False, capture_output=True, text=True, env={
        **os.environ, "PYTHONPATH": str(REPO / "src")})
    if out.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    wall = next(line.split()[-1] for line in out.stderr.splitlines() if "Elapsed (wall clock)" in line)
    minutes, _, seconds = wall.rpartition(":")
    rss = next(int(line.split()[-1]) for line in out.stderr.splitlines() if "Maximum resident set size" in line)
    cpu = sum(float(line.split()[-1]) for line in out.stderr.splitlines()
              if "User time (seconds)" in line or "System time (seconds)" in line)
    # CPU seconds as well as wall: on a loaded machine the wall time is mostly waiting for a core
    return {"seconds": round(float(minutes or 0) * 60 + float(seconds), 2), "cpu_seconds": round(cpu, 2),
            "peak_rss_mb": round(rss / 1024, 1)}


def _commit() -> str:
    out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], check=False, capture_output=True,
                         text=True)
    return out.stdout.strip() or "unknown commit"


COMMIT = ("import sys; from seqlake.commit.merge import merge_run; from seqlake.plan.planfile import load_plan; "
          "merge_run(load_plan(sys.argv[1]), reduce_here=False)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    genome = int(args.genome_mb * 1_000_000)
    contigs = contig_lengths(genome, args.contigs)
    pairs = int(args.depth * genome / (2 * READ))
    r1, r2, reference = paths()
    root = Path(tempfile.mkdtemp(prefix="seqlake-reduce-bench-", dir=args.tmp))
    try:
        # without --alleles the simulated objects hold depth and coverage only, over contigs the demo reference
        # (whose bases the variants' finisher would read) does not have; with it, over a simulated reference
        bases = None
        if args.alleles:
            reference = root / "reference.fa"
            bases = synthetic_reference(reference, contigs, seed=99)
        params = Params(trim=False, region_size=int(args.region_mb * 1_000_000),
                        reads_per_shard=20_000 // args.children, allele_counts=args.alleles)
        plan = make_plan("bench", [Sample("s", str(r1), str(r2))], out_prefix=str(root),
                         reference=indexed_reference(str(reference), store=str(root / "refs")), params=params,
                         shards=args.children)
        t0 = time.perf_counter()
        for child in range(plan.array_size):
            process_child(plan, child)
            synthetic_child(plan, child, contigs, pairs // plan.array_size, seed=child, bases=bases)
        setup = time.perf_counter() - t0
        rp = plan_reduce(plan)
        assert rp is not None
        reducers = []
        for region in range(len(rp.regions)):
            r = timed([sys.executable, "-m", "seqlake", "reduce", "--plan", plan.plan_uri, "--region", str(region)])
            reducers.append({"region": region, "bases": rp.regions[region].bases, **r})
        commit = timed([sys.executable, "-c", COMMIT, plan.plan_uri])
        staged = sum(Path(plan.layout.positions(c)).stat().st_size for c in range(plan.array_size))
        largest = max(reducers, key=lambda r: r["peak_rss_mb"])
        return {
            "genome_bases": reference_length(contigs), "contigs": len(contigs), "depth": args.depth, "pairs": pairs,
            "children": plan.array_size, "region_size": params.region_size, "regions": len(rp.regions),
            "alleles": args.alleles, "window": _window(rp.bin_width).get("window"),
            "coverage_bin": rp.bin_width, "positions_bytes": staged, "setup_seconds": round(setup, 1),
            "largest_reducer": largest, "slowest_reducer": max(reducers, key=lambda r: r["seconds"]),
            "reducer_seconds_total": round(sum(r["seconds"] for r in reducers), 1),
            "reducer_cpu_seconds_total": round(sum(r.get("cpu_seconds", 0.0) for r in reducers), 1), "commit": commit,
            "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()) + ", " + _commit(),
            "load_average": os.getloadavg()[0],
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


#: the commit's peak memory may grow at most this much from the smallest genome to the largest (the issue's bar)
COMMIT_FLAT_RATIO = 1.25


#: a reducer's peak memory may grow at most this much from the smallest region to the largest at one depth
#: (issue 22: the reducer works a window at a time)
REDUCER_FLAT_RATIO = 1.2


def window_section(results: list[dict[str, Any]]) -> list[str]:
    """The runs with allele counts (``--alleles``): one region growing at a fixed depth, the reducer's peak."""
    if not results:
        return []
    lines = [
        "", "### A reducer as its region grows, variants called (`bench/reduce.py --alleles`)", "",
        "One contig of one region, simulated allele counts (a variant every 500 bases) besides depth and coverage,",
        "so the reducer calls variants and consensus as a run's does; its peak RSS and CPU under `/usr/bin/time -v`.",
        "", "| region | window | depth | children | staged (MB) | reducer peak RSS (MB) | reducer CPU (s) "
        "| reducer (s) | load | measured |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in sorted(results, key=lambda r: (r["region_size"], r.get("window") or 0)):
        big = r["largest_reducer"]
        window = f"{r['window'] / 1e3:,.0f} kb" if r.get("window") else "the region"
        lines.append("| " + " | ".join([
            f"{r['region_size'] / 1e6:g} Mb", window, f"{r['depth']}x", str(r["children"]),
            f"{r['positions_bytes'] / 1e6:,.0f}", f"{big['peak_rss_mb']:,}", str(big["cpu_seconds"]),
            str(big["seconds"]), f"{r['load_average']:.1f}", r["measured_at"]]) + " |")
    same = [r for r in results if r.get("window") == max(x.get("window") or 0 for x in results)]
    if len(same) > 1:
        small = min(same, key=lambda r: r["region_size"])
        large = max(same, key=lambda r: r["region_size"])
        ratio = large["largest_reducer"]["peak_rss_mb"] / small["largest_reducer"]["peak_rss_mb"]
        met = "met" if ratio <= REDUCER_FLAT_RATIO else "**not met**"
        lines += ["", f"Reducer peak RSS, {large['region_size'] / 1e6:g} Mb vs {small['region_size'] / 1e6:g} Mb "
                      f"region: **{ratio:.2f}x** (target <= {REDUCER_FLAT_RATIO}x: {met})."]
    return lines


def section(work: Path) -> list[str]:
    """BENCHMARKS.md's section on the reduce runs saved in ``work`` (``reduce-*.json``), with the issue's bar."""
    every = [json.loads(p.read_text()) for p in work.glob("reduce-*.json")]
    results = sorted((r for r in every if not r.get("alleles")), key=lambda r: r["genome_bases"])
    if not results:
        return window_section([r for r in every if r.get("alleles")])
    lines = [
        "", "## The reduce step and the commit as the genome grows (`bench/reduce.py`)", "",
        "Children's per-position objects simulated at the given size and depth (the children's own work is not",
        "measured here: see the rows above), then every region's `seqlake reduce` and the commit's merge, each in a",
        "process of its own under `/usr/bin/time -v`; local files, no S3 latency. The largest reducer is the one",
        "with the highest peak RSS. Before this design the commit alone held every sample's whole genome: 409 MB at",
        "4 Mb, 4,234 MB at 100 Mb (over the 3,008 MB Lambda), a MemoryError at 1.2 Gb (issue 22's table).", "",
        "| genome | contigs | depth | pairs | children | regions (size) | bin | staged (MB) | largest reducer: bases "
        "| its peak RSS (MB) | its time (s) | all reducers (s) | all reducers' CPU (s) | commit peak RSS (MB) "
        "| commit (s) | load | measured |",
        "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        big, c = r["largest_reducer"], r["commit"]
        cells = [f"{r['genome_bases'] / 1e6:,.0f} Mb", f"{r['contigs']:,}", f"{r['depth']}x", f"{r['pairs']:,}",
                 str(r["children"]), f"{r['regions']} ({r['region_size'] / 1e6:g} Mb)", f"{r['coverage_bin']:,}",
                 f"{r['positions_bytes'] / 1e6:,.0f}", f"{big['bases'] / 1e6:,.1f} Mb", f"{big['peak_rss_mb']:,}",
                 str(big["seconds"]), str(r["reducer_seconds_total"]), str(r.get("reducer_cpu_seconds_total", "")),
                 str(c["peak_rss_mb"]), str(c["seconds"]),
                 f"{r['load_average']:.1f}", r["measured_at"]]
        lines.append("| " + " | ".join(cells) + " |")
    # the reducer's bar: at one window size, depth and number of children, flat in the genome's size
    same: dict[tuple[float, float, int], list[dict[str, Any]]] = {}
    for r in results:
        same.setdefault((round(r["largest_reducer"]["bases"], -5), r["depth"], r["children"]), []).append(r)
    for (bases, depth, children), rs in same.items():
        if len(rs) > 1:
            small, large = rs[0], rs[-1]
            ratio = large["largest_reducer"]["peak_rss_mb"] / small["largest_reducer"]["peak_rss_mb"]
            lines += ["", f"Largest reducer's peak RSS at a {bases / 1e6:g} Mb window, {depth}x, {children} children: "
                          f"**{ratio:.2f}x** from the {small['genome_bases'] / 1e6:,.0f} Mb to the "
                          f"{large['genome_bases'] / 1e6:,.0f} Mb genome (flat in the genome's size)."]
    commits = [r["commit"]["peak_rss_mb"] for r in results]
    if len(results) > 1:
        ratio = max(commits) / min(commits)
        met = "met" if ratio <= COMMIT_FLAT_RATIO else "**not met**"
        lines += ["", f"Commit peak RSS, largest vs smallest genome: **{ratio:.2f}x** (target <= {COMMIT_FLAT_RATIO}x: "
                      f"{met})."]
    return lines + window_section([r for r in every if r.get("alleles")])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--genome-mb", type=float, required=True)
    p.add_argument("--contigs", type=int, default=5)
    p.add_argument("--depth", type=float, default=30.0)
    p.add_argument("--children", type=int, default=8)
    p.add_argument("--region-mb", type=float, default=25)
    p.add_argument("--alleles", action="store_true", help="allele counts in the objects, variants called")
    p.add_argument("--window-kb", type=float, default=None,
                   help="the reducers' window (REDUCE_WINDOW) the children cut their objects at (default: the app's)")
    p.add_argument("--tmp", default=None, help="where the run's objects go (default: the system's temp folder)")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    if args.window_kb is not None:  # the children's cut: the reducers read it from the manifests
        from seqlake.base import params
        params.REDUCE_WINDOW = int(args.window_kb * 1_000)  # type: ignore[misc]
    result = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
