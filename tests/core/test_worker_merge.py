"""The shard worker and the merge: shard invariance, seqkit-equal raw QC, failure on missing shards."""

from __future__ import annotations

import gzip
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from seqlake import demo_data
from seqlake.base.cpus import THREADS_VAR
from seqlake.base.errors import BadInputError, SeqlakeError
from seqlake.base.model import Sample
from seqlake.base.params import Params
from seqlake.child import align, worker
from seqlake.commit import merge
from seqlake.demo_data import simulate_long
from seqlake.demo_data.simulate import read_reference
from seqlake.lake import qc as lake_qc
from seqlake.lake.tables import AMPLICON_TABLES, BY_NAME, COMMIT_TIME_COLUMNS, RESULT_TABLES
from seqlake.plan.planfile import Plan
from seqlake.plan.planner import make_plan
from seqlake.plan.refindex import indexed_reference
from seqlake.plan.shards import Chunk
from seqlake.reads import gzindex


@pytest.fixture(autouse=True)
def _ref_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEQLAKE_REF_CACHE", str(tmp_path_factory.getbasetemp() / "refcache"))


def run_all(plan: Plan) -> merge.RunTotals:
    for i in range(plan.array_size):
        worker.process_child(plan, i)
    return merge.merge_run(plan)


def result(plan: Plan, table: str, drop: tuple[str, ...] = ()) -> pa.Table:
    t = pq.read_table(plan.layout.partition(table))
    keep = [c for c in BY_NAME[table].schema.names if c not in drop and c not in COMMIT_TIME_COLUMNS]
    return t.select(keep).sort_by([(c, "ascending") for c in keep])


#: columns that name a run's own objects (its folder and run id), so differ between two runs of the same data
RUN_NAMED: dict[str, tuple[str, ...]] = {"consensus": ("fasta_uri",)}


def assert_same_results(a: Plan, b: Plan, drop: tuple[str, ...] = ()) -> None:
    for table in RESULT_TABLES:
        dropped = (drop if table in ("alignments", "samples") else ()) + RUN_NAMED.get(table, ())
        ta, tb = result(a, table, dropped), result(b, table, dropped)
        assert ta.num_rows > 0 or table in AMPLICON_TABLES, table
        assert ta.equals(tb), table


def test_shard_invariance_gzip_index(miseq: tuple[Path, Path], reference: Path, tmp_path: Path, seqkit: str) -> None:
    samples = [Sample("s1", str(miseq[0]), str(miseq[1]))]
    pinned = indexed_reference(str(reference))
    one = make_plan("run1", samples, out_prefix=str(tmp_path / "one"), reference=pinned, shards=1)
    seven = make_plan("run7", samples, out_prefix=str(tmp_path / "seven"), reference=pinned, shards=7)
    assert seven.array_size == 7
    totals = run_all(one)
    run_all(seven)
    assert_same_results(one, seven)
    assert totals.reads == 2 * 5762 and totals.bases == 2 * 1267640
    # the merged raw rows equal seqkit stats -a on each file
    summary = result(one, "qc_summary").to_pylist()
    for mate, path in ((1, miseq[0]), (2, miseq[1])):
        row = next(r for r in summary if r["mate"] == mate and r["stage"] == "raw")
        out = subprocess.run([seqkit, "stats", "-a", "-T", str(path)], capture_output=True, text=True, check=True)
        head, values = out.stdout.splitlines()[:2]
        sk = dict(zip(head.split("\t"), values.split("\t"), strict=True))
        assert (row["reads"], row["bases"], row["min_len"], row["max_len"]) == (
            int(sk["num_seqs"]),
            int(sk["sum_len"]),
            int(sk["min_len"]),
            int(sk["max_len"]),
        )
        for col, name in (("q20_bases", "Q20(%)"), ("q30_bases", "Q30(%)"), ("gc_bases", "GC(%)")):
            assert f"{round(100 * row[col] / row['bases'], 2):.2f}" == sk[name]
        trimmed = next(r for r in summary if r["mate"] == mate and r["stage"] == "trimmed")
        assert trimmed["reads"] == row["reads"] - trimmed["reads_too_short"]
        assert trimmed["mapped_reads"] > 0.98 * trimmed["reads"]
        assert 0 < trimmed["pct_span_breadth"] <= 100 and trimmed["mean_span_depth"] > 0


def test_shard_invariance_plain_byte_ranges(miseq: tuple[Path, Path], reference: Path, tmp_path: Path) -> None:
    plain = tmp_path / "reads.fastq"
    plain.write_bytes(gzip.decompress(miseq[1].read_bytes()))
    samples = [Sample("s", str(plain))]
    pinned = indexed_reference(str(reference))
    one = make_plan(
        "p1", samples, out_prefix=str(tmp_path / "a"), reference=pinned, shards=1, count_plain_below=0
    )
    five = make_plan(
        "p5", samples, out_prefix=str(tmp_path / "b"), reference=pinned, shards=5, count_plain_below=0
    )
    assert five.array_size == 5
    run_all(one)
    run_all(five)
    # byte-range shards do not know their reads' absolute numbers (no counting pass over plain files)
    assert_same_results(one, five, drop=("read_index",))


def test_bgzf_byte_ranges_give_the_tables_of_the_gzip_index(miseq: tuple[Path, Path], reference: Path,
                                                            tmp_path: Path, bgzip: str) -> None:
    bg = tmp_path / "reads.fastq"
    bg.write_bytes(gzip.decompress(miseq[0].read_bytes()))
    subprocess.run([bgzip, "-f", str(bg)], check=True)
    indexed = make_plan("gz", [Sample("s", str(miseq[0]))], out_prefix=str(tmp_path / "gz"),
                        reference=indexed_reference(str(reference)), shards=3)
    pinned = indexed_reference(str(reference))
    blocks = make_plan("bg", [Sample("s", f"{bg}.gz")], out_prefix=str(tmp_path / "bg"), reference=pinned,
                       shards=6, count_plain_below=0)
    assert blocks.inputs[0].index_uri is None and blocks.array_size == 6
    run_all(indexed)
    run_all(blocks)
    # byte-range shards do not know their reads' absolute numbers (no pass over the data)
    assert_same_results(indexed, blocks, drop=("read_index", "fastq_1"))  # and the input files differ


def test_bgzf_pair_gives_the_tables_of_gzip(reference: Path, tmp_path: Path, bgzip: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Paired BGZF is counted, not indexed; its shards hold the same read numbers, so every table equals
    the gzip-indexed run's, read numbers included."""
    plain = [b"\n".join(gzip.decompress(p.read_bytes()).split(b"\n")[: 4 * 5000]) + b"\n"
             for p in demo_data.paths()[:2]]
    gz, bg = [], []
    for mate, data in enumerate(plain, start=1):
        gz.append(tmp_path / f"gz_R{mate}.fastq.gz")
        gz[-1].write_bytes(gzip.compress(data))
        (tmp_path / f"R{mate}.fastq").write_bytes(data)
        subprocess.run([bgzip, "-f", str(tmp_path / f"R{mate}.fastq")], check=True)
        bg.append(tmp_path / f"R{mate}.fastq.gz")
    indexed = make_plan("gz", [Sample("s", str(gz[0]), str(gz[1]))], out_prefix=str(tmp_path / "gz"),
                        reference=indexed_reference(str(reference)), shards=2)
    monkeypatch.setattr(gzindex, "index_gzip", lambda *a, **kw: pytest.fail("BGZF ran the index pass"))
    counted = make_plan("bg", [Sample("s", str(bg[0]), str(bg[1]))], out_prefix=str(tmp_path / "bg"),
                        reference=indexed_reference(str(reference)), shards=5)
    assert [i.index_uri for i in counted.inputs] == [None, None] and counted.array_size == 5
    assert counted.shards[3].spans[0].skip > 0  # the middle shards start after a checkpoint
    run_all(indexed)
    run_all(counted)
    assert_same_results(indexed, counted, drop=("fastq_1", "fastq_2"))  # the input files' names differ


def test_no_trim_writes_a_trimmed_stage_equal_to_raw(miseq: tuple[Path, Path], tmp_path: Path) -> None:
    plan = make_plan(
        "nt",
        [Sample("s1", str(miseq[0]), str(miseq[1]))],
        out_prefix=str(tmp_path),
        params=Params(trim=False),
        shards=2,
    )
    run_all(plan)
    for table in ("qc_summary", "qc_position", "length_hist", "quality_hist"):
        t = result(plan, table)
        raw = t.filter(pa.compute.equal(t["stage"], "raw")).drop_columns(["stage"])
        trimmed = t.filter(pa.compute.equal(t["stage"], "trimmed")).drop_columns(["stage"])
        if table == "qc_summary":
            trim_cols = [
                "reads_adapter_trimmed",
                "bases_quality_trimmed",
                "bases_adapter_trimmed",
                "reads_too_short",
                "bases_too_short",
            ]
            assert set(trimmed.select(trim_cols).to_pylist()[0].values()) == {0}
            raw, trimmed = raw.drop_columns(trim_cols), trimmed.drop_columns(trim_cols)
        assert raw.equals(trimmed), table
    assert result(plan, "alignments").num_rows == 0  # no reference: no alignment rows


def test_merge_fails_naming_a_missing_shard(miseq: tuple[Path, Path], tmp_path: Path) -> None:
    plan = make_plan("m", [Sample("s1", str(miseq[0]))], out_prefix=str(tmp_path), shards=3)
    for i in (0, 2):
        worker.process_child(plan, i)
    with pytest.raises(SeqlakeError, match=r"child 1 .*no manifest"):
        merge.merge_run(plan)
    assert not Path(plan.layout.partition("qc_summary")).exists(), "nothing is written before all children check"
    # a manifest whose aggregates disagree with themselves fails too
    worker.process_child(plan, 1)
    manifest = Path(plan.layout.manifest(2))
    m = json.loads(manifest.read_text())
    m["shards"][0]["qc"]["1/raw"]["reads"] += 1
    manifest.write_text(json.dumps(m))
    with pytest.raises(SeqlakeError, match=r"child 2 .*QC aggregates disagree"):
        merge.merge_run(plan)


def test_rerun_overwrites_only_its_own_parts(miseq: tuple[Path, Path], tmp_path: Path) -> None:
    plan = make_plan("rr", [Sample("s1", str(miseq[0]))], out_prefix=str(tmp_path), shards=2)
    first = [worker.process_child(plan, i) for i in range(2)]
    other = sorted(Path(plan.layout.child_prefix(0)).iterdir())
    before = {p: os.stat(p).st_mtime_ns for p in other}
    Path(plan.layout.manifest(1)).unlink()  # as if the first attempt died before its manifest
    again = worker.process_child(plan, 1)
    assert again.to_json().replace(b'"seconds":' + str(again.seconds).encode(), b"") == first[1].to_json().replace(
        b'"seconds":' + str(first[1].seconds).encode(), b"")
    assert {p: os.stat(p).st_mtime_ns for p in other} == before
    assert sorted(p.name for p in Path(plan.layout.child_prefix(1)).iterdir()) == sorted(p.name for p in other)
    # a child whose manifest already holds its work is found done, and not run again
    assert worker.finished_manifest(plan, 1) is not None and worker.finished_manifest(plan, 0) is not None


def test_large_chunks_are_split_into_equal_record_pieces(miseq: tuple[Path, Path]) -> None:
    data = [gzip.decompress(p.read_bytes())[:400_000] for p in miseq]
    n = min(d.count(b"\n") for d in data) // 4
    data = [b"".join(d.splitlines(keepends=True)[: 4 * n]) for d in data]
    chunks = tuple(Chunk(m + 1, d, 10, n) for m, d in enumerate(data))
    pieces = list(worker.split_chunks(chunks, target=50_000))
    assert len(pieces) > 3
    for m in range(2):
        assert b"".join(p[m].data for p in pieces) == data[m]
    firsts = [p[0].first_record for p in pieces]
    assert firsts == [p[1].first_record for p in pieces] and firsts[0] == 10
    assert all(p[0].records == p[1].records == p[0].data.count(b"\n") // 4 for p in pieces)
    assert sum(p[0].records for p in pieces) == n


def _rewrite(path: Path, data: bytes) -> None:
    """Change a file's bytes but not its size or mtime (what the plan checks), as silent corruption would."""
    st = path.stat()
    path.write_bytes(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _fastq(names: list[str], seq: str = "ACGTACGTAC", qual: str = "IIIIIIIIII") -> bytes:
    return "".join(f"@{n}\n{seq}\n+\n{qual}\n" for n in names).encode()


def test_worker_rejects_bad_input_found_after_planning(tmp_path: Path) -> None:
    """Defects the planner's sample did not see fail the shard with the file's absolute line."""
    r1, r2 = tmp_path / "x_R1.fastq", tmp_path / "x_R2.fastq"
    names = [f"read{i}" for i in range(40)]
    r1.write_bytes(_fastq([f"{n}/1" for n in names]))
    r2.write_bytes(_fastq([f"{n}/2" for n in names]))
    plan = make_plan("bad", [Sample("x", str(r1), str(r2))], out_prefix=str(tmp_path / "out"), shards=2)
    # same sizes, so the plan still fits: a mate name that differs (record 33) and a quality byte
    # below '!' (record 25, a space)
    _rewrite(r2, r2.read_bytes().replace(b"@read33/2", b"@reaX33/2"))
    lines = r1.read_bytes().split(b"\n")
    lines[4 * 25 + 3] = b"IIII IIIII"
    _rewrite(r1, b"\n".join(lines))
    with pytest.raises(BadInputError) as err:
        worker.process_child(plan, 1)
    assert (err.value.path, err.value.line) == (str(r1), 4 * 25 + 4)
    _rewrite(r1, _fastq([f"{n}/1" for n in names]))
    with pytest.raises(BadInputError) as err:
        worker.process_child(plan, 1)
    assert (err.value.path, err.value.line, err.value.record) == (str(r2), 4 * 33 + 1, 33)
    assert "reaX33/2" in err.value.message


def test_byte_range_shard_errors_name_the_absolute_line(tmp_path: Path) -> None:
    reads = tmp_path / "reads.fastq"
    reads.write_bytes(_fastq([f"r{i}" for i in range(300)]))
    plan = make_plan(
        "br", [Sample("s", str(reads))], out_prefix=str(tmp_path / "o"), shards=3, count_plain_below=0
    )
    assert plan.shards[2].spans[0].first_record is None, "a byte-range shard"
    data = bytearray(reads.read_bytes())
    pos = data.rindex(b"@r290\n")
    qual_line = pos + len(b"@r290\nACGTACGTAC\n+\n")
    data[qual_line] = 0x7F
    _rewrite(reads, bytes(data))
    with pytest.raises(BadInputError) as err:
        worker.process_child(plan, 2)
    assert err.value.line == 4 * 290 + 4


def test_bgzf_byte_range_errors_name_the_absolute_line(tmp_path: Path, bgzip: str) -> None:
    data = bytearray(_fastq([f"r{i}" for i in range(40000)]))  # past the planner's sniff, several BGZF blocks
    pos = data.rindex(b"@r39000\n")
    data[pos + len(b"@r39000\nACGTACGTAC\n+\n")] = 0x7F
    reads = tmp_path / "reads.fastq"
    reads.write_bytes(bytes(data))
    subprocess.run([bgzip, "-f", str(reads)], check=True)
    plan = make_plan("bb", [Sample("s", f"{reads}.gz")], out_prefix=str(tmp_path / "o"), shards=3,
                     count_plain_below=0)
    assert plan.array_size == 3 and plan.inputs[0].index_uri is None
    with pytest.raises(BadInputError) as err:
        worker.process_child(plan, 2)
    assert err.value.line == 4 * 39000 + 4


def test_coverage_equals_samtools_depth_of_the_cli_alignments(
    miseq: tuple[Path, Path], reference: Path, minimap2: str, tmp_path: Path
) -> None:
    """With trimming off, bins equal ``samtools depth -a -J`` (deletions count, as mosdepth --fast-mode)
    over ``minimap2 -ax sr`` alignments."""
    samtools = shutil.which("samtools")
    if samtools is None:
        pytest.skip("samtools is not installed")
    sam = subprocess.run(
        [minimap2, "-ax", "sr", "-t", "1", str(reference), *map(str, miseq)], capture_output=True, check=True
    ).stdout
    bam = tmp_path / "cli.bam"
    subprocess.run([samtools, "sort", "-o", str(bam), "-"], input=sam, check=True, capture_output=True)
    depth = subprocess.run([samtools, "depth", "-a", "-J", str(bam)], capture_output=True, text=True, check=True).stdout
    per_base = np.array([int(line.split("\t")[2]) for line in depth.splitlines()], dtype=np.int64)
    plan = make_plan(
        "cov",
        [Sample("s1", str(miseq[0]), str(miseq[1]))],
        out_prefix=str(tmp_path),
        reference=indexed_reference(str(reference)),
        params=Params(trim=False),
        shards=3,
    )
    run_all(plan)
    cov = result(plan, "coverage")
    width = plan.params.coverage_bin
    assert cov["depth_sum"].to_pylist() == np.add.reduceat(per_base, np.arange(0, len(per_base), width)).tolist()
    covered = np.add.reduceat((per_base > 0).astype(np.int64), np.arange(0, len(per_base), width))
    assert cov["covered_bases"].to_pylist() == covered.tolist()
    trimmed = next(r for r in result(plan, "qc_summary").to_pylist() if r["stage"] == "trimmed")
    assert trimmed["pct_span_breadth"] == 100 * np.count_nonzero(per_base) / len(per_base)
    assert trimmed["mean_span_depth"] == pytest.approx(per_base.sum() / len(per_base))


def test_the_commit_holds_only_the_samples_being_folded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Samples are turned into rows as soon as their last child is read: the folds alive at once stay
    at the few samples of one child, whatever the number of samples, and each sample's rows equal
    those of the sample run alone."""
    import dnaio

    from seqlake.demo_data import paths

    r1, r2, reference = paths()
    samples = []
    with dnaio.open(r1, r2) as reads:
        pairs = [p for _, p in zip(range(1_600), reads, strict=False)]
    for k in range(8):
        a, b = tmp_path / f"s{k}_R1.fastq.gz", tmp_path / f"s{k}_R2.fastq.gz"
        n = 10 if k in (3, 4) else 200  # the tiny samples share a child; the others are cut in two shards
        with dnaio.open(a, b, mode="w") as out:
            for p in pairs[k * 200 : k * 200 + n]:
                out.write(*p)
        samples.append(Sample(f"s{k}", str(a), str(b)))
    alive, most = [0], [0]

    class Counted(merge._SampleFold):  # counts the folds alive at once
        def __init__(self) -> None:
            super().__init__()
            alive[0] += 1
            most[0] = max(most[0], alive[0])

        def __del__(self) -> None:
            alive[0] -= 1

    monkeypatch.setattr(merge, "_SampleFold", Counted)
    params = Params(reads_per_shard=100)
    pinned = indexed_reference(str(reference))
    many = make_plan("many", samples, out_prefix=str(tmp_path / "many"), reference=pinned, params=params)
    assert many.array_size < len(many.shards) < 2 * len(samples)  # packed and cut, both
    totals = run_all(many)
    assert most[0] <= 2 and totals.reads == 2 * (6 * 200 + 2 * 10)
    alone = make_plan("alone", samples[2:3], out_prefix=str(tmp_path / "alone"), reference=pinned,
                      params=params)
    run_all(alone)
    for table in ("qc_summary", "qc_position", "contig_coverage", "coverage"):
        got = result(many, table).filter(pa.compute.equal(result(many, table)["sample"], "s2"))
        assert got.num_rows > 0 and got.equals(result(alone, table)), table



_CHILD_THEN_MODULES = """
import sys
from seqlake.cli import main
assert main(["worker", "--plan", sys.argv[1], "--shard", "0"]) == 0
print(" ".join(m for m in ("pyarrow.compute", "mappy") if m in sys.modules))
"""


def test_a_qc_only_child_loads_no_alignment_library(miseq: tuple[Path, Path], tmp_path: Path) -> None:
    # pyarrow.compute and mappy are imported where an aligning child uses them: a QC-only child skips their cost
    plan = make_plan("q", [Sample("s1", str(miseq[0]))], out_prefix=str(tmp_path), params=Params(trim=False), shards=1)
    out = subprocess.run([sys.executable, "-c", _CHILD_THEN_MODULES, plan.plan_uri], capture_output=True, text=True,
                         check=True)
    assert Path(plan.layout.manifest(0)).exists()
    loaded = set(out.stdout.splitlines()[-1].split())
    assert loaded.isdisjoint({"pyarrow.compute", "mappy"}), loaded


# -- long reads ----------------------------------------------------------------------------------------------


def _long_read_library(path: Path, reference: Path) -> Path:
    """60 Nanopore-like reads of 0.5-20 kb from the reference with 300 short reads of 150 bp around them."""
    ref = read_reference(reference)
    config = simulate_long.LongReadConfig(median_length=3000, max_length=20_000)
    long_reads = list(simulate_long.simulate(ref, 60, seed=3, cfg=config))
    short = gzip.decompress(demo_data.paths()[0].read_bytes()).split(b"\n")[: 4 * 300]
    records = [b"\n".join(short[k : k + 4]) + b"\n" for k in range(0, len(short), 4)]
    path.write_bytes(b"".join(records[:150] + long_reads + records[150:]))
    return path


def _long_read_run(tmp_path: Path, reference: Path, name: str, shards: int) -> Plan:
    reads = tmp_path / "long.fastq"
    if not reads.exists():
        _long_read_library(reads, reference)
    plan = make_plan(name, [Sample("ont", str(reads))], out_prefix=str(tmp_path / name),
                     reference=indexed_reference(str(reference), "map-ont"),
                     params=Params(preset="map-ont", quality_cutoff=7), shards=shards)
    run_all(plan)
    return plan


def test_long_reads_align_where_they_come_from_with_the_long_read_preset(reference: Path, tmp_path: Path) -> None:
    plan = _long_read_run(tmp_path, reference, "ont", shards=2)
    rows = result(plan, "alignments").filter(pc.starts_with(pc.field("read_name"), "long"))
    primary = [r for r in rows.to_pylist() if r["is_primary"]]
    assert len(primary) == 60
    truth = {f"long{i + 1}": t for i, t in enumerate(
        line.split(" ", 1)[1] for line in (tmp_path / "long.fastq").read_text().splitlines()
        if line.startswith("@long"))}
    placed = 0
    for r in primary:
        contig, start, strand = truth[r["read_name"]].rsplit(":", 2)
        placed += r["contig"] == contig and r["strand"] == strand and abs(r["pos"] - int(start)) <= 50
    assert placed >= 58, f"{placed} of 60 long reads aligned where they were simulated from"
    summary = {r["stage"]: r for r in result(plan, "qc_summary").to_pylist()}
    assert summary["raw"]["max_len"] > 10_000 and summary["trimmed"]["mapped_reads"] > 0.95 * 60


def test_qc_tables_are_the_same_in_small_tiles(reference: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               seqkit: str) -> None:
    """Long reads among short ones: every table of a run whose QC cuts the reads into tiny tiles equals the
    run with whole chunks, and the raw QC equals ``seqkit stats -a``."""
    whole = _long_read_run(tmp_path, reference, "whole", shards=1)
    monkeypatch.setattr(lake_qc, "QC_TILE_BYTES", 5000)
    monkeypatch.setattr(lake_qc, "QC_SLAB_CYCLES", 700)
    monkeypatch.setattr(lake_qc, "POSITION_BLOCK", 1024)
    tiled = _long_read_run(tmp_path, reference, "tiled", shards=3)
    assert_same_results(whole, tiled)
    raw = next(r for r in result(whole, "qc_summary").to_pylist() if r["stage"] == "raw")
    out = subprocess.run([seqkit, "stats", "-a", "-T", str(tmp_path / "long.fastq")], capture_output=True,
                         text=True, check=True)
    head, values = out.stdout.splitlines()[:2]
    sk = dict(zip(head.split("\t"), values.split("\t"), strict=True))
    assert (raw["reads"], raw["bases"], raw["min_len"], raw["max_len"], raw["n50"]) == (
        int(sk["num_seqs"]), int(sk["sum_len"]), int(sk["min_len"]), int(sk["max_len"]), int(sk["N50"]))
    for col, name in (("q20_bases", "Q20(%)"), ("q30_bases", "Q30(%)"), ("gc_bases", "GC(%)")):
        assert f"{round(100 * raw[col] / raw['bases'], 2):.2f}" == sk[name]


@pytest.mark.parametrize("failing", ["PartWriter", "alignment_qc"])
def test_a_failure_mid_child_leaves_no_alignment_process(reference: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch, failing: str) -> None:
    """A child of 3 vCPUs forks 2 alignment processes; whatever fails after that (the alignments part cannot be
    made, a batch's alignment QC raises), the error reaches the caller and no alignment process is left."""
    monkeypatch.setenv(THREADS_VAR, "3")
    r1, r2 = demo_data.paths()[:2]
    plan = make_plan("fail", [Sample("s", str(r1), str(r2))], out_prefix=str(tmp_path),
                     reference=indexed_reference(str(reference)), shards=1)
    forked = []
    fork_aligners = align._fork_aligners

    def recorded(aligner: align.ReadAligner) -> Any:
        forked.append(fork_aligners(aligner))
        return forked[-1]

    def injected(*args: object, **kwargs: object) -> Any:
        raise RuntimeError("injected failure")

    monkeypatch.setattr(align, "_fork_aligners", recorded)
    monkeypatch.setattr(worker, failing, injected)
    with pytest.raises(RuntimeError, match="injected failure"):
        worker.process_child(plan, 0)
    assert len(forked) == 1, "the child forked its alignment processes before the failure"
    assert multiprocessing.active_children() == []
