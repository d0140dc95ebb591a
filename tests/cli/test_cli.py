"""The command line's contract: exit codes, one-line errors, the worker entry point.

Runs the real ``seqlake`` console script in a subprocess, as a user or AWS Batch would.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from seqlake.base.errors import EXIT_BAD_INPUT
from seqlake.base.layout import GENOMES
from seqlake.lake.tables import COMMIT_TIME_COLUMNS

SEQLAKE = [sys.executable, "-m", "seqlake"]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SEQLAKE, *args], capture_output=True, text=True, env=env, timeout=300, check=False)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("biopython/error_short_qual.fastq", 12),
        ("biopython/error_long_qual.fastq", 16),
        ("cutadapt/withplus.fastq", 3),
        ("cutadapt/format-error.fastq", 4),
        ("biopython/error_trunc_in_qual.fastq", 20),
    ],
)
def test_bad_input_is_one_line_naming_file_and_line_with_exit_65(edge: Path, tmp_path: Path, name: str,
                                                                  line: int) -> None:
    # Given a malformed FASTQ file
    path = edge / name
    before = sha256(path)
    # When the core processes it
    proc = run("process", str(path), "--out", str(tmp_path / "out"), "--jobs", "1")
    # Then: exit 65, one line on stderr naming the file and the line, no traceback, the input untouched
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("seqlake:")]
    assert len(lines) == 1, proc.stderr
    assert f"{path}:{line}:" in lines[0]
    assert "Traceback" not in proc.stderr
    assert sha256(path) == before
    assert not (tmp_path / "out" / "results").exists() or not any((tmp_path / "out" / "results").rglob("*.parquet"))


def test_phred64_is_rejected_with_a_hint(edge: Path, tmp_path: Path) -> None:
    proc = run("process", str(edge / "cutadapt/illumina64.fastq"), "--out", str(tmp_path))
    assert proc.returncode == EXIT_BAD_INPUT
    assert "Phred+64" in proc.stderr and "seqtk" in proc.stderr


def test_mismatched_pair_names_both_files(edge: Path, tmp_path: Path) -> None:
    r1, r2 = edge / "cutadapt/paired.1.fastq", edge / "cutadapt/paired-truncated.2.fastq"
    proc = run("process", str(r1), str(r2), "--out", str(tmp_path))
    assert proc.returncode == EXIT_BAD_INPUT
    assert str(r1) in proc.stderr and str(r2) in proc.stderr


def test_empty_file_is_a_run_with_zero_reads(edge: Path, tmp_path: Path) -> None:
    proc = run("process", str(edge / "cutadapt/empty.fastq"), "--out", str(tmp_path), "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["state"] == "SUCCEEDED"
    qc = pq.read_table(tmp_path / "results" / "qc_summary").to_pylist()
    assert {r["stage"] for r in qc} == {"raw", "trimmed"}
    assert all(r["reads"] == 0 and r["bases"] == 0 for r in qc)


def test_worker_entry_point_reads_the_batch_environment(edge: Path, tmp_path: Path) -> None:
    # Given a plan of 3 shards made by the core
    from seqlake.base.model import Sample
    from seqlake.base.params import Params
    from seqlake.plan.planner import make_plan

    plan = make_plan("r-worker", [Sample("s", str(edge / "biopython/example.fastq"))],
                     out_prefix=str(tmp_path), params=Params(), shards=3)
    env = {**os.environ, "SEQLAKE_PLAN_URI": plan.plan_uri}
    # When Batch starts children 0..2 with AWS_BATCH_JOB_ARRAY_INDEX set
    for i in range(plan.array_size):
        proc = run("worker", env={**env, "AWS_BATCH_JOB_ARRAY_INDEX": str(i)})
        assert proc.returncode == 0, proc.stderr
    # Then each child's manifest exists, keyed by run and child
    manifests = sorted(p.parent.name for p in (tmp_path / "runs" / "r-worker" / "staging").rglob("manifest.json"))
    assert manifests == [f"child={i:05d}" for i in range(plan.array_size)]
    # and an index outside the plan is an error, not a silent success
    proc = run("worker", env={**env, "AWS_BATCH_JOB_ARRAY_INDEX": "3"})
    assert proc.returncode not in (0, EXIT_BAD_INPUT)


def test_worker_bad_input_exits_65_and_records_the_reason(edge: Path, tmp_path: Path) -> None:
    from seqlake.base.model import Sample
    from seqlake.plan.planner import make_plan

    # Given a file whose defect the planner's sniff cannot see (it is past the first records)
    good = (edge / "biopython/example.fastq").read_text()
    bad = tmp_path / "late_defect.fastq"
    bad.write_text(good * 5000 + "@r\nACGT\n+\nII\n")
    bad_line = len(good.splitlines()) * 5000 + 4
    plan = make_plan("r-bad", [Sample("s", str(bad))], out_prefix=str(tmp_path / "o"), shards=1,
                     count_plain_below=0)
    proc = run("worker", "--plan", plan.plan_uri, "--shard", "0")
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr
    record = json.loads(Path(plan.layout.child_error(0)).read_text())
    assert record["file"] == str(bad) and record["line"] == bad_line


def test_worker_gives_arrow_the_c_heap_as_its_memory_pool() -> None:
    """A child's Arrow buffers come from the C heap (mimalloc kept ~20-25 MB of pages): the entry point
    sets Arrow's pool before anything on its way imports pyarrow, which reads the choice once."""
    code = ("import argparse, sys; from seqlake import cli; from seqlake.child import worker_main; "
            "assert 'pyarrow' not in sys.modules; "
            "worker_main.worker_command(argparse.Namespace(plan=None, shard=0)); "
            "import pyarrow; print(pyarrow.default_memory_pool().backend_name)")
    env = {k: v for k, v in os.environ.items() if k not in ("ARROW_DEFAULT_MEMORY_POOL", "SEQLAKE_PLAN_URI")}
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "system", out.stdout


def test_lambda_side_imports_neither_the_worker_nor_its_libraries() -> None:
    """The Lambda layer carries neither mappy (no wheel) nor cutadapt: the plan, commit and failure steps,
    the index job, the report and the merge must not import them, nor the shard worker."""
    code = ("import sys, seqlake.commit.merge, seqlake.plan.planner, seqlake.aws.plan_step, seqlake.aws.steps, "
            "seqlake.aws.index_job, seqlake.report; "
            "print(','.join(m for m in ('mappy', 'cutadapt', 'seqlake.child.worker', 'seqlake.child.trim', "
            "'seqlake.child.align') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "", out.stdout


def test_the_layers_trimmed_pyarrow_still_reads_and_writes_parquet(tmp_path: Path) -> None:
    """layers/Makefile deletes parts of pyarrow the steps never use; what is left must import and
    do the steps' Parquet work (the same deletions, applied to this interpreter's pyarrow)."""
    import re
    import shutil

    import pyarrow

    makefile = (Path(__file__).resolve().parents[2] / "layers" / "Makefile").read_text()
    lines = re.findall(r'cd "\$\(OUT\)/pyarrow" && rm -r?f ((?:\\\n|[^\n])+)', makefile)
    patterns = [p for line in lines for p in line.replace("\\\n", " ").split() if p != "\\"]
    assert "_s3fs.*.so" in patterns and "libarrow_s3.so.*" in patterns and "libarrow_python.so.*.*.*" in patterns
    copy = tmp_path / "pyarrow"
    shutil.copytree(Path(pyarrow.__file__).parent, copy)
    removed = [f for pattern in patterns for f in copy.glob(pattern)]
    assert removed
    for f in removed:
        shutil.rmtree(f) if f.is_dir() else f.unlink()
    # the layers' shared libraries are stripped of what no dynamic link needs: the same strip, on the copy
    strip = re.search(r"^STRIP = find .*? -exec (strip [^{]+)\{\}", makefile, re.MULTILINE)
    assert strip is not None
    libraries = [str(f) for f in copy.rglob("*.so*") if f.is_file() and (f.suffix == ".so" or ".so." in f.name)]
    subprocess.run([*strip.group(1).split(), *libraries], check=True)
    code = ("import io, sys, pyarrow as pa, pyarrow.parquet as pq, pyarrow.compute as pc, pyarrow.fs, "
            "pyarrow.dataset as ds; "
            "assert pa.__file__.startswith(sys.argv[1]); t = pa.table({'a': [1, 2, 3]}); b = io.BytesIO(); "
            "pq.write_table(t, b, compression='zstd'); "
            "assert pc.sum(pq.read_table(pa.BufferReader(b.getvalue()))['a']).as_py() == 6; "
            # pyiceberg's scans and deletes filter through datasets (Acero)
            "assert ds.dataset(t).to_table(filter=pc.field('a') > 1).num_rows == 2")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, env=env)


def test_process_threads_write_the_same_tables(miseq: tuple[Path, Path], reference: Path, tmp_path: Path) -> None:
    # Given the same reads processed with 1 and with 2 alignment threads per shard
    tables = {}
    for threads in ("1", "2"):
        out = tmp_path / f"t{threads}"
        proc = run("process", *map(str, miseq), "--reference", str(reference), "--out", str(out), "--jobs", "1",
                   "--shards", "1", "--threads", threads)
        assert proc.returncode == 0, proc.stderr
        tables[threads] = {t.name: pq.read_table(t) for t in (out / "results").iterdir() if t.name != GENOMES}
    # Then every table is identical, row order included
    assert tables["1"].keys() == tables["2"].keys() and "alignments" in tables["1"]
    assert tables["1"]["alignments"].num_rows > 2 * 5762
    for name, table in tables["1"].items():
        def rows(t: pa.Table) -> list[dict[str, object]]:
            # the consensus row names its FASTA, under each run's own folder
            own = (*COMMIT_TIME_COLUMNS, "fasta_uri")
            return t.drop_columns([c for c in own if c in t.column_names]).to_pylist()

        assert rows(table) == rows(tables["2"][name]), name
    # the child's alignments part too, row groups included (the same bytes)
    parts = [sorted((tmp_path / f"t{t}" / "results" / "alignments").rglob("*.parquet")) for t in ("1", "2")]
    assert len(parts[0]) == 1 and parts[0][0].read_bytes() == parts[1][0].read_bytes()
    # and the genomes: the consensus FASTA and the VCF, byte for byte
    genomes = [sorted(p for p in (tmp_path / f"t{t}" / "results" / GENOMES).rglob("*") if p.is_file())
               for t in ("1", "2")]
    assert [p.name for p in genomes[0]] == [p.name for p in genomes[1]] and genomes[0]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(*genomes, strict=True))


def test_no_allele_counts_aligns_and_covers_but_counts_no_alleles(tmp_path: Path) -> None:
    """``--no-allele-counts`` (the way round the shards' allele memory on big genomes): the alignments and
    coverage as usual, no variant and no consensus row, and a run of its own."""
    from seqlake import demo_data

    r1, r2, reference = demo_data.paths()
    rows = {}
    for flag in ((), ("--no-allele-counts",)):
        out = tmp_path / ("off" if flag else "on")
        proc = run("process", str(r1), str(r2), "--reference", str(reference), "--out", str(out),
                   "--jobs", "1", *flag)
        assert proc.returncode == 0, proc.stderr
        rows[bool(flag)] = {t: pq.read_table(next((out / "results" / t).glob("run_id=*"))).num_rows
                            for t in ("alignments", "coverage", "variants", "consensus")}
    assert rows[True]["variants"] == rows[True]["consensus"] == 0
    assert rows[False]["consensus"] > 0  # (the demo's reads carry no mutation: no variant either way)
    assert {t: rows[True][t] for t in ("alignments", "coverage")} == {t: rows[False][t]
                                                                        for t in ("alignments", "coverage")}
    ids = {p.name for p in (tmp_path / "on" / "results" / "variants").glob("run_id=*")} | {
        p.name for p in (tmp_path / "off" / "results" / "variants").glob("run_id=*")}
    assert len(ids) == 2
