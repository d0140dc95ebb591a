"""The region-keyed reduce: a run cut into many regions gives the tables of the same run in one region."""

from __future__ import annotations

import gzip
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_worker_merge import RUN_NAMED, assert_same_results, result, run_all

from seqlake.base.layout import CONSENSUS_SUFFIX, VCF_SUFFIX
from seqlake.base.model import Sample
from seqlake.base.params import Params
from seqlake.demo_data import paths
from seqlake.demo_data.simulate import write_pairs
from seqlake.lake.tables import THRESHOLDS
from seqlake.lake.vcf import tabix_index
from seqlake.plan.planner import make_plan
from seqlake.plan.refindex import indexed_reference
from seqlake.reduce import reducer as reduce

PRIMER_BED = Path(__file__).resolve().parents[1] / "data" / "nCoV-2019.V3.primer.bed"


@pytest.fixture(autouse=True)
def _ref_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEQLAKE_REF_CACHE", str(tmp_path / "refcache"))


def test_many_regions_give_the_tables_of_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r1, r2, reference = paths()
    single = tmp_path / "other_R1.fastq.gz"  # a second, single-end sample (a file may be listed once)
    shutil.copy(r2, single)
    samples = [Sample("s1", str(r1), str(r2)), Sample("s2", str(single))]
    pinned = indexed_reference(str(reference))
    one = make_plan("one", samples, out_prefix=str(tmp_path / "one"), reference=pinned, shards=3)
    # 1,000-base regions: the 29,903-base genome in 30, cut through depth runs, bins and low-coverage intervals
    many = make_plan("many", samples, out_prefix=str(tmp_path / "many"), reference=pinned, shards=4,
                     params=Params(region_size=1_000))
    assert run_all(one).regions == 1
    # and the reducers fold a sample's pieces as soon as a second one arrives (the big-run path)
    monkeypatch.setattr(reduce, "FOLD_BYTES", 1)
    totals = run_all(many)
    assert totals.regions == 30 and totals.rows["low_coverage"] > 0
    assert_same_results(one, many)


def _samtools_depth(reference: Path, r1: Path, r2: Path, minimap2: str, samtools: str,
                    tmp: Path) -> dict[str, np.ndarray]:
    """Per contig, the per-base depth ``samtools depth -a`` gives over the minimap2 command line's alignments."""
    sam = subprocess.run([minimap2, "-ax", "sr", "-t", "1", str(reference), str(r1), str(r2)], capture_output=True,
                         check=True).stdout
    bam = tmp / "cli.bam"
    subprocess.run([samtools, "sort", "-o", str(bam), "-"], input=sam, check=True, capture_output=True)
    out = subprocess.run([samtools, "depth", "-a", str(bam)], capture_output=True, text=True, check=True).stdout
    depth: dict[str, list[int]] = {}
    for line in out.splitlines():
        contig, _, d = line.split("\t")
        depth.setdefault(contig, []).append(int(d))
    return {c: np.array(d, dtype=np.int64) for c, d in depth.items()}


def _below(depth: np.ndarray, threshold: int) -> list[tuple[int, int]]:
    """Maximal 1-based inclusive intervals with depth below ``threshold``."""
    low = np.concatenate([[False], depth < threshold, [False]])
    edges = np.flatnonzero(low[1:] != low[:-1])
    return [(int(s) + 1, int(e)) for s, e in zip(edges[::2], edges[1::2], strict=True)]


def test_thresholds_and_low_coverage_equal_samtools_depth_across_regions(tmp_path: Path, minimap2: str) -> None:
    """A three-contig genome cut into six 20 kb regions (two contigs cut through, at about 25x so the depth
    crosses every threshold along the genome): ``pct_genome_*`` and every ``low_coverage`` interval equal
    ``samtools depth -a`` over the same reads aligned by the minimap2 command line."""
    samtools = shutil.which("samtools")
    if samtools is None:
        pytest.skip("samtools is not installed")
    rng = np.random.default_rng(7)
    lengths = {"chrA": 60_000, "chrB": 25_000, "chrC": 15_000}
    reference = tmp_path / "ref.fa"
    reference.write_text("".join(f">{name}\n{''.join(rng.choice(list('ACGT'), n))}\n" for name, n in lengths.items()))
    r1, r2 = tmp_path / "s_R1.fastq.gz", tmp_path / "s_R2.fastq.gz"
    write_pairs(reference, r1, r2, 8_000, seed=11)
    plan = make_plan("sim", [Sample("s", str(r1), str(r2))], out_prefix=str(tmp_path / "lake"),
                     reference=indexed_reference(str(reference)), params=Params(trim=False, region_size=20_000),
                     shards=3)
    totals = run_all(plan)
    assert totals.regions == 6
    depth = _samtools_depth(reference, r1, r2, minimap2, samtools, tmp_path)
    assert {c: len(d) for c, d in depth.items()} == lengths
    genome = sum(lengths.values())
    (summary,) = pq.read_table(plan.layout.partition("sample_summary")).to_pylist()
    for t in THRESHOLDS:
        at = sum(int((d >= t).sum()) for d in depth.values())
        assert summary[f"pct_genome_{t}x"] == 100 * at / genome, t
    low = pq.read_table(plan.layout.partition("low_coverage")).to_pylist()
    got = sorted((r["contig"], r["threshold"], r["pos"], r["end_pos"]) for r in low)
    want = sorted((c, t, s, e) for c, d in depth.items() for t in THRESHOLDS for s, e in _below(d, t))
    assert got == want
    # intervals of every threshold, and some run through a region's edge inside a contig (the commit joined
    # the two reducers' pieces)
    assert {t for _, t, _, _ in got} == set(THRESHOLDS)
    edges = {"chrA": (20_000, 40_000), "chrB": (20_000,)}
    assert any(s <= edge < e for c, _, s, e in got for edge in edges.get(c, ()))


def _mutated_reads(reference: Path, tmp: Path) -> tuple[Path, Path]:
    """Pairs from a copy of the reference with an SNV every 700 bases, a deletion of 8 bases across the edge of
    the 1,000-base regions at 10,000 and an insertion after the last base of a region."""
    name, seq = reference.read_text().split("\n", 1)
    bases = list(seq.replace("\n", ""))
    for p in range(350, len(bases), 700):
        bases[p] = "A" if bases[p] != "A" else "C"
    bases[20_999] += "TTAC"
    del bases[9_997:10_005]
    mutated = tmp / "mutated.fa"
    mutated.write_text(f"{name}\n{''.join(bases)}\n")
    r1, r2 = tmp / "m_R1.fastq.gz", tmp / "m_R2.fastq.gz"
    write_pairs(mutated, r1, r2, 3_000, seed=3)
    return r1, r2


def test_variants_consensus_amplicons_and_files_of_many_regions_equal_one(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Amplicon mode cut into 1,000-base regions (ARTIC's ~400-base inserts cross 29 region edges): the
    ``variants``, ``consensus`` and ``amplicon_depth`` tables, the consensus FASTA and the VCF's records of
    the run in one region, and tabix finds the joined VCF's records across the regions' edges."""
    _, _, reference = paths()
    r1, r2 = _mutated_reads(reference, tmp_path)
    samples = [Sample("s1", str(r1), str(r2))]
    pinned = indexed_reference(str(reference))
    params = {"primer_bed": str(PRIMER_BED)}
    one = make_plan("one", samples, out_prefix=str(tmp_path / "one"), reference=pinned, params=Params(**params))
    many = make_plan("many", samples, out_prefix=str(tmp_path / "many"), reference=pinned, shards=3,
                     params=Params(region_size=1_000, **params))
    run_all(one)
    monkeypatch.setattr(reduce, "FOLD_BYTES", 1)
    assert run_all(many).regions == 30
    for table in ("variants", "consensus", "amplicon_depth"):
        drop = RUN_NAMED.get(table, ())
        a, b = result(one, table, drop), result(many, table, drop)
        assert a.num_rows > 0 and a.equals(b), table
    assert len(result(one, "amplicon_depth")) == 98 + 1
    fasta = [Path(p.layout.sample_file("s1", CONSENSUS_SUFFIX)).read_bytes() for p in (one, many)]
    assert fasta[0] == fasta[1] and fasta[0].startswith(b">s1 MN908947.3 ")
    vcf = [Path(p.layout.sample_file("s1", VCF_SUFFIX)) for p in (one, many)]
    text = [gzip.decompress(v.read_bytes()).decode() for v in vcf]
    assert text[0] == text[1]
    # the index joined from the regions' pieces is the one made of the whole joined file
    assert Path(f"{vcf[1]}.tbi").read_bytes() == tabix_index(vcf[1].read_bytes(), ["MN908947.3"])
    records = [ln for ln in text[0].splitlines() if not ln.startswith("#")]
    assert len({int(ln.split("\t")[1]) // 1_000 for ln in records}) >= 20  # records in many regions
    # the deletion's reference allele runs past its region's end (the reducer read the bases it needed)
    assert any(int(f[1]) <= 10_000 < int(f[1]) + len(f[3]) - 1 for f in (ln.split("\t") for ln in records))
    tabix = shutil.which("tabix")
    if tabix is None:
        pytest.skip("tabix is not installed (make tools)")
    for region in ("MN908947.3:900-4100", "MN908947.3:1-29903", "MN908947.3:15000-15001"):
        start, stop = (int(x) for x in region.split(":")[1].split("-"))
        want = [ln for ln in records if start <= int(ln.split("\t")[1]) <= stop]
        for v in vcf:
            got = subprocess.run([tabix, str(v), region], capture_output=True, text=True, check=True).stdout
            assert got.splitlines() == want, (v, region)


def test_a_regions_rows_are_cut_by_piece_reading_the_codes_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A region of many small contigs (the 1.5 Gb genome's 3,342 decoys share one) has its rows cut by piece
    with the contig codes read once per table, not once per piece (its reducer read the whole table 6,684
    times), each piece's rows in their order, whether or not the table is in code order."""
    import pyarrow as pa

    from seqlake.lake.positions import dictionary_column
    from seqlake.reduce import calls as regioncalls

    pieces = 50
    codes = np.random.default_rng(1).integers(0, pieces, 2000).astype(np.int32)
    codes[codes == 7] = 8  # a piece without rows
    pos = np.arange(len(codes))
    read: list[int] = []
    real = regioncalls.contig_codes

    def counted(table: pa.Table) -> np.ndarray:
        read.append(table.num_rows)
        return real(table)

    monkeypatch.setattr(regioncalls, "contig_codes", counted)
    names = [f"decoy{i}" for i in range(pieces)]
    for order in (pos, np.argsort(codes, kind="stable")):  # rows as they come, and in code order
        table = pa.table({"contig": dictionary_column(codes[order], names), "pos": pos[order]})
        read.clear()
        cut = regioncalls.rows_by_piece(table, pieces)
        assert read == [len(codes)]
        assert [t.column("pos").to_pylist() for t in cut] == [pos[codes == k].tolist() for k in range(pieces)]
    assert regioncalls.rows_by_piece(table.slice(0, 0), 3) == [table.slice(0, 0)] * 3


def test_a_region_reduced_in_windows_gives_the_tables_and_files_of_one_window(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The virus in one region, reduced in 1,000-base windows (30 of them; ARTIC's inserts, low-coverage
    intervals and a deletion cross their edges): every result table, the consensus FASTA, the VCF and its
    index are those of the region reduced in one window, what crosses a window's edge joined by the reducer
    itself (nothing left to the commit: the region is the whole genome), and no merged table holds more than
    a window of positions."""
    from seqlake.base import params as params_module

    _, _, reference = paths()
    r1, r2 = _mutated_reads(reference, tmp_path)
    samples = [Sample("s1", str(r1), str(r2))]
    pinned = indexed_reference(str(reference))
    params = Params(primer_bed=str(PRIMER_BED))
    one = make_plan("one", samples, out_prefix=str(tmp_path / "one"), reference=pinned, params=params, shards=2)
    many = make_plan("many", samples, out_prefix=str(tmp_path / "many"), reference=pinned, params=params, shards=2)
    held: list[int] = []
    real = reduce.window_allele_tables

    def measured(*args: Any, **kwargs: Any) -> dict[str, pa.Table]:  # the alleles a reducer counts at a time
        out = real(*args, **kwargs)
        held.append(len(np.unique(out["alleles"].column("pos").to_numpy())))
        return out

    monkeypatch.setattr(reduce, "window_allele_tables", measured)
    assert run_all(one).regions == 1
    whole = max(held)
    held.clear()
    monkeypatch.setattr(params_module, "REDUCE_WINDOW", 1_000)
    assert run_all(many).regions == 1
    assert whole > 25_000 and 900 < max(held) <= 1_000
    assert_same_results(one, many)
    summary = reduce.finished_summary(many, 0)
    assert summary is not None and not summary.samples["s1"].low_edges and not summary.samples["s1"].amplicon_edges
    low = result(many, "low_coverage").to_pylist()
    assert any(r["pos"] - 1 < edge < r["end_pos"] for r in low for edge in range(1_000, 29_000, 1_000))
    for suffix in (CONSENSUS_SUFFIX, VCF_SUFFIX, VCF_SUFFIX + ".tbi"):
        a, b = (Path(p.layout.sample_file("s1", suffix)).read_bytes() for p in (one, many))
        assert a == b, suffix
