"""The reduce step's keys for a run of many samples, from the plan alone (no child runs).

    python bench/reduce_keys.py --samples 200 --genome-mb 5 --depth 30
    python bench/reduce_keys.py --samples 10,50,200,1000 --genome-mb 5 --depth 30 --markdown

Builds the plan of N paired samples of a genome at a depth (150 bp reads, gzip inputs of the size such reads
have, shards of the default 2 M reads) in memory, as the planner would cut it, and prints what the plan
gives the reducers (:func:`seqlake.lake.regions.reducer_keys`): each reducer's key (region, sample group, its
children, its samples) and its expected seconds (:func:`seqlake.plan.sizing.reducer_seconds`), and the
three kinds of job's sizes and timeouts (:mod:`seqlake.plan.sizing`). The row to read: the largest reducer's
expected seconds stays flat as the samples grow (the reducers multiply instead), and every timeout covers
its expected work with the margin.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from seqlake.base.params import DEFAULT_REGION_SIZE, Params
from seqlake.lake.regions import reducer_keys, regions
from seqlake.plan import sizing
from seqlake.plan.planfile import InputFile, Plan, Shard, Span

READ_LENGTH = 150
#: gzip FASTQ bytes of a 150 bp read (as sizing estimates the other way)
GZ_BYTES_PER_READ = READ_LENGTH * sizing.FASTQ_BYTES_PER_BASE / sizing.GZIP_RATIO


def synthetic_plan(samples: int, genome: int, depth: float, params: Params | None = None,
                   contigs: int = 1) -> tuple[Plan, list[tuple[str, int]]]:
    """The plan of ``samples`` paired samples at ``depth`` over a genome of ``genome`` bases (``contigs``
    equal contigs), cut into shards of ``params.reads_per_shard`` reads as the planner cuts counted inputs;
    and the reference's contigs."""
    params = params or Params()
    pairs = math.ceil(genome * depth / (2 * READ_LENGTH))
    inputs: list[InputFile] = []
    shards: list[Shard] = []
    per_shard = max(1, params.reads_per_shard // 2)
    for s in range(samples):
        name = f"s{s:05d}"
        for mate in (1, 2):
            inputs.append(InputFile(f"s3://bucket/incoming/{name}_R{mate}.fastq.gz", name, mate,
                                    int(pairs * GZ_BYTES_PER_READ), "gzip", records=pairs))
        for first in range(0, pairs, per_shard):
            n = min(per_shard, pairs - first)
            spans = tuple(Span(len(inputs) - 2 + m, m + 1, 0, first_record=first, records=n) for m in (0, 1))
            shards.append(Shard(len(shards), name, spans))
    size = genome // contigs
    return (Plan("bench", "s3://bucket", tuple(inputs), tuple(shards), params),
            [(f"contig{c + 1}", size) for c in range(contigs)])


def measure(samples: int, genome: int, depth: float, region_size: int) -> dict[str, object]:
    plan, contigs = synthetic_plan(samples, genome, depth, Params(region_size=region_size))
    keys = reducer_keys(plan, contigs)
    compute = sizing.Compute()
    reads = max(sizing.child_reads(plan, c) for c in range(plan.array_size))
    child = sizing.child_size(genome, reads, plan.params.allele_counts, compute, subject="bench")
    reducer = sizing.reducer_size(max(k.expected_s for k in keys), compute, subject="bench")
    index = sizing.index_job_size(genome, 0, compute, subject="bench", inputs_in_job=False)
    return {"samples": samples, "genome": genome, "depth": depth, "children": plan.array_size,
            "regions": len(regions(contigs, region_size)), "groups": len({k.group for k in keys}),
            "reducers": len(keys), "largest_group_samples": max(k.samples for k in keys),
            "largest_expected_s": max(k.expected_s for k in keys),
            "index": index.to_dict(), "child": child.to_dict(), "reducer": reducer.to_dict(),
            "keys": [[k.index, k.region, k.group, k.children[0], k.children[1], k.samples, k.expected_s]
                     for k in keys]}


def markdown(rows: list[dict[str, object]]) -> str:
    out = ["| samples | genome (Mb) | depth | children | regions | sample groups | reducers | largest group "
           "(samples) | largest reducer expected (s) | its timeout (s) | child expected / timeout (s) | "
           "index job vCPUs / MiB / timeout (s) |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        red, child, index = r["reducer"], r["child"], r["index"]
        assert isinstance(red, dict) and isinstance(child, dict) and isinstance(index, dict)
        out.append(f"| {r['samples']:,} | {int(str(r['genome'])) / 1e6:g} | {r['depth']}x | {r['children']:,} | "
                   f"{r['regions']:,} | {r['groups']:,} | {r['reducers']:,} | {r['largest_group_samples']} | "
                   f"{r['largest_expected_s']:,} | {red['timeout_s']:,} | {child['expected_s']:,} / "
                   f"{child['timeout_s']:,} | {index['vcpus']} / {index['memory_mib']:,} / {index['timeout_s']:,} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", default="200", help="comma-separated sample counts")
    ap.add_argument("--genome-mb", type=float, default=5.0)
    ap.add_argument("--depth", type=float, default=30.0)
    ap.add_argument("--region-size", type=int, default=DEFAULT_REGION_SIZE)
    ap.add_argument("--markdown", action="store_true", help="a table of the runs, not every key as JSON")
    args = ap.parse_args()
    rows = [measure(int(n), int(args.genome_mb * 1e6), args.depth, args.region_size)
            for n in args.samples.split(",")]
    if args.markdown:
        print(markdown(rows))
        return 0
    for r in rows:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
