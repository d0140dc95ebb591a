"""Alignment rows match ``minimap2 -ax sr``; coverage is exact."""

from __future__ import annotations

import collections
import ctypes
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from seqlake.child import align
from seqlake.lake import coverage
from seqlake.lake.tables import BY_NAME
from seqlake.plan.reference import local_index
from seqlake.plan.refindex import indexed_reference
from seqlake.reads import chunks, fastq

Key = tuple[str, int]


@pytest.fixture
def ref_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "refcache"
    monkeypatch.setenv("SEQLAKE_REF_CACHE", str(cache))
    return cache


def _index(reference: Path) -> str:
    """The reference's minimap2 index, built once in the test's reference cache (as the planner does)."""
    return local_index(indexed_reference(str(reference)))


def _align_miseq(
    miseq: tuple[Path, Path], index: str, threads: int = 1
) -> tuple[align.AlignmentColumns, list[align.AlignStats]]:
    aligner = align.ReadAligner(index, threads=threads)
    out = align.AlignmentColumns()
    stats = [align.AlignStats(), align.AlignStats()]
    spans: list[tuple[str, int, int]] = []
    first = 0
    for c1, c2 in zip(fastq.iter_file_chunks(str(miseq[0])), fastq.iter_file_chunks(str(miseq[1])), strict=True):
        r1, r2 = chunks.parse_chunk(c1, "R1", first), chunks.parse_chunk(c2, "R2", first)
        aligner.align_pairs(
            r1.names(),
            r1.sequences(),
            r2.sequences(),
            list(range(first, first + len(r1))),
            out=out,
            stats=(stats[0], stats[1]),
            spans=spans,
        )
        first += len(r1)
    return out, stats


def _cli(minimap2: str, reference: Path, miseq: tuple[Path, Path]) -> list[list[str]]:
    sam = subprocess.run(
        [minimap2, "-ax", "sr", "-t", "1", str(reference), *map(str, miseq)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.split("\t") for line in sam.splitlines() if not line.startswith("@")]


def test_alignments_equal_minimap2_cli(
    miseq: tuple[Path, Path], reference: Path, minimap2: str, ref_cache: Path
) -> None:
    out, stats = _align_miseq(miseq, _index(reference))
    cli_all: dict[Key, set[tuple[str, int, str]]] = collections.defaultdict(set)
    cli_primary: dict[Key, tuple[str, int, str]] = {}
    cli_flags: dict[Key, int] = {}
    mapped_cli = [0, 0]
    for f in _cli(minimap2, reference, miseq):
        flag = int(f[1])
        key = (f[0], 1 if flag & 0x40 else 2)
        assert not flag & 0x100, "the sr preset prints no secondary alignments"
        if not flag & 0x800:
            cli_flags[key] = flag
        if flag & 0x4:
            continue
        hit = (f[2], int(f[3]), "-" if flag & 0x10 else "+")
        cli_all[key].add(hit)
        if not flag & 0x800:
            cli_primary[key] = hit
            mapped_cli[key[1] - 1] += 1
    ours: dict[Key, set[tuple[str, int, str]]] = collections.defaultdict(set)
    our_primary: dict[Key, tuple[str, int, str]] = {}
    our_flags: dict[Key, int] = {}
    for row in zip(*out.as_dict().values(), strict=True):
        r = dict(zip(align.ROW_COLUMNS, row, strict=True))
        key = (r["read_name"], r["mate"])
        if r["is_primary"]:
            our_flags[key] = r["flag"]
        if r["contig"] is None:
            continue
        hit = (r["contig"], r["pos"], r["strand"])
        ours[key].add(hit)
        if r["is_primary"]:
            our_primary[key] = hit
        # soft clips: the CIGAR spans the whole read
        assert sum(int(n) for n, op in re.findall(r"(\d+)([MIS=X])", r["cigar"])) == r["read_len"]
    reads = set(cli_flags) | set(our_flags)
    assert len(reads) == 2 * 5762
    same = sum(cli_all.get(k, set()) == ours.get(k, set()) for k in reads)
    assert same / len(reads) >= 0.999
    assert [s.mapped_reads for s in stats] == mapped_cli
    # the SAM primary and the flags (proper pair, mate strand, ...) as the command line decides them
    primary_differs = sum(cli_primary.get(k) != our_primary.get(k) for k in reads)
    flags_differ = sum(cli_flags.get(k) != our_flags.get(k) for k in reads)
    assert primary_differs <= 0.001 * len(reads)
    assert flags_differ <= 0.001 * len(reads)
    cli_proper = sum(1 for k, f in cli_flags.items() if k[1] == 1 and f & 0x2)
    assert stats[0].properly_paired == sum(1 for k, f in our_flags.items() if k[1] == 1 and f & 0x2)
    assert abs(stats[0].properly_paired - cli_proper) <= flags_differ


def test_single_end_unmapped_and_empty_reads(reference: Path, ref_cache: Path) -> None:
    aligner = align.ReadAligner(_index(reference))
    out = align.AlignmentColumns()
    stats = align.AlignStats()
    spans: list[tuple[str, int, int]] = []
    seq = "ATTAAAGGTTTATACCTTCCCAGGTAACAAACCAACCAACTTTCGATCTCTTGTAGATCTGTTCTCTAAACGAACTTTAAAATCTGTG"
    aligner.align_single(["hit", "none", "empty"], [seq, "ACGT" * 20, ""], [0, 1, 2], out=out, stats=stats, spans=spans)
    cols = out.as_dict()
    assert cols["flag"] == [0, 4, 4]
    assert cols["contig"] == ["MN908947.3", None, None]
    assert cols["pos"][0] == 1 and cols["end_pos"][0] == len(seq) and cols["cigar"][0] == f"{len(seq)}M"
    assert stats.mapped_reads == 1 and spans == [("MN908947.3", 0, len(seq))]


def test_threads_give_the_same_rows_in_the_same_order(
    miseq: tuple[Path, Path], reference: Path, ref_cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    index = _index(reference)
    ran_in = tmp_path / "pids"
    pairs = align.ReadAligner._pairs

    def recorded(self: align.ReadAligner, *args: object) -> None:
        with ran_in.open("a") as log:  # the alignment processes are forked: they log to a file
            log.write(f"{os.getpid()}\n")
        pairs(self, *args)  # type: ignore[arg-type]

    one, stats_one = _align_miseq(miseq, index)
    monkeypatch.setattr(align.ReadAligner, "_pairs", recorded)
    three, stats_three = _align_miseq(miseq, index, threads=3)
    pids = set(ran_in.read_text().split())
    assert len(pids - {str(os.getpid())}) == 2, "aligned in two forked processes (and here, parts taken back)"
    assert len(one) > 2 * 5762
    assert three.values == one.values
    assert stats_three == stats_one
    # single-end reads, including an empty one, cut into parts the same way
    c1 = next(fastq.iter_file_chunks(str(miseq[0])))
    recs = chunks.parse_chunk(c1, "R1", 0)
    seqs = [*recs.sequences()[:-1], ""]
    outs = []
    for threads in (1, 4):
        aligner = align.ReadAligner(index, threads=threads)
        out, st = align.AlignmentColumns(), align.AlignStats()
        spans: list[tuple[str, int, int]] = []
        aligner.align_single(recs.names(), seqs, range(len(recs)), out=out, stats=st, spans=spans)
        outs.append((out.values, st, spans))
    assert outs[0] == outs[1]
    assert outs[0][1].mapped_reads > 0.9 * len(recs)
    # submitted calls (aligned behind the caller) give the same rows, as Arrow, and counts, in the order
    # submitted
    expected = align.AlignmentColumns()
    expected.values.extend(outs[0][0])
    schema = BY_NAME["alignments"].schema
    for threads in (1, 2):
        aligner = align.ReadAligner(index, threads=threads)
        half = len(recs) // 2
        pending = [aligner.submit_single(recs.names()[a:b], seqs[a:b], range(a, b), "s1")
                   for a, b in ((0, half), (half, len(recs)))]
        batches = [p.result() for p in pending]
        aligner.close()
        assert pa.concat_tables([b.rows for b in batches]).equals(expected.to_arrow("s1", schema))
        assert sum(b.stats[0].mapped_reads for b in batches) == outs[0][1].mapped_reads


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def _malloc_in_use() -> int:
    """Bytes the C heap has handed out and not had back (glibc ``mallinfo2``: every arena, mmapped blocks)."""
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "mallinfo2"):
        pytest.skip("not glibc >= 2.33: no mallinfo2 to count the C heap")
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return int(info.uordblks + info.hblkhd)


def test_aligning_pairs_keeps_no_memory_per_pair(reference: Path, ref_cache: Path) -> None:
    """mappy's paired-end map leaked its copy of mate 2 (~240 bytes a 2x220 bp pair: a worker's memory grew
    with its shard); the build scripts/install_mappy.py installs frees it. The C heap after aligning 20,000
    pairs is what it was after the first 1,000 (give or take a few bytes a pair for Python's own lists)."""
    aligner = align.ReadAligner(_index(reference))
    genome = "".join(line.strip() for line in reference.read_text().splitlines()[1:])
    rng = np.random.default_rng(5)
    comp = str.maketrans("ACGT", "TGCA")
    starts = rng.integers(0, len(genome) - 500, 1000).tolist()
    mate1 = [genome[s : s + 150] for s in starts]
    mate2 = [genome[s + 300 : s + 450].translate(comp)[::-1] for s in starts]
    names = [f"r{i}" for i in range(len(starts))]

    def align_all() -> int:
        out, stats = align.AlignmentColumns(), (align.AlignStats(), align.AlignStats())
        aligner.align_pairs(names, mate1, mate2, range(len(names)), out=out, stats=stats)
        return stats[0].properly_paired

    assert align_all() > 990, "the pairs map as proper pairs: every step of the paired path runs"
    before = _malloc_in_use()
    for _ in range(20):
        align_all()
    grown = _malloc_in_use() - before
    assert grown < 20_000 * 16, f"the C heap grew by {grown} bytes over 20,000 pairs"


# -- coverage ---------------------------------------------------------------------------------------


def _brute_depth(length: int, spans: np.ndarray) -> np.ndarray:
    depth = np.zeros(length, dtype=np.int64)
    for s, e in spans:  # test oracle: a per-base loop over a small contig
        depth[s:e] += 1
    return depth


def test_coverage_bins_are_exact_and_additive_across_shards() -> None:
    rng = np.random.default_rng(3)
    length, width = 10_007, 100
    starts = rng.integers(0, length - 1, 400)
    spans = np.stack([starts, np.minimum(starts + rng.integers(1, 300, 400), length)], axis=1)
    depth = _brute_depth(length, spans)
    whole = coverage.CoverageAccumulator([("c", length)], width)
    whole.add_spans(("c", int(s), int(e)) for s, e in spans)
    edges = coverage.bin_edges(length, width)
    expect_sum = np.add.reduceat(depth, edges[:-1])
    expect_cov = np.add.reduceat((depth > 0).astype(np.int64), edges[:-1])
    cols = whole.rows("s")
    assert cols["depth_sum"] == expect_sum.tolist()
    assert cols["covered_bases"] == expect_cov.tolist()
    assert cols["bin_end"][-1] == length
    # three shards merged as the commit step does: depth adds up, covered intervals are unioned
    merged = coverage.CoverageAccumulator([("c", length)], width)
    for part in np.array_split(spans, 3):
        shard = coverage.CoverageAccumulator([("c", length)], width)
        shard.add_spans(("c", int(s), int(e)) for s, e in part)
        cc = merged.contigs["c"]
        cc.depth_sum += shard.contigs["c"].depth_sum
        cc.add_union(shard.contigs["c"].union_start, shard.contigs["c"].union_end)
    assert merged.rows("s") == cols
    mean, breadth = merged.mean_depth_and_breadth()
    assert mean == pytest.approx(depth.sum() / length)
    assert breadth == pytest.approx(np.count_nonzero(depth) / length)


def test_align_files_counts_mapped_reads(miseq: tuple[Path, Path], reference: Path, ref_cache: Path) -> None:
    paired = align.align_files(str(miseq[0]), str(miseq[1]), str(reference))
    single = align.align_files(str(miseq[0]), None, str(reference))
    assert [s.mapped_reads for s in paired] == [5745, 5673]  # = minimap2 -ax sr (test above)
    assert single[0].mapped_reads > 0.99 * 5762 and single[1].mapped_reads == 0
