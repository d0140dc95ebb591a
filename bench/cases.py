"""What the bench compares with what: each group's rows and the ratios drawn from them.

The single-file and paired-end groups are pure declarations (:class:`harness.Group`): a tool's command
beside the seqlake path that does the same work, and the comparisons between them. The other three
groups need a little procedure (interleaved repeats, inputs of two sizes, shards planned then merged),
written with the same harness calls. :data:`GROUPS` lists them in report order; ``--only`` names them.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pyarrow as pa

from harness import (
    MB,
    Command,
    Compare,
    Ctx,
    Group,
    Input,
    Inputs,
    Ratio,
    Row,
    WorkerPath,
    fastest,
    fresh,
    json_out,
    measure,
    measure_interleaved,
    measure_worker,
    paths,
    run_group,
    seqlake,
    speed_ratio,
)

SINGLE_FILE = Group(
    "One file (R1): decompression, QC, indexing",
    mates=1,
    rows=(
        Command("gzip", "gzip -dc", ("gzip", "-dc", "{r1}"), shown="gzip -dc {r1_name} > /dev/null", needs="gzip",
                to_devnull=True),
        Command("seqkit", "seqkit stats -a (1 thread)", ("seqkit", "stats", "-a", "-j", "1", "{r1}"), needs="seqkit"),
        Command("qc", "seqlake QC library (vectorised QC over chunks)", ("qc", "{r1}"), seqlake_path=True),
        WorkerPath("worker_qc", "seqlake worker, QC-only path (no trim, no reference)", paired=False, trim=False,
                   align=False),
        Command("index", "seqlake gzip index pass (records, checkpoints, seek index)", ("index", "{r1}"),
                seqlake_path=True),
        Command("index2", "seqlake gzip index pass, a job of 2 vCPUs (2 cores)", ("index", "{r1}"),
                seqlake_path=True, threads=2),
        # the same reads as BGZF: their planning pass counts records in the blocks, no seek index
        Command("bgzf_count", "seqlake BGZF counting pass (records, checkpoints; no index)",
                ("bgzf-count", "{r1_bgzf}"), seqlake_path=True, needs="bgzip", threads=1),
        Command("bgzf_count2", "seqlake BGZF counting pass, a job of 2 vCPUs (2 cores)",
                ("bgzf-count", "{r1_bgzf}"), seqlake_path=True, needs="bgzip", threads=2),
    ),
    compare=(
        Compare("QC library vs `seqkit stats -a -j 1`", "qc", "seqkit", 1.5, "same gzip file, reads/s"),
        Compare("QC-only worker vs `seqkit stats -a -j 1`", "worker_qc", "seqkit", 1.0,
                "the whole child (start, read the shard, QC, Parquet, exit)"),
        Compare("gzip index pass vs `gzip -dc`, one core", "index", "gzip", 2.5, "same gzip file"),
        Compare("index pass on 2 cores vs 1", "index2", "index", 1.6, "same gzip file, SEQLAKE_THREADS=2"),
        Compare("BGZF counting pass on 2 cores vs 1", "bgzf_count2", "bgzf_count", 1.6,
                "the same reads as BGZF (bgzip -l 6)"),
        Compare("BGZF counting pass vs gzip index pass, one core", "bgzf_count", "index", None,
                "the planning pass of a BGZF input against that of the same reads in gzip"),
    ),
)

PAIRED = Group(
    "Paired-end (R1 + R2): trimming and alignment",
    mates=2,
    rows=(
        # no -o/-O: fastp then trims and filters without writing reads, like the worker
        Command("fastp", "fastp, QC + trim, paired (1 thread)",
                ("fastp", "-w", "1", "-i", "{r1}", "-I", "{r2}", "-j", "{logs}/fastp.json", "-h", "{logs}/fastp.html"),
                shown="fastp -w 1 -i R1 -I R2", needs="fastp"),
        WorkerPath("worker_trim", "seqlake worker, QC + trim path (no reference)", paired=True, trim=True,
                   align=False),
        Command("minimap2", "minimap2 -ax sr, paired (1 thread)", ("minimap2", "-ax", "sr", "-t", "1", "{ref}", "{r1}",
                                                                   "{r2}"),
                shown="minimap2 -ax sr -t 1 REF R1 R2 > /dev/null", needs="minimap2", to_devnull=True),
        WorkerPath("worker_align", "seqlake worker, QC + align path (--no-trim)", paired=True, trim=False, align=True),
        WorkerPath("worker_full", "seqlake worker, full path (QC + trim + align + Parquet)", paired=True, trim=True,
                   align=True),
        Command("plan", "seqlake planning pass, paired ({plan_shards} shards: both files indexed)",
                ("plan", "{out}", "{r1}", "{r2}", "--reference", "{ref}", "--shards", "{plan_shards}"),
                shown="bench/paths.py plan OUT R1 R2 --shards {plan_shards}", seqlake_path=True),
    ),
    compare=(
        Compare("QC + trim worker vs `fastp -w 1`", "worker_trim", "fastp", None, "paired, reads/s"),
        Compare("QC + align worker vs `minimap2 -ax sr -t 1`", "worker_align", "minimap2", 0.95, "paired, reads/s"),
        Compare("full worker vs `minimap2 -ax sr -t 1`", "worker_full", "minimap2", 0.95, "paired, reads/s"),
    ),
)

# ------------------------------------------------------------------ end to end: the core alone vs the local cloud
END_TO_END = "End to end: the core alone vs the local cloud (same input, same machine)"
PROCESS = Command(
    "process", "seqlake process (plan + shards + merge)",
    ("{python}", "-m", "seqlake", "process", "{r1}", "{r2}", "--reference", "{ref}", "--out", "{out}",
     "--jobs", "{jobs}"),
    shown="seqlake process R1 R2 --reference REF --out DIR --jobs {jobs}")
LOCAL_RUN = Command(
    "local", "seqlake local run (S3, EventBridge, Step Functions, Batch, Glue: local)",
    # a fresh state folder for each run: the same input in the same folder would be "already processed"
    ("{python}", "-m", "seqlake", "local", "run", "{r1}", "{r2}", "--reference", "{ref}", "--jobs", "{jobs}",
     "--home", "{out}"),
    shown="seqlake local run R1 R2 --reference REF --jobs {jobs}")
#: (key suffix, --jobs, pinned to one core, how the report says it). On one core the local cloud's own work
#: competes with the shards, so the overhead there is its whole cost; both cores with --jobs 2 is how
#: `seqlake local run` is used on a small machine.
E2E_SETTINGS = (("", 1, True, "one core"), ("-2", 2, False, "both cores"))
OVERHEAD_TARGET_PCT = 20
#: what a new user runs first must end within a minute: the bundled data, the default 2 jobs, both cores
DEMO_TARGET_S = 60


def end_to_end(ctx: Ctx, inputs: Inputs) -> None:
    inp, size = inputs.main, inputs.main.plain_total
    print(END_TO_END)
    reps = 1 if ctx.quick else 3
    # --quick checks the harness: one setting runs the same code as two (each a local cloud: ~20 s)
    for suffix, jobs, pinned, where in E2E_SETTINGS[-1:] if ctx.quick else E2E_SETTINGS:
        rows = measure_interleaved(ctx, END_TO_END, (PROCESS, LOCAL_RUN), inp, reps=reps, pin=pinned, where=where,
                                   key_suffix=suffix, jobs=jobs)
        local, process = fastest(rows["local"]), fastest(rows["process"])
        value = (local / process - 1) * 100 if local and process else None
        local_cpu, process_cpu = fastest(rows["local"], cpu=True), fastest(rows["process"], cpu=True)
        cpu_value = (local_cpu / process_cpu - 1) * 100 if local_cpu and process_cpu else None
        ctx.ratios.append(Ratio(
            f"local cloud overhead over `seqlake process`, {where} ({size / MB:,.0f} MB)", value, "%",
            f"< {OVERHEAD_TARGET_PCT} %", None if value is None else value < OVERHEAD_TARGET_PCT,
            f"wall time, same input, --jobs {jobs}, fastest of {reps} interleaved runs each"))
        ctx.ratios.append(Ratio(
            f"local cloud CPU overhead, {where} ({size / MB:,.0f} MB)", cpu_value, "%", "-", None,
            "CPU seconds of the whole process tree (less moved by other jobs than wall time)"))
    if ctx.quick:
        return
    from seqlake.demo_data import DEMO_PAIRS

    label = f"seqlake demo (bundled {DEMO_PAIRS:,} simulated pairs, --jobs 2, both cores)"
    home = fresh(ctx.work / "out" / "demo")
    demo = measure(ctx, "demo", END_TO_END, label, seqlake("demo", "--home", str(home)), reads=2 * DEMO_PAIRS,
                   plain_bytes=None, shown="seqlake demo", repeat=False, pin=False)
    ctx.ratios.append(Ratio("`seqlake demo` wall time", demo.seconds, "s", f"< {DEMO_TARGET_S} s",
                            None if demo.seconds is None else demo.seconds < DEMO_TARGET_S,
                            "bundled data, local cloud, 2 cores"))


# ------------------------------------------------------------------ memory: a child's peak as its input grows
#: a peak memory that must not grow with its input: a Batch child's memory is fixed in its job definition
FLAT_MEMORY = 1.25
#: a child's peak RSS on 10x the input, at most (issue 13)
CHILD_FLAT_MEMORY = 1.15


def memory(ctx: Ctx, inputs: Inputs) -> None:
    copies = inputs.main.copies
    small, big = (inputs.sized(copies // 10), inputs.main) if copies >= 10 else (inputs.sized(1), inputs.sized(10))
    g = f"Child memory as the input grows {big.copies // small.copies}x (full worker, one shard)"
    print(g)
    for key, inp in (("mem_small", small), ("mem_big", big)):
        label = f"full worker on {inp.plain_total / MB:,.0f} MB ({2 * inp.reads_per_mate:,} reads)"
        done = ctx.results.get("worker_full")
        if key == "mem_big" and done is not None and done.ok and done.reads == 2 * inp.reads_per_mate:
            # the paired group already ran the full worker on this input: the same measurement
            ctx.add(key, replace(done, group=g, label=label, note="the full-worker row of the paired-end group"))
            continue
        measure_worker(ctx, key, g, label, inp, paired=True, trim=True, align=True)
    a, b = ctx.results["mem_big"], ctx.results["mem_small"]
    value = a.peak_mb / b.peak_mb if a.peak_mb and b.peak_mb else None
    ctx.ratios.append(Ratio(f"child peak RSS, {big.copies // small.copies}x the input", value, "x mem",
                            f"flat (<= {CHILD_FLAT_MEMORY}x)", None if value is None else value <= CHILD_FLAT_MEMORY,
                            "peak RSS big / small"))


# ------------------------------------------------------------------ a child: its fixed cost, its threads
CHILD = "A child: its fixed cost, and its vCPUs (full worker, paired)"
#: a small shard: the child's fixed cost (start, imports, plan, index, Parquet writers, exit) is most of it
SMALL_SHARD_READS = 1000
CHILD_FIXED_TARGET_S = 0.5
#: a child with 2 vCPUs (2 alignment processes sharing one index in memory) against one with 1
THREADS_TARGET = 1.7


def child(ctx: Ctx, inputs: Inputs) -> None:
    print(CHILD)
    small = inputs.head(SMALL_SHARD_READS)
    n = small.reads_per_mate
    row = measure_worker(ctx, "child_small", CHILD, f"full worker on a shard of {n:,} pairs (start to exit)",
                         small, paired=True, trim=True, align=True)
    ctx.ratios.append(Ratio(f"child on a shard of {n:,} pairs ({2 * n:,} reads), start to exit", row.seconds, "s",
                            f"< {CHILD_FIXED_TARGET_S} s", None if row.seconds is None else
                            row.seconds < CHILD_FIXED_TARGET_S, "wall time, one core"))
    for threads in (1, 2):
        measure_worker(ctx, f"child_t{threads}", CHILD, f"full worker, a job of {threads} vCPU(s), not pinned",
                       inputs.main, paired=True, trim=True, align=True, threads=threads, tree_memory=True)
    speed_ratio(ctx, "child with 2 vCPUs vs 1 (alignment processes)", "child_t2", "child_t1", THREADS_TARGET,
                "paired, reads/s, both cores free")
    same = same_parts(ctx, "child_t1", "child_t2")
    ratio = ctx.ratios[-1]
    ratio.how += {None: "; tables not compared", True: "; identical tables", False: "; **tables differ**"}[same]
    ratio.target += " with identical tables"
    ratio.met = ratio.met and same
    one, two = ctx.results["child_t1"], ctx.results["child_t2"]
    for r in (one, two):
        if r.tree_pss_mb:
            r.note = ", ".join(filter(None, [r.note, f"peak PSS of its processes {r.tree_pss_mb:.0f} MB"]))
    if one.tree_pss_mb and two.tree_pss_mb:
        ratio.how += f"; memory {two.tree_pss_mb - one.tree_pss_mb:+.0f} MB (PSS: the index counted once)"


def same_parts(ctx: Ctx, a: str, b: str) -> bool | None:
    """Did two one-shard worker rows write the same tables? Every Parquet part the child staged, compared
    as Arrow tables (the run id aside: each row planned a run of its own); None when either is missing."""
    import pyarrow.parquet as pq

    staged = []
    for key in (a, b):
        row = ctx.results.get(key)
        plan_uri = json_out(ctx, f"{key}_plan").get("plan_uri") if row and row.ok else None
        if plan_uri is None:
            return None
        folder = Path(plan_uri).parent / "staging"
        staged.append({p.relative_to(folder): p for p in folder.rglob("*.parquet")})
    if not staged[0] or staged[0].keys() != staged[1].keys():
        return None if not staged[0] else False

    def table(path: Path) -> pa.Table:
        t = pq.read_table(path)
        return t.drop_columns([c for c in ("run_id",) if c in t.column_names])

    return all(table(staged[0][k]).equals(table(staged[1][k])) for k in staged[0])


# ------------------------------------------------------------------ many shards: planning and merging
SHARDS = "Many tiny shards: planning and merging"
#: a merge's time per shard may grow this much from 1,000 to 10,000 shards, at most
MERGE_PER_SHARD = 1.25


def many_shards(ctx: Ctx, inputs: Inputs, counts: tuple[int, ...]) -> None:
    inp = inputs.sized(2)
    print(SHARDS + f" ({inp.reads_per_mate:,} pairs)")
    for k in counts:
        plan_and_merge(ctx, inp, k)
    lo, hi = (ctx.results.get(f"merge{k}") for k in (min(counts), max(counts)))
    value = hi.peak_mb / lo.peak_mb if lo and hi and lo.peak_mb and hi.peak_mb else None
    ctx.ratios.append(Ratio(f"merge peak RSS, {max(counts):,} vs {min(counts):,} shards", value, "x mem",
                            f"flat (< {FLAT_MEMORY}x)", None if value is None else value < FLAT_MEMORY, "peak RSS"))
    per_lo, per_hi = (r.seconds / k if r and r.seconds else None for r, k in ((lo, min(counts)), (hi, max(counts))))
    per = per_hi / per_lo if per_hi and per_lo else None
    ctx.ratios.append(Ratio(f"merge time per shard, {max(counts):,} vs {min(counts):,} shards", per, "x",
                            f"<= {MERGE_PER_SHARD}x", None if per is None else per <= MERGE_PER_SHARD,
                            "wall time / shards"))


def plan_and_merge(ctx: Ctx, inp: Input, k: int) -> None:
    """Plan ``k`` shards (timed), run them on every CPU (setup, not a claim), merge them (timed)."""
    r1, r2, ref = str(inp.r1), str(inp.r2), str(ctx.reference)
    out = fresh(ctx.work / "out" / f"shards{k}")
    row = measure(ctx, f"plan{k}", SHARDS, f"plan {k:,} shards",
                  paths("plan", str(out), r1, r2, "--reference", ref, "--shards", str(k)),
                  reads=2 * inp.reads_per_mate, plain_bytes=inp.plain_total,
                  shown=f"bench/paths.py plan OUT R1 R2 --shards {k}")
    if not row.ok:
        return
    plan_uri = json_out(ctx, f"plan{k}")["plan_uri"]
    jobs = os.cpu_count() or 1
    row = measure(ctx, f"run{k}", SHARDS, f"run {k:,} shards (setup for the merge: {jobs} processes, not pinned)",
                  paths("shards", plan_uri, "--jobs", str(jobs)), reads=None, plain_bytes=None,
                  shown=f"bench/paths.py shards PLAN --jobs {jobs}", repeat=False, pin=False)
    if not row.ok:
        return
    row.note = per_shard_note(row, k)
    row = measure(ctx, f"merge{k}", SHARDS, f"merge {k:,} shards", paths("merge", plan_uri), reads=None,
                  plain_bytes=None, shown="bench/paths.py merge PLAN")
    if row.ok:
        row.note = per_shard_note(row, k)


def per_shard_note(row: Row, shards: int) -> str:
    assert row.seconds is not None
    return ", ".join(filter(None, [row.note, f"{row.seconds / shards * 1000:.1f} ms per shard"]))


# ------------------------------------------------------------------ long reads: memory by bytes, the long-read preset
LONG_READS = "Long reads: one 1 Mb read among short reads, and a Nanopore-like library (map-ont)"
#: a child's peak RSS on short reads with one 1 Mb read among them, against without it, at most (issue 25)
LONG_READ_MEMORY = 1.25
LONG_READ = 1_000_000
#: simulated Nanopore-like reads (0.5-100 kb, seqlake.demo_data.simulate_long) of a random genome
NANOPORE_READS, NANOPORE_GENOME = 1000, 2_000_000
#: with --quick
QUICK_SHORT_READS, QUICK_NANOPORE_READS = 2000, 20


def _plain_input(path: Path) -> Input:
    data = path.read_bytes()
    return Input(path, path, 1, data.count(b"\n") // 4, len(data), 0)


def long_read_inputs(ctx: Ctx) -> tuple[Input, Input, Input, Path]:
    """The demo's 150 bp R1 (10 copies; its first 2,000 reads with --quick), the same with one random 1 Mb read
    in the middle, and simulated Nanopore reads with their genome (built once, cached)."""
    import gzip

    import numpy as np

    from seqlake import demo_data
    from seqlake.demo_data import simulate_long

    folder = ctx.work / "longreads"
    folder.mkdir(parents=True, exist_ok=True)
    size = "quick" if ctx.quick else "x10"
    short, mixed = folder / f"short150-{size}.fastq", folder / f"short150-{size}-1mb.fastq"
    if not mixed.exists():
        data = gzip.decompress(demo_data.paths()[0].read_bytes())
        data = b"\n".join(data.split(b"\n")[: 4 * QUICK_SHORT_READS]) + b"\n" if ctx.quick else data * 10
        lines = data.split(b"\n")
        half = b"\n".join(lines[: len(lines) // 8 * 4]) + b"\n"
        rng = np.random.default_rng(25)
        bases = np.frombuffer(b"ACGT", dtype=np.uint8)[rng.integers(0, 4, LONG_READ)].tobytes()
        quals = (rng.integers(5, 41, LONG_READ) + 33).astype(np.uint8).tobytes()
        short.write_bytes(data)
        mixed.write_bytes(half + b"@one_1Mb_read\n" + bases + b"\n+\n" + quals + b"\n" + data[len(half):])
    n = QUICK_NANOPORE_READS if ctx.quick else NANOPORE_READS
    genome, nanopore = folder / "genome.fa", folder / f"nanopore-{n}.fastq"
    if not nanopore.exists():
        ref = simulate_long.random_genome(NANOPORE_GENOME, seed=25)
        simulate_long.write_fasta(ref, genome)
        nanopore.write_bytes(b"".join(simulate_long.simulate(ref, n, seed=25)))
    return _plain_input(short), _plain_input(mixed), _plain_input(nanopore), genome


def long_reads(ctx: Ctx, inputs: Inputs) -> None:
    print(LONG_READS)
    short, mixed, nanopore, genome = long_read_inputs(ctx)
    rows = []
    for key, inp, what in (("lr_short", short, "150 bp reads"), ("lr_1mb", mixed, "the same + one 1 Mb read")):
        rows.append(measure_worker(ctx, key, LONG_READS, f"full worker, single-end, {what} ({inp.reads_per_mate:,})",
                                   inp, paired=False, trim=True, align=True))
    without, with_long = rows
    value = with_long.peak_mb / without.peak_mb if with_long.peak_mb and without.peak_mb else None
    ctx.ratios.append(Ratio("child peak RSS with one 1 Mb read among 150 bp reads", value, "x mem",
                            f"<= {LONG_READ_MEMORY}x", None if value is None else value <= LONG_READ_MEMORY,
                            "peak RSS with / without"))
    row = measure_worker(ctx, "lr_nanopore", LONG_READS,
                         f"full worker, {nanopore.reads_per_mate:,} Nanopore-like reads (0.5-100 kb), --preset map-ont",
                         nanopore, paired=False, trim=True, align=True, reference=genome,
                         run_parameters=("--preset", "map-ont", "--quality-cutoff", "10"))
    plan_uri = json_out(ctx, "lr_nanopore_plan").get("plan_uri") if row.ok else None
    if plan_uri:
        from seqlake.base.layout import RunLayout
        from seqlake.lake.staging import ChildManifest

        shard = ChildManifest.from_json(Path(RunLayout.of_plan(plan_uri).manifest(0)).read_bytes()).shards[0]
        mapped, reads = shard.align[1].mapped_reads if shard.align else 0, shard.qc[(1, "trimmed")].reads
        row.note = ", ".join(filter(None, [row.note, f"{mapped:,} of {reads:,} trimmed reads mapped"]))
# ------------------------------------------------------------------ allele counts and variants (issue 23)
VARIANTS = "Allele counts and variants: the counting's cost, and seqlake vs samtools | ivar"
#: bench/variants.py measures both comparisons in CPU seconds, best of its repeats; its rows come from its JSON
VARIANTS_SCRIPT = Path(__file__).resolve().parent / "variants.py"


def variants(ctx: Ctx, inputs: Inputs) -> None:
    print(VARIANTS)
    inp = inputs.sized(1)
    out = ctx.work / "variants.json"
    out.unlink(missing_ok=True)
    repeat = 1 if ctx.quick else ctx.repeat
    child_repeat = 2 if ctx.quick else 7
    row = measure(ctx, "variants_script", VARIANTS, "bench/variants.py (all of the rows below, wall time)",
                  [sys.executable, str(VARIANTS_SCRIPT), str(inp.r1), str(inp.r2), str(ctx.reference), "--repeat",
                   str(repeat), "--child-repeat", str(child_repeat), "--json", str(out)],
                  reads=2 * inp.reads_per_mate, plain_bytes=None, needs="ivar",
                  shown=f"python bench/variants.py R1 R2 REF --repeat {repeat} --child-repeat {child_repeat}",
                  repeat=False, pin=False)
    if not row.ok or not out.exists():
        return
    cpu = json.loads(out.read_text())
    how = f"CPU seconds, best of {repeat}"
    child_how = f"CPU seconds, best of {child_repeat} interleaved runs"
    for key, label, note in (
            ("child_without", "child without allele counts (full worker, one shard)", child_how),
            ("child_with", "child with allele counts (full worker, one shard)", child_how),
            ("reducer_without", "the region's reducer without allele counts", how),
            ("reducer_with", "the region's reducer with allele counts (counted from the children's records)", how),
            ("counting", "allele counting: the reducer's and the child's differences", how),
            ("ours", "seqlake: counting + calling from aligned reads", how),
            ("theirs", "samtools sort, mpileup, ivar variants (same aligned reads)", how)):
        ctx.add(f"variants_{key}", Row(VARIANTS, label, "bench/variants.py", seconds=cpu[key], peak_mb=row.peak_mb,
                                       reads=2 * inp.reads_per_mate, note=note, cpu_seconds=cpu[key]))
    share = cpu["counting_share"]
    ctx.ratios.append(Ratio("counting adds this share of the child's and reducer's CPU", 100 * share, "%",
                            f"<= {100 * cpu['counting_target']:.0f} %", share <= cpu["counting_target"],
                            "the reducer with allele counts less the reducer without, plus the same difference "
                            "of the child (floored at 0), over child + reducer with counts"))
    speed = cpu["theirs"] / cpu["ours"] if cpu["ours"] else None
    ctx.ratios.append(Ratio("seqlake variants vs samtools sort | mpileup | ivar variants", speed, "x",
                            f">= {cpu['path_target']:.0f}x", None if speed is None else speed >= cpu["path_target"],
                            how))


# ------------------------------------------------------------------ the per-sample BAM (issue 35)
BAM = "The per-sample BAM: seqlake's child + reducers + join vs minimap2 | samtools sort + index"
#: bench/bam.py measures its rows in CPU seconds, best of its repeats, interleaved; its rows come from its JSON
BAM_SCRIPT = Path(__file__).resolve().parent / "bam.py"
#: the MiSeq pair replicated (each replica's read names its own), as the issue's earlier BAM rows measured it
BAM_COPIES = 10


def bam_rows(ctx: Ctx, inputs: Inputs) -> None:
    print(BAM)
    inp = inputs.sized(1 if ctx.quick else BAM_COPIES)
    out = ctx.work / "bam.json"
    out.unlink(missing_ok=True)
    repeat = 1 if ctx.quick else ctx.repeat
    row = measure(ctx, "bam_script", BAM, "bench/bam.py (all of the rows below, wall time)",
                  [sys.executable, str(BAM_SCRIPT), str(inp.r1), str(inp.r2), str(ctx.reference), "--repeat",
                   str(repeat), "--json", str(out)],
                  reads=2 * inp.reads_per_mate, plain_bytes=None, needs="samtools",
                  shown=f"python bench/bam.py R1 R2 REF --repeat {repeat}", repeat=False, pin=False)
    if not row.ok or not out.exists():
        return
    cpu = json.loads(out.read_text())
    how = f"CPU seconds, best of {repeat} interleaved runs"
    for key, label in (
            ("child", "seqlake child (full worker, one shard, allele counts off)"),
            ("reducer", "seqlake reducers (depth, coverage, the BAM pieces)"),
            ("join", "seqlake commit's join of the BAM and its index"),
            ("ours", "seqlake: FASTQ to the sorted, indexed BAM (child + reducers + join)"),
            ("theirs", "minimap2 -ax sr -t 1 | samtools sort -@ 0, samtools index (same trimmed reads)"),
            ("minimap2", "minimap2 -ax sr -t 1 (raw reads, SAM to /dev/null)"),
            ("mappy_alone", "the child's aligner alone on the trimmed pairs (mappy.seqlake_map_batch: its floor)"),
            ("minimap2_trimmed", "minimap2 -ax sr -t 1 on the same trimmed pairs"),
            ("chain", "fastp -w 1, minimap2 -ax sr -t 1 | samtools sort -@ 0, samtools index (the tools' chain)")):
        if key not in cpu:  # the chain's row: only where fastp is on PATH
            continue
        ctx.add(f"bam_{key}", Row(BAM, label, "bench/bam.py", seconds=cpu[key], peak_mb=row.peak_mb,
                                  reads=2 * inp.reads_per_mate, note=how, cpu_seconds=cpu[key]))
    ctx.ratios.append(Ratio("seqlake's BAM (child + reducers + join) vs minimap2 | samtools sort + index",
                            cpu["bam_ratio"], "x", f">= {cpu['bam_target']:.2f}x",
                            cpu["bam_ratio"] >= cpu["bam_target"], how))
    ctx.ratios.append(Ratio("full child (allele counts off) vs minimap2 -ax sr -t 1", cpu["child_ratio"], "x",
                            f">= {cpu['child_target']:.2f}x", cpu["child_ratio"] >= cpu["child_target"], how))
    # not targets: what the child's target leaves for its work but alignment, and the same work by the tools' chain
    ctx.ratios.append(Ratio("mappy alone vs minimap2 -ax sr -t 1, the same trimmed pairs (the child's floor)",
                            cpu["floor_ratio"], "x", "-", None, how))
    if cpu.get("chain_ratio") is not None:
        ctx.ratios.append(Ratio("seqlake's BAM (child + reducers + join) vs fastp + minimap2 | samtools sort + index",
                                cpu["chain_ratio"], "x", "-", None, how))


# ------------------------------------------------------------------ the groups, in report order
def groups(shard_counts: tuple[int, ...]) -> dict[str, Callable[[Ctx, Inputs], None]]:
    """``--only`` name -> the group's runner."""
    return {
        "single": lambda ctx, inputs: run_group(ctx, SINGLE_FILE, inputs.main),
        "paired": lambda ctx, inputs: run_group(ctx, PAIRED, inputs.main),
        "e2e": end_to_end,
        "memory": memory,
        "child": child,
        "shards": lambda ctx, inputs: many_shards(ctx, inputs, shard_counts),
        "longreads": long_reads,
        "variants": variants,
        "bam": bam_rows,
    }


GROUP_NAMES = tuple(groups(()))
