"""What a lab reads first (``sample_summary``, ``contig_coverage``, ``low_coverage``), checked against the
tools labs trust, on the real MiSeq pair: ``samtools depth -a`` and ``samtools stats`` over the very
alignments seqlake wrote (exported to SAM), and the arithmetic mean quality of FastQC and fastp."""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import shutil
import subprocess
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlglot

from seqlake.aws.render_template import latest_view
from seqlake.base.model import Sample
from seqlake.child import worker
from seqlake.commit import merge
from seqlake.demo_data.simulate import write_pairs
from seqlake.lake.tables import BY_NAME, LATEST_TABLES, TABLES, THRESHOLDS
from seqlake.plan.planfile import Plan
from seqlake.plan.planner import make_plan
from seqlake.plan.refindex import indexed_reference
from seqlake.plan.samplesheet import read_samplesheet

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _ref_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEQLAKE_REF_CACHE", str(tmp_path_factory.getbasetemp() / "refcache"))


@pytest.fixture(scope="module")
def miseq_run(miseq: tuple[Path, Path], reference: Path, tmp_path_factory: pytest.TempPathFactory) -> Plan:
    """The MiSeq pair trimmed and aligned in three shards (so every figure goes through the merge)."""
    out = tmp_path_factory.mktemp("lab")
    plan = make_plan("lab", [Sample("s1", str(miseq[0]), str(miseq[1]))], out_prefix=str(out),
                     reference=indexed_reference(str(reference)), shards=3)
    for child in range(plan.array_size):
        worker.process_child(plan, child)
    merge.merge_run(plan)
    return plan


def table(plan: Plan, name: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = pq.read_table(plan.layout.partition(name)).to_pylist()
    return rows


def alignments_as_bam(plan: Plan, reference: Path, samtools: str, out: Path) -> Path:
    """seqlake's ``alignments`` rows as a sorted BAM. SEQ is N of the read's length (samtools stats skips
    reads without one; none of the figures compared depends on the bases), QUAL absent."""
    rows = pq.read_table(plan.layout.partition("alignments")).to_pylist()
    contigs = [line[1:].split()[0] for line in reference.read_text().splitlines() if line.startswith(">")]
    length = sum(len(line) for line in reference.read_text().splitlines() if not line.startswith(">"))
    lines = ["@HD\tVN:1.6\tSO:unsorted", f"@SQ\tSN:{contigs[0]}\tLN:{length}"]
    for r in rows:
        mapped = r["contig"] is not None
        rnext = "*" if r["mate_contig"] is None else ("=" if r["mate_contig"] == r["contig"] else r["mate_contig"])
        fields = [r["read_name"], r["flag"], r["contig"] or (r["mate_contig"] or "*"),
                  r["pos"] if mapped else (r["mate_pos"] or 0), r["mapq"] if mapped else 0,
                  r["cigar"] if mapped else "*", rnext if mapped else ("=" if r["mate_contig"] else "*"),
                  r["mate_pos"] or 0, r["tlen"] or 0, "N" * int(r["read_len"] or 0) or "*", "*"]
        lines.append("\t".join(map(str, fields)) + (f"\tNM:i:{r['nm']}" if mapped else ""))
    bam = out / "seqlake.bam"
    subprocess.run([samtools, "sort", "-o", str(bam), "-"], input="\n".join(lines) + "\n", text=True,
                   check=True, capture_output=True)
    return bam


@pytest.mark.external_data
def test_depth_thresholds_equal_samtools_depth(miseq_run: Plan, reference: Path, samtools: str,
                                              tmp_path: Path) -> None:
    bam = alignments_as_bam(miseq_run, reference, samtools, tmp_path)
    depth_text = subprocess.run([samtools, "depth", "-a", str(bam)], capture_output=True, text=True,
                                check=True).stdout
    depth = np.array([int(line.split("\t")[2]) for line in depth_text.splitlines()], dtype=np.int64)
    summary = table(miseq_run, "sample_summary")[0]
    contig = table(miseq_run, "contig_coverage")[0]
    assert contig["length"] == len(depth)
    for t in THRESHOLDS:
        expected = 100 * np.count_nonzero(depth >= t) / len(depth)
        assert summary[f"pct_genome_{t}x"] == pytest.approx(expected, abs=0, rel=1e-12)
        assert contig[f"pct_{t}x"] == pytest.approx(expected, abs=0, rel=1e-12)
    assert summary["mean_depth"] == pytest.approx(depth.mean(), rel=1e-12)
    assert 0 < summary["pct_genome_30x"] < summary["pct_genome_1x"] < 100  # the checks above can fail
    # low_coverage: exactly the bases below each threshold, as maximal intervals
    low = table(miseq_run, "low_coverage")
    for t in THRESHOLDS:
        mask = np.zeros(len(depth), dtype=np.bool_)
        intervals = sorted((r["pos"], r["end_pos"]) for r in low if r["threshold"] == t)
        for pos, end in intervals:
            mask[pos - 1 : end] = True
        assert (mask == (depth < t)).all(), t
        assert all(b[0] > a[1] + 1 for a, b in itertools.pairwise(intervals)), "intervals are not merged"


def _stats_sections(text: str) -> tuple[dict[str, str], dict[int, int]]:
    sn = {}
    insert: dict[int, int] = {}
    for line in text.splitlines():
        f = line.split("\t")
        if f[0] == "SN":
            sn[f[1].rstrip(":")] = f[2]
        elif f[0] == "IS" and int(f[2]):
            insert[int(f[1])] = int(f[2])
    return sn, insert


@pytest.mark.external_data
def test_insert_size_and_error_rate_equal_samtools_stats(miseq_run: Plan, reference: Path, samtools: str,
                                                         tmp_path: Path) -> None:
    bam = alignments_as_bam(miseq_run, reference, samtools, tmp_path)
    stats = subprocess.run([samtools, "stats", str(bam)], capture_output=True, text=True, check=True).stdout
    sn, insert = _stats_sections(stats)
    summary = table(miseq_run, "sample_summary")[0]
    sizes = np.repeat(list(insert), list(insert.values()))
    assert summary["median_insert_size"] == float(np.median(sizes))
    hist = {r["value"]: r["frequency"] for r in table(miseq_run, "alignment_hist") if r["metric"] == "insert_size"}
    # samtools prints the IS rows of the main 99 % of pairs only: there, every size and its count
    assert {size: n for size, n in hist.items() if size <= max(insert)} == insert
    assert sum(hist.values()) - sum(insert.values()) < 0.01 * sum(hist.values())
    view = subprocess.run([samtools, "view", "-F", "0x904", str(bam)], capture_output=True, text=True,
                          check=True).stdout
    mapq = np.unique([int(line.split("\t")[4]) for line in view.splitlines()], return_counts=True)
    ours = {r["value"]: r["frequency"] for r in table(miseq_run, "alignment_hist") if r["metric"] == "mapq"}
    assert ours == {int(q): int(n) for q, n in zip(*mapq, strict=True)}
    assert summary["pct_error"] == pytest.approx(100 * float(sn["error rate"]), rel=1e-5)
    assert 0 < summary["pct_error"] < 10
    assert summary["soft_clipped_bases"] > 0


@pytest.mark.external_data
def test_mean_quality_is_the_arithmetic_mean_of_the_scores(miseq: tuple[Path, Path], miseq_run: Plan) -> None:
    """FastQC's and fastp's mean quality: sum of the Phred scores over the number of bases (not the
    Phred value of the mean error probability, which seqkit prints and ``mean_error_quality`` keeps)."""
    total = count = 0
    for path in miseq:
        lines = gzip.decompress(path.read_bytes()).split(b"\n")
        for qual in lines[3::4]:
            q = np.frombuffer(qual, dtype=np.uint8).astype(np.int64) - 33
            total += int(q.sum())
            count += len(q)
    summary = table(miseq_run, "sample_summary")[0]
    assert summary["mean_quality"] == pytest.approx(total / count, rel=1e-12)
    assert summary["mean_error_quality"] < summary["mean_quality"] - 5


@pytest.mark.external_data
def test_mean_quality_equals_fastp_per_cycle_means(miseq: tuple[Path, Path], miseq_run: Plan,
                                                  tmp_path: Path) -> None:
    """fastp's per-cycle mean quality of read 1, weighted by the reads long enough for each cycle,
    gives the arithmetic mean of read 1's scores; seqlake's per-cycle table is the same numbers."""
    fastp = shutil.which("fastp")
    if fastp is None:
        pytest.skip("fastp is not installed (make test installs it with apt-get)")
    report = tmp_path / "fastp.json"
    subprocess.run([fastp, "-i", str(miseq[0]), "-o", str(tmp_path / "out.fq"), "-A", "-Q", "-L", "-G",
                    "-j", str(report), "-h", str(tmp_path / "fastp.html")], check=True, capture_output=True)
    curve = json.loads(report.read_text())["read1_before_filtering"]["quality_curves"]["mean"]
    pos = pq.read_table(miseq_run.layout.partition("qc_position")).filter(
        pa.compute.equal(pa.compute.field("mate"), 1)).filter(pa.compute.equal(pa.compute.field("stage"), "raw"))
    ours = dict(zip(pos.column("cycle").to_pylist(), pos.column("mean_qual").to_pylist(), strict=True))
    assert len(curve) == len(ours)
    for cycle, mean in enumerate(curve, start=1):
        assert ours[cycle] == pytest.approx(mean, abs=5e-5)  # fastp prints 4 decimals


def _first_pairs(src: Path, dst: Path, start: int, stop: int) -> None:
    lines = gzip.decompress(src.read_bytes()).split(b"\n")
    dst.write_bytes(gzip.compress(b"\n".join(lines[4 * start : 4 * stop]) + b"\n", mtime=0))


@pytest.fixture(scope="module")
def lanes_run(miseq: tuple[Path, Path], reference: Path, tmp_path_factory: pytest.TempPathFactory) -> Plan:
    """A samplesheet with a control column: the MiSeq pair split into two lanes of sample ``s1``, a
    negative control of 20 pairs, and 3,000 simulated pairs covering the whole genome (``sim``)."""
    d = tmp_path_factory.mktemp("lanes")
    half = 2881
    for mate, src in enumerate(miseq, start=1):
        _first_pairs(src, d / f"s1_L001_R{mate}.fastq.gz", 0, half)
        _first_pairs(src, d / f"s1_L002_R{mate}.fastq.gz", half, 5762)
        _first_pairs(src, d / f"neg_R{mate}.fastq.gz", 0, 20)
    write_pairs(reference, d / "sim_R1.fastq.gz", d / "sim_R2.fastq.gz", 3000, seed=7)
    sheet = d / "samplesheet.csv"
    sheet.write_text("sample,fastq_1,fastq_2,control,lane,run_name,batch\n"
                     "s1,s1_L001_R1.fastq.gz,s1_L001_R2.fastq.gz,false,1,RUN7,b1\n"
                     "neg,neg_R1.fastq.gz,neg_R2.fastq.gz,true,1,RUN7,b1\n"
                     "s1,s1_L002_R1.fastq.gz,s1_L002_R2.fastq.gz,false,2,RUN7,b1\n"
                     "sim,sim_R1.fastq.gz,sim_R2.fastq.gz,,,,\n")
    samples = read_samplesheet(str(sheet))
    pinned = indexed_reference(str(reference))
    plan = make_plan("lanes", samples, out_prefix=str(d / "lake"), reference=pinned, shards=4)
    for child in range(plan.array_size):
        worker.process_child(plan, child)
    merge.merge_run(plan)
    return plan


@pytest.mark.external_data
def test_a_sample_on_two_lanes_is_one_sample_row_with_its_metadata(lanes_run: Plan, miseq_run: Plan) -> None:
    rows = {r["sample"]: r for r in table(lanes_run, "sample_summary")}
    assert sorted(rows) == ["neg", "s1", "sim"]
    s1, neg = rows["s1"], rows["neg"]
    assert (s1["control"], s1["lanes"], s1["run_name"]) == (False, "1,2", "RUN7")
    assert (neg["control"], neg["read_pairs_raw"]) == (True, 20)
    assert rows["sim"]["control"] is None
    # the two lanes together are exactly the pair processed as one file
    whole = table(miseq_run, "sample_summary")[0]
    same = [c for c in whole if c not in ("sample", "control", "run_name", "lanes", "committed_at")]
    assert {c: s1[c] for c in same} == {c: whole[c] for c in same}
    lanes = sorted((r["lane"], r["fastq_1"].rsplit("/", 1)[1], r["metadata"])
                   for r in table(lanes_run, "samples") if r["sample"] == "s1")
    assert lanes == [("1", "s1_L001_R1.fastq.gz", '{"batch": "b1"}'), ("2", "s1_L002_R1.fastq.gz", '{"batch": "b1"}')]


def run_named_query(plan: Plan, name: str) -> list[dict[str, object]]:
    """A named query (Athena SQL) over a run's results with DuckDB, as the local cloud runs it."""
    con = duckdb.connect()
    results = Path(plan.layout.lake.results_root)
    for t in TABLES:
        if (results / t.name).is_dir():
            con.execute(f"CREATE VIEW {t.name} AS SELECT * FROM read_parquet('{results / t.name}/**/*.parquet', "
                        "hive_partitioning = true, hive_types = {'run_id': VARCHAR})")
    for view in (latest_view(BY_NAME[name]) for name in LATEST_TABLES):  # the template's `<table>_latest`
        if (results / view.name.removesuffix("_latest")).is_dir():
            [view_sql] = sqlglot.transpile(view.sql, read="trino", write="duckdb")
            con.execute(f"CREATE VIEW {view.name} AS {view_sql}")
    [sql] = sqlglot.transpile((REPO / "queries" / f"{name}.sql").read_text(), read="trino", write="duckdb")
    rows: list[dict[str, object]] = con.sql(sql).to_arrow_table().to_pylist()
    return rows


@pytest.mark.external_data
def test_samples_reaching_90_pct_at_10x_is_one_named_query(lanes_run: Plan, samtools: str,
                                                          tmp_path: Path) -> None:
    answer = run_named_query(lanes_run, "samples_at_10x")
    assert [r["sample"] for r in answer] == ["sim"]
    pct = {r["sample"]: r["pct_genome_10x"] for r in table(lanes_run, "sample_summary")}
    assert pct["sim"] >= 90 > pct["s1"]
    regions = run_named_query(lanes_run, "low_coverage_regions")
    assert {r["sample"] for r in regions} == {"neg", "s1", "sim"} - ({"sim"} if pct["sim"] == 100 else set())


@pytest.mark.external_data
def test_the_run_records_the_reference_md5_and_library_versions(miseq_run: Plan, reference: Path) -> None:
    import cutadapt
    import mappy

    from seqlake.aws.status import software_columns

    lines = reference.read_text().splitlines()
    sequence = "".join(line.strip() for line in lines if not line.startswith(">")).upper()
    name = lines[0][1:].split()[0]
    columns = software_columns(merge.merge_run(miseq_run).to_dict())
    assert json.loads(columns["reference_md5"]) == {name: hashlib.md5(sequence.encode()).hexdigest()}
    assert (columns["cutadapt_version"], columns["mappy_version"]) == (cutadapt.__version__, mappy.__version__)
