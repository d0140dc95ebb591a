"""The genome-scale bench: a synthetic genome run end to end through the local cloud, as a user runs it.

    nice -n 15 python bench/genome_scale.py --size 4M --depth 30 --compare
    nice -n 15 python bench/genome_scale.py --size 100M --depth 30 --compare
    nice -n 15 python bench/genome_scale.py --size 1.5G --contigs 3366 --depth 0.1 --jobs 1 --threads 2

A seeded random reference of ``--size`` bases in ``--contigs`` contigs (5 by default; with more than 24, the
human-like mix of ``bench/reduce.py``: 24 large contigs hold 95 % of the genome, the rest are decoy-sized),
with a few segments repeated (diverged 1 %) at several places so that seeding meets repeats, and
``--depth`` x of 2x150 bp pairs simulated from it (:mod:`seqlake.demo_data.simulate`, gzip level 1), are written
once into ``--work`` (outside the repository by default; kept between runs, so a second call reuses them). Then:

1. ``--probe N``: mappy's rate on the first N pairs (one process, one thread, the index loaded before the
   clock starts), to say beforehand how long the run will take.
2. ``seqlake local run --no-trim --reference REF R1 R2`` with ``SEQLAKE_LOCAL_S3_LATENCY_MS`` (20 ms) and
   Lambda's and Batch's memory enforced (the default), in a fresh ``--home``; its wall time and exit code.
3. What the run's logs say: every Lambda invocation's ``REPORT`` line (``logs/lambda/<function>/*.log``:
   Duration, Memory Size, Max Memory Used) and every Batch attempt's peak against its job's memory
   (``logs/batch/memory.jsonl``), with each attempt's seconds from its log file (created when the attempt
   starts, last written when it ends; a reducer's own seconds from its last line).
4. ``--compare``: the same reads through ``minimap2 -ax sr | samtools sort``, then ``samtools depth -a`` per
   contig: the share of bases at >= 10x and every maximal interval below each threshold, against the run's
   ``sample_summary.pct_genome_*`` and ``low_coverage`` rows (reads are not trimmed on either side).
5. Bytes (issue 35): everything the run left under ``runs/<run_id>/`` against its BAMs' bytes
   (``results/genomes/run_id=<run_id>/*.bam``), by kind of object; and the Batch jobs' scratch (the job
   definition's ``TMPDIR``, the local cloud's ``<home>/hosts/scratch``): its largest size, sampled every
   second while the run runs. ``--bytes-of HOME`` prints the bytes of the last run in any local cloud home
   (e.g. one ``seqlake local run`` of the MiSeq pair).

Prints one JSON result and a Markdown row; ``--out`` writes the JSON (``bench/work/genome-*.json`` is
git-ignored). Nothing is asserted; a failed run is reported with the run's reason and the step that used
too much memory. Run it alone on a shared machine: the 1.5 Gb index build needs about 8 bytes per base.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from harness import FolderBytes, tree_bytes  # noqa: E402  (bench/ is this script's folder)
from reduce import contig_lengths  # noqa: E402
from seqlake.base.layout import REFERENCE_INDEXES  # noqa: E402
from seqlake.demo_data.simulate import write_pairs  # noqa: E402
from seqlake.lake.tables import THRESHOLDS  # noqa: E402

READ = 150
FASTA_WIDTH = 60
#: repeated segments: how many, their longest (a 2,000th of the genome at most), copies of each, divergence
REPEATS, REPEAT_MAX_BASES, REPEAT_COPIES, REPEAT_DIVERGENCE = 24, 20_000, (2, 6), 0.01
#: the reads' seed is ``--seed`` plus this, the reference's ``--seed`` itself: with one seed for both, the
#: simulator's first chunk draws the reference's own stream (:func:`seqlake.demo_data.simulate.simulate`), and
#: the random bases after the adapter in its first 8,192 pairs were genome: read-throughs aligned as chimeras
READS_SEED_OFFSET = 1
DEFAULT_SEED = 22
_UNITS = {"K": 1_000, "M": 1_000_000, "G": 1_000_000_000}
_LETTERS = np.frombuffer(b"ACGT", dtype=np.uint8)
_REPORT = re.compile(r"REPORT RequestId: (\S+)\tDuration: ([\d.]+) ms.*Memory Size: (\d+) MB"
                     r"(?:\tMax Memory Used: (\d+) MB)?")
_REDUCE = re.compile(r"seqlake reduce: region (\d+):.*, ([\d.]+) s$")


def parse_size(text: str) -> int:
    """``4M``, ``1.5G``, ``100000``: bases."""
    unit = text[-1].upper()
    return int(float(text[:-1]) * _UNITS[unit]) if unit in _UNITS else int(text)


def write_reference(path: Path, contigs: list[tuple[str, int]], seed: int) -> dict[str, Any]:
    """A random genome with :data:`REPEATS` segments copied (1 % diverged) to several random places."""
    rng = np.random.default_rng(seed)
    lengths = np.array([n for _, n in contigs], dtype=np.int64)
    copies: dict[int, list[tuple[int, np.ndarray]]] = {}
    repeated = 0
    for _ in range(REPEATS):
        size = int(rng.integers(200, min(REPEAT_MAX_BASES, max(lengths.sum() // 2000, 201))))
        segment = _LETTERS[rng.integers(0, 4, size)]
        fits = np.flatnonzero(lengths > 2 * size)
        for _ in range(int(rng.integers(*REPEAT_COPIES, endpoint=True))):
            k = int(rng.choice(fits, p=lengths[fits] / lengths[fits].sum()))
            copy = segment.copy()
            mutate = rng.random(size) < REPEAT_DIVERGENCE
            copy[mutate] = _LETTERS[rng.integers(0, 4, int(mutate.sum()))]
            copies.setdefault(k, []).append((int(rng.integers(0, lengths[k] - size)), copy))
            repeated += size
    with path.open("wb") as f:
        for k, (name, n) in enumerate(contigs):
            seq = _LETTERS[rng.integers(0, 4, n)]
            for at, copy in copies.get(k, []):
                seq[at:at + len(copy)] = copy
            f.write(f">{name}\n".encode())
            full = n - n % FASTA_WIDTH  # whole lines as one array with a newline column, then the rest
            lines = np.hstack([seq[:full].reshape(-1, FASTA_WIDTH), np.full((full // FASTA_WIDTH, 1), 10, np.uint8)])
            f.write(lines.tobytes())
            if n % FASTA_WIDTH:
                f.write(seq[full:].tobytes() + b"\n")
    return {"repeats": REPEATS, "repeated_bases": repeated}


def _seeded(seed: int, offset: int = 0) -> str:
    """The part of a kept input's name that says its seed: none for the default seed's reference."""
    return "" if (seed, offset) == (DEFAULT_SEED, 0) else f"-seed{seed + offset}"


def _inputs(args: argparse.Namespace, work: Path) -> tuple[Path, Path, Path, dict[str, Any]]:
    genome = parse_size(args.size)
    contigs = contig_lengths(genome, args.contigs)
    pairs = args.pairs or int(args.depth * genome / (2 * READ))
    # the files are kept between runs and named by what they are drawn from, so that another seed (or the
    # reads' seed moving off the reference's) makes new ones rather than reusing these; the names of the
    # default seed's reference are the ones made before the seed was in them
    ref = work / f"ref-{args.size}-{args.contigs}{_seeded(args.seed)}.fa"
    reads = f"reads-{args.size}-{args.contigs}-{pairs}{_seeded(args.seed, READS_SEED_OFFSET)}"
    r1, r2 = (work / f"{reads}_R{m}.fastq.gz" for m in (1, 2))
    info: dict[str, Any] = {"genome_bases": genome, "contigs": len(contigs), "pairs": pairs,
                            "depth": round(pairs * 2 * READ / genome, 3)}
    meta = ref.with_suffix(".json")
    t0 = time.perf_counter()
    if not meta.is_file():
        meta.write_text(json.dumps(write_reference(ref, contigs, seed=args.seed)))
        info["reference_seconds"] = round(time.perf_counter() - t0, 1)
    info.update(json.loads(meta.read_text()))
    if not r2.is_file():
        t0 = time.perf_counter()
        write_pairs(ref, r1, r2, pairs, seed=args.seed + READS_SEED_OFFSET, compresslevel=1)
        info["simulate_seconds"] = round(time.perf_counter() - t0, 1)
    return ref, r1, r2, info


_PROBE = """
import sys, time, mappy
ref, r1, r2, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
t0 = time.perf_counter(); a = mappy.Aligner(ref, preset="sr"); built = time.perf_counter() - t0
t0 = time.perf_counter(); done = 0
for (_, s1, _), (_, s2, _) in zip(mappy.fastx_read(r1), mappy.fastx_read(r2)):
    for _ in a.map(s1, s2):
        pass
    done += 1
    if done == n:
        break
print(done, built, time.perf_counter() - t0)
"""


def probe(ref: Path, r1: Path, r2: Path, pairs: int) -> dict[str, float]:
    """mappy's paired alignment rate on the first ``pairs`` pairs, one thread."""
    out = subprocess.run([sys.executable, "-c", _PROBE, str(ref), str(r1), str(r2), str(pairs)],
                         capture_output=True, text=True, check=True).stdout.split()
    done, built, seconds = int(out[0]), float(out[1]), float(out[2])
    return {"pairs": done, "index_seconds": round(built, 1), "seconds": round(seconds, 1),
            "pairs_per_second": round(done / seconds)}


def _kind(rel: str) -> str:
    """An object's kind: its key under the run with every child's or region's number as ``*``."""
    return re.sub(r"=\d+", "=*", re.sub(r"/\d+\.json$", "/*.json", rel))


def run_bytes(home: Path, run_id: str) -> dict[str, Any]:
    """Everything the run left under ``runs/<run_id>/`` (by kind) against its BAMs' bytes."""
    (bucket,) = (home / "s3").iterdir()
    root = bucket / "runs" / run_id
    kinds: dict[str, dict[str, int]] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        k = kinds.setdefault(_kind(str(path.relative_to(root))), {"objects": 0, "bytes": 0})
        k["objects"] += 1
        k["bytes"] += path.stat().st_size
    genomes = bucket / "results" / "genomes" / f"run_id={run_id}"
    bams = {p.name: p.stat().st_size for p in sorted(genomes.glob("*.bam"))}
    runs = sum(k["bytes"] for k in kinds.values())
    bam = sum(bams.values())
    return {"runs_bytes": runs, "bam_bytes": bam, "bams": bams, "ratio": round(runs / bam, 3) if bam else None,
            "results_bytes": tree_bytes(bucket / "results"),
            "by_kind": dict(sorted(kinds.items(), key=lambda kv: -kv[1]["bytes"]))}


def run_local(args: argparse.Namespace, home: Path, ref: Path, r1: Path, r2: Path) -> dict[str, Any]:
    """``seqlake local run`` as a user types it, with S3 latency; wall time, exit code, its last lines."""
    cmd = [sys.executable, "-m", "seqlake", "local", "run", "--home", str(home), "--reference", str(ref),
           "--no-trim", "--jobs", str(args.jobs), "--threads", str(args.threads)]
    if args.reads_per_shard:
        cmd += ["--reads-per-shard", str(args.reads_per_shard)]
    if args.no_allele_counts:
        cmd += ["--no-allele-counts"]
    for flag in ("worker_memory", "index_memory", "reducer_memory"):
        if getattr(args, flag):
            cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    cmd += [str(r1), str(r2)]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "SEQLAKE_LOCAL_S3_LATENCY_MS": str(args.latency_ms),
           "SEQLAKE_HOME": str(home)}
    t0 = time.perf_counter()
    with FolderBytes(home / "hosts" / "scratch") as scratch:
        out = subprocess.run(["/usr/bin/time", "-v", *cmd], env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    (home / "bench-run.log").write_text(out.stdout + out.stderr)
    rss = [int(line.split()[-1]) for line in out.stderr.splitlines() if "Maximum resident set size" in line]
    return {"command": " ".join(["SEQLAKE_LOCAL_S3_LATENCY_MS=" + str(args.latency_ms), *cmd[1:]]),
            "exit_code": out.returncode, "seconds": round(seconds, 1),
            "largest_process_peak_rss_mb": round(rss[0] / 1024) if rss else None,
            "scratch_peak_bytes": int(scratch.peak), "scratch_samples": scratch.samples,
            "last_lines": (out.stdout + out.stderr).strip().splitlines()[-12:]}


def fresh_home(home: Path, *, keep_indexes: bool) -> list[str]:
    """Empty ``home`` for a new run; with ``keep_indexes``, the reference indexes an earlier run in it built
    (their bodies and ``objects.json`` entries) stay, so the run's index job finds its index built (the
    local cloud restores them into its bucket on start, as they would be in a deployed bucket)."""
    old = home.with_name(home.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if home.is_dir():
        home.rename(old)
    kept: list[str] = []
    saved = old / "objects.json"
    objects = json.loads(saved.read_text()) if keep_indexes and saved.is_file() else {}
    for bucket, keys in objects.items():
        entries = {k: m for k, m in keys.items() if k.startswith(f"{REFERENCE_INDEXES}/")}
        objects[bucket] = entries
        if entries:
            (home / "s3" / bucket).mkdir(parents=True)
            (old / "s3" / bucket / REFERENCE_INDEXES).rename(home / "s3" / bucket / REFERENCE_INDEXES)
            kept += sorted({k.split("/")[1] for k in entries})
    if kept:
        (home / "objects.json").write_text(json.dumps(objects, indent=1))
    shutil.rmtree(old, ignore_errors=True)
    return kept


def _birth_and_end(path: Path) -> tuple[int, int]:
    out = subprocess.run(["stat", "-c", "%W %Y", str(path)], capture_output=True, text=True, check=True).stdout
    born, modified = (int(x) for x in out.split())
    return born, modified


def lambda_reports(home: Path) -> list[dict[str, Any]]:
    """Every invocation's REPORT line, by function."""
    rows = []
    for log in sorted((home / "logs" / "lambda").glob("*/*.log")):
        for line in log.read_text(errors="replace").splitlines():
            m = _REPORT.search(line)
            if m:
                rows.append({"function": log.parent.name.rsplit("-", 1)[-1], "duration_s": round(float(m[2]) / 1000, 2),
                             "memory_size_mb": int(m[3]), "max_memory_used_mb": int(m[4]) if m[4] else None})
    return rows


def batch_attempts(home: Path) -> list[dict[str, Any]]:
    """Every Batch attempt's peak against its job's memory, with its seconds."""
    path = home / "logs" / "batch" / "memory.jsonl"
    rows = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        r = json.loads(line)
        log = home / "logs" / "batch" / r["job_id"].replace(":", "_") / f"attempt-{r['attempt']}.log"
        kind = r["job_name"].split("-", 1)[0]
        row = {"kind": kind, "job_id": r["job_id"], "memory_mib": r["memory_mib"],
               "max_memory_used_mib": r["max_memory_used_mib"], "max_resident_mib": r.get("max_resident_mib"),
               "killed": r["killed"]}
        if log.is_file():
            born, ended = _birth_and_end(log)
            # an attempt that wrote nothing (killed) has no end to read
            row["seconds"] = ended - born if born and log.stat().st_size else None
            last = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
            m = _REDUCE.search(last[0])
            if m:
                row["region"], row["seconds"] = int(m[1]), float(m[2])
        rows.append(row)
    return rows


def _run_record(home: Path) -> dict[str, Any]:
    runs = json.loads((home / "runs.json").read_text()) if (home / "runs.json").is_file() else []
    return runs[-1] if runs else {}


def summarize(lambdas: list[dict[str, Any]], attempts: list[dict[str, Any]]) -> dict[str, Any]:
    """The commit, the largest reducer, the index job, the largest child; and anything over its limit."""
    def largest(kind: str) -> dict[str, Any] | None:
        rows = [a for a in attempts if a["kind"] == kind]
        return max(rows, key=lambda a: a["max_memory_used_mib"] or 0) if rows else None

    commits = [r for r in lambdas if r["function"] == "CommitFunction"]
    over = [r for r in lambdas if (r["max_memory_used_mb"] or 0) >= r["memory_size_mb"]]
    # an attempt whose cgroup reached its limit with page cache the kernel reclaimed (its resident memory, where
    # sampled, below the limit) was not short of memory
    over += [a for a in attempts if a["killed"] or (
        a.get("max_resident_mib") or a["max_memory_used_mib"] or 0) >= a["memory_mib"]]
    by_function: dict[str, dict[str, Any]] = {}
    for r in lambdas:
        f = by_function.setdefault(r["function"], {"invocations": 0, "max_memory_used_mb": 0, "seconds_max": 0.0,
                                                   "memory_size_mb": r["memory_size_mb"]})
        f["invocations"] += 1
        f["max_memory_used_mb"] = max(f["max_memory_used_mb"], r["max_memory_used_mb"] or 0)
        f["seconds_max"] = max(f["seconds_max"], r["duration_s"])
    return {"commit": commits[-1] if commits else None, "largest_reducer": largest("reduce"),
            "reducers": sum(a["kind"] == "reduce" for a in attempts),
            "reducer_seconds_total": round(sum(a.get("seconds") or 0 for a in attempts if a["kind"] == "reduce"), 1),
            "index_job": largest("index"), "largest_child": largest("shards") or largest("shard"),
            "children": sum(a["kind"] in ("shard", "shards") for a in attempts), "lambdas": by_function,
            "over_limit": over}


def _intervals_below(depth: np.ndarray, threshold: int) -> tuple[np.ndarray, np.ndarray]:
    """Maximal 1-based inclusive intervals with depth below ``threshold``: (starts, ends)."""
    low = np.concatenate([[False], depth < threshold, [False]])
    edges = np.flatnonzero(low[1:] != low[:-1])
    return edges[::2] + 1, edges[1::2]


def compare(args: argparse.Namespace, ref: Path, r1: Path, r2: Path, home: Path, run_id: str,
            work: Path) -> dict[str, Any]:
    """``minimap2 -ax sr | samtools sort``, ``samtools depth -a`` per contig, against the run's tables."""
    import pyarrow.parquet as pq

    bam = work / f"{r1.name.removesuffix('_R1.fastq.gz')}.cli.bam"
    out: dict[str, Any] = {"command": f"minimap2 -ax sr -t {args.threads} REF R1 R2 | samtools sort -o BAM; "
                                      "samtools depth -a -r CONTIG BAM"}
    if not bam.is_file():
        t0 = time.perf_counter()
        subprocess.run(f"minimap2 -ax sr -t {args.threads} {ref} {r1} {r2} 2>/dev/null | samtools sort -m 1G "
                       f"-T {work}/sort -o {bam}.tmp - && mv {bam}.tmp {bam} && samtools index {bam}",
                       shell=True, check=True)
        out["minimap2_sort_seconds"] = round(time.perf_counter() - t0, 1)
    (bucket,) = (home / "s3").iterdir()
    part = bucket / "results"
    summary = _pct_genome(bucket, run_id)
    table = pq.read_table(part / "low_coverage" / f"run_id={run_id}", columns=["contig", "threshold", "pos", "end_pos"])
    low = {name: table.column(name).to_numpy() for name in ("threshold", "pos", "end_pos")}
    low_contig = np.array(table.column("contig").to_pylist())
    names = _fasta_names(ref)
    at = dict.fromkeys(THRESHOLDS, 0)
    genome = 0
    mismatched: list[str] = []
    rows = 0
    t0 = time.perf_counter()
    for contig in names:
        text = subprocess.run(f"samtools depth -a -r {contig} {bam} | cut -f3", shell=True, check=True,
                              capture_output=True).stdout
        depth = np.array(text.split(), dtype=np.int64)
        genome += len(depth)
        for t in THRESHOLDS:
            at[t] += int((depth >= t).sum())
            starts, ends = _intervals_below(depth, t)
            mine = np.flatnonzero((low_contig == contig) & (low["threshold"] == t))
            mine = mine[np.argsort(low["pos"][mine], kind="stable")]
            rows += len(mine)
            if not (np.array_equal(low["pos"][mine], starts) and np.array_equal(low["end_pos"][mine], ends)):
                mismatched.append(f"{contig} {t}x: samtools {len(starts)} intervals, seqlake {len(mine)}")
    out["depth_seconds"] = round(time.perf_counter() - t0, 1)
    out["genome_bases_in_depth"] = genome
    out["low_coverage_rows"] = rows
    out["pct_genome_from"] = summary.pop("from")
    out["pct_genome"] = {f"{t}x": {"samtools": 100 * at[t] / genome, "seqlake": summary[f"pct_genome_{t}x"]}
                         for t in THRESHOLDS}
    out["pct_equal"] = all(v["samtools"] == v["seqlake"] for v in out["pct_genome"].values())
    out["low_coverage_equal"] = not mismatched and rows == len(low_contig)
    out["mismatches"] = mismatched[:20]
    return out


def _pct_genome(bucket: Path, run_id: str) -> dict[str, Any]:
    """``pct_genome_*`` of the run's one sample: its ``sample_summary`` row, or, when the commit did not write
    one (a failed run), the sum of the reducers' region summaries (what the commit adds up)."""
    import pyarrow.parquet as pq

    committed = bucket / "results" / "sample_summary" / f"run_id={run_id}"
    if committed.is_dir():
        row: dict[str, Any] = pq.read_table(committed).to_pylist()[0]
        return {"from": "sample_summary", **{f"pct_genome_{t}x": row[f"pct_genome_{t}x"] for t in THRESHOLDS}}
    at = [0] * len(THRESHOLDS)
    for path in sorted((bucket / "runs" / run_id / "reduce").glob("region=*.json")):
        for sample in json.loads(path.read_text())["samples"].values():
            for counts in sample["at_least"].values():
                at = [a + c for a, c in zip(at, counts, strict=True)]
    regions = json.loads((bucket / "runs" / run_id / "reduce" / "regions.json").read_text())
    genome = sum(int(n) for _, n in regions["contigs"])
    return {"from": "the reducers' region summaries (no sample_summary: the commit failed)",
            **{f"pct_genome_{t}x": 100 * a / genome for t, a in zip(THRESHOLDS, at, strict=True)}}


def _fasta_names(ref: Path) -> list[str]:
    out = subprocess.run(["grep", "^>", str(ref)], capture_output=True, text=True, check=True).stdout
    return [line[1:].split()[0] for line in out.splitlines()]


def _commit() -> str:
    out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                         check=False)
    return out.stdout.strip() or "unknown commit"


def _agreement(cmp_: dict[str, Any]) -> str:
    """The comparison in a cell: which thresholds' ``pct_genome`` are equal, and whether the intervals are."""
    if not cmp_:
        return "-"
    if cmp_["pct_equal"] and cmp_["low_coverage_equal"]:
        return "yes"
    same = [t for t, v in cmp_["pct_genome"].items() if v["samtools"] == v["seqlake"]]
    return (f"pct_genome equal at {', '.join(same) or 'none'}; low_coverage differs in "
            f"{len(cmp_['mismatches'])} contig x threshold")


def _short_reason(reason: str) -> str:
    """A failed run's reason in a table cell: its error and operation, without paths and keys."""
    error = reason.split(":", 1)[0].rsplit(".", 1)[-1]
    said = re.search(r"An error occurred \((\w+)\) when calling the (\w+) operation", reason)
    return f"{error}: {said[2]} answered {said[1]}" if said else reason[:80]


def recommit(home: Path, run_id: str) -> dict[str, Any]:
    """The commit Lambda invoked once more on a finished run kept in ``home``, as the state machine invokes it
    (its payload, its function's memory cap), with the code checked out now: its REPORT line. A code change
    to the commit is measured on the same children's and reducers' objects without running them again. It
    joins no consensus FASTA or VCF: the first commit recorded them joined and removed their pieces
    (:mod:`seqlake.lake.genomes`); the BAM is joined again."""
    import boto3
    from botocore.config import Config

    from localcloud.state import StateDir
    from seqlake.local.adapter import local_cloud
    from seqlake.local.rerun import _execution_input

    state = StateDir(home)
    with local_cloud(state=state, jobs=1, quiet=True) as cloud:
        assert cloud.lambdas is not None
        execution = _execution_input(state, cloud.bucket, run_id)
        plan = json.loads((state.bucket_dir(cloud.bucket) / "runs" / run_id / "plan.json").read_text())
        function = next(n for n in cloud.lambdas.functions if n.endswith("CommitFunction"))
        client = boto3.client("lambda", endpoint_url=cloud.endpoint, region_name="us-east-1",
                              config=Config(read_timeout=900, retries={"total_max_attempts": 1}))
        resp = client.invoke(FunctionName=function, Payload=json.dumps({
            "execution": execution.to_dict(),
            "plan": {"plan_uri": execution.request_uri.replace("request.json", "plan.json"),
                     "array_size": len(plan["children"])},
            "batch": None}))
        if "FunctionError" in resp:
            raise SystemExit(f"the commit failed again: {resp['Payload'].read()[:500]!r}")
    commit: dict[str, Any] = summarize(lambda_reports(home), [])["commit"]
    return commit


def row(r: dict[str, Any]) -> str:
    """One Markdown row of the end-to-end table."""
    s = r["steps"]
    c, red, idx, child = s["commit"] or {}, s["largest_reducer"] or {}, s["index_job"] or {}, s["largest_child"] or {}
    cmp_ = r.get("compare", {})
    status = r["status"] + "".join(
        f": {o.get('kind') or o.get('function')} at its limit{'' if o.get('killed', True) else ' (not killed)'}, "
        f"{o.get('max_memory_used_mib') or o.get('max_memory_used_mb')} / "
        f"{o.get('memory_mib') or o.get('memory_size_mb')}" for o in s["over_limit"])
    if r["status"] == "FAILED" and not any(o.get("killed", True) for o in s["over_limit"]):
        status += f"; {_short_reason(r.get('reason') or '')}"
    if "--no-allele-counts" in r["run"].get("command", ""):
        status += " (`--no-allele-counts`: coverage only)"
    if r.get("commit_reinvoked_at"):
        status += f"; the commit re-invoked on its objects ({r['commit_reinvoked_at']}, `--recommit`)"

    def of(step: dict[str, Any], used: str, limit: str) -> str:
        if step.get(used) is None:
            return "-"
        resident = step.get("max_resident_mib")
        return f"{step[used]:,} / {step[limit]:,}" + ("" if resident is None else f" ({resident:,} resident)")

    cells = [f"{r['genome_bases'] / 1e6:,.0f} Mb", f"{r['contigs']:,}", f"{r['depth']}x", f"{r['pairs']:,}",
             status, f"{r['run']['seconds']:,.0f}", f"{s['children']}",
             of(idx, "max_memory_used_mib", "memory_mib"), str(idx.get("seconds") or "-"),
             of(child, "max_memory_used_mib", "memory_mib"),
             f"{s['reducers']}", of(red, "max_memory_used_mib", "memory_mib"), str(red.get("seconds") or "-"),
             of(c, "max_memory_used_mb", "memory_size_mb"), str(c.get("duration_s") or "-"),
             _agreement(cmp_),
             f"{r['load_average'][0]:.1f} -> {r['load_average'][1]:.1f}", r["measured_at"]]
    return "| " + " | ".join(cells) + " |"


HEADER = ("| genome | contigs | depth | pairs | run | run (s) | children | index job peak / memory (MiB) "
          "| index job (s) | largest child peak / memory (MiB) | reducers | largest reducer peak / memory (MiB) "
          "| its time (s) | commit Max Memory Used / MemorySize (MB) | commit (s) | equals samtools depth -a "
          "| load | measured |\n"
          "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|")


def flatness(results: list[dict[str, Any]]) -> list[str]:
    """For runs that SUCCEEDED at one depth, with or without allele counts, under the same defaults (told by the
    reducer's job memory: it changed with each change of the reducer's design and region size) on genomes of
    different sizes: the largest reducer's and the commit's peak, smallest genome to largest, as a ratio."""
    groups: dict[tuple[float, bool, int], list[dict[str, Any]]] = {}
    for r in results:
        if r["status"] == "SUCCEEDED" and r["steps"]["largest_reducer"] and r["steps"]["commit"]:
            counts = "--no-allele-counts" not in r["run"].get("command", "")
            memory = r["steps"]["largest_reducer"]["memory_mib"]
            groups.setdefault((r["depth"], counts, memory), []).append(r)
    lines = []
    for (depth, counts, _), runs in sorted(groups.items()):
        sizes = sorted({r["genome_bases"] for r in runs})
        if len(sizes) < 2:
            continue
        small = [r for r in runs if r["genome_bases"] == sizes[0]][-1]
        big = [r for r in runs if r["genome_bases"] == sizes[-1]][-1]
        red = [x["steps"]["largest_reducer"]["max_memory_used_mib"] for x in (small, big)]
        com = [x["steps"]["commit"]["max_memory_used_mb"] for x in (small, big)]
        lines.append(f"At {depth}x {'with' if counts else 'without'} allele counts, {sizes[0] / 1e6:,.0f} Mb against "
                     f"{sizes[-1] / 1e6:,.0f} Mb: the largest reducer {red[0]:,} and {red[1]:,} MiB "
                     f"(**{red[1] / red[0]:.2f}x**), the commit {com[0]} and {com[1]} MB (**{com[1] / com[0]:.2f}x**).")
    return lines


def section(work: Path) -> list[str]:
    """BENCHMARKS.md's section on the end-to-end runs saved in ``work`` (``genome-*.json``)."""
    results = sorted((json.loads(p.read_text()) for p in work.glob("genome-*.json")),
                     key=lambda r: (r["genome_bases"], r["measured_at"]))
    if not results:
        return []
    return [
        "", "## Genomes end to end through the local cloud (`bench/genome_scale.py`)", "",
        "A seeded random genome with repeated segments and reads simulated from it, run as a user runs it:",
        "`seqlake local run --no-trim --reference REF R1 R2` with S3 latency 20 ms and Lambda's and Batch's memory",
        "enforced (memory cgroups). Peaks are the cgroups' (the REPORT lines' `Max Memory Used` for the commit,",
        "`logs/batch/memory.jsonl` for the Batch jobs), each against its limit. A Batch job's cgroup also counts",
        "the page cache of what it reads and writes, which the kernel reclaims at the limit instead of killing, so",
        "its anonymous and shared memory, sampled every second, is beside it where measured (\"resident\") and",
        "is what a step is judged \"at its limit\" by. The last column compares `pct_genome_*` and every",
        "`low_coverage` interval with `samtools depth -a` over `minimap2 -ax sr` of the same reads.", "",
        HEADER, *(row(r) for r in results), "", *flatness(results), "",
        "A run that failed says which step reached its limit; docs/COST.md (\"Measured end to end\") says what",
        "filled it and how the reference's size and the shard's reads scale it. The rows measured before the",
        "child's allele counts spilled (commits 6045225 and 6541148: shards killed at 100 Mb and 1.5 Gb) are kept",
        "beside those after it. The 1.5 Gb runs after it gave each shard 16,384 MiB (`--worker-memory 16384`,",
        "as `WorkerMemoryMiB` on AWS: its 4.75 GB index loads to ~10 GB; docs/DEPLOY.md, \"Memory for a human",
        "genome\"). Of those, the one that failed uploading its positions (the local S3's CompleteMultipartUpload)",
        "and the one stopped by `seqlake local run`'s one-hour wait (its region of ~1,100 decoy contigs took",
        "846 s) are kept beside the run after both fixes. The 100 Mb row at 0.9x failed in its reducers: a 20 Mb",
        "region with variants called does not fit the default 4,096 MiB (docs/COST.md, docs/DEPLOY.md). 100 Mb at",
        "30x (10 M pairs) with allele counts failed when two shards of 2 M pairs filled the disk with their spilled",
        "counts (~64 GB each, estimated, at 136 bytes a row; since narrowed to 40), and a rerun in shards of",
        "250,000 pairs was stopped after two (~170 CPU-s each); without allele counts it SUCCEEDED, and with them,",
        "in 40 shards of 250,000 pairs (`--reads-per-shard 250000`: ~8.6 GB of spill each, two at once), it",
        "SUCCEEDED in 4,771 s (docs/COST.md, \"Measured end to end\"). Its commit peaked at 521 MB: the report",
        "read the whole `variants` table; with the report reading only what it lists (d541281) the same commit,",
        "re-invoked on the run's objects (`--recommit`), peaks at the figure in its row. Every `low_coverage`",
        "interval differing from `samtools depth -a` touches a MAPQ-0 alignment of either side (a repeat copy",
        "chosen differently: the child gave mappy no read name, which minimap2's tie-break hashes; it does since",
        "e3a76e5: on 200,000 pairs of the 100 Mb reads, 168 mates placed apart from the command line -> 58), but for",
        "4 of chr1's 2,168 at 30x,",
        "one base off at the end of a read among MAPQ 38-60 alignments. The 10 Mb run with allele counts that",
        "FAILED (`argument out of range`) met a wrong tabix bin for records crossing a 16 kb edge (fixed in 7c8e48f;",
        "the row after it is the same run since); its reducers are the first end to end with 1 Mb windows. The",
        "10 Mb run at e3a76e5, the first with the read names passed, equals `samtools depth -a` in `pct_genome`",
        "at 1x, 10x, 20x and 30x and in every one of its 137,613 `low_coverage` intervals. The 100 Mb run with",
        "the names (677d9be) equals it at 1x, 10x and 20x everywhere, and at 30x in all but 8 of 1,144,025",
        "intervals: single bases where one read's indels are placed differently by the comparison's minimap2",
        "(Debian's 2.24) and by mappy's (2.31), whose command line gives seqlake's depth at all 8",
        "(docs/COST.md, \"Measured end to end\")."]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", help="genome size: 4M, 100M, 1.5G ... (required but with --bytes-of)")
    p.add_argument("--contigs", type=int, default=5)
    p.add_argument("--depth", type=float, default=30.0)
    p.add_argument("--pairs", type=int, default=0, help="read pairs (instead of --depth)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--jobs", type=int, default=2, help="local run --jobs (children at once)")
    p.add_argument("--threads", type=int, default=1, help="local run --threads (vCPUs of each child)")
    p.add_argument("--reads-per-shard", type=int, default=0)
    p.add_argument("--worker-memory", type=int, default=0, help="local run --worker-memory (MiB of each shard)")
    p.add_argument("--index-memory", type=int, default=0, help="local run --index-memory (MiB of the index job)")
    p.add_argument("--reducer-memory", type=int, default=0, help="local run --reducer-memory (MiB of a reducer)")
    p.add_argument("--no-allele-counts", action="store_true", help="local run --no-allele-counts")
    p.add_argument("--keep-index", action="store_true",
                   help="keep the reference index the last run in the same --home built (its bucket's "
                        "reference-indexes/): the run's index job then finds it built")
    p.add_argument("--latency-ms", type=int, default=20)
    p.add_argument("--probe", type=int, default=0, help="first time mappy on this many pairs")
    p.add_argument("--no-run", action="store_true", help="only make the inputs (and probe)")
    p.add_argument("--compare", action="store_true", help="compare with minimap2 | samtools depth -a")
    p.add_argument("--compare-only", action="store_true",
                   help="compare the last run's tables (in --work) and add the comparison to --out's result")
    p.add_argument("--work", type=Path, default=Path(os.environ.get("SEQLAKE_BENCH_SCRATCH", "/tmp/seqlake-genome")))
    p.add_argument("--recommit", action="store_true",
                   help="invoke only the commit again on the kept home's finished run (the code checked out now) "
                        "and record its REPORT as the row's commit in --out")
    p.add_argument("--bytes-of", type=Path, default=None, metavar="HOME",
                   help="only print the bytes under runs/ of the last run in this local cloud home against its BAMs")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    if args.bytes_of:
        print(json.dumps({"run_id": _run_record(args.bytes_of)["run_id"],
                          **run_bytes(args.bytes_of, _run_record(args.bytes_of)["run_id"])}, indent=2))
        return 0
    if not args.size:
        p.error("--size is required")
    args.work.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()[0]
    ref, r1, r2, result = _inputs(args, args.work)
    if args.probe:
        result["mappy_probe"] = probe(ref, r1, r2, args.probe)
        print(json.dumps(result["mappy_probe"]), flush=True)
    if args.no_run:
        print(json.dumps(result, indent=2))
        return 0
    home = args.work / f"home-{args.size}-{args.contigs}-{result['pairs']}"
    if args.compare_only:
        saved = json.loads(args.out.read_text()) if args.out and args.out.is_file() else result
        saved["compare"] = compare(args, ref, r1, r2, home, _run_record(home)["run_id"], args.work)
        result = saved
        print(json.dumps(result["compare"], indent=2))
        if args.out:
            args.out.write_text(json.dumps(result, indent=2) + "\n")
        return 0
    if args.recommit:
        if not (args.out and args.out.is_file()):
            p.error("--recommit updates the run's saved result: give it as --out")
        result = json.loads(args.out.read_text())
        result["steps"]["commit"] = recommit(home, result["run_id"])
        result["commit_reinvoked_at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()) + ", " + _commit()
        print(json.dumps(result["steps"]["commit"], indent=2))
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        return 0
    commit = _commit()  # the code the run runs: read before it, as main may move while it runs
    result["kept_indexes"] = fresh_home(home, keep_indexes=args.keep_index)
    result["run"] = run_local(args, home, ref, r1, r2)
    record = _run_record(home)
    result["run_id"], result["status"] = record.get("run_id"), record.get("status", "NO RUN")
    result["reason"] = (record.get("status_json") or {}).get("reason") or record.get("cause")
    result["steps"] = summarize(lambda_reports(home), batch_attempts(home))
    if result["run_id"]:
        result["bytes"] = run_bytes(home, result["run_id"])
    if args.compare and result["status"] == "SUCCEEDED":  # a failed run committed no tables to compare
        result["compare"] = compare(args, ref, r1, r2, home, result["run_id"], args.work)
    result["load_average"] = [load0, os.getloadavg()[0]]
    result["measured_at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()) + ", " + commit
    text = json.dumps(result, indent=2)
    print(text)
    print(HEADER + "\n" + row(result))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
