"""The benchmark harness on tiny data: every group runs and every seqlake row gets a time.

``make bench`` takes most of an hour, so nothing else would notice the harness breaking (a renamed
entry point, a moved function ``bench/paths.py`` calls, a report field). This runs ``bench/run.py --quick``
on 300 simulated pairs; it checks what was measured and what the report contains, never how fast.
Rows of tools that are not installed are skipped by the bench itself, so they are not checked here.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from seqlake import demo_data
from seqlake.demo_data.simulate import write_pairs

REPO = Path(__file__).resolve().parents[2]
SECTIONS = (
    "## One file (R1): decompression, QC, indexing",
    "## Paired-end (R1 + R2): trimming and alignment",
    "## End to end: the core alone vs the local cloud (same input, same machine)",
    "## Child memory as the input grows 10x (full worker, one shard)",
    "## A child: its fixed cost, and its vCPUs (full worker, paired)",
    "## Many tiny shards: planning and merging",
    "## Long reads: one 1 Mb read among short reads, and a Nanopore-like library (map-ont)",
    "## Allele counts and variants: the counting's cost, and seqlake vs samtools | ivar",
    "## The per-sample BAM: seqlake's child + reducers + join vs minimap2 | samtools sort + index",
    "## Ratios",
    "## Machine",
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def quick_bench(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, dict], str, Path]:
    tmp = tmp_path_factory.mktemp("bench")
    r1, r2 = tmp / "tiny_R1.fastq.gz", tmp / "tiny_R2.fastq.gz"
    write_pairs(demo_data.reference_path(), r1, r2, 300, seed=5)
    work, report = tmp / "work", tmp / "BENCHMARKS.md"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "run.py"), "--quick", "--reads", str(r1), str(r2), "--copies", "1",
         "--repeat", "1", "--work", str(work), "--out", str(report)],
        capture_output=True, text=True, timeout=900, check=False, cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (results,) = work.glob("results-quick-*-x1.json")
    return json.loads(results.read_text()), report.read_text(), work


def test_every_group_ran(quick_bench: tuple[dict[str, dict], str, Path]) -> None:
    results, _, _ = quick_bench
    assert list(results) == ["single", "paired", "e2e", "memory", "child", "shards", "longreads", "variants", "bam"]
    assert all(g["rows"] for g in results.values())
    assert not [r["label"] for g in results.values() for r in g["rows"] if r["note"].startswith("failed")]


def test_every_seqlake_row_is_measured(quick_bench: tuple[dict[str, dict], str, Path]) -> None:
    results, _, _ = quick_bench
    ours = [r for g in results.values() for r in g["rows"]
            if "seqlake" in r["command"] or r["command"].startswith("bench/paths.py")]
    # the worker's three paths, the QC library, the index pass, planning, process vs local cloud, memory, shards
    assert len(ours) >= 19
    assert [(r["label"], r["note"]) for r in ours if r["seconds"] is None or r["peak_mb"] is None] == []
    # the passes given 2 vCPUs (and the BGZF pass, when bgzip is installed)
    rows = [r for g in results.values() for r in g["rows"]]
    on_two = {r["label"]: r for r in rows if r["command"].startswith("SEQLAKE_THREADS=2")}
    assert {label for label, r in on_two.items() if r["seconds"] is not None} >= {
        "seqlake gzip index pass, a job of 2 vCPUs (2 cores)", "full worker, a job of 2 vCPU(s), not pinned"}
    # the child as a job of 1 and 2 vCPUs: the memory of all its processes, sampled while it ran
    jobs = [r for r in rows if r["label"].startswith("full worker, a job of")]
    assert len(jobs) == 2 and all(r["tree_pss_mb"] and r["tree_pss_mb"] > 10 for r in jobs), jobs
    # a command's own peak RSS, not the harness's (Linux keeps a process's peak across exec): gzip needs ~2 MB
    (gz,) = [r for r in rows if r["label"] == "gzip -dc"]
    assert gz["peak_mb"] < 20, gz
    worker = [r for r in ours if r["command"] == "python -m seqlake worker --plan PLAN --shard 0"]
    # one mate, both mates, both mates at 10 copies; 150 bp reads without and with a 1 Mb read, Nanopore reads
    assert {r["reads"] for r in worker} == {300, 600, 6000, 2000, 2001, 20}


def test_report_has_every_section_and_ratio(quick_bench: tuple[dict[str, dict], str, Path]) -> None:
    results, report, _ = quick_bench
    assert [line for line in report.splitlines() if line.startswith("## ")] == list(SECTIONS)
    assert "`tiny_R1.fastq.gz` + `tiny_R2.fastq.gz`" in report
    assert "Reference: MN908947.3 (29,903 bp)." in report
    ratios = [r["label"] for g in results.values() for r in g["ratios"]]
    # the variants group needs ivar, the BAM group samtools (and fastp for its chain's row); --quick runs the
    # end-to-end group on both cores only
    # (two ratios, not four)
    bam = (3 + (shutil.which("fastp") is not None)) * (shutil.which("samtools") is not None)
    assert len(ratios) == 17 + 2 * (shutil.which("ivar") is not None) + bam
    assert all(f"| {label} |" in report for label in ratios)


def test_every_timed_worker_run_did_the_work(quick_bench: tuple[dict[str, dict], str, Path]) -> None:
    """A child whose manifest holds its work exits at once: a repeated worker row must not time that."""
    _, _, work = quick_bench
    outs = {p.name: p.read_text() for p in (work / "logs").glob("*.out")}
    assert outs and not [name for name, text in outs.items() if "is already done" in text]


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed")
def test_profile_splits_a_row_by_library(quick_bench: tuple[dict[str, dict], str, Path]) -> None:
    _, _, work = quick_bench
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "profile.py"), "--work", str(work), "--copies", "1",
                           "--rows", "qc,worker_qc"], capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0 and "perf_event_paranoid" in proc.stderr + proc.stdout:
        pytest.skip("perf may not sample here")
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = (work / "profile.md").read_text()
    assert text.count("### ") == 2
    for row in text.split("### ")[1:]:
        shares = [float(s) for s in re.findall(r"\| ([\d.]+) % \|", row)]
        assert "| Python interpreter (Python code) |" in row and 99 < sum(shares) < 101, row
        assert float(re.findall(r"([\d.]+) CPU seconds sampled", row)[0]) > 0, row
